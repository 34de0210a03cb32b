//! `SseSession`: one Server-Sent Events stream kept alive across drops.
//!
//! It is a [`Link`] (intent, epochs, reconnect backoff with stable reset, idle watchdog) plus a
//! [`Parser`], the `retry:` field, the last event ID and the HTTP status rules:
//!
//! | response | outcome |
//! | --- | --- |
//! | 200 + `text/event-stream` (parameters allowed) | open: [`Event::Open`], or [`Event::Reconnected`] after a drop |
//! | 204 | closed for good: [`Event::Closed`] |
//! | 5xx, 408, 429 | reconnect after backoff, no sooner than `Retry-After` (capped) |
//! | network error, EOF, connect timeout, idle timeout | reconnect after backoff |
//! | any other status, 200 with another content type | [`Event::Failed`], no reconnect |
//! | the driver could not build the request | [`Event::Failed`] ([`FailReason::InvalidRequest`]), no reconnect |
//!
//! # Resuming
//!
//! A reconnect carries the newest last event ID that can be sent as a header
//! ([`resume`](super::resume) has the rule). An id that cannot be is still delivered on its
//! messages, counted in [`SseStats::unsendable_ids`] and announced once with
//! [`Event::UnsendableId`]; the next request resumes from the previous sendable id, so the
//! server replays from an older point (duplicates, never a silent gap, and never a request
//! the HTTP client refuses to build).
//!
//! # Driving
//!
//! Every socket (one HTTP request) has an [`Epoch`], handed out in [`Transmit::Open`]; the
//! driver tags each `handle_*` call with it. Input for an epoch the session already let go
//! (closed, timed out, superseded) is stale: ignored and counted in
//! [`SseStats::stale_inputs`]. Input for an epoch never
//! handed out, or body bytes before the response head, is local misuse and returns
//! [`SocketError`] (h11's split: the peer's mistakes become events, the driver's become errors).
//!
//! # Bounds
//!
//! - The event queue holds at most [`SseConfig::max_queued_events`] parsed events (messages,
//!   parse errors and unsendable-id notices; one more when a message and its notice come from
//!   the same blank line): when it is full, [`SseSession::handle_bytes`]
//!   stops consuming and returns how many bytes it took; the driver drains events and offers
//!   the rest again (backpressure, not loss). Status events (open, reconnecting, failed, ...)
//!   are at most two per input call and are never dropped.
//! - The transmit queue holds at most two entries per input call.
//! - Lines and events are bounded by the parser ([`ParserConfig`]).

use std::collections::VecDeque;
use std::time::Duration;

use crate::backoff::BackoffPolicy;
use crate::link::{Epoch, Link, LinkAction, LinkConfig, Liveness, SocketError, SocketLoss};
use crate::rng::Rng;
use crate::sse::parser::{Item, Message, ParseError, Parser, ParserConfig};
use crate::sse::resume::Unsendable;
use crate::time::{Clock, Instant};

/// Configuration of an [`SseSession`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct SseConfig {
    /// Reconnect delays: 1 s, x2, capped at 30 s, +-50% jitter, unbounded attempts.
    pub reconnect: BackoffPolicy,
    /// The reconnect counter resets only once a stream stayed open this long (30 s), so an
    /// accept-then-drop server does not get a 1 s reconnect loop.
    pub stable_after: Duration,
    /// A request without a response head after this long counts as failed (30 s).
    pub connect_timeout: Duration,
    /// Silence (no bytes at all, heartbeats included) tolerated on an open stream before it is
    /// closed and reconnected; `None` disables the watchdog. Default 90 s = 3 x a 30 s
    /// heartbeat.
    pub idle_timeout: Option<Duration>,
    /// Smallest base delay a `retry:` field can set (500 ms), so `retry: 0` cannot make a
    /// tight reconnect loop. The largest is `reconnect.cap`.
    pub retry_floor: Duration,
    /// Largest `Retry-After` honoured (10 min); a longer one is cut to this.
    pub retry_after_cap: Duration,
    /// Messages queued before [`SseSession::handle_bytes`] stops consuming (1024).
    pub max_queued_events: usize,
    /// Line, event and parser-queue limits.
    pub parser: ParserConfig,
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig {
            reconnect: BackoffPolicy::reconnect(),
            stable_after: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Some(Duration::from_secs(90)),
            retry_floor: Duration::from_millis(500),
            retry_after_cap: Duration::from_secs(600),
            max_queued_events: 1024,
            parser: ParserConfig::default(),
        }
    }
}

