//! Checkpoint and restore of a relay session: the process is killed at any step, the relay
//! goes on (new events, late-dated events, refusals), a new process restores the checkpoint
//! later and runs on. Every event is delivered once across both processes, none inside the
//! reported window is lost, and a publish that was unacknowledged at the kill is reported
//! once. Then the format: pinned bytes, an old fixture that must keep restoring, and typed
//! errors for what is not a checkpoint.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::nostr::{
    CatchUpMethod, Event, Priority, RelayCheckpoint, RelayConfig, RelaySession, SubscriptionId,
};
use tether_core::{CheckpointError, Instant};
use tether_testkit::{Action, AnswerOrder, Nip77, RelayModel, Sim, StoredEvent, UNIX_START};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn number(id: &tether_core::nostr::message::EventId) -> u64 {
    u64::from_be_bytes(id.0[24..].try_into().unwrap_or([0; 8]))
}

fn delivered(s: &Sim) -> Vec<u64> {
    s.heard(|e| match e {
        Event::Received { id, .. } => Some(number(id)),
        _ => None,
    })
}

/// One restart's worth of relay and process behaviour.
#[derive(Clone, Debug)]
struct Restart {
    /// Seconds before the Sim's start each stored event was authored.
    before: Vec<u64>,
    /// Events stored while the process is dead, each this many seconds "late".
    late: Vec<u64>,
    /// Events stored while the first process is live (ms after the subscribe).
    live: Vec<u64>,
    /// When the process is killed (ms).
    kill_at: u64,
    /// How long it stays dead (ms).
    dead_for: u64,
    /// A publish this long before the kill (ms): under 20 ms its OK is still in flight.
    publish_lead: Option<u64>,
    /// The first REQ after the restore is refused as rate-limited.
    refuse_first: bool,
    nip77: bool,
    newest_first: bool,
    memory: usize,
}

fn restart() -> impl Strategy<Value = Restart> {
    (
        proptest::collection::vec(prop_oneof![0u64..200, 200u64..5_000], 0..20),
        proptest::collection::vec(0u64..400, 0..10),
        proptest::collection::vec(0u64..3_000, 0..5),
        (200u64..4_000, 100u64..60_000),
        prop_oneof![Just(None), (0u64..60).prop_map(Some)],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(1_024usize), 2usize..12],
    )
        .prop_map(
            |(
                before,
                late,
                live,
                (kill_at, dead_for),
                publish_lead,
                refuse,
                nip77,
                newest,
                memory,
            )| {
                Restart {
                    before,
                    late,
                    live,
                    kill_at,
                    dead_for,
                    publish_lead,
                    refuse_first: refuse,
                    nip77,
                    newest_first: newest,
                    memory,
                }
            },
        )
}

fn refuse_next(relay: &mut RelayModel) {
    relay
        .scripted_closed
        .push_back("rate-limited: slow down, retry in 2s".into());
}

/// The kind-9 note published before the kill (not matched by the subscription's filter).
fn published_note() -> StoredEvent {
    StoredEvent::new(9_000, UNIX_START, 9)
}

