//! Catch-up, as properties: under hostile `created_at` values (a future date once made a
//! subscription deaf after the next reconnect), the window never passes the wall clock and
//! every event reaches the application once; and under any relay order, NIP-77 or not, late
//! events and a small memory, the catch-up is exact from the `exact_since` it reports.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::nostr::{Event, Priority, RelayConfig};
use tether_core::Instant;
use tether_testkit::{Action, AnswerOrder, Nip77, RelayModel, Sim, StoredEvent, UNIX_START};

/// Future-dated ids a subscription remembers apart (`subscription::FUTURE_IDS`).
const FUTURE_IDS: usize = 16;

fn created_at() -> impl Strategy<Value = u64> {
    prop_oneof![
        // The past, 1970 included.
        0..=UNIX_START,
        // Around now, on both sides of the 5-minute tolerance.
        (UNIX_START - 100)..(UNIX_START + 400),
        // Far ahead, up to the largest value a relay can send.
        (UNIX_START + 400)..=u64::MAX,
        Just(u64::MAX),
    ]
}

fn since_of(req: &str) -> Option<u64> {
    let frame: serde_json::Value = serde_json::from_str(req).ok()?;
    frame.get(2)?.get("since")?.as_u64()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn since_stays_behind_the_wall_clock_and_every_event_arrives_once(
        times in proptest::collection::vec(created_at(), 1..40),
        repeat_newest in any::<bool>(),
        drop_at_ms in 500u64..5_000,
    ) {
        let far = times.iter().filter(|&&t| t > UNIX_START + 300).count();
        prop_assume!(far <= FUTURE_IDS);
        let mut relay = RelayModel::with_events(0);
        for (n, &t) in times.iter().enumerate() {
            relay.events.push(StoredEvent::new(n as u64 + 1, t, 1));
        }
        if repeat_newest {
            // The same event twice in one answer: the id memory must drop the second. The
            // newest plausible event is always inside the overlap window (an older one may
            // have left it, by design: the memory keeps only what a `since` re-REQ resends).
            let newest = relay
                .events
                .iter()
                .filter(|e| e.created_at <= UNIX_START + 300)
                .max_by_key(|e| e.created_at)
                .cloned();
            relay.events.extend(newest);
        }
        let mut s = Sim::new(RelayConfig::default(), 1, relay);
        s.at(Duration::ZERO, Action::Connect);
        s.at(
            Duration::from_millis(100),
            Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority::NORMAL),
        );
        s.at(Duration::from_millis(drop_at_ms), Action::DropSocket);
        s.run_for(Duration::from_secs(20));

        let reqs: Vec<(Instant, String)> =
            s.reqs().map(|(at, text)| (at, text.to_owned())).collect();
        prop_assert!(reqs.len() >= 2, "the subscription was replayed: {reqs:?}");
        for (at, req) in &reqs {
            if let Some(since) = since_of(req) {
                let wall = UNIX_START + at.since_origin().as_secs();
                prop_assert!(since <= wall - 5, "since {since} past wall {wall} - 5: {req}");
            }
        }
        let mut delivered: Vec<u64> = s.heard(|e| match e {
            Event::Received { id, .. } => Some(u64::from_be_bytes(id.0[24..].try_into().unwrap())),
            _ => None,
        });
        delivered.sort_unstable();
        let expected: Vec<u64> = (1..=times.len() as u64).collect();
        prop_assert_eq!(delivered, expected);
    }
}

/// One outage's worth of relay behaviour for [`exact_within_the_reported_window`].
#[derive(Clone, Debug)]
struct Outage {
    /// Seconds before the Sim's start each stored event was authored (a few are far older).
    before: Vec<u64>,
    /// Events that reach the relay during the outage, each this many seconds "late"
    /// (authored before the drop): normal on Nostr.
    late: Vec<u64>,
    /// When the socket drops (ms).
    drop_at: u64,
    /// How long the relay refuses connections (ms).
    down_for: u64,
    nip77: bool,
    newest_first: bool,
    /// Events remembered per subscription: small values make the window's floor rise.
    memory: usize,
    /// The user's `limit`, if any.
    limit: Option<u64>,
    /// What the subscription reads.
    inbox: Inbox,
}

/// What a subscription of [`exact_within_the_reported_window`] reads.
#[derive(Clone, Copy, Debug)]
enum Inbox {
    /// Notes (kind 1): late by minutes at most.
    Notes,
    /// Gift wraps (kind 1059), dated as NIP-59 dates them: up to two days back.
    Wraps,
    /// Both, as two filters of one subscription (events alternate between the kinds).
    Both,
}

impl Inbox {
    fn kind(self, n: usize) -> u64 {
        match self {
            Inbox::Notes => 1,
            Inbox::Wraps => 1_059,
            Inbox::Both if n % 2 == 0 => 1,
            Inbox::Both => 1_059,
        }
    }

