//! The scenario suite on tether-async-std under smol (real time).
tether_scenarios::suite!(tether_scenarios::harness::Smol);
tether_scenarios::peer_suite!(tether_scenarios::harness::Smol);
