//! The scenario suite on tether-tokio (paused tokio clock); the scenarios with peers in other
//! processes, on a tokio runtime in real time, are in `peers.rs`.
tether_scenarios::suite!(tether_scenarios::harness::Tokio);
