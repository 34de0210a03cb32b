//! [`EventStream`]: a `Stream` of SSE events that drives an [`SseSession`] as it is polled.
//!
//! There is no task and no channel: the stream reads the response body only when the
//! application asks for the next event and the session's event queue is empty, so a slow
//! reader holds the server back through TCP. Timers (reconnect delays, the idle watchdog)
//! also only run while the stream is polled, which is all they need: an application that
//! does not read is not waiting for anything. Between returning an event and the next poll
//! the core is told reading is paused, so the idle watchdog does not blame the server for
//! the application's pause.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use tether_core::link::{Epoch, SocketLoss};
use tether_core::sse::{Event, Request, ResponseHead, SseCheckpoint, SseStats, Transmit};
use tether_core::{Instant, SseSession, Wake};
use tracing::{info, warn};

use crate::config::{seed_or_random, EventSourceConfig};
use crate::drive::{step, Steps};
use crate::runtime::{Alarm, BoxFuture, HttpConnect, HttpError, HttpResponse, Runtime};
use crate::sse_request::{describe, RequestError};

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, HttpError>> + Send>>;

/// A Server-Sent Events stream kept alive across drops; see the [module docs](self).
///
/// It yields every [`Event`] of the session (open, messages, reconnecting, reconnected, parse
/// errors) and ends after [`Event::Failed`], [`Event::Closed`] or [`Event::Ended`].
#[must_use = "a stream does nothing unless polled"]
pub struct EventStream<R: Runtime> {
    rt: R,
    http: Arc<dyn HttpConnect>,
    url: Arc<str>,
    session: SseSession,
    request: Option<(Epoch, BoxFuture<Result<HttpResponse, RequestError>>)>,
    body: Option<(Epoch, Body)>,
    /// Body bytes the session could not take yet (its event queue was full).
    unread: Bytes,
    alarm: Alarm<R>,
    /// The core said the stream is over ([`Transmit::End`]); the events before that still go out.
    ended: bool,
    /// The application has not asked for the next event since the last one was returned:
    /// the body is not being read (told to the core).
    reading_paused: bool,
    work_budget: usize,
    span: tracing::Span,
    /// The application's per-attempt builder, if any.
    per_attempt: Option<crate::config::PerAttempt>,
    /// The URL the live request went to: the stream's, or a redirect's.
    sent_to: Arc<str>,
    /// What the builder made for the live attempt, which its redirect hops send again.
    built: Option<crate::config::AttemptParts>,
}

impl<R: Runtime> EventStream<R> {
    /// A stream of `url`'s events that starts its first request when first polled.
    pub fn new(url: &str, config: EventSourceConfig, rt: R, http: Arc<dyn HttpConnect>) -> Self {
        Self::with_request(url, Request::get(), config, rt, http)
    }

    /// A stream of the events `request` to `url` answers with (a POST, headers, a body; see
    /// [`tether_core::sse::request`] for what may be sent again), starting when first polled.
    pub fn with_request(
        url: &str,
        request: Request,
        config: EventSourceConfig,
        rt: R,
        http: Arc<dyn HttpConnect>,
    ) -> Self {
        let session = SseSession::with_request(config.sse, request, seed_or_random(config.seed));
        let mut stream = Self::from_session(url, session, rt, http);
        stream.set_per_attempt(config.per_attempt);
        stream
    }

    /// A stream around `session` (new or restored), connecting it now.
    pub(crate) fn from_session(
        url: &str,
        mut session: SseSession,
        rt: R,
        http: Arc<dyn HttpConnect>,
    ) -> Self {
        let span =
            tracing::info_span!("tether.sse", url = %url, method = %session.request().method);
        session.connect(rt.now());
        EventStream {
            span,
            rt,
            http,
            url: Arc::from(url),
            session,
            request: None,
            body: None,
            unread: Bytes::new(),
            alarm: Alarm::new(),
            ended: false,
            reading_paused: false,
            work_budget: 64,
            per_attempt: None,
            sent_to: Arc::from(url),
            built: None,
        }
    }

    /// Build each attempt's headers and body with `per_attempt` from now on.
    pub(crate) fn set_per_attempt(&mut self, per_attempt: Option<crate::config::PerAttempt>) {
        self.per_attempt = per_attempt;
    }

    /// The session, for inspection (last event ID, retry base, counters).
    pub fn session(&self) -> &SseSession {
        &self.session
    }

    /// The session's checkpoint now, without the request body (see [`SseCheckpoint`]): write
    /// it down and go on in a later process with `EventSource::restore`.
    pub fn checkpoint(&self) -> SseCheckpoint {
        self.session.checkpoint()
    }

