//! One test per rule of the relay table in `docs/architecture.md` that the transcripts do not
//! already pin.

use std::time::Duration;

use tether_core::nostr::{
    Carries, Event, Priority, Rejection, RelayConfig, RelaySession, SubscriptionId, Transmit,
};
use tether_core::{Epoch, GateScope, Instant};
use tether_testkit::{Action, RelayModel, Sim, StoredEvent};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn kinds(k: u32, p: Priority) -> Action {
    Action::Subscribe(vec![format!(r#"{{"kinds":[{k}]}}"#)], p)
}

fn gate_after_reconnect(scope: GateScope) -> Option<Instant> {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .push_back("rate-limited: retry in 120s".into());
    let config = {
        let mut config = RelayConfig::default();
        config.gate_scope = scope;
        config
    };
    let mut s = Sim::new(config, 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.at(ms(1_000), Action::DropSocket);
    s.run_for(Duration::from_secs(5));
    s.session.gate().ready_at()
}

#[test]
fn gate_resets_with_the_connection_unless_scoped_to_the_session() {
    assert_eq!(gate_after_reconnect(GateScope::Connection), None);
    assert_eq!(
        gate_after_reconnect(GateScope::Session),
        Some(Instant::from_millis(120_120))
    );
}

#[test]
fn session_scoped_gate_holds_the_replay_after_reconnect() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .push_back("rate-limited: retry in 20s".into());
    let config = {
        let mut config = RelayConfig::default();
        config.gate_scope = GateScope::Session;
        config
    };
    let mut s = Sim::new(config, 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.at(ms(1_000), Action::DropSocket);
    s.run_for(Duration::from_secs(30));
    let replay = s.reqs().nth(1).map(|(at, _)| at);
    assert_eq!(
        replay,
        Some(Instant::from_millis(20_120)),
        "the replay waits for the window"
    );
}

#[test]
fn replay_sends_higher_priority_first() {
    let mut s = Sim::new(RelayConfig::default(), 1, RelayModel::with_events(0));
    s.at(ms(0), kinds(1, Priority::LOW));
    s.at(ms(0), kinds(2, Priority::NORMAL));
    s.at(ms(0), kinds(3, Priority::HIGH));
    s.at(ms(0), kinds(4, Priority::NORMAL));
    s.at(ms(0), Action::Connect);
    s.run_for(Duration::from_secs(1));
    let order: Vec<&str> = s.sent.iter().map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(
        order,
        vec![
            r#"["REQ","2:1",{"kinds":[3]}]"#,
            r#"["REQ","1:1",{"kinds":[2]}]"#,
            r#"["REQ","3:1",{"kinds":[4]}]"#,
            r#"["REQ","0:1",{"kinds":[1]}]"#,
        ]
    );
}

#[test]
fn retry_state_clears_on_a_clean_eose() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .extend(["error: a".to_owned(), "error: b".to_owned()]);
    let mut s = Sim::new(RelayConfig::default(), 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.run_for(Duration::from_secs(10));
    let view = s
        .session
        .subscription(SubscriptionId(0))
        .expect("registered");
    assert_eq!(
        view.retries, 0,
        "two refusals, then EOSE: the count starts over"
    );
    assert_eq!(s.sent.len(), 3);
}

#[test]
fn subscribe_is_never_held_behind_the_gate() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .push_back("rate-limited: retry in 60s".into());
    let mut s = Sim::new(RelayConfig::default(), 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.at(ms(500), kinds(2, Priority::NORMAL));
    s.run_for(Duration::from_secs(1));
    assert!(s.session.gate().is_open(s.now()));
    assert_eq!(
        s.sent
            .last()
            .map(|(at, _, t)| (at.since_origin(), t.as_str())),
        Some((ms(500), r#"["REQ","1:1",{"kinds":[2]}]"#))
    );
}

#[test]
fn disconnect_cancels_everything_and_only_the_close_is_sent() {
    let mut relay = RelayModel::with_events(0);
    relay.scripted_closed.push_back("error: later".into());
    let mut s = Sim::new(RelayConfig::default(), 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.at(ms(200), Action::Disconnect);
    s.at(ms(300), kinds(2, Priority::NORMAL));
    s.at(ms(400), Action::Publish(StoredEvent::new(5, 1, 1).json));
    s.run_for(Duration::from_secs(120));
    assert_eq!(s.sent.len(), 1, "only the first REQ went out");
    assert_eq!(s.transcript().matches("tx  Close").count(), 1);
    assert_eq!(
        s.session.poll_timeout(),
        None,
        "no timer survives a disconnect"
    );
    assert_eq!(
        s.session.subscriptions().len(),
        2,
        "subscriptions stay registered for a later connect"
    );
}

#[test]
fn publishes_are_matched_by_id_when_oks_come_out_of_order() {
    let mut s = RelaySession::new(RelayConfig::default(), 1);
    let t = Instant::ZERO;
    s.connect(t);
    s.handle_open(t, Epoch(1)).unwrap();
    let a = StoredEvent::new(1, 1, 1);
    let b = StoredEvent::new(2, 1, 1);
    s.publish(t, &a.json).unwrap();
    s.publish(t, &b.json).unwrap();
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    s.handle_frame(
        t,
        Epoch(1),
        &format!(r#"["OK","{}",false,"blocked: spam"]"#, b.id()),
    )
    .unwrap();
    s.handle_frame(t, Epoch(1), &format!(r#"["OK","{}",true,""]"#, a.id()))
        .unwrap();
    let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    assert_eq!(
        events,
        vec![
            Event::Rejected {
                id: b.id(),
                reason: Rejection::Refused {
                    message: "blocked: spam".into()
                }
            },
            Event::Published { id: a.id() },
        ]
    );
}

#[test]
fn duplicate_counts_as_published_and_unanswered_publishes_time_out_after_bounded_resends() {
    let mut s = RelaySession::new(RelayConfig::default(), 1);
    let mut t = Instant::ZERO;
    s.connect(t);
    s.handle_open(t, Epoch(1)).unwrap();
    let a = StoredEvent::new(1, 1, 1);
    let b = StoredEvent::new(2, 1, 1);
    s.publish(t, &a.json).unwrap();
    s.publish(t, &b.json).unwrap();
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    s.handle_frame(
        t,
        Epoch(1),
        &format!(r#"["OK","{}",false,"duplicate: already have it"]"#, a.id()),
    )
    .unwrap();
    assert_eq!(s.poll_event(), Some(Event::Published { id: a.id() }));
    let mut sends = 0;
    let mut outcome = None;
    while let Some(next) = s.poll_timeout() {
        t = next.max(t);
        s.handle_timeout(t);
        // Keep the socket alive: the relay answers pings, just never this OK.
        s.handle_pong(t, Epoch(1)).unwrap();
        while let Some(tx) = s.poll_transmit() {
            if matches!(
                tx,
                Transmit::Send {
                    carries: Carries::Event(_),
                    ..
                }
            ) {
                sends += 1;
            }
        }
        while let Some(e) = s.poll_event() {
            if let Event::Rejected { reason, .. } = e {
                outcome = Some(reason);
            }
        }
        if outcome.is_some() || t > Instant::from_millis(600_000) {
            break;
        }
    }
    assert_eq!(outcome, Some(Rejection::TimedOut));
    assert_eq!(sends, 5, "5 resends after the first, then the one report");
}

#[test]
fn publishes_wait_for_a_connection() {
    let mut s = Sim::new(RelayConfig::default(), 1, RelayModel::with_events(0));
    s.at(ms(0), Action::Publish(StoredEvent::new(3, 1, 1).json));
    s.at(ms(1_000), Action::Connect);
    s.run_for(Duration::from_secs(2));
    let published: Vec<_> = s
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Published { .. }))
        .collect();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].0, Instant::from_millis(1_040));
}

#[test]
fn eose_then_closed_every_time_cannot_reset_the_retry_bound() {
    let mut relay = RelayModel::with_events(1);
    relay.close_after_eose = Some("error: go away".into());
    let mut s = Sim::new(RelayConfig::default(), 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.run_for(Duration::from_secs(600));
    let reqs = s.reqs().count();
    assert_eq!(
        reqs, 6,
        "the first REQ and 5 retries, not one per EOSE forever"
    );
    let closed = s.heard(|e| matches!(e, Event::Closed { attempts: 5, .. }).then_some(()));
    assert_eq!(closed.len(), 1);
}

#[test]
fn a_refusal_long_after_a_clean_eose_starts_a_fresh_retry_count() {
    let mut relay = RelayModel::with_events(0);
    relay
        .scripted_closed
        .extend(["error: a".to_owned(), "error: b".to_owned()]);
    let mut s = Sim::new(RelayConfig::default(), 1, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    // Live since ~2 s; a minute later the relay closes it.
    s.at(
        Duration::from_secs(60),
        Action::RelayFrame(r#"["CLOSED","0:3","error: restart"]"#.into()),
    );
    s.run_for(Duration::from_secs(61));
    let retrying = s.heard(|e| match e {
        Event::Retrying { attempt, .. } => Some(*attempt),
        _ => None,
    });
    assert_eq!(retrying, vec![1, 2, 1]);
}

/// The last thing the application heard about `id`'s progress.
fn last_heard(s: &Sim, id: SubscriptionId) -> Option<&Event> {
    s.events.iter().rev().map(|(_, e)| e).find(|e| match e {
        Event::Eose { sub }
        | Event::Retrying { sub, .. }
        | Event::Queued { sub }
        | Event::EoseTimeout { sub }
        | Event::Closed { sub, .. } => *sub == id,
        _ => false,
    })
}

#[test]
fn a_subscription_waiting_for_a_slot_is_told_queued_at_once() {
    // The `tether demo` relay: a REQ budget with hints and a 50-subscription cap. A replay or
    // a retry that comes due while every slot is taken waits for a slot; the app must hear
    // `Queued` then, not only when some later timer (a ping 30 s on) runs the send queue.
    for seed in 1..=8 {
        let mut relay = RelayModel::with_events(3);
        relay.budget = Some(tether_testkit::ReqBudget {
            max: 24,
            window: Duration::from_secs(2),
            hint: true,
        });
        relay.max_subs = Some((50, tether_testkit::LimitStyle::Closed));
        let mut s = Sim::new(RelayConfig::default(), seed, relay);
        for k in 0..60 {
            s.at(ms(0), kinds(k, Priority::NORMAL));
        }
        s.at(ms(0), Action::Connect);
        s.run_for(Duration::from_secs(10));
        let limit = s.session.subscription_limit().expect("the cap was learned");
        assert_eq!(s.session.open_subscriptions(), limit, "seed {seed}");
        for id in (0..60).map(SubscriptionId) {
            let Some(view) = s.session.subscription(id) else {
                continue;
            };
            if view.state != tether_core::nostr::SubState::Queued {
                continue;
            }
            assert!(
                matches!(last_heard(&s, id), Some(Event::Queued { .. })),
                "seed {seed}: {id} waits for a slot but was last told {:?}",
                last_heard(&s, id)
            );
        }
    }
}

#[test]
fn a_freed_slot_goes_to_the_longest_waiting_subscription_even_in_a_reused_slot() {
    // Slots are reused newest-freed first, so ids do not follow subscription order: here
    // kinds 4, 5 and 6 land in slots 3, 2 and 1. Slots must still go first come, first served.
    let config = {
        let mut config = RelayConfig::default();
        config.max_subscriptions = Some(1);
        config
    };
    let mut s = Sim::new(config, 1, RelayModel::with_events(0));
    s.at(ms(0), Action::Connect);
    for k in 0..4 {
        s.at(ms(100), kinds(k, Priority::NORMAL));
    }
    for slot in 1..4 {
        s.at(ms(1_000), Action::Unsubscribe(SubscriptionId(slot)));
    }
    for k in 4..7 {
        s.at(ms(2_000), kinds(k, Priority::NORMAL));
    }
    let reused = |slot: u64| SubscriptionId((1 << 32) | slot);
    s.at(ms(3_000), Action::Unsubscribe(SubscriptionId(0)));
    s.at(ms(4_000), Action::Unsubscribe(reused(3)));
    s.at(ms(5_000), Action::Unsubscribe(reused(2)));
    s.run_for(Duration::from_secs(6));
    let promoted: Vec<(Instant, &str)> = s
        .reqs()
        .filter(|(at, _)| *at >= Instant::from_millis(3_000))
        .collect();
    assert_eq!(
        promoted,
        [
            (
                Instant::from_millis(3_000),
                r#"["REQ","100000003:1",{"kinds":[4]}]"#
            ),
            (
                Instant::from_millis(4_000),
                r#"["REQ","100000002:1",{"kinds":[5]}]"#
            ),
            (
                Instant::from_millis(5_000),
                r#"["REQ","100000001:1",{"kinds":[6]}]"#
            ),
        ]
    );
}

#[test]
fn id_less_cap_notices_requeue_only_while_something_of_ours_is_ahead() {
    // The relay answers no REQ and keeps sending nostr-rs-relay's id-less cap NOTICE. Each
    // is pinned on the newest REQ still waiting: the first on s1 (s0 ahead: cap 1, queued),
    // the second on s0 (nothing ahead: surfaced, which frees the slot for s1), the third on
    // s1 (nothing ahead now: surfaced). No subscription is re-queued without a REQ of ours
    // ahead of it; each re-queue also counts against the retry bound (the property tests
    // found a NOTICE pinned on the wrong REQ re-queueing one 8 times before that).
    let mut relay = RelayModel::with_events(0);
    relay.silent_reqs = true;
    let mut s = Sim::new(RelayConfig::default(), 5, relay);
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds(1, Priority::NORMAL));
    s.at(ms(200), kinds(1, Priority::NORMAL));
    let notice =
        r#"["NOTICE","Subscription error: Maximum concurrent subscription count reached"]"#;
    for i in 0..20 {
        s.at(ms(300 + 500 * i), Action::RelayFrame(notice.to_owned()));
    }
    s.run_for(Duration::from_secs(20));
    assert_eq!(
        s.heard(|e| match e {
            Event::Queued { sub } => Some(format!("queued {sub}")),
            Event::Closed { sub, attempts, .. } => Some(format!("closed {sub} after {attempts}")),
            Event::SubscriptionLimit { max } => Some(format!("limit {max}")),
            _ => None,
        }),
        [
            "limit 1",
            "queued s1",
            "closed s0 after 0",
            "closed s1 after 1"
        ]
    );
    assert_eq!(
        s.reqs()
            .map(|(_, t)| t.split('"').nth(3).unwrap_or_default().to_owned())
            .collect::<Vec<_>>(),
        ["0:1", "1:1", "1:2"]
    );
}
