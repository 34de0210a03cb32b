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

mod apply;
mod heard;
mod liveness;
mod matches;
mod plan;
mod publish;
mod restore;
pub mod split;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use serde_json::{Map, Value};

use super::checkpoint::SavedReq;
use super::dedup::Seen;
use super::logical::Targets;
use super::{Deadline, Missing, PoolError, PoolEvent, RelayId, RelayPool, SubId};
use crate::link::SocketLoss;
use crate::nostr::message::EventId;
use crate::nostr::reason::{self, Class};
use crate::nostr::Lookbacks;
use crate::nostr::{Disconnect, Error, Filter, Priority, SubscriptionId};
use crate::router::{Coverage, Refusal, Role, Router, INBOX_KIND, OUTBOX_KIND};
use crate::small::SmallMap;
use crate::time::Instant;
use crate::tree::IntoTree;
use matches::Fields;
use plan::Plan;
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
pub(crate) struct Routing {
    pub(crate) router: Router,
    /// The relays the pool opened for routing, both ways.
    by_url: BTreeMap<String, RelayId>,
    url_of: SmallMap<RelayId, String>,
    /// Relays whose socket opened since their last connect: a loss then is a close, not a
    /// failure to connect.
    opened: BTreeSet<RelayId>,
    pub(crate) subs: BTreeMap<SubId, ByPeople>,
    /// The subscription watching relay lists on the indexers; its events are the router's.
    lists: Option<SubId>,
    /// When routing runs next (registered as [`Deadline::Reroute`]).
    pub(crate) reroute_at: Option<Instant>,
    lookbacks: Lookbacks,
    /// When the router's current run started.
    window_start: Instant,
    /// Publishes by outbox, waiting for lists or in flight.
    publishes: BTreeMap<EventId, publish::PendingPublish>,
    /// People the indexers answered a lists request about (bounded by `max_authors`).
    looked_up: BTreeSet<String>,
    /// Who each lists EOSE waiting in the verification queue asked about, in order.
    lists_answers: VecDeque<Vec<String>>,
}

/// One routed subscription.
#[derive(Debug)]
pub(crate) struct ByPeople {
    /// The user's filter: what every delivered event must match.
    pub(crate) filter: Map<String, Value>,
    /// The filter without the people: what each relay's REQs are built from.
    base: Map<String, Value>,
    want: Want,
    /// The filter's lookback, in seconds.
    lookback: u64,
    /// Per relay, the people asked there and the REQs asking them.
    placed: SmallMap<RelayId, Placed>,
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

/// Who routing asks on one relay for one subscription, and in which REQs (the REQs' answers
/// are the subscription's [`Logical`](super::logical::Logical)'s).
#[derive(Debug, Default)]
struct Placed {
    authors: BTreeSet<String>,
    chunks: SmallMap<SubscriptionId, Chunk>,
}

/// One REQ's people.
#[derive(Debug)]
struct Chunk {
    authors: Vec<String>,
    /// Asked from a catch-up window, not the whole history: its silence is no miss.
    window: bool,
}

impl Routing {
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
            .into_set();
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
        Routing {
            router,
            by_url: BTreeMap::new(),
            url_of: SmallMap::new(),
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
        if self.routing.is_none() {
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
            let mut routing = Routing::new(router, lookbacks);
            routing.window_start = self.clock.now();
            self.routing = Some(Box::new(routing));
        }
    }

    /// The router, once routing is on.
    #[must_use]
    pub fn router(&self) -> Option<&Router> {
        self.routing.as_deref().map(|o| &o.router)
    }

    /// The URL of `relay`, normalised: a driver opens its socket there. Every relay routing
    /// opened has one, and the application's added with [`RelayPool::add_relay_url`];
    /// relays added with [`RelayPool::add_relay`] have none in the pool.
    #[must_use]
    pub fn relay_url(&self, relay: RelayId) -> Option<&str> {
        self.member(relay)?.url.as_deref()
    }

    /// The URL of a relay the pool opened by itself (routing by people), which its driver
    /// did not add: where to dial it. `None` for the application's relays, which the
    /// application named (and may dial anywhere).
    #[must_use]
    pub fn opened_url(&self, relay: RelayId) -> Option<&str> {
        let member = self.member(relay)?;
        member.url.as_deref().filter(|_| !member.app)
    }

