//! Catch-up after a gap, one transcript per case the catch-up issue measured against real
//! relays: the newest-first duplicate, an event that reaches the relay late, a late event
//! that arrives live after the reconnect, a `limit` that must not truncate the catch-up,
//! NIP-77, and every way NIP-77 can fail into the `since` fallback.
//!
//! The relay model answers newest first and dates nothing itself: every event here carries
//! the `created_at` a real client would have given it, against the Sim's wall clock
//! (`UNIX_START` at t = 0).

use std::time::Duration;

use tether_core::nostr::{CatchUpMethod, Event, Priority, RelayConfig};
use tether_testkit::{Action, Nip77, RelayModel, Sim, StoredEvent, UNIX_START};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn subscribe(filter: &str) -> Action {
    Action::Subscribe(vec![filter.to_owned()], Priority::NORMAL)
}

/// A relay holding events `1..=n`, dated 20 s to 10 s before the Sim's start.
fn relay_with_recent(n: u64) -> RelayModel {
    let mut relay = RelayModel::with_events(0);
    for i in 1..=n {
        relay
            .events
            .push(StoredEvent::new(i, UNIX_START - 20 + i * 10 / n, 1));
    }
    relay
}

/// An outage from 2 s to 5 s (the relay refuses connections meanwhile), with `during`
/// stored at 3 s.
fn outage(s: &mut Sim, during: Vec<StoredEvent>) {
    s.at(secs(2), Action::RelayDown);
    for event in during {
        s.at(secs(3), Action::Store(event));
    }
    s.at(secs(5), Action::RelayUp);
}

/// Event numbers delivered, in order.
fn delivered(s: &Sim) -> Vec<u64> {
    s.heard(|e| match e {
        Event::Received { id, .. } => {
            Some(u64::from_be_bytes(id.0[24..].try_into().unwrap_or([0; 8])))
        }
        _ => None,
    })
}

/// `(method, exact_since, recovered)` of every catch-up report.
fn caught_up(s: &Sim) -> Vec<(CatchUpMethod, u64, u64)> {
    s.heard(|e| match e {
        Event::CaughtUp {
            method,
            exact_since,
            recovered,
            ..
        } => Some((*method, *exact_since, *recovered)),
        _ => None,
    })
}