    /// [`EventStream::checkpoint`] keeping the request body (when it holds no secret).
    pub fn checkpoint_with_body(&self) -> SseCheckpoint {
        self.session.checkpoint_with_body()
    }

    /// The last event ID the next request would carry (the newest one a header can carry).
    pub fn last_event_id(&self) -> &str {
        self.session.last_event_id()
    }

    /// The session's counters.
    pub fn stats(&self) -> &SseStats {
        self.session.stats()
    }

    /// The current time on this stream's clock, as its events' instants are measured.
    pub fn now(&self) -> Instant {
        self.rt.now()
    }

    /// How long from now until `at` on this stream's clock, e.g. the wait of an
    /// [`Event::Reconnecting`] (zero once `at` has passed).
    pub fn until(&self, at: Instant) -> std::time::Duration {
        at.saturating_duration_since(self.rt.now())
    }

    /// Stop: abort the request and end the stream with [`Event::Closed`].
    pub fn close(&mut self) {
        self.session.disconnect(self.rt.now());
    }

    /// The application's lifecycle (see [`SseSession::handle_lifecycle`]): suspended, no
    /// deadline runs; resumed, the idle watchdog restarts; offline, no request is made; a
    /// network change with the old path gone ends the request (a resumable one resumes with
    /// `Last-Event-ID`). Takes effect at the next poll.
    pub fn lifecycle(&mut self, signal: tether_core::Lifecycle) {
        self.session.handle_lifecycle(self.rt.now(), signal);
    }

    /// Take every transmit the core queued.
    fn drain_transmits(&mut self) {
        while let Some(transmit) = self.session.poll_transmit() {
            match transmit {
                Transmit::Open {
                    epoch,
                    last_event_id,
                    request,
                    attempt,
                    redirect,
                    withhold,
                } => {
                    info!(epoch = epoch.0, ?last_event_id, ?attempt, ?redirect, method = %request.method, "requesting");
                    self.body = None;
                    self.unread.clear();
                    let Some(request) = self.build(epoch, &request, attempt, redirect.is_some())
                    else {
                        continue;
                    };
                    let request = withheld(request, withhold);
                    self.sent_to = redirect.unwrap_or_else(|| Arc::clone(&self.url));
                    let request = self
                        .http
                        .send(&self.sent_to, &request, last_event_id.as_deref());
                    self.request = Some((epoch, request));
                }
                Transmit::Close { epoch } => {
                    if self.request.as_ref().is_some_and(|(e, _)| *e == epoch) {
                        self.request = None;
                    }
                    if self.body.as_ref().is_some_and(|(e, _)| *e == epoch) {
                        self.body = None;
                        self.unread.clear();
                    }
                }
                Transmit::End => {
                    info!("stream ended");
                    self.ended = true;
                    self.request = None;
                    self.body = None;
                    self.unread.clear();
                }
            }
        }
    }

    /// What the attempt sends: `request` with the parts the application's builder makes for
    /// it (the core decided that it may go; the application says what it carries). A redirect
    /// hop sends the parts built for its attempt again. `None` when the builder failed: the
    /// session was told (a local failure, as a request the client cannot build).
    fn build(
        &mut self,
        epoch: Epoch,
        request: &Arc<Request>,
        attempt: tether_core::sse::Attempt,
        hop: bool,
    ) -> Option<Arc<Request>> {
        let Some(builder) = &self.per_attempt else {
            return Some(Arc::clone(request));
        };
        if !hop {
            match builder.parts(&self.session.attempt_info()) {
                Ok(parts) => self.built = Some(parts),
                Err(detail) => {
                    warn!(%detail, "the per-attempt builder failed");
                    let now = self.rt.now();
                    if let Err(error) = self.session.handle_request_invalid(now, epoch, &detail) {
                        warn!(%error, "driver bug: session refused input");
                    }
                    return None;
                }
            }
        }
        let built = self.built.as_ref()?;
        Some(Arc::new(built.apply(request, attempt)))
    }