impl SseConfig {
    /// The [`LinkConfig`] this configuration drives the connection with.
    #[must_use]
    pub fn link_config(&self) -> LinkConfig {
        LinkConfig {
            reconnect: self.reconnect,
            stable_after: self.stable_after,
            connect_timeout: self.connect_timeout,
            liveness: match self.idle_timeout {
                Some(timeout) => Liveness::Idle { timeout },
                None => Liveness::Off,
            },
        }
    }
}

/// What the driver must do on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transmit {
    /// Start a GET with `Accept: text/event-stream`, tagged `epoch`.
    Open {
        /// Tag every input about this request with it.
        epoch: Epoch,
        /// Send as the `Last-Event-ID` header; `None` when the ID is empty. Always a valid
        /// header value (see [`resume`](super::resume)).
        last_event_id: Option<String>,
    },
    /// Abort the request or response of `epoch`.
    Close {
        /// The request to abort.
        epoch: Epoch,
    },
}

/// What the application hears.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The stream is open (the first time since [`SseSession::connect`]).
    Open,
    /// A message arrived.
    Message(Message),
    /// The stream (or an attempt) was lost; the next attempt starts at `at`.
    Reconnecting {
        /// What happened.
        why: DropReason,
        /// Attempts since the last stable stream, this one included.
        attempt: u32,
        /// When the next request starts.
        at: Instant,
    },
    /// The stream is open again after a drop; `gap` is how long it was down. Events in the gap
    /// the server could not replay from `Last-Event-ID` are lost: run one catch-up fetch.
    Reconnected {
        /// From losing the previous stream to opening this one.
        gap: Duration,
    },
    /// Part of the stream was too large and dropped; the stream carries on.
    ParseError(ParseError),
    /// The server sent an id that cannot be sent back as `Last-Event-ID`. Messages carry it
    /// unchanged; a reconnect resumes from [`SseSession::last_event_id`], the previous
    /// sendable id, so the server may replay events the application already has. Once per
    /// such `id` field.
    UnsendableId {
        /// The id as the server sent it (and messages carry it).
        id: String,
        /// Why it cannot be sent.
        why: Unsendable,
    },
    /// The server refused in a way retrying will not fix. Nothing follows until `connect`.
    Failed {
        /// Why.
        why: FailReason,
    },
    /// The session stopped for good. Nothing follows until `connect`.
    Closed {
        /// Why.
        why: CloseReason,
    },
}

/// Why a stream or an attempt was lost (and will be retried).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// A retryable status: 5xx, 408 or 429.
    Status(u16),
    /// The driver reported a network error, and what kind.
    NetworkError(SocketLoss),
    /// The response body ended.
    Eof,
    /// No response head within `connect_timeout`.
    ConnectTimeout,
    /// No bytes for `idle_timeout` on an open stream.
    IdleTimeout,
}

/// Why the session gave up.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailReason {
    /// A status that is neither 200, 204 nor retryable.
    Status(u16),
    /// 200 with a content type other than `text/event-stream` (or none).
    ContentType(Option<String>),
    /// The backoff policy's `max_attempts` ran out; the last drop was this.
    Exhausted(DropReason),
    /// The driver could not build the request (a local failure: the same request would fail
    /// again, so it is not retried). The driver's description, at most
    /// [`MAX_DETAIL_LEN`] bytes.
    InvalidRequest(String),
}

/// Longest description [`FailReason::InvalidRequest`] keeps, in bytes.
pub const MAX_DETAIL_LEN: usize = 256;

/// Why the session closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server answered 204 No Content: "stop reconnecting".
    NoContent,
    /// The application called [`SseSession::disconnect`].
    Local,
}

/// Counters, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SseStats {
    /// Requests asked for ([`Transmit::Open`]).
    pub requests: u64,
    /// Streams that opened.
    pub opened: u64,
    /// Messages dispatched.
    pub messages: u64,
    /// Comment lines seen (heartbeats).
    pub heartbeats: u64,
    /// Oversized lines or events dropped.
    pub parse_errors: u64,
    /// Body bytes consumed.
    pub bytes: u64,
    /// `id` fields that cannot be sent as `Last-Event-ID` ([`Event::UnsendableId`]).
    pub unsendable_ids: u64,
    /// Inputs for an epoch the session already let go, ignored.
    pub stale_inputs: u64,
}

