//! What a [`RelaySession`](super::session::RelaySession) asks of its driver ([`Transmit`]),
//! tells its application ([`Event`]), and refuses from its caller ([`Error`]).

use std::fmt;

use crate::nostr::message::{EventId, FrameError};
use crate::nostr::subscription::{InvalidFilter, SubscriptionId};
use crate::time::Instant;

/// An instruction for the driver's socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Open a new WebSocket to the relay, abandoning any previous one.
    Open,
    /// Send this text frame on the open socket.
    Send(String),
    /// Send a WebSocket ping; answer its pong with `handle_pong`.
    Ping,
    /// Close the socket.
    Close,
}

/// Something the application should hear.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The socket opened; registered subscriptions are being replayed.
    Connected,
    /// The socket is gone. A reconnect is scheduled at `reconnect_at`, or none was (the
    /// application disconnected).
    Disconnected {
        /// When the next attempt starts.
        reconnect_at: Option<Instant>,
    },
    /// An event for a subscription, exactly as the relay sent it.
    Event {
        /// The subscription.
        sub: SubscriptionId,
        /// Event id (already checked against re-delivery).
        id: EventId,
        /// The event's JSON, byte for byte.
        raw: String,
    },
    /// Stored events are done for this subscription; it is live.
    Eose {
        /// The subscription.
        sub: SubscriptionId,
    },
    /// The one and only failure report for a subscription: it is gone from the session.
    Closed {
        /// The subscription.
        sub: SubscriptionId,
        /// The relay's last message (or the session's, e.g. an EOSE timeout).
        reason: String,
        /// Re-REQs made after refusals before giving up (0 for an immediate terminal refusal).
        attempts: u32,
    },
    /// A refused subscription will be re-requested at `at`.
    Retrying {
        /// The subscription.
        sub: SubscriptionId,
        /// When its REQ re-enters the send queue.
        at: Instant,
        /// Which retry this is (1-based).
        attempt: u32,
    },
    /// A subscription waits for a free slot under `max_subscriptions`.
    Queued {
        /// The subscription.
        sub: SubscriptionId,
    },
    /// A REQ got neither EOSE, CLOSED nor any event within `eose_timeout`; it is retried.
    EoseTimeout {
        /// The subscription.
        sub: SubscriptionId,
    },
    /// The relay rate-limited us; background work waits until `until`.
    RateLimited {
        /// End of the gate window.
        until: Instant,
    },
    /// The relay learned (or was configured) to allow at most this many open REQs.
    SubscriptionLimit {
        /// The limit now in force.
        max: usize,
    },
    /// A human-readable NOTICE.
    Notice {
        /// Its text.
        message: String,
    },
    /// The relay asks for NIP-42 authentication: sign a kind 22242 event for this challenge
    /// and pass it to `authenticate`.
    AuthChallenge {
        /// The challenge.
        challenge: String,
    },
    /// The relay accepted our AUTH; held work is being retried.
    Authenticated,
    /// The relay refused our AUTH.
    AuthFailed {
        /// The relay's message.
        reason: String,
    },
    /// A published event was accepted (or the relay already had it).
    Published {
        /// The event.
        id: EventId,
    },
    /// A published event will not be accepted.
    Rejected {
        /// The event.
        id: EventId,
        /// Why.
        reason: Rejection,
    },
    /// The relay sent something malformed; it was dropped and the session carries on.
    PeerError {
        /// What was wrong.
        error: FrameError,
    },
}

/// Why a publish failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The relay said no (`OK false`), and retrying cannot help or the retries are spent.
    Refused {
        /// The relay's message.
        message: String,
    },
    /// No OK arrived in time, on every attempt.
    TimedOut,
}

/// Local misuse: the caller's mistake, never the peer's.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    InvalidEvent(FrameError),
    /// This event is already in the outbox.
    AlreadyPublishing(EventId),
    /// No socket is open (an AUTH answers one connection's challenge).
    NotConnected,
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
            Error::InvalidEvent(e) => write!(f, "invalid event: {e}"),
            Error::AlreadyPublishing(id) => write!(f, "event {id} is already being published"),
            Error::NotConnected => f.write_str("not connected"),
        }
    }
}

impl std::error::Error for Error {}

impl From<InvalidFilter> for Error {
    fn from(e: InvalidFilter) -> Self {
        Error::InvalidFilter(e)
    }
}

/// Counters of what the peer did that was dropped rather than surfaced one by one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Text frames received on an open socket.
    pub frames: u64,
    /// Frames that failed to decode.
    pub malformed: u64,
    /// Frames that arrived when no socket was open (from a socket already given up).
    pub stale_socket: u64,
    /// Frames for a subscription id this session never sent, or no longer has.
    pub unknown_subscription: u64,
    /// Frames for an earlier attempt of a live subscription.
    pub stale_attempt: u64,
    /// Events dropped as re-deliveries of the catch-up overlap.
    pub duplicates: u64,
    /// OKs for events not in the outbox.
    pub unknown_ok: u64,
    /// Frames this client never asks for (e.g. COUNT).
    pub unexpected: u64,
}
