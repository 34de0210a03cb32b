//! The pool driver: one future for every relay of a pool. It feeds the core pool, drains it,
//! and polls each relay's socket on its own.
//!
//! Per wake it polls only the relays that have something to do: those whose socket woke
//! (each socket is polled with a waker of its own, see [`Ready`]) and those the core just
//! handed output. A pool of 1 000 quiet relays costs nothing per event of a busy one.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures_channel::{mpsc, oneshot};
use futures_core::Stream;
use futures_sink::Sink;
use tether_core::link::{Epoch, SocketError};
use tether_core::nostr::message::EventId;
use tether_core::nostr::{ChallengeId, Event, RelayInfo};
use tether_core::pool::{
    PoolConfig, PoolError, PoolEvent, PublishOutcome, RelayId, RelayPool, SubId, VerifyRequest,
};
use tether_core::Instant;
use tracing::{debug, info, warn};

use super::handle::{PoolCommand, PoolHandle, PoolItem};
use super::ready::Ready;
use crate::config::{seed_or_random, Config};
use crate::relay::{route, Route, SessionEvent};
use crate::relay_info::{fetch_info, InfoFetchError, InfoPolicy};
use crate::runtime::{Alarm, BoxFuture, HttpConnect, Runtime, WsConnect};
use crate::signer::{Signer, SignerError};
use crate::verify::Workers;
use crate::wire::{Wire, WireInput};

/// The driver of a pool: spawn it on the runtime whose [`Runtime`] and [`WsConnect`] it was
/// built with. It completes when every handle is gone.
pub struct PoolDriver<R: Runtime> {
    rt: R,
    ws: Arc<dyn WsConnect>,
    signer: Option<Arc<dyn Signer>>,
    work_budget: usize,
    max_frame: usize,
    pool: RelayPool,
    commands: mpsc::Receiver<PoolCommand>,
    relays: BTreeMap<RelayId, Relay>,
    subs: BTreeMap<SubId, mpsc::Sender<PoolItem>>,
    relay_events: mpsc::Sender<(RelayId, SessionEvent)>,
    /// Still holds the receiver until the application takes it: until then relay events
    /// are dropped, never waited on.
    relay_events_slot: Arc<std::sync::Mutex<Option<super::handle::PoolEvents>>>,
    /// Items the application's channels had no room for, in order; while any wait, no
    /// socket is read (backpressure through TCP, not a growing buffer).
    backlog: VecDeque<(Dest, Relayed)>,
    publishes: BTreeMap<EventId, oneshot::Sender<Result<PublishOutcome, PoolError>>>,
    alarm: Alarm<R>,
    reading_paused: bool,
    /// The verification workers, when a verifier is configured, and the checks the core
    /// asked for that they have no room for yet.
    workers: Option<Workers>,
    to_verify: VecDeque<VerifyRequest>,
    /// Relays whose socket woke or was handed output.
    ready: Ready,
    /// The relays taken from `ready` for this pass (kept to reuse its allocation).
    batch: Vec<RelayId>,
    /// Relays that had something to read while reading was paused: the core was told their
    /// reads are paused, and they are polled again when reading resumes.
    deferred: BTreeSet<RelayId>,
    /// Relays whose writes are so far behind that no command is taken.
    backed_up: BTreeSet<RelayId>,
    /// AUTH answers being signed, by relay.
    signing: BTreeMap<RelayId, (ChallengeId, BoxFuture<Result<String, SignerError>>)>,
    /// Fetches each relay's NIP-11 document, when the runtime gave one.
    info_http: Option<Arc<dyn HttpConnect>>,
    info_policy: InfoPolicy,
    /// The NIP-11 fetches in flight, by relay: only these are polled.
    info_fetches: BTreeMap<RelayId, BoxFuture<Result<Vec<u8>, InfoFetchError>>>,
}

/// A backlogged item: for a subscription, or a relay-wide event.
#[derive(Debug)]
enum Relayed {
    Item(PoolItem),
    Session(RelayId, SessionEvent),
}

/// Where a backlogged item goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    Sub(SubId),
    Relays,
}

