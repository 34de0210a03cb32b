//! The driver loop, written once: [`step`] is the body of every driver's `poll` (relay,
//! pool and SSE stream), and [`Driver`] is the relay and pool driver around a [`Machine`].
//!
//! # One wake, in this order
//!
//! 1. **Timeout.** If the machine's deadline has passed by a fresh `now`, `handle_timeout`.
//!    The clock is read before the sleep is polled: a runtime's cooperative budget can
//!    keep a sleep pending past its deadline.
//! 2. **Drain.** Every transmit to its relay's socket (or, for [`Transmit::FetchInfo`], a
//!    document fetch), every event to the application's channels.
//! 3. **Work**, each step at most once per pass:
//!    1. *side tasks*: the application's dropped subscriptions are unsubscribed, machine
//!       extras (a pool's verification workers) run, the backlog is flushed, signer answers
//!       and document fetches that finished go to the machine;
//!    2. *commands* from the handles, one per pass, unless some socket's writes are backed
//!       up;
//!    3. *sockets* that woke, read only while the application keeps up.
//! 4. **Budget.** A pass that did work costs one unit of the work budget and starts again
//!    at 1; when the budget is spent the outputs are drained and the task yields.
//! 5. **Sleep** until the machine's next deadline (logged with its [`Wake`] reason) or the
//!    next wake-up of a socket, channel or side task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_channel::mpsc;
use futures_core::Stream;
use tether_core::nostr::{RelayInfo, Transmit};
use tether_core::pool::PoolError;
use tether_core::{Instant, Wake};
use tracing::{debug, info, warn};

use crate::delivery::{Delivery, Route, Routes};
use crate::machine::Machine;
use crate::relay::SessionEvent;
use crate::relay_info::{fetch_info, InfoPolicy};
use crate::relays::{Finished, Relays};
use crate::runtime::{Alarm, HttpConnect, Runtime, WsConnect};
use crate::signer::Signer;

/// What one pass of [`step`] does with a machine; the steps are named after the module docs.
pub(crate) trait Steps {
    /// What the poll returns when it completes.
    type Output;

