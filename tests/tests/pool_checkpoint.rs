//! Checkpoint and restore of a relay pool: killed with two relays serving one subscription
//! and a publish half-answered, while both relays store new and late events; restored, each
//! event reaches the application once (the pool's dedup memory across relays survives), the
//! subscription's outcome is not reported twice, and the publish's aggregate comes once.
//! The cross-relay properties under restarts are in `pool_properties.rs` (a restart is one
//! of its operations).

use std::time::Duration;

use tether_core::nostr::message::EventId;
use tether_core::pool::{PoolCheckpoint, PoolConfig, PoolEvent, RelayId};
use tether_core::CheckpointError;
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::{RelayModel, StoredEvent, UNIX_START};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn number(id: EventId) -> u64 {
    u64::from_be_bytes(id.0[24..].try_into().unwrap_or([0; 8]))
}

fn relay_with(events: &[u64]) -> Box<RelayModel> {
    let mut m = RelayModel::with_events(0);
    for &n in events {
        m.events.push(StoredEvent::new(n, UNIX_START - 30 + n, 1));
    }
    Box::new(m)
}

#[test]
fn a_restored_pool_delivers_each_event_once_and_reports_each_outcome_once() {
    let mut s = PoolSim::new(PoolConfig::default(), 5);
    s.at(ms(0), PoolAction::AddRelay(relay_with(&[1, 2, 3])));
    s.at(ms(0), PoolAction::AddRelay(relay_with(&[2, 3, 4])));
    s.at(
        ms(100),
        PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]),
    );
    // Killed before either relay's OK is back (10 ms each way).
    s.at(
        ms(2_000),
        PoolAction::Publish(StoredEvent::new(900, UNIX_START, 9).json),
    );
    s.at(ms(2_015), PoolAction::Kill);
    // While the process is dead: a new event on both relays, a late one on r1.
    s.at(
        ms(3_000),
        PoolAction::Store(RelayId(0), StoredEvent::new(5, UNIX_START + 3, 1)),
    );
    s.at(
        ms(3_000),
        PoolAction::Store(RelayId(1), StoredEvent::new(5, UNIX_START + 3, 1)),
    );
    s.at(
        ms(4_000),
        PoolAction::Store(RelayId(1), StoredEvent::new(6, UNIX_START - 60, 1)),
    );
    s.at(Duration::from_secs(20), PoolAction::Restore);
    s.run_for(Duration::from_secs(60));

    let mut received = s.heard(|e| match e {
        PoolEvent::Received { id, .. } => Some(number(*id)),
        _ => None,
    });
    received.sort_unstable();
    assert_eq!(received, [1, 2, 3, 4, 5, 6], "{}", s.transcript());
    let outcomes = s.heard(|e| match e {
        PoolEvent::Complete { sub, .. } => Some(*sub),
        _ => None,
    });
    assert_eq!(outcomes.len(), 1, "reported before the kill, not again");
    let done = s.heard(|e| match e {
        PoolEvent::PublishDone { id, outcome } => Some((number(*id), outcome.accepted.len())),
        _ => None,
    });
    assert_eq!(done, [(900, 2)], "{}", s.transcript());
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_pool_checkpoint_is_not_a_relay_checkpoint() {
    let relay = br#"{"tether":"relay","version":1}"#;
    assert!(matches!(
        PoolCheckpoint::from_json(relay),
        Err(CheckpointError::WrongKind {
            expected: "pool",
            ..
        })
    ));
}

/// The fuzz corpus's hand-written pool checkpoint restores, so the fuzz target reaches a
/// restored pool from its first input.
#[test]
fn the_fuzz_corpus_pool_checkpoint_restores() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/corpus/checkpoint/pool_v1.json"
    );
    let bytes = std::fs::read(path).expect("corpus file");
    let saved = PoolCheckpoint::from_json(&bytes).expect("parses");
    let pool = tether_core::pool::RelayPool::restore(
        PoolConfig::default(),
        1,
        &saved,
        tether_core::Instant::ZERO,
        UNIX_START,
    )
    .expect("restores");
    pool.check_consistency().expect("consistent");
    assert_eq!(pool.relay_ids().collect::<Vec<_>>(), [RelayId(0)]);
    assert_eq!(
        pool.unverified(),
        0,
        "verification is off: the held copy was delivered"
    );
}

#[test]
fn the_serialized_form_is_pinned() {
    let mut s = PoolSim::new(PoolConfig::default(), 5);
    s.at(ms(0), PoolAction::AddRelay(relay_with(&[1, 2])));
    s.at(ms(0), PoolAction::AddRelay(relay_with(&[2, 3])));
    s.at(
        ms(100),
        PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]),
    );
    s.at(
        ms(200),
        PoolAction::Publish(StoredEvent::new(900, UNIX_START, 9).json),
    );
    s.run_for(ms(205));
    let json = String::from_utf8(s.pool.checkpoint().to_json()).unwrap_or_default();
    let pretty: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
    insta::assert_snapshot!(serde_json::to_string_pretty(&pretty).unwrap_or_default());
}
