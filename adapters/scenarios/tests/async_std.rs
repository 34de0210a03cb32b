//! The scenario suite on tether-async-std under async-std (real time).
tether_scenarios::suite!(tether_scenarios::harness::AsyncStd);
tether_scenarios::peer_suite!(tether_scenarios::harness::AsyncStd);
