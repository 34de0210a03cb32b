//! Property tests of the relay pool over arbitrary relays and operations: each id at most
//! once per subscription, exactly one outcome per subscription, `Ended` at most once and
//! only when no relay serves (PoolSim checks these after every step, and every relay
//! session's own bookkeeping), and the same seed gives the same transcript. A restart (the
//! pool killed and restored from its checkpoint while its relays go on) is one of the
//! operations, and so are the app's lifecycle signals (suspended and resumed, a network
//! change, offline and back, a socket that dies unannounced): all of this holds across them.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::pool::{PoolConfig, PoolEvent, RelayId, SubId};
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::{RelayModel, StoredEvent};

#[derive(Clone, Debug)]
enum Behaviour {
    Honest,
    Refuses(&'static str),
    Down,
    Mute,
    Flaps,
    Silent,
}

#[derive(Clone, Debug)]
enum Op {
    Subscribe,
    Routed(u8),
    Unsubscribe(u8),
    Store(u8, u64),
    Drop(u8),
    AddRelay,
    RemoveRelay(u8),
    Publish(u64),
    Forge(u8, u64),
    /// The process is killed and restored from its checkpoint this many ms later.
    Restart(u64),
    /// The app is suspended and resumed this many ms later.
    Away(u64),
    /// A relay's connection dies without a close reaching the pool (a zombie socket).
    Vanish(u8),
    /// The network path changed (`true`: the old one is gone).
    NetworkChanged(bool),
    /// The device loses the network and has it back this many ms later.
    Offline(u64),
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        3 => Just(Behaviour::Honest),
        1 => prop_oneof![
            Just("blocked: no"),
            Just("rate-limited: retry in 2s"),
            Just("error: too many subscriptions"),
            Just("auth-required: sign in"),
            Just("error: internal"),
        ]
        .prop_map(Behaviour::Refuses),
        1 => Just(Behaviour::Down),
        1 => Just(Behaviour::Mute),
        1 => Just(Behaviour::Flaps),
        1 => Just(Behaviour::Silent),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Subscribe),
        1 => any::<u8>().prop_map(Op::Routed),
        1 => any::<u8>().prop_map(Op::Unsubscribe),
        3 => (any::<u8>(), 1u64..30).prop_map(|(r, n)| Op::Store(r, n)),
        1 => any::<u8>().prop_map(Op::Drop),
        1 => Just(Op::AddRelay),
        1 => any::<u8>().prop_map(Op::RemoveRelay),
        1 => (1u64..5).prop_map(Op::Publish),
        1 => (any::<u8>(), 1u64..30).prop_map(|(r, n)| Op::Forge(r, n)),
        1 => (0u64..20_000).prop_map(Op::Restart),
        1 => (0u64..30_000).prop_map(Op::Away),
        1 => any::<u8>().prop_map(Op::Vanish),
        1 => any::<bool>().prop_map(Op::NetworkChanged),
        1 => (0u64..30_000).prop_map(Op::Offline),
    ]
}

fn model(b: &Behaviour, overlap: &[u64]) -> RelayModel {
    let mut m = RelayModel::default();
    for &n in overlap {
        m.events.push(StoredEvent::new(n, 1_000_000 + n, 1));
    }
    match b {
        Behaviour::Honest | Behaviour::Mute => {}
        Behaviour::Refuses(text) => m.refuse_all = Some((*text).to_owned()),
        Behaviour::Down => m.down = true,
        Behaviour::Flaps => m.drop_after = Some(Duration::from_millis(1_500)),
        Behaviour::Silent => m.silent_reqs = true,
    }
    m
}

fn run(seed: u64, behaviours: &[Behaviour], stores: &[Vec<u64>], ops: &[(u64, Op)]) -> PoolSim {
    run_with(PoolConfig::default(), seed, behaviours, stores, ops)
}