    /// A fresh reading of the runtime's clock.
    fn now(&self) -> Instant;
    /// The machine's next deadline and why.
    fn wake(&self) -> Option<(Instant, Wake)>;
    /// Step 1: the deadline passed.
    fn timeout(&mut self, now: Instant);
    /// Step 2: take the machine's outputs; `Ready` ends the poll (an SSE event to return).
    fn drain(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Self::Output>;
    /// Step 3: I/O; `Ready(Err)` ends the poll, `Ready(Ok(()))` means work was done.
    fn work(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), Self::Output>>;
    /// Step 4: before yielding with the budget spent.
    fn before_yield(&mut self, now: Instant);
    /// Step 5: sleep until `wake`; `Ready` when it has passed already.
    fn sleep(&mut self, cx: &mut Context<'_>, wake: Option<(Instant, Wake)>) -> Poll<()>;
}

/// One `poll` of a driver: the steps of the module docs, until the machine waits.
pub(crate) fn step<S: Steps>(
    steps: &mut S,
    cx: &mut Context<'_>,
    budget: usize,
) -> Poll<S::Output> {
    let mut budget = budget.max(1);
    loop {
        let now = steps.now();
        if steps.wake().is_some_and(|(at, _)| now >= at) {
            steps.timeout(now);
        }
        if let Poll::Ready(output) = steps.drain(cx, now) {
            return Poll::Ready(output);
        }
        match steps.work(cx, now) {
            Poll::Ready(Err(output)) => return Poll::Ready(output),
            Poll::Ready(Ok(())) => {
                budget -= 1;
                if budget == 0 {
                    let now = steps.now();
                    steps.before_yield(now);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                continue;
            }
            Poll::Pending => {}
        }
        let wake = steps.wake();
        if steps.sleep(cx, wake).is_ready() {
            continue;
        }
        return Poll::Pending;
    }
}

/// What differs between the relay driver and the pool driver: their commands and where
/// their events go. Everything else is [`Driver`]'s.
pub(crate) trait App: Sized + Send + 'static {
    /// The core machine.
    type Machine: Machine;
    /// What the handles send.
    type Command: Send + 'static;
    /// The application's channels.
    type Routes: Routes + Send;

    /// Carry out one command.
    fn command(&mut self, parts: &mut Parts<Self>, now: Instant, command: Self::Command);
    /// Route one of the machine's events.
    fn route(
        &mut self,
        parts: &mut Parts<Self>,
        now: Instant,
        event: <Self::Machine as Machine>::Event,
    );
    /// A relay-wide event the driver itself produced (a NIP-11 document, a signer failure),
    /// about `key`, held at `url`.
    fn notice(
        key: <Self::Machine as Machine>::Key,
        url: Option<Arc<str>>,
        event: SessionEvent,
    ) -> <Self::Routes as Routes>::Notice;
    /// The application dropped `sub`'s receiver.
    fn abandon(
        &mut self,
        machine: &mut Self::Machine,
        now: Instant,
        sub: <Self::Routes as Routes>::Sub,
    );
    /// Every handle is gone: stop the machine (its closes are drained after this).
    fn shut_down(&mut self, machine: &mut Self::Machine, now: Instant);
    /// Work of the machine's own beside the sockets (a pool's verification workers).
    fn poll_extra(
        &mut self,
        _parts: &mut Parts<Self>,
        _cx: &mut Context<'_>,
        _now: Instant,
    ) -> bool {
        false
    }
    /// Whether that work is so far behind that sockets should not be read.
    fn extra_backlogged(&self) -> bool {
        false
    }
    /// Whether the machine has output other than transmits and events (a pool's checks).
    fn drain_extra(&mut self, _machine: &mut Self::Machine) -> bool {
        false
    }
}

/// What [`App`] methods may touch.
pub(crate) struct Parts<A: App> {
    /// The core machine.
    pub(crate) machine: A::Machine,
    /// Its relays' sockets and side tasks.
    pub(crate) relays: Relays<<A::Machine as Machine>::Key>,
    /// The application's channels.
    pub(crate) delivery: Delivery<A::Routes>,
}

/// The relay or pool driver around `A`'s machine. See the module docs for what a wake does.
pub(crate) struct Driver<A: App, R: Runtime> {
    rt: R,
    pub(crate) parts: Parts<A>,
    pub(crate) app: A,
    commands: mpsc::Receiver<A::Command>,
    signer: Option<Arc<dyn Signer>>,
    info_http: Option<Arc<dyn HttpConnect>>,
    info_policy: InfoPolicy,
    work_budget: usize,
    alarm: Alarm<R>,
    /// Socket reads are paused because the application (or a side task) is behind.
    reading_paused: bool,
    /// When the wall clock was last given to the machine.
    wall_clock_at: Option<Instant>,
    span: tracing::Span,
}

/// How often a driver reads the wall clock again for the machine (clock corrections).
const WALL_CLOCK_EVERY: Duration = Duration::from_secs(60);

/// What a driver is built from.
pub(crate) struct Setup<A: App, R: Runtime> {
    pub(crate) rt: R,
    pub(crate) ws: Arc<dyn WsConnect>,
    pub(crate) max_frame: usize,
    pub(crate) machine: A::Machine,
    pub(crate) app: A,
    pub(crate) delivery: Delivery<A::Routes>,
    pub(crate) commands: mpsc::Receiver<A::Command>,
    pub(crate) signer: Option<Arc<dyn Signer>>,
    pub(crate) info_policy: InfoPolicy,
    pub(crate) work_budget: usize,
    pub(crate) span: tracing::Span,
}

impl<A: App, R: Runtime> Driver<A, R> {
    pub(crate) fn new(setup: Setup<A, R>) -> Self {
        let mut driver = Driver {
            parts: Parts {
                machine: setup.machine,
                relays: Relays::new(setup.ws, setup.max_frame),
                delivery: setup.delivery,
            },
            app: setup.app,
            commands: setup.commands,
            signer: setup.signer,
            info_http: None,
            info_policy: setup.info_policy,
            work_budget: setup.work_budget.max(1),
            alarm: Alarm::new(),
            reading_paused: false,
            wall_clock_at: None,
            span: setup.span,
            rt: setup.rt,
        };
        driver.follow_wall_clock(driver.rt.now());
        driver
    }

    /// Fetch NIP-11 documents with `http` when the machine asks (its refresh rule is the
    /// core's; `policy.fetch` off never asks).
    pub(crate) fn set_info_http(&mut self, http: Arc<dyn HttpConnect>) {
        self.info_http = Some(http);
        let refresh = self
            .info_policy
            .fetch
            .then_some(self.info_policy.refresh_after);
        self.parts.machine.set_info_refresh(refresh);
    }

    fn follow_wall_clock(&mut self, now: Instant) {
        let due = self
            .wall_clock_at
            .is_none_or(|at| now.saturating_duration_since(at) >= WALL_CLOCK_EVERY);
        if due {
            self.wall_clock_at = Some(now);
            self.parts.machine.set_wall_clock(now, unix_now());
        }
    }

    /// Step 2: every transmit to its relay, every event through the app.
    fn drain_outputs(&mut self, now: Instant) {
        loop {
            if let Some((key, transmit)) = self.parts.machine.poll_transmit() {
                self.transmit(now, key, transmit);
                continue;
            }
            if self.app.drain_extra(&mut self.parts.machine) {
                continue;
            }
            let Some(event) = self.parts.machine.poll_event() else {
                break;
            };
            self.route_event(now, event);
        }
    }

    /// One of the machine's events to the application (and a challenge to the signer).
    fn route_event(&mut self, now: Instant, event: <A::Machine as Machine>::Event) {
        if let Some((key, id, challenge)) = A::Machine::challenge(&event) {
            if let Some((signer, url)) = self.signer.as_ref().zip(self.parts.relays.url(key)) {
                debug!(%url, "signing AUTH");
                let future = signer.sign_auth(url, challenge);
                self.parts.relays.sign(key, id, future);
            }
        }
        self.app.route(&mut self.parts, now, event);
    }

    fn transmit(&mut self, now: Instant, key: <A::Machine as Machine>::Key, transmit: Transmit) {
        match transmit {
            Transmit::FetchInfo => self.start_fetch(key),
            Transmit::Open { epoch, ref url } => {
                // A relay the machine opened itself is held at the URL its open names; a
                // slot it reuses for another URL gets a fresh socket.
                if let Some(url) = url.as_deref() {
                    if self.parts.relays.url(key).map(|u| &**u) != Some(url) {
                        let url: Arc<str> = Arc::from(url);
                        let addresses = self.parts.machine.addresses(key);
                        // Transmits are drained before events, so the events still queued
                        // (the last of the relay that held the slot among them) came
                        // before this open: they go out under that relay's URL first.
                        while let Some(event) = self.parts.machine.poll_event() {
                            self.route_event(now, event);
                        }
                        self.parts.relays.remove(key);
                        self.parts.relays.add(key, url, addresses);
                    }
                }
                if let Some(url) = self.parts.relays.url(key) {
                    info!(%url, epoch = epoch.0, "connecting");
                }
                self.follow_wall_clock(now);
                self.parts.relays.transmit(key, transmit);
            }
            Transmit::Send { .. } | Transmit::Ping | Transmit::Close { .. } => {
                self.parts.relays.transmit(key, transmit);
            }
        }
    }

    fn start_fetch(&mut self, key: <A::Machine as Machine>::Key) {
        let Some(http) = &self.info_http else {
            return;
        };
        let (rt, policy) = (&self.rt, self.info_policy);
        self.parts.relays.fetch(key, |url| {
            debug!(%url, "fetching the relay information document");
            fetch_info(rt, Arc::clone(http), url, policy)
        });
    }

    /// Step 3.1: dropped subscriptions, machine extras, the backlog, finished side tasks.
    /// Returns whether anything was done and whether sockets may be read.
    fn side_tasks(&mut self, cx: &mut Context<'_>, now: Instant) -> (bool, bool) {
        let mut worked = false;
        let abandoned = self.parts.delivery.take_abandoned();
        for sub in abandoned {
            debug!(?sub, "subscription dropped by the application");
            self.app.abandon(&mut self.parts.machine, now, sub);
            worked = true;
        }
        if self.app.poll_extra(&mut self.parts, cx, now) {
            worked = true;
        }
        if worked {
            self.drain_outputs(now);
        }
        let clear = self.parts.delivery.poll_flush(cx).is_ready() && !self.app.extra_backlogged();
        self.note_reading(now, clear);
        let mut done = Vec::new();
        self.parts.relays.poll_side_tasks(cx, &mut done);
        worked |= !done.is_empty();
        for finished in done {
            match finished {
                Finished::Signed(key, challenge, result) => {
                    self.signed(now, key, challenge, result)
                }
                Finished::Fetched(key, result) => self.fetched(now, key, result),
            }
        }
        (worked, clear)
    }

    /// Tell the machine when reading stops or resumes for backpressure, so the silence of a
    /// socket that is not read is not taken for a dead relay.
    fn note_reading(&mut self, now: Instant, clear: bool) {
        if self.reading_paused != clear {
            return;
        }
        self.reading_paused = !clear;
        debug!(
            paused = self.reading_paused,
            backlog = self.parts.delivery.backlog_len(),
            "socket reads"
        );
        if self.reading_paused {
            return;
        }
        let machine = &mut self.parts.machine;
        self.parts
            .relays
            .resume_reading(&mut |key| machine.handle_read_paused(now, key, false));
    }

    fn signed(
        &mut self,
        now: Instant,
        key: <A::Machine as Machine>::Key,
        challenge: tether_core::nostr::ChallengeId,
        result: Result<String, crate::signer::SignerError>,
    ) {
        match result {
            // The machine refuses answers to superseded challenges and closed sockets.
            Ok(event) => match self.parts.machine.authenticate(now, key, challenge, &event) {
                Ok(()) => {}
                Err(error @ PoolError::Session(_)) => debug!(%error, "AUTH answer refused"),
                Err(error) => debug!(%error, "AUTH answer for a relay no longer held"),
            },
            Err(error) => {
                warn!(%error, ?key, "signer failed");
                let url = self.parts.relays.name(key).cloned();
                let notice = A::notice(key, url, SessionEvent::SignerFailed { error });
                self.parts.delivery.route(Route::Notice(notice));
            }
        }
    }

    fn fetched(
        &mut self,
        now: Instant,
        key: <A::Machine as Machine>::Key,
        result: Result<Vec<u8>, crate::relay_info::InfoFetchError>,
    ) {
        let parsed = result
            .map_err(|e| e.to_string())
            .and_then(|bytes| RelayInfo::parse(&bytes).map_err(|e| e.to_string()));
        let event = match parsed {
            Ok(info) => {
                let Some(applied) = self.parts.machine.apply_relay_info(now, key, &info) else {
                    return;
                };
                info!(?key, ?applied, "relay information document applied");
                SessionEvent::RelayInfo { info, applied }
            }
            Err(why) => {
                info!(?key, %why, "no relay information document; nothing changes");
                SessionEvent::RelayInfoUnavailable { why }
            }
        };
        let url = self.parts.relays.name(key).cloned();
        self.parts
            .delivery
            .route(Route::Notice(A::notice(key, url, event)));
    }

    /// Step 3.2: one command, if any; `Ready(false)` when every handle is gone.
    fn poll_command(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<bool> {
        if self.parts.relays.backed_up() {
            return Poll::Pending;
        }
        let Poll::Ready(next) = Pin::new(&mut self.commands).poll_next(cx) else {
            return Poll::Pending;
        };
        let Some(command) = next else {
            return Poll::Ready(false);
        };
        self.app.command(&mut self.parts, now, command);
        Poll::Ready(true)
    }

    /// Step 3.3: the sockets that woke.
    fn poll_sockets(&mut self, cx: &mut Context<'_>, now: Instant, read: bool) -> bool {
        let machine = &mut self.parts.machine;
        let mut feed = |key, epoch, input| machine.feed(now, key, epoch, input);
        let mut paused = Vec::new();
        let worked = self
            .parts
            .relays
            .poll_sockets(cx, read, &mut feed, &mut |key| paused.push(key));
        for key in paused {
            self.parts.machine.handle_read_paused(now, key, true);
        }
        worked
    }

    fn shut_down(&mut self, now: Instant) {
        info!("every handle is gone; shutting down");
        self.app.shut_down(&mut self.parts.machine, now);
        self.drain_outputs(now);
        self.parts.relays.shut_down();
    }

    /// Frames waiting to be written, over every relay.
    pub(crate) fn outgoing_len(&self) -> usize {
        self.parts.relays.outgoing_len()
    }
}

impl<A: App, R: Runtime> Steps for Driver<A, R> {
    type Output = ();

    fn now(&self) -> Instant {
        self.rt.now()
    }

    fn wake(&self) -> Option<(Instant, Wake)> {
        self.parts.machine.poll_wake()
    }

    fn timeout(&mut self, now: Instant) {
        self.parts.machine.handle_timeout(now);
    }

    fn drain(&mut self, _cx: &mut Context<'_>, now: Instant) -> Poll<()> {
        self.drain_outputs(now);
        Poll::Pending
    }

    fn work(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), ()>> {
        let (mut worked, read) = self.side_tasks(cx, now);
        match self.poll_command(cx, now) {
            Poll::Ready(true) => worked = true,
            Poll::Ready(false) => {
                self.shut_down(now);
                return Poll::Ready(Err(()));
            }
            Poll::Pending => {}
        }
        worked |= self.poll_sockets(cx, now, read);
        if worked {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn before_yield(&mut self, now: Instant) {
        self.drain_outputs(now);
    }

    fn sleep(&mut self, cx: &mut Context<'_>, wake: Option<(Instant, Wake)>) -> Poll<()> {
        self.alarm.poll(&self.rt, cx, wake)
    }
}

// Nothing in a driver is pinned in place: its futures are boxed.
impl<A: App, R: Runtime> Unpin for Driver<A, R> {}

impl<A: App, R: Runtime> Future for Driver<A, R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let span = this.span.clone();
        let _entered = span.enter();
        let budget = this.work_budget;
        step(this, cx, budget)
    }
}

/// Seconds since 1970 by the system clock (0 if it is set before 1970).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The public face of a driver over [`Driver`], written once for the relay driver and the
/// pool driver: `with_relay_info` (documented by `$doc`) and `Future`. `$wrapper<R>` holds
/// its [`Driver`] in a field `driver`.
macro_rules! driver_face {
    ($wrapper:ident, $doc:literal) => {
        impl<R: Runtime> $wrapper<R>
        where
            R::Sleep: 'static,
        {
            #[doc = $doc]
            #[must_use]
            pub fn with_relay_info(mut self, http: Arc<dyn HttpConnect>) -> Self {
                self.driver.set_info_http(http);
                self
            }
        }

        impl<R: Runtime> Future for $wrapper<R> {
            type Output = ();

            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                Pin::new(&mut self.get_mut().driver).poll(cx)
            }
        }
    };
}

pub(crate) use driver_face;
