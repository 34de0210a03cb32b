//! [`RelayPool`]: many relays as one subscription, sans-IO like everything in the core.
//!
//! A pool is one [`RelaySession`] per relay — each keeps its own gate, backoff, learned
//! limits, auth and outbox — plus *logical subscriptions* that target a set of relays, each
//! relay with its own filters. The pool adds what a single session cannot know:
//!
//! - **Dedup** across relays: an event id reaches a logical subscription at most once,
//!   whichever relays send it (a bounded memory of ids); which relays had it is kept, bounded
//!   ([`RelayPool::seen_on`]). A duplicate whose bytes differ from the first copy is a
//!   conflict: dropped and counted for the relay that sent it.
//! - **An honest outcome**: per-relay EOSE, then exactly one [`PoolEvent::Complete`] per
//!   subscription — `Complete` when every targeted relay answered EOSE, else
//!   `Partial { missing }` naming each relay that gave up or missed the deadline.
//! - **No single point of failure**: a relay giving up on a subscription is reported for
//!   that relay ([`PoolEvent::RelayClosed`]); the subscription ends ([`PoolEvent::Ended`],
//!   once) only when no relay serves it any more.
//! - **Publish fan-out**: one outcome per relay and one aggregate.
//!
//! # Driving
//!
//! The same contract as a session, with the relay named: `handle_open(now, relay, epoch)`,
//! `handle_frame(now, relay, epoch, text)`, ...; [`RelayPool::poll_transmit`] yields
//! `(relay, Transmit)`; one [`RelayPool::poll_timeout`] for the whole pool. After every
//! input the pool drains the session it touched, so output is always in the pool's queues.
//!
//! # Scale
//!
//! No input scans every relay: relays live in a slab (an input is an index), each relay's
//! next deadline sits in one ordered index with the subscriptions' outcome deadlines, so
//! `poll_timeout` is a lookup and `handle_timeout` touches only the relays that are due.
//! Each subscription counts its relays that are waiting, answered and serving, so an EOSE
//! or a relay giving up is O(log n) too (`tether-bench`'s `pool` bench: 10 to 1 000 relays).
//!
//! # Bounds
//!
//! Relays are bounded by [`PoolConfig::max_relays`], logical subscriptions by
//! [`PoolConfig::max_subscriptions`], each one's dedup memory by
//! [`PoolConfig::dedup_capacity`] (the oldest id is forgotten first: a relay re-sending it
//! after that delivers it again) and each id's `seen_on` by [`PoolConfig::seen_on_max`];
//! [`RelayPool::dedup`] reports what a subscription's dedup memory holds.

mod checkpoint;
mod config;
mod dedup;
mod logical;
mod output;
mod pacing;
mod people;
mod publish;
mod verify;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::link::{Epoch, SocketError, SocketLoss};
use crate::nostr::message::EventId;
use crate::nostr::{
    ChallengeId, Error, Event, Filter, Priority, Rejection, RelayConfig, RelaySession,
    SubscriptionId, Transmit,
};
use crate::rng::Rng;
use crate::time::{Clock, Instant, WallClock};
use crate::timers::Timers;
use crate::wake::Wake;

pub use checkpoint::PoolCheckpoint;
pub use config::PoolConfig;
pub use dedup::DedupStats;
use dedup::Seen;
use logical::{Logical, Targets};
pub use output::{
    Missing, Outcome, PoolError, PoolEvent, PoolStats, PublishOutcome, RelayId, SubId,
};
pub use pacing::Handshakes;
use pacing::{Pace, Pacing};
pub use people::{
    split, RouteReport, LIST_WAIT, MAX_PUBLISHES, MAX_TAGGED, RELAY_DISCOVERY_KIND, REROUTE_DELAY,
    ROUTER_WINDOW,
};
use publish::Fanout;
use verify::{Held, OtherCopy};
pub use verify::{VerifyRequest, VerifyTicket};

/// The sans-IO relay pool. See the [module docs](self).
#[derive(Debug)]
pub struct RelayPool {
    config: PoolConfig,
    /// `config.relay`, shared by every relay's session.
    relay_config: Arc<RelayConfig>,
    clock: Clock,
    rng: Rng,
    wall: Option<WallClock>,
    /// Boxed: a slot is a pointer, so the vector's growth slack (up to half its length) costs
    /// 8 bytes a slot, not a whole session's.
    relays: Vec<Option<Box<Member>>>,
    free: Vec<u32>,
    /// Per slot, the last epoch its removed relay's session handed out: a relay later given
    /// the slot starts after it, so a host's input still in flight for the old sockets is
    /// ignored as let go, never taken for the new relay's.
    retired_epochs: BTreeMap<u32, Epoch>,
    /// Relays by their normalised URL: one identity, whoever added them.
    by_url: BTreeMap<String, RelayId>,
    subs: BTreeMap<SubId, Logical>,
    next_sub: u64,
    publishes: BTreeMap<EventId, Fanout>,
    timers: Timers<Deadline>,
    transmits: VecDeque<(RelayId, Transmit)>,
    events: VecDeque<PoolEvent>,
    held: Held,
    pacing: Pacing,
    /// Routing by people, once a subscription asked for it.
    routing: Option<Box<people::Routing>>,
    /// The application is suspended / the device is offline, as the lifecycle said: a relay
    /// added meanwhile starts offline, and routing waits.
    suspended: bool,
    offline: bool,
}

/// One relay of the pool.
#[derive(Debug)]
struct Member {
    session: RelaySession,
    /// Its session's next deadline, as registered in the pool's index.
    deadline: Option<Instant>,
    /// Which logical subscription each of its session's subscriptions serves.
    routes: BTreeMap<SubscriptionId, SubId>,
    stats: PoolStats,
    /// Its place in the connect pacing.
    pace: Pace,
    /// Its URL, normalised, when the pool was given one (routing's relays, and the
    /// application's added with [`RelayPool::add_relay_url`]): one relay per URL.
    url: Option<String>,
    /// The application added it: routing may ask it about people, never closes it.
    app: bool,
}

