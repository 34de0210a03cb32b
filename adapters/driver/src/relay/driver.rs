//! The relay driver: one future per connection that feeds the core and drains it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::mpsc;
use futures_core::Stream;
use tether_core::link::{Epoch, SocketError};
use tether_core::nostr::{Carries, ChallengeId, Error, Event, RelayInfo, RelaySession, Transmit};
use tether_core::Instant;
use tracing::{debug, info, warn};

use super::dispatch::{route, Dispatch, Route};
use super::handle::{Command, Rejected, RelayHandle, SessionEvent, SessionEvents};
use crate::config::{seed_or_random, Config};
use crate::relay_info::{fetch_info, InfoFetchError, InfoPolicy};
use crate::runtime::{Alarm, BoxFuture, HttpConnect, Runtime, WsConnect};
use crate::signer::{Signer, SignerError};
use crate::wire::{Wire, WireInput};

/// The driver of one relay connection: spawn it on the runtime whose [`Runtime`] and
/// [`WsConnect`] it was built with. It completes when every handle and subscription is gone.
pub struct RelayDriver<R: Runtime> {
    rt: R,
    ws: Arc<dyn WsConnect>,
    url: Arc<str>,
    signer: Option<Arc<dyn Signer>>,
    work_budget: usize,
    session: RelaySession,
    commands: mpsc::Receiver<Command>,
    dispatch: Dispatch,
    /// The socket, tagged with the epoch the core handed out last.
    wire: Wire,
    /// The signer's answer to the latest challenge, with the challenge it answers.
    signing: Option<(ChallengeId, BoxFuture<Result<String, SignerError>>)>,
    alarm: Alarm<R>,
    /// Socket reads are paused because the application is behind (told to the core).
    reading_paused: bool,
    /// Fetches the relay's NIP-11 document, when the runtime gave one.
    info_http: Option<Arc<dyn HttpConnect>>,
    info_policy: InfoPolicy,
    /// The document fetch in flight.
    info_fetch: Option<BoxFuture<Result<Vec<u8>, InfoFetchError>>>,
    /// When the last fetch started: the driver's cache of the document is that fresh.
    info_fetched_at: Option<Instant>,
    span: tracing::Span,
}

/// A handle to a relay connection and the driver that serves it. The driver starts
/// connecting when first polled; spawn it with the runtime that `rt` and `ws` belong to.
pub fn relay_driver<R: Runtime>(
    url: &str,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
) -> (RelayHandle, RelayDriver<R>) {
    let url: Arc<str> = Arc::from(url);
    let (commands_tx, commands) = mpsc::channel(config.command_capacity.max(1) - 1);
    let (session_tx, session_rx) = mpsc::channel(config.session_capacity.max(1) - 1);
    let slot = Arc::new(Mutex::new(Some(SessionEvents::new(session_rx))));
    let seed = seed_or_random(config.seed);
    let mut relay_config = config.relay.clone();
    relay_config.authenticates |= config.signer.is_some();
    let mut session = RelaySession::new(relay_config, seed);
    session.set_wall_clock(rt.now(), unix_now());
    session.connect(rt.now());
    let handle = RelayHandle {
        commands: commands_tx,
        session: Arc::clone(&slot),
        subscription_capacity: config.subscription_capacity,
        url: Arc::clone(&url),
    };
    let driver = RelayDriver {
        span: tracing::info_span!("tether.relay", url = %url),
        rt,
        ws,
        url,
        signer: config.signer,
        work_budget: config.work_budget.max(1),
        session,
        commands,
        dispatch: Dispatch::new(session_tx, slot),
        wire: Wire::default(),
        signing: None,
        alarm: Alarm::new(),
        reading_paused: false,
        info_http: None,
        info_policy: config.relay_info,
        info_fetch: None,
        info_fetched_at: None,
    };
    (handle, driver)
}

impl<R: Runtime> RelayDriver<R>
where
    R::Sleep: 'static,
{
    /// Fetch the relay's NIP-11 document with `http` when connecting (bounded and refreshed
    /// rarely, per [`Config::relay_info`]) and give it to the session as starting values.
    /// Without this call (or with `relay_info.fetch` off) nothing is fetched.
    #[must_use]
    pub fn with_relay_info(mut self, http: Arc<dyn HttpConnect>) -> Self {
        self.info_http = Some(http);
        self
    }
}