/// One SSE stream kept alive; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct SseSession {
    config: SseConfig,
    link: Link,
    rng: Rng,
    clock: Clock,
    parser: Parser,
    /// The request the session still considers alive (connecting or open).
    live: Option<Epoch>,
    /// A stream opened since `connect`: later opens are reconnects.
    opened_once: bool,
    /// When the last open stream was lost.
    lost_at: Option<Instant>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: SseStats,
}

impl SseSession {
    /// An idle session; `seed` drives its jitter (same seed + same inputs = same outputs).
    #[must_use]
    pub fn new(config: SseConfig, seed: u64) -> Self {
        SseSession {
            config,
            link: Link::new(config.link_config()),
            rng: Rng::new(seed),
            clock: Clock::default(),
            parser: Parser::new(config.parser),
            live: None,
            opened_once: false,
            lost_at: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: SseStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SseConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &SseStats {
        &self.stats
    }

    /// The connection lifecycle (state, epoch, attempts).
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// The last event ID the next request will carry (empty: none): the newest one that can
    /// be sent as a header, which after an [`Event::UnsendableId`] is older than the id the
    /// latest messages carry.
    pub fn last_event_id(&self) -> &str {
        self.parser.resume_id()
    }

    /// The base reconnect delay in force (the policy's, or the last `retry:` field, clamped).
    pub fn retry_base(&self) -> Duration {
        self.link.backoff().policy().base
    }

    /// The application wants the stream. Asks for a request unless one is already open,
    /// pending or scheduled.
    pub fn connect(&mut self, now: Instant) {
        self.clock.observe(now);
        let Some(epoch) = self.link.connect(self.clock.now()) else {
            return;
        };
        self.opened_once = false;
        self.lost_at = None;
        self.request(epoch);
    }

    /// The application no longer wants the stream: aborts the request, cancels any pending
    /// reconnect and ends with [`Event::Closed`]. Late input for old epochs is ignored.
    pub fn disconnect(&mut self, now: Instant) {
        self.clock.observe(now);
        if !self.link.wants_connection() {
            return;
        }
        if let Some(epoch) = self.live.take() {
            self.transmits.push_back(Transmit::Close { epoch });
        }
        self.link.disconnect();
        self.parser.finish();
        self.events.push_back(Event::Closed {
            why: CloseReason::Local,
        });
    }

    /// The response head of `epoch` arrived.
    ///
    /// `content_type` is the `Content-Type` header; `retry_after` the parsed `Retry-After`
    /// (see [`parse_retry_after`]), honoured as a minimum delay on retryable statuses.
    ///
    /// # Errors
    ///
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out, [`SocketError::AlreadyOpen`]
    /// for a second head on an open epoch. Stale epochs are ignored.
    pub fn handle_response(
        &mut self,
        now: Instant,
        epoch: Epoch,
        status: u16,
        content_type: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if !self.is_live(epoch)? {
            return Ok(());
        }
        if self.link.is_open() {
            return Err(SocketError::AlreadyOpen(epoch));
        }
        match classify(status, content_type) {
            Verdict::Open => self.stream_opened(now),
            Verdict::Retry => {
                self.transmits.push_back(Transmit::Close { epoch });
                let min = retry_after
                    .unwrap_or(Duration::ZERO)
                    .min(self.config.retry_after_cap);
                self.lose(now, DropReason::Status(status), min);
            }
            Verdict::NoContent => {
                self.stop(epoch);
                self.events.push_back(Event::Closed {
                    why: CloseReason::NoContent,
                });
            }
            Verdict::Fail(why) => {
                self.stop(epoch);
                self.events.push_back(Event::Failed { why });
            }
        }
        Ok(())
    }

    /// Body bytes of `epoch` arrived. Returns how many were consumed: all of them unless the
    /// event queue filled up, in which case drain [`SseSession::poll_event`] and offer the
    /// rest again. Stale bytes are consumed and ignored.
    ///
    /// # Errors
    ///
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out, [`SocketError::NotOpen`] before
    /// that epoch's response head was reported.
    pub fn handle_bytes(
        &mut self,
        now: Instant,
        epoch: Epoch,
        bytes: &[u8],
    ) -> Result<usize, SocketError> {
        let now = self.clock.observe(now);
        if !self.is_live(epoch)? {
            return Ok(bytes.len());
        }
        if !self.link.is_open() {
            return Err(SocketError::NotOpen(epoch));
        }
        if bytes.is_empty() {
            return Ok(0);
        }
        self.link.on_inbound(now);
        let mut consumed = 0;
        while consumed < bytes.len() && self.events.len() < self.config.max_queued_events {
            let room = self.config.max_queued_events - self.events.len();
            consumed += self.parser.feed_limited(&bytes[consumed..], room);
            self.drain_parser();
        }
        self.stats.bytes += consumed as u64;
        Ok(consumed)
    }

    /// The driver stopped (`paused = true`) or resumed reading the body — when the
    /// application is not asking for events. While paused the idle watchdog is suspended,
    /// because unread bytes may be waiting and the silence is the driver's; on resume it
    /// restarts from `now`.
    pub fn handle_read_paused(&mut self, now: Instant, paused: bool) {
        let now = self.clock.observe(now);
        self.link.set_reading_paused(now, paused);
    }

    /// The body of `epoch` ended cleanly. An incomplete trailing event is dropped; the
    /// session reconnects after backoff.
    ///
    /// # Errors
    ///
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out. Stale epochs are ignored.
    pub fn handle_eof(&mut self, now: Instant, epoch: Epoch) -> Result<(), SocketError> {
        self.handle_end(now, epoch, DropReason::Eof)
    }

    /// The request or body of `epoch` failed on the network (connect refused, reset, TLS,
    /// ...), as `loss` says. The session reconnects after backoff.
    ///
    /// # Errors
    ///
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out. Stale epochs are ignored.
    pub fn handle_error(
        &mut self,
        now: Instant,
        epoch: Epoch,
        loss: SocketLoss,
    ) -> Result<(), SocketError> {
        self.handle_end(now, epoch, DropReason::NetworkError(loss))
    }

    /// The driver could not even build the request of `epoch` (its HTTP client refused a
    /// header or the URL): a local failure, not the network's. The session stops with
    /// [`FailReason::InvalidRequest`] carrying `detail` (cut to [`MAX_DETAIL_LEN`] bytes) and
    /// does not retry, since the same request would fail the same way.
    ///
    /// # Errors
    ///
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out, [`SocketError::AlreadyOpen`]
    /// once its response head was reported. Stale epochs are ignored.
    pub fn handle_request_invalid(
        &mut self,
        now: Instant,
        epoch: Epoch,
        detail: &str,
    ) -> Result<(), SocketError> {
        self.clock.observe(now);
        if !self.is_live(epoch)? {
            return Ok(());
        }
        if self.link.is_open() {
            return Err(SocketError::AlreadyOpen(epoch));
        }
        self.stop(epoch);
        self.events.push_back(Event::Failed {
            why: FailReason::InvalidRequest(truncate(detail, MAX_DETAIL_LEN).to_owned()),
        });
        Ok(())
    }

    /// Act on any deadline passed at `now` (reconnect due, connect timeout, idle watchdog).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        let was_open = self.link.is_open();
        let Some(action) = self.link.handle_timeout(now, &mut self.rng) else {
            return;
        };
        match action {
            LinkAction::Open(epoch) => self.request(epoch),
            // Not produced with `Liveness::Idle`; SSE has no way to ping.
            LinkAction::Ping => {}
            LinkAction::Dead { reconnect_at } => {
                let why = if was_open {
                    DropReason::IdleTimeout
                } else {
                    DropReason::ConnectTimeout
                };
                if let Some(epoch) = self.live.take() {
                    self.transmits.push_back(Transmit::Close { epoch });
                }
                self.after_loss(now, was_open, why, reconnect_at);
            }
        }
    }

    /// The next thing to put on the wire.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next thing the application should hear.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When to call [`SseSession::handle_timeout`]: the last seen `now` while output is
    /// queued, else the earliest deadline, or `None` when idle.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.transmits.is_empty() || !self.events.is_empty() {
            return Some(self.clock.now());
        }
        self.link.poll_timeout()
    }
}