impl Member {
    /// A member around `session`, whose connection attempts the pool paces.
    fn new(mut session: RelaySession, routes: BTreeMap<SubscriptionId, SubId>) -> Self {
        session.set_paced(true);
        Member {
            session,
            deadline: None,
            routes,
            stats: PoolStats::default(),
            pace: Pace::Free,
            url: None,
            app: true,
        }
    }
}

/// What a deadline in the pool's index is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Deadline {
    Relay(RelayId),
    Outcome(SubId),
    Publish(EventId),
    Reroute,
}

impl RelayPool {
    /// The latest `now` an input carried: what the relative times of the lines of its
    /// outputs ([`line`](crate::line)) are measured from.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// An empty pool; `seed` determines every relay session's jitter.
    #[must_use]
    pub fn new(config: PoolConfig, seed: u64) -> Self {
        RelayPool {
            relay_config: Arc::new(config.relay.clone()),
            pacing: Pacing::new(config.max_connecting),
            config,
            clock: Clock::default(),
            rng: Rng::new(seed),
            wall: None,
            relays: Vec::new(),
            free: Vec::new(),
            retired_epochs: BTreeMap::new(),
            by_url: BTreeMap::new(),
            subs: BTreeMap::new(),
            next_sub: 0,
            publishes: BTreeMap::new(),
            timers: Timers::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            held: Held::default(),
            routing: None,
            suspended: false,
            offline: false,
        }
    }

    // ----- inputs from the application ------------------------------------------------------