struct Relay {
    url: Arc<str>,
    wire: Wire,
    /// Its socket is polled with this: waking it queues the relay in `ready`.
    waker: Waker,
    /// When its last NIP-11 document fetch started.
    info_fetched_at: Option<Instant>,
}

/// A handle to a new, empty pool and the driver that serves it.
pub fn pool_driver<R: Runtime>(
    mut pool_config: PoolConfig,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
) -> (PoolHandle, PoolDriver<R>) {
    let (commands_tx, commands) = mpsc::channel(config.command_capacity.max(1) - 1);
    let (relay_events, rx) = mpsc::channel(config.session_capacity.max(1) - 1);
    let max_frame = pool_config.relay.max_frame;
    // The core waits for verdicts only when someone will give them.
    pool_config.verify = config.verifier.is_some();
    let workers = config
        .verifier
        .clone()
        .map(|v| Workers::start(v, config.verify_workers));
    pool_config.relay.authenticates |= config.signer.is_some();
    let mut pool = RelayPool::new(pool_config, seed_or_random(config.seed));
    pool.set_wall_clock(rt.now(), crate::relay::unix_now());
    let slot = Arc::new(std::sync::Mutex::new(Some(super::handle::PoolEvents {
        rx,
    })));
    let handle = PoolHandle {
        commands: commands_tx,
        subscription_capacity: config.subscription_capacity,
        events: Arc::clone(&slot),
    };
    let driver = PoolDriver {
        rt,
        ws,
        signer: config.signer,
        work_budget: config.work_budget.max(1),
        max_frame,
        pool,
        commands,
        relays: BTreeMap::new(),
        subs: BTreeMap::new(),
        relay_events,
        relay_events_slot: slot,
        backlog: VecDeque::new(),
        publishes: BTreeMap::new(),
        alarm: Alarm::new(),
        reading_paused: false,
        workers,
        to_verify: VecDeque::new(),
        ready: Ready::default(),
        batch: Vec::new(),
        deferred: BTreeSet::new(),
        backed_up: BTreeSet::new(),
        signing: BTreeMap::new(),
        info_http: None,
        info_policy: config.relay_info,
        info_fetches: BTreeMap::new(),
    };
    (handle, driver)
}

impl<R: Runtime> PoolDriver<R>
where
    R::Sleep: 'static,
{
    /// Fetch each relay's NIP-11 document with `http` when it connects (bounded and
    /// refreshed rarely, per [`Config::relay_info`]) and give it to that relay's session, as
    /// [`RelayDriver::with_relay_info`](crate::relay::RelayDriver::with_relay_info) does.
    #[must_use]
    pub fn with_relay_info(mut self, http: Arc<dyn HttpConnect>) -> Self {
        self.info_http = Some(http);
        self
    }
}

impl<R: Runtime> Future for PoolDriver<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut budget = this.work_budget;
        loop {
            let now = this.rt.now();
            // Fixed order: due timeout, drain, backlog, commands, the sockets that woke.
            if this.pool.poll_timeout().is_some_and(|at| now >= at) {
                this.pool.handle_timeout(now);
            }
            this.drain(now);
            let mut worked = this.poll_verify(cx, now);
            if worked {
                this.drain(now);
            }
            // Sockets wait while the application or the verifiers lag behind.
            let clear = this.flush(cx) && !this.verify_backlogged();
            this.note_reading(now, clear);
            worked |= this.poll_signing(cx, now);
            worked |= this.poll_info(cx, now);
            match this.poll_command(cx, now) {
                Poll::Ready(true) => worked = true,
                Poll::Ready(false) => return Poll::Ready(()),
                Poll::Pending => {}
            }
            worked |= this.poll_wires(cx, now, clear);
            if worked {
                budget -= 1;
                if budget == 0 {
                    this.drain(this.rt.now());
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                continue;
            }
            let deadline = this.pool.poll_timeout();
            if this.alarm.poll(&this.rt, cx, deadline).is_ready() {
                continue;
            }
            return Poll::Pending;
        }
    }
}

