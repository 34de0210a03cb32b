//! Lines of relay sessions and pools: [`Line`] for what the application hears,
//! [`TransmitLine`] for what a host must put on the wire.
//!
//! The field order is the CLI's: `sub` first, then `relay` (left out for one relay), then
//! the variant's own fields.

use std::borrow::Cow;

use serde::Serialize;

use super::{is_zero, millis_until, Checked, Hex, Label, Labels, Limiter};
use crate::link::SocketLoss;
use crate::nostr::{Carries, Disconnect, Event, Rejection, Transmit};
use crate::pool::{Outcome, PoolEvent, RelayId, RouteReport};
use crate::time::Instant;

/// One line about a relay session or a pool.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
#[allow(missing_docs)] // The fields are the wire contract, documented on each variant.
pub enum Line<'a> {
    /// The socket opened; subscriptions are being replayed.
    Connected {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
    /// The socket is gone: `reconnect_in_ms` until the next attempt (`null`: none, the
    /// application disconnected); `why` is `requested` or a socket loss; `close_code` the
    /// peer's WebSocket close code, when it gave one.
    Disconnected {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        reconnect_in_ms: Option<u64>,
        why: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        close_code: Option<u16>,
    },
    /// A copy failed verification and was dropped.
    Invalid {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        id: Hex<'a>,
        reason: &'a str,
        #[serde(skip_serializing_if = "is_zero")]
        suppressed: u64,
    },
    /// An event, once per id per subscription: the relay's JSON, embedded.
    Event {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<Hex<'a>>,
        event: Checked<'a>,
    },
    /// Stored events are done; the subscription is live.
    Eose {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
    /// A catch-up after a gap completed, exact from `exact_since`.
    CaughtUp {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        method: &'static str,
        exact_since: u64,
        recovered: u64,
    },
    /// A refused REQ is sent again in `in_ms`.
    Retrying {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        in_ms: u64,
        attempt: u32,
    },
    /// The REQ waits for a slot under the relay's subscription limit.
    Queued {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
    /// The relay answered nothing to the REQ in time; it is retried.
    EoseTimeout {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
    /// The relay (or the session) gave up on the subscription.
    Closed {
        sub: Label<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        reason: &'a str,
        attempts: u32,
    },
    /// A pool subscription's query outcome, once: `complete`, or `partial` with the relays
    /// that did not answer.
    Complete {
        sub: Label<'a>,
        outcome: &'static str,
        missing: Vec<Label<'a>>,
    },
    /// No relay of the pool serves the subscription any more.
    Ended { sub: Label<'a> },
    /// A NOTICE.
    Notice {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        message: &'a str,
    },
    /// A NIP-42 challenge (`id`, with handles: pass it back with the signed answer).
    Auth {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        challenge: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
    /// The relay accepted our AUTH.
    Authenticated {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
    /// The relay refused our AUTH.
    AuthFailed {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        reason: &'a str,
    },
    /// The signer could not answer a challenge.
    SignerFailed {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        error: Cow<'a, str>,
    },
    /// Background REQs wait `window_ms`: the relay rate-limited us.
    RateLimited {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        window_ms: u64,
    },
    /// At most `max` REQs are kept open on the relay from now on.
    SubscriptionLimit {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        max: usize,
    },
    /// A malformed frame was dropped: `kind` what was wrong, `excerpt` its first
    /// [`EXCERPT_CHARS`](super::EXCERPT_CHARS) characters, `suppressed` how many lines the
    /// [`Limiter`] left out before this one.
    PeerError {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        kind: &'static str,
        excerpt: String,
        #[serde(skip_serializing_if = "is_zero")]
        suppressed: u64,
    },
    /// A published event was accepted.
    Published {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        id: Hex<'a>,
    },
    /// A published event will not be accepted: `why` `refused` (with the relay's
    /// `message`), `timed_out`, or `too_large` (`len` the frame's bytes, `max` the
    /// relay's declared maximum).
    Rejected {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        id: Hex<'a>,
        why: &'static str,
        message: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        len: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max: Option<usize>,
    },
    /// Every relay of the pool answered a publish, or its deadline passed: who accepted,
    /// who refused and why, who never answered; `urls` the URLs of those relays that routing
    /// opened for a publish by outbox (their ids name no relay once routing lets them go).
    PublishDone {
        id: Hex<'a>,
        accepted: Vec<Label<'a>>,
        rejected: Vec<RelayReason<'a>>,
        pending: Vec<Label<'a>>,
        urls: Vec<&'a str>,
    },
    /// What routing by people gives a subscription, whenever it changes: the relays asked
    /// (URLs), each covered author with how many relays hold them, the authors asked only on
    /// fallback relays, and the authors asked nowhere.
    Routed {
        sub: Label<'a>,
        relays: Vec<&'a str>,
        covered: Vec<AuthorRelays<'a>>,
        fallback_only: Vec<&'a str>,
        uncovered: Vec<&'a str>,
    },
}

/// An author and how many relays are asked about them, in a `routed` line.
#[derive(Clone, Debug, Serialize)]
pub struct AuthorRelays<'a> {
    /// The author, hex.
    pub author: &'a str,
    /// Relays asked about them that their list declares or that delivered their events.
    pub relays: usize,
}

/// A relay and what it said, in a `publish_done` line.
#[derive(Clone, Debug, Serialize)]
pub struct RelayReason<'a> {
    /// The relay.
    pub relay: Label<'a>,
    /// Its message.
    pub reason: &'a str,
}

impl<'a> Line<'a> {
    /// The line for a relay session's `event` at `now`, `relay` naming the session (`None`
    /// for one relay).
    pub fn relay_event(
        event: &'a Event,
        now: Instant,
        relay: Option<Label<'a>>,
        labels: &'a dyn Labels,
    ) -> Line<'a> {
        Self::session_event(event, now, relay, None, labels)
    }

    /// The line for a pool's `event` at `now`.
    pub fn pool_event(event: &'a PoolEvent, now: Instant, labels: &'a dyn Labels) -> Line<'a> {
        let relay = |r: &RelayId| labels.relay(r.0);
        let sub = |s: u64| labels.sub(s);
        match event {
            PoolEvent::Received {
                sub: s,
                relay: r,
                id,
                raw,
            } => Line::Event {
                sub: sub(s.0),
                relay: relay(r),
                id: labels.handles().then_some(Hex(&id.0)),
                event: Checked::new(raw, labels.lines()),
            },
            PoolEvent::CaughtUp {
                sub: s,
                relay: r,
                method,
                exact_since,
                recovered,
            } => Line::CaughtUp {
                sub: sub(s.0),
                relay: relay(r),
                method: method.as_str(),
                exact_since: *exact_since,
                recovered: *recovered,
            },
            PoolEvent::Eose { sub: s, relay: r } => Line::Eose {
                sub: sub(s.0),
                relay: relay(r),
            },
            PoolEvent::RelayClosed {
                sub: s,
                relay: r,
                reason,
                attempts,
            } => Line::Closed {
                sub: sub(s.0),
                relay: relay(r),
                reason,
                attempts: *attempts,
            },
            PoolEvent::Complete { sub: s, outcome } => Line::complete(sub(s.0), outcome, labels),
            PoolEvent::Ended { sub: s, .. } => Line::Ended { sub: sub(s.0) },
            PoolEvent::Invalid {
                sub: s,
                relay: r,
                id,
                reason,
            } => Line::Invalid {
                sub: sub(s.0),
                relay: relay(r),
                id: Hex(&id.0),
                reason,
                suppressed: 0,
            },
            PoolEvent::Published { id, relay: r } => Line::Published {
                relay: relay(r),
                id: Hex(&id.0),
            },
            PoolEvent::Rejected {
                id,
                relay: r,
                reason,
            } => Line::Rejected {
                relay: relay(r),
                id: Hex(&id.0),
                why: "refused",
                message: Some(reason),
                len: None,
                max: None,
            },
            PoolEvent::PublishDone { id, outcome } => Line::PublishDone {
                id: Hex(&id.0),
                accepted: outcome.accepted.iter().filter_map(relay).collect(),
                rejected: outcome
                    .rejected
                    .iter()
                    .filter_map(|(r, reason)| {
                        Some(RelayReason {
                            relay: relay(r)?,
                            reason,
                        })
                    })
                    .collect(),
                pending: outcome.pending.iter().filter_map(relay).collect(),
                urls: outcome.urls.iter().map(|(_, url)| url.as_str()).collect(),
            },
            PoolEvent::Routed { sub: s, report } => Line::routed(sub(s.0), report),
            PoolEvent::Relay {
                relay: r,
                sub: s,
                event,
            } => Self::session_event(event, now, relay(r), s.map(|s| s.0), labels),
        }
    }

    /// The `routed` line of `sub`'s routing `report`.
    pub fn routed(sub: Label<'a>, report: &'a RouteReport) -> Line<'a> {
        Line::Routed {
            sub,
            relays: report.relays.iter().map(|(_, url)| url.as_str()).collect(),
            covered: report
                .covered
                .iter()
                .map(|(author, relays)| AuthorRelays {
                    author,
                    relays: *relays,
                })
                .collect(),
            fallback_only: report.fallback_only.iter().map(String::as_str).collect(),
            uncovered: report.uncovered.iter().map(String::as_str).collect(),
        }
    }

    /// The `complete` line of `sub`'s `outcome`.
    pub fn complete(sub: Label<'a>, outcome: &'a Outcome, labels: &'a dyn Labels) -> Line<'a> {
        let (outcome, missing) = match outcome {
            Outcome::Complete => ("complete", Vec::new()),
            Outcome::Partial { missing } => (
                "partial",
                missing
                    .iter()
                    .filter_map(|(r, _)| labels.relay(r.0))
                    .collect(),
            ),
        };
        Line::Complete {
            sub,
            outcome,
            missing,
        }
    }

    /// A `peer_error` line: `kind` and the first characters of `text`.
    pub fn peer_error(relay: Option<Label<'a>>, kind: &'static str, text: &str) -> Line<'a> {
        Line::PeerError {
            relay,
            kind,
            excerpt: super::excerpt(text),
            suppressed: 0,
        }
    }

    /// The `disconnected` line: `reconnect_in_ms` from the delay, `why` and the peer's
    /// close code from the reason.
    pub fn disconnected(
        relay: Option<Label<'a>>,
        reconnect_in_ms: Option<u64>,
        why: Disconnect,
    ) -> Line<'a> {
        let close_code = match why {
            Disconnect::Lost(SocketLoss::ClosedByPeer { code }) => code,
            _ => None,
        };
        Line::Disconnected {
            relay,
            reconnect_in_ms,
            why: why.as_str(),
            close_code,
        }
    }

    /// Whether the line is one a [`Limiter`] bounds: a peer's errors and forgeries.
    pub(crate) fn is_limited(&self) -> bool {
        matches!(self, Line::PeerError { .. } | Line::Invalid { .. })
    }

    /// The line if `limiter` admits it at `now` (carrying how many were left out before
    /// it), `None` if not; a line that is neither a `peer_error` nor an `invalid` always passes.
    pub fn admit(mut self, limiter: &mut Limiter, now: Instant) -> Option<Line<'a>> {
        if !self.is_limited() {
            return Some(self);
        }
        let n = limiter.admit(now)?;
        if let Line::PeerError { suppressed, .. } | Line::Invalid { suppressed, .. } = &mut self {
            *suppressed = n;
        }
        Some(self)
    }

    /// `event` of a session, `pool_sub` the pool's subscription it concerns (its
    /// session's own id otherwise).
    fn session_event(
        event: &'a Event,
        now: Instant,
        relay: Option<Label<'a>>,
        pool_sub: Option<u64>,
        labels: &'a dyn Labels,
    ) -> Line<'a> {
        let sub = |s: u64| labels.sub(pool_sub.unwrap_or(s));
        match event {
            Event::Connected => Line::Connected { relay },
            Event::Disconnected { reconnect_at, why } => {
                Line::disconnected(relay, reconnect_at.map(|at| millis_until(now, at)), *why)
            }
            Event::Received { sub: s, id, raw } => Line::Event {
                sub: sub(s.0),
                relay,
                id: labels.handles().then_some(Hex(&id.0)),
                event: Checked::new(raw, labels.lines()),
            },
            Event::CaughtUp {
                sub: s,
                method,
                exact_since,
                recovered,
            } => Line::CaughtUp {
                sub: sub(s.0),
                relay,
                method: method.as_str(),
                exact_since: *exact_since,
                recovered: *recovered,
            },
            Event::Eose { sub: s } => Line::Eose {
                sub: sub(s.0),
                relay,
            },
            Event::Closed {
                sub: s,
                reason,
                attempts,
            } => Line::Closed {
                sub: sub(s.0),
                relay,
                reason,
                attempts: *attempts,
            },
            Event::Retrying {
                sub: s,
                at,
                attempt,
            } => Line::Retrying {
                sub: sub(s.0),
                relay,
                in_ms: millis_until(now, *at),
                attempt: *attempt,
            },
            Event::Queued { sub: s } => Line::Queued {
                sub: sub(s.0),
                relay,
            },
            Event::EoseTimeout { sub: s } => Line::EoseTimeout {
                sub: sub(s.0),
                relay,
            },
            Event::RateLimited { until } => Line::RateLimited {
                relay,
                window_ms: millis_until(now, *until),
            },
            Event::SubscriptionLimit { max } => Line::SubscriptionLimit { relay, max: *max },
            Event::Notice { message } => Line::Notice { relay, message },
            Event::AuthChallenge { challenge, id } => Line::Auth {
                relay,
                challenge,
                id: labels.handles().then_some(id.0),
            },
            Event::Authenticated => Line::Authenticated { relay },
            Event::AuthFailed { reason } => Line::AuthFailed { relay, reason },
            Event::Published { id } => Line::Published {
                relay,
                id: Hex(&id.0),
            },
            Event::Rejected { id, reason } => {
                let (message, len, max) = match reason {
                    Rejection::Refused { message } => (Some(message.as_str()), None, None),
                    Rejection::TimedOut => (None, None, None),
                    Rejection::TooLarge { len, max } => (None, Some(*len), Some(*max)),
                };
                Line::Rejected {
                    relay,
                    id: Hex(&id.0),
                    why: reason.as_str(),
                    message,
                    len,
                    max,
                }
            }
            Event::PeerError { error } => Line::peer_error(relay, error.kind(), &error.to_string()),
        }
    }
}