    /// The wall clock read `unix_secs` at `now`; passed to every relay session (see
    /// [`RelaySession::set_wall_clock`]): one relay's future-dated events never move another
    /// relay's `since`, because each session keeps its own catch-up.
    pub fn set_wall_clock(&mut self, now: Instant, unix_secs: u64) {
        let now = self.clock.observe(now);
        self.wall = Some(WallClock::new(now, unix_secs));
        for member in self.relays.iter_mut().flatten() {
            member.session.set_wall_clock(now, unix_secs);
        }
        if let Some(routing) = self.routing.as_deref_mut() {
            routing.router.set_wall_clock(now, unix_secs);
        }
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

    /// The application is suspended: every relay's clocks stop (see
    /// [`RelaySession::suspend`]). The pool's own outcome deadlines keep running: an
    /// outcome is the application's question, answered as soon as it can be.
    pub fn suspend(&mut self, now: Instant) {
        self.suspended = true;
        self.each_relay(now, |session, now| session.suspend(now));
    }

    /// The application is back: every relay's deadlines move by the time away and every open
    /// socket is probed (see [`RelaySession::resume`]).
    pub fn resume(&mut self, now: Instant) {
        self.suspended = false;
        self.each_relay(now, |session, now| session.resume(now));
        let now = self.clock.now();
        self.restart_answer_waits(now);
        self.schedule_reroute(now);
    }

    /// The network path changed, for every relay (see [`RelaySession::network_changed`]).
    pub fn network_changed(&mut self, now: Instant, old_path_gone: bool) {
        self.each_relay(now, |session, now| {
            session.network_changed(now, old_path_gone);
        });
    }

    /// The device has or has lost the network, for every relay (see
    /// [`RelaySession::set_online`]).
    pub fn set_online(&mut self, now: Instant, online: bool) {
        self.offline = !online;
        self.each_relay(now, |session, now| session.set_online(now, online));
        if online {
            let now = self.clock.now();
            self.restart_answer_waits(now);
            self.schedule_reroute(now);
        }
    }

    /// Back from away: relays routing still waits an answer from get their whole deadline
    /// from now. Time away is not a relay's silence and must not spend its retry budget.
    fn restart_answer_waits(&mut self, now: Instant) {
        if let Some(routing) = self.routing.as_deref_mut() {
            routing.router.restart_answer_waits(now);
        }
    }

    /// Whether the application is suspended or the device offline.
    fn away(&self) -> bool {
        self.suspended || self.offline
    }

    /// Apply `input` to every relay's session and take what each produced.
    fn each_relay(&mut self, now: Instant, input: impl Fn(&mut RelaySession, Instant)) {
        let now = self.clock.observe(now);
        let ids: Vec<RelayId> = self.relay_ids().collect();
        for relay in ids {
            if let Some(member) = self.member_mut(relay) {
                input(&mut member.session, now);
            }
            self.settle(now, relay);
        }
    }

    /// Add a relay and start connecting to it. Every subscription that targets all relays
    /// is registered on it at once; its REQs go out when it opens, paced and gated like a
    /// replay.
    ///
    /// # Errors
    /// [`PoolError::TooManyRelays`] past `max_relays`.
    pub fn add_relay(&mut self, now: Instant) -> Result<RelayId, PoolError> {
        let now = self.clock.observe(now);
        self.add_member(now, true, None)
    }

    /// Add the relay at `url` (normalised by the same rule as relay lists' URLs, up to
    /// [`MAX_APPLICATION_URL_LEN`](crate::router::relay_url::MAX_APPLICATION_URL_LEN)), or find
    /// the one the pool holds there already: a URL is one relay and one socket, whether the
    /// application or routing by people added it first. A relay routing opened becomes the
    /// application's: it serves the subscriptions on every relay too, and routing no longer
    /// closes it. Its URL is [`RelayPool::relay_url`].
    ///
    /// # Errors
    /// [`PoolError::InvalidUrl`], [`PoolError::TooManyRelays`].
    pub fn add_relay_url(&mut self, now: Instant, url: &str) -> Result<RelayId, PoolError> {
        let now = self.clock.observe(now);
        let url = crate::router::relay_url::normalize_application(url)
            .map_err(|_| PoolError::InvalidUrl(url.to_owned()))?;
        if let Some(&relay) = self.by_url.get(&url) {
            let adopted = self
                .member_mut(relay)
                .is_some_and(|m| !std::mem::replace(&mut m.app, true));
            if adopted {
                self.serve_everywhere(now, relay);
            }
            return Ok(relay);
        }
        self.add_member(now, true, Some(url))
    }

    /// Name `relay`'s URL where the pool holds it without one: an application's relay after
    /// [`RelayPool::restore`] (a checkpoint never saves an application's URL, which may carry
    /// credentials), or one added with [`RelayPool::add_relay`]. From then on it is the one
    /// relay at that URL, as if added with [`RelayPool::add_relay_url`]: routing by people
    /// asks it on its socket rather than opening a second. Naming a relay by the URL it has
    /// is nothing.
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`]; [`PoolError::InvalidUrl`]; [`PoolError::UrlInUse`] when
    /// `relay` has another URL, or another relay has this one.
    pub fn name_relay(&mut self, relay: RelayId, url: &str) -> Result<(), PoolError> {
        let normal = crate::router::relay_url::normalize_application(url)
            .map_err(|_| PoolError::InvalidUrl(url.to_owned()))?;
        let Some(member) = self.member(relay) else {
            return Err(PoolError::UnknownRelay(relay));
        };
        if member.url.as_deref() == Some(normal.as_str()) {
            return Ok(());
        }
        if let Some(own) = &member.url {
            return Err(PoolError::UrlInUse {
                url: own.clone(),
                relay,
            });
        }
        if let Some(holder) = self.relay_at(&normal) {
            return Err(PoolError::UrlInUse {
                url: normal,
                relay: holder,
            });
        }
        self.by_url.insert(normal.clone(), relay);
        if let Some(member) = self.member_mut(relay) {
            member.url = Some(normal);
        }
        Ok(())
    }

    /// The relay the pool holds at `url` (normalised), if any.
    fn relay_at(&self, url: &str) -> Option<RelayId> {
        self.by_url.get(url).copied()
    }

    /// Register every subscription on all relays on `relay`.
    fn serve_everywhere(&mut self, now: Instant, relay: RelayId) {
        let everywhere: Vec<(SubId, Vec<Filter>)> = self
            .subs
            .iter()
            .filter_map(|(&id, l)| match &l.targets {
                Targets::All(filters) => Some((id, filters.clone())),
                _ => None,
            })
            .collect();
        for (sub, filters) in everywhere {
            self.open_on(now, sub, relay, filters);
        }
        self.settle(now, relay);
    }

    /// Add a relay, at `url` if it has one (one relay per URL); with `everywhere`, every
    /// subscription on all relays is registered on it (routing's relays serve routed
    /// subscriptions only). Named before it connects, so its open names its URL.
    fn add_member(
        &mut self,
        now: Instant,
        everywhere: bool,
        url: Option<String>,
    ) -> Result<RelayId, PoolError> {
        if self.relay_count() >= self.config.max_relays {
            return Err(PoolError::TooManyRelays {
                max: self.config.max_relays,
            });
        }
        let mut session =
            RelaySession::with_shared_config(Arc::clone(&self.relay_config), self.rng.next_u64());
        if let Some(wall) = self.wall {
            session.set_wall_clock(now, wall.unix_secs(now));
        }
        if self.offline {
            // Wanted, but not attempted until the network is back.
            session.set_online(now, false);
        }
        let mut member = Member::new(session, BTreeMap::new());
        member.app = everywhere;
        member.url.clone_from(&url);
        let relay = match self.free.pop() {
            Some(slot) => {
                if let Some(&past) = self.retired_epochs.get(&slot) {
                    member.session.start_epochs_after(past);
                }
                self.relays[slot as usize] = Some(Box::new(member));
                RelayId(slot)
            }
            None => {
                self.relays.push(Some(Box::new(member)));
                RelayId(u32::try_from(self.relays.len() - 1).unwrap_or(u32::MAX))
            }
        };
        if let Some(url) = url {
            self.by_url.insert(url, relay);
        }
        let everywhere: Vec<SubId> = self
            .subs
            .iter()
            .filter(|(_, l)| everywhere && matches!(l.targets, Targets::All(_)))
            .map(|(&id, _)| id)
            .collect();
        for sub in everywhere {
            let Some(Targets::All(filters)) = self.subs.get(&sub).map(|l| l.targets.clone()) else {
                continue;
            };
            self.open_on(now, sub, relay, filters);
        }
        if let Some(member) = self.member_mut(relay) {
            member.session.connect(now);
        }
        self.settle(now, relay);
        Ok(relay)
    }

    /// Remove a relay: its socket is closed, and every subscription it served counts it as
    /// missing (or ends, if it was the last relay serving it). Its id may be handed to a
    /// relay added later, whose session counts socket epochs from the start again: the
    /// driver must not pass on anything the removed relay's socket still delivers.
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`].
    pub fn remove_relay(&mut self, now: Instant, relay: RelayId) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        let Some(mut member) = self.relays.get_mut(relay.0 as usize).and_then(Option::take) else {
            return Err(PoolError::UnknownRelay(relay));
        };
        member.session.disconnect(now);
        while let Some(t) = member.session.poll_transmit() {
            self.transmits.push_back((relay, t));
        }
        // The host hears that the socket it asked to close is closed, as a session's host
        // does; what the session says about its subscriptions ends with them below.
        while let Some(event) = member.session.poll_event() {
            if matches!(event, Event::Disconnected { .. }) {
                self.events.push_back(PoolEvent::Relay {
                    relay,
                    sub: None,
                    event,
                });
            }
        }
        self.pacing.forget(relay, member.pace);
        if let Some(at) = member.deadline {
            let mut slot = Some(at);
            self.timers.set(Deadline::Relay(relay), &mut slot, None);
        }
        if let Some(url) = member.url.take() {
            self.by_url.remove(&url);
        }
        self.people_relay_removed(now, relay);
        self.free.push(relay.0);
        self.retired_epochs
            .insert(relay.0, member.session.link().epoch());
        let served: Vec<SubId> = member.routes.values().copied().collect();
        for sub in served {
            self.relay_gone(sub, relay, Missing::Removed);
        }
        self.publish_gone(relay, "relay removed");
        self.admit_waiting(now);
        Ok(())
    }

    /// Subscribe on every relay, present and future, with the same `filters`.
    ///
    /// # Errors
    /// [`PoolError::TooManySubscriptions`], or [`PoolError::Session`] for invalid filters.
    pub fn subscribe(&mut self, now: Instant, filters: Vec<Filter>) -> Result<SubId, PoolError> {
        let now = self.clock.observe(now);
        if filters.is_empty() {
            return Err(PoolError::Session(Error::NoFilters));
        }
        let relays: Vec<RelayId> = self
            .relay_ids()
            .filter(|r| self.opened_url(*r).is_none())
            .collect();
        let routing: Vec<(RelayId, Vec<Filter>)> =
            relays.into_iter().map(|r| (r, filters.clone())).collect();
        self.register(now, Targets::All(filters), routing)
    }

    /// Subscribe on the given relays, each with its own filters (an outbox / NIP-65 router
    /// decides the routing). Relays added later are not targeted. A relay named more than
    /// once gets one subscription with all of its filters, in the order given (a REQ's
    /// filters are alternatives, so it matches what the separate entries would).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`], [`PoolError::TooManySubscriptions`], or
    /// [`PoolError::Session`] for invalid filters.
    pub fn subscribe_routed(
        &mut self,
        now: Instant,
        routing: Vec<(RelayId, Vec<Filter>)>,
    ) -> Result<SubId, PoolError> {
        let now = self.clock.observe(now);
        if let Some((relay, _)) = routing.iter().find(|(r, _)| self.member(*r).is_none()) {
            return Err(PoolError::UnknownRelay(*relay));
        }
        if routing.iter().any(|(_, f)| f.is_empty()) {
            return Err(PoolError::Session(Error::NoFilters));
        }
        // One session subscription per relay: the logical subscription tracks each relay
        // once, so a second entry for a relay would open a subscription it never hears of.
        let mut merged: Vec<(RelayId, Vec<Filter>)> = Vec::with_capacity(routing.len());
        let mut at: BTreeMap<RelayId, usize> = BTreeMap::new();
        for (relay, filters) in routing {
            match at.get(&relay) {
                Some(&i) => merged[i].1.extend(filters),
                None => {
                    at.insert(relay, merged.len());
                    merged.push((relay, filters));
                }
            }
        }
        self.register(now, Targets::Routed, merged)
    }

    /// Drop a logical subscription on every relay (CLOSE where its REQ is open). No
    /// outcome follows it.
    ///
    /// # Errors
    /// [`PoolError::UnknownSubscription`].
    pub fn unsubscribe(&mut self, now: Instant, sub: SubId) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        let Some(logical) = self.subs.remove(&sub) else {
            return Err(PoolError::UnknownSubscription(sub));
        };
        self.cancel_outcome_timer(sub, logical.deadline);
        self.held.drop_sub(sub);
        self.people_unsubscribe(now, sub);
        for &relay in logical.relays.keys() {
            if let Some(member) = self.member_mut(relay) {
                for local in logical.reqs(relay) {
                    member.routes.remove(&local);
                    let _ = member.session.unsubscribe(now, local);
                }
            }
            self.settle(now, relay);
        }
        Ok(())
    }

    /// Answer `relay`'s NIP-42 challenge (see [`RelaySession::authenticate`]).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`], or the session's refusal.
    pub fn authenticate(
        &mut self,
        now: Instant,
        relay: RelayId,
        challenge: ChallengeId,
        signed_event_json: &str,
    ) -> Result<EventId, PoolError> {
        let now = self.clock.observe(now);
        let member = self
            .member_mut(relay)
            .ok_or(PoolError::UnknownRelay(relay))?;
        let result = member
            .session
            .authenticate(now, challenge, signed_event_json)
            .map_err(PoolError::Session);
        self.settle(now, relay);
        result
    }

    // ----- inputs from the sockets ------------------------------------------------------------

    /// `relay`'s socket of `epoch` opened (see [`RelaySession::handle_open`]).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`] or the session's [`SocketError`].
    pub fn handle_open(
        &mut self,
        now: Instant,
        relay: RelayId,
        epoch: Epoch,
    ) -> Result<(), PoolError> {
        self.socket(now, relay, |s, now| s.handle_open(now, epoch))
    }

    /// `relay`'s socket of `epoch` closed or failed (see [`RelaySession::handle_close`]).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`] or the session's [`SocketError`].
    pub fn handle_close(
        &mut self,
        now: Instant,
        relay: RelayId,
        epoch: Epoch,
        why: SocketLoss,
    ) -> Result<(), PoolError> {
        self.socket(now, relay, |s, now| s.handle_close(now, epoch, why))
    }

    /// A text frame from `relay` (see [`RelaySession::handle_frame`]).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`] or the session's [`SocketError`].
    pub fn handle_frame(
        &mut self,
        now: Instant,
        relay: RelayId,
        epoch: Epoch,
        text: &str,
    ) -> Result<(), PoolError> {
        self.socket(now, relay, |s, now| s.handle_frame(now, epoch, text))
    }

    /// A binary frame from `relay` (see [`RelaySession::handle_binary`]).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`] or the session's [`SocketError`].
    pub fn handle_binary(
        &mut self,
        now: Instant,
        relay: RelayId,
        epoch: Epoch,
        len: usize,
    ) -> Result<(), PoolError> {
        self.socket(now, relay, |s, now| s.handle_binary(now, epoch, len))
    }

    /// A pong from `relay` (see [`RelaySession::handle_pong`]).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`] or the session's [`SocketError`].
    pub fn handle_pong(
        &mut self,
        now: Instant,
        relay: RelayId,
        epoch: Epoch,
    ) -> Result<(), PoolError> {
        self.socket(now, relay, |s, now| s.handle_pong(now, epoch))
    }

    /// The driver stopped or resumed reading `relay`'s socket (backpressure).
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`].
    pub fn handle_read_paused(
        &mut self,
        now: Instant,
        relay: RelayId,
        paused: bool,
    ) -> Result<(), PoolError> {
        self.socket(now, relay, |s, now| {
            s.handle_read_paused(now, paused);
            Ok(())
        })
    }

    /// `relay`'s NIP-11 document declares `info`: see [`RelaySession::apply_relay_info`].
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`].
    pub fn apply_relay_info(
        &mut self,
        now: Instant,
        relay: RelayId,
        info: &crate::nostr::RelayInfo,
    ) -> Result<crate::nostr::Applied, PoolError> {
        let mut applied = None;
        self.socket(now, relay, |s, now| {
            applied = Some(s.apply_relay_info(now, info));
            Ok(())
        })?;
        applied.ok_or(PoolError::UnknownRelay(relay))
    }

    /// Time has passed: fire what is due at `now` — only the relays and subscriptions whose
    /// deadline it is.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while let Some(due) = self.timers.due(now) {
            match due {
                Deadline::Relay(relay) => {
                    let Some(member) = self.member_mut(relay) else {
                        continue;
                    };
                    let mut slot = member.deadline.take();
                    self.timers.set(due, &mut slot, None);
                    if let Some(member) = self.member_mut(relay) {
                        member.session.handle_timeout(now);
                    }
                    self.settle(now, relay);
                }
                Deadline::Outcome(sub) => {
                    let Some(logical) = self.subs.get_mut(&sub) else {
                        continue;
                    };
                    let mut slot = logical.deadline.take();
                    self.timers.set(due, &mut slot, None);
                    self.report_outcome(sub, true);
                }
                Deadline::Reroute => self.reroute(now),
                Deadline::Publish(id) => {
                    let Some(fanout) = self.publishes.get_mut(&id) else {
                        continue;
                    };
                    let mut slot = fanout.deadline.take();
                    self.timers.set(due, &mut slot, None);
                    self.expire_publish(id);
                }
            }
        }
    }

    // ----- outputs ------------------------------------------------------------------------------

    /// The next instruction for one relay's socket.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(RelayId, Transmit)> {
        self.transmits.pop_front()
    }

    /// The next thing the application should hear.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<PoolEvent> {
        self.events.pop_front()
    }

    /// The next event copy to verify ([`PoolConfig::verify`]); answer each with
    /// [`RelayPool::handle_verified`], in any order.
    #[must_use]
    pub fn poll_verify(&mut self) -> Option<VerifyRequest> {
        self.held.poll_request()
    }

    /// The driver's verdict on a [`VerifyRequest`]: `Ok` delivers the event (in its
    /// subscription's order), `Err(reason)` drops it, counts it against the relay that sent
    /// it ([`PoolStats::invalid`]) and reports [`PoolEvent::Invalid`].
    ///
    /// # Errors
    /// [`PoolError::UnknownTicket`] for a ticket not awaited: its subscription was dropped
    /// (harmless) or the driver answered twice.
    pub fn handle_verified(
        &mut self,
        now: Instant,
        ticket: VerifyTicket,
        verdict: Result<(), String>,
    ) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        let resolved = self
            .held
            .verdict(ticket, verdict.is_ok())
            .ok_or(PoolError::UnknownTicket(ticket))?;
        let sub = match resolved {
            Ok((sub, id, conflict)) => {
                if let Some(logical) = self.subs.get_mut(&sub) {
                    logical.seen.confirm(id);
                }
                if let Some(relay) = conflict {
                    self.count(relay, |s| s.conflicts += 1);
                }
                sub
            }
            Err(failed) => {
                let reason = verdict.err().unwrap_or_default();
                self.verification_failed(failed, reason)
            }
        };
        if self.is_lists(sub) {
            let mut heard = VecDeque::new();
            self.held.release(sub, &mut heard);
            for event in heard {
                self.lists_heard(now, event);
            }
        } else {
            self.held.release(sub, &mut self.events);
        }
        Ok(())
    }

    /// Copies handed out for verification and not yet answered, plus those still to hand out.
    #[must_use]
    pub fn unverified(&self) -> usize {
        self.held.waiting()
    }

    /// When to call [`RelayPool::handle_timeout`]: the last `now` while output is queued,
    /// else the earliest deadline of any relay or subscription.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.output_queued() {
            return Some(self.clock.now());
        }
        self.timers.next()
    }

    /// [`RelayPool::poll_timeout`] with what it is for: a relay's own reason when the
    /// earliest deadline is a relay session's, [`Wake::Outcome`] or
    /// [`Wake::PublishOutcome`] for the pool's own.
    #[must_use]
    pub fn poll_wake(&self) -> Option<(Instant, Wake)> {
        if self.output_queued() {
            return Some((self.clock.now(), Wake::Output));
        }
        let (at, deadline) = self.timers.first()?;
        let why = match deadline {
            Deadline::Relay(relay) => self
                .member(relay)
                .and_then(|m| m.session.poll_wake())
                .map_or(Wake::Output, |(_, why)| why),
            Deadline::Outcome(_) => Wake::Outcome,
            Deadline::Publish(_) => Wake::PublishOutcome,
            Deadline::Reroute => Wake::Reroute,
        };
        Some((at, why))
    }

    /// Handshakes in flight and relays waiting for a slot (see
    /// [`PoolConfig::max_connecting`]).
    #[must_use]
    pub fn handshakes(&self) -> Handshakes {
        self.pacing.handshakes()
    }

    /// Transmits, events or checks are waiting to be drained.
    fn output_queued(&self) -> bool {
        !self.transmits.is_empty() || !self.events.is_empty() || self.held.has_requests()
    }

    /// Turn the NIP-11 document asks on or off for every relay, present and future (see
    /// [`RelayConfig::info_refresh`](crate::nostr::RelayConfig::info_refresh)).
    pub fn set_info_refresh(&mut self, refresh: Option<Duration>) {
        self.config.relay.info_refresh = refresh;
        Arc::make_mut(&mut self.relay_config).info_refresh = refresh;
        for member in self.relays.iter_mut().flatten() {
            member
                .session
                .apply_info_refresh(refresh, Some(&self.relay_config));
        }
    }

    // ----- inspection ----------------------------------------------------------------------------

    /// One relay's session (its link, gate, limits, stats).
    #[must_use]
    pub fn session(&self, relay: RelayId) -> Option<&RelaySession> {
        self.member(relay).map(|m| &m.session)
    }

    /// What the pool counted for one relay: duplicates it sent, conflicting copies.
    #[must_use]
    pub fn relay_stats(&self, relay: RelayId) -> Option<PoolStats> {
        self.member(relay).map(|m| m.stats)
    }

    /// The relays that delivered `id` to `sub` (first one first), as far as remembered.
    #[must_use]
    pub fn seen_on(&self, sub: SubId, id: EventId) -> Option<&[RelayId]> {
        self.subs.get(&sub)?.seen.relays(id)
    }

    /// How much `sub`'s dedup memory holds, and how many ids it forgot at its bound.
    #[must_use]
    pub fn dedup(&self, sub: SubId) -> Option<DedupStats> {
        self.subs.get(&sub).map(|l| l.seen.stats())
    }

    /// Every relay in the pool, in id order.
    pub fn relay_ids(&self) -> impl Iterator<Item = RelayId> + '_ {
        self.relays
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_some())
            .map(|(i, _)| RelayId(u32::try_from(i).unwrap_or(u32::MAX)))
    }

    /// How many relays the pool holds.
    #[must_use]
    pub fn relay_count(&self) -> usize {
        self.relays.len() - self.free.len()
    }

    /// How many logical subscriptions are registered.
    #[must_use]
    pub fn subscription_count(&self) -> usize {
        self.subs.len()
    }

    /// The relays still serving `sub` (registered in their session).
    #[must_use]
    pub fn serving(&self, sub: SubId) -> Option<Vec<RelayId>> {
        let logical = self.subs.get(&sub)?;
        Some(
            logical
                .relays
                .keys()
                .filter(|&&r| logical.reqs(r).next().is_some())
                .copied()
                .collect(),
        )
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// The pool's own bookkeeping agrees with itself: every subscription's counters and
    /// dedup memory (each relay session has its own check).
    ///
    /// # Errors
    /// A description of the first disagreement.
    #[cfg(feature = "fuzzing")]
    pub fn check_consistency(&self) -> Result<(), String> {
        for (sub, logical) in &self.subs {
            logical
                .check_consistency()
                .map_err(|e| format!("{sub}: {e}"))?;
        }
        if let Some(routing) = self.routing.as_deref() {
            routing.check_consistency(|r| self.member(r).is_some())?;
        }
        let paces = self
            .relay_ids()
            .filter_map(|r| Some((r, self.member(r)?.pace)));
        self.pacing
            .check(paces)
            .map_err(|e| format!("connect pacing: {e}"))
    }
}

