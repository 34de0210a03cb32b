//! Catch-up under hostile `created_at` values (issue: a future date made a subscription
//! deaf after the next reconnect): whatever dates a relay sends, the replay's `since` never
//! passes wall-clock now minus the slack, and every event reaches the application once.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::nostr::{Event, Priority, RelayConfig};
use tether_core::Instant;
use tether_testkit::{Action, RelayModel, Sim, StoredEvent, UNIX_START};

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