impl<R: Runtime> Future for RelayDriver<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let span = this.span.clone();
        let _entered = span.enter();
        let mut budget = this.work_budget;
        loop {
            let now = this.rt.now();
            // Fixed order: due timeout, drain, (backlog), socket progress, commands, reads.
            if this.session.poll_timeout().is_some_and(|at| now >= at) {
                this.session.handle_timeout(now);
            }
            this.drain(now);
            let clear = this.dispatch.poll_flush(cx).is_ready();
            this.note_reading(now, clear);
            this.reap_abandoned(now);
            let mut worked = this.poll_signing(cx, now);
            worked |= this.poll_info(cx, now);
            match this.poll_command(cx, now) {
                Poll::Ready(true) => worked = true,
                Poll::Ready(false) => return this.shut_down(now),
                Poll::Pending => {}
            }
            worked |= this.poll_wire(cx, now, clear);
            if worked {
                budget -= 1;
                if budget == 0 {
                    this.drain(this.rt.now());
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                continue;
            }
            let deadline = this.session.poll_timeout();
            if this.alarm.poll(&this.rt, cx, deadline).is_ready() {
                continue;
            }
            return Poll::Pending;
        }
    }
}

impl<R: Runtime> RelayDriver<R> {
    /// Take everything the core queued: transmits to the socket, events to the channels.
    fn drain(&mut self, now: Instant) {
        let mut reqs = 0usize;
        loop {
            if let Some(transmit) = self.session.poll_transmit() {
                if matches!(
                    &transmit,
                    Transmit::Send {
                        carries: Carries::Req(_),
                        ..
                    }
                ) {
                    reqs += 1;
                }
                self.transmit(transmit);
                continue;
            }
            let Some(event) = self.session.poll_event() else {
                break;
            };
            self.trace_event(now, &event);
            if let Event::AuthChallenge { challenge, id } = &event {
                self.start_signing(*id, challenge);
            }
            if let Some(route) = route(now, event) {
                self.dispatch.route(route);
            }
        }
        if reqs > 0 {
            debug!(
                reqs,
                open = self.session.open_subscriptions(),
                "REQ batch sent"
            );
        }
    }

    fn transmit(&mut self, transmit: Transmit) {
        if matches!(transmit, Transmit::Open { .. } | Transmit::Close { .. }) {
            // An answer being signed belongs to the socket that is going away.
            self.signing = None;
        }
        if matches!(transmit, Transmit::Open { .. }) {
            // Follow wall-clock corrections; the core only judges timestamps by it.
            self.session.set_wall_clock(self.rt.now(), unix_now());
            info!(attempt = self.session.link().attempts(), "connecting");
            self.start_info_fetch();
        }
        let max = self.session.config().max_frame;
        self.wire.transmit(&*self.ws, &self.url, max, transmit);
    }

    /// Socket progress: the connect, writes, a closing socket, and (when the application
    /// keeps up) one read; each socket input goes to the core.
    fn poll_wire(&mut self, cx: &mut Context<'_>, now: Instant, read: bool) -> bool {
        let session = &mut self.session;
        let mut fed = Ok(());
        let worked = self.wire.poll(cx, read, &mut |epoch, input| {
            fed = fed.and(feed(session, now, epoch, input));
        });
        self.check(fed);
        worked
    }

    /// Tell the core when reading stops or resumes for backpressure, so the silence of a
    /// socket we are not reading is not taken for a dead relay.
    fn note_reading(&mut self, now: Instant, clear: bool) {
        if self.reading_paused != clear {
            return;
        }
        self.reading_paused = !clear;
        if self.reading_paused {
            debug!(
                backlog = self.dispatch.backlog_len(),
                "application is behind; socket reads paused"
            );
        } else {
            debug!("socket reads resumed");
        }
        self.session.handle_read_paused(now, self.reading_paused);
    }

    /// The driver tags input only with the epoch the core handed out last, after its open:
    /// an error here is a bug in this driver, not something the peer did.
    fn check(&self, fed: Result<(), SocketError>) {
        if let Err(error) = fed {
            warn!(%error, "driver fed the core out of order");
            debug_assert!(false, "driver misuse: {error}");
        }
    }