    /// Whether `relay` may be dialed at public addresses only: a relay routing opened from a
    /// stranger's relay list. A driver that resolves its name dials none of the addresses
    /// when any is private ([`is_private_ip`](crate::router::relay_url::is_private_ip));
    /// the application's relays and the indexers (and every relay when an indexer is itself
    /// on a private network) are dialed anywhere
    /// ([`private_addresses_allowed`](crate::router::relay_url::private_addresses_allowed)).
    #[must_use]
    pub fn dials_public_only(&self, relay: RelayId) -> bool {
        let Some(url) = self.opened_url(relay) else {
            return false;
        };
        let config = self
            .router()
            .map_or(&self.config().router, |router| router.config());
        !crate::router::relay_url::private_addresses_allowed(config, url)
    }

    /// What routing gives `sub` now (the last [`PoolEvent::Routed`]).
    #[must_use]
    pub fn route_report(&self, sub: SubId) -> Option<&RouteReport> {
        self.routing.as_deref()?.subs.get(&sub)?.report.as_ref()
    }

    /// A relay list (kind 10002 or 10050) the application got elsewhere: the router reads
    /// it as one delivered by a relay. Routing runs again shortly if it changed anything.
    ///
    /// # Errors
    /// [`PoolError::Session`] with [`Error::InvalidEvent`] for an event that is no relay list.
    pub fn handle_relay_list(&mut self, now: Instant, event_json: &str) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        self.start_routing(None);
        let Some(routing) = self.routing.as_deref_mut() else {
            return Ok(());
        };
        // The application gave it: it wants this person's relays known.
        if let Some(author) = serde_json::from_str::<Value>(event_json)
            .ok()
            .and_then(|v| v.get("pubkey")?.as_str().map(str::to_owned))
        {
            let _ = routing.router.watch(&author);
        }
        match routing.router.handle_list(now, event_json) {
            Ok(crate::router::ListUpdate::Applied { .. }) => {
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
        let Some(routing) = self.routing.as_deref_mut() else {
            return Err(invalid_filter("routing is off".into()));
        };
        let people = match &want {
            Want::Feed(people) => people.clone(),
            Want::Inbox(_) | Want::Lists => Vec::new(),
        };
        let followed = match &want {
            Want::Inbox(me) => routing.router.watch(me),
            _ => routing.router.follow(people.iter().map(String::as_str)),
        };
        let registered = followed
            .map_err(|e| invalid_filter(e.to_string()))
            .and_then(|()| self.register_by_people(now, id, filter, want));
        if registered.is_err() {
            if let Some(routing) = self.routing.as_deref_mut() {
                routing.unfollow_unused(&people);
            }
        }
        registered
    }

    /// Register a routed subscription's logical part (dedup, outcome) and its routing state.
    fn register_by_people(
        &mut self,
        now: Instant,
        id: Option<SubId>,
        filter: Map<String, Value>,
        want: Want,
    ) -> Result<SubId, PoolError> {
        let sub = self.new_logical(now, id, Targets::People)?;
        if want == Want::Lists {
            // The pool's own: no outcome is owed to anyone.
            self.outcome_reported(sub);
        }
        let routing = self.routing.as_deref_mut().expect("routing is on");
        let lookback = routing
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
            routing.lists = Some(sub);
        }
        routing.subs.insert(
            sub,
            ByPeople {
                filter,
                base,
                want,
                lookback,
                placed: SmallMap::new(),
                live: BTreeMap::new(),
                restored_at: None,
                report: None,
            },
        );
        Ok(sub)
    }

    /// The pool's own subscription to the relay lists of everyone it routes for.
    fn ensure_lists_watch(&mut self, now: Instant) -> Result<(), PoolError> {
        if self.routing.as_deref().is_some_and(|o| o.lists.is_some()) {
            return Ok(());
        }
        let mut filter = Map::new();
        filter.insert("kinds".into(), Value::from(vec![OUTBOX_KIND, INBOX_KIND]));
        self.register_by_people(now, None, filter, Want::Lists)
            .map(drop)
    }
}

impl ByPeople {
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
                    .filter(|k| crate::router::is_public_key(k))
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
