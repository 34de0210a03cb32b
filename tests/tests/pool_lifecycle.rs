//! The application's lifecycle as input to a pool (suspend, resume, a network change, no
//! network): every relay's socket that died while the app slept is found within the resume
//! probe while the live ones carry on, a lost network path sends every relay back through
//! the connect line, and nothing is attempted offline. `PoolSim` checks its invariants (each
//! id once, one outcome per subscription, the handshake limit) after every step; the
//! property test in `pool_properties.rs` draws these signals among its operations.

use std::time::Duration;

use tether_core::link::{LinkState, SocketLoss};
use tether_core::nostr::{Disconnect, Event};
use tether_core::pool::{PoolConfig, PoolEvent, RelayId};
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::{RelayModel, StoredEvent, UNIX_START};

const SEED: u64 = 5;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A pool of `relays` relays, each holding event 1, subscribed at 100 ms.
fn pool(config: PoolConfig, relays: u32) -> PoolSim {
    let mut s = PoolSim::new(config, SEED);
    for _ in 0..relays {
        let mut model = RelayModel::default();
        model.events.push(StoredEvent::new(1, UNIX_START - 5, 1));
        s.at(Duration::ZERO, PoolAction::AddRelay(Box::new(model)));
    }
    s.at(
        Duration::from_millis(100),
        PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]),
    );
    s
}

/// The sockets the application heard lost: which relay, why, and when (ms since start).
fn losses(s: &PoolSim) -> Vec<(RelayId, SocketLoss, u128)> {
    s.events
        .iter()
        .filter_map(|(at, e)| match e {
            PoolEvent::Relay {
                relay,
                event:
                    Event::Disconnected {
                        why: Disconnect::Lost(why),
                        ..
                    },
                ..
            } => Some((*relay, *why, at.since_origin().as_millis())),
            _ => None,
        })
        .collect()
}

/// The last byte of each event id delivered, in order.
fn received(s: &PoolSim) -> Vec<u8> {
    s.heard(|e| match e {
        PoolEvent::Received { id, .. } => Some(id.0[31]),
        _ => None,
    })
}

#[test]
fn sockets_that_died_while_suspended_are_found_by_the_resume_probe_and_the_rest_carry_on() {
    let mut s = pool(PoolConfig::default(), 3);
    s.at(secs(10), PoolAction::Suspend);
    // The NAT forgets two of the three connections while the app sleeps: no close arrives.
    s.at(secs(60), PoolAction::Vanish(RelayId(0)));
    s.at(secs(60), PoolAction::Vanish(RelayId(1)));
    s.at(
        secs(70),
        PoolAction::Store(RelayId(0), StoredEvent::new(2, UNIX_START + 70, 1)),
    );
    s.at(
        secs(70),
        PoolAction::Store(RelayId(2), StoredEvent::new(3, UNIX_START + 70, 1)),
    );
    s.at(secs(610), PoolAction::Resume);
    s.run_for(secs(640));
    // Nothing was charged to the relays while the app was away: the two zombies are found
    // by the probe at resume, 5 s later, and only they.
    assert_eq!(
        losses(&s),
        [
            (RelayId(0), SocketLoss::ResumeProbe, 615_000),
            (RelayId(1), SocketLoss::ResumeProbe, 615_000)
        ],
        "{}",
        s.transcript()
    );
    let reopened: Vec<u32> = s
        .opens()
        .into_iter()
        .filter(|&(at, _)| at > 10_000)
        .map(|(_, relay)| relay)
        .collect();
    assert_eq!(reopened, [0, 1], "r2's live socket was left alone");
    // r2 delivered event 3 live while the app slept (the driver still reads); r0's event 2,
    // stored while its socket was a zombie, came with the catch-up after the reconnect.
    assert_eq!(received(&s), [1, 3, 2]);
    let caught_up: Vec<RelayId> = s.heard(|e| match e {
        PoolEvent::CaughtUp { relay, .. } => Some(*relay),
        _ => None,
    });
    assert_eq!(caught_up, [RelayId(0), RelayId(1)]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_lost_network_path_sends_every_relay_back_through_the_connect_line() {
    let mut config = PoolConfig::default();
    config.max_connecting = 2;
    let mut s = pool(config, 6);
    s.run_for(secs(5));
    assert_eq!(s.pool.handshakes().peak_in_flight, 2);
    s.at(secs(5), PoolAction::NetworkChanged(true));
    s.run_for(secs(25));
    let lost = losses(&s);
    assert_eq!(lost.len(), 6, "{lost:?}");
    assert!(
        lost.iter()
            .all(|&(_, why, at)| why == SocketLoss::NetworkChanged && at == 5_000),
        "{lost:?}"
    );
    // Every relay reconnected, two handshakes at a time (PoolSim checks the limit after
    // every step), and each one's subscription is live again.
    let again: Vec<u32> = s
        .opens()
        .into_iter()
        .filter(|&(at, _)| at >= 5_000)
        .map(|(_, relay)| relay)
        .collect();
    assert_eq!(again.len(), 6, "{again:?}");
    assert_eq!(s.pool.handshakes().peak_in_flight, 2);
    for relay in 0..6 {
        let session = s.pool.session(RelayId(relay)).expect("a member");
        assert!(
            matches!(session.link().state(), LinkState::Open { .. }),
            "r{relay}: {:?}",
            session.link().state()
        );
        assert_eq!(session.open_subscriptions(), 1, "r{relay}");
    }
    assert_eq!(
        received(&s),
        [1],
        "event 1 once, whichever relay had it first"
    );
}

#[test]
fn offline_nothing_is_attempted_and_back_online_every_relay_reconnects_at_once() {
    let mut s = pool(PoolConfig::default(), 3);
    s.at(secs(5), PoolAction::Online(false));
    for relay in 0..3 {
        s.at(secs(6), PoolAction::DropSocket(RelayId(relay)));
    }
    s.at(secs(60), PoolAction::Online(true));
    s.run_for(secs(70));
    let after_drop: Vec<(u64, u32)> = s
        .opens()
        .into_iter()
        .filter(|&(at, _)| at >= 6_000)
        .collect();
    assert_eq!(after_drop.len(), 3, "{after_drop:?}");
    assert!(
        after_drop
            .iter()
            .all(|&(at, _)| (60_000..=61_000).contains(&at)),
        "no attempt offline, each within the 1 s jitter of coming back: {after_drop:?}"
    );
}
