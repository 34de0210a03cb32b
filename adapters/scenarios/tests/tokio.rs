//! The scenario suite on tether-tokio (paused tokio clock), and the scenarios with peers in
//! other processes on a tokio runtime in real time.
tether_scenarios::suite!(tether_scenarios::harness::Tokio);

mod real_time {
    tether_scenarios::peer_suite!(tether_scenarios::harness::TokioRealTime);
}