impl<R: Runtime> PoolDriver<R> {
    fn drain(&mut self, now: Instant) {
        loop {
            if let Some((relay, transmit)) = self.pool.poll_transmit() {
                let Some(r) = self.relays.get_mut(&relay) else {
                    continue;
                };
                if matches!(transmit, tether_core::nostr::Transmit::Open { .. }) {
                    info!(url = %r.url, "connecting");
                    self.signing.remove(&relay);
                    if let Some(fetch) = start_info_fetch(
                        &self.rt,
                        self.info_http.as_ref(),
                        self.info_policy,
                        now,
                        r,
                    ) {
                        self.info_fetches.entry(relay).or_insert(fetch);
                    }
                }
                r.wire.transmit(&*self.ws, &r.url, self.max_frame, transmit);
                if r.wire.backed_up() {
                    self.backed_up.insert(relay);
                }
                self.ready.push(relay);
                continue;
            }
            if let Some(request) = self.pool.poll_verify() {
                self.to_verify.push_back(request);
                continue;
            }
            let Some(event) = self.pool.poll_event() else {
                break;
            };
            self.route(now, event);
        }
    }

    /// Hand checks to the workers while they have room; feed their verdicts to the core.
    fn poll_verify(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(workers) = self.workers.as_mut() else {
            return false;
        };
        let mut worked = false;
        while workers.has_room() {
            let Some(request) = self.to_verify.pop_front() else {
                break;
            };
            if let Some((ticket, verdict)) = workers.submit(request) {
                let _ = self.pool.handle_verified(now, ticket, verdict);
                worked = true;
            }
        }
        while let Poll::Ready(Some((ticket, verdict))) = workers.poll_verdict(cx) {
            // A ticket of a subscription dropped meanwhile is not awaited any more.
            let _ = self.pool.handle_verified(now, ticket, verdict);
            worked = true;
        }
        worked
    }

    fn verify_backlogged(&self) -> bool {
        self.workers
            .as_ref()
            .is_some_and(|w| self.to_verify.len() >= w.capacity())
    }

    fn route(&mut self, now: Instant, event: PoolEvent) {
        let (sub, item) = match event {
            PoolEvent::Received {
                sub,
                relay,
                id,
                raw,
            } => (sub, PoolItem::Event { relay, id, raw }),
            PoolEvent::Eose { sub, relay } => (sub, PoolItem::Eose { relay }),
            PoolEvent::RelayClosed {
                sub,
                relay,
                reason,
                attempts,
            } => (
                sub,
                PoolItem::RelayClosed {
                    relay,
                    reason,
                    attempts,
                },
            ),
            PoolEvent::Complete { sub, outcome } => (sub, PoolItem::Complete(outcome)),
            PoolEvent::Ended { sub, reasons } => (sub, PoolItem::Ended { reasons }),
            PoolEvent::Invalid {
                sub,
                relay,
                id,
                reason,
            } => {
                if let Some(r) = self.relays.get(&relay) {
                    warn!(url = %r.url, %id, %reason, "event failed verification");
                }
                (sub, PoolItem::Invalid { relay, id, reason })
            }
            PoolEvent::PublishDone { id, outcome } => {
                if let Some(reply) = self.publishes.remove(&id) {
                    let _ = reply.send(Ok(outcome));
                }
                return;
            }
            PoolEvent::Relay {
                relay,
                sub: Some(sub),
                event,
            } => {
                // The session's instants, made relative to now, as the relay driver does.
                let Some(Route::Sub(_, event)) = route(now, event) else {
                    return;
                };
                (sub, PoolItem::Relay { relay, event })
            }
            PoolEvent::Relay {
                relay,
                sub: None,
                event,
            } => {
                self.relay_event(relay, &event);
                if let Some(Route::Session(event)) = route(now, event) {
                    self.backlog
                        .push_back((Dest::Relays, Relayed::Session(relay, event)));
                }
                return;
            }
            other => {
                debug!(?other, "pool event");
                return;
            }
        };
        self.backlog
            .push_back((Dest::Sub(sub), Relayed::Item(item)));
    }

