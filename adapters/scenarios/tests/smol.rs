//! The scenario suite on tether-async-std under smol (real time); the scenarios with peers in
//! other processes are in `peers.rs`.
tether_scenarios::suite!(tether_scenarios::harness::Smol);