/// What a relay session asks its host to do on the wire, as a line: `open` (a WebSocket,
/// its inputs tagged `epoch`), `send` (`text`, and what it `carries`: `{"req":SUB}`,
/// `{"close":SUB}`, `{"negentropy":SUB}`, `{"event":"hex"}` or `{"auth":"hex"}`), `ping`,
/// `close` (that epoch's socket), `fetch_info` (the relay's NIP-11 document). A pool's
/// transmits carry the `relay` they are for, and the `open` of a relay the pool chose itself
/// (routing by people) names its `url`.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(missing_docs)] // The fields are the wire contract, documented on the type.
pub enum TransmitLine<'a> {
    /// Open a WebSocket.
    Open {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        epoch: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<&'a str>,
    },
    /// Send a text frame.
    Send {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        text: &'a str,
        carries: CarriesLine<'a>,
    },
    /// Send a WebSocket ping.
    Ping {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
    /// Close that epoch's socket.
    Close {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
        epoch: u64,
    },
    /// Fetch the relay's NIP-11 document.
    FetchInfo {
        #[serde(skip_serializing_if = "Option::is_none")]
        relay: Option<Label<'a>>,
    },
}

/// What a `send` frame carries.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CarriesLine<'a> {
    /// A subscription's REQ.
    Req(u64),
    /// A subscription's CLOSE.
    Close(u64),
    /// A NIP-77 frame of a subscription's catch-up.
    Negentropy(u64),
    /// A published EVENT.
    Event(Hex<'a>),
    /// A NIP-42 AUTH answer.
    Auth(Hex<'a>),
}

impl<'a> TransmitLine<'a> {
    /// The line for `transmit`, `relay` naming the socket it is for (`None` for one relay).
    pub fn new(transmit: &'a Transmit, relay: Option<Label<'a>>) -> TransmitLine<'a> {
        match transmit {
            Transmit::Open { epoch, url } => TransmitLine::Open {
                relay,
                epoch: epoch.0,
                url: url.as_deref(),
            },
            Transmit::Send { text, carries } => TransmitLine::Send {
                relay,
                text,
                carries: match carries {
                    Carries::Req(sub) => CarriesLine::Req(sub.0),
                    Carries::Close(sub) => CarriesLine::Close(sub.0),
                    Carries::Negentropy(sub) => CarriesLine::Negentropy(sub.0),
                    Carries::Event(id) => CarriesLine::Event(Hex(&id.0)),
                    Carries::Auth(id) => CarriesLine::Auth(Hex(&id.0)),
                },
            },
            Transmit::Ping => TransmitLine::Ping { relay },
            Transmit::Close { epoch } => TransmitLine::Close {
                relay,
                epoch: epoch.0,
            },
            Transmit::FetchInfo => TransmitLine::FetchInfo { relay },
        }
    }

    /// The line of a pool's `transmit` for `relay`: an `open` names the URL the pool chose
    /// for it ([`RelayPool::relay_url`](crate::pool::RelayPool::relay_url)), so a host dials
    /// the relays routing picked without knowing routing.
    pub fn pool(
        transmit: &'a Transmit,
        relay: Label<'a>,
        url: Option<&'a str>,
    ) -> TransmitLine<'a> {
        let mut line = TransmitLine::new(transmit, Some(relay));
        if let TransmitLine::Open { url: slot, .. } = &mut line {
            *slot = url;
        }
        line
    }
}

/// An event copy a host must verify (the pool's `verify`): its `ticket`, the `relay` that
/// sent it, the `id` it claims and the relay's JSON.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyLine<'a> {
    /// Answer with it.
    pub ticket: u64,
    /// The relay that sent the copy.
    pub relay: u32,
    /// The id it claims.
    pub id: Hex<'a>,
    /// Its JSON, embedded.
    pub event: Checked<'a>,
}

impl<'a> VerifyLine<'a> {
    /// The line for `request`.
    pub fn new(request: &'a crate::pool::VerifyRequest) -> VerifyLine<'a> {
        VerifyLine {
            ticket: request.ticket.0,
            relay: request.relay.0,
            id: Hex(&request.id.0),
            event: Checked::new(&request.raw, false),
        }
    }
}
