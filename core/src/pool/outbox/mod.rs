//! Subscriptions by people: the pool routes them with its [`Router`] and keeps them exact
//! while their routes move.
//!
//! [`RelayPool::subscribe_outbox`] takes one filter naming people: its `authors` (a follow
//! feed) or, with no `authors`, a single `#p` key (an inbox: the gift wraps for that user).
//! The pool then owns the relays: it fetches and watches the people's relay lists on the
//! indexers, asks the router where each person is, opens those relays (announced to the
//! driver by [`RelayPool::relay_url`]), and asks each relay about the people routed there,
//! cut to the relay's limits ([`split`]).
//!
//! # What keeps it exact
//! - **Each event once**: one dedup memory per subscription, across every relay and every
//!   route it ever had, as for any pool subscription.
//! - **Only what the filter asked**: an event is delivered only if it matches the
//!   subscription's filter ([`matches`]): a relay that ignores `#p` does not leak another
//!   user's wraps.
//! - **A route move loses nothing**: the pool remembers, per person, until when their
//!   events were served live (a relay holding them was open and past EOSE). A relay that
//!   takes a person over is asked from then, less the filter's lookback (two days and an
//!   hour for gift wraps, 2 minutes otherwise), without `limit`: the new relay's answer
//!   covers the gap, and dedup drops what was delivered already.
//! - **Learning from what arrives**: each delivered event and each EOSE is the router's
//!   evidence; failures, refusals and AUTH are its health input. Routing runs again a second
//!   after anything changed ([`REROUTE_DELAY`]) and whenever a relay's backoff ends.
//!
//! # Budget
//! Relays the pool opens for routing are at most the router's `max_relays` (indexers and
//! inbox relays included). They serve only routed subscriptions: a subscription made with
//! [`RelayPool::subscribe`] ("every relay") is not sent to them.

mod liveness;
mod matches;
mod publish;
pub mod split;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use serde_json::{Map, Value};

use super::dedup::Seen;
use super::logical::{Logical, Targets};
use super::router::{Coverage, Refusal, Role, Router, INBOX_KIND, OUTBOX_KIND};
use super::{Deadline, PoolError, PoolEvent, RelayId, RelayPool, SubId};
use crate::link::SocketLoss;
use crate::nostr::message::EventId;
use crate::nostr::reason::{self, Class};
use crate::nostr::Lookbacks;
use crate::nostr::{Disconnect, Error, Filter, Priority, SubscriptionId};
use crate::time::Instant;
use matches::Fields;
use split::Group;

pub use liveness::RELAY_DISCOVERY_KIND;
pub use publish::{LIST_WAIT, MAX_PUBLISHES, MAX_TAGGED};

/// How long after a change (a list, an EOSE, a failure) routing runs again (1 s): changes
/// that arrive together are routed once.
pub const REROUTE_DELAY: Duration = Duration::from_secs(1);
/// How long one run of the router lasts in a long-lived process (24 h): then its probe
/// budget is renewed ([`Router::new_window`]), so relays that appeared or came back are
/// found again.
pub const ROUTER_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// Catch-up starts of moved authors are rounded down to this (600 s), so one REQ asks many
/// moved authors from one `since`.
const SINCE_BUCKET: u64 = 600;
/// Most inbox relays asked per inbox (4): NIP-17 asks users to keep their list small.
const MAX_INBOX_RELAYS: usize = 4;
/// Lists EOSEs waiting behind verdicts at once (64): one per indexer REQ, so a few.
const MAX_LIST_ANSWERS: usize = 64;
/// How long a rate-limited relay is not asked again when it gives no `retry in Ns` (10 s,
/// the session gate's default window).
const DEFAULT_RATE_LIMIT: Duration = Duration::from_secs(10);

/// What routing gives one subscription, reported whenever it changes
/// ([`PoolEvent::Routed`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteReport {
    /// The relays asked, with their URLs.
    pub relays: Vec<(RelayId, String)>,
    /// Authors asked on relays their list declares or that delivered their events, with how
    /// many such relays.
    pub covered: Vec<(String, usize)>,
    /// Authors asked only on fallback relays (indexers, relays where content was found
    /// beyond the lists).
    pub fallback_only: Vec<String>,
    /// Authors asked on no relay: none of theirs is live, or the budget went to others.
    pub uncovered: Vec<String>,
}

/// The pool's routing state, present once the first routed subscription is made.
#[derive(Debug)]
pub(crate) struct Outbox {
    pub(crate) router: Router,
    /// The relays the pool opened for routing, both ways.
    by_url: BTreeMap<String, RelayId>,
    url_of: BTreeMap<RelayId, String>,
    /// Relays whose socket opened since their last connect: a loss then is a close, not a
    /// failure to connect.
    opened: BTreeSet<RelayId>,
    pub(crate) subs: BTreeMap<SubId, Routed>,
    /// The subscription watching relay lists on the indexers; its events are the router's.
    lists: Option<SubId>,
    /// When routing runs next (registered as [`Deadline::Reroute`]).
    pub(crate) reroute_at: Option<Instant>,
    lookbacks: Lookbacks,
    /// When the router's current run started.
    window_start: Instant,
    /// Publishes by outbox, waiting for lists or in flight.
    publishes: BTreeMap<EventId, publish::Held>,
    /// People the indexers answered a lists request about (bounded by `max_authors`).
    looked_up: BTreeSet<String>,
    /// Who each lists EOSE waiting in the verification queue asked about, in order.
    lists_answers: VecDeque<Vec<String>>,
}

