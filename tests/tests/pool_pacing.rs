//! Paced connects (`PoolConfig::max_connecting`): at most N handshakes in flight, the other
//! relays waiting their turn in arrival order with no connect timeout running, a relay whose
//! handshake never completes holding its slot for one connect timeout at most, and nobody
//! starving. `PoolSim` checks the limit and the waiting bound after every step, from what
//! crosses its network, for every pool test; these pin the canonical cases.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::link::LinkState;
use tether_core::pool::{Handshakes, Outcome, PoolConfig, PoolEvent, RelayId};
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::{RelayModel, StoredEvent};

const SEED: u64 = 7;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn relay_with(n: u64) -> Box<RelayModel> {
    let mut model = RelayModel::default();
    model.events.push(StoredEvent::new(n, 1_000_000 + n, 1));
    Box::new(model)
}

fn paced(limit: usize) -> PoolConfig {
    let mut config = PoolConfig::default();
    config.max_connecting = limit;
    config
}

#[test]
fn two_hanging_handshakes_hold_their_slots_for_one_connect_timeout_and_the_rest_wait_their_turn() {
    let mut s = PoolSim::new(paced(2), SEED);
    for n in 0..5 {
        s.at(ms(0), PoolAction::AddRelay(relay_with(n)));
    }
    s.at(ms(0), PoolAction::Hang(RelayId(0), true));
    s.at(ms(0), PoolAction::Hang(RelayId(1), true));
    s.at(
        ms(1),
        PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]),
    );
    s.run_for(ms(5_000));
    assert_eq!(
        s.pool.handshakes(),
        Handshakes {
            in_flight: 2,
            waiting: 3,
            peak_in_flight: 2
        }
    );
    let queued = |s: &PoolSim, r: u32| {
        matches!(
            s.pool.session(RelayId(r)).map(|x| x.link().state()),
            Some(LinkState::Queued { .. })
        )
    };
    assert!(
        (2..5).all(|r| queued(&s, r)),
        "r2-r4 wait, reported as connecting"
    );
    s.run_for(ms(10_000));
    // r0 and r1 gave their slots up at their 10 s connect timeout; r2 and r3 were admitted
    // then, and r4 as soon as r2 opened. r0 and r1 are back in line after their backoff.
    let first: Vec<(u64, u32)> = s.opens().into_iter().take(5).collect();
    assert_eq!(
        first,
        [(0, 0), (0, 1), (10_000, 2), (10_000, 3), (10_020, 4)]
    );
    let received: Vec<RelayId> = s.heard(|e| match e {
        PoolEvent::Received { relay, .. } => Some(*relay),
        _ => None,
    });
    assert_eq!(received, [RelayId(2), RelayId(3), RelayId(4)]);
    assert_eq!(s.pool.handshakes().peak_in_flight, 2);
    assert_eq!(
        s.peak_connecting(),
        2,
        "the network never saw more than two"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_waiting_relay_runs_no_connect_timeout_and_its_subscription_completes_when_it_connects() {
    // One slot, three relays: r0 hangs for 10 s, then r1 and r2 connect. Nothing is charged
    // to r1 and r2 for the wait (no `Disconnected`, no backoff).
    let mut config = paced(1);
    config.eose_deadline = ms(30_000);
    let mut s = PoolSim::new(config, SEED);
    for n in 0..3 {
        s.at(ms(0), PoolAction::AddRelay(relay_with(n)));
    }
    s.at(ms(0), PoolAction::Hang(RelayId(0), true));
    s.at(
        ms(0),
        PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]),
    );
    s.at(ms(10_500), PoolAction::Hang(RelayId(0), false));
    s.run_for(ms(20_000));
    let lost: Vec<RelayId> = s.heard(|e| match e {
        PoolEvent::Relay {
            relay,
            event: tether_core::nostr::Event::Disconnected { .. },
            ..
        } => Some(*relay),
        _ => None,
    });
    assert_eq!(lost, [RelayId(0)], "only the hanging relay lost a socket");
    let outcome = s.heard(|e| match e {
        PoolEvent::Complete { outcome, .. } => Some(outcome.clone()),
        _ => None,
    });
    assert_eq!(outcome, [Outcome::Complete]);
    assert_eq!(s.pool.handshakes().peak_in_flight, 1);
}

#[test]
fn removing_a_relay_gives_its_slot_to_the_next_in_line() {
    let mut s = PoolSim::new(paced(1), SEED);
    for n in 0..2 {
        s.at(ms(0), PoolAction::AddRelay(relay_with(n)));
    }
    s.at(ms(0), PoolAction::Hang(RelayId(0), true));
    s.at(ms(3_000), PoolAction::RemoveRelay(RelayId(0)));
    s.run_for(ms(4_000));
    assert_eq!(s.opens(), [(0, 0), (3_000, 1)]);
    assert_eq!(
        s.pool.handshakes(),
        Handshakes {
            in_flight: 0,
            waiting: 0,
            peak_in_flight: 1
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any mix of hanging, refusing and answering relays, added over time, under any limit:
    /// PoolSim fails the run if more handshakes than the limit are ever in flight or a relay
    /// waits longer than its bound; every answering relay delivers its event.
    #[test]
    fn handshakes_stay_under_the_limit_and_every_answering_relay_gets_through(
        seed in any::<u64>(),
        limit in 1usize..4,
        mut relays in proptest::collection::vec((0u8..3, 0u64..3_000), 1..10),
    ) {
        // Ids are handed out in the order relays are added.
        relays.sort_by_key(|&(_, at)| at);
        let mut s = PoolSim::new(paced(limit), seed);
        s.keep_transcript = false;
        s.at(ms(0), PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]));
        let mut answering = Vec::new();
        for (n, &(kind, at)) in relays.iter().enumerate() {
            let mut model = relay_with(n as u64);
            model.down = kind == 1;
            s.at(ms(at), PoolAction::AddRelay(model));
            if kind == 2 {
                s.at(ms(at), PoolAction::Hang(RelayId(n as u32), true));
            }
            if kind == 0 {
                answering.push(n as u64);
            }
        }
        // Enough for every relay to get a slot, however the arrivals fell.
        let rounds = relays.len().div_ceil(limit) as u64 + 1;
        s.run_for(ms(3_000 + rounds * 11_000));
        prop_assert!(s.peak_connecting() <= limit);
        prop_assert!(s.pool.handshakes().peak_in_flight <= limit);
        let mut got: Vec<u64> = s.heard(|e| match e {
            PoolEvent::Received { relay, .. } => Some(u64::from(relay.0)),
            _ => None,
        });
        got.sort_unstable();
        prop_assert_eq!(got, answering);
    }
}