    /// A relay-wide event: logged, and an AUTH challenge signed when a signer is set.
    fn relay_event(&mut self, relay: RelayId, event: &Event) {
        let Some(r) = self.relays.get_mut(&relay) else {
            return;
        };
        match event {
            Event::AuthChallenge { challenge, id } => {
                if let Some(signer) = &self.signer {
                    self.signing
                        .insert(relay, (*id, signer.sign_auth(&r.url, challenge)));
                }
            }
            Event::Disconnected { why, .. } => info!(url = %r.url, ?why, "disconnected"),
            Event::Connected => info!(url = %r.url, "connected"),
            other => debug!(url = %r.url, ?other, "relay event"),
        }
    }

    /// Deliver the backlog as far as the channels allow; `true` once it is empty.
    fn flush(&mut self, cx: &mut Context<'_>) -> bool {
        while let Some((dest, relayed)) = self.backlog.pop_front() {
            let item = match (dest, relayed) {
                (Dest::Sub(_), Relayed::Item(item)) => item,
                (_, Relayed::Session(relay, event)) => {
                    if !self.flush_relay_event(cx, relay, event) {
                        return false;
                    }
                    continue;
                }
                (Dest::Relays, Relayed::Item(_)) => continue,
            };
            let Dest::Sub(sub) = dest else {
                continue;
            };
            let Some(tx) = self.subs.get_mut(&sub) else {
                continue;
            };
            match Pin::new(&mut *tx).poll_ready(cx) {
                Poll::Ready(Ok(())) => {
                    let ended = matches!(item, PoolItem::Ended { .. });
                    if Pin::new(&mut *tx).start_send(item).is_err() || ended {
                        self.subs.remove(&sub);
                    }
                }
                Poll::Ready(Err(_)) => {
                    // The application dropped the subscription.
                    self.subs.remove(&sub);
                    let now = self.rt.now();
                    let _ = self.pool.unsubscribe(now, sub);
                }
                Poll::Pending => {
                    self.backlog
                        .push_front((Dest::Sub(sub), Relayed::Item(item)));
                    return false;
                }
            }
        }
        true
    }

    /// One relay-wide event to its channel; `false` (kept) when the channel is full. Once
    /// the application dropped the stream, relay events are no one's and are dropped.
    fn flush_relay_event(
        &mut self,
        cx: &mut Context<'_>,
        relay: RelayId,
        event: SessionEvent,
    ) -> bool {
        let taken = self
            .relay_events_slot
            .lock()
            .map_or(true, |slot| slot.is_none());
        if !taken {
            return true;
        }
        match Pin::new(&mut self.relay_events).poll_ready(cx) {
            Poll::Ready(Ok(())) => {
                let _ = Pin::new(&mut self.relay_events).start_send((relay, event));
                true
            }
            Poll::Ready(Err(_)) => true,
            Poll::Pending => {
                self.backlog
                    .push_front((Dest::Relays, Relayed::Session(relay, event)));
                false
            }
        }
    }

    /// Reading resumed: the relays that had something to read while it was paused are
    /// told so and polled again. Only those: a relay whose socket stayed quiet missed
    /// nothing, and one that wakes while reading is paused is deferred then.
    fn note_reading(&mut self, now: Instant, clear: bool) {
        if self.reading_paused != clear {
            return;
        }
        self.reading_paused = !clear;
        debug!(paused = self.reading_paused, "socket reads");
        if self.reading_paused {
            return;
        }
        for relay in std::mem::take(&mut self.deferred) {
            let _ = self.pool.handle_read_paused(now, relay, false);
            self.ready.push(relay);
        }
    }