    fn poll_request(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some((epoch, request)) = self.request.as_mut() else {
            return false;
        };
        let Poll::Ready(result) = request.as_mut().poll(cx) else {
            return false;
        };
        let epoch = *epoch;
        self.request = None;
        let outcome = match result {
            Ok(response) => {
                info!(
                    status = response.status,
                    content_type = ?response.content_type,
                    retry_after = ?response.retry_after,
                    location = ?response.location,
                    "response"
                );
                let head = ResponseHead::new(response.status)
                    .content_type(response.content_type.as_deref())
                    .retry_after(response.retry_after)
                    .location(response.location.as_deref())
                    .content_encoding(response.content_encoding.as_deref())
                    .url(Some(&self.sent_to));
                let outcome = self.session.handle_head(now, epoch, &head);
                self.body = Some((epoch, response.body));
                outcome
            }
            Err(RequestError::Invalid(detail)) => {
                warn!(%detail, "request could not be built");
                self.session.handle_request_invalid(now, epoch, &detail)
            }
            Err(RequestError::Lost(loss, error)) => {
                warn!(loss = loss.as_str(), error = %describe(error.as_ref()), "request failed");
                self.session.handle_error(now, epoch, loss)
            }
        };
        if let Err(error) = outcome {
            warn!(%error, "driver bug: session refused input");
        }
        true
    }

    /// Offer body bytes to the session: the leftover first, then a new chunk.
    fn poll_body(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some((epoch, body)) = self.body.as_mut() else {
            return false;
        };
        let epoch = *epoch;
        if !self.unread.is_empty() {
            let unread = std::mem::take(&mut self.unread);
            return self.feed(now, epoch, unread);
        }
        let Poll::Ready(next) = body.as_mut().poll_next(cx) else {
            return false;
        };
        let outcome = match next {
            Some(Ok(chunk)) => return self.feed(now, epoch, chunk),
            Some(Err(error)) => {
                warn!(error = %describe(error.as_ref()), "body failed");
                self.body = None;
                // Mid-body the connection existed: whatever broke it is the network's.
                self.session
                    .handle_error(now, epoch, SocketLoss::NetworkError)
            }
            None => {
                info!("body ended");
                self.body = None;
                self.session.handle_eof(now, epoch)
            }
        };
        if let Err(error) = outcome {
            warn!(%error, "driver bug: session refused input");
        }
        true
    }

    fn feed(&mut self, now: Instant, epoch: Epoch, bytes: Bytes) -> bool {
        match self.session.handle_bytes(now, epoch, &bytes) {
            Ok(consumed) if consumed < bytes.len() => self.unread = bytes.slice(consumed..),
            Ok(_) => {}
            Err(error) => warn!(%error, "driver bug: session refused bytes"),
        }
        true
    }
}

/// `request` without the headers the core withholds (credentials, on a redirect to another
/// origin), whoever set them.
fn withheld(request: Arc<Request>, withhold: &[&str]) -> Arc<Request> {
    let held = |name: &str| withhold.iter().any(|w| w.eq_ignore_ascii_case(name));
    if !request.headers.iter().any(|(name, _)| held(name)) {
        return request;
    }
    let mut stripped = (*request).clone();
    stripped.headers.retain(|(name, _)| !held(name));
    Arc::new(stripped)
}

impl<R: Runtime> Stream for EventStream<R> {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = self.get_mut();
        let span = this.span.clone();
        let _entered = span.enter();
        if this.reading_paused {
            this.reading_paused = false;
            this.session.handle_read_paused(this.rt.now(), false);
        }
        let budget = this.work_budget;
        step(this, cx, budget)
    }
}

/// The driver loop's steps (see `drive.rs`) for one stream: drain yields an event, work is
/// the request and the body.
impl<R: Runtime> Steps for EventStream<R> {
    type Output = Option<Event>;

    fn now(&self) -> Instant {
        self.rt.now()
    }

    fn wake(&self) -> Option<(Instant, Wake)> {
        self.session.poll_wake()
    }

    fn timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
    }

    fn drain(&mut self, _cx: &mut Context<'_>, now: Instant) -> Poll<Option<Event>> {
        self.drain_transmits();
        let Some(event) = self.session.poll_event() else {
            // The core said the stream is over, and every event before that went out.
            return if self.ended {
                Poll::Ready(None)
            } else {
                Poll::Pending
            };
        };
        if let Event::Reconnecting { why, attempt, at } = &event {
            let delay = at.saturating_duration_since(now);
            info!(?why, attempt, ?delay, "reconnecting");
        }
        // Until the next poll nobody reads the body: silence from here on is ours.
        self.reading_paused = true;
        self.session.handle_read_paused(now, true);
        Poll::Ready(Some(event))
    }

    fn work(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), Option<Event>>> {
        if self.poll_request(cx, now) || self.poll_body(cx, now) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn before_yield(&mut self, _now: Instant) {}

    fn sleep(&mut self, cx: &mut Context<'_>, wake: Option<(Instant, Wake)>) -> Poll<()> {
        self.alarm.poll(&self.rt, cx, wake)
    }
}

impl<R: Runtime> std::fmt::Debug for EventStream<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("url", &self.url)
            .field("link", &self.session.link().state())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}