/// One routed subscription.
#[derive(Debug)]
pub(crate) struct Routed {
    /// The user's filter: what every delivered event must match.
    pub(crate) filter: Map<String, Value>,
    /// The filter without the people: what each relay's REQs are built from.
    base: Map<String, Value>,
    want: Want,
    /// The filter's lookback, in seconds.
    lookback: u64,
    /// Per relay, the people asked there and the REQs asking them.
    placed: BTreeMap<RelayId, Placed>,
    /// Per person, the wall-clock second until which their events were served live.
    live: BTreeMap<String, u64>,
    /// After a restore: the checkpoint's wall-clock second, the catch-up start of everyone.
    pub(crate) restored_at: Option<u64>,
    report: Option<RouteReport>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Want {
    /// A feed: these authors.
    Feed(Vec<String>),
    /// An inbox: events p-tagging this key, on its DM relays.
    Inbox(String),
    /// Relay lists of everyone followed, on the indexers (the pool's own).
    Lists,
}

#[derive(Debug, Default)]
struct Placed {
    authors: BTreeSet<String>,
    chunks: BTreeMap<SubscriptionId, Chunk>,
    /// Its EOSE was reported (once every chunk answered).
    eosed: bool,
}

impl Placed {
    /// Whether every REQ on the relay is now past its EOSE for the first time: the relay's
    /// EOSE is reported then, once.
    fn answered(&mut self) -> bool {
        let first = !self.eosed && !self.chunks.is_empty() && self.chunks.values().all(|c| c.eosed);
        self.eosed |= first;
        first
    }
}

#[derive(Debug)]
struct Chunk {
    authors: Vec<String>,
    eosed: bool,
    /// Asked from a catch-up window, not the whole history: its silence is no miss.
    window: bool,
}

impl Outbox {
    /// Stop following those of `people` no feed subscription names.
    fn unfollow_unused(&mut self, people: &[String]) {
        let still: BTreeSet<&String> = self
            .subs
            .values()
            .filter_map(|r| match &r.want {
                Want::Feed(p) => Some(p.iter()),
                _ => None,
            })
            .flatten()
            .collect();
        for person in people.iter().filter(|p| !still.contains(p)) {
            self.router.unfollow(person);
        }
    }

    /// Routing's own promises: at most `max_relays` relays held, each a live member of the
    /// pool and named both ways, and every relay a subscription is placed on held.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn check_consistency(&self, member: impl Fn(RelayId) -> bool) -> Result<(), String> {
        let max = self.router.config().max_relays;
        if self.url_of.len() > max {
            return Err(format!(
                "routing holds {} relays, over its budget of {max}",
                self.url_of.len()
            ));
        }
        for (relay, url) in &self.url_of {
            if self.by_url.get(url) != Some(relay) || !member(*relay) {
                return Err(format!("routed {relay} ({url}) is not held both ways"));
            }
        }
        for (sub, routed) in &self.subs {
            if let Some(relay) = routed.placed.keys().find(|r| !self.url_of.contains_key(r)) {
                return Err(format!(
                    "{sub} is placed on {relay}, which routing does not hold"
                ));
            }
        }
        Ok(())
    }

    fn new(router: Router, lookbacks: Lookbacks) -> Self {
        Outbox {
            router,
            by_url: BTreeMap::new(),
            url_of: BTreeMap::new(),
            opened: BTreeSet::new(),
            subs: BTreeMap::new(),
            lists: None,
            reroute_at: None,
            lookbacks,
            window_start: Instant::ZERO,
            publishes: BTreeMap::new(),
            looked_up: BTreeSet::new(),
            lists_answers: VecDeque::new(),
        }
    }
}

impl RelayPool {
    /// Turn routing on with `router` ([`PoolConfig::router`](super::PoolConfig::router)'s
    /// on the first routed subscription): a router already running is kept.
    pub(crate) fn start_routing(&mut self, router: Option<Router>) {
        if self.outbox.is_none() {
            let mut router = router.unwrap_or_else(|| Router::new(self.config.router.clone()));
            if let Some(wall) = self.wall {
                let now = self.clock.now();
                router.set_wall_clock(now, wall.unix_secs(now));
            }
            let lookbacks = self
                .config
                .relay
                .catch_up
                .as_ref()
                .map_or_else(Lookbacks::default, |c| c.lookback.clone());
            let mut outbox = Outbox::new(router, lookbacks);
            outbox.window_start = self.clock.now();
            self.outbox = Some(Box::new(outbox));
        }
    }

    /// The router, once routing is on.
    #[must_use]
    pub fn router(&self) -> Option<&Router> {
        self.outbox.as_deref().map(|o| &o.router)
    }

    /// The URL of a relay the pool opened for routing: a driver opens its socket there
    /// (relays added with [`RelayPool::add_relay`] have no URL in the pool).
    #[must_use]
    pub fn relay_url(&self, relay: RelayId) -> Option<&str> {
        self.outbox
            .as_deref()?
            .url_of
            .get(&relay)
            .map(String::as_str)
    }

    /// What routing gives `sub` now (the last [`PoolEvent::Routed`]).
    #[must_use]
    pub fn route_report(&self, sub: SubId) -> Option<&RouteReport> {
        self.outbox.as_deref()?.subs.get(&sub)?.report.as_ref()
    }

