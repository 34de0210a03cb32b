//! What a [`RelayPool`](super::RelayPool) tells its application ([`PoolEvent`]) and refuses
//! from its caller ([`PoolError`]).

use std::fmt;

use crate::link::SocketError;
use crate::nostr::message::EventId;
use crate::nostr::{CatchUpMethod, Error, Event};

/// One relay of a pool; ids of removed relays are reused by relays added later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelayId(pub u32);

impl fmt::Display for RelayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// One logical subscription of a pool; never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubId(pub u64);

impl fmt::Display for SubId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "q{}", self.0)
    }
}

/// Something the application should hear.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolEvent {
    /// An event for `sub`, the first time any relay delivered its id.
    Received {
        /// The logical subscription.
        sub: SubId,
        /// The relay that delivered it first.
        relay: RelayId,
        /// Its id.
        id: EventId,
        /// Its JSON, byte for byte as that relay sent it.
        raw: String,
    },
    /// `relay` caught `sub` up after a gap: every event it holds for the filter from
    /// `exact_since` on has been delivered once (see the relay session's `CaughtUp`).
    /// Cross-relay dedup is unchanged: `recovered` counts what this relay's catch-up
    /// delivered to the pool, some of which another relay may have delivered first.
    CaughtUp {
        /// The logical subscription.
        sub: SubId,
        /// The relay.
        relay: RelayId,
        /// NIP-77 or the `since` fallback.
        method: CatchUpMethod,
        /// From which `created_at` the catch-up is exact.
        exact_since: u64,
        /// Events the relay's catch-up delivered for the first time, from its store (not live).
        recovered: u64,
    },
    /// `relay` finished sending stored events for `sub`.
    Eose {
        /// The logical subscription.
        sub: SubId,
        /// The relay.
        relay: RelayId,
    },
    /// `relay` gave up on `sub` (retries spent, or a terminal refusal); others may still
    /// serve it.
    RelayClosed {
        /// The logical subscription.
        sub: SubId,
        /// The relay.
        relay: RelayId,
        /// The relay's (or the session's) last message.
        reason: String,
        /// Re-REQs that relay's session made before giving up.
        attempts: u32,
    },
    /// The query's outcome, exactly once per subscription.
    Complete {
        /// The logical subscription.
        sub: SubId,
        /// Every relay answered, or who is missing and why.
        outcome: Outcome,
    },
    /// No relay serves `sub` any more; it is gone from the pool. Heard at most once.
    Ended {
        /// The logical subscription.
        sub: SubId,
        /// Each relay's reason for giving up.
        reasons: Vec<(RelayId, String)>,
    },
    /// A copy from `relay` failed verification ([`PoolConfig::verify`](super::PoolConfig::verify)):
    /// dropped, never delivered, counted in [`PoolStats::invalid`].
    Invalid {
        /// The logical subscription.
        sub: SubId,
        /// The relay that sent it.
        relay: RelayId,
        /// The id it claimed.
        id: EventId,
        /// What the verifier said.
        reason: String,
    },
    /// `relay` accepted a published event (or already had it).
    Published {
        /// The event.
        id: EventId,
        /// The relay.
        relay: RelayId,
    },
    /// `relay` will not take a published event.
    Rejected {
        /// The event.
        id: EventId,
        /// The relay.
        relay: RelayId,
        /// Why.
        reason: String,
    },
    /// Every relay answered a publish, or its deadline passed.
    PublishDone {
        /// The event.
        id: EventId,
        /// Who accepted, who refused, who never answered.
        outcome: PublishOutcome,
    },
    /// What routing gives a subscription by people changed: the relays asked and who is
    /// covered (see [`RelayPool::subscribe_outbox`](super::RelayPool::subscribe_outbox)).
    Routed {
        /// The subscription.
        sub: SubId,
        /// Its routes now.
        report: super::RouteReport,
    },
    /// Anything else one relay's session reported (connected, retrying, rate limited, auth
    /// challenge, ...), with the logical subscription it concerns, if any.
    Relay {
        /// The relay.
        relay: RelayId,
        /// The logical subscription the event is about, if it is about one.
        sub: Option<SubId>,
        /// The session's event (its subscription ids are that session's own).
        event: Event,
    },
}

/// How a query ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Every targeted relay answered EOSE.
    Complete,
    /// Some relays did not: results may be truncated, and these are why.
    Partial {
        /// The relays that did not answer EOSE, and why.
        missing: Vec<(RelayId, Missing)>,
    },
}