#[cfg(feature = "fuzzing")]
impl SseSession {
    /// Check that the live request agrees with the link and the parser is within its bounds.
    ///
    /// For the testkit's invariants and the fuzz targets; not a stable API.
    ///
    /// # Errors
    /// A description of the first disagreement found.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<(), String> {
        use crate::link::LinkState;
        let state = self.link.state();
        let expected = match state {
            LinkState::Connecting { epoch, .. } | LinkState::Open { epoch, .. } => Some(epoch),
            LinkState::Idle | LinkState::Waiting { .. } => None,
        };
        if self.live != expected {
            return Err(format!("live request {:?} but link {state:?}", self.live));
        }
        if self.live.is_some_and(|e| e != self.link.epoch()) {
            return Err(format!(
                "live request {:?} is not the newest epoch {:?}",
                self.live,
                self.link.epoch()
            ));
        }
        self.parser.check_consistency()
    }
}

/// The delta-seconds form of `Retry-After` (`"120"`), or `None`. The HTTP-date form needs a
/// wall clock the core does not have: the driver converts it to a `Duration` itself.
#[must_use]
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = digits.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some(Duration::from_secs(secs))
}

/// Whether a `Content-Type` value is `text/event-stream`, ignoring case, spaces and
/// parameters (`text/event-stream; charset=utf-8`).
pub fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("");
    essence.trim().eq_ignore_ascii_case("text/event-stream")
}