    /// The sockets that woke, each on its own: one that is slow or dead holds up no other,
    /// and the quiet ones are not polled at all.
    fn poll_wires(&mut self, cx: &mut Context<'_>, now: Instant, read: bool) -> bool {
        // Registered before taking the batch: a socket waking in between wakes the driver.
        self.ready.register(cx.waker());
        let mut batch = std::mem::take(&mut self.batch);
        self.ready.take(&mut batch);
        let mut worked = false;
        for &relay in &batch {
            let Some(r) = self.relays.get_mut(&relay) else {
                continue;
            };
            let mut fed = Ok(());
            let pool = &mut self.pool;
            let mut relay_cx = Context::from_waker(&r.waker);
            let progressed = r.wire.poll(&mut relay_cx, read, &mut |epoch, input| {
                fed = fed.and(feed(pool, now, relay, epoch, input));
            });
            if let Err(error) = fed {
                warn!(%error, url = %r.url, "driver fed the pool out of order");
                debug_assert!(false, "driver misuse: {error}");
            }
            if r.wire.backed_up() {
                self.backed_up.insert(relay);
            } else {
                self.backed_up.remove(&relay);
            }
            if !read && self.deferred.insert(relay) {
                let _ = self.pool.handle_read_paused(now, relay, true);
            }
            if progressed {
                // It may have more ready than one pass took: its waker is not armed.
                self.ready.push(relay);
                worked = true;
            }
        }
        self.batch = batch;
        worked
    }

    /// The AUTH answers being signed (only relays with one in flight).
    fn poll_signing(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut done = Vec::new();
        for (&relay, (challenge, future)) in &mut self.signing {
            if let Poll::Ready(result) = future.as_mut().poll(cx) {
                done.push((relay, *challenge, result));
            }
        }
        let worked = !done.is_empty();
        for (relay, challenge, result) in done {
            self.signing.remove(&relay);
            match result {
                // The core refuses answers to superseded challenges and closed sockets.
                Ok(event) => {
                    if let Err(error) = self.pool.authenticate(now, relay, challenge, &event) {
                        debug!(%error, "AUTH answer dropped");
                    }
                }
                Err(error) => {
                    let url = self.relays.get(&relay).map(|r| Arc::clone(&r.url));
                    warn!(%error, ?url, "signer failed");
                }
            }
        }
        worked
    }

    /// Documents that arrived go to their relay's session; anything else changes nothing.
    fn poll_info(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let mut done = Vec::new();
        for (&relay, future) in &mut self.info_fetches {
            if let Poll::Ready(result) = future.as_mut().poll(cx) {
                done.push((relay, result));
            }
        }
        for (relay, _) in &done {
            self.info_fetches.remove(relay);
        }
        let worked = !done.is_empty();
        for (relay, result) in done {
            let parsed = result
                .map_err(|e| e.to_string())
                .and_then(|bytes| RelayInfo::parse(&bytes).map_err(|e| e.to_string()));
            let event = match parsed {
                Ok(info) => match self.pool.apply_relay_info(now, relay, &info) {
                    Ok(applied) => {
                        info!(%relay, ?applied, "relay information document applied");
                        SessionEvent::RelayInfo { info, applied }
                    }
                    Err(_) => continue,
                },
                Err(why) => {
                    info!(%relay, %why, "no relay information document; nothing changes");
                    SessionEvent::RelayInfoUnavailable { why }
                }
            };
            self.backlog
                .push_back((Dest::Relays, Relayed::Session(relay, event)));
        }
        worked
    }

