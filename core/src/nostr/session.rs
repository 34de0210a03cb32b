//! [`RelaySession`]: one relay connection's subscriptions, kept alive through refusals,
//! rate limits, auth challenges and reconnects. Pure: no I/O, no clock, seeded randomness.
//!
//! Where each rule of the design lives:
//!
//! | rule | here |
//! | --- | --- |
//! | socket contract: epochs, stale input, why a socket was lost | the `handle_*` inputs below, [`Link::check_epoch`] |
//! | gate on background paths only | the scheduler's `pump` (replay, queue, retries); not in [`RelaySession::subscribe`] |
//! | refusal classes | `Refusals::refuse` (`nostr/refusals.rs`), carried out by `carry_out` |
//! | bounded retry, delay = max(gate, own backoff) | `Refusals::retry` |
//! | retry state clears | `Refusals::eose` from `on_eose` (`session/frames.rs`), `Refusals::reset` from `reset_for_socket` |
//! | replay 8 per batch, 50 ms, priority order, then first registered | the scheduler (`nostr/scheduler.rs`) |
//! | stale work | wire ids `(id, attempt)` routed in `nostr/inbound.rs`; socket epochs in [`Link`] |
//! | catch-up (live half, `since` window, NIP-77), dedup, future dates | `nostr/catch_up/`, `session/catch_up.rs`, `Subscription::admit`, the scheduler's catch-up steps |
//! | socket reconnect, stable reset, liveness | [`Link`] |
//! | max subscriptions, NOTICE attribution, EOSE timeout | the scheduler's slots and `Cap`, `Refusals::refuse` (a cap refusal re-queues), `on_notice`, `fire_sub_timer` |
//! | NIP-11 starting values | [`RelaySession::apply_relay_info`], the auth hold (`nostr/auth.rs`) |
//! | auth: challenges, which answer applies, the hold | `nostr/auth.rs`; `on_auth_ok`, [`RelaySession::authenticate`] |
//! | publish | the outbox module |

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

use crate::gate::{GateScope, RateLimitGate};
use crate::link::{Epoch, Link, LinkAction, SocketError, SocketLoss};
use crate::nostr::auth::Auth;
use crate::nostr::catch_up::{self as catch_up_plan, Support};
use crate::nostr::config::RelayConfig;
use crate::nostr::error::Error;
use crate::nostr::message::{ClientMessage, EventId, RawEvent};
use crate::nostr::outbox::{event_frame_len, Env, Outbox};
use crate::nostr::output::{Carries, ChallengeId, Disconnect, Event, Transmit};
use crate::nostr::reason::{Class, Terminal};
use crate::nostr::refusals::{self, Refusals, Verdict};
use crate::nostr::registry::Registry;
use crate::nostr::relay_info::{Applied, RelayInfo};
use crate::nostr::scheduler::{self, Scheduler};
use crate::nostr::stats::Stats;
use crate::nostr::subscription::{
    neg_wire_id, Filter, Priority, SubState, Subscription, SubscriptionId,
};
use crate::rng::Rng;
use crate::time::{Clock, Instant, WallClock};
use crate::timers::Timers;
use crate::wake::{sooner, Wake};

mod catch_up;
#[cfg(feature = "fuzzing")]
mod consistency;
mod frames;

/// A read-only view of one subscription, for tests, invariants and dashboards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriptionView {
    /// Its id.
    pub id: SubscriptionId,
    /// Where it stands.
    pub state: SubState,
    /// Re-REQs after refusals since the retry state last cleared.
    pub retries: u32,
    /// Its priority.
    pub priority: Priority,
    /// When its pending timer fires: the retry, EOSE timeout or auth hold deadline.
    pub timer: Option<Instant>,
}

/// The sans-IO Nostr relay session. See the crate docs for the driving contract.
///
/// # Bounds
/// Subscriptions are bounded by `max_registered`, the outbox by `max_outbox`, the catch-up
/// memory by [`CatchUpConfig::memory`](super::CatchUpConfig) per subscription and
/// `memory_total` in all, a NIP-77 session by its rounds, frame and missing ids, inbound
/// frames by `max_frame`. The transmit
/// and event queues hold what one input produced: at most a few items per frame, and per
/// timeout at most one replay batch plus one item per registered subscription and outbox
/// entry whose timer fired. They stay bounded as long as the driver drains both after every
/// input, as the contract requires; nothing the peer sends can make one input produce more.
#[derive(Debug)]
pub struct RelaySession {
    // The `pub(super)` fields are for the checkpoint (`nostr/checkpoint.rs`), which reads
    // and restores them.
    /// Shared by every session of a pool (536 bytes each would add up over thousands).
    pub(super) config: Arc<RelayConfig>,
    pub(super) clock: Clock,
    rng: Rng,
    pub(super) link: Link,
    gate: RateLimitGate,
    pub(super) subs: Registry,
    /// Each subscription's single timer: retry, EOSE timeout or auth hold.
    timers: Timers<SubscriptionId>,
    /// When each REQ goes out: queue, limit, pacing.
    pub(super) scheduler: Scheduler,
    /// What refusals mean, and the retry state they leave.
    refusals: Refusals,
    /// Subscriptions registered so far: the next one's registration order.
    pub(super) registered: u64,
    pub(super) outbox: Outbox,
    /// NIP-42: the challenge, our answer, and the hold that keeps REQs back until then.
    auth: Auth,
    /// The wall clock, for judging `created_at`; `None` until the driver sets it.
    pub(super) wall: Option<WallClock>,
    /// What the relay's NIP-11 document declares (nothing until one is applied).
    pub(super) declared: RelayInfo,
    /// When the relay's information document was last asked for ([`Transmit::FetchInfo`]).
    pub(super) info_asked_at: Option<Instant>,
    /// Whether NIP-77 may be tried with this relay.
    pub(super) negentropy: Support,
    /// Events remembered across all subscriptions (bounded by `memory_total`).
    pub(super) remembered: usize,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

/// Transmits an emptied queue may keep room for (a ping, a close, a REQ or two).
const IDLE_TRANSMITS: usize = 4;

impl RelaySession {
    /// The latest `now` an input carried: what the relative times of the lines of its
    /// outputs ([`line`](crate::line)) are measured from.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// A disconnected session; `seed` determines every jittered delay.
    #[must_use]
    pub fn new(config: RelayConfig, seed: u64) -> Self {
        RelaySession::with_shared_config(Arc::new(config), seed)
    }