fn run_with(
    config: PoolConfig,
    seed: u64,
    behaviours: &[Behaviour],
    stores: &[Vec<u64>],
    ops: &[(u64, Op)],
) -> PoolSim {
    let mut s = PoolSim::new(config, seed);
    s.keep_transcript = false;
    for (b, store) in behaviours.iter().zip(stores) {
        s.at(
            Duration::ZERO,
            PoolAction::AddRelay(Box::new(model(b, store))),
        );
        if matches!(b, Behaviour::Mute) {
            s.at(Duration::ZERO, PoolAction::Mute(RelayId(0), true));
        }
    }
    let relays = behaviours.len().max(1) as u8;
    let mut t = 0;
    let mut subs = 0u8;
    for (step, op) in ops {
        t += step;
        let r = |x: &u8| RelayId(u32::from(x % relays));
        let action = match op {
            Op::Subscribe => {
                subs += 1;
                PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()])
            }
            Op::Routed(x) => {
                subs += 1;
                PoolAction::SubscribeRouted(vec![(r(x), vec![r#"{"kinds":[1]}"#.into()])])
            }
            Op::Unsubscribe(x) => PoolAction::Unsubscribe(SubId(u64::from(x % subs.max(1)) + 1)),
            Op::Store(x, n) => PoolAction::Store(r(x), StoredEvent::new(*n, 1_000_000 + n, 1)),
            Op::Drop(x) => PoolAction::DropSocket(r(x)),
            Op::AddRelay => PoolAction::AddRelay(Box::new(model(&Behaviour::Honest, &[1, 2]))),
            Op::RemoveRelay(x) => PoolAction::RemoveRelay(r(x)),
            Op::Publish(n) => PoolAction::Publish(StoredEvent::new(100 + n, 1_700_000_000, 1).json),
            Op::Restart(dead_for) => {
                s.at(Duration::from_millis(t + dead_for), PoolAction::Restore);
                PoolAction::Kill
            }
            Op::Away(away_for) => {
                s.at(Duration::from_millis(t + away_for), PoolAction::Resume);
                PoolAction::Suspend
            }
            Op::Vanish(x) => PoolAction::Vanish(r(x)),
            Op::NetworkChanged(old_path_gone) => PoolAction::NetworkChanged(*old_path_gone),
            Op::Offline(offline_for) => {
                s.at(
                    Duration::from_millis(t + offline_for),
                    PoolAction::Online(true),
                );
                PoolAction::Online(false)
            }
            Op::Forge(x, n) => {
                let json = StoredEvent::new(*n, 1_000_000 + n, 1)
                    .json
                    .replace("event", "forged");
                PoolAction::RelayFrame(r(x), format!(r#"["EVENT","0:1",{json}]"#))
            }
        };
        s.at(Duration::from_millis(t), action);
    }
    // Past every restore and outcome deadline: each subscription has had its outcome.
    s.run_for(Duration::from_millis(t) + Duration::from_secs(60));
    s
}

/// Exactly one outcome per subscription, unless the app dropped it before it was due
/// (PoolSim already fails a run on a second one); the subscriptions that had one.
fn one_outcome_each(s: &PoolSim) -> Result<Vec<SubId>, TestCaseError> {
    let outcomes = s.heard(|e| match e {
        PoolEvent::Complete { sub, .. } => Some(*sub),
        _ => None,
    });
    for sub in &s.subscribed {
        let heard = outcomes.iter().filter(|o| *o == sub).count();
        let dropped = s.unsubscribed.contains(sub);
        prop_assert!(
            heard == 1 || (heard == 0 && dropped),
            "{sub}: {heard} outcomes"
        );
    }
    Ok(outcomes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_subscription_gets_one_outcome_and_each_id_once(
        seed in any::<u64>(),
        behaviours in proptest::collection::vec(behaviour(), 1..4),
        stores in proptest::collection::vec(proptest::collection::vec(1u64..10, 0..6), 3),
        ops in proptest::collection::vec((0u64..3_000, op()), 1..30),
        max_connecting in prop_oneof![1 => 1usize..3, 1 => Just(64usize)],
    ) {
        // Relays contend for handshake slots in half the runs (PoolSim checks the limit and
        // that nobody waits past its bound).
        let mut config = PoolConfig::default();
        config.max_connecting = max_connecting;
        let s = run_with(config, seed, &behaviours, &stores, &ops);
        let outcomes = one_outcome_each(&s)?;
        // `Ended` only for a subscription no relay serves: gone from the pool.
        let ended = s.heard(|e| match e {
            PoolEvent::Ended { sub, .. } => Some(*sub),
            _ => None,
        });
        for sub in ended {
            prop_assert!(s.pool.serving(sub).is_none());
            prop_assert!(outcomes.contains(&sub), "{sub} ended without an outcome");
        }
    }

    /// With verification on (PoolSim's verifier refuses the `Forge` op's copies and answers
    /// out of order): no forged copy is delivered (PoolSim checks each `Received`), each id
    /// at most once, one outcome per subscription, every verification answered, and no
    /// more failures counted than reported.
    #[test]
    fn with_verification_no_forgery_is_delivered_and_nothing_waits_forever(
        seed in any::<u64>(),
        behaviours in proptest::collection::vec(behaviour(), 1..4),
        stores in proptest::collection::vec(proptest::collection::vec(1u64..10, 0..6), 3),
        ops in proptest::collection::vec((0u64..3_000, op()), 1..30),
    ) {
        let mut config = PoolConfig::default();
        config.verify = true;
        let s = run_with(config, seed, &behaviours, &stores, &ops);
        prop_assert_eq!(s.pool.unverified(), 0);
        one_outcome_each(&s)?;
        let invalid = s.heard(|e| match e {
            PoolEvent::Invalid { .. } => Some(()),
            _ => None,
        });
        let counted: u64 = s
            .pool
            .relay_ids()
            .filter_map(|r| s.pool.relay_stats(r))
            .map(|st| st.invalid)
            .sum();
        prop_assert!(counted <= invalid.len() as u64, "removed relays take their stats along");
    }

    #[test]
    fn same_seed_same_transcript(
        seed in any::<u64>(),
        behaviours in proptest::collection::vec(behaviour(), 1..4),
        ops in proptest::collection::vec((0u64..3_000, op()), 1..20),
    ) {
        let stores = vec![vec![1, 2], vec![2, 3], vec![3]];
        let a = run(seed, &behaviours, &stores, &ops);
        let b = run(seed, &behaviours, &stores, &ops);
        prop_assert_eq!(a.transcript(), b.transcript());
        prop_assert_eq!(format!("{:?}", a.events), format!("{:?}", b.events));
    }
}