fn run(o: &Restart) -> Sim {
    let mut relay = RelayModel::with_events(0);
    relay.order = if o.newest_first {
        AnswerOrder::NewestFirst
    } else {
        AnswerOrder::OldestFirst
    };
    relay.nip77 = if o.nip77 {
        Nip77::Supported
    } else {
        Nip77::Unsupported
    };
    for (n, &ago) in o.before.iter().enumerate() {
        relay
            .events
            .push(StoredEvent::new(n as u64 + 1, UNIX_START - ago, 1));
    }
    let mut config = RelayConfig::default();
    if let Some(c) = config.catch_up.as_mut() {
        c.memory = o.memory;
    }
    let mut s = Sim::new(config, 3, relay);
    s.at(Duration::ZERO, Action::Connect);
    s.at(
        ms(100),
        Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority::NORMAL),
    );
    for (i, &at) in o.live.iter().enumerate() {
        let at = 100 + at;
        let created_at = UNIX_START + at / 1_000;
        s.at(
            ms(at),
            Action::Store(StoredEvent::new(500 + i as u64, created_at, 1)),
        );
    }
    if let Some(lead) = o.publish_lead {
        s.at(
            ms(o.kill_at.saturating_sub(lead).max(150)),
            Action::Publish(published_note().json),
        );
    }
    s.at(ms(o.kill_at), Action::Kill);
    let kill_secs = o.kill_at / 1_000;
    for (i, &late) in o.late.iter().enumerate() {
        let created_at = (UNIX_START + kill_secs).saturating_sub(late);
        s.at(
            ms(o.kill_at + 1 + i as u64),
            Action::Store(StoredEvent::new(1_000 + i as u64, created_at, 1)),
        );
    }
    let restore_at = o.kill_at + o.dead_for;
    if o.refuse_first {
        s.at(ms(restore_at), Action::Relay(refuse_next));
    }
    s.at(ms(restore_at), Action::Restore);
    s.run_for(Duration::from_secs(60) + ms(restore_at));
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// Killed at any step and restored later, whatever the relay's order, NIP-77 or not,
    /// late events, a refusal and a small memory: each event is delivered once across the
    /// two processes, every event inside the reported window is delivered, and a publish
    /// unacknowledged at the kill is reported once.
    #[test]
    fn a_restart_delivers_each_event_once_and_loses_none_in_the_window(o in restart()) {
        let s = run(&o);
        let got = delivered(&s);
        let mut unique = got.clone();
        unique.sort_unstable();
        unique.dedup();
        prop_assert_eq!(unique.len(), got.len(), "delivered twice: {:?}\n{}", got, s.transcript());

        let reports: Vec<(Instant, u64)> = s
            .events
            .iter()
            .filter_map(|(at, e)| match e {
                Event::CaughtUp { exact_since, .. } => Some((*at, *exact_since)),
                _ => None,
            })
            .collect();
        let restored_at = Instant::from_millis(o.kill_at + o.dead_for);
        let after: Vec<u64> = reports
            .iter()
            .filter(|(at, _)| *at >= restored_at)
            .map(|&(_, since)| since)
            .collect();
        let first_eose = s.events.iter().any(|(at, e)| {
            matches!(e, Event::Eose { .. }) && at.since_origin() < ms(o.kill_at)
        });
        if first_eose {
            prop_assert_eq!(after.len(), 1, "one catch-up after the restore: {:?}\n{}", reports, s.transcript());
            let exact_since = after[0];
            let missing: Vec<(u64, u64)> = s
                .relay
                .events
                .iter()
                .filter(|e| e.created_at >= exact_since && !got.contains(&e.n))
                .map(|e| (e.n, e.created_at))
                .collect();
            prop_assert!(missing.is_empty(), "lost inside the window from {}: {:?}\n{}", exact_since, missing, s.transcript());
        } else {
            // Killed before the first answer completed: the restored subscription starts
            // over, and everything the relay holds arrives.
            let mut all: Vec<u64> = s.relay.events.iter().map(|e| e.n).collect();
            all.sort_unstable();
            prop_assert_eq!(unique, all, "{}", s.transcript());
        }

        if o.publish_lead.is_some() {
            let id = published_note().n;
            let published = s.heard(|e| match e {
                Event::Published { id } => Some(number(id)),
                _ => None,
            });
            prop_assert_eq!(published, vec![id], "{}", s.transcript());
        }
    }
}

#[test]
fn a_restore_catches_up_what_reached_the_relay_while_the_process_was_dead() {
    let mut relay = RelayModel::with_events(0);
    for n in 1..=3 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - 30 + n, 1));
    }
    let mut s = Sim::new(RelayConfig::default(), 7, relay);
    s.at(Duration::ZERO, Action::Connect);
    s.at(
        ms(100),
        Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority::NORMAL),
    );
    s.at(ms(2_000), Action::Publish(published_note().json));
    // Killed 5 ms later: the EVENT reached the relay, its OK did not come back.
    s.at(ms(2_015), Action::Kill);
    s.at(
        ms(3_000),
        Action::Store(StoredEvent::new(4, UNIX_START + 3, 1)),
    );
    // Late: authored before the kill, stored while the process is dead.
    s.at(
        ms(4_000),
        Action::Store(StoredEvent::new(5, UNIX_START - 50, 1)),
    );
    s.at(Duration::from_secs(30), Action::Restore);
    s.run_for(Duration::from_secs(40));
    // Newest first, as relays answer: 4 is dated after the kill, 5 before it.
    assert_eq!(delivered(&s), [3, 2, 1, 4, 5]);
    assert_eq!(s.caught_up(), [(CatchUpMethod::Since, UNIX_START - 120, 2)]);
    let published = s.heard(|e| match e {
        Event::Published { id } => Some(number(id)),
        _ => None,
    });
    assert_eq!(
        published,
        [9_000],
        "re-sent after the restore, reported once"
    );
    insta::assert_snapshot!(s.transcript());
}