fn sim(relay: RelayModel) -> Sim {
    let mut s = Sim::new(RelayConfig::default(), 7, relay);
    s.at(Duration::ZERO, Action::Connect);
    s
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

#[test]
fn a_newest_first_catch_up_delivers_nothing_twice() {
    // The measured duplicate: stored events end 10 s before the drop, one new event reaches
    // the relay during a 3 s gap, and the relay answers the catch-up newest first.
    let mut s = sim(relay_with_recent(5));
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    outage(&mut s, vec![StoredEvent::new(6, UNIX_START + 3, 1)]);
    s.run_for(secs(12));
    assert_eq!(delivered(&s), [5, 4, 3, 2, 1, 6]);
    // The relay was last heard at 110 ms (its EOSE): the window starts 120 s before that,
    // the socket may have died any time after.
    assert_eq!(caught_up(&s), [(CatchUpMethod::Since, UNIX_START - 120, 1)]);
    assert_eq!(s.session.stats().duplicates, 6, "the overlap, dropped");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn an_event_that_reaches_the_relay_late_during_the_gap_is_delivered() {
    // Authored 60 s before the drop, stored while the client is away: inside the lookback.
    let mut s = sim(relay_with_recent(2));
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    outage(&mut s, vec![StoredEvent::new(3, UNIX_START - 58, 1)]);
    s.run_for(secs(12));
    assert_eq!(sorted(delivered(&s)), [1, 2, 3]);
    assert_eq!(caught_up(&s), [(CatchUpMethod::Since, UNIX_START - 120, 1)]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_late_event_that_arrives_live_after_the_reconnect_is_delivered() {
    // The live half keeps the user's filter: a note dated 10 min ago, stored after the
    // reconnect, reaches the subscription as it would have before the reconnect.
    let mut s = sim(relay_with_recent(2));
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    outage(&mut s, Vec::new());
    // The reconnect comes at about 10 s (the backoff grew while the relay refused).
    s.at(
        secs(15),
        Action::Store(StoredEvent::new(3, UNIX_START - 600, 1)),
    );
    s.run_for(secs(20));
    assert_eq!(delivered(&s), [2, 1, 3]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_filters_limit_bounds_the_first_answer_not_the_catch_up() {
    // `limit: 2` was for the first page; six events during the gap all arrive.
    let mut s = sim(relay_with_recent(4));
    s.at(ms(100), subscribe(r#"{"kinds":[1],"limit":2}"#));
    let during = (5..=10).map(|n| StoredEvent::new(n, UNIX_START + n - 5, 1));
    outage(&mut s, during.collect());
    s.run_for(secs(12));
    assert_eq!(delivered(&s)[..2], [4, 3], "the first answer: the 2 newest");
    assert_eq!(
        sorted(delivered(&s)[2..].to_vec()),
        [1, 2, 5, 6, 7, 8, 9, 10]
    );
    // 1 and 2 were dated inside the window and never delivered: the catch-up is exact from
    // its window's start, so they come too.
    assert_eq!(caught_up(&s), [(CatchUpMethod::Since, UNIX_START - 120, 8)]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_silently_capped_answer_is_paged_with_until() {
    // The relay cuts every answer to 3 events without declaring it; the session takes an
    // answer of 3 as possibly capped (the threshold is lowered to match) and pages down.
    let mut relay = relay_with_recent(1);
    relay.max_limit = Some(3);
    let mut config = RelayConfig::default();
    if let Some(c) = config.catch_up.as_mut() {
        c.possibly_capped = 3;
        c.negentropy = false;
    }
    let mut s = Sim::new(config, 7, relay);
    s.at(Duration::ZERO, Action::Connect);
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    let during = (2..=9).map(|n| StoredEvent::new(n, UNIX_START - 30 + n, 1));
    outage(&mut s, during.collect());
    s.run_for(secs(12));
    assert_eq!(sorted(delivered(&s)), (1..=9).collect::<Vec<_>>());
    let pages: Vec<String> = s
        .reqs()
        .filter(|(_, text)| text.contains("until") || text.contains("since"))
        .map(|(_, text)| text.to_owned())
        .collect();
    assert_eq!(pages.len(), 5, "the window, then 4 older pages: {pages:#?}");
    insta::assert_snapshot!(s.transcript());
}

fn nip_77_run() -> Sim {
    let mut relay = relay_with_recent(30);
    relay.nip77 = Nip77::Supported;
    let mut s = sim(relay);
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    let during = vec![
        StoredEvent::new(31, UNIX_START + 3, 1),
        StoredEvent::new(32, UNIX_START - 40, 1),
        StoredEvent::new(33, UNIX_START - 100, 1),
    ];
    outage(&mut s, during);
    s.run_for(secs(12));
    s
}

#[test]
fn nip_77_fetches_exactly_the_missing_ids() {
    let s = nip_77_run();
    // Byte for byte the same on a second run (the negentropy crate's id sets are hashed with
    // a random seed when its `std` feature is on: the session sorts what it is told).
    assert_eq!(s.transcript(), nip_77_run().transcript());
    let got = delivered(&s);
    assert_eq!(sorted(got.clone()), (1..=33).collect::<Vec<_>>());
    // The range is the memory's whole exact span: the first answer (30 events, neither
    // `since` nor `limit`, fewer than any silent cap) was the relay's whole set, so the
    // reconciliation starts at 0, and event 33, dated 100 s before the gap, is found too.
    assert_eq!(caught_up(&s), [(CatchUpMethod::Negentropy, 0, 3)]);
    let fetch = s
        .reqs()
        .find(|(_, text)| text.contains("\"ids\""))
        .map(|(_, text)| text.to_owned());
    assert!(
        fetch
            .as_deref()
            .is_some_and(|f| f.matches(',').count() >= 3),
        "one fetch of the missing ids: {fetch:?}"
    );
    assert_eq!(s.relay.neg_opens.len(), 1);
    assert_eq!(s.session.stats().negentropy_failed, 0);
    insta::assert_snapshot!(s.transcript());
}

/// A NIP-77 failure of each kind: the catch-up falls back to `since`, every event still
/// arrives once, and the relay is not asked for NIP-77 again on the next reconnect.
fn falls_back(nip77: Nip77) -> Sim {
    let mut relay = relay_with_recent(3);
    relay.nip77 = nip77;
    let mut s = sim(relay);
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    outage(&mut s, vec![StoredEvent::new(4, UNIX_START - 30, 1)]);
    s.at(secs(30), Action::DropSocket);
    s.at(
        secs(31),
        Action::Store(StoredEvent::new(5, UNIX_START + 31, 1)),
    );
    s.run_for(secs(45));
    assert_eq!(sorted(delivered(&s)), [1, 2, 3, 4, 5]);
    let methods: Vec<CatchUpMethod> = caught_up(&s).into_iter().map(|c| c.0).collect();
    assert_eq!(methods, [CatchUpMethod::Since, CatchUpMethod::Since]);
    assert_eq!(s.relay.neg_opens.len(), 1, "not asked again");
    assert_eq!(s.session.stats().negentropy_failed, 1);
    s
}

#[test]
fn a_neg_err_falls_back_to_since() {
    let s = falls_back(Nip77::Refuse("blocked: too many query results".into()));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_notice_answering_neg_open_falls_back_to_since() {
    let s = falls_back(Nip77::Unsupported);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn silence_after_neg_open_falls_back_to_since_after_the_deadline() {
    let s = falls_back(Nip77::Silent);
    let at = s
        .heard(|e| matches!(e, Event::CaughtUp { .. }).then_some(()))
        .len();
    assert_eq!(at, 2);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_rate_limited_neg_err_holds_the_gate_and_does_not_mark_the_relay() {
    let mut relay = relay_with_recent(3);
    relay.nip77 = Nip77::Refuse("rate-limited: slow down, retry in 4s".into());
    let mut s = sim(relay);
    s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    outage(&mut s, vec![StoredEvent::new(4, UNIX_START - 30, 1)]);
    s.run_for(secs(20));
    assert_eq!(sorted(delivered(&s)), [1, 2, 3, 4]);
    let rate_limited = s.heard(|e| match e {
        Event::RateLimited { until } => Some(*until),
        _ => None,
    });
    assert_eq!(rate_limited.len(), 1);
    // The window waited for the gate.
    let window_at = s
        .reqs()
        .filter(|(_, text)| text.contains("since"))
        .map(|(at, _)| at)
        .last()
        .expect("a window");
    assert!(window_at >= rate_limited[0], "{window_at:?}");
    assert_eq!(s.session.stats().negentropy_failed, 1);
    insta::assert_snapshot!(s.transcript());
}
