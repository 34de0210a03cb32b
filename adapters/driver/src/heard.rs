//! The core's relay [`Event`]s in the application's terms ([`SubscriptionEvent`],
//! [`SessionEvent`], a publish outcome), with instants made relative to now. The relay
//! driver delivers them as they are; the pool driver wraps them with the relay they came
//! from.

use tether_core::nostr::message::EventId;
use tether_core::nostr::{Event, SubscriptionId};
use tether_core::Instant;

use crate::relay::{CaughtUp, Published, Rejected, RelayEvent, SessionEvent, SubscriptionEvent};

/// One relay event, translated.
pub(crate) enum Heard {
    /// For one subscription.
    Sub(SubscriptionId, SubscriptionEvent),
    /// About the relay as a whole.
    Session(SessionEvent),
    /// A publish's outcome.
    Publish(EventId, Result<Published, Rejected>),
}

/// Where the core's `event` goes, with its times made relative to `now`; `None` for an
/// event this driver does not know yet (the core's `Event` grows).
pub(crate) fn heard(now: Instant, event: Event) -> Option<Heard> {
    let after = |at: Instant| at.saturating_duration_since(now);
    Some(match event {
        Event::Connected => Heard::Session(SessionEvent::Connected),
        Event::Disconnected { reconnect_at, why } => Heard::Session(SessionEvent::Disconnected {
            reconnect_in: reconnect_at.map(after),
            why,
        }),
        Event::Received { sub, id, raw } => {
            Heard::Sub(sub, SubscriptionEvent::Event(RelayEvent { id, raw }))
        }
        Event::Eose { sub } => Heard::Sub(sub, SubscriptionEvent::Eose),
        Event::CaughtUp {
            sub,
            method,
            exact_since,
            recovered,
        } => Heard::Sub(
            sub,
            SubscriptionEvent::CaughtUp(CaughtUp {
                method,
                exact_since,
                recovered,
            }),
        ),
        Event::Closed {
            sub,
            reason,
            attempts,
        } => Heard::Sub(sub, SubscriptionEvent::Closed { reason, attempts }),
        Event::Retrying { sub, at, attempt } => Heard::Sub(
            sub,
            SubscriptionEvent::Retrying {
                after: after(at),
                attempt,
            },
        ),
        Event::Queued { sub } => Heard::Sub(sub, SubscriptionEvent::Queued),
        Event::EoseTimeout { sub } => Heard::Sub(sub, SubscriptionEvent::EoseTimeout),
        Event::RateLimited { until } => Heard::Session(SessionEvent::RateLimited {
            window: after(until),
        }),
        Event::SubscriptionLimit { max } => Heard::Session(SessionEvent::SubscriptionLimit { max }),
        Event::Notice { message } => Heard::Session(SessionEvent::Notice { message }),
        Event::AuthChallenge { challenge, id } => {
            Heard::Session(SessionEvent::AuthChallenge { challenge, id })
        }
        Event::Authenticated => Heard::Session(SessionEvent::Authenticated),
        Event::AuthFailed { reason } => Heard::Session(SessionEvent::AuthFailed { reason }),
        Event::Published { id } => Heard::Publish(id, Ok(Published { id })),
        Event::Rejected { id, reason } => Heard::Publish(id, Err(Rejected::Relay { id, reason })),
        Event::PeerError { error } => Heard::Session(SessionEvent::PeerError { error }),
        _ => return None,
    })
}
