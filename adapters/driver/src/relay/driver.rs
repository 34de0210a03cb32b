//! The relay driver: one future per connection that feeds the core and drains it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::mpsc;
use futures_core::Stream;
use tether_core::link::{Epoch, SocketError, SocketLoss};
use tether_core::nostr::{Carries, ChallengeId, Error, Event, RelaySession, Transmit};
use tether_core::Instant;
use tracing::{debug, info, warn};
use tungstenite::Message;

use super::dispatch::{route, Dispatch, Route};
use super::handle::{Command, Rejected, RelayHandle, SessionEvent, SessionEvents};
use crate::config::{seed_or_random, Config};
use crate::runtime::{Alarm, BoxFuture, BoxSocket, Runtime, WsConnect, WsError};
use crate::signer::{Signer, SignerError};

/// Frames queued for the socket before the driver stops taking commands (the socket is
/// not keeping up with writes; callers wait on the command channel instead).
const OUTGOING_HIGH: usize = 1024;

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
    connecting: Option<BoxFuture<Result<BoxSocket, WsError>>>,
    socket: Option<BoxSocket>,
    /// A socket the core told us to close, finishing its close handshake.
    closing: Option<BoxSocket>,
    outgoing: VecDeque<Message>,
    unflushed: bool,
    /// The socket (or connection attempt) the core handed out last; every socket input is
    /// tagged with it, and the core ignores it once stale.
    epoch: Epoch,
    /// The signer's answer to the latest challenge, with the challenge it answers.
    signing: Option<(ChallengeId, BoxFuture<Result<String, SignerError>>)>,
    alarm: Alarm<R>,
    /// Socket reads are paused because the application is behind (told to the core).
    reading_paused: bool,
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
    let mut session = RelaySession::new(config.relay.clone(), seed);
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
        connecting: None,
        socket: None,
        closing: None,
        outgoing: VecDeque::new(),
        unflushed: false,
        epoch: Epoch::default(),
        signing: None,
        alarm: Alarm::new(),
        reading_paused: false,
    };
    (handle, driver)
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
            let mut worked = this.poll_connecting(cx, now);
            worked |= this.poll_signing(cx, now);
            worked |= this.poll_write(cx, now);
            this.poll_closing(cx);
            match this.poll_command(cx, now) {
                Poll::Ready(true) => worked = true,
                Poll::Ready(false) => return this.shut_down(now),
                Poll::Pending => {}
            }
            if clear {
                worked |= this.poll_read(cx, now);
            }
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
        match transmit {
            Transmit::Open { epoch } => {
                self.drop_socket();
                self.epoch = epoch;
                // Follow wall-clock corrections; the core only judges timestamps by it.
                self.session.set_wall_clock(self.rt.now(), unix_now());
                info!(attempt = self.session.link().attempts(), "connecting");
                let max = self.session.config().max_frame;
                self.connecting = Some(self.ws.connect(&self.url, max));
            }
            Transmit::Send { text, .. } => self.outgoing.push_back(Message::text(text)),
            Transmit::Ping => self.outgoing.push_back(Message::Ping(Default::default())),
            Transmit::Close { .. } => {
                let socket = self.socket.take();
                self.drop_socket();
                self.closing = socket;
            }
        }
    }

    fn drop_socket(&mut self) {
        self.connecting = None;
        self.socket = None;
        self.outgoing.clear();
        self.unflushed = false;
        self.signing = None;
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

    fn poll_connecting(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(connecting) = self.connecting.as_mut() else {
            return false;
        };
        let Poll::Ready(result) = connecting.as_mut().poll(cx) else {
            return false;
        };
        self.connecting = None;
        match result {
            Ok(socket) => {
                info!("socket open");
                self.socket = Some(socket);
                let opened = self.session.handle_open(now, self.epoch);
                self.check(opened);
            }
            Err(error) => {
                warn!(%error, "connect failed");
                let closed = self
                    .session
                    .handle_close(now, self.epoch, socket_loss(&error));
                self.check(closed);
            }
        }
        true
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let mut worked = false;
        let mut failed = None;
        while !self.outgoing.is_empty() {
            match socket.as_mut().poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    failed = Some(e);
                    break;
                }
                Poll::Pending => break,
            }
            let Some(message) = self.outgoing.pop_front() else {
                break;
            };
            if let Err(e) = socket.as_mut().start_send(message) {
                failed = Some(e);
                break;
            }
            self.unflushed = true;
            worked = true;
        }
        if failed.is_none() && self.unflushed {
            match socket.as_mut().poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(e)) => failed = Some(e),
                Poll::Pending => {}
            }
        }
        if let Some(error) = failed {
            self.lose_socket(now, &error);
            return true;
        }
        worked
    }

    fn poll_closing(&mut self, cx: &mut Context<'_>) {
        let Some(socket) = self.closing.as_mut() else {
            return;
        };
        if socket.as_mut().poll_close(cx).is_ready() {
            self.closing = None;
        }
    }

    fn poll_read(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let Poll::Ready(next) = socket.as_mut().poll_next(cx) else {
            return false;
        };
        let epoch = self.epoch;
        let fed = match next {
            Some(Ok(Message::Text(text))) => self.session.handle_frame(now, epoch, text.as_str()),
            Some(Ok(Message::Binary(bytes))) => self.session.handle_binary(now, epoch, bytes.len()),
            Some(Ok(Message::Ping(_))) => {
                // tungstenite queued the pong; it goes out with the next flush.
                self.unflushed = true;
                self.session.handle_pong(now, epoch)
            }
            Some(Ok(Message::Pong(_))) => self.session.handle_pong(now, epoch),
            Some(Ok(Message::Close(frame))) => {
                info!(?frame, "relay closed the socket");
                let code = frame.map(|f| u16::from(f.code));
                self.end_socket(now, SocketLoss::ClosedByPeer { code })
            }
            Some(Ok(Message::Frame(_))) => Ok(()),
            Some(Err(error)) => {
                warn!(%error, "socket failed");
                self.end_socket(now, socket_loss(&error))
            }
            None => {
                info!("socket ended");
                self.end_socket(now, SocketLoss::ClosedByPeer { code: None })
            }
        };
        self.check(fed);
        true
    }

    fn lose_socket(&mut self, now: Instant, error: &WsError) {
        warn!(%error, "socket failed");
        let closed = self.end_socket(now, socket_loss(error));
        self.check(closed);
    }

    fn end_socket(&mut self, now: Instant, why: SocketLoss) -> Result<(), SocketError> {
        self.socket = None;
        self.outgoing.clear();
        self.unflushed = false;
        self.session.handle_close(now, self.epoch, why)
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
        if self.outgoing.len() >= OUTGOING_HIGH {
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
        if let Some(socket) = self.closing.as_mut() {
            // Best effort: one attempt at the close handshake, then the socket is dropped.
            let _ = socket.as_mut().start_send(Message::Close(None));
        }
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
            .field("outgoing", &self.outgoing.len())
            .finish_non_exhaustive()
    }
}

/// Seconds since 1970 by the system clock (0 if it is set before 1970).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What a WebSocket error says about why the socket is gone: for the application's report
/// only (the core reconnects the same way whatever the cause).
fn socket_loss(error: &WsError) -> SocketLoss {
    use std::io::ErrorKind;
    match error {
        WsError::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused | ErrorKind::AddrNotAvailable | ErrorKind::NotFound => {
                SocketLoss::ConnectionRefused
            }
            // rustls reports a failed handshake as invalid data wrapping its own error; the
            // driver does not link rustls, so the message is what it can go by.
            ErrorKind::InvalidData if io.to_string().contains("certificate") => {
                SocketLoss::TlsRejected
            }
            _ if io.to_string().contains("failed to lookup address") => {
                SocketLoss::ConnectionRefused
            }
            _ => SocketLoss::NetworkError,
        },
        WsError::Tls(_) => SocketLoss::TlsRejected,
        WsError::Capacity(_) => SocketLoss::FrameTooLarge,
        WsError::Url(_) => SocketLoss::HandshakeFailed,
        WsError::ConnectionClosed | WsError::AlreadyClosed => {
            SocketLoss::ClosedByPeer { code: None }
        }
        _ => SocketLoss::NetworkError,
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

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