    fn filters(self, limit: Option<u64>) -> Vec<String> {
        let limit = limit
            .map(|l| format!(r#","limit":{l}"#))
            .unwrap_or_default();
        let one = |kind: u64| format!(r#"{{"kinds":[{kind}]{limit}}}"#);
        match self {
            Inbox::Notes => vec![one(1)],
            Inbox::Wraps => vec![one(1_059)],
            Inbox::Both => vec![one(1), one(1_059)],
        }
    }
}

/// Seconds in two days: how far back NIP-59 dates a gift wrap.
const TWO_DAYS: u64 = 2 * 86_400;

fn outage() -> impl Strategy<Value = Outage> {
    (
        proptest::collection::vec(prop_oneof![0u64..200, 200u64..5_000], 0..30),
        proptest::collection::vec(0u64..400, 0..12),
        1_000u64..4_000,
        500u64..5_000,
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(1_024usize), 2usize..12],
        prop_oneof![Just(None), (1u64..6).prop_map(Some)],
        prop_oneof![Just(Inbox::Notes), Just(Inbox::Wraps), Just(Inbox::Both)],
    )
        .prop_map(
            |(before, late, drop_at, down_for, nip77, newest_first, memory, limit, inbox)| Outage {
                before,
                late,
                drop_at,
                down_for,
                nip77,
                newest_first,
                memory,
                limit,
                inbox,
            },
        )
}

/// How late the `n`-th late event is: a note by up to 400 s (past the 2-minute lookback too),
/// a gift wrap by up to two days, spread from the draw `late`.
fn lateness(inbox: Inbox, n: usize, late: u64) -> u64 {
    match inbox.kind(n) {
        1_059 => late * (TWO_DAYS / 400),
        _ => late,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// Whatever the relay's order, NIP-77 or not, whatever was late (gift wraps by up to two
    /// days, as NIP-59 dates them), one filter or two, and however small the memory: nothing
    /// is delivered twice, and every event the relay holds with `created_at` at or after the
    /// reported `exact_since` is delivered.
    #[test]
    fn exact_within_the_reported_window(o in outage()) {
        let mut relay = RelayModel::with_events(0);
        relay.order = if o.newest_first { AnswerOrder::NewestFirst } else { AnswerOrder::OldestFirst };
        relay.nip77 = if o.nip77 { Nip77::Supported } else { Nip77::Unsupported };
        for (n, &ago) in o.before.iter().enumerate() {
            // Wraps are stored dated up to about five days back, notes up to 5 000 s.
            let ago = if o.inbox.kind(n) == 1_059 { ago * 80 } else { ago };
            relay.events.push(StoredEvent::new(n as u64 + 1, UNIX_START - ago, o.inbox.kind(n)));
        }
        let mut config = RelayConfig::default();
        if let Some(c) = config.catch_up.as_mut() {
            c.memory = o.memory;
        }
        let mut s = Sim::new(config, 3, relay);
        s.at(Duration::ZERO, Action::Connect);
        s.at(
            Duration::from_millis(100),
            Action::Subscribe(o.inbox.filters(o.limit), Priority::NORMAL),
        );
        s.at(Duration::from_millis(o.drop_at), Action::RelayDown);
        let drop_secs = o.drop_at / 1_000;
        for (i, &late) in o.late.iter().enumerate() {
            let created_at = (UNIX_START + drop_secs).saturating_sub(lateness(o.inbox, i, late));
            s.at(
                Duration::from_millis(o.drop_at + 1 + i as u64),
                Action::Store(StoredEvent::new(1_000 + i as u64, created_at, o.inbox.kind(i))),
            );
        }
        s.at(Duration::from_millis(o.drop_at + o.down_for), Action::RelayUp);
        s.run_for(Duration::from_secs(60));

        let delivered: Vec<u64> = s.heard(|e| match e {
            Event::Received { id, .. } => Some(u64::from_be_bytes(id.0[24..].try_into().unwrap())),
            _ => None,
        });
        let mut unique = delivered.clone();
        unique.sort_unstable();
        unique.dedup();
        prop_assert_eq!(unique.len(), delivered.len(), "delivered twice: {:?}", delivered);

        let reports: Vec<u64> = s.heard(|e| match e {
            Event::CaughtUp { exact_since, .. } => Some(*exact_since),
            _ => None,
        });
        prop_assert_eq!(reports.len(), 1, "one catch-up, reported once");
        let exact_since = reports[0];
        let missing: Vec<(u64, u64)> = s
            .relay
            .events
            .iter()
            .filter(|e| e.created_at >= exact_since && !delivered.contains(&e.n))
            .map(|e| (e.n, e.created_at))
            .collect();
        prop_assert!(missing.is_empty(), "not delivered though inside the window from {}: {:?}", exact_since, missing);
    }
}
