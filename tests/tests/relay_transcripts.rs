//! Canonical relay-session scenarios, pinned as insta transcripts (inputs and outputs with
//! relative milliseconds) and checked with exact assertions. Every step also runs the
//! invariant checker.

use std::time::Duration;

use tether_core::nostr::{Event, Priority, RelayConfig, SubscriptionId};
use tether_testkit::{Action, LimitStyle, RelayModel, ReqBudget, Sim, StoredEvent, UNIX_START};

const SEED: u64 = 7;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn kinds1() -> Action {
    Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority::NORMAL)
}

fn sim(relay: RelayModel) -> Sim {
    Sim::new(RelayConfig::default(), SEED, relay)
}

fn count<F: Fn(&Event) -> bool>(sim: &Sim, f: F) -> usize {
    sim.events.iter().filter(|(_, e)| f(e)).count()
}

fn reqs(sim: &Sim) -> Vec<(u128, String)> {
    sim.reqs()
        .map(|(at, t)| (at.since_origin().as_millis(), t.to_owned()))
        .collect()
}

#[test]
fn fresh_connect_three_subscriptions() {
    let mut s = sim(RelayModel::with_events(2));
    for _ in 0..3 {
        s.at(ms(0), kinds1());
    }
    s.at(ms(0), Action::Connect);
    s.run_for(secs(1));
    assert_eq!(reqs(&s).len(), 3, "one REQ each, in one batch");
    assert_eq!(count(&s, |e| matches!(e, Event::Eose { .. })), 3);
    assert_eq!(count(&s, |e| matches!(e, Event::Received { .. })), 6);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn twenty_sub_replay_with_a_rate_limit_mid_replay() {
    let mut relay = RelayModel::with_events(0);
    // The relay allows 10 REQs per 3 s: the second batch's tail is refused with `retry in 3s`.
    relay.budget = Some(ReqBudget {
        max: 10,
        window: secs(3),
        hint: true,
    });
    let mut s = sim(relay);
    for _ in 0..20 {
        s.at(ms(0), kinds1());
    }
    s.at(ms(0), Action::Connect);
    s.run_for(secs(20));
    let reqs = reqs(&s);
    let refused = count(&s, |e| matches!(e, Event::RateLimited { .. }));
    assert_eq!(refused, 6, "REQs 11-16 of 8+8 are refused");
    // Everything ends live, nothing surfaced.
    assert_eq!(count(&s, |e| matches!(e, Event::Eose { .. })), 20);
    assert_eq!(count(&s, |e| matches!(e, Event::Closed { .. })), 0);
    // The third batch waits for the gate (opened at the refusal, ~30 ms, for 3 s).
    let third_batch = reqs
        .iter()
        .find(|(_, t)| t.contains("\"10:1\""))
        .map(|(at, _)| *at);
    assert!(
        third_batch.is_some_and(|t| t >= 3_000),
        "third batch at {third_batch:?}"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_shorter_second_hint_does_not_shrink_the_window() {
    let mut relay = RelayModel::with_events(0);
    relay.scripted_closed.extend([
        "rate-limited: slow down, retry in 30s".to_owned(),
        "rate-limited: retry in 2s".to_owned(),
    ]);
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    s.at(ms(200), kinds1());
    s.run_for(secs(60));
    let reqs = reqs(&s);
    assert_eq!(reqs.len(), 4);
    // Both retries wait for the 30 s window opened at ~110 ms, not the 2 s one.
    assert!(reqs[2].0 >= 30_110 && reqs[3].0 >= 30_110, "{reqs:?}");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn too_many_subscriptions_is_learned_and_the_refused_one_waits_for_a_slot() {
    let mut relay = RelayModel::with_events(0);
    relay.max_subs = Some((3, LimitStyle::Closed));
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    for i in 0..5 {
        s.at(ms(100 + i * 100), kinds1());
    }
    // A slot frees: the refused one (registered first) goes out, the fifth still waits.
    s.at(secs(2), Action::Unsubscribe(SubscriptionId(0)));
    s.run_for(secs(5));
    assert_eq!(
        count(&s, |e| matches!(e, Event::Closed { .. })),
        0,
        "nothing surfaced"
    );
    assert_eq!(
        s.heard(|e| match e {
            Event::Queued { sub } => Some(*sub),
            _ => None,
        }),
        vec![SubscriptionId(3), SubscriptionId(4)],
    );
    assert_eq!(s.session.subscription_limit(), Some(3));
    let reqs: Vec<String> = reqs(&s).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        reqs.len(),
        5,
        "s3 twice (refused, then in the freed slot), no retry timer"
    );
    assert!(reqs[4].contains("\"3:2\""), "{reqs:?}");
    assert_eq!(
        s.session.subscription(SubscriptionId(4)).map(|v| v.state),
        Some(tether_core::nostr::SubState::Queued)
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn six_retryable_refusals_give_five_retries_then_closed() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .extend((0..6).map(|i| format!("error: internal error {i}")));
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    s.run_for(secs(120));
    assert_eq!(reqs(&s).len(), 6);
    let closed: Vec<_> = s
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Closed { .. }))
        .collect();
    assert_eq!(closed.len(), 1);
    assert!(
        matches!(&closed[0].1, Event::Closed { attempts: 5, reason, .. } if reason == "error: internal error 5")
    );
    assert_eq!(count(&s, |e| matches!(e, Event::Retrying { .. })), 5);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn auth_required_then_authenticate_then_retry_once() {
    let mut relay = RelayModel::with_events(1);
    relay.auth_required = true;
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    // Subscribes before the challenge is answered: refused, held, retried after the OK.
    s.at(ms(15), kinds1());
    s.run_for(secs(2));
    let reqs = reqs(&s);
    assert_eq!(reqs.len(), 2);
    assert_eq!(count(&s, |e| matches!(e, Event::Authenticated)), 1);
    assert_eq!(count(&s, |e| matches!(e, Event::Eose { .. })), 1);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn second_auth_required_surfaces() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .extend(["auth-required: a".to_owned(), "auth-required: b".to_owned()]);
    relay.auth_required = true;
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(15), kinds1());
    s.run_for(secs(2));
    let closed = s.heard(|e| match e {
        Event::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(closed, vec!["auth-required: b".to_owned()]);
}

#[test]
fn fifty_subs_socket_drop_replay_and_catch_up_in_paced_batches() {
    let mut s = sim(RelayModel::with_events(3));
    for _ in 0..50 {
        s.at(ms(0), kinds1());
    }
    s.at(ms(0), Action::Connect);
    s.at(secs(5), Action::DropSocket);
    s.run_for(secs(10));
    let reconnect_batches: Vec<_> = s
        .invariants
        .batches
        .iter()
        .filter(|(t, _)| t.since_origin() > secs(5))
        .copied()
        .collect();
    // The replay and each subscription's catch-up steps under its open REQ (NEG-OPENs until
    // the first is refused, as nostr-rs-relay refuses them; then the `since` window) share
    // one pacing: 8 sends per 50 ms, the fresh REQs first.
    let neg_opens = s.transcript().matches("tx  [\"NEG-OPEN\"").count();
    assert!(
        (1..=8).contains(&neg_opens),
        "{neg_opens} NEG-OPENs before the refusal"
    );
    let sizes: Vec<usize> = reconnect_batches.iter().map(|b| b.1).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 50 + 50 + neg_opens);
    assert!(
        sizes[..sizes.len() - 1].iter().all(|&n| n == 8),
        "{sizes:?}"
    );
    for w in reconnect_batches.windows(2) {
        assert_eq!(w[1].0 - w[0].0, ms(50));
    }
    let replayed: Vec<_> = reqs(&s).into_iter().filter(|(t, _)| *t > 5_000).collect();
    let (live, windows): (Vec<_>, Vec<_>) = replayed
        .iter()
        .partition(|(_, r)| r.ends_with(r#"{"kinds":[1],"limit":1}]"#));
    // Every subscription falls back to the window: one after its NEG-OPEN was refused, the
    // rest without asking again.
    assert_eq!((live.len(), windows.len()), (50, 50));
    let since = format!(r#""since":{}"#, UNIX_START - 120);
    assert!(
        windows.iter().all(|(_, r)| r.contains(&since)),
        "the window starts the lookback before the relay was last heard: {windows:?}"
    );
    // Each live half re-delivers the newest stored event, dropped as a duplicate; the
    // windows hold none of these old events.
    assert_eq!(count(&s, |e| matches!(e, Event::Received { .. })), 150);
    assert_eq!(s.session.stats().duplicates, 50);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn accept_then_drop_relay_sees_growing_delays() {
    let mut relay = RelayModel::with_events(0);
    relay.drop_after = Some(ms(100));
    let mut s = sim(relay);
    s.at(ms(0), kinds1());
    s.at(ms(0), Action::Connect);
    s.run_for(secs(120));
    let delays: Vec<u128> = s
        .events
        .iter()
        .filter_map(|(at, e)| match e {
            Event::Disconnected {
                reconnect_at: Some(r),
                ..
            } => Some((*r - *at).as_millis()),
            _ => None,
        })
        .collect();
    assert!(delays.len() >= 6);
    // 1, 2, 4, 8, 16, 30 s ceilings with +-50%: growing, not a 1 s loop.
    for (d, ceiling) in delays
        .iter()
        .zip([1_000u128, 2_000, 4_000, 8_000, 16_000, 30_000])
    {
        assert!(*d >= ceiling / 2 && *d <= ceiling * 3 / 2, "{delays:?}");
    }
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn disconnect_during_pending_reconnect_cancels_it() {
    let mut s = sim(RelayModel::with_events(0));
    s.at(ms(0), kinds1());
    s.at(ms(0), Action::Connect);
    s.at(secs(1), Action::DropSocket);
    s.at(ms(1_200), Action::Disconnect);
    s.run_for(secs(120));
    let opens = s
        .transcript()
        .lines()
        .filter(|l| l.ends_with("tx  Open"))
        .count();
    assert_eq!(opens, 1, "no reconnect after disconnect");
    assert_eq!(s.session.poll_timeout(), None);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn idle_socket_is_pinged_then_replaced_when_the_pong_never_comes() {
    let mut relay = RelayModel::with_events(0);
    relay.ignore_pings = true;
    let mut s = sim(relay);
    s.at(ms(0), kinds1());
    s.at(ms(0), Action::Connect);
    s.run_for(secs(52));
    let t = s.transcript();
    let ping = t.lines().find(|l| l.ends_with("tx  Ping")).expect("pinged");
    assert!(ping.trim_start().starts_with("30040ms"), "{ping}");
    let close = t
        .lines()
        .find(|l| l.ends_with("tx  Close"))
        .expect("closed");
    assert!(close.trim_start().starts_with("50040ms"), "{close}");
    insta::assert_snapshot!(t);
}

#[test]
fn max_subscriptions_ten_with_twenty_five_subs() {
    let config = {
        let mut config = RelayConfig::default();
        config.max_subscriptions = Some(10);
        config
    };
    let mut s = Sim::new(config, SEED, RelayModel::with_events(0));
    s.at(ms(0), Action::Connect);
    for i in 0..25 {
        s.at(
            ms(100),
            Action::Subscribe(vec![format!(r#"{{"kinds":[{i}]}}"#)], Priority::NORMAL),
        );
    }
    // Close the first five: five queued ones take their slots, in order.
    for i in 0..5 {
        s.at(secs(1), Action::Unsubscribe(SubscriptionId(i)));
    }
    s.run_for(secs(2));
    assert_eq!(s.session.open_subscriptions(), 10);
    assert_eq!(count(&s, |e| matches!(e, Event::Queued { .. })), 15);
    let reqs = reqs(&s);
    assert_eq!(reqs.len(), 15);
    assert!(reqs[10..]
        .iter()
        .zip(10..15)
        .all(|((_, r), i)| r.contains(&format!("\"{i:x}:1\""))));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn publish_rate_limited_then_accepted() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_ok
        .push_back((false, "rate-limited: retry in 4s".into()));
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(
        ms(100),
        Action::Publish(StoredEvent::new(42, 1_700_000_000, 1).json),
    );
    s.run_for(secs(10));
    let published: Vec<_> = s
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Published { .. }))
        .collect();
    assert_eq!(published.len(), 1);
    assert!(
        published[0].0.since_origin() >= ms(4_110),
        "resent behind the 4 s gate"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn stale_frame_after_re_req_is_ignored() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .push_back("error: shutting down".into());
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    // Long after the re-REQ (attempt 2), the relay sends for attempt 1.
    let late = StoredEvent::new(9, 1_000_009, 1);
    s.at(
        secs(5),
        Action::RelayFrame(format!(r#"["EVENT","0:1",{}]"#, late.json)),
    );
    s.at(secs(5), Action::RelayFrame(r#"["EOSE","0:1"]"#.into()));
    s.run_for(secs(6));
    assert_eq!(count(&s, |e| matches!(e, Event::Received { .. })), 0);
    assert_eq!(s.session.stats().stale_attempt, 2);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn notice_only_refusal_is_attributed_to_the_newest_pending_req() {
    let mut relay = RelayModel::with_events(0);
    relay.max_subs = Some((2, LimitStyle::Notice));
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    // Four REQs in flight before the relay answers: its two NOTICEs name no subscription.
    // Relays answer the cap at once but queries asynchronously, so the refused ones are the
    // newest; each NOTICE is pinned on the newest REQ still waiting, and waits for a slot.
    for i in 0..4 {
        s.at(ms(100 + i), kinds1());
    }
    s.at(secs(1), kinds1());
    s.run_for(secs(2));
    assert_eq!(count(&s, |e| matches!(e, Event::Closed { .. })), 0);
    assert_eq!(
        s.heard(|e| match e {
            Event::Queued { sub } => Some(*sub),
            _ => None,
        }),
        vec![SubscriptionId(3), SubscriptionId(2), SubscriptionId(4)]
    );
    assert_eq!(s.session.subscription_limit(), Some(2));
    assert_eq!(
        s.relay.reqs.len(),
        4,
        "the fifth waits instead of being refused"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_req_that_never_gets_an_answer_is_surfaced_not_waited_on_forever() {
    let mut relay = RelayModel::with_events(0);
    relay.silent_reqs = true;
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    s.run_for(Duration::from_secs(600));
    assert_eq!(count(&s, |e| matches!(e, Event::EoseTimeout { .. })), 6);
    assert_eq!(
        count(&s, |e| matches!(e, Event::Closed { attempts: 5, .. })),
        1
    );
}

#[test]
fn a_future_created_at_does_not_make_the_subscription_deaf_after_a_reconnect() {
    // The relay holds an honest event and two dated far ahead: u64::MAX and ten years on.
    let mut relay = RelayModel::with_events(0);
    relay.events.push(StoredEvent::new(1, UNIX_START - 60, 1));
    relay.events.push(StoredEvent::new(2, u64::MAX, 1));
    relay
        .events
        .push(StoredEvent::new(3, UNIX_START + 10 * 365 * 86_400, 1));
    let mut s = sim(relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    s.at(secs(2), Action::DropSocket);
    // After the reconnect, a live event: a relay honouring a poisoned `since` would drop it.
    s.at(
        secs(10),
        Action::Store(StoredEvent::new(4, UNIX_START + 10, 1)),
    );
    s.run_for(secs(12));
    let replay = reqs(&s).pop().map(|(_, text)| text);
    // The window starts the lookback (120 s) before the relay was last heard (its EOSE at
    // 120 ms), whatever the dates.
    let since = UNIX_START - 120;
    assert_eq!(
        replay.as_deref(),
        Some(
            format!(
                r#"["REQ","0:2",{{"kinds":[1],"limit":0}},{{"kinds":[1],"limit":500,"since":{since}}}]"#
            )
            .as_str()
        ),
        "the window follows the wall clock, not the future-dated events"
    );
    let delivered: Vec<String> = s.heard(|e| match e {
        Event::Received { id, .. } => Some(id.to_string()[60..].to_owned()),
        _ => None,
    });
    // 1-3 once each, newest first as the relay answers (the catch-up re-sends 2 and 3, dated
    // after the window's start, and the session drops them as remembered), then the live 4.
    assert_eq!(delivered, ["0002", "0003", "0001", "0004"]);
    assert_eq!(s.session.stats().future_dated, 2, "{}", s.transcript());
    // 2 and 3 twice each: by the live half's one stored event while NIP-77 was tried, and by
    // the window.
    assert_eq!(s.session.stats().duplicates, 4);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn same_seed_same_transcript_different_seed_different_delays() {
    let run = |seed| {
        let mut relay = RelayModel::with_events(2);
        relay.drop_after = Some(secs(3));
        relay.budget = Some(ReqBudget {
            max: 5,
            window: secs(2),
            hint: false,
        });
        let mut s = Sim::new(RelayConfig::default(), seed, relay);
        for _ in 0..12 {
            s.at(ms(0), kinds1());
        }
        s.at(ms(0), Action::Connect);
        s.run_for(secs(90));
        s.transcript().to_owned()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}