/// Why a relay is missing from an outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// No EOSE before the pool's deadline (dead, slow, or still connecting).
    NoEose,
    /// The relay gave up on the subscription with this reason.
    Closed(String),
    /// The relay's session refused the subscription locally (its `max_registered`).
    Refused(String),
    /// The relay was removed from the pool.
    Removed,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::NoEose => f.write_str("no EOSE before the deadline"),
            Missing::Closed(reason) => write!(f, "closed: {reason}"),
            Missing::Refused(reason) => write!(f, "refused locally: {reason}"),
            Missing::Removed => f.write_str("relay removed"),
        }
    }
}

/// The aggregate of one publish.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishOutcome {
    /// Relays that accepted it.
    pub accepted: Vec<RelayId>,
    /// Relays that refused it, and why.
    pub rejected: Vec<(RelayId, String)>,
    /// Relays that had not answered by the deadline (still queued or unanswered there).
    pub pending: Vec<RelayId>,
    /// The URLs of the relays above that routing opened (a publish by outbox): the pool
    /// lets them go once it is done, so their ids name no relay afterwards.
    pub urls: Vec<(RelayId, String)>,
}

/// What the pool counted for one relay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct PoolStats {
    /// Events it delivered that another relay (or itself) had delivered first: dropped.
    pub duplicates: u64,
    /// Duplicates whose bytes differ from the first copy: dropped, the first copy wins.
    pub conflicts: u64,
    /// Events that failed verification: dropped, never delivered.
    pub invalid: u64,
    /// New events dropped because `max_unverified` copies were under verification.
    pub unverified_dropped: u64,
    /// Events of a routed subscription that do not match its filter (a relay that ignores
    /// `#p`, say): dropped, never delivered.
    pub unmatched: u64,
}

/// Local misuse of a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolError {
    /// No such relay.
    UnknownRelay(super::RelayId),
    /// No such logical subscription.
    UnknownSubscription(SubId),
    /// The pool holds `max_relays` already.
    TooManyRelays {
        /// The bound.
        max: usize,
    },
    /// The pool holds `max_subscriptions` already.
    TooManySubscriptions {
        /// The bound.
        max: usize,
    },
    /// This event is already being published.
    AlreadyPublishing(EventId),
    /// [`MAX_PUBLISHES`](super::MAX_PUBLISHES) publishes by outbox are under way already.
    TooManyPublishes {
        /// The bound.
        max: usize,
    },
    /// A relay session refused the call.
    Session(Error),
    /// A socket input broke the epoch rule.
    Socket(SocketError),
    /// A verdict for a verification that is not awaited.
    UnknownTicket(super::VerifyTicket),
    /// [`RelayPool::add_relay_url`](super::RelayPool::add_relay_url) or
    /// [`RelayPool::name_relay`](super::RelayPool::name_relay) with something that is no
    /// `ws://` or `wss://` relay URL.
    InvalidUrl(String),
    /// [`RelayPool::name_relay`](super::RelayPool::name_relay) would give a relay a second
    /// URL, or a URL a second relay: `relay` has `url` already.
    UrlInUse {
        /// The URL `relay` has, normalised.
        url: String,
        /// The relay that has it.
        relay: super::RelayId,
    },
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::UnknownRelay(r) => write!(f, "unknown relay {r}"),
            PoolError::UnknownSubscription(s) => write!(f, "unknown subscription {s}"),
            PoolError::TooManyRelays { max } => write!(f, "the pool already holds {max} relays"),
            PoolError::TooManySubscriptions { max } => {
                write!(f, "the pool already holds {max} subscriptions")
            }
            PoolError::AlreadyPublishing(id) => write!(f, "event {id} is already being published"),
            PoolError::TooManyPublishes { max } => {
                write!(f, "{max} publishes by outbox are under way already")
            }
            PoolError::Session(e) => write!(f, "{e}"),
            PoolError::Socket(e) => write!(f, "{e}"),
            PoolError::UnknownTicket(t) => write!(f, "no verification {} is awaited", t.0),
            PoolError::InvalidUrl(url) => {
                let url: String = url.chars().take(100).collect();
                write!(f, "not a relay URL: {url:?}")
            }
            // Not the URL itself: an application's may carry credentials.
            PoolError::UrlInUse { relay, .. } => {
                write!(
                    f,
                    "relay {relay} has a URL already: one URL per relay, one relay per URL"
                )
            }
        }
    }
}

impl std::error::Error for PoolError {}