enum Verdict {
    Open,
    Retry,
    NoContent,
    Fail(FailReason),
}

fn classify(status: u16, content_type: Option<&str>) -> Verdict {
    match status {
        200 if content_type.is_some_and(is_event_stream) => Verdict::Open,
        200 => Verdict::Fail(FailReason::ContentType(content_type.map(str::to_owned))),
        204 => Verdict::NoContent,
        408 | 429 | 500..=599 => Verdict::Retry,
        _ => Verdict::Fail(FailReason::Status(status)),
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl SseSession {
    /// Whether input for `epoch` concerns the request the session considers alive; a stale
    /// one is counted.
    fn is_live(&mut self, epoch: Epoch) -> Result<bool, SocketError> {
        let live = self.link.check_epoch(epoch)?;
        if !live {
            self.stats.stale_inputs += 1;
        }
        Ok(live)
    }

    fn request(&mut self, epoch: Epoch) {
        self.live = Some(epoch);
        self.stats.requests += 1;
        let id = self.parser.resume_id();
        self.transmits.push_back(Transmit::Open {
            epoch,
            last_event_id: (!id.is_empty()).then(|| id.to_owned()),
        });
    }

    fn stream_opened(&mut self, now: Instant) {
        self.link.on_open(now);
        self.parser.finish();
        self.stats.opened += 1;
        let event = if self.opened_once {
            let lost_at = self.lost_at.unwrap_or(now);
            Event::Reconnected {
                gap: now.saturating_duration_since(lost_at),
            }
        } else {
            Event::Open
        };
        self.opened_once = true;
        self.lost_at = None;
        self.events.push_back(event);
    }

    fn handle_end(
        &mut self,
        now: Instant,
        epoch: Epoch,
        why: DropReason,
    ) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if !self.is_live(epoch)? {
            return Ok(());
        }
        self.lose(now, why, Duration::ZERO);
        Ok(())
    }

    /// The live request is gone for a retryable reason: schedule the next one.
    fn lose(&mut self, now: Instant, why: DropReason, min_delay: Duration) {
        let was_open = self.link.is_open();
        self.live = None;
        let reconnect_at = self.link.on_close(now, min_delay, &mut self.rng);
        self.after_loss(now, was_open, why, reconnect_at);
    }

    fn after_loss(
        &mut self,
        now: Instant,
        was_open: bool,
        why: DropReason,
        reconnect_at: Option<Instant>,
    ) {
        self.parser.finish();
        if was_open {
            self.lost_at = Some(now);
        }
        let event = match reconnect_at {
            Some(at) => Event::Reconnecting {
                why,
                attempt: self.link.attempts(),
                at,
            },
            None => Event::Failed {
                why: FailReason::Exhausted(why),
            },
        };
        self.events.push_back(event);
    }

    /// Abort `epoch` and stop for good (the caller queues the final event).
    fn stop(&mut self, epoch: Epoch) {
        self.transmits.push_back(Transmit::Close { epoch });
        self.live = None;
        self.link.disconnect();
        self.parser.finish();
    }

    fn drain_parser(&mut self) {
        while let Some(item) = self.parser.next_item() {
            match item {
                Item::Message(message) => {
                    self.stats.messages += 1;
                    self.events.push_back(Event::Message(message));
                }
                Item::Heartbeat => self.stats.heartbeats += 1,
                Item::Retry(delay) => self.set_retry(delay),
                Item::Error(error) => {
                    self.stats.parse_errors += 1;
                    self.events.push_back(Event::ParseError(error));
                }
                Item::UnsendableId { id, why } => {
                    self.stats.unsendable_ids += 1;
                    self.events.push_back(Event::UnsendableId { id, why });
                }
            }
        }
    }

    fn set_retry(&mut self, delay: Duration) {
        let backoff = self.link.backoff_mut();
        let cap = backoff.policy().cap.max(self.config.retry_floor);
        backoff.set_base(delay.clamp(self.config.retry_floor, cap));
    }
}
