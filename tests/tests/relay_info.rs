//! NIP-11 as the session's starting values, and what the relay actually does winning over
//! them, as insta transcripts on the `Sim` (simulated time), with exact assertions.

use std::time::Duration;

use tether_core::nostr::reason::{classify, dialect, Class, Terminal};
use tether_core::nostr::{
    Error, Event, Priority, Rejection, RelayConfig, SubState, SubscriptionId,
};
use tether_testkit::{Action, LimitStyle, RelayModel, Sim};

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

fn document(limitation: &str) -> Action {
    Action::RelayInfo(format!(
        r#"{{"name":"sim","supported_nips":[1,11,42],"limitation":{limitation}}}"#
    ))
}

/// The subscription-limit and queue story of a run, one line per event.
fn limits(s: &Sim) -> Vec<String> {
    s.heard(|e| match e {
        Event::SubscriptionLimit { max } => Some(format!("limit {max}")),
        Event::Queued { sub } => Some(format!("queued {sub}")),
        Event::Retrying { sub, .. } => Some(format!("retrying {sub}")),
        Event::Closed { sub, .. } => Some(format!("closed {sub}")),
        _ => None,
    })
}

fn wire_ids(s: &Sim) -> Vec<String> {
    s.reqs()
        .map(|(_, t)| t.split('"').nth(3).unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_prefix_less_cap_refusal_is_learned_and_the_refused_one_queued() {
    let text = "You have reached the subscription limit for this connection";
    assert!(
        dialect(text).is_none(),
        "not in the table: the fallback reads it"
    );
    assert_eq!(
        classify(text),
        Class::Terminal(Terminal::TooManySubscriptions)
    );
    let mut relay = RelayModel::with_events(0);
    relay.max_subs = Some((2, LimitStyle::Closed));
    relay.cap_text = Some(text.to_owned());
    let mut s = Sim::new(RelayConfig::default(), SEED, relay);
    s.at(ms(0), Action::Connect);
    for i in 0..3 {
        s.at(ms(100 + 100 * i), kinds1());
    }
    s.at(secs(2), Action::Unsubscribe(SubscriptionId(1)));
    s.run_for(secs(5));
    assert_eq!(limits(&s), ["limit 2", "queued s2"]);
    assert_eq!(wire_ids(&s), ["0:1", "1:1", "2:1", "2:2"]);
    assert_eq!(
        s.session.subscription(SubscriptionId(2)).map(|v| v.state),
        Some(SubState::Live)
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_declared_cap_lower_than_the_real_one_is_corrected_upward() {
    // Declares 2, allows 4: one probe at a time past the declared cap, each accepted probe
    // raises it, the refused one makes it learned.
    let mut relay = RelayModel::with_events(0);
    relay.max_subs = Some((4, LimitStyle::Closed));
    let mut s = Sim::new(RelayConfig::default(), SEED, relay);
    s.at(ms(0), document(r#"{"max_subscriptions":2}"#));
    s.at(ms(0), Action::Connect);
    for i in 0..6 {
        s.at(ms(100 + i), kinds1());
    }
    s.run_for(secs(3));
    assert_eq!(
        limits(&s),
        [
            "limit 2",
            "queued s3",
            "queued s4",
            "queued s5",
            "limit 3",
            "limit 4",
            "queued s4"
        ]
    );
    assert_eq!(s.session.subscription_limit(), Some(4));
    assert!(!s.session.applied().limit_is_declared, "learned now");
    assert_eq!(s.session.open_subscriptions(), 4);
    assert_eq!(
        s.relay.reqs.len(),
        5,
        "one refused REQ: the probe past the real cap"
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_declared_cap_higher_than_the_real_one_is_corrected_downward() {
    // Declares 10, allows 3 and says so only in nostr-rs-relay's NOTICE.
    let mut relay = RelayModel::with_events(0);
    relay.max_subs = Some((3, LimitStyle::Notice));
    let mut s = Sim::new(RelayConfig::default(), SEED, relay);
    s.at(ms(0), document(r#"{"max_subscriptions":10}"#));
    s.at(ms(0), Action::Connect);
    for i in 0..5 {
        s.at(ms(100 + i), kinds1());
    }
    // A slot frees: the first refused one goes out.
    s.at(secs(2), Action::Unsubscribe(SubscriptionId(0)));
    s.run_for(secs(3));
    assert_eq!(
        limits(&s),
        ["limit 10", "limit 4", "queued s4", "limit 3", "queued s3"]
    );
    assert_eq!(s.session.subscription_limit(), Some(3));
    assert_eq!(s.session.open_subscriptions(), 3);
    assert_eq!(
        s.session.subscription(SubscriptionId(3)).map(|v| v.state),
        Some(SubState::Live)
    );
    // A document fetched later does not undo what the relay showed.
    s.at(secs(4), document(r#"{"max_subscriptions":10}"#));
    s.run_for(secs(1));
    assert_eq!(s.session.subscription_limit(), Some(3));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn auth_required_with_a_signer_authenticates_before_the_first_req() {
    let mut relay = RelayModel::with_events(1);
    relay.auth_required = true;
    let mut config = RelayConfig::default();
    config.authenticates = true;
    let mut s = Sim::new(config, SEED, relay);
    s.at(ms(0), document(r#"{"auth_required":true}"#));
    s.at(ms(0), kinds1());
    s.at(ms(0), kinds1());
    s.at(ms(0), Action::Connect);
    s.run_for(secs(2));
    assert!(s.session.applied().auth_first);
    assert_eq!(
        s.relay.reqs.len(),
        2,
        "no REQ refused with auth-required first"
    );
    assert!(!s.transcript().contains("auth-required"));
    assert_eq!(
        s.heard(|e| matches!(e, Event::Eose { .. }).then_some(()))
            .len(),
        2
    );
    // The REQs left after the AUTH's OK, not before.
    let authed = s
        .events
        .iter()
        .find(|(_, e)| *e == Event::Authenticated)
        .map(|(at, _)| *at);
    assert!(s.reqs().all(|(at, _)| Some(at) >= authed));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn auth_required_without_a_challenge_waits_only_challenge_wait() {
    // The document says auth_required but the relay never challenges: REQs go out after 3 s.
    let mut config = RelayConfig::default();
    config.authenticates = true;
    let mut s = Sim::new(config, SEED, RelayModel::with_events(0));
    s.at(ms(0), document(r#"{"auth_required":true}"#));
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    s.run_for(secs(5));
    let sent: Vec<u128> = s
        .reqs()
        .map(|(at, _)| at.since_origin().as_millis())
        .collect();
    assert_eq!(sent, [3_020]);
}

#[test]
fn an_oversize_publish_is_refused_locally() {
    let big = |n: u64, len: usize| {
        format!(
            r#"{{"id":"{n:064x}","pubkey":"{:064x}","created_at":1700000000,"kind":1,"tags":[],"content":"{}","sig":"{:0128x}"}}"#,
            1,
            "x".repeat(len),
            n
        )
    };
    let mut s = Sim::new(RelayConfig::default(), SEED, RelayModel::with_events(0));
    // Queued before the document arrives (not connected yet): rejected when it does.
    s.at(ms(0), Action::Publish(big(1, 4_000)));
    s.at(ms(0), document(r#"{"max_message_length":2048}"#));
    s.at(ms(0), Action::Connect);
    s.at(ms(100), Action::Publish(big(2, 1_000)));
    s.run_for(secs(1));
    // A call with a frame larger than the relay takes is the caller's mistake: an error, and
    // nothing sent.
    let now = s.now();
    let event = big(3, 3_000);
    assert_eq!(
        s.session.publish(now, &event),
        Err(Error::MessageTooLarge {
            len: event.len() + 10,
            max: 2048
        })
    );
    let filter = format!(r#"{{"kinds":[1],"search":"{}"}}"#, "y".repeat(2_000));
    let filter = tether_core::nostr::Filter::new(&filter).unwrap();
    assert!(matches!(
        s.session.subscribe(now, vec![filter], Priority::NORMAL),
        Err(Error::MessageTooLarge { max: 2048, .. })
    ));
    assert_eq!(
        s.heard(|e| match e {
            Event::Rejected { reason, .. } => Some(reason.clone()),
            Event::Published { .. } => Some(Rejection::TimedOut),
            _ => None,
        }),
        [
            Rejection::TooLarge {
                len: big(1, 4_000).len() + 10,
                max: 2048
            },
            // (the 1 000-byte one, published)
            Rejection::TimedOut,
        ]
    );
    assert!(s.sent.iter().all(|(_, _, text)| text.len() <= 2048));
    assert_eq!(s.session.poll_transmit(), None);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn wire_ids_fit_the_declared_max_subid_length() {
    let mut s = Sim::new(RelayConfig::default(), SEED, RelayModel::with_events(0));
    s.at(ms(0), document(r#"{"max_subid_length":3}"#));
    s.at(ms(0), Action::Connect);
    s.at(ms(10), kinds1());
    for i in 1..=20 {
        s.at(secs(60 * i), Action::DropSocket);
    }
    s.run_for(secs(60 * 21));
    let ids = wire_ids(&s);
    assert_eq!(ids.len(), 21);
    assert!(ids.iter().all(|id| id.len() <= 3), "{ids:?}");
    // The attempt wraps in one hex digit: 1..f, 0, 1, ...
    assert_eq!(ids[14..18], ["0:f", "0:0", "0:1", "0:2"]);
    assert_eq!(
        s.session.subscription(SubscriptionId(0)).map(|v| v.state),
        Some(SubState::Live),
        "the relay's answers to the wrapped ids still route"
    );
}

#[test]
fn a_malformed_document_changes_nothing() {
    let mut s = Sim::new(RelayConfig::default(), SEED, RelayModel::with_events(0));
    s.at(
        ms(0),
        Action::RelayInfo("<html>502 Bad Gateway</html>".into()),
    );
    s.at(ms(0), Action::RelayInfo("[1,2]".into()));
    s.at(
        ms(0),
        document(r#"{"max_subscriptions":"20","max_message_length":-1,"auth_required":1}"#),
    );
    s.at(ms(0), Action::Connect);
    s.at(ms(100), kinds1());
    s.run_for(secs(1));
    assert_eq!(s.session.subscription_limit(), None);
    let info = s.session.relay_info();
    assert_eq!(
        (
            info.max_subscriptions,
            info.max_message_length,
            info.auth_required
        ),
        (None, None, false),
        "no malformed limit is taken"
    );
    // Its well-formed `supported_nips` is read: no NIP-77.
    assert_eq!(info.negentropy, Some(false));
    assert_eq!(s.relay.reqs.len(), 1);
    insta::assert_snapshot!(s.transcript());
}