    /// A relay list (kind 10002 or 10050) the application got elsewhere: the router reads
    /// it as one delivered by a relay. Routing runs again shortly if it changed anything.
    ///
    /// # Errors
    /// [`PoolError::Session`] with [`Error::InvalidEvent`] for an event that is no relay list.
    pub fn handle_relay_list(&mut self, now: Instant, event_json: &str) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        self.start_routing(None);
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return Ok(());
        };
        // The application gave it: it wants this person's relays known.
        if let Some(author) = serde_json::from_str::<Value>(event_json)
            .ok()
            .and_then(|v| v.get("pubkey")?.as_str().map(str::to_owned))
        {
            let _ = outbox.router.watch(&author);
        }
        match outbox.router.handle_list(now, event_json) {
            Ok(super::router::ListUpdate::Applied { .. }) => {
                self.schedule_reroute(now);
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(PoolError::Session(Error::InvalidEvent {
                detail: e.to_string(),
            })),
        }
    }

    /// Subscribe to people: `filter`'s `authors` (a feed), or with no `authors` its one `#p`
    /// key (an inbox). The pool finds their relays and keeps the subscription exact as its
    /// routes move: a relay that takes a person over is asked from when they were last
    /// served live, less the filter's lookback (49 h for gift wraps), with no `limit`, and
    /// an event that does not match `filter` is dropped (counted as
    /// [`PoolStats::unmatched`](super::PoolStats::unmatched)). Its events, EOSEs (one per relay, once
    /// all of that relay's REQs answered) and one outcome arrive as for any subscription,
    /// plus [`PoolEvent::Routed`] whenever routing changes.
    ///
    /// # Errors
    /// [`PoolError::Session`] for a filter that names no people (or a bad key), and
    /// [`PoolError::TooManySubscriptions`].
    pub fn subscribe_outbox(&mut self, now: Instant, filter: Filter) -> Result<SubId, PoolError> {
        let now = self.clock.observe(now);
        let map: Map<String, Value> =
            serde_json::from_str(filter.json()).map_err(|e| invalid_filter(e.to_string()))?;
        let want = want_of(&map).map_err(invalid_filter)?;
        self.start_routing(None);
        let sub = self.follow_and_register(now, None, map, want)?;
        self.ensure_lists_watch(now)?;
        self.reroute(now);
        Ok(sub)
    }

    /// Follow a feed's people and register it; nobody stays followed for a subscription
    /// that was refused (past the router's authors or the pool's subscriptions).
    fn follow_and_register(
        &mut self,
        now: Instant,
        id: Option<SubId>,
        filter: Map<String, Value>,
        want: Want,
    ) -> Result<SubId, PoolError> {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return Err(invalid_filter("routing is off".into()));
        };
        let people = match &want {
            Want::Feed(people) => people.clone(),
            Want::Inbox(_) | Want::Lists => Vec::new(),
        };
        let followed = match &want {
            Want::Inbox(me) => outbox.router.watch(me),
            _ => outbox.router.follow(people.iter().map(String::as_str)),
        };
        let registered = followed
            .map_err(|e| invalid_filter(e.to_string()))
            .and_then(|()| self.register_routed(now, id, filter, want));
        if registered.is_err() {
            if let Some(outbox) = self.outbox.as_deref_mut() {
                outbox.unfollow_unused(&people);
            }
        }
        registered
    }

    /// Register a routed subscription's logical part (dedup, outcome) and its routing state.
    fn register_routed(
        &mut self,
        now: Instant,
        id: Option<SubId>,
        filter: Map<String, Value>,
        want: Want,
    ) -> Result<SubId, PoolError> {
        let sub = self.new_logical(now, id, Targets::Outbox)?;
        if want == Want::Lists {
            // The pool's own: no outcome is owed to anyone.
            self.outcome_reported(sub);
        }
        let outbox = self.outbox.as_deref_mut().expect("routing is on");
        let lookback = outbox
            .lookbacks
            .for_filter(&Value::Object(filter.clone()).to_string())
            .as_secs();
        let mut base = filter.clone();
        base.remove(if matches!(want, Want::Inbox(_)) {
            "#p"
        } else {
            "authors"
        });
        if want == Want::Lists {
            outbox.lists = Some(sub);
        }
        outbox.subs.insert(
            sub,
            Routed {
                filter,
                base,
                want,
                lookback,
                placed: BTreeMap::new(),
                live: BTreeMap::new(),
                restored_at: None,
                report: None,
            },
        );
        Ok(sub)
    }

    /// The pool's own subscription to the relay lists of everyone it routes for.
    fn ensure_lists_watch(&mut self, now: Instant) -> Result<(), PoolError> {
        if self.outbox.as_deref().is_some_and(|o| o.lists.is_some()) {
            return Ok(());
        }
        let mut filter = Map::new();
        filter.insert("kinds".into(), Value::from(vec![OUTBOX_KIND, INBOX_KIND]));
        self.register_routed(now, None, filter, Want::Lists)
            .map(drop)
    }

    /// Run routing again at `now + REROUTE_DELAY`, unless it is due sooner.
    pub(crate) fn schedule_reroute(&mut self, now: Instant) {
        let at = now.saturating_add(REROUTE_DELAY);
        self.schedule_reroute_at(at);
    }

    fn schedule_reroute_at(&mut self, at: Instant) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        if outbox.reroute_at.is_some_and(|t| t <= at) {
            return;
        }
        let mut slot = outbox.reroute_at.take();
        self.timers.set(Deadline::Reroute, &mut slot, Some(at));
        if let Some(outbox) = self.outbox.as_deref_mut() {
            outbox.reroute_at = slot;
        }
    }

    /// Route every routed subscription again: open the relays routing wants, move people
    /// between them (each newcomer asked from when it was last served live), close the
    /// relays no longer wanted, and report what changed.
    pub(crate) fn reroute(&mut self, now: Instant) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        let mut slot = outbox.reroute_at.take();
        self.timers.set(Deadline::Reroute, &mut slot, None);
        self.expire_held_publishes(now);
        if self.away() {
            // Suspended or offline: what fails now says nothing about the relays, and no
            // relay would be reached. `resume` and `set_online` route again; a publish held
            // meanwhile still ends at its deadline.
            if let Some(at) = self.held_publish_due(true) {
                self.schedule_reroute_at(at.max(now));
            }
            return;
        }
        self.mark_live(now);
        if let Some(outbox) = self.outbox.as_deref_mut() {
            if now.saturating_duration_since(outbox.window_start) >= ROUTER_WINDOW {
                outbox.window_start = now;
                outbox.router.new_window();
            }
        }
        let publish_urls = self.publish_urls(now);
        let publish_people = self.publish_people();
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        // Inbox relays come first and count against the budget, then the relays of
        // publishes, leaving the router one.
        let budget = outbox.router.config().max_relays;
        let mut inbox_urls: Vec<String> = Vec::new();
        for routed in outbox.subs.values() {
            if let Want::Inbox(me) = &routed.want {
                for url in outbox
                    .router
                    .inbox_relays(me)
                    .into_iter()
                    .take(MAX_INBOX_RELAYS)
                {
                    if !inbox_urls.iter().any(|u| u == url) && inbox_urls.len() + 1 < budget {
                        inbox_urls.push(url.to_owned());
                    }
                }
            }
        }
        let mut reserved = inbox_urls.clone();
        for url in publish_urls {
            if !reserved.contains(&url) && reserved.len() + 1 < budget {
                reserved.push(url);
            }
        }
        outbox
            .router
            .set_max_relays(budget.saturating_sub(reserved.len()).max(1));
        let routes = outbox.router.route(now);
        outbox.router.set_max_relays(budget);
        let coverage = routes.coverage.clone();
        let followed: Vec<String> = outbox.router.followed().map(str::to_owned).collect();
        let inbox_owners: Vec<String> = outbox
            .subs
            .values()
            .filter_map(|r| match &r.want {
                Want::Inbox(me) => Some(me.clone()),
                _ => None,
            })
            .collect();
        // The relays wanted, by URL: who to ask there, for feeds; whether it is an indexer.
        let mut wanted: BTreeMap<String, (Role, BTreeSet<String>)> = BTreeMap::new();
        for route in routes.relays {
            // A relay chosen with nobody to ask (its every pair under the ask threshold)
            // would hold a socket for nothing.
            if route.role == Role::Indexer || !route.authors.is_empty() {
                wanted.insert(route.url, (route.role, route.authors.into_iter().collect()));
            }
        }
        for url in &reserved {
            wanted
                .entry(url.clone())
                .or_insert((Role::Assigned, BTreeSet::new()));
        }
        // Relays no longer wanted close first (their sockets close, no CLOSE is sent on
        // them), freeing their slots for the relays to open.
        let unwanted: Vec<RelayId> = self
            .outbox
            .as_deref()
            .map(|o| {
                o.url_of
                    .iter()
                    .filter(|(_, url)| !wanted.contains_key(*url))
                    .map(|(&r, _)| r)
                    .collect()
            })
            .unwrap_or_default();
        for relay in unwanted {
            self.drop_routed_relay(now, relay);
        }
        let mut ids: BTreeMap<String, RelayId> = BTreeMap::new();
        for url in wanted.keys() {
            if let Some(relay) = self.routed_relay(now, url) {
                ids.insert(url.clone(), relay);
            }
        }
        let subs: Vec<SubId> = self
            .outbox
            .as_deref()
            .map(|o| o.subs.keys().copied().collect())
            .unwrap_or_default();
        for sub in subs {
            let Some(outbox) = self.outbox.as_deref() else {
                return;
            };
            let Some(routed) = outbox.subs.get(&sub) else {
                continue;
            };
            let mut desired: BTreeMap<RelayId, BTreeSet<String>> = BTreeMap::new();
            for (url, (role, authors)) in &wanted {
                let Some(&relay) = ids.get(url) else {
                    continue;
                };
                let asked: BTreeSet<String> = match &routed.want {
                    Want::Feed(people) => people
                        .iter()
                        .filter(|p| authors.contains(*p))
                        .cloned()
                        .collect(),
                    Want::Inbox(me) if inbox_urls.contains(url) => BTreeSet::from([me.clone()]),
                    Want::Inbox(_) => BTreeSet::new(),
                    Want::Lists if *role == Role::Indexer => followed
                        .iter()
                        .chain(&inbox_owners)
                        .chain(&publish_people)
                        .cloned()
                        .collect(),
                    Want::Lists => BTreeSet::new(),
                };
                if !asked.is_empty() {
                    desired.insert(relay, asked);
                }
            }
            self.place(now, sub, desired);
            self.report_route(sub, &coverage, &inbox_urls);
        }
        self.send_publishes(now, &ids);
        let next = self.outbox.as_deref().and_then(|o| o.router.poll_timeout());
        if let Some(at) = next {
            self.schedule_reroute_at(at.max(now.saturating_add(REROUTE_DELAY)));
        }
        if let Some(at) = self.held_publish_due(false) {
            self.schedule_reroute_at(at.max(now));
        }
    }

    /// Every person asked by a REQ past its EOSE on an open relay was served live until now.
    fn mark_live(&mut self, now: Instant) {
        let Some(unix) = self.wall.map(|w| w.unix_secs(now)) else {
            return;
        };
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        for routed in outbox.subs.values_mut() {
            for (relay, placed) in &routed.placed {
                let open = self.relays[relay.0 as usize]
                    .as_deref()
                    .is_some_and(|m| m.session.link().is_open());
                if !open {
                    continue;
                }
                // Only a REQ past its EOSE serves its people live: a newcomer's catch-up
                // may still be under way.
                for chunk in placed.chunks.values().filter(|c| c.eosed) {
                    for author in &chunk.authors {
                        routed.live.insert(author.clone(), unix);
                    }
                }
            }
        }
    }

    /// The pool's relay for `url`, opened for routing if it is not yet.
    fn routed_relay(&mut self, now: Instant, url: &str) -> Option<RelayId> {
        if let Some(&relay) = self.outbox.as_deref()?.by_url.get(url) {
            return Some(relay);
        }
        let relay = self.add_member(now, false).ok()?;
        let outbox = self.outbox.as_deref_mut()?;
        outbox.by_url.insert(url.to_owned(), relay);
        outbox.url_of.insert(relay, url.to_owned());
        Some(relay)
    }

    /// Close a relay routing no longer wants.
    fn drop_routed_relay(&mut self, now: Instant, relay: RelayId) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        for routed in outbox.subs.values_mut() {
            routed.placed.remove(&relay);
        }
        outbox.opened.remove(&relay);
        if let Some(url) = outbox.url_of.remove(&relay) {
            outbox.by_url.remove(&url);
        }
        let _ = self.remove_relay(now, relay);
    }

    /// Ask each relay of `sub` about exactly `desired` (nobody, on a relay it leaves out).
    fn place(&mut self, now: Instant, sub: SubId, desired: BTreeMap<RelayId, BTreeSet<String>>) {
        let Some(routed) = self.outbox.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return;
        };
        let relays: BTreeSet<RelayId> = routed
            .placed
            .keys()
            .chain(desired.keys())
            .copied()
            .collect();
        for relay in relays {
            let want = desired.get(&relay).cloned().unwrap_or_default();
            self.place_on(now, sub, relay, want);
        }
    }

    /// Ask `relay` about exactly `want` for `sub`, re-sending only what must change: a REQ
    /// that asks someone no longer wanted there is closed and the others it asked are asked
    /// again (from when they were last served live); newcomers get REQs of their own; a REQ
    /// that asks only wanted people stays as it is. When churn has left more than twice the
    /// REQs a fresh placement needs, everyone is asked afresh in full chunks.
    fn place_on(&mut self, now: Instant, sub: SubId, relay: RelayId, want: BTreeSet<String>) {
        let Some(routed) = self
            .outbox
            .as_deref_mut()
            .and_then(|o| o.subs.get_mut(&sub))
        else {
            return;
        };
        let mut placed = routed.placed.remove(&relay).unwrap_or_default();
        if placed.authors == want {
            if !want.is_empty() {
                routed.placed.insert(relay, placed);
            }
            return;
        }
        let mut close: Vec<SubscriptionId> = Vec::new();
        let mut ask: BTreeSet<String> = want.difference(&placed.authors).cloned().collect();
        for (local, chunk) in &placed.chunks {
            if chunk.authors.iter().any(|a| !want.contains(a)) {
                close.push(*local);
                ask.extend(chunk.authors.iter().filter(|a| want.contains(*a)).cloned());
            }
        }
        let reqs = |n: usize| n.div_ceil(split::AUTHOR_CHUNK);
        if placed.chunks.len() - close.len() + reqs(ask.len()) > 2 * reqs(want.len()) + 2 {
            close = placed.chunks.keys().copied().collect();
            ask.clone_from(&want);
        }
        for local in &close {
            placed.chunks.remove(local);
        }
        placed.authors = want;
        self.close_reqs(now, relay, &close);
        self.ask_on(now, sub, relay, &mut placed, &ask);
        if placed.authors.is_empty() {
            return;
        }
        if let Some(routed) = self
            .outbox
            .as_deref_mut()
            .and_then(|o| o.subs.get_mut(&sub))
        {
            routed.placed.insert(relay, placed);
        }
    }

    /// CLOSE `locals` on `relay`.
    fn close_reqs(&mut self, now: Instant, relay: RelayId, locals: &[SubscriptionId]) {
        let Some(member) = self.member_mut(relay) else {
            return;
        };
        for local in locals {
            member.routes.remove(local);
            let _ = member.session.unsubscribe(now, *local);
        }
        self.settle(now, relay);
    }

    /// Open REQs on `relay` asking `ask` for `sub`, cut to the relay's limits, into `placed`.
    fn ask_on(
        &mut self,
        now: Instant,
        sub: SubId,
        relay: RelayId,
        placed: &mut Placed,
        ask: &BTreeSet<String>,
    ) {
        if ask.is_empty() {
            return;
        }
        let Some(routed) = self.outbox.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return;
        };
        let outbox = self.outbox.as_deref().expect("routing is on");
        let url = outbox.url_of.get(&relay).map(String::as_str);
        let groups = routed.groups(ask, |author| {
            url.is_some_and(|url| outbox.router.has_answered_for(author, url))
        });
        let key = if matches!(routed.want, Want::Inbox(_)) {
            "#p"
        } else {
            "authors"
        };
        let Some(member) = super::member_in(&mut self.relays, relay) else {
            return;
        };
        // Whole-history asks and window asks go in REQs of their own: only the silence of
        // a whole-history ask is evidence.
        let (windows, whole): (Vec<Group>, Vec<Group>) = groups
            .into_iter()
            .partition(|g| g.since.is_some() && !g.whole);
        let info = member.session.relay_info();
        let reqs = split::reqs(&routed.base, key, &whole, info)
            .into_iter()
            .map(|r| (r, false))
            .chain(
                split::reqs(&routed.base, key, &windows, info)
                    .into_iter()
                    .map(|r| (r, true)),
            )
            .collect::<Vec<_>>();
        for ((filters, asked), window) in reqs {
            let Ok(local) = member.session.subscribe(now, filters, Priority::NORMAL) else {
                // Not asked: left unplaced, so the next routing asks them again.
                for author in &asked {
                    placed.authors.remove(author);
                }
                continue;
            };
            member.routes.insert(local, sub);
            placed.chunks.insert(
                local,
                Chunk {
                    authors: asked,
                    eosed: false,
                    window,
                },
            );
        }
        self.settle(now, relay);
    }

    /// Report `sub`'s routing if it changed.
    fn report_route(&mut self, sub: SubId, coverage: &Coverage, inbox_urls: &[String]) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        let url_of = &outbox.url_of;
        let lists = outbox.lists;
        let subs_placed: BTreeMap<SubId, BTreeSet<RelayId>> = lists
            .and_then(|l| Some((l, outbox.subs.get(&l)?.placed.keys().copied().collect())))
            .into_iter()
            .collect();
        // The indexers serve every subscription (its people's lists): they are used for it.
        let indexers: BTreeSet<RelayId> = lists
            .and_then(|l| subs_placed.get(&l).cloned())
            .unwrap_or_default();
        let Some(routed) = outbox.subs.get_mut(&sub) else {
            return;
        };
        let relays: Vec<(RelayId, String)> = routed
            .placed
            .keys()
            .chain(indexers.iter())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|r| Some((*r, url_of.get(r)?.clone())))
            .collect();
        let report = match &routed.want {
            Want::Lists => return,
            Want::Feed(people) => {
                let mine: BTreeSet<&String> = people.iter().collect();
                RouteReport {
                    relays,
                    covered: coverage
                        .covered
                        .iter()
                        .filter(|(a, _)| mine.contains(a))
                        .cloned()
                        .collect(),
                    fallback_only: keep(&coverage.fallback_only, &mine),
                    uncovered: keep(&coverage.uncovered, &mine),
                }
            }
            Want::Inbox(me) => {
                let n = routed.placed.len();
                let declared = inbox_urls.len();
                RouteReport {
                    relays,
                    covered: if n > 0 {
                        vec![(me.clone(), n)]
                    } else {
                        Vec::new()
                    },
                    fallback_only: Vec::new(),
                    uncovered: if n == 0 || declared == 0 {
                        vec![me.clone()]
                    } else {
                        Vec::new()
                    },
                }
            }
        };
        if routed.report.as_ref() == Some(&report) {
            return;
        }
        routed.report = Some(report.clone());
        self.emit(sub, PoolEvent::Routed { sub, report });
    }

    // ----- what the sessions say about routed subscriptions ----------------------------------

    /// Whether `sub` is routed by people.
    pub(crate) fn is_routed(&self, sub: SubId) -> bool {
        self.outbox
            .as_deref()
            .is_some_and(|o| o.subs.contains_key(&sub))
    }

    /// An event of a routed subscription, before dedup: whether it matches what was asked.
    pub(crate) fn routed_admits(&mut self, sub: SubId, relay: RelayId, raw: &str) -> bool {
        let Some(routed) = self.outbox.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return true;
        };
        let fields = Fields::of(raw).filter(|e| matches::matches(&routed.filter, e));
        let Some(fields) = fields else {
            self.count(relay, |s| s.unmatched += 1);
            return false;
        };
        // Every copy is evidence, before dedup: the relay that delivered a note second
        // holds it as surely as the first. A relay list says where an author's content is,
        // not that this relay holds it.
        let list = fields.kind() == OUTBOX_KIND || fields.kind() == INBOX_KIND;
        let now = self.clock.now();
        if let Some(outbox) = self.outbox.as_deref_mut() {
            if let (Some(url), false) = (outbox.url_of.get(&relay), list) {
                outbox.router.handle_event(now, url, fields.author());
            }
        }
        true
    }

    /// What the pool's list watch heard, in order and each list after its verdict: a list
    /// goes to the router; an EOSE marks the people it asked as looked up (their lists,
    /// if any, came before it).
    pub(crate) fn lists_heard(&mut self, now: Instant, event: PoolEvent) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        match event {
            PoolEvent::Received { raw, .. } => {
                let applied = matches!(
                    outbox.router.handle_list(now, &raw),
                    Ok(super::router::ListUpdate::Applied { .. })
                );
                if applied {
                    self.schedule_reroute(now);
                }
            }
            PoolEvent::Eose { .. } => {
                let asked = outbox.lists_answers.pop_front().unwrap_or_default();
                self.lists_answered(now, &asked);
            }
            _ => {}
        }
    }

    /// `relay` answered EOSE to one REQ of routed `sub`: the router hears who it was asked
    /// about; the relay's EOSE is reported once all its REQs answered.
    pub(crate) fn routed_eose(
        &mut self,
        now: Instant,
        relay: RelayId,
        local: SubscriptionId,
        sub: SubId,
    ) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        let url = outbox.url_of.get(&relay).cloned();
        let Some(routed) = outbox.subs.get_mut(&sub) else {
            return;
        };
        let Some(placed) = routed.placed.get_mut(&relay) else {
            return;
        };
        let Some(chunk) = placed.chunks.get_mut(&local) else {
            return;
        };
        if chunk.eosed {
            return;
        }
        chunk.eosed = true;
        let asked = chunk.authors.clone();
        let window = chunk.window;
        let first = placed.answered();
        match (url, routed.want == Want::Lists) {
            // An indexer's answer about lists says it is alive, nothing about notes.
            (Some(url), true) => outbox.router.handle_eose(now, &url, []),
            (Some(url), false) if window => {
                outbox
                    .router
                    .handle_window_eose(now, &url, asked.iter().map(String::as_str));
            }
            (Some(url), false) => {
                outbox
                    .router
                    .handle_eose(now, &url, asked.iter().map(String::as_str));
            }
            (None, _) => {}
        }
        if self.is_lists(sub) {
            // Looked up once the lists before this EOSE have their verdicts: it waits in
            // the verification queue behind them.
            if let Some(outbox) = self.outbox.as_deref_mut() {
                if outbox.lists_answers.len() >= MAX_LIST_ANSWERS {
                    outbox.lists_answers.pop_front();
                }
                outbox.lists_answers.push_back(asked);
            }
            self.emit(sub, PoolEvent::Eose { sub, relay });
        }
        self.schedule_reroute(now);
        if first && !self.is_lists(sub) {
            self.emit(sub, PoolEvent::Eose { sub, relay });
            self.routed_outcome(sub, false);
        }
    }

    /// `relay` gave up on one REQ of routed `sub`: the router hears it refused, the app
    /// hears the relay closed, and routing runs again.
    pub(crate) fn routed_closed(
        &mut self,
        now: Instant,
        relay: RelayId,
        local: SubscriptionId,
        sub: SubId,
        reason: String,
        attempts: u32,
    ) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        // The session gave the REQ up itself when the relay's NIP-11 document lowered its
        // frame size below it (the document came after the REQ was cut): no refusal of the
        // relay's, and nothing the application needs to hear; its people are asked again
        // at once, cut to the new size.
        let too_large = attempts == 0 && is_frame_too_large(&reason);
        if let (Some(url), false) = (outbox.url_of.get(&relay), too_large) {
            outbox.router.handle_refused(now, url, refusal_of(&reason));
        }
        let mut now_answered = false;
        if let Some(routed) = outbox.subs.get_mut(&sub) {
            if let Some(placed) = routed.placed.get_mut(&relay) {
                // Its people are no longer asked there: the next routing asks them again,
                // there once the relay's backoff ends or elsewhere, from when they were
                // last served live.
                if let Some(chunk) = placed.chunks.remove(&local) {
                    for author in &chunk.authors {
                        placed.authors.remove(author);
                    }
                }
                now_answered = placed.answered();
                if placed.chunks.is_empty() {
                    routed.placed.remove(&relay);
                }
            }
        }
        if too_large {
            self.schedule_reroute_at(now);
            return;
        }
        self.schedule_reroute(now);
        if self.is_lists(sub) {
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
        if now_answered {
            self.emit(sub, PoolEvent::Eose { sub, relay });
        }
        self.routed_outcome(sub, false);
    }

    /// A routed relay's socket opened or was lost: the router's health input.
    pub(crate) fn routed_link(
        &mut self,
        now: Instant,
        relay: RelayId,
        event: &crate::nostr::Event,
    ) {
        let away = self.away();
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        let Some(url) = outbox.url_of.get(&relay).cloned() else {
            return;
        };
        match event {
            crate::nostr::Event::Connected => {
                outbox.opened.insert(relay);
                outbox.router.handle_opened(now, &url);
            }
            // A refusal with a retry hint, a cap, an AUTH challenge: the relay speaks, it
            // is alive (the session retries; the router waits no answer from it).
            crate::nostr::Event::RateLimited { .. }
            | crate::nostr::Event::SubscriptionLimit { .. }
            | crate::nostr::Event::AuthChallenge { .. } => {
                outbox.router.handle_alive(now, &url);
            }
            crate::nostr::Event::Disconnected {
                why: Disconnect::Lost(loss),
                ..
            } => {
                let local = is_local(*loss) || away;
                let failed = if outbox.opened.remove(&relay) {
                    // Closed before its first answer (accept-then-close) is dead too.
                    outbox.router.handle_closed(now, &url) && !local
                } else if !local {
                    // Lost before it opened: reset, refused, TLS, timeout alike.
                    outbox.router.handle_failed(now, &url);
                    true
                } else {
                    return;
                };
                if failed {
                    // Route at once, before the session's own reconnect: the router, not
                    // the session's backoff, decides whether a failing relay is tried again
                    // (at most `max_attempts` in `retry_window`).
                    self.schedule_reroute_at(now);
                } else {
                    self.schedule_reroute(now);
                }
            }
            _ => {}
        }
    }

    /// Report routed `sub`'s outcome once: every relay it is placed on answered EOSE, or
    /// (`deadline`) time is up.
    pub(crate) fn routed_outcome(&mut self, sub: SubId, deadline: bool) {
        let Some(routed) = self.outbox.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return;
        };
        let reported = self.subs.get(&sub).is_none_or(Logical::reported);
        if reported
            || (!deadline && (routed.placed.is_empty() || routed.placed.values().any(|p| !p.eosed)))
        {
            return;
        }
        let missing: Vec<(RelayId, super::Missing)> = routed
            .placed
            .iter()
            .filter(|(_, p)| !p.eosed)
            .map(|(&r, _)| (r, super::Missing::NoEose))
            .collect();
        let outcome = if missing.is_empty() && !routed.placed.is_empty() {
            super::Outcome::Complete
        } else {
            super::Outcome::Partial { missing }
        };
        self.outcome_reported(sub);
        self.emit(sub, PoolEvent::Complete { sub, outcome });
    }

    /// Routed `sub` is dropped: its REQs close; relays routing no longer needs close at the
    /// next routing.
    pub(crate) fn routed_unsubscribe(&mut self, now: Instant, sub: SubId) {
        let Some(outbox) = self.outbox.as_deref_mut() else {
            return;
        };
        let Some(routed) = outbox.subs.remove(&sub) else {
            return;
        };
        if let Want::Feed(people) = &routed.want {
            outbox.unfollow_unused(people);
        }
        for (relay, placed) in routed.placed {
            let locals: Vec<SubscriptionId> = placed.chunks.into_keys().collect();
            self.close_reqs(now, relay, &locals);
        }
        self.schedule_reroute(now);
    }

    pub(crate) fn is_lists(&self, sub: SubId) -> bool {
        self.outbox.as_deref().is_some_and(|o| o.lists == Some(sub))
    }

    /// The routed subscriptions and their filters, for a checkpoint (the pool's own list
    /// watch is made again on restore).
    pub(crate) fn routed_filters(&self) -> Vec<(u64, String)> {
        self.outbox
            .as_deref()
            .map(|o| {
                o.subs
                    .iter()
                    .filter(|(_, r)| r.want != Want::Lists)
                    .map(|(s, r)| (s.0, Value::Object(r.filter.clone()).to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Restore routed subscription `sub` with `filter`, caught up from `unix` (the
    /// checkpoint's wall clock); its dedup memory is restored beside it.
    pub(crate) fn restore_routed(
        &mut self,
        sub: SubId,
        filter: &str,
        unix: u64,
        seen: Seen,
        now: Instant,
    ) -> Result<(), String> {
        let map: Map<String, Value> = serde_json::from_str(filter).map_err(|e| e.to_string())?;
        let want = want_of(&map)?;
        self.follow_and_register(now, Some(sub), map, want)
            .map_err(|e| e.to_string())?;
        if let Some(logical) = self.subs.get_mut(&sub) {
            logical.seen = seen;
        }
        if let Some(routed) = self
            .outbox
            .as_deref_mut()
            .and_then(|o| o.subs.get_mut(&sub))
        {
            routed.restored_at = Some(unix);
        }
        Ok(())
    }

    /// After a restore: watch the lists again and route.
    pub(crate) fn restart_routing(&mut self, now: Instant) -> Result<(), PoolError> {
        if self.outbox.as_deref().is_none_or(|o| o.subs.is_empty()) {
            return Ok(());
        }
        self.ensure_lists_watch(now)?;
        self.reroute(now);
        Ok(())
    }
}

impl Routed {
    /// The relays it is placed on.
    pub(crate) fn relays(&self) -> Vec<RelayId> {
        self.placed.keys().copied().collect()
    }

    /// `authors` in groups by where their catch-up starts: when each was last served live,
    /// or after a restore the checkpoint's time, less the lookback. Only a relay that has
    /// answered for a person before (`answered`) is asked from a window; the first ask of a
    /// relay about a person is the user's filter as it is, whole history included.
    fn groups(&self, authors: &BTreeSet<String>, answered: impl Fn(&str) -> bool) -> Vec<Group> {
        let mut by_since: BTreeMap<(Option<u64>, bool), Vec<String>> = BTreeMap::new();
        for author in authors {
            let served = self.live.get(author).copied().or(self.restored_at);
            let since =
                served.map(|t| t.saturating_sub(self.lookback) / SINCE_BUCKET * SINCE_BUCKET);
            let whole = since.is_some() && !answered(author);
            by_since
                .entry((since, whole))
                .or_default()
                .push(author.clone());
        }
        by_since
            .into_iter()
            .map(|((since, whole), authors)| Group {
                authors,
                since,
                whole,
            })
            .collect()
    }
}

/// Who a filter names: its `authors`, or with none its one `#p` key.
fn want_of(filter: &Map<String, Value>) -> Result<Want, String> {
    let keys = |v: &Value| -> Result<Vec<String>, String> {
        let list = v.as_array().ok_or("not a list")?;
        list.iter()
            .map(|k| {
                k.as_str()
                    .filter(|k| super::router::is_public_key(k))
                    .map(str::to_owned)
                    .ok_or_else(|| format!("not a hex public key: {k}"))
            })
            .collect()
    };
    if let Some(authors) = filter.get("authors") {
        let authors = keys(authors)?;
        if authors.is_empty() {
            return Err("a routed filter names no authors".into());
        }
        return Ok(Want::Feed(authors));
    }
    if let Some(p) = filter.get("#p") {
        let mut p = keys(p)?;
        if p.len() == 1 {
            return Ok(Want::Inbox(p.remove(0)));
        }
    }
    Err("a routed filter needs `authors`, or one `#p` key for an inbox".into())
}

fn invalid_filter(why: String) -> PoolError {
    PoolError::Session(Error::InvalidFilter(
        crate::nostr::subscription::InvalidFilter(why),
    ))
}

fn keep(list: &[String], mine: &BTreeSet<&String>) -> Vec<String> {
    list.iter().filter(|a| mine.contains(a)).cloned().collect()
}

/// What the router should make of the reason a relay gave up on a REQ with, classified as
/// the session classifies refusals (every dialect, the `retry in Ns` hint). A relay that
/// gave up for any other reason will not serve this request: for routing, it is blocked.
fn refusal_of(reason: &str) -> Refusal {
    match reason::classify(reason) {
        Class::RateLimited { retry_after } => {
            Refusal::RateLimited(retry_after.unwrap_or(DEFAULT_RATE_LIMIT))
        }
        Class::AuthRequired => Refusal::AuthRequired,
        Class::Retryable | Class::Terminal(_) => Refusal::Blocked,
    }
}

/// Whether `reason` is the relay session's own refusal of a REQ larger than the relay's
/// declared `max_message_length` ([`Error::MessageTooLarge`]).
fn is_frame_too_large(reason: &str) -> bool {
    reason.ends_with("bytes") && reason.contains("exceeds the relay's max_message_length")
}

/// Whether a socket was lost for a cause of this client's own (out of descriptors, a
/// network that changed, a socket that died while the app was away): that says nothing
/// about the relay. Every other loss before the relay answered counts against it.
fn is_local(loss: SocketLoss) -> bool {
    matches!(
        loss,
        SocketLoss::OutOfFiles | SocketLoss::NetworkChanged | SocketLoss::ResumeProbe
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sessions_own_frame_refusal_is_told_from_a_relays_refusal() {
        let own = Error::MessageTooLarge {
            len: 80_861,
            max: 8_192,
        };
        assert!(is_frame_too_large(&own.to_string()));
        assert!(!is_frame_too_large("blocked: too large"));
        assert!(!is_frame_too_large(
            "error: filter exceeds the relay's max_message_length"
        ));
    }
}