fn checkpoint_with_memory() -> RelayCheckpoint {
    let mut relay = RelayModel::with_events(0);
    for n in 1..=3 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - 30 + n, 1));
    }
    relay.info_document = None;
    let mut s = Sim::new(RelayConfig::default(), 7, relay);
    s.at(Duration::ZERO, Action::Connect);
    s.at(
        Duration::ZERO,
        Action::RelayInfo(
            r#"{"supported_nips":[1,11,77],"limitation":{"max_subscriptions":20,"max_limit":500}}"#
                .into(),
        ),
    );
    s.at(
        ms(100),
        Action::Subscribe(
            vec![
                r#"{"kinds":[1],"limit":10}"#.into(),
                r##"{"#t":["tether"]}"##.into(),
            ],
            Priority::HIGH,
        ),
    );
    // Its OK is still in flight when the checkpoint is taken.
    s.at(ms(200), Action::Publish(published_note().json));
    s.run_for(ms(205));
    s.session.checkpoint()
}

#[test]
fn the_serialized_form_is_pinned() {
    let json = String::from_utf8(checkpoint_with_memory().to_json()).unwrap_or_default();
    let pretty: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
    insta::assert_snapshot!(serde_json::to_string_pretty(&pretty).unwrap_or_default());
}

#[test]
fn the_same_state_gives_the_same_bytes() {
    if std::env::var_os("TETHER_PRINT_FIXTURE").is_some() {
        println!(
            "{}",
            String::from_utf8_lossy(&checkpoint_with_memory().to_json())
        );
    }
    assert_eq!(
        checkpoint_with_memory().to_json(),
        checkpoint_with_memory().to_json()
    );
}

/// A checkpoint written by format version 1, committed: it must keep restoring.
const FIXTURE_V1: &str = include_str!("fixtures/relay_checkpoint_v1.json");

#[test]
fn a_committed_version_1_checkpoint_keeps_restoring() {
    let checkpoint = RelayCheckpoint::from_json(FIXTURE_V1.as_bytes()).expect("fixture parses");
    let ids: Vec<SubscriptionId> = checkpoint.subscriptions().map(|(id, _)| id).collect();
    assert_eq!(ids, [SubscriptionId(0)]);
    assert_eq!(checkpoint.remembered(), 3);
    assert_eq!(checkpoint.publishes(), 1);
    let now = Instant::from_millis(5);
    let session =
        RelaySession::restore(RelayConfig::default(), 1, &checkpoint, now, UNIX_START + 60)
            .expect("fixture restores");
    let views = session.subscriptions();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].priority, Priority::HIGH);
    assert_eq!(session.subscription_limit(), Some(20));
    assert_eq!(session.outbox_len(), 1);
    session.check_consistency().expect("consistent");
    // Restoring and checkpointing again gives the same bytes.
    let again = session.checkpoint().to_json();
    let original: serde_json::Value = serde_json::from_str(FIXTURE_V1).unwrap_or_default();
    let mut again: serde_json::Value = serde_json::from_slice(&again).unwrap_or_default();
    // The restored session's own clock reading differs; everything else is the same.
    for field in ["saved_at", "live_until"] {
        again[field] = original[field].clone();
    }
    assert_eq!(
        again["subscriptions"][0]["gap_from"],
        original["live_until"]
    );
    again["subscriptions"][0]["gap_from"] = original["subscriptions"][0]["gap_from"].clone();
    assert_eq!(again, original);
}