    /// One command, if any: `Ready(false)` when every handle is gone.
    fn poll_command(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<bool> {
        if !self.backed_up.is_empty() {
            return Poll::Pending;
        }
        let Poll::Ready(next) = Pin::new(&mut self.commands).poll_next(cx) else {
            return Poll::Pending;
        };
        let Some(command) = next else {
            for relay in self.pool.relay_ids().collect::<Vec<_>>() {
                let _ = self.pool.remove_relay(now, relay);
            }
            self.drain(now);
            for r in self.relays.values_mut() {
                r.wire.shut_down();
            }
            return Poll::Ready(false);
        };
        self.command(now, command);
        Poll::Ready(true)
    }

    fn command(&mut self, now: Instant, command: PoolCommand) {
        match command {
            PoolCommand::AddRelay { url, reply } => {
                let result = self.pool.add_relay(now);
                if let Ok(relay) = result {
                    debug!(%url, %relay, "relay added");
                    self.relays.insert(
                        relay,
                        Relay {
                            url: Arc::from(url.as_str()),
                            wire: Wire::default(),
                            waker: self.ready.waker(relay),
                            info_fetched_at: None,
                        },
                    );
                }
                let _ = reply.send(result);
            }
            PoolCommand::RemoveRelay { relay, reply } => {
                let result = self.pool.remove_relay(now, relay);
                self.drain(now);
                if let Some(mut r) = self.relays.remove(&relay) {
                    r.wire.shut_down();
                }
                self.forget(relay);
                let _ = reply.send(result);
            }
            PoolCommand::RelayStats { relay, reply } => {
                let stats = self
                    .pool
                    .relay_stats(relay)
                    .ok_or(PoolError::UnknownRelay(relay));
                let _ = reply.send(stats);
            }
            PoolCommand::Subscribe {
                filters,
                items,
                reply,
            } => {
                let result = self.pool.subscribe(now, filters);
                if let Ok(sub) = result {
                    self.subs.insert(sub, items);
                }
                let _ = reply.send(result);
            }
            PoolCommand::Unsubscribe { sub } => {
                self.subs.remove(&sub);
                self.backlog.retain(|(d, _)| *d != Dest::Sub(sub));
                let _ = self.pool.unsubscribe(now, sub);
            }
            PoolCommand::Publish { event, reply } => match self.pool.publish(now, &event, None) {
                Ok(id) => {
                    self.publishes.insert(id, reply);
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            PoolCommand::Close { reply } => {
                for relay in self.pool.relay_ids().collect::<Vec<_>>() {
                    let _ = self.pool.remove_relay(now, relay);
                }
                self.drain(now);
                for r in self.relays.values_mut() {
                    r.wire.shut_down();
                }
                self.relays.clear();
                self.deferred.clear();
                self.backed_up.clear();
                self.signing.clear();
                self.info_fetches.clear();
                let _ = reply.send(());
            }
        }
    }
}

impl<R: Runtime> PoolDriver<R> {
    /// Drop what the driver kept about a removed relay.
    fn forget(&mut self, relay: RelayId) {
        self.deferred.remove(&relay);
        self.backed_up.remove(&relay);
        self.signing.remove(&relay);
        self.info_fetches.remove(&relay);
    }
}

/// At `relay`'s connect: fetch its document if there is none yet or it is older than
/// `refresh_after` (a failed fetch counts: one bounded request per refresh period). A fetch
/// still in flight is kept by the caller.
fn start_info_fetch<R: Runtime>(
    rt: &R,
    http: Option<&Arc<dyn HttpConnect>>,
    policy: InfoPolicy,
    now: Instant,
    relay: &mut Relay,
) -> Option<BoxFuture<Result<Vec<u8>, InfoFetchError>>>
where
    R::Sleep: 'static,
{
    let http = http?;
    let fresh = relay
        .info_fetched_at
        .is_some_and(|at| now.saturating_duration_since(at) < policy.refresh_after);
    if !policy.fetch || fresh {
        return None;
    }
    relay.info_fetched_at = Some(now);
    Some(fetch_info(rt, Arc::clone(http), &relay.url, policy))
}

/// One socket input into the pool.
fn feed(
    pool: &mut RelayPool,
    now: Instant,
    relay: RelayId,
    epoch: Epoch,
    input: WireInput,
) -> Result<(), SocketError> {
    let result = match input {
        WireInput::Open => pool.handle_open(now, relay, epoch),
        WireInput::Close(why) => pool.handle_close(now, relay, epoch, why),
        WireInput::Text(text) => pool.handle_frame(now, relay, epoch, &text),
        WireInput::Binary(len) => pool.handle_binary(now, relay, epoch, len),
        WireInput::Pong => pool.handle_pong(now, relay, epoch),
    };
    match result {
        Err(PoolError::Socket(e)) => Err(e),
        // A relay removed while its socket still had input in flight.
        Err(_) | Ok(()) => Ok(()),
    }
}

impl<R: Runtime> std::fmt::Debug for PoolDriver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolDriver")
            .field("relays", &self.relays.len())
            .field("subscriptions", &self.subs.len())
            .field("backlog", &self.backlog.len())
            .finish_non_exhaustive()
    }
}
