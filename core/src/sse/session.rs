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
//! # Requests that are not GETs
//!
//! The session sends the application's [`Request`] (see [`request`](super::request) for
//! which requests may be sent again, and when). For one that is not repeatable (a POST):
//!
//! | what happened | outcome |
//! | --- | --- |
//! | refused connection, TLS failure, 408 / 429 / 5xx before the stream opened | sent again after backoff (`Retry-After` honoured), at most [`SseConfig::max_unsent_retries`] times, then [`FailReason::Exhausted`] |
//! | any other loss before it opened (reset, connect timeout: the server may have it) | [`FailReason::Interrupted`] |
//! | another status | [`FailReason::Rejected`] with the first [`SseConfig::max_error_body`] bytes of the body |
//! | the opened stream is lost | the [`Resume`] policy: [`Resume::Never`] ends ([`Event::Ended`] when the body ended and no end rule exists, else [`FailReason::Interrupted`]); [`Resume::LastEventId`] sends the resume request |
//! | a resume request gets 404 | [`FailReason::SessionGone`] (MCP: the session expired, initialize again) |
//! | the same `Last-Event-ID` fails [`SseConfig::max_same_id_resumes`] times in a row | [`FailReason::ResumeExhausted`] |
//!
//! For any request, a message matching the [`EndRules`](super::request::EndRules) ends the
//! stream with [`Event::Ended`] (or [`FailReason::ErrorEvent`]) and nothing reconnects. Every
//! terminal outcome of these carries a [`Progress`]: how many messages the application got
//! and the last event ID. Before any request goes out again the application hears
//! [`Event::Reconnecting`]: there is no silent re-send.
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
//! - Lines and events are bounded by the parser ([`ParserConfig`](super::ParserConfig)).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::link::{Epoch, Link, LinkAction, SocketError, SocketLoss};
use crate::rng::Rng;
use crate::sse::parser::{Item, Message, Parser};
use crate::sse::request::{Attempt, Progress, Request, Requests, Resume};
use crate::time::{Clock, Instant};
use crate::wake::Wake;

pub use crate::sse::config::SseConfig;
pub use crate::sse::output::{
    CloseReason, DropReason, EndReason, Event, FailReason, SseStats, Transmit, MAX_DETAIL_LEN,
};
use crate::sse::redirect::{judge, Hop, Redirect, CREDENTIALS};
use crate::sse::resume::{AfterDrop, Dropped, Resumes};
use crate::sse::status::{classify, may_have_acted, Verdict};
pub use crate::sse::status::{is_event_stream, parse_retry_after, ResponseHead};

/// What [`SseSession::connect`] does first in a restored session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Restored {
    /// The request was out when the checkpoint was taken: its stream was lost then.
    pub(crate) was_out: bool,
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
    requests: Requests,
    /// The application's request opened since `connect`: the server has it.
    accepted: bool,
    /// What the resume policy remembers of this run's drops.
    resumes: Resumes,
    /// Messages delivered since `connect`.
    delivered: u64,
    /// A refused request whose error body is being read.
    rejection: Option<Rejection>,
    /// Which request the live (or latest) attempt sent.
    attempt: Attempt,
    /// The server's `retry:` delay, if it sent one.
    server_retry: Option<Duration>,
    /// Restored from a checkpoint and not yet connected.
    restored: Option<Restored>,
    /// Why the latest attempt since `connect` was lost, for the next attempt's builder.
    last_drop: Option<DropReason>,
    /// What the live attempt sent, and redirects it followed.
    sent: Option<Sent>,
}

/// The latest request on the wire, which a redirect sends again elsewhere.
#[derive(Clone, Debug)]
struct Sent {
    request: Arc<Request>,
    last_event_id: Option<String>,
    hops: u32,
    /// A hop went to another origin: no credentials from here on.
    withhold: &'static [&'static str],
}

