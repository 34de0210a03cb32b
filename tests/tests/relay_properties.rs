//! Property tests over the Sim: arbitrary relay behaviour and application operations, with
//! every invariant of the session checked after every step (see `tether_testkit::invariants`),
//! and determinism: the same seed and inputs give the same transcript.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::nostr::{Priority, RelayConfig, SubscriptionId};
use tether_testkit::{Action, LimitStyle, RelayModel, ReqBudget, Sim, StoredEvent};

#[derive(Clone, Debug)]
enum Op {
    Subscribe(i32),
    Unsubscribe(u64),
    Publish(u64),
    Connect,
    Disconnect,
    Drop,
    Down,
    Up,
    Frame(String),
    Store(u64),
}

fn refusal() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("rate-limited: slow down".to_owned()),
        (0u64..400).prop_map(|s| format!("rate-limited: retry in {s}s")),
        Just("error: too many subscriptions".to_owned()),
        Just("auth-required: sign in".to_owned()),
        Just("error: internal".to_owned()),
        Just("blocked: no".to_owned()),
        Just("".to_owned()),
        Just("Subscription error: Maximum concurrent subscription count reached".to_owned()),
    ]
}

fn frame() -> impl Strategy<Value = String> {
    let wire = (0u64..8, 0u32..4).prop_map(|(id, a)| format!("{id:x}:{a:x}"));
    prop_oneof![
        (wire.clone(), refusal()).prop_map(|(w, m)| format!(r#"["CLOSED","{w}","{m}"]"#)),
        wire.clone().prop_map(|w| format!(r#"["EOSE","{w}"]"#)),
        (wire, 0u64..5).prop_map(|(w, n)| format!(
            r#"["EVENT","{w}",{}]"#,
            StoredEvent::new(n, 1_000_000 + n, 1).json
        )),
        refusal().prop_map(|m| format!(r#"["NOTICE","{m}"]"#)),
        Just(r#"["AUTH","again"]"#.to_owned()),
        (0u64..5, any::<bool>(), refusal())
            .prop_map(|(n, ok, m)| format!(r#"["OK","{n:064x}",{ok},"{m}"]"#)),
        "[\\[\\]{}\",:a-z0-9 ]{0,24}",
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (-2i32..3).prop_map(Op::Subscribe),
        1 => (0u64..10).prop_map(Op::Unsubscribe),
        1 => (0u64..5).prop_map(Op::Publish),
        1 => Just(Op::Connect),
        1 => Just(Op::Disconnect),
        1 => Just(Op::Drop),
        1 => Just(Op::Down),
        1 => Just(Op::Up),
        3 => frame().prop_map(Op::Frame),
        1 => (100u64..110).prop_map(Op::Store),
    ]
}

#[derive(Clone, Debug)]
struct World {
    budget: Option<(usize, u64, bool)>,
    max_subs: Option<(usize, bool)>,
    auth: bool,
    scripted: Vec<String>,
    refuse_all: Option<String>,
    latency_ms: u64,
    max_subscriptions: Option<usize>,
}

fn world() -> impl Strategy<Value = World> {
    (
        proptest::option::of((1usize..6, 1u64..20, any::<bool>())),
        proptest::option::of((1usize..6, any::<bool>())),
        any::<bool>(),
        proptest::collection::vec(refusal(), 0..8),
        proptest::option::weighted(0.2, refusal()),
        0u64..200,
        proptest::option::of(1usize..6),
    )
        .prop_map(
            |(budget, max_subs, auth, scripted, refuse_all, latency_ms, max_subscriptions)| World {
                budget,
                max_subs,
                auth,
                scripted,
                refuse_all,
                latency_ms,
                max_subscriptions,
            },
        )
}

fn run(world: &World, ops: &[(u64, Op)], seed: u64) -> String {
    let mut relay = RelayModel::with_events(3);
    relay.budget = world.budget.map(|(max, w, hint)| ReqBudget {
        max,
        window: Duration::from_secs(w),
        hint,
    });
    relay.max_subs = world.max_subs.map(|(m, notice)| {
        (
            m,
            if notice {
                LimitStyle::Notice
            } else {
                LimitStyle::Closed
            },
        )
    });
    relay.auth_required = world.auth;
    relay.scripted_closed = world.scripted.iter().cloned().collect();
    relay.refuse_all = world.refuse_all.clone();
    let config = {
        let mut config = RelayConfig::default();
        config.max_subscriptions = world.max_subscriptions;
        config
    };
    let mut sim = Sim::new(config, seed, relay);
    sim.latency = Duration::from_millis(world.latency_ms);
    let mut t = 0;
    for (step, op) in ops {
        t += step;
        let action = match op {
            Op::Subscribe(p) => Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority(*p)),
            Op::Unsubscribe(i) => Action::Unsubscribe(SubscriptionId(*i)),
            Op::Publish(n) => Action::Publish(StoredEvent::new(*n, 1_700_000_000, 1).json),
            Op::Connect => Action::Connect,
            Op::Disconnect => Action::Disconnect,
            Op::Drop => Action::DropSocket,
            Op::Down => Action::RelayDown,
            Op::Up => Action::RelayUp,
            Op::Frame(f) => Action::RelayFrame(f.clone()),
            Op::Store(n) => Action::Store(StoredEvent::new(*n, 1_000_000 + n, 1)),
        };
        sim.at(Duration::from_millis(t), action);
    }
    // Let every retry, window and reconnect play out.
    sim.run_for(Duration::from_millis(t) + Duration::from_secs(900));
    sim.transcript().to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_arbitrary_relays_and_operations(
        world in world(),
        ops in proptest::collection::vec((0u64..5_000, op()), 1..40),
        seed: u64,
    ) {
        run(&world, &ops, seed);
    }

    #[test]
    fn same_seed_and_inputs_give_the_same_transcript(
        world in world(),
        ops in proptest::collection::vec((0u64..5_000, op()), 1..25),
        seed: u64,
    ) {
        prop_assert_eq!(run(&world, &ops, seed), run(&world, &ops, seed));
    }
}

#[test]
fn a_relay_that_refuses_everything_cannot_make_the_session_loop() {
    let world = World {
        budget: None,
        max_subs: None,
        auth: false,
        scripted: Vec::new(),
        refuse_all: Some("error: internal".into()),
        latency_ms: 10,
        max_subscriptions: None,
    };
    let t = run(
        &world,
        &[
            (0, Op::Connect),
            (100, Op::Subscribe(0)),
            (100, Op::Subscribe(1)),
        ],
        3,
    );
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
    sim.latency = Duration::ZERO;
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
    assert_eq!(reqs, [0, 9], "each socket replays at once");
}