    /// [`RelaySession::new`] with a configuration shared with other sessions (a pool's).
    #[must_use]
    pub(crate) fn with_shared_config(config: Arc<RelayConfig>, seed: u64) -> Self {
        RelaySession {
            link: Link::new(config.link),
            gate: RateLimitGate::new(config.gate_default_window, config.gate_max_window),
            config,
            clock: Clock::default(),
            rng: Rng::new(seed),
            subs: Registry::default(),
            timers: Timers::default(),
            scheduler: Scheduler::default(),
            refusals: Refusals::default(),
            registered: 0,
            outbox: Outbox::default(),
            auth: Auth::default(),
            wall: None,
            declared: RelayInfo::default(),
            info_asked_at: None,
            negentropy: Support::default(),
            remembered: 0,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    // ----- inputs from the application ------------------------------------------------------

    /// The wall clock read `unix_secs` (seconds since 1970) at `now`. Drivers set it at
    /// start and may set it again to follow clock corrections. It anchors catch-up: a
    /// `since` window starts the lookback before the wall-clock time a subscription stopped
    /// being live, a NIP-77 window the lookback before it went live (NIP-77 is only tried
    /// with the wall clock), and an event dated past it (plus
    /// [`RelayConfig::future_tolerance`]) is kept out of the remembered window.
    pub fn set_wall_clock(&mut self, now: Instant, unix_secs: u64) {
        let now = self.clock.observe(now);
        self.wall = Some(WallClock::new(now, unix_secs));
    }

    /// Start connecting (and keep reconnecting) until [`RelaySession::disconnect`].
    pub fn connect(&mut self, now: Instant) {
        self.clock.observe(now);
        if let Some(epoch) = self.link.connect(self.clock.now()) {
            self.open_socket_transmit(epoch);
        }
    }

    /// Make every connection attempt wait for [`RelaySession::admit`] (a pool pacing its
    /// handshakes); see [`Link::set_paced`].
    pub(crate) fn set_paced(&mut self, paced: bool) {
        self.link.set_paced(paced);
    }

    /// The permit for an attempt that waits in [`LinkState::Queued`](crate::link::LinkState::Queued): its socket is asked
    /// for now, and its connect timeout starts now.
    pub(crate) fn admit(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        if let Some(epoch) = self.link.admit(now) {
            self.open_socket_transmit(epoch);
        }
    }

    /// Stop: close the socket, cancel the pending reconnect and every retry. Subscriptions
    /// and unsent publishes stay registered for a later [`RelaySession::connect`]; nothing is
    /// transmitted after this but the close.
    pub fn disconnect(&mut self, now: Instant) {
        self.clock.observe(now);
        let wanted = self.link.wants_connection();
        let epoch = self.link.epoch();
        let had_socket = self.link.disconnect();
        self.transmits.clear();
        if had_socket {
            self.transmits.push_back(Transmit::Close { epoch });
        }
        self.reset_for_socket();
        if self.config.gate_scope == GateScope::Connection {
            self.gate.reset();
        }
        if wanted {
            self.events.push_back(Event::Disconnected {
                reconnect_at: None,
                why: Disconnect::Requested,
            });
        }
    }

    /// Register a subscription. When connected and under the subscription limit its REQ goes
    /// out at once — never held behind the rate-limit gate; if the relay refuses it for
    /// budget, its *retry* waits behind the gate.
    ///
    /// # Errors
    /// [`Error::NoFilters`], [`Error::TooManySubscriptions`] past `max_registered`, or
    /// [`Error::MessageTooLarge`] when its REQ could exceed the relay's declared
    /// `max_message_length`.
    pub fn subscribe(
        &mut self,
        now: Instant,
        filters: Vec<Filter>,
        priority: Priority,
    ) -> Result<SubscriptionId, Error> {
        let now = self.clock.observe(now);
        if filters.is_empty() {
            return Err(Error::NoFilters);
        }
        if let Some(max) = self.declared.max_message_length {
            let len = req_frame_bound(filters.iter().map(|f| f.json().len()).sum(), filters.len());
            if len > max {
                return Err(Error::MessageTooLarge { len, max });
            }
        }
        if self.subs.len() >= self.config.max_registered {
            return Err(Error::TooManySubscriptions {
                max: self.config.max_registered,
            });
        }
        self.registered += 1;
        let order = self.registered;
        let id = self
            .subs
            .insert(|id| Subscription::new(id, &filters, priority, order));
        if self.link.is_open() {
            if self.auth.hold().is_some() {
                self.enqueue(id);
            } else if self.slot_available() {
                self.send_req(now, id);
            } else {
                self.enqueue(id);
                self.tell_queued(id);
            }
        }
        Ok(id)
    }

    /// Drop a subscription; a CLOSE goes out if its REQ is open.
    ///
    /// # Errors
    /// [`Error::UnknownSubscription`] if it is not registered.
    pub fn unsubscribe(&mut self, now: Instant, id: SubscriptionId) -> Result<(), Error> {
        let now = self.clock.observe(now);
        let Some(state) = self.subs.get(id).map(|s| s.state) else {
            return Err(Error::UnknownSubscription(id));
        };
        if state.is_open() && self.link.is_open() {
            self.send_close(id);
        }
        self.forget(id);
        self.pump(now);
        Ok(())
    }

    /// Publish a signed event (JSON object). It is sent at once when connected, otherwise
    /// after the next connect, and its OK is matched by event id.
    ///
    /// # Errors
    /// [`Error::InvalidEvent`], [`Error::AlreadyPublishing`], [`Error::OutboxFull`], or
    /// [`Error::MessageTooLarge`] when its EVENT frame exceeds the relay's declared
    /// `max_message_length`.
    pub fn publish(&mut self, now: Instant, event_json: &str) -> Result<EventId, Error> {
        let now = self.clock.observe(now);
        let event = RawEvent::parse(event_json).map_err(invalid_event)?;
        if let Some(max) = self.declared.max_message_length {
            let len = event_frame_len(event.json());
            if len > max {
                return Err(Error::MessageTooLarge { len, max });
            }
        }
        let id = event.id();
        if self.outbox.contains(id) {
            return Err(Error::AlreadyPublishing(id));
        }
        if self.outbox.len() >= self.config.max_outbox {
            return Err(Error::OutboxFull {
                max: self.config.max_outbox,
            });
        }
        let (outbox, mut env) = self.outbox();
        outbox.push(now, id, event.json(), &mut env);
        Ok(id)
    }

    /// Answer the relay's NIP-42 challenge `challenge` (from [`Event::AuthChallenge`]) with
    /// a signed kind 22242 event. Work held for `auth-required:` is retried once the relay's
    /// OK accepts it.
    ///
    /// # Errors
    /// [`Error::InvalidEvent`] when it is not an event object; [`Error::NotConnected`] when
    /// no socket is open; [`Error::StaleChallenge`] when a newer challenge or a new socket
    /// superseded `challenge` (the relay would refuse the answer).
    pub fn authenticate(
        &mut self,
        now: Instant,
        challenge: ChallengeId,
        signed_event_json: &str,
    ) -> Result<EventId, Error> {
        self.clock.observe(now);
        let event = RawEvent::parse(signed_event_json).map_err(invalid_event)?;
        if !self.link.is_open() {
            return Err(Error::NotConnected);
        }
        let raw =
            serde_json::from_str::<&RawValue>(event.json()).map_err(|e| Error::InvalidEvent {
                detail: e.to_string(),
            })?;
        self.auth.answer(challenge, event.id())?;
        self.send(
            ClientMessage::Auth { event: raw }.encode(),
            Carries::Auth(event.id()),
        );
        Ok(event.id())
    }

    /// The relay's NIP-11 document declares `info` (see [`RelayInfo::parse`]): its values
    /// become this session's starting values, by the rules of [`crate::nostr::relay_info`].
    /// It may come at any time, and again (a refreshed document replaces the last one).
    ///
    /// - A declared `max_subscriptions` is the cap in force until the relay shows another:
    ///   a cap learned from a refusal replaces it (and is kept when a document comes
    ///   later); while it holds subscriptions back, one REQ at a time is sent past it, and
    ///   each that the relay accepts raises it by one. An [`Event::SubscriptionLimit`] says
    ///   when the cap in force changes.
    /// - With a `max_message_length`, subscriptions and publishes already registered whose
    ///   frame would be larger are given up: [`Event::Closed`] (with a reason saying so) and
    ///   [`Event::Rejected`] with [`Rejection::TooLarge`](super::Rejection::TooLarge).
    /// - `auth_required` makes REQs wait for authentication from the next socket on, when
    ///   [`RelayConfig::authenticates`] says the application answers challenges.
    pub fn apply_relay_info(&mut self, now: Instant, info: &RelayInfo) -> Applied {
        let now = self.clock.observe(now);
        self.declared = *info;
        self.negentropy = self.negentropy.declare(info.negentropy);
        if let Some(max) = self.scheduler.declare_limit(info.max_subscriptions) {
            self.events.push_back(Event::SubscriptionLimit { max });
        }
        if let Some(max) = info.max_message_length {
            let larger: Vec<(SubscriptionId, usize)> = self
                .subs
                .iter()
                .map(|s| (s.id, req_frame_bound(s.filters.len(), s.filter_count)))
                .filter(|&(_, len)| len > max)
                .collect();
            for (id, len) in larger {
                if self.subs.get(id).is_some_and(|s| s.state.is_open()) && self.link.is_open() {
                    self.send_close(id);
                }
                self.surface(id, Error::MessageTooLarge { len, max }.to_string());
            }
            let (outbox, mut env) = self.outbox();
            outbox.reject_larger(max, &mut env);
        }
        self.pump(now);
        self.applied()
    }

    // ----- the application's lifecycle --------------------------------------------------------

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

    /// The application is suspended (backgrounded, asleep): no deadline runs until
    /// [`RelaySession::resume`], so nothing that passes meanwhile is charged to the relay as
    /// silence or fires in a burst. The driver keeps delivering whatever it still reads.
    /// Idempotent.
    pub fn suspend(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        self.link.suspend(now);
    }

    /// The application is back. Every deadline of the session (subscription retries and EOSE
    /// timeouts, NIP-77 sessions, publishes, the AUTH hold) moves by the time it was away; a
    /// socket that looked open is probed (a ping now, dead without an answer within
    /// `LinkConfig::probe_timeout`, then the usual reconnect, replay and catch-up); a live
    /// socket carries on with nothing re-sent. Safe without a suspend.
    pub fn resume(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        let (away, action) = self.link.resume(now);
        if !away.is_zero() {
            self.postpone(away);
        }
        self.follow_link(action);
    }

    /// The network path changed (Wi-Fi to cellular, a VPN up or down). Backoff from network
    /// failures resets; a waiting reconnect goes within `LinkConfig::network_jitter`; an
    /// open socket is probed, or given up at once (`why: network_changed`) when
    /// `old_path_gone`. Gate windows and learned caps are the relay's and stay.
    pub fn network_changed(&mut self, now: Instant, old_path_gone: bool) {
        let now = self.clock.observe(now);
        let action = self.link.network_changed(now, old_path_gone, &mut self.rng);
        self.follow_link(action);
    }

    /// The device has (`online`) or has lost the network. Offline, no connection attempt is
    /// made and no retry budget is spent; subscriptions stay as they are, unreported. Back
    /// online, the reconnect goes within `LinkConfig::network_jitter`. Idempotent.
    pub fn set_online(&mut self, now: Instant, online: bool) {
        let now = self.clock.observe(now);
        self.link.set_online(now, online, &mut self.rng);
    }

    /// Every deadline of the session `by` later (the application was away that long).
    fn postpone(&mut self, by: Duration) {
        for sub in self.subs.iter_mut() {
            if let Some(at) = sub.timer {
                self.timers
                    .set(sub.id, &mut sub.timer, Some(at.saturating_add(by)));
            }
        }
        self.outbox.postpone(by);
        self.auth.postpone(by);
    }

    /// Do what the link decided outside a timeout (a probe, a socket given up).
    fn follow_link(&mut self, action: Option<LinkAction>) {
        let epoch = self.link.epoch();
        match action {
            Some(LinkAction::Open(epoch)) => self.open_socket_transmit(epoch),
            Some(LinkAction::Ping) => self.transmits.push_back(Transmit::Ping),
            Some(LinkAction::Dead { reconnect_at, why }) => {
                self.lose_socket(reconnect_at, why);
                self.transmits.push_back(Transmit::Close { epoch });
            }
            None => {}
        }
    }

    // ----- inputs from the socket -------------------------------------------------------------

    /// The socket of `epoch` (from [`Transmit::Open`]) is open. An open for a socket the
    /// session already let go is ignored and counted; see [`SocketError`] for the rule.
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`], or [`SocketError::AlreadyOpen`] for a second open.
    pub fn handle_open(&mut self, now: Instant, epoch: Epoch) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if !self.live_socket(epoch)? {
            return Ok(());
        }
        if !self.link.on_open(now) {
            return Err(SocketError::AlreadyOpen(epoch));
        }
        self.reset_for_socket();
        self.events.push_back(Event::Connected);
        self.ask_for_info_if_due();
        self.scheduler.on_open();
        if self.auth_first() {
            self.auth
                .hold_until(now.saturating_add(self.config.challenge_wait));
        }
        let mut ids: Vec<SubscriptionId> = self.subs.iter().map(|s| s.id).collect();
        crate::sort::sort(&mut ids);
        for id in ids {
            self.enqueue(id);
        }
        let (outbox, mut env) = self.outbox();
        outbox.on_open(now, &mut env);
        self.pump(now);
        Ok(())
    }

    /// The socket of `epoch` closed or failed (or never opened) without the application
    /// asking; `why` is what the driver saw. A reconnect is scheduled.
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`]. A stale epoch is ignored and counted.
    pub fn handle_close(
        &mut self,
        now: Instant,
        epoch: Epoch,
        why: SocketLoss,
    ) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if !self.live_socket(epoch)? {
            return Ok(());
        }
        let reconnect_at = self
            .link
            .on_close(now, std::time::Duration::ZERO, &mut self.rng);
        self.lose_socket(reconnect_at, why);
        Ok(())
    }