/// What one request is, for a driver that builds each attempt ([`SseSession::attempt_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptInfo {
    /// Requests sent since the session was created, this one included (1 for the first).
    pub number: u64,
    /// Which request it is: the application's, a resume, or a re-issue.
    pub attempt: Attempt,
    /// Why the previous attempt since `connect` was lost; `None` for the first.
    pub after: Option<DropReason>,
}

/// The head of a refusal whose body the session is reading for [`FailReason::Rejected`].
#[derive(Clone, Debug)]
struct Rejection {
    status: u16,
    body: Vec<u8>,
}

impl SseSession {
    /// The latest `now` an input carried: what the relative times of the lines of its
    /// outputs ([`line`](crate::line)) are measured from.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// An idle session for a plain GET; `seed` drives its jitter (same seed + same inputs =
    /// same outputs).
    #[must_use]
    pub fn new(config: SseConfig, seed: u64) -> Self {
        Self::with_request(config, Request::get(), seed)
    }

    /// An idle session that sends `request` (see the [module docs](self) for what is sent
    /// again, and when).
    #[must_use]
    pub fn with_request(config: SseConfig, request: Request, seed: u64) -> Self {
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
            requests: Requests::new(request),
            accepted: false,
            resumes: Resumes::default(),
            delivered: 0,
            rejection: None,
            attempt: Attempt::Original,
            server_retry: None,
            restored: None,
            last_drop: None,
            sent: None,
        }
    }

    /// The application's request.
    pub fn request(&self) -> &Request {
        &self.requests.original
    }

    /// How far the stream got since `connect`: messages delivered, last event ID.
    pub fn progress(&self) -> Progress {
        Progress::new(self.delivered, self.parser.last_event_id())
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

    /// What the request of the latest [`Transmit::Open`] is for: a driver that builds each
    /// attempt's headers and body (a fresh token, a new JSON-RPC id) asks this when it sends
    /// one. The core has already decided that the attempt may go.
    pub fn attempt_info(&self) -> AttemptInfo {
        AttemptInfo {
            number: self.stats.requests,
            attempt: self.attempt,
            after: self.last_drop,
        }
    }

    /// The base reconnect delay in force (the policy's, or the last `retry:` field, clamped).
    pub fn retry_base(&self) -> Duration {
        self.link.backoff().policy().base
    }

    /// The application wants the stream. Asks for a request unless one is already open,
    /// pending or scheduled.
    ///
    /// In a session restored from a checkpoint, the first `connect` goes on from it: a
    /// request that was out is treated as lost at the restart ([`DropReason::Restarted`]),
    /// announced with [`Event::Reconnecting`] and sent as its resume policy says, or, when
    /// the policy forbids sending it again, ended with its final event.
    pub fn connect(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        let restored = self.restored.take();
        if restored.is_some_and(|r| r.was_out) && !self.link.wants_connection() {
            if let AfterDrop::Stop(event) = self.after_drop(DropReason::Restarted) {
                self.parser.finish();
                self.emit(event);
                return;
            }
        }
        let Some(epoch) = self.link.connect(now) else {
            return;
        };
        match restored {
            None => {
                self.opened_once = false;
                self.lost_at = None;
                self.accepted = false;
                self.resumes = Resumes::default();
                self.delivered = 0;
                self.last_drop = None;
            }
            Some(Restored { was_out }) => {
                self.opened_once = self.accepted;
                self.lost_at = Some(now);
                if was_out {
                    self.last_drop = Some(DropReason::Restarted);
                    self.emit(Event::Reconnecting {
                        why: DropReason::Restarted,
                        attempt: 1,
                        at: now,
                    });
                }
            }
        }
        self.rejection = None;
        self.send_request(epoch);
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
        self.rejection = None;
        self.link.disconnect();
        self.parser.finish();
        self.emit(Event::Closed {
            why: CloseReason::Local,
        });
    }

    /// The response head of `epoch` arrived: [`SseSession::handle_head`] with the status,
    /// `Content-Type` and parsed `Retry-After` only.
    ///
    /// # Errors
    ///
    /// As [`SseSession::handle_head`].
    pub fn handle_response(
        &mut self,
        now: Instant,
        epoch: Epoch,
        status: u16,
        content_type: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Result<(), SocketError> {
        let head = ResponseHead::new(status)
            .content_type(content_type)
            .retry_after(retry_after);
        self.handle_head(now, epoch, &head)
    }

    /// The response head of `epoch` arrived.
    ///
    /// `content_type` is the `Content-Type` header; `retry_after` the parsed `Retry-After`
    /// (see [`parse_retry_after`]), honoured as a minimum delay on retryable statuses; a
    /// redirect is followed or refused by `location` and `url` (see
    /// [`redirect`](super::redirect)); a `content_encoding` other than `identity` fails.
    ///
    /// # Errors
    ///
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out, [`SocketError::AlreadyOpen`]
    /// for a second head on an open epoch. Stale epochs are ignored.
    pub fn handle_head(
        &mut self,
        now: Instant,
        epoch: Epoch,
        head: &ResponseHead<'_>,
    ) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if !self.is_live(epoch)? {
            return Ok(());
        }
        if self.link.is_open() || self.rejection.is_some() {
            return Err(SocketError::AlreadyOpen(epoch));
        }
        let ResponseHead {
            status,
            retry_after,
            ..
        } = *head;
        let verdict = match classify(head) {
            // The application may have acted on a request that must not run twice: the
            // status ends it, with the server's explanation.
            Verdict::Retry if may_have_acted(status) && self.unsafe_to_repeat() => {
                Verdict::Fail(FailReason::Status(status))
            }
            verdict => verdict,
        };
        match verdict {
            Verdict::Open => {
                if self.attempt == Attempt::Original {
                    self.accepted = true;
                }
                self.stream_opened(now);
            }
            Verdict::Retry => {
                self.transmits.push_back(Transmit::Close { epoch });
                let min = retry_after
                    .unwrap_or(Duration::ZERO)
                    .min(self.config.retry_after_cap);
                self.lose(now, DropReason::Status(status), min);
            }
            Verdict::NoContent => {
                self.stop(epoch);
                self.emit(Event::Closed {
                    why: CloseReason::NoContent,
                });
            }
            Verdict::Redirect => self.redirect(epoch, head),
            Verdict::Fail(FailReason::Status(404)) if self.attempt == Attempt::Resume => {
                self.stop(epoch);
                let progress = self.progress();
                self.emit(Event::Failed {
                    why: FailReason::SessionGone { progress },
                });
            }
            // The server's explanation is worth the wait for a request the application cannot
            // simply repeat; a GET keeps failing at once, as it always did.
            Verdict::Fail(FailReason::Status(status)) if !self.request().repeatable => {
                self.rejection = Some(Rejection {
                    status,
                    body: Vec::new(),
                });
            }
            Verdict::Fail(why) => {
                self.stop(epoch);
                self.emit(Event::Failed { why });
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
        if self.rejection.is_some() {
            self.read_rejection(bytes);
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
            if self.drain_parser() {
                // The stream ended on a message: the rest of the body is not read.
                self.stats.bytes += consumed as u64;
                return Ok(bytes.len());
            }
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
        if self.link.is_open() || self.rejection.is_some() {
            return Err(SocketError::AlreadyOpen(epoch));
        }
        self.stop(epoch);
        self.emit(Event::Failed {
            why: FailReason::InvalidRequest(truncate(detail, MAX_DETAIL_LEN).to_owned()),
        });
        Ok(())
    }

    /// Act on any deadline passed at `now` (reconnect due, connect timeout, idle watchdog).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        if self.link.is_suspended() {
            // No clock runs while the application is away (see `suspend`).
            return;
        }
        let was_open = self.link.is_open();
        let action = self.link.handle_timeout(now, &mut self.rng);
        self.follow_link(now, was_open, action);
    }

    /// One lifecycle signal ([`Lifecycle`](crate::Lifecycle)): `suspend`, `resume`,
    /// `network_changed` or `set_online` by value.
    pub fn handle_lifecycle(&mut self, now: Instant, signal: crate::Lifecycle) {
        match signal {
            crate::Lifecycle::Suspended => self.suspend(now),
            crate::Lifecycle::Resumed => self.resume(now),
            crate::Lifecycle::NetworkChanged { old_path_gone } => {
                self.network_changed(now, old_path_gone);
            }
            crate::Lifecycle::Online(online) => self.set_online(now, online),
        }
    }

    /// The application is suspended: no deadline runs until [`SseSession::resume`], so the
    /// time away is not charged as the server's silence. Idempotent.
    pub fn suspend(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        self.link.suspend(now);
    }

    /// The application is back: the idle watchdog and a pending connect restart now, and a
    /// reconnect that fell due meanwhile goes now (once). Safe without a suspend.
    pub fn resume(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        let was_open = self.link.is_open();
        let (_, action) = self.link.resume(now);
        self.follow_link(now, was_open, action);
    }

    /// The network path changed: the backoff from network failures resets, a waiting
    /// reconnect goes within the link's `network_jitter`, and with `old_path_gone` the open
    /// stream is given up at once (a resumable one resumes with `Last-Event-ID`).
    pub fn network_changed(&mut self, now: Instant, old_path_gone: bool) {
        let now = self.clock.observe(now);
        let was_open = self.link.is_open();
        let action = self.link.network_changed(now, old_path_gone, &mut self.rng);
        self.follow_link(now, was_open, action);
    }

    /// The device has (`online`) or has lost the network: offline, no request is made and no
    /// retry is spent; back online, the reconnect goes within the link's `network_jitter`.
    /// Idempotent.
    pub fn set_online(&mut self, now: Instant, online: bool) {
        let now = self.clock.observe(now);
        self.link.set_online(now, online, &mut self.rng);
    }

    /// Do what the link decided.
    fn follow_link(&mut self, now: Instant, was_open: bool, action: Option<LinkAction>) {
        let Some(action) = action else {
            return;
        };
        match action {
            LinkAction::Open(epoch) => self.send_request(epoch),
            // Not produced with `Liveness::Idle`; SSE has no way to ping.
            LinkAction::Ping => {}
            LinkAction::Dead { reconnect_at, why } => {
                let why = match why {
                    SocketLoss::IdleTimeout => DropReason::IdleTimeout,
                    SocketLoss::ConnectTimeout => DropReason::ConnectTimeout,
                    other => DropReason::NetworkError(other),
                };
                if let Some(epoch) = self.live.take() {
                    self.transmits.push_back(Transmit::Close { epoch });
                }
                if self.rejection.is_some() {
                    // A refusal's body is read no longer than a response head is waited for.
                    self.finish_rejection();
                    return;
                }
                // The link already scheduled the reconnect; a stop cancels it. (The same-id
                // minimum of `after_drop` only adds to drops the session reports itself.)
                match self.after_drop(why) {
                    AfterDrop::Retry(_) => self.after_loss(now, was_open, why, reconnect_at),
                    AfterDrop::Stop(event) => self.end_with(event),
                }
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
        self.poll_wake().map(|(at, _)| at)
    }

    /// [`SseSession::poll_timeout`] with what it is for ([`Wake::Output`] while output is
    /// queued; else a reconnect, a connect timeout or the idle watchdog).
    #[must_use]
    pub fn poll_wake(&self) -> Option<(Instant, Wake)> {
        if !self.transmits.is_empty() || !self.events.is_empty() {
            return Some((self.clock.now(), Wake::Output));
        }
        // Suspended, the link has no deadline either.
        self.link.poll_wake()
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
            LinkState::Idle | LinkState::Waiting { .. } | LinkState::Queued { .. } => None,
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

fn failed(why: FailReason) -> Event {
    Event::Failed { why }
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

    fn send_request(&mut self, epoch: Epoch) {
        self.live = Some(epoch);
        self.stats.requests += 1;
        let id = self.parser.resume_id();
        let reissue = matches!(self.requests.original.resume, Resume::Reissue { .. });
        let (attempt, request) = match &self.requests.resume {
            Some(resume) if self.accepted => (Attempt::Resume, Arc::clone(resume)),
            _ if self.accepted && reissue => {
                (Attempt::Reissue, Arc::clone(&self.requests.original))
            }
            _ => (Attempt::Original, Arc::clone(&self.requests.original)),
        };
        self.attempt = attempt;
        // A re-issue is a new request: it resumes nothing.
        let last_event_id = (!id.is_empty() && attempt != Attempt::Reissue).then(|| id.to_owned());
        self.sent = Some(Sent {
            request: Arc::clone(&request),
            last_event_id: last_event_id.clone(),
            hops: 0,
            withhold: &[],
        });
        self.transmits.push_back(Transmit::Open {
            epoch,
            last_event_id,
            request,
            attempt,
            redirect: None,
            withhold: &[],
        });
    }

    /// A 3xx head: follow it as a hop of the same attempt, or fail (see
    /// [`redirect`](super::redirect)).
    fn redirect(&mut self, epoch: Epoch, head: &ResponseHead<'_>) {
        let Some(sent) = self.sent.as_mut() else {
            return;
        };
        let hop = judge(
            &Redirect {
                status: head.status,
                method: &sent.request.method,
                from: head.url,
                location: head.location,
                hops: sent.hops,
            },
            &self.config.redirects,
        );
        let (url, as_get) = match hop {
            Hop::Follow {
                url,
                as_get,
                cross_origin,
            } => {
                if cross_origin {
                    sent.withhold = CREDENTIALS;
                }
                (url, as_get)
            }
            Hop::Refuse(why) => {
                let location = truncate(head.location.unwrap_or_default(), MAX_DETAIL_LEN);
                self.stop(epoch);
                self.emit(failed(FailReason::Redirect {
                    status: head.status,
                    location: location.to_owned(),
                    why,
                }));
                return;
            }
        };
        sent.hops += 1;
        if as_get {
            // The server answered the request (a 303 says it took it): it never goes again.
            self.accepted = true;
            sent.request = Arc::new(sent.request.resumed_with("GET"));
        }
        self.stats.requests += 1;
        self.stats.redirects += 1;
        self.transmits.push_back(Transmit::Open {
            epoch,
            last_event_id: sent.last_event_id.clone(),
            request: Arc::clone(&sent.request),
            attempt: self.attempt,
            redirect: Some(Arc::from(url)),
            withhold: sent.withhold,
        });
    }

    fn stream_opened(&mut self, now: Instant) {
        self.link.on_open(now);
        self.parser.finish();
        self.stats.opened += 1;
        let gap = now.saturating_duration_since(self.lost_at.unwrap_or(now));
        let event = match (self.opened_once, self.attempt) {
            (false, _) => Event::Open,
            (true, Attempt::Reissue) => Event::Reissued {
                gap,
                attempts: self.resumes.reissues_since_cut(),
            },
            (true, _) => Event::Reconnected { gap },
        };
        self.opened_once = true;
        self.lost_at = None;
        self.emit(event);
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
        if self.rejection.is_some() {
            self.live = None;
            self.finish_rejection();
            return Ok(());
        }
        self.lose(now, why, Duration::ZERO);
        Ok(())
    }

    /// The live request is gone for a retryable reason: schedule the next one, if the request
    /// and the resume policy allow one.
    fn lose(&mut self, now: Instant, why: DropReason, min_delay: Duration) {
        let was_open = self.link.is_open();
        self.live = None;
        self.last_drop = Some(why);
        match self.after_drop(why) {
            AfterDrop::Retry(at_least) => {
                let min_delay = min_delay.max(at_least);
                let reconnect_at = self.link.on_close(now, min_delay, &mut self.rng);
                self.after_loss(now, was_open, why, reconnect_at);
            }
            AfterDrop::Stop(event) => self.end_with(event),
        }
    }

    /// Whether anything may be sent again after `why`, by the resume policy
    /// ([`Resumes::after_drop`]).
    fn after_drop(&mut self, why: DropReason) -> AfterDrop {
        let progress = self.progress();
        self.resumes.after_drop(Dropped {
            request: &self.requests.original,
            accepted: self.accepted,
            why,
            // A restart cut a stream the server had: a cut, not a refused attempt.
            opened: self.link.is_open() || why == DropReason::Restarted,
            resume_id: self.parser.resume_id(),
            progress,
            config: &self.config,
        })
    }

    /// Stop after a loss with `event` as the last word (the request is already gone).
    fn end_with(&mut self, event: Event) {
        self.live = None;
        self.link.disconnect();
        self.parser.finish();
        self.emit(event);
    }

    /// Keep up to `max_error_body` bytes of a refusal's body; once that much is in, stop.
    fn read_rejection(&mut self, bytes: &[u8]) {
        let Some(rejection) = self.rejection.as_mut() else {
            return;
        };
        let room = self
            .config
            .max_error_body
            .saturating_sub(rejection.body.len());
        rejection
            .body
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
        if rejection.body.len() >= self.config.max_error_body {
            if let Some(epoch) = self.live.take() {
                self.transmits.push_back(Transmit::Close { epoch });
            }
            self.finish_rejection();
        }
    }

    /// The refusal's body is in (or cut off): fail with it.
    fn finish_rejection(&mut self) {
        let Some(rejection) = self.rejection.take() else {
            return;
        };
        let text = String::from_utf8_lossy(&rejection.body);
        let body = truncate(&text, self.config.max_error_body).to_owned();
        let progress = self.progress();
        self.end_with(failed(FailReason::Rejected {
            status: rejection.status,
            body,
            progress,
        }));
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
            // A stream the client gave up on itself (silent past the idle timeout, or on a
            // network path that is gone) may have died any time after the server was last
            // heard: the gap starts there, as a relay's catch-up does. One whose end the
            // transport reported was working until that end arrived.
            let silent = matches!(
                why,
                DropReason::IdleTimeout | DropReason::NetworkError(SocketLoss::NetworkChanged)
            );
            self.lost_at = Some(if silent {
                self.link.heard_at().min(now)
            } else {
                now
            });
        }
        let event = match reconnect_at {
            Some(at) => Event::Reconnecting {
                why,
                // A reconnect the link schedules without charging the backoff (after a
                // network change, or a loss while offline) is still an attempt: the first.
                attempt: self.link.attempts().max(1),
                at,
            },
            None => Event::Failed {
                why: FailReason::Exhausted(why),
            },
        };
        self.emit(event);
    }

    /// Queue `event` for the application. A terminal one ([`Event::Failed`],
    /// [`Event::Closed`], [`Event::Ended`]) also queues [`Transmit::End`]: the core, not the
    /// driver, says when a stream is over.
    fn emit(&mut self, event: Event) {
        if matches!(
            event,
            Event::Failed { .. } | Event::Closed { .. } | Event::Ended { .. }
        ) {
            self.transmits.push_back(Transmit::End);
        }
        self.events.push_back(event);
    }

    /// Abort `epoch` and stop for good (the caller queues the final event).
    fn stop(&mut self, epoch: Epoch) {
        self.transmits.push_back(Transmit::Close { epoch });
        self.live = None;
        self.link.disconnect();
        self.parser.finish();
    }

    /// Turn parsed items into events; `true` when a message ended the stream (the items
    /// behind it are dropped).
    fn drain_parser(&mut self) -> bool {
        while let Some(item) = self.parser.next_item() {
            match item {
                Item::Message(message) => {
                    if let Some(last) = self.end_event(&message) {
                        while self.parser.next_item().is_some() {}
                        if let Some(epoch) = self.live {
                            self.stop(epoch);
                        }
                        self.emit(last);
                        return true;
                    }
                    self.stats.messages += 1;
                    self.delivered += 1;
                    let ends = self.requests.original.end.ends_after(&message.data);
                    let progress = Progress::new(self.delivered, &message.id);
                    self.emit(Event::Message(message));
                    if ends {
                        while self.parser.next_item().is_some() {}
                        if let Some(epoch) = self.live {
                            self.stop(epoch);
                        }
                        self.emit(Event::Ended {
                            why: EndReason::Response,
                            progress,
                        });
                        return true;
                    }
                }
                Item::Heartbeat => self.stats.heartbeats += 1,
                Item::Retry(delay) => self.set_retry(delay),
                Item::Error(error) => {
                    self.stats.parse_errors += 1;
                    self.emit(Event::ParseError(error));
                }
                Item::UnsendableId { id, why } => {
                    self.stats.unsendable_ids += 1;
                    self.emit(Event::UnsendableId { id, why });
                }
            }
        }
        false
    }

    /// The last event when `message` ends the stream by the request's [`EndRules`].
    ///
    /// [`EndRules`]: super::request::EndRules
    fn end_event(&self, message: &Message) -> Option<Event> {
        let end = &self.requests.original.end;
        let why = if end.data.as_deref() == Some(message.data.as_str()) {
            EndReason::Data
        } else if end.event.as_deref() == Some(message.event.as_str()) {
            EndReason::Event(message.event.clone())
        } else if end.error_event.as_deref() == Some(message.event.as_str()) {
            let data = truncate(&message.data, self.config.max_error_body).to_owned();
            let progress = self.progress();
            return Some(failed(FailReason::ErrorEvent { data, progress }));
        } else {
            return None;
        };
        Some(Event::Ended {
            why,
            progress: Progress::new(self.delivered, &message.id),
        })
    }

    /// Whether the application's request, sent now, may not be sent again after the server
    /// may have acted on it: not repeatable, and no policy says repeating it is safe.
    fn unsafe_to_repeat(&self) -> bool {
        let request = self.request();
        self.attempt == Attempt::Original
            && !request.repeatable
            && !matches!(request.resume, Resume::SameRequest | Resume::Reissue { .. })
    }

    /// Where the request stands for a checkpoint: out (wanted: connecting, open or waiting to
    /// reconnect), and accepted by the server since `connect`.
    pub(crate) fn stream_state(&self) -> (bool, bool) {
        (self.link.wants_connection(), self.accepted)
    }

    /// The last event ID and the newest sendable one.
    pub(crate) fn parser_ids(&self) -> (&str, &str) {
        (self.parser.last_event_id(), self.parser.resume_id())
    }

    /// The server's `retry:` delay, if it sent one.
    pub(crate) fn server_retry(&self) -> Option<Duration> {
        self.server_retry
    }

    /// Take a checkpoint's state (see [`SseSession::restore`]).
    pub(crate) fn restore_state(
        &mut self,
        last_event_id: &str,
        resume_id: &str,
        retry: Option<Duration>,
        delivered: u64,
        accepted: bool,
        restored: Restored,
    ) {
        self.parser.restore_ids(last_event_id, resume_id);
        if let Some(delay) = retry {
            self.set_retry(delay);
        }
        self.delivered = delivered;
        self.accepted = accepted;
        self.restored = Some(restored);
    }

    fn set_retry(&mut self, delay: Duration) {
        self.server_retry = Some(delay);
        let backoff = self.link.backoff_mut();
        let cap = backoff.policy().cap.max(self.config.retry_floor);
        backoff.set_floor(delay.clamp(self.config.retry_floor, cap));
    }
}