#[test]
fn what_is_not_a_checkpoint_is_a_typed_error() {
    type Case = (&'static [u8], fn(&CheckpointError) -> bool);
    let cases: [Case; 5] = [
        (b"", |e| matches!(e, CheckpointError::NotACheckpoint(_))),
        (b"{\"kinds\":[1]}", |e| {
            matches!(e, CheckpointError::NotACheckpoint(_))
        }),
        (br#"{"tether":"sse","version":1}"#, |e| {
            matches!(
                e,
                CheckpointError::WrongKind {
                    expected: "relay",
                    ..
                }
            )
        }),
        (br#"{"tether":"relay","version":2,"anything":true}"#, |e| {
            matches!(
                e,
                CheckpointError::Newer {
                    version: 2,
                    supported: 1
                }
            )
        }),
        (br#"{"tether":"relay","version":1,"saved_at":1}"#, |e| {
            matches!(e, CheckpointError::NotACheckpoint(_))
        }),
    ];
    for (bytes, expected) in cases {
        let err = RelayCheckpoint::from_json(bytes).expect_err("not a checkpoint");
        assert!(
            expected(&err),
            "{:?} gave {err:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    // Parses, but contradicts itself: the same slot twice.
    let twice = FIXTURE_V1.replacen(
        r#""subscriptions":["#,
        &format!(
            r#""subscriptions":[{},"#,
            serde_json::from_str::<serde_json::Value>(FIXTURE_V1).unwrap_or_default()
                ["subscriptions"][0]
        ),
        1,
    );
    let checkpoint = RelayCheckpoint::from_json(twice.as_bytes()).expect("parses");
    let err = RelaySession::restore(
        RelayConfig::default(),
        1,
        &checkpoint,
        Instant::ZERO,
        UNIX_START,
    )
    .expect_err("an id twice");
    assert!(matches!(err, CheckpointError::Invalid(_)), "{err:?}");
}

/// The size `docs/restarts.md` and the checkpoint's docs state: 1 000 subscriptions sharing the
/// session's whole memory (65 536 events).
#[test]
fn a_thousand_subscriptions_with_full_memories_fit_the_stated_size() {
    let mut config = RelayConfig::default();
    config.max_registered = 1_000;
    let mut relay = RelayModel::with_events(0);
    for n in 1..=70 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - 100 + n, 1));
    }
    let mut s = Sim::new(config, 1, relay);
    s.check = false;
    s.quiet = true;
    s.at(Duration::ZERO, Action::Connect);
    for i in 0..1_000 {
        let filter = format!(r#"{{"kinds":[1],"limit":{}}}"#, 100 + i);
        s.at(ms(10), Action::Subscribe(vec![filter], Priority::NORMAL));
    }
    s.run_for(Duration::from_secs(20));
    let checkpoint = s.session.checkpoint();
    assert_eq!(checkpoint.subscriptions().count(), 1_000);
    // The whole memory, less what a full memory's eviction of a whole second left free.
    let remembered = checkpoint.remembered();
    assert!((65_000..=65_536).contains(&remembered), "{remembered}");
    let bytes = checkpoint.to_json().len();
    println!(
        "checkpoint: {bytes} bytes for 1 000 subscriptions, {} per remembered event",
        bytes / remembered
    );
    assert!(bytes <= 84 * 65_536 + 100 * 1_000, "{bytes} bytes");
}

/// A DM inbox killed at 2 s and restored at 30 s; meanwhile a wrap dated 20 h back reaches
/// the relay.
fn inbox_restart(nip77: Nip77) -> Sim {
    let mut relay = RelayModel::with_events(0);
    relay.nip77 = nip77;
    // The model's wraps carry no `p` tag: what is tested is the window, not the tag.
    relay.ignores_tags = true;
    for n in 1..=3 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - n * 10 * 3_600, 1059));
    }
    let mut s = Sim::new(RelayConfig::default(), 7, relay);
    s.at(Duration::ZERO, Action::Connect);
    s.at(
        ms(100),
        Action::Subscribe(
            vec![r##"{"kinds":[1059],"#p":["me"]}"##.into()],
            Priority::NORMAL,
        ),
    );
    s.at(ms(2_000), Action::Kill);
    s.at(
        ms(4_000),
        Action::Store(StoredEvent::new(4, UNIX_START - 20 * 3_600, 1059)),
    );
    s.at(Duration::from_secs(30), Action::Restore);
    s.run_for(Duration::from_secs(40));
    s
}

#[test]
fn a_restore_recovers_a_gift_wrap_that_arrived_while_stopped() {
    let s = inbox_restart(Nip77::Unsupported);
    assert_eq!(delivered(&s), [1, 2, 3, 4]);
    // From when the relay was last heard (the first answer, at 0 s) minus the wraps' 49 h.
    assert_eq!(
        s.caught_up(),
        [(CatchUpMethod::Since, UNIX_START - 49 * 3_600, 1)]
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_restored_subscription_reconciles_its_saved_memorys_span() {
    let s = inbox_restart(Nip77::Supported);
    assert_eq!(delivered(&s), [1, 2, 3, 4]);
    // The checkpoint kept the span: the first answer was the relay's whole set.
    assert_eq!(s.caught_up(), [(CatchUpMethod::Negentropy, 0, 1)]);
}
