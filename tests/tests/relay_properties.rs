//! Property tests over the Sim: arbitrary relay behaviour and application operations, with
//! every invariant of the session checked after every step (see `tether_testkit::invariants`),
//! and determinism: the same seed and inputs give the same transcript.
//!
//! The scenarios come from the same generator as the `relay_session` fuzz target
//! ([`RelayScript::decode`]), fed with proptest's bytes: one grammar of worlds, operations,
//! frames and refusals for both.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::nostr::{Priority, RelayConfig};
use tether_testkit::fuzz::RelayScript;
use tether_testkit::{Action, RelayModel, Sim};

/// A scenario decoded from proptest's bytes (bytes too short for a world are skipped).
fn script() -> impl Strategy<Value = RelayScript> {
    proptest::collection::vec(any::<u8>(), 16..3_000)
        .prop_filter_map("too short for a world", |bytes| {
            RelayScript::decode(&bytes).ok()
        })
}

/// Run `script` with the full transcript and the invariants' whole sweep after every step,
/// then 900 s more, so every retry, window and reconnect plays out.
fn run(script: &RelayScript) -> String {
    let mut sim = script.sim();
    sim.run_for(script.end() + Duration::from_secs(900));
    sim.check_all();
    sim.transcript().to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_arbitrary_relays_and_operations(script in script()) {
        run(&script);
    }

    #[test]
    fn same_seed_and_inputs_give_the_same_transcript(script in script()) {
        prop_assert_eq!(run(&script), run(&script));
    }
}

#[test]
fn a_relay_that_refuses_everything_cannot_make_the_session_loop() {
    let mut relay = RelayModel::with_events(3);
    relay.refuse_all = Some("error: internal".into());
    let mut sim = Sim::new(RelayConfig::default(), 3, relay);
    let kinds = || vec![r#"{"kinds":[1]}"#.to_owned()];
    sim.at(Duration::ZERO, Action::Connect)
        .at(
            Duration::from_millis(100),
            Action::Subscribe(kinds(), Priority(0)),
        )
        .at(
            Duration::from_millis(200),
            Action::Subscribe(kinds(), Priority(1)),
        );
    sim.run_for(Duration::from_secs(900));
    let t = sim.transcript();
    assert_eq!(t.matches("tx  [\"REQ\"").count(), 12, "1 + 5 retries each");
    assert_eq!(t.matches("Closed {").count(), 2);
}
/// Found by the `relay_session` fuzz target (`fuzz/corpus/relay_session/
/// regression-replay-pacing-per-socket`): replay batches are paced within one socket's
/// replay, and a new socket's replay starts at once (`Scheduler::on_open`). A reconnect 9 ms
/// after the previous socket's replay is not a pacing violation.
#[test]
fn replay_pacing_restarts_with_each_socket() {
    let mut sim = Sim::new(RelayConfig::default(), 1, RelayModel::with_events(0));
    sim.set_latency(Duration::ZERO);
    let kinds = || vec![r#"{"kinds":[1]}"#.to_owned()];
    // Subscribed before the socket opens: its REQ is the open's replay, a background batch.
    sim.at(Duration::ZERO, Action::Connect)
        .at(Duration::ZERO, Action::Subscribe(kinds(), Priority(0)))
        .at(Duration::from_millis(9), Action::Disconnect)
        .at(Duration::from_millis(9), Action::Connect);
    sim.run_for(Duration::from_secs(1));
    let reqs: Vec<u128> = sim
        .reqs()
        .map(|(at, _)| (at - tether_core::Instant::ZERO).as_millis())
        .collect();
    // The second socket's REQ opens a catch-up (the subscription had been live): with no
    // latency its NEG-OPEN, the NOTICE refusing it, and the REQ re-sent with the `since`
    // window all fall at 9 ms, within the pacing's budget of 8 sends per 50 ms.
    assert_eq!(reqs, [0, 9, 9], "each socket replays at once");
}
