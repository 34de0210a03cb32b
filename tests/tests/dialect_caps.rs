//! Every refusal text the dialect table classifies as a subscription cap, in every frame a
//! relay sends it in, goes the one cap path: the cap is learned, the refused subscription
//! waits for a slot (never surfaced, never retried on a timer), and it is sent when a slot
//! frees.

use std::time::Duration;

use tether_core::nostr::reason::{classify, classify_notice, Class, Frame, Terminal, DIALECTS};
use tether_core::nostr::{Event, Priority, RelayConfig, SubState, SubscriptionId};
use tether_testkit::{Action, LimitStyle, RelayModel, Sim};

const CAP: Class = Class::Terminal(Terminal::TooManySubscriptions);

/// A concrete text for a table pattern: `{n}` is a number, `{*}` some words.
fn concrete(pattern: &str) -> String {
    pattern.replace("{n}", "2").replace("{*}", "for now")
}

fn kinds1() -> Action {
    Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority::NORMAL)
}

/// Three subscriptions against a relay that allows two and refuses the third with `text`
/// in `style`'s frame; at 2 s the first is dropped.
fn run(text: &str, style: LimitStyle) -> Sim {
    let mut relay = RelayModel::with_events(0);
    relay.max_subs = Some((2, style));
    relay.cap_text = Some(text.to_owned());
    let mut s = Sim::new(RelayConfig::default(), 7, relay);
    s.keep_transcript = false;
    s.at(Duration::ZERO, Action::Connect);
    for i in 0..3 {
        s.at(Duration::from_millis(100 + 100 * i), kinds1());
    }
    s.at(
        Duration::from_secs(2),
        Action::Unsubscribe(SubscriptionId(0)),
    );
    s.run_for(Duration::from_secs(10));
    s
}

#[test]
fn every_cap_text_in_the_table_queues_the_refused_subscription() {
    let mut checked = Vec::new();
    for row in DIALECTS.iter().filter(|d| d.class == CAP) {
        let text = concrete(row.pattern);
        for frame in row.frames {
            let style = match frame {
                Frame::Closed => {
                    assert_eq!(classify(&text), CAP, "{text:?} ({})", row.source);
                    LimitStyle::Closed
                }
                Frame::Notice => {
                    assert_eq!(
                        classify_notice(&text),
                        Some(CAP),
                        "{text:?} ({})",
                        row.source
                    );
                    LimitStyle::Notice
                }
                // A cap refuses a REQ, never an EVENT.
                Frame::Ok => continue,
            };
            let s = run(&text, style);
            let why = format!("{text:?} as {frame:?} ({})", row.source);
            assert_eq!(
                s.heard(|e| match e {
                    Event::Closed { sub, .. } => Some(*sub),
                    _ => None,
                }),
                Vec::<SubscriptionId>::new(),
                "{why}: nothing surfaced"
            );
            assert_eq!(
                s.heard(|e| match e {
                    Event::Queued { sub } => Some(format!("queued {sub}")),
                    Event::Retrying { sub, .. } => Some(format!("retrying {sub}")),
                    Event::SubscriptionLimit { max } => Some(format!("limit {max}")),
                    _ => None,
                }),
                ["limit 2", "queued s2"],
                "{why}: no retry timer"
            );
            // s2: refused once, then sent into s0's slot and live.
            let s2_reqs: Vec<&str> = s
                .reqs()
                .map(|(_, t)| t)
                .filter(|t| t.contains(r#""2:"#))
                .collect();
            assert_eq!(s2_reqs.len(), 2, "{why}: {s2_reqs:?}");
            assert_eq!(
                s.session.subscription(SubscriptionId(2)).map(|v| v.state),
                Some(SubState::Live),
                "{why}"
            );
            checked.push(why);
        }
    }
    // The table's seven cap rows, one frame each: strfry, nostream, nostr-rs-relay, chorus,
    // nostr-relay-builder, rnostr, netstr (see `reason/dialects.rs`).
    assert_eq!(checked.len(), 7, "{checked:#?}");
}
