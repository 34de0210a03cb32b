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
    s.caught_up()
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
    let s = falls_back(Nip77::Refuse("blocked: negentropy disabled".into()));
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

/// Seconds in an hour.
const HOUR: u64 = 3_600;

/// A DM inbox: five wraps dated as NIP-59 dates them (hours back). The socket drops for
/// about a second at 2 s; meanwhile a wrap dated 30 h back reaches the relay.
fn inbox_run(nip77: Nip77) -> Sim {
    let mut relay = RelayModel::with_events(0);
    relay.nip77 = nip77;
    // The model's wraps carry no `p` tag: what is tested is the window, not the tag.
    relay.ignores_tags = true;
    for n in 1..=5 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - n * 7 * HOUR, 1059));
    }
    let mut s = sim(relay);
    s.at(ms(100), subscribe(r##"{"kinds":[1059],"#p":["me"]}"##));
    s.at(secs(2), Action::RelayDown);
    s.at(
        ms(2_500),
        Action::Store(StoredEvent::new(6, UNIX_START - 30 * HOUR, 1059)),
    );
    s.at(secs(3), Action::RelayUp);
    s.run_for(secs(15));
    s
}

#[test]
fn a_gift_wrap_dated_30_hours_back_during_a_gap_is_delivered_by_since() {
    let s = inbox_run(Nip77::Unsupported);
    assert_eq!(delivered(&s), [1, 2, 3, 4, 5, 6]);
    // The window: from when the relay was last heard (its EOSE, at 0 s) minus the wraps' 49 h.
    assert_eq!(
        caught_up(&s),
        [(CatchUpMethod::Since, UNIX_START - 49 * HOUR, 1)]
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_gift_wrap_dated_30_hours_back_during_a_gap_is_delivered_by_nip_77() {
    let s = inbox_run(Nip77::Supported);
    assert_eq!(delivered(&s), [1, 2, 3, 4, 5, 6]);
    // The first answer was the relay's whole set: exact from 0.
    assert_eq!(caught_up(&s), [(CatchUpMethod::Negentropy, 0, 1)]);
    assert_eq!(s.relay.neg_opens.len(), 1);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_note_late_inside_the_memorys_span_is_recovered_by_nip_77() {
    // Forty notes over the last hour; the filter's `limit` cut the first answer to the
    // newest twenty, the oldest of them (21) dated 1 710 s back.
    let mut relay = RelayModel::with_events(0);
    relay.nip77 = Nip77::Supported;
    for n in 1..=40 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - HOUR + n * 90, 1));
    }
    let mut s = sim(relay);
    s.at(ms(100), subscribe(r#"{"kinds":[1],"limit":20}"#));
    // Dated 20 min back, far past the 2-minute lookback, inside what the memory holds.
    outage(&mut s, vec![StoredEvent::new(41, UNIX_START - 1_200, 1)]);
    s.run_for(secs(12));
    assert_eq!(sorted(delivered(&s)), (21..=41).collect::<Vec<_>>());
    assert_eq!(
        caught_up(&s),
        [(CatchUpMethod::Negentropy, UNIX_START - 1_710, 1)]
    );
    insta::assert_snapshot!(s.transcript());
}

/// Notes and reactions under one subscription; during the gap a note dated 40 s back and a
/// reaction dated 90 s back reach the relay.
fn two_filters(relay: RelayModel) -> Sim {
    let mut relay = relay;
    relay.nip77 = Nip77::Supported;
    for n in 1..=2 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - 20 + n, 1));
    }
    for n in 3..=6 {
        relay
            .events
            .push(StoredEvent::new(n, UNIX_START - 20 + n, 7));
    }
    let mut s = sim(relay);
    s.at(
        ms(100),
        Action::Subscribe(
            vec![r#"{"kinds":[1]}"#.into(), r#"{"kinds":[7]}"#.into()],
            Priority::NORMAL,
        ),
    );
    outage(
        &mut s,
        vec![
            StoredEvent::new(7, UNIX_START - 40, 1),
            StoredEvent::new(8, UNIX_START - 90, 7),
        ],
    );
    s.run_for(secs(12));
    s
}

fn neg_opens(s: &Sim) -> Vec<String> {
    s.relay
        .neg_opens
        .iter()
        .map(|(_, _, w)| w.clone())
        .collect()
}

#[test]
fn a_two_filter_subscription_reconciles_both_filters() {
    let s = two_filters(RelayModel::with_events(0));
    assert_eq!(sorted(delivered(&s)), (1..=8).collect::<Vec<_>>());
    // One session per filter, the second's wire id marked with its index.
    assert_eq!(neg_opens(&s), ["n0:2", "n0:2.1"]);
    assert_eq!(caught_up(&s), [(CatchUpMethod::Negentropy, 0, 2)]);
    assert_eq!(s.session.stats().negentropy_failed, 0);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn one_filters_session_failing_leaves_the_others_result() {
    // strfry refuses a set larger than its `maxSyncEvents`: here the reactions' (five).
    let mut relay = RelayModel::with_events(0);
    relay.neg_max_items = Some(4);
    let s = two_filters(relay);
    assert_eq!(sorted(delivered(&s)), (1..=8).collect::<Vec<_>>());
    assert_eq!(neg_opens(&s), ["n0:2", "n0:2.1"]);
    // The notes' reconciliation found 7 and fetched it by id; the reactions took a `since`
    // window alone, and the report is exact where both are: the window's start.
    let fetch = s
        .reqs()
        .find(|(_, t)| t.contains("\"ids\""))
        .map(|(_, t)| t.to_owned());
    assert!(fetch.is_some(), "the notes' missing id fetched");
    let windows: Vec<String> = s
        .reqs()
        .filter(|(_, t)| t.contains("\"since\""))
        .map(|(_, t)| t.to_owned())
        .collect();
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert!(
        windows[0].contains(r#"{"kinds":[7],"limit":500,"since":"#)
            && !windows[0].contains(r#"{"kinds":[1],"limit":500"#),
        "only the reactions' window: {}",
        windows[0]
    );
    assert_eq!(caught_up(&s), [(CatchUpMethod::Since, UNIX_START - 120, 2)]);
    // About that filter, not the relay: NIP-77 stays usable.
    assert_eq!(s.session.stats().negentropy_failed, 1);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn nip_77_sessions_open_at_once_stay_under_the_relays_bound() {
    let mut relay = relay_with_recent(3);
    relay.nip77 = Nip77::Supported;
    let mut config = RelayConfig::default();
    if let Some(c) = config.catch_up.as_mut() {
        c.negentropy_sessions = 2;
    }
    let mut s = Sim::new(config, 7, relay);
    s.at(Duration::ZERO, Action::Connect);
    for _ in 0..5 {
        s.at(ms(100), subscribe(r#"{"kinds":[1]}"#));
    }
    outage(&mut s, vec![StoredEvent::new(4, UNIX_START - 30, 1)]);
    s.run_for(secs(12));
    // Sessions open: a NEG-OPEN opens one, the client's NEG-CLOSE ends it.
    let (mut open, mut most) = (0i32, 0i32);
    for line in s.transcript().lines() {
        if line.contains(r#"tx  ["NEG-OPEN""#) {
            open += 1;
            most = most.max(open);
        } else if line.contains(r#"tx  ["NEG-CLOSE""#) {
            open -= 1;
        }
    }
    assert_eq!(most, 2, "never more than the bound, and the bound reached");
    assert_eq!(s.relay.neg_opens.len(), 5, "every subscription reconciled");
    let methods: Vec<CatchUpMethod> = caught_up(&s).into_iter().map(|c| c.0).collect();
    assert_eq!(methods, [CatchUpMethod::Negentropy; 5]);
}
