//! What a [`RelaySession`](super::session::RelaySession) refuses from its caller: local
//! misuse, never the peer's doing (the peer's mistakes are events, see
//! [`Event::PeerError`](super::Event::PeerError)).

use std::fmt;

use crate::nostr::message::EventId;
use crate::nostr::output::ChallengeId;
use crate::nostr::subscription::{InvalidFilter, SubscriptionId};

/// Local misuse: the caller's mistake, never the peer's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// No such subscription (never existed, unsubscribed, or already surfaced as `Closed`).
    UnknownSubscription(SubscriptionId),
    /// A subscription needs at least one filter.
    NoFilters,
    /// A filter is not a JSON object.
    InvalidFilter(InvalidFilter),
    /// The session already holds `max_registered` subscriptions.
    TooManySubscriptions {
        /// The configured bound.
        max: usize,
    },
    /// The publish outbox already holds `max_outbox` events.
    OutboxFull {
        /// The configured bound.
        max: usize,
    },
    /// The event to publish or authenticate with is not a usable event object.
    InvalidEvent {
        /// What is wrong with it.
        detail: String,
    },
    /// This event is already in the outbox.
    AlreadyPublishing(EventId),
    /// No socket is open (an AUTH answers one connection's challenge).
    NotConnected,
    /// The challenge was superseded by a newer one or belonged to an earlier socket.
    StaleChallenge(ChallengeId),
    /// The frame would be larger than the relay accepts (its NIP-11 `max_message_length`):
    /// it is not sent. For a subscription, `len` counts room for the catch-up `since` the
    /// session may add.
    MessageTooLarge {
        /// Bytes the frame would take.
        len: usize,
        /// The relay's declared maximum.
        max: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownSubscription(id) => write!(f, "unknown subscription {id}"),
            Error::NoFilters => f.write_str("a subscription needs at least one filter"),
            Error::InvalidFilter(e) => write!(f, "{e}"),
            Error::TooManySubscriptions { max } => {
                write!(f, "the session already holds {max} subscriptions")
            }
            Error::OutboxFull { max } => write!(f, "the outbox already holds {max} events"),
            Error::InvalidEvent { detail } => write!(f, "invalid event: {detail}"),
            Error::AlreadyPublishing(id) => write!(f, "event {id} is already being published"),
            Error::NotConnected => f.write_str("not connected"),
            Error::StaleChallenge(id) => write!(f, "challenge {} is no longer current", id.0),
            Error::MessageTooLarge { len, max } => write!(
                f,
                "a {len}-byte frame exceeds the relay's max_message_length of {max} bytes"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<InvalidFilter> for Error {
    fn from(e: InvalidFilter) -> Self {
        Error::InvalidFilter(e)
    }
}
