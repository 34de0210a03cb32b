//! The core's lines ([`tether_core::line`]) for what the driver's streams yield: a host
//! that prints or forwards what it hears (the CLI) writes these, in the one vocabulary the
//! C ABI and tether-py use too.
//!
//! The driver's items already hold times relative to when they were polled (`reconnect_in`,
//! `after`, `window`), so no `now` is needed here.

use tether_core::line::nostr::Line;
use tether_core::line::{millis, Checked, Label, Labels};

use crate::pool::PoolItem;
use crate::relay::{SessionEvent, SubscriptionEvent};

impl SessionEvent {
    /// This event's line, `relay` naming the session (`None` for one relay), or `None` for
    /// an event that has no line (the NIP-11 outcome, heard through tracing).
    pub fn line<'a>(&'a self, relay: Option<Label<'a>>) -> Option<Line<'a>> {
        Some(match self {
            SessionEvent::Connected => Line::Connected { relay },
            SessionEvent::Disconnected { reconnect_in, why } => {
                Line::disconnected(relay, reconnect_in.map(millis), *why)
            }
            SessionEvent::Notice { message } => Line::Notice { relay, message },
            SessionEvent::AuthChallenge { challenge, .. } => Line::Auth {
                relay,
                challenge,
                id: None,
            },
            SessionEvent::Authenticated => Line::Authenticated { relay },
            SessionEvent::AuthFailed { reason } => Line::AuthFailed { relay, reason },
            SessionEvent::SignerFailed { error } => Line::SignerFailed {
                relay,
                error: error.to_string().into(),
            },
            SessionEvent::RateLimited { window } => Line::RateLimited {
                relay,
                window_ms: millis(*window),
            },
            SessionEvent::SubscriptionLimit { max } => Line::SubscriptionLimit { relay, max: *max },
            SessionEvent::PeerError { error } => {
                Line::peer_error(relay, error.kind(), &error.to_string())
            }
            _ => return None,
        })
    }
}

impl SubscriptionEvent {
    /// This event's line for subscription `sub`, `relay` naming the session (`None` for one
    /// relay).
    pub fn line<'a>(&'a self, sub: Label<'a>, relay: Option<Label<'a>>) -> Option<Line<'a>> {
        Some(match self {
            SubscriptionEvent::Event(event) => Line::Event {
                sub,
                relay,
                id: None,
                event: Checked::new(&event.raw, true),
            },
            SubscriptionEvent::Eose => Line::Eose { sub, relay },
            SubscriptionEvent::CaughtUp(c) => Line::CaughtUp {
                sub,
                relay,
                method: c.method.as_str(),
                exact_since: c.exact_since,
                recovered: c.recovered,
            },
            SubscriptionEvent::Retrying { after, attempt } => Line::Retrying {
                sub,
                relay,
                in_ms: millis(*after),
                attempt: *attempt,
            },
            SubscriptionEvent::Queued => Line::Queued { sub, relay },
            SubscriptionEvent::EoseTimeout => Line::EoseTimeout { sub, relay },
            SubscriptionEvent::Closed { reason, attempts } => Line::Closed {
                sub,
                relay,
                reason,
                attempts: *attempts,
            },
        })
    }
}

impl PoolItem {
    /// This item's line for pool subscription `sub`, `labels` naming the relays.
    pub fn line<'a>(&'a self, sub: Label<'a>, labels: &'a dyn Labels) -> Option<Line<'a>> {
        let relay = |r: &tether_core::pool::RelayId| labels.relay(r.0);
        Some(match self {
            PoolItem::Event { relay: r, raw, .. } => Line::Event {
                sub,
                relay: relay(r),
                id: None,
                event: Checked::new(raw, labels.lines()),
            },
            PoolItem::CaughtUp {
                relay: r,
                caught_up: c,
            } => Line::CaughtUp {
                sub,
                relay: relay(r),
                method: c.method.as_str(),
                exact_since: c.exact_since,
                recovered: c.recovered,
            },
            PoolItem::Eose { relay: r } => Line::Eose {
                sub,
                relay: relay(r),
            },
            PoolItem::RelayClosed {
                relay: r,
                reason,
                attempts,
            } => Line::Closed {
                sub,
                relay: relay(r),
                reason,
                attempts: *attempts,
            },
            PoolItem::Complete(outcome) => Line::complete(sub, outcome, labels),
            PoolItem::Routed(report) => Line::routed(sub, report),
            PoolItem::Ended { .. } => Line::Ended { sub },
            PoolItem::Invalid {
                relay: r,
                id,
                reason,
            } => Line::Invalid {
                sub,
                relay: relay(r),
                id: tether_core::line::Hex(&id.0),
                reason,
                suppressed: 0,
            },
            PoolItem::Relay { relay: r, event } => event.line(sub, relay(r))?,
        })
    }
}