    /// One command, if any: `Ready(false)` when every handle is gone.
    fn poll_command(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<bool> {
        if self.wire.backed_up() {
            return Poll::Pending;
        }
        let Poll::Ready(next) = Pin::new(&mut self.commands).poll_next(cx) else {
            return Poll::Pending;
        };
        let Some(command) = next else {
            return Poll::Ready(false);
        };
        self.command(now, command);
        Poll::Ready(true)
    }

    fn command(&mut self, now: Instant, command: Command) {
        match command {
            Command::Subscribe {
                filters,
                priority,
                events,
                reply,
            } => {
                let result = self.session.subscribe(now, filters, priority);
                if let Ok(id) = result {
                    debug!(sub = %id, "subscribed");
                    self.dispatch.add_sub(id, events);
                }
                let _ = reply.send(result);
            }
            Command::Unsubscribe { id, reply } => {
                let result = self.session.unsubscribe(now, id);
                self.dispatch.remove_sub(id);
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            Command::Publish { event, reply } => match self.session.publish(now, &event) {
                Ok(id) => {
                    debug!(%id, "publishing");
                    self.dispatch.add_publish(id, reply);
                }
                Err(e) => {
                    let _ = reply.send(Err(Rejected::Local(e)));
                }
            },
            Command::Authenticate {
                challenge,
                event,
                reply,
            } => {
                let _ = reply.send(self.session.authenticate(now, challenge, &event));
            }
            Command::Disconnect { reply } => {
                info!("disconnect requested");
                self.session.disconnect(now);
                let _ = reply.send(());
            }
            Command::Connect { reply } => {
                self.session.connect(now);
                let _ = reply.send(());
            }
        }
    }

    /// At a connect: fetch the document if there is none yet or it is older than
    /// `refresh_after` (a failed fetch counts: one bounded request per refresh period).
    fn start_info_fetch(&mut self) {
        let Some(http) = &self.info_http else {
            return;
        };
        let now = self.rt.now();
        let fresh = self
            .info_fetched_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.info_policy.refresh_after);
        if !self.info_policy.fetch || self.info_fetch.is_some() || fresh {
            return;
        }
        debug!("fetching the relay information document");
        self.info_fetched_at = Some(now);
        self.info_fetch = Some(fetch_info(
            &self.rt,
            Arc::clone(http),
            &self.url,
            self.info_policy,
        ));
    }

    /// The document fetch finished: give a document that parses to the session; anything
    /// else changes nothing.
    fn poll_info(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(future) = self.info_fetch.as_mut() else {
            return false;
        };
        let Poll::Ready(result) = future.as_mut().poll(cx) else {
            return false;
        };
        self.info_fetch = None;
        let parsed = result
            .map_err(|e| e.to_string())
            .and_then(|bytes| RelayInfo::parse(&bytes).map_err(|e| e.to_string()));
        let event = match parsed {
            Ok(info) => {
                let applied = self.session.apply_relay_info(now, &info);
                info!(?applied, "relay information document applied");
                SessionEvent::RelayInfo { info, applied }
            }
            Err(why) => {
                info!(%why, "no relay information document; nothing changes");
                SessionEvent::RelayInfoUnavailable { why }
            }
        };
        self.dispatch.route(Route::Session(event));
        true
    }

    fn start_signing(&mut self, id: ChallengeId, challenge: &str) {
        let Some(signer) = &self.signer else {
            return;
        };
        debug!("signing AUTH");
        let future = signer.sign_auth(&self.url, challenge);
        self.signing = Some((id, future));
    }

    fn poll_signing(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some((challenge, future)) = self.signing.as_mut() else {
            return false;
        };
        let Poll::Ready(result) = future.as_mut().poll(cx) else {
            return false;
        };
        let challenge = *challenge;
        self.signing = None;
        match result {
            Ok(event) => match self.session.authenticate(now, challenge, &event) {
                Ok(_) => {}
                // The core refuses answers to superseded challenges and closed sockets.
                Err(error @ (Error::StaleChallenge(_) | Error::NotConnected)) => {
                    debug!(%error, "AUTH answer dropped");
                }
                Err(error) => warn!(%error, "signer produced an unusable AUTH event"),
            },
            Err(error) => {
                warn!(%error, "signer failed");
                self.dispatch
                    .route(Route::Session(SessionEvent::SignerFailed { error }));
            }
        }
        true
    }

    fn reap_abandoned(&mut self, now: Instant) {
        let abandoned = self.dispatch.take_abandoned();
        if abandoned.is_empty() {
            return;
        }
        for id in abandoned {
            debug!(sub = %id, "subscription dropped by the application");
            let _ = self.session.unsubscribe(now, id);
        }
        self.drain(now);
    }

    fn shut_down(&mut self, now: Instant) -> Poll<()> {
        info!("every handle is gone; shutting down");
        self.session.disconnect(now);
        self.drain(now);
        self.wire.shut_down();
        Poll::Ready(())
    }

    fn trace_event(&self, now: Instant, event: &Event) {
        match event {
            Event::Connected => info!("connected"),
            Event::Disconnected { reconnect_at, why } => info!(
                reconnect_in = ?reconnect_at.map(|at| at.saturating_duration_since(now)),
                ?why,
                "disconnected"
            ),
            Event::Retrying { sub, at, attempt } => info!(
                %sub, attempt, after = ?at.saturating_duration_since(now),
                "subscription refused; retrying"
            ),
            Event::Closed {
                sub,
                reason,
                attempts,
            } => warn!(%sub, %reason, attempts, "subscription closed"),
            Event::RateLimited { until } => info!(
                window = ?until.saturating_duration_since(now),
                "rate limited: gate window open"
            ),
            Event::SubscriptionLimit { max } => info!(max, "subscription limit"),
            Event::Queued { sub } => debug!(%sub, "subscription queued for a slot"),
            Event::EoseTimeout { sub } => warn!(%sub, "no answer to REQ; retrying"),
            Event::Notice { message } => info!(%message, "notice"),
            Event::AuthChallenge { .. } => info!("auth challenge"),
            Event::Authenticated => info!("authenticated"),
            Event::AuthFailed { reason } => warn!(%reason, "auth refused"),
            Event::Rejected { id, reason } => warn!(%id, ?reason, "publish rejected"),
            Event::Published { id } => debug!(%id, "published"),
            Event::PeerError { error } => warn!(?error, "malformed frame dropped"),
            _ => {}
        }
    }
}

impl<R: Runtime> std::fmt::Debug for RelayDriver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayDriver")
            .field("url", &self.url)
            .field("link", &self.session.link().state())
            .field("backlog", &self.dispatch.backlog_len())
            .field("outgoing", &self.wire.outgoing_len())
            .finish_non_exhaustive()
    }
}