    /// A pong (or a ping, which shows the relay is alive just as well) arrived on `epoch`.
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`], or [`SocketError::NotOpen`] before `epoch` opened.
    pub fn handle_pong(&mut self, now: Instant, epoch: Epoch) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if self.open_socket(epoch)? {
            self.link.on_inbound(now);
        }
        Ok(())
    }

    /// A binary frame of `len` bytes arrived on `epoch`. NIP-01 is text only: it is counted
    /// in [`Stats::binary`] and ignored (though it shows the relay is alive).
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`], or [`SocketError::NotOpen`] before `epoch` opened.
    pub fn handle_binary(
        &mut self,
        now: Instant,
        epoch: Epoch,
        len: usize,
    ) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        let _ = len;
        if self.open_socket(epoch)? {
            self.link.on_inbound(now);
            self.stats.binary += 1;
        }
        Ok(())
    }

    /// The driver stopped (`paused = true`) or resumed reading the socket — for
    /// backpressure, when the application's channels are full. While paused the liveness
    /// watchdog (ping, pong timeout) is suspended, because unread frames may be waiting in
    /// the socket and the silence is the driver's; on resume it restarts from `now`.
    pub fn handle_read_paused(&mut self, now: Instant, paused: bool) {
        let now = self.clock.observe(now);
        self.link.set_reading_paused(now, paused);
    }

    /// A text frame arrived on `epoch`. Malformed or stale frames are counted (see
    /// [`RelaySession::stats`]) and malformed ones surfaced as [`Event::PeerError`].
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`], or [`SocketError::NotOpen`] before `epoch` opened.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        epoch: Epoch,
        text: &str,
    ) -> Result<(), SocketError> {
        let now = self.clock.observe(now);
        if !self.open_socket(epoch)? {
            return Ok(());
        }
        self.on_frame(now, text);
        Ok(())
    }
    /// Time has passed: fire whatever is due at `now` (pass a fresh `now`, not the deadline).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        if self.link.is_suspended() {
            // No clock runs while the application is away (see `suspend`).
            return;
        }
        let action = self.link.handle_timeout(now, &mut self.rng);
        self.follow_link(action);
        self.auth.expire(now);
        while let Some(id) = self.timers.due(now) {
            self.set_timer(id, None);
            self.fire_sub_timer(now, id);
        }
        let (outbox, mut env) = self.outbox();
        outbox.handle_timeout(now, &mut env);
        self.pump(now);
    }

    // ----- outputs ------------------------------------------------------------------------------

    /// The next instruction for the socket.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let transmit = self.transmits.pop_front();
        // A burst of REQs (a replay, a pool's subscriptions) leaves room for a dozen
        // transmits that an idle connection would hold for good; a busy relay sends little,
        // so giving the room back costs it nothing.
        if self.transmits.is_empty() && self.transmits.capacity() > IDLE_TRANSMITS {
            self.transmits = VecDeque::new();
        }
        transmit
    }

    /// The next thing the application should hear.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When to call [`RelaySession::handle_timeout`]: the last `now` while output is queued,
    /// else the earliest deadline, else `None` (nothing will happen without an input).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.poll_wake().map(|(at, _)| at)
    }

    /// [`RelaySession::poll_timeout`] with what it is for ([`Wake::Output`] while output is
    /// queued).
    #[must_use]
    pub fn poll_wake(&self) -> Option<(Instant, Wake)> {
        if self.has_output() {
            return Some((self.clock.now(), Wake::Output));
        }
        if self.link.is_suspended() {
            return None;
        }
        let named = |at: Option<Instant>, why| at.map(|at| (at, why));
        let wake = sooner(
            self.link.poll_wake(),
            named(self.timers.next(), Wake::Subscription),
        );
        let wake = sooner(wake, named(self.outbox.next_timer(), Wake::Publish));
        let replay = self
            .scheduler
            .deadline(self.sending(), &self.gate, &self.config);
        let wake = sooner(wake, named(replay, Wake::ReplayBatch));
        sooner(wake, named(self.auth.hold(), Wake::AuthHold))
    }

    /// REQs may go out: the socket is open and no AUTH hold keeps them back.
    fn sending(&self) -> bool {
        self.link.is_open() && self.auth.hold().is_none()
    }

    /// Ask for the socket of `epoch`. The relay's information document is asked for once
    /// the socket opens ([`RelaySession::handle_open`]): fetched beside the dial, it was a
    /// second connection to a relay that may well be dead.
    fn open_socket_transmit(&mut self, epoch: Epoch) {
        self.transmits
            .push_back(Transmit::Open { epoch, url: None });
    }

    /// Ask for the relay's information document when the refresh rule says it is due
    /// (never asked, or asked longer ago than `info_refresh`).
    fn ask_for_info_if_due(&mut self) {
        let Some(refresh) = self.config.info_refresh else {
            return;
        };
        let now = self.clock.now();
        let fresh = self
            .info_asked_at
            .is_some_and(|at| now.saturating_duration_since(at) < refresh);
        if !fresh {
            self.info_asked_at = Some(now);
            self.transmits.push_back(Transmit::FetchInfo);
        }
    }

    /// Turn the information-document asks on (`Some(period)`) or off, e.g. once a driver
    /// knows it can fetch (see [`RelayConfig::info_refresh`]). Turned on while a socket is
    /// opening or open, the document is asked for at once when due, as at a new socket.
    pub fn set_info_refresh(&mut self, refresh: Option<Duration>) {
        self.apply_info_refresh(refresh, None);
    }

    /// [`RelaySession::set_info_refresh`], adopting `shared` (a pool's configuration, which
    /// says `refresh` already) instead of a copy of its own.
    pub(crate) fn apply_info_refresh(
        &mut self,
        refresh: Option<Duration>,
        shared: Option<&Arc<RelayConfig>>,
    ) {
        match shared {
            Some(shared) => self.config = Arc::clone(shared),
            None if self.config.info_refresh != refresh => {
                Arc::make_mut(&mut self.config).info_refresh = refresh;
            }
            None => {}
        }
        if self.link.is_open() {
            self.ask_for_info_if_due();
        }
    }

    // ----- inspection ----------------------------------------------------------------------------

    /// The relay's refusal of published event `id` while the session holds it for a retry
    /// or for AUTH (`None` when it is in flight or not held).
    pub fn publish_refusal(&self, id: &EventId) -> Option<&super::Rejection> {
        self.outbox.refusal(id)
    }

    /// Whether transmits or events are waiting to be drained.
    pub fn has_output(&self) -> bool {
        !self.transmits.is_empty() || !self.events.is_empty()
    }

    /// Counters of dropped peer input.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Hand out socket epochs after `past` only (see [`Link::start_after`]): the pool
    /// reusing a relay id whose earlier session used epochs up to `past`.
    pub(crate) fn start_epochs_after(&mut self, past: Epoch) {
        self.link.start_after(past);
    }

    /// The socket lifecycle.
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// The rate-limit gate.
    pub fn gate(&self) -> &RateLimitGate {
        &self.gate
    }

    /// REQs currently open on the relay (sent and not closed).
    pub fn open_subscriptions(&self) -> usize {
        self.scheduler.open_reqs()
    }

    /// The limit on open REQs in force: the configured one or the relay's cap (declared in
    /// its NIP-11 document, else learned from its refusals), whichever is lower.
    ///
    /// A declared cap is a first guess and what the relay does wins: a cap refusal replaces
    /// it with what was open ahead of the refused REQ (lower or higher), and while a
    /// declared cap holds subscriptions back one REQ at a time goes out past it — each one
    /// the relay accepts raises the cap by one. A learned cap is never probed past and only
    /// goes down. So while the limit is declared, one REQ more than it may be open.
    pub fn subscription_limit(&self) -> Option<usize> {
        self.scheduler.limit(self.config.max_subscriptions)
    }

    /// What the relay's NIP-11 document declared (empty until one is applied).
    pub fn relay_info(&self) -> &RelayInfo {
        &self.declared
    }

    /// The declared values in force, as [`RelaySession::apply_relay_info`] reports them.
    pub fn applied(&self) -> Applied {
        let limit = self.subscription_limit();
        Applied {
            subscription_limit: limit,
            limit_is_declared: matches!(
                self.scheduler.cap(),
                Some(scheduler::Cap::Declared(n)) if Some(n) == limit
            ),
            max_message_length: self.declared.max_message_length,
            max_subid_length: self.declared.max_subid_length,
            auth_first: self.auth_first(),
            max_limit: self.declared.max_limit,
        }
    }

    /// One subscription, if registered.
    pub fn subscription(&self, id: SubscriptionId) -> Option<SubscriptionView> {
        self.subs.get(id).map(|s| view(s, &self.refusals))
    }

    /// How many subscriptions are registered.
    pub fn subscription_count(&self) -> usize {
        self.subs.len()
    }

    /// Every registered subscription, in id order.
    pub fn subscriptions(&self) -> Vec<SubscriptionView> {
        let mut all: Vec<SubscriptionView> =
            self.subs.iter().map(|s| view(s, &self.refusals)).collect();
        crate::sort::sort_by_key(&mut all, |v| v.id);
        all
    }

    /// Events waiting for their OK.
    pub fn outbox_len(&self) -> usize {
        self.outbox.len()
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    // ----- state plumbing -----------------------------------------------------------------------

    fn send_req(&mut self, now: Instant, id: SubscriptionId) {
        let (scheduler, mut env) = self.scheduler();
        scheduler.send_req(now, id, &mut env);
    }

    fn send_close(&mut self, id: SubscriptionId) {
        let Some(sub) = self.subs.get(id) else {
            return;
        };
        let text = ClientMessage::Close {
            sub: sub.wire_id().into(),
        }
        .encode();
        self.send(text, Carries::Close(id));
    }

    fn send(&mut self, text: String, carries: Carries) {
        self.transmits.push_back(Transmit::Send { text, carries });
    }

    /// `id`'s REQ is no longer open on the relay: it is not live until it catches up, and a
    /// NIP-77 session it had open is closed.
    fn leave_open(&mut self, id: SubscriptionId) {
        let unix_now = self.unix_now();
        let open = self.link.is_open();
        if let Some(sub) = self.subs.get_mut(id) {
            let filter = sub.catch_up.reconciling().unwrap_or(0);
            if sub.catch_up.on_left_open(unix_now, &sub.memory) && open {
                let text = ClientMessage::NegClose {
                    sub: neg_wire_id(id, sub.attempt, filter).into(),
                }
                .encode();
                self.send(text, Carries::Negentropy(id));
            }
        }
        let (scheduler, mut env) = self.scheduler();
        scheduler.leave_open(id, &mut env);
        scheduler.negentropy_ended();
    }

    fn enqueue(&mut self, id: SubscriptionId) {
        let (scheduler, mut env) = self.scheduler();
        scheduler.enqueue(id, &mut env);
    }

    fn tell_queued(&mut self, id: SubscriptionId) {
        let (scheduler, mut env) = self.scheduler();
        scheduler.tell_queued(id, &mut env);
    }

    /// The one report of a subscription's failure; it leaves the session.
    fn surface(&mut self, id: SubscriptionId, reason: String) {
        let attempts = self.refusals.retries(id);
        self.forget(id);
        self.events.push_back(Event::Closed {
            sub: id,
            reason,
            attempts,
        });
    }

    fn forget(&mut self, id: SubscriptionId) {
        self.leave_open(id);
        let Some(sub) = self.subs.remove(id) else {
            return;
        };
        self.remembered = self.remembered.saturating_sub(sub.memory.len());
        self.scheduler.dequeue(sub.queue_key());
        self.refusals.forget(id);
    }

    fn set_timer(&mut self, id: SubscriptionId, at: Option<Instant>) {
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        self.timers.set(id, &mut sub.timer, at);
    }

    /// The socket is gone (or a new one starts): nothing is open, nothing is scheduled, and
    /// refusal history belongs to the old connection.
    fn reset_for_socket(&mut self) {
        // The socket may have died any time after the relay was last heard from (a zombie
        // found by a probe after a suspension, a pong timeout): the gap starts there.
        let heard = self.link.heard_at();
        let unix_now = self.wall.map(|w| w.unix_secs(heard.min(self.clock.now())));
        for sub in self.subs.iter_mut() {
            sub.catch_up.on_left_open(unix_now, &sub.memory);
            sub.state = SubState::Idle;
            sub.timer = None;
        }
        self.refusals.reset();
        self.timers.clear();
        self.scheduler.reset();
        self.outbox.on_socket_lost();
        self.auth.on_socket();
    }

    /// Whether REQs wait for authentication on each new socket.
    fn auth_first(&self) -> bool {
        self.declared.auth_required && self.config.authenticates
    }

    fn lose_socket(&mut self, reconnect_at: Option<Instant>, why: SocketLoss) {
        // Frames queued for the dead socket can no longer be sent.
        self.transmits.retain(|t| {
            matches!(
                t,
                Transmit::Open { .. } | Transmit::Close { .. } | Transmit::FetchInfo
            )
        });
        self.reset_for_socket();
        if self.config.gate_scope == GateScope::Connection {
            self.gate.reset();
        }
        self.events.push_back(Event::Disconnected {
            reconnect_at,
            why: Disconnect::Lost(why),
        });
    }

    /// Whether socket input tagged `epoch` is for the live socket; stale input is counted.
    fn live_socket(&mut self, epoch: Epoch) -> Result<bool, SocketError> {
        let live = self.link.check_epoch(epoch)?;
        if !live {
            self.stats.stale_socket += 1;
        }
        Ok(live)
    }

    /// [`RelaySession::live_socket`] for input that needs the socket open.
    fn open_socket(&mut self, epoch: Epoch) -> Result<bool, SocketError> {
        let open = self.link.check_open(epoch)?;
        if !open {
            self.stats.stale_socket += 1;
        }
        Ok(open)
    }

    /// Wall-clock seconds now, if the driver gave the wall clock.
    pub(super) fn unix_now(&self) -> Option<u64> {
        self.wall.map(|w| w.unix_secs(self.clock.now()))
    }

    /// The latest plausible `created_at`: wall clock plus tolerance, if known.
    fn latest_plausible(&self) -> Option<u64> {
        let tolerance = self.config.future_tolerance.as_secs();
        self.unix_now().map(|now| now.saturating_add(tolerance))
    }

    /// What a refusal of `id` means ([`Refusals::refuse`]), carried out. `id` has already
    /// left the open set. A cap refusal first teaches the scheduler the cap: the REQs of
    /// ours that were open ahead of the refused one.
    fn refuse(&mut self, now: Instant, id: SubscriptionId, class: Class, message: &str) {
        let Some(seq) = self.subs.get(id).map(|s| s.sent_seq) else {
            return;
        };
        let mut ahead = 0;
        if class == Class::Terminal(Terminal::TooManySubscriptions) {
            ahead = self
                .subs
                .iter()
                .filter(|s| s.state.is_open() && s.sent_seq < seq)
                .count();
            if let Some(max) = self.scheduler.learn_limit(ahead) {
                self.events.push_back(Event::SubscriptionLimit { max });
            }
        }
        let (refusals, mut env) = self.refusals();
        let verdict = refusals.refuse(now, id, class, ahead, &mut env);
        self.carry_out(id, verdict, message);
    }

    /// Send `id` again after a bounded backoff ([`Refusals::retry`]), or give it up.
    fn retry(&mut self, now: Instant, id: SubscriptionId, message: &str) {
        if self.subs.get(id).is_none() {
            return;
        }
        let (refusals, mut env) = self.refusals();
        let verdict = refusals.retry(now, id, &mut env);
        self.carry_out(id, verdict, message);
    }

    /// Do what a refusal's verdict says; `message` is the reason if `id` is given up.
    fn carry_out(&mut self, id: SubscriptionId, verdict: Verdict, message: &str) {
        let state = match verdict {
            Verdict::Surface => return self.surface(id, message.to_owned()),
            Verdict::Requeue => {
                self.enqueue(id);
                return self.tell_queued(id);
            }
            Verdict::Retry { at, attempt } => {
                self.events.push_back(Event::Retrying {
                    sub: id,
                    at,
                    attempt,
                });
                (SubState::Retrying, at)
            }
            Verdict::AwaitAuth { until } => (SubState::AwaitingAuth, until),
        };
        if let Some(sub) = self.subs.get_mut(id) {
            sub.state = state.0;
        }
        self.set_timer(id, Some(state.1));
    }

    /// `id`'s one timer fired: a retry falls due (unless the gate was extended meanwhile), a
    /// REQ went unanswered (EOSE timeout), a NIP-77 session went silent, or authentication
    /// did not come in time.
    fn fire_sub_timer(&mut self, now: Instant, id: SubscriptionId) {
        let Some(sub) = self.subs.get(id) else {
            return;
        };
        match sub.state {
            SubState::Retrying if self.gate.is_open(now) => {
                // The gate was extended after this retry was scheduled: wait it out too.
                let at = now.saturating_add(self.gate.remaining(now));
                self.set_timer(id, Some(at));
            }
            SubState::Retrying => self.enqueue(id),
            SubState::Pending if !sub.responded => {
                self.events.push_back(Event::EoseTimeout { sub: id });
                self.send_close(id);
                self.leave_open(id);
                let secs = self.config.eose_timeout.as_secs();
                self.retry(
                    now,
                    id,
                    &format!("eose-timeout: no answer to REQ within {secs}s"),
                );
            }
            SubState::Live if sub.catch_up.negotiating() => self.negentropy_timed_out(now, id),
            SubState::AwaitingAuth => {
                let secs = self.config.auth_timeout.as_secs();
                self.surface(
                    id,
                    format!("auth-required: not authenticated within {secs}s"),
                );
            }
            _ => {}
        }
    }

    /// The refusals with the parts of the session they act through, borrowed side by side.
    fn refusals(&mut self) -> (&mut Refusals, refusals::Env<'_>) {
        let env = refusals::Env {
            config: &self.config,
            gate: &mut self.gate,
            rng: &mut self.rng,
            events: &mut self.events,
        };
        (&mut self.refusals, env)
    }

    /// The scheduler with the parts of the session it acts through, borrowed side by side.
    fn scheduler(&mut self) -> (&mut Scheduler, scheduler::Env<'_>) {
        let catch_up = catch_up_ctx(
            &self.config,
            self.wall.map(|w| w.unix_secs(self.clock.now())),
            self.negentropy.usable(self.clock.now()),
            &self.declared,
        );
        let env = scheduler::Env {
            catch_up,
            sending: self.sending(),
            config: &self.config,
            max_subid: self.declared.max_subid_length,
            gate: &self.gate,
            subs: &mut self.subs,
            timers: &mut self.timers,
            transmits: &mut self.transmits,
            events: &mut self.events,
            stats: &mut self.stats,
        };
        (&mut self.scheduler, env)
    }

    /// Send queued REQs, paced and gated ([`Scheduler::pump`]).
    fn pump(&mut self, now: Instant) {
        let (scheduler, mut env) = self.scheduler();
        scheduler.pump(now, &mut env);
    }

    fn slot_available(&self) -> bool {
        self.scheduler.slot_available(self.config.max_subscriptions)
    }

    /// The outbox with the parts of the session it acts through, borrowed side by side.
    pub(super) fn outbox(&mut self) -> (&mut Outbox, Env<'_>) {
        let env = Env {
            config: &self.config,
            gate: &mut self.gate,
            rng: &mut self.rng,
            transmits: &mut self.transmits,
            events: &mut self.events,
            open: self.link.is_open(),
        };
        (&mut self.outbox, env)
    }
}

/// What a subscription's catch-up plans with: `None` when catch-up is off; NIP-77 only with
/// the wall clock (its window is anchored in wall-clock time) and a relay not known to refuse.
fn catch_up_ctx<'a>(
    config: &'a RelayConfig,
    unix_now: Option<u64>,
    negentropy_usable: bool,
    declared: &RelayInfo,
) -> Option<catch_up_plan::Ctx<'a>> {
    let config = config.catch_up.as_ref()?;
    Some(catch_up_plan::Ctx {
        config,
        unix_now,
        negentropy: config.negentropy && unix_now.is_some() && negentropy_usable,
        max_limit: declared.max_limit,
        max_message_length: declared.max_message_length,
    })
}

fn view(sub: &Subscription, refusals: &Refusals) -> SubscriptionView {
    SubscriptionView {
        id: sub.id,
        state: sub.state,
        retries: refusals.retries(sub.id),
        priority: sub.priority,
        timer: sub.timer,
    }
}

/// An upper bound on the bytes of `["REQ","<wire id>",<filter>,...]` as a catch-up sends it:
/// the longest wire id, and each filter twice (the live half and the window), the window's
/// with `since`, `until` and `limit`. (`filters_len` bytes of JSON in `count` filters; a
/// subscription's stored `[f1,f2]` text counts a few bytes more, which only makes the bound
/// safer.) A fetch batch is sized to the relay's limit separately.
pub(crate) fn req_frame_bound(filters_len: usize, count: usize) -> usize {
    const FRAME: usize = r#"["REQ","",]"#.len() + 25;
    const BOUND: usize = r#","since":18446744073709551615"#.len();
    FRAME + 2 * filters_len + count * (2 + 3 * BOUND)
}

fn invalid_event(error: crate::nostr::message::FrameError) -> Error {
    Error::InvalidEvent {
        detail: error.to_string(),
    }
}
