//! What a [`RelaySession`](super::session::RelaySession) asks of its driver ([`Transmit`])
//! and tells its application ([`Event`]).

use crate::link::{Epoch, SocketLoss};
use crate::nostr::catch_up::CatchUpMethod;
use crate::nostr::message::{EventId, FrameError};
use crate::nostr::subscription::SubscriptionId;
use crate::time::Instant;

/// An instruction for the driver's socket.
///
/// Deliberately exhaustive, unlike [`Event`]: a driver that ignored an instruction it did not
/// know would break the session, so a new one must fail to compile instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Open a new WebSocket to the relay, abandoning any previous one. Tag every socket
    /// input about it (`handle_open`, `handle_frame`, ...) with `epoch`.
    Open {
        /// The new socket's epoch.
        epoch: Epoch,
        /// Where to dial, for a relay a pool opened on its own (routing by people): its
        /// normalised URL, which the driver was never given. `None` from a relay session and
        /// for the application's relays, which the application named (and may dial as it
        /// spelt them).
        url: Option<String>,
    },
    /// Send this text frame on the open socket.
    Send {
        /// The frame.
        text: String,
        /// What it carries, so a driver or test never parses its own output.
        carries: Carries,
    },
    /// Send a WebSocket ping; answer its pong with `handle_pong`.
    Ping,
    /// Close the socket of `epoch`.
    Close {
        /// The socket to close.
        epoch: Epoch,
    },
    /// Fetch the relay's NIP-11 information document and give it to
    /// `apply_relay_info` (or drop it when the fetch fails). Asked beside a new socket, at
    /// most once per [`RelayConfig::info_refresh`](super::RelayConfig::info_refresh).
    FetchInfo,
}

/// What a [`Transmit::Send`] frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Carries {
    /// A REQ for this subscription.
    Req(SubscriptionId),
    /// A CLOSE for this subscription.
    Close(SubscriptionId),
    /// An EVENT being published.
    Event(EventId),
    /// An AUTH answering a challenge.
    Auth(EventId),
    /// A NIP-77 frame (`NEG-OPEN`, `NEG-MSG`, `NEG-CLOSE`) of this subscription's catch-up.
    Negentropy(SubscriptionId),
}

impl Carries {
    /// A stable snake_case name of what the frame carries, for logs, JSON lines and the C
    /// ABI: `req`, `close`, `event`, `auth` or `negentropy` (the subscription or event id
    /// is the variant's data).
    pub fn as_str(self) -> &'static str {
        match self {
            Carries::Req(_) => "req",
            Carries::Close(_) => "close",
            Carries::Event(_) => "event",
            Carries::Auth(_) => "auth",
            Carries::Negentropy(_) => "negentropy",
        }
    }
}

/// Why the session's socket is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Disconnect {
    /// The application called `disconnect`.
    Requested,
    /// The socket was lost; a reconnect follows.
    Lost(SocketLoss),
}

impl Disconnect {
    /// A stable snake_case name, for logs, JSON lines and the C ABI: `requested`, or the
    /// socket loss's own name ([`SocketLoss::as_str`]: `connection_refused`,
    /// `closed_by_peer`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Disconnect::Requested => "requested",
            Disconnect::Lost(loss) => loss.as_str(),
        }
    }
}

/// Identifies one NIP-42 challenge: answers to any other are refused by `authenticate`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChallengeId(pub u64);

/// Something the application should hear.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The socket opened; registered subscriptions are being replayed.
    Connected,
    /// The socket is gone. A reconnect is scheduled at `reconnect_at`, or none was (the
    /// application disconnected).
    Disconnected {
        /// When the next attempt starts.
        reconnect_at: Option<Instant>,
        /// Why.
        why: Disconnect,
    },
    /// An event for a subscription, exactly as the relay sent it.
    Received {
        /// The subscription.
        sub: SubscriptionId,
        /// Event id (already checked against re-delivery).
        id: EventId,
        /// The event's JSON, byte for byte.
        raw: String,
    },
    /// A catch-up after a gap completed: every event the relay holds for the filter with
    /// `created_at >= exact_since` has now been delivered once.
    CaughtUp {
        /// The subscription.
        sub: SubscriptionId,
        /// NIP-77 or the `since` fallback.
        method: CatchUpMethod,
        /// From which `created_at` the catch-up is exact: the window's start, later than the
        /// lookback asked when the memory's bound was hit (or a page could not be split).
        exact_since: u64,
        /// Events the catch-up delivered for the first time, from the relay's store (not live).
        recovered: u64,
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
        /// Pass it to `authenticate` with the signed answer; a newer challenge or a new
        /// socket makes it stale.
        id: ChallengeId,
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
#[non_exhaustive]
pub enum Rejection {
    /// The relay said no (`OK false`), and retrying cannot help or the retries are spent.
    Refused {
        /// The relay's message.
        message: String,
    },
    /// No OK arrived in time, on every attempt.
    TimedOut,
    /// Larger than the relay's NIP-11 `max_message_length`, which arrived after the event
    /// was queued: never sent. (A publish that is too large when called is
    /// [`Error::MessageTooLarge`](super::Error::MessageTooLarge) instead.)
    TooLarge {
        /// Bytes the EVENT frame would take.
        len: usize,
        /// The relay's declared maximum.
        max: usize,
    },
}

impl Rejection {
    /// A stable snake_case name of the kind, for logs, JSON lines and the C ABI: `refused`,
    /// `timed_out` or `too_large` (the relay's message and the sizes are the variant's
    /// data).
    pub fn as_str(&self) -> &'static str {
        match self {
            Rejection::Refused { .. } => "refused",
            Rejection::TimedOut => "timed_out",
            Rejection::TooLarge { .. } => "too_large",
        }
    }
}
