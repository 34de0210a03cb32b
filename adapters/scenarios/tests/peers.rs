//! The scenarios with peers in other processes (tinyproxy, nginx, openssl) on every runtime in
//! real time, on tether-testkit's `trials` harness (`harness = false`): a scenario whose peer is
//! missing is reported as ignored with the reason, or fails when `TETHER_REQUIRE_PEERS=1`.

fn main() -> std::process::ExitCode {
    let mut trials =
        tether_scenarios::peer_suite!(tether_scenarios::harness::TokioRealTime, "tokio");
    trials.extend(tether_scenarios::peer_suite!(
        tether_scenarios::harness::AsyncStd,
        "async_std"
    ));
    trials.extend(tether_scenarios::peer_suite!(
        tether_scenarios::harness::Smol,
        "smol"
    ));
    tether_testkit::trials::run(trials)
}
