//! The scenario suite on tether-tokio (paused tokio clock).
tether_scenarios::suite!(tether_scenarios::harness::Tokio);