// ----- plumbing ---------------------------------------------------------------------------------

impl RelayPool {
    fn member(&self, relay: RelayId) -> Option<&Member> {
        self.relays.get(relay.0 as usize).and_then(Option::as_deref)
    }

    fn member_mut(&mut self, relay: RelayId) -> Option<&mut Member> {
        member_in(&mut self.relays, relay)
    }

    fn socket(
        &mut self,
        now: Instant,
        relay: RelayId,
        input: impl FnOnce(&mut RelaySession, Instant) -> Result<(), SocketError>,
    ) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        let member = self
            .member_mut(relay)
            .ok_or(PoolError::UnknownRelay(relay))?;
        let result = input(&mut member.session, now).map_err(PoolError::Socket);
        self.settle(now, relay);
        result
    }

    fn register(
        &mut self,
        now: Instant,
        targets: Targets,
        routing: Vec<(RelayId, Vec<Filter>)>,
    ) -> Result<SubId, PoolError> {
        let sub = self.new_logical(now, None, targets)?;
        for (relay, filters) in routing {
            self.open_on(now, sub, relay, filters);
        }
        // A subscription with no relay at all (an empty pool) has nothing to wait for.
        self.report_outcome(sub, false);
        Ok(sub)
    }

    /// A new logical subscription (`id`, or the next one) with its outcome due after
    /// `eose_deadline`.
    fn new_logical(
        &mut self,
        now: Instant,
        id: Option<SubId>,
        targets: Targets,
    ) -> Result<SubId, PoolError> {
        if self.subs.len() >= self.config.max_subscriptions {
            return Err(PoolError::TooManySubscriptions {
                max: self.config.max_subscriptions,
            });
        }
        let sub = id.unwrap_or(SubId(self.next_sub + 1));
        self.next_sub = self.next_sub.max(sub.0);
        let mut logical = Logical::new(
            targets,
            Seen::new(self.config.dedup_capacity, self.config.seen_on_max),
        );
        let at = now.saturating_add(self.config.eose_deadline);
        self.timers
            .set(Deadline::Outcome(sub), &mut logical.deadline, Some(at));
        self.subs.insert(sub, logical);
        Ok(sub)
    }

    /// `sub`'s outcome is reported (or owed to no one): never again, and its deadline is off.
    fn outcome_reported(&mut self, sub: SubId) {
        if let Some(logical) = self.subs.get_mut(&sub) {
            logical.mark_reported();
            let slot = logical.deadline.take();
            self.cancel_outcome_timer(sub, slot);
        }
    }

    /// Register `sub` on `relay`'s session with `filters`.
    fn open_on(&mut self, now: Instant, sub: SubId, relay: RelayId, filters: Vec<Filter>) {
        let Some(member) = self.member_mut(relay) else {
            return;
        };
        let result = member.session.subscribe(now, filters, Priority::NORMAL);
        let local = match result {
            Ok(local) => {
                member.routes.insert(local, sub);
                Some(local)
            }
            Err(_) => None,
        };
        if let Some(logical) = self.subs.get_mut(&sub) {
            logical.add_relay(relay, local);
        }
        match result {
            Ok(_) => self.settle(now, relay),
            Err(e) => self.relay_gone(sub, relay, Missing::Refused(e.to_string())),
        }
    }

    /// Drain `relay`'s session and re-register its deadline, then admit waiting relays
    /// while handshake slots are free.
    fn settle(&mut self, now: Instant, relay: RelayId) {
        self.drain_relay(now, relay);
        self.admit_waiting(now);
    }

    /// Give free handshake slots to waiting relays, first come, first served.
    fn admit_waiting(&mut self, now: Instant) {
        while let Some(relay) = self.pacing.next() {
            let Some(member) = member_in(&mut self.relays, relay) else {
                continue;
            };
            member.pace = Pace::Free;
            member.session.admit(now);
            if member.session.link().is_connecting() {
                self.pacing.admitted(&mut member.pace);
            }
            self.drain_relay(now, relay);
        }
    }

    /// Drain `relay`'s session, account for its handshake and re-register its deadline in
    /// the pool's index.
    fn drain_relay(&mut self, now: Instant, relay: RelayId) {
        loop {
            let Some(member) = self.member_mut(relay) else {
                return;
            };
            if let Some(mut t) = member.session.poll_transmit() {
                // The pool owns its relays' URLs: an open of a relay it chose itself names
                // where to dial, so no driver has to ask back.
                if let Transmit::Open { url, .. } = &mut t {
                    if !member.app {
                        url.clone_from(&member.url);
                    }
                }
                self.transmits.push_back((relay, t));
                continue;
            }
            let Some(event) = member.session.poll_event() else {
                break;
            };
            self.on_session_event(now, relay, event);
        }
        let Some(member) = member_in(&mut self.relays, relay) else {
            return;
        };
        self.pacing
            .observe(relay, &mut member.pace, member.session.link());
        let next = member.session.poll_timeout();
        let mut slot = member.deadline.take();
        self.timers.set(Deadline::Relay(relay), &mut slot, next);
        if let Some(member) = self.member_mut(relay) {
            member.deadline = slot;
        }
    }

    fn on_session_event(&mut self, now: Instant, relay: RelayId, event: Event) {
        let route = |pool: &Self, local: SubscriptionId| {
            pool.member(relay)
                .and_then(|m| m.routes.get(&local).copied())
        };
        match event {
            Event::Received { sub, id, raw } => {
                let Some(logical_id) = route(self, sub) else {
                    return;
                };
                if self.is_by_people(logical_id) && !self.people_admit(logical_id, relay, &raw) {
                    return;
                }
                self.deliver(logical_id, relay, id, raw);
            }
            Event::Eose { sub: local } => {
                let Some(sub) = route(self, local) else {
                    return;
                };
                if self.is_by_people(sub) && self.people_eose(now, relay, local, sub) {
                    return;
                }
                let answered = self.subs.get_mut(&sub).and_then(|l| l.eose(relay, local));
                if let Some(first) = answered {
                    self.relay_answered(now, sub, relay, first);
                }
            }
            Event::Closed {
                sub: local,
                reason,
                attempts,
            } => {
                let Some(sub) = route(self, local) else {
                    return;
                };
                if let Some(member) = self.member_mut(relay) {
                    member.routes.remove(&local);
                }
                let why = Missing::Closed(reason.clone());
                let told = !self.is_by_people(sub)
                    || self.people_closed(now, relay, local, sub, &reason, attempts);
                if !told {
                    if let Some(logical) = self.subs.get_mut(&sub) {
                        logical.close_req(relay, local, Some(why));
                    }
                    return;
                }
                self.emit(
                    sub,
                    PoolEvent::RelayClosed {
                        sub,
                        relay,
                        reason,
                        attempts,
                    },
                );
                self.req_gone(now, sub, relay, local, Some(why));
            }
            Event::CaughtUp {
                sub,
                method,
                exact_since,
                recovered,
            } => {
                let Some(logical_id) = route(self, sub) else {
                    return;
                };
                self.emit(
                    logical_id,
                    PoolEvent::CaughtUp {
                        sub: logical_id,
                        relay,
                        method,
                        exact_since,
                        recovered,
                    },
                );
            }
            Event::Published { id } => self.publish_answer(id, relay, None),
            Event::Rejected { id, reason } => {
                self.publish_answer(id, relay, Some(rejection_text(&reason)));
            }
            other => {
                if self.routing.is_some() {
                    self.people_link(now, relay, &other);
                }
                let local = local_sub(&other);
                let sub = local.and_then(|local| route(self, local));
                if local.is_some() && sub.is_none() {
                    // About a subscription the pool no longer routes (unsubscribed while the
                    // session still spoke of it): no subscription of the application's to
                    // name, so a host would file it under the session's own id.
                    return;
                }
                self.events.push_back(PoolEvent::Relay {
                    relay,
                    sub,
                    event: other,
                });
            }
        }
    }

    fn deliver(&mut self, sub: SubId, relay: RelayId, id: EventId, raw: String) {
        // Relay lists steer every later REQ: the pool's list watch is verified always,
        // whatever `verify` says about notes.
        let verify = self.config.verify || (self.config.verify_lists && self.is_lists(sub));
        let Some(logical) = self.subs.get_mut(&sub) else {
            return;
        };
        // Under verification a new id is held only until its verdict (`Seen::confirm`).
        let admit = logical.seen.admit(id, &raw, relay, verify);
        if admit != dedup::Admit::New && verify {
            // Under verification the bytes themselves decide, not their summary.
            match self.held.other_copy(sub, id, relay, &raw) {
                Some(OtherCopy::Same) => return self.count(relay, |s| s.duplicates += 1),
                Some(OtherCopy::Kept) => return,
                Some(OtherCopy::Refused) => return self.count(relay, |s| s.conflicts += 1),
                None => {}
            }
        }
        match admit {
            dedup::Admit::New if verify => self.start_verifying(sub, relay, id, raw),
            dedup::Admit::New => self.emit(
                sub,
                PoolEvent::Received {
                    sub,
                    relay,
                    id,
                    raw,
                },
            ),
            dedup::Admit::Duplicate => self.count(relay, |s| s.duplicates += 1),
            dedup::Admit::Conflict => self.count(relay, |s| s.conflicts += 1),
        }
    }

    fn start_verifying(&mut self, sub: SubId, relay: RelayId, id: EventId, raw: String) {
        if self.held.waiting() >= self.config.max_unverified {
            if let Some(logical) = self.subs.get_mut(&sub) {
                logical.seen.forget(id);
            }
            return self.count(relay, |s| s.unverified_dropped += 1);
        }
        self.held.start(sub, relay, id, raw);
    }

    /// A copy failed: count it, tell the app, and verify the alternate copy if one came.
    fn verification_failed(&mut self, failed: verify::Failed, reason: String) -> SubId {
        let verify::Failed {
            sub,
            relay,
            id,
            alternate,
        } = failed;
        self.count(relay, |s| s.invalid += 1);
        self.events.push_back(PoolEvent::Invalid {
            sub,
            relay,
            id,
            reason,
        });
        if let Some(logical) = self.subs.get_mut(&sub) {
            match &alternate {
                // Its age stays that of the first copy: the alternate is delivered in its place.
                Some((other, raw)) => logical.seen.replace_copy(id, raw, *other),
                None => logical.seen.forget(id),
            }
        }
        // Even for a subscription that has ended meanwhile: its queue waits on this slot.
        if let Some((other, raw)) = alternate {
            self.held.restart(sub, other, id, raw);
        }
        sub
    }

    fn count(&mut self, relay: RelayId, bump: impl FnOnce(&mut PoolStats)) {
        if let Some(member) = self.member_mut(relay) {
            bump(&mut member.stats);
        }
    }

    /// What the pool says about one subscription, in order: behind anything of it still
    /// waiting for a verdict.
    fn emit(&mut self, sub: SubId, event: PoolEvent) {
        if self.held.holds(sub) {
            self.held.push(sub, event);
        } else if self.is_lists(sub) {
            let now = self.clock.now();
            self.lists_heard(now, event);
        } else {
            self.events.push_back(event);
        }
    }

    /// `relay` no longer serves `sub`: it is missing from the outcome, and the subscription
    /// ends if no relay serves it.
    fn relay_gone(&mut self, sub: SubId, relay: RelayId, why: Missing) {
        let Some(logical) = self.subs.get_mut(&sub) else {
            return;
        };
        logical.gone(relay, why);
        self.after_loss(sub);
    }

    /// REQ `local` of `sub` on `relay` no longer serves it: closed by the relay (`why`), or
    /// by the pool (`None`). The relay's other REQs may all have answered by now.
    fn req_gone(
        &mut self,
        now: Instant,
        sub: SubId,
        relay: RelayId,
        local: SubscriptionId,
        why: Option<Missing>,
    ) {
        let Some(logical) = self.subs.get_mut(&sub) else {
            return;
        };
        if let Some(first) = logical.close_req(relay, local, why) {
            return self.relay_answered(now, sub, relay, first);
        }
        self.after_loss(sub);
    }

    /// The outcome may be due, and the subscription ends if no relay serves it.
    fn after_loss(&mut self, sub: SubId) {
        self.report_outcome(sub, false);
        let Some(logical) = self.subs.get(&sub) else {
            return;
        };
        if !logical.served() {
            let reasons = logical.reasons();
            let deadline = logical.deadline;
            self.subs.remove(&sub);
            self.cancel_outcome_timer(sub, deadline);
            self.emit(sub, PoolEvent::Ended { sub, reasons });
        }
    }

    /// `relay` answered `sub` (every REQ there past EOSE; `first` of its relays): the
    /// application hears it, the outcome waits at most `after_first_eose` longer, and it
    /// is reported if no relay is still awaited.
    fn relay_answered(&mut self, now: Instant, sub: SubId, relay: RelayId, first: bool) {
        self.emit(sub, PoolEvent::Eose { sub, relay });
        let grace = self.config.after_first_eose;
        if let (true, Some(grace), Some(logical)) = (first, grace, self.subs.get_mut(&sub)) {
            let at = now.saturating_add(grace);
            if logical.deadline.is_none_or(|d| at < d) {
                self.timers
                    .set(Deadline::Outcome(sub), &mut logical.deadline, Some(at));
            }
        }
        self.report_outcome(sub, false);
    }

    /// Report `sub`'s outcome once: when every relay answered, or (`deadline`) when time is up.
    fn report_outcome(&mut self, sub: SubId, deadline: bool) {
        let Some(logical) = self.subs.get_mut(&sub) else {
            return;
        };
        let Some(outcome) = logical.outcome(deadline) else {
            return;
        };
        let slot = logical.deadline.take();
        self.cancel_outcome_timer(sub, slot);
        self.emit(sub, PoolEvent::Complete { sub, outcome });
    }

    fn cancel_outcome_timer(&mut self, sub: SubId, deadline: Option<Instant>) {
        let mut slot = deadline;
        self.timers.set(Deadline::Outcome(sub), &mut slot, None);
    }
}

/// The session subscription a per-relay event is about, if any.
/// `relay`'s member, borrowing only the relays (so the pacing can be updated beside it).
/// A relay's refusal of a publish, as the outcome names it.
fn rejection_text(reason: &Rejection) -> String {
    match reason {
        Rejection::Refused { message } => message.clone(),
        Rejection::TimedOut => "no OK in time".to_owned(),
        Rejection::TooLarge { len, max } => {
            format!("a {len}-byte frame exceeds the relay's max_message_length of {max}")
        }
    }
}

fn member_in(relays: &mut [Option<Box<Member>>], relay: RelayId) -> Option<&mut Member> {
    relays
        .get_mut(relay.0 as usize)
        .and_then(Option::as_deref_mut)
}

fn local_sub(event: &Event) -> Option<SubscriptionId> {
    match event {
        Event::Retrying { sub, .. } | Event::Queued { sub } | Event::EoseTimeout { sub } => {
            Some(*sub)
        }
        _ => None,
    }
}
