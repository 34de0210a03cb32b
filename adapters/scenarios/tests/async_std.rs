//! The scenario suite on tether-async-std under async-std (real time); the scenarios with
//! peers in other processes are in `peers.rs`.
tether_scenarios::suite!(tether_scenarios::harness::AsyncStd);