/// One socket input into the core.
fn feed(
    session: &mut RelaySession,
    now: Instant,
    epoch: Epoch,
    input: WireInput,
) -> Result<(), SocketError> {
    match input {
        WireInput::Open => session.handle_open(now, epoch),
        WireInput::Close(why) => session.handle_close(now, epoch, why),
        WireInput::Text(text) => session.handle_frame(now, epoch, &text),
        WireInput::Binary(len) => session.handle_binary(now, epoch, len),
        WireInput::Pong => session.handle_pong(now, epoch),
    }
}

/// Seconds since 1970 by the system clock (0 if it is set before 1970).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use std::io;

    use tether_core::link::SocketLoss;

    use crate::runtime::WsError;
    use crate::wire::socket_loss;

    #[test]
    fn socket_errors_say_why_the_socket_was_lost() {
        let io_error = |kind, text: &str| WsError::Io(io::Error::new(kind, text.to_owned()));
        let cases = [
            (
                io_error(io::ErrorKind::ConnectionRefused, "refused"),
                SocketLoss::ConnectionRefused,
            ),
            // How tokio-rustls and futures-rustls report a self-signed certificate.
            (
                io_error(
                    io::ErrorKind::InvalidData,
                    "invalid peer certificate: UnknownIssuer",
                ),
                SocketLoss::TlsRejected,
            ),
            (
                io_error(io::ErrorKind::InvalidData, "corrupt message"),
                SocketLoss::NetworkError,
            ),
            (
                io_error(io::ErrorKind::ConnectionReset, "reset"),
                SocketLoss::NetworkError,
            ),
            (
                WsError::Capacity(tungstenite::error::CapacityError::MessageTooLong {
                    size: 10,
                    max_size: 5,
                }),
                SocketLoss::FrameTooLarge,
            ),
            (
                WsError::ConnectionClosed,
                SocketLoss::ClosedByPeer { code: None },
            ),
        ];
        for (error, loss) in cases {
            assert_eq!(socket_loss(&error), loss, "{error}");
        }
    }
}
