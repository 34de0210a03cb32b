//! [`Router`]: which relays to ask about which people, learned from what relays deliver.
//!
//! An application knows people ("the 400 accounts I follow", "my direct messages"); where
//! their events are is in their relay lists (kind 10002, NIP-65; kind 10050, NIP-17) and,
//! as the field measured, often somewhere else: only about a third of declared (author,
//! relay) pairs hold the author's events, and four in ten authors publish no list. The router
//! takes lists, deliveries, silences and relay health as inputs, and gives the routed
//! subscription: per relay, the authors to ask it about, within a connection budget.
//!
//! # The policy: evidence-weighted coverage with pooled relay rates
//! - Every (author, relay) pair has an estimate that the relay holds the author's events: a
//!   decaying tally of sessions in which it delivered them or stayed silent while they came
//!   from elsewhere, over a prior. The prior is the relay's *own* rate over every author
//!   whose list declares it (or, for authors that do not declare it, its rate beyond the
//!   lists, seeded by how many follows declare it). One author's evidence thus teaches about
//!   every other author on that relay: a relay that holds none of the eight authors who
//!   declared it is not believed for the ninth.
//! - Relays are chosen greedily by expected new events: each author weighs by how much they
//!   post (learned), times the chance that none of the relays chosen so far has them, plus a
//!   small bonus for an author's second to [`RouterConfig::redundancy`]th relay (a
//!   tie-breaker: covering an author comes before covering one twice). Greedy is within
//!   1 - 1/e of the best set for such a coverage objective.
//! - A relay already routed keeps its place unless a candidate is better by
//!   [`RouterConfig::hysteresis`]: routes do not flap.
//! - [`RouterConfig::probe_slots`] of the budget rotate through candidates chosen by an
//!   optimistic estimate (the mean plus an uncertainty bonus that shrinks with evidence): a
//!   probe is asked about everyone it may hold, answers, and what it delivered decides
//!   whether it stays. Content on undeclared relays is found this way without a connection
//!   per declared relay.
//! - Every relay routed (an indexer aside) is also asked about the followed authors no relay
//!   has delivered yet: its connection is paid for, and any relay may hold them.
//! - A relay that failed is no candidate while it waits out its backoff, at most
//!   [`RouterConfig::max_attempts`] tries in [`RouterConfig::retry_window`], and after that
//!   only when no healthy candidate adds anything.
//!
//! # Driving
//! Inputs: [`Router::follow`], [`Router::handle_list`], [`Router::handle_event`],
//! [`Router::handle_eose`], [`Router::handle_opened`], [`Router::handle_failed`],
//! [`Router::handle_refused`], [`Router::hint_live`]; [`Router::set_wall_clock`] for the
//! decay. Output: [`Router::route`] returns the routes and their coverage, and
//! [`Router::poll_timeout`] says when a waiting relay may be tried again (route again then).
//! The router does no I/O and keeps no socket: a pool does ([`RelayPool`](crate::pool::RelayPool)).
//!
//! # Bounds
//! [`RouterConfig::max_authors`], [`RouterConfig::max_list_relays`],
//! [`RouterConfig::max_known_relays`] and [`RouterConfig::max_pairs_per_author`]: a hostile
//! list of 10 000 relays adds at most `max_list_relays` relays and changes nothing else.

mod checkpoint;
mod config;
mod evidence;
mod health;
mod lists;
mod plan;
pub mod relay_url;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::time::{Clock, Instant, WallClock};
use crate::tree::IntoTree;

pub use checkpoint::RouterCheckpoint;
pub use config::{RouterConfig, DEFAULT_INDEXERS};
use evidence::{RelayTallies, Tally, PAIR_STRENGTH};
use health::Health;
pub use health::Refusal;
pub use lists::{ListError, ListKind, INBOX_KIND, OUTBOX_KIND};

/// How long a relay routing chose has to answer (4 s): a relay that says nothing by then
/// (its socket not open, or open and silent) gives up its slot, and that counts as a
/// failure. A dead relay thus holds a slot for at most this long.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(4);
/// How far ahead of the wall clock a relay list may be dated (15 min, NIP-01 clocks
/// drift): a list dated later would pin its author for ever, since only a newer list
/// replaces it.
pub const MAX_LIST_SKEW: u64 = 900;
/// Of the main budget, how much the relays of authors who moved (a newer list) may take
/// at most, as a share (one half): a burst of moves cannot evict every learned route.
const MOVED_SHARE: usize = 2;
/// How long a restored router holds its probes to [`RESTORED_PROBES`] (10 s): the first
/// seconds after a restart go to the relays known to deliver, each re-checked by the
/// answer deadline, not to a fresh round of probes across the long tail.
pub const RESTORED_PROBE_DELAY: Duration = Duration::from_secs(10);
/// Probes a restored router starts within [`RESTORED_PROBE_DELAY`] (4).
pub const RESTORED_PROBES: usize = 4;

/// The router. See the [module docs](self).
#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    clock: Clock,
    wall: Option<WallClock>,
    authors: Vec<Author>,
    by_key: BTreeMap<String, u32>,
    relays: Vec<Relay>,
    by_url: BTreeMap<String, u32>,
    /// Learned (author, relay) tallies.
    pairs: BTreeMap<(u32, u32), Tally>,
    /// What the last [`Router::route`] returned, by relay: what hysteresis keeps.
    current: BTreeMap<u32, Role>,
    session: Session,
    /// Slots of relays forgotten (no list, no tally, no route refers to them), reused first.
    free: Vec<u32>,
    /// Lists refused for being dated past [`MAX_LIST_SKEW`] ahead of the wall clock.
    future_lists: u64,
    /// Restored from a checkpoint and not routed yet: the first routing holds the probes
    /// back for [`RESTORED_PROBE_DELAY`].
    restored: bool,
    /// No probe before this (after a restore).
    probe_from: Option<Instant>,
}

/// One relay to ask, and whom to ask it about.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Route {
    /// The relay's normalised URL.
    pub url: String,
    /// Why it is routed.
    pub role: Role,
    /// The authors (hex public keys) to ask it about, in the order they were followed.
    pub authors: Vec<String>,
}

/// Why a relay is in the routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// An indexer, asked for relay lists (and for content, as any relay).
    Indexer,
    /// Chosen for the authors it is believed to hold.
    Assigned,
    /// Tried to learn what it holds; its slot rotates.
    Probe,
}

/// What the routes cover: what an application hears whenever routing changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Coverage {
    /// Relays routed.
    pub relays: usize,
    /// Each author asked on relays their list declares or that delivered their events
    /// before, with how many such relays.
    pub covered: Vec<(String, usize)>,
    /// Authors asked only on other relays: the indexers, and the relays most likely to
    /// hold content beyond the lists.
    pub fallback_only: Vec<String>,
    /// Authors asked nowhere: no usable relay is a candidate for them (their relays are
    /// dead, or the budget went to others).
    pub uncovered: Vec<String>,
}

/// The routes and their coverage.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Routes {
    /// The relays, indexers first, then by URL.
    pub relays: Vec<Route>,
    /// What they cover.
    pub coverage: Coverage,
}

/// What [`Router::handle_list`] did with a list.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListUpdate {
    /// It replaced the author's list of its kind (or was the first).
    Applied {
        /// The author, hex.
        author: String,
        /// Which list.
        kind: ListKind,
        /// Relays kept.
        relays: usize,
        /// Entries left out: junk URLs, or past [`RouterConfig::max_list_relays`].
        refused: usize,
    },
    /// A list at least as new is already held (a replaceable event is replaced only by a
    /// newer `created_at`, or the lower id at the same second).
    Stale,
    /// The author is not known and the author table is full.
    TooManyAuthors,
    /// Nobody follows or watches the author ([`Router::follow`], [`Router::watch`]): a
    /// stranger's list takes no room.
    NotWanted,
    /// Dated more than [`MAX_LIST_SKEW`] ahead of the wall clock: refused and counted
    /// ([`Router::future_lists`]).
    FromTheFuture,
}

/// Local misuse of the router (peer input never gives these: it gives [`ListError`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouterError {
    /// Not 64 lowercase hex digits.
    BadPublicKey(String),
    /// Past [`RouterConfig::max_authors`].
    TooManyAuthors {
        /// The bound.
        max: usize,
    },
}

impl std::fmt::Display for RouterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouterError::BadPublicKey(key) => {
                let key: String = key.chars().take(70).collect();
                write!(f, "not a hex public key: {key:?}")
            }
            RouterError::TooManyAuthors { max } => write!(f, "more than {max} authors"),
        }
    }
}

impl std::error::Error for RouterError {}

#[derive(Clone, Debug, Default)]
struct Author {
    key: String,
    followed: bool,
    /// Someone needs their lists besides the feeds: an inbox owner, a publish's author or
    /// recipient.
    watched: bool,
    /// A newer outbox list replaced an older one in this run: routing puts them on one of
    /// its write relays first, and silence there says nothing yet.
    moved: bool,
    /// The write relays the newest replacement added (the relays they moved to): the floor
    /// is one of these when there are any, else any write relay of the list.
    moved_to: Vec<u32>,
    outbox: Option<List>,
    inbox: Option<List>,
    /// Events delivered, decaying: how much the author posts.
    activity: Tally,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct List {
    created_at: u64,
    id: String,
    write: Vec<u32>,
    read: Vec<u32>,
}

#[derive(Clone, Debug)]
struct Relay {
    url: String,
    health: Health,
    tallies: RelayTallies,
    /// Followed authors whose list declares it as a write relay.
    declared_by: u32,
    indexer: bool,
}

/// What this run has seen: what resolves a relay's silence into evidence.
#[derive(Clone, Debug, Default)]
struct Session {
    /// Events each relay delivered for each author.
    delivered: BTreeMap<(u32, u32), u32>,
    /// The most events one relay delivered for each author.
    best: BTreeMap<u32, u32>,
    /// Relays that answered EOSE with nothing for an author not yet seen active.
    pending: BTreeMap<u32, Vec<u32>>,
    /// Relays that answered in this run.
    probed: BTreeSet<u32>,
    /// Probes started in this run.
    probes_started: usize,
    /// Relays routed and not yet answered on their current socket, with when they were
    /// routed: each has [`ANSWER_DEADLINE`] to answer.
    waiting: BTreeMap<u32, Instant>,
}

impl Router {
    /// A router with no authors; the indexers of `config` are known relays from the start.
    #[must_use]
    pub fn new(config: RouterConfig) -> Self {
        let mut router = Router {
            config,
            clock: Clock::default(),
            wall: None,
            authors: Vec::new(),
            by_key: BTreeMap::new(),
            relays: Vec::new(),
            by_url: BTreeMap::new(),
            pairs: BTreeMap::new(),
            current: BTreeMap::new(),
            session: Session::default(),
            free: Vec::new(),
            future_lists: 0,
            restored: false,
            probe_from: None,
        };
        for url in router.config.indexers.clone() {
            if let Ok(url) = relay_url::normalize(&url, true) {
                if let Some(ix) = router.relay_ix(&url) {
                    router.relays[ix as usize].indexer = true;
                }
            }
        }
        router
    }

    /// The configuration it runs by.
    pub fn config(&self) -> &RouterConfig {
        &self.config
    }

    /// The wall clock read `unix_secs` at `now`: what learned evidence decays by.
    pub fn set_wall_clock(&mut self, now: Instant, unix_secs: u64) {
        let now = self.clock.observe(now);
        self.wall = Some(WallClock::new(now, unix_secs));
        self.drop_future_lists(unix_secs);
    }

    /// Lists refused for being dated too far ahead ([`ListUpdate::FromTheFuture`]).
    pub fn future_lists(&self) -> u64 {
        self.future_lists
    }

    /// Start a new run in a long-lived process: the probe budget
    /// ([`RouterConfig::max_probes`]) is whole again and silences are judged afresh. What
    /// was learned (lists, tallies, health) stays. The pool calls it every
    /// [`ROUTER_WINDOW`](crate::pool::ROUTER_WINDOW); a process that restarts starts one
    /// anyway.
    pub fn new_window(&mut self) {
        let waiting = std::mem::take(&mut self.session.waiting);
        self.session = Session {
            waiting,
            ..Session::default()
        };
        for author in &mut self.authors {
            author.moved = false;
            author.moved_to.clear();
        }
    }

    /// Follow `authors` (hex public keys), in addition to those followed already.
    ///
    /// # Errors
    /// [`RouterError::BadPublicKey`] (nothing is followed then), or
    /// [`RouterError::TooManyAuthors`] (those before the bound are followed).
    pub fn follow<'a>(
        &mut self,
        authors: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), RouterError> {
        let authors: Vec<&str> = authors.into_iter().collect();
        if let Some(bad) = authors.iter().find(|a| !lists::is_hex64(a)) {
            return Err(RouterError::BadPublicKey((*bad).to_owned()));
        }
        for key in authors {
            let Some(ix) = self.author_ix(key) else {
                return Err(RouterError::TooManyAuthors {
                    max: self.config.max_authors,
                });
            };
            if !self.authors[ix as usize].followed {
                self.authors[ix as usize].followed = true;
                self.count_declarations(ix, 1);
            }
        }
        Ok(())
    }

    /// Watch `author`'s lists without following them (an inbox owner, the author or a
    /// recipient of a publish): their lists are taken, and no feed asks about them.
    ///
    /// # Errors
    /// As [`Router::follow`].
    pub fn watch(&mut self, author: &str) -> Result<(), RouterError> {
        if !lists::is_hex64(author) {
            return Err(RouterError::BadPublicKey(author.to_owned()));
        }
        let Some(ix) = self.author_ix(author) else {
            return Err(RouterError::TooManyAuthors {
                max: self.config.max_authors,
            });
        };
        self.authors[ix as usize].watched = true;
        Ok(())
    }

    /// Set the connection budget ([`RouterConfig::max_relays`]): a pool lowers it by the
    /// inbox relays it holds beside the routes.
    pub fn set_max_relays(&mut self, max: usize) {
        self.config.max_relays = max;
    }

    /// Stop following `author`; what was learned about them is kept.
    pub fn unfollow(&mut self, author: &str) {
        let Some(&ix) = self.by_key.get(author) else {
            return;
        };
        if self.authors[ix as usize].followed {
            self.authors[ix as usize].followed = false;
            self.count_declarations(ix, -1);
        }
    }

    /// The authors followed, in the order they were first followed.
    pub fn followed(&self) -> impl Iterator<Item = &str> {
        self.authors
            .iter()
            .filter(|a| a.followed)
            .map(|a| a.key.as_str())
    }

    /// A relay list event (kind 10002 or 10050) from any relay, of someone followed or
    /// watched. The caller has checked its id and signature (a pool always does): the
    /// router reads only its fields.
    ///
    /// # Errors
    /// [`ListError`] for an event that is no relay list.
    pub fn handle_list(&mut self, now: Instant, json: &str) -> Result<ListUpdate, ListError> {
        let _ = self.clock.observe(now);
        let parsed = lists::parse(
            json,
            self.config.max_list_relays,
            self.config.allow_private_relays,
        )?;
        let Some(&ix) = self.by_key.get(&parsed.author) else {
            return Ok(ListUpdate::NotWanted);
        };
        let wanted = &self.authors[ix as usize];
        if !wanted.followed && !wanted.watched {
            return Ok(ListUpdate::NotWanted);
        }
        if self
            .wall
            .is_some_and(|_| parsed.created_at > self.unix_now().saturating_add(MAX_LIST_SKEW))
        {
            self.future_lists = self.future_lists.saturating_add(1);
            return Ok(ListUpdate::FromTheFuture);
        }
        let held = match parsed.kind {
            ListKind::Outbox => &self.authors[ix as usize].outbox,
            ListKind::Inbox => &self.authors[ix as usize].inbox,
        };
        if held.as_ref().is_some_and(|l| !newer(&parsed, l)) {
            return Ok(ListUpdate::Stale);
        }
        let replaces = held.is_some();
        let mut list = List {
            created_at: parsed.created_at,
            id: parsed.id,
            write: Vec::new(),
            read: Vec::new(),
        };
        let mut refused = parsed.refused;
        // Room is made once, before any entry is added: forgetting in the middle would
        // forget this list's own first entries, which no list refers to yet.
        let new = parsed
            .entries
            .iter()
            .filter(|e| !self.by_url.contains_key(&e.url))
            .count();
        let room = self.free.len()
            + self
                .config
                .max_known_relays
                .saturating_sub(self.relays.len());
        if new > room {
            self.forget_unused_relays();
        }
        for entry in &parsed.entries {
            let Some(relay) = self.add_relay(&entry.url, false) else {
                refused += 1;
                continue;
            };
            if entry.write {
                list.write.push(relay);
            }
            if entry.read {
                list.read.push(relay);
            }
        }
        let relays = list.write.iter().chain(&list.read).into_set().len();
        let followed = self.authors[ix as usize].followed;
        if followed && parsed.kind == ListKind::Outbox {
            self.count_declarations(ix, -1);
        }
        let author = &mut self.authors[ix as usize];
        match parsed.kind {
            ListKind::Outbox => {
                if replaces {
                    let old = author
                        .outbox
                        .as_ref()
                        .map(|l| l.write.clone())
                        .unwrap_or_default();
                    let added: Vec<u32> = list
                        .write
                        .iter()
                        .copied()
                        .filter(|r| !old.contains(r))
                        .collect();
                    author.moved = true;
                    // A list that only re-dates or drops relays moves no one anywhere new.
                    if !added.is_empty() {
                        author.moved_to = added;
                    }
                }
                author.outbox = Some(list);
            }
            ListKind::Inbox => author.inbox = Some(list),
        }
        if followed && parsed.kind == ListKind::Outbox {
            self.count_declarations(ix, 1);
        }
        Ok(ListUpdate::Applied {
            author: parsed.author,
            kind: parsed.kind,
            relays,
            refused,
        })
    }

    /// The relays `author`'s outbox list declares for writing, in the list's order.
    pub fn write_relays(&self, author: &str) -> Vec<&str> {
        self.list_urls(author, ListKind::Outbox, true)
    }

    /// Where `author` receives direct messages (NIP-17): their kind 10050 relays, or
    /// without that list the read relays of their kind 10002.
    pub fn inbox_relays(&self, author: &str) -> Vec<&str> {
        let dm = self.list_urls(author, ListKind::Inbox, false);
        if dm.is_empty() {
            self.list_urls(author, ListKind::Outbox, false)
        } else {
            dm
        }
    }

    /// Where an event by `author` that p-tags `tagged` should be published: the author's
    /// write relays, then each tagged person's read relays (their DM relays for kind 1059),
    /// distinct, at most [`RouterConfig::max_relays`].
    pub fn publish_relays(&self, author: &str, kind: u64, tagged: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let add = |urls: Vec<&str>, out: &mut Vec<String>| {
            for url in urls {
                if out.len() < self.config.max_relays && !out.iter().any(|u| u == url) {
                    out.push(url.to_owned());
                }
            }
        };
        add(self.write_relays(author), &mut out);
        for person in tagged {
            let urls = if kind == 1059 {
                self.inbox_relays(person)
            } else {
                self.list_urls(person, ListKind::Outbox, false)
            };
            add(urls, &mut out);
        }
        out
    }

    /// `url` delivered an event by `author` (an event the subscription's filter matched; the
    /// pool checks that before it delivers).
    pub fn handle_event(&mut self, now: Instant, url: &str, author: &str) {
        let _ = self.clock.observe(now);
        let (Some(&relay), Some(&ix)) = (self.by_url.get(url), self.by_key.get(author)) else {
            return;
        };
        let count = self.session.delivered.entry((relay, ix)).or_insert(0);
        *count = count.saturating_add(1);
    }

    /// `url` answered EOSE to a request for `asked`, with the user's filter as it is (its
    /// whole history): each asked author it delivered nothing for is a silence, counted as
    /// a miss once the author's events come from elsewhere. An EOSE with nobody asked (the
    /// lists on an indexer) only says the relay answers.
    pub fn handle_eose<'a>(
        &mut self,
        now: Instant,
        url: &str,
        asked: impl IntoIterator<Item = &'a str>,
    ) {
        self.eose(now, url, asked, true);
    }

    /// `url` answered EOSE to a request for `asked` from a catch-up window (a route move):
    /// what it delivered counts, its silence does not (the window may hold nothing of an
    /// author the relay does hold).
    pub fn handle_window_eose<'a>(
        &mut self,
        now: Instant,
        url: &str,
        asked: impl IntoIterator<Item = &'a str>,
    ) {
        self.eose(now, url, asked, false);
    }

    fn eose<'a>(
        &mut self,
        now: Instant,
        url: &str,
        asked: impl IntoIterator<Item = &'a str>,
        full_history: bool,
    ) {
        let _ = self.clock.observe(now);
        let Some(&relay) = self.by_url.get(url) else {
            return;
        };
        self.answered(relay);
        let unix = self.unix_now();
        for author in asked {
            let Some(&ix) = self.by_key.get(author) else {
                continue;
            };
            let early = self.authors[ix as usize].moved && self.declares_write(ix, relay);
            let count = self
                .session
                .delivered
                .get(&(relay, ix))
                .copied()
                .unwrap_or(0);
            if count > 0 {
                self.hit(ix, relay, count, unix);
            } else if !full_history || early {
                // Silence on a window, or on the relay an author just moved to (their
                // notes there may not exist yet), says nothing.
            } else if self.session.best.get(&ix).copied().unwrap_or(0) > 0 {
                self.miss(ix, relay, unix);
            } else {
                let pending = self.session.pending.entry(ix).or_default();
                if !pending.contains(&relay) && pending.len() < self.config.max_relays * 4 {
                    pending.push(relay);
                }
            }
        }
    }

    /// `url` answered on its socket with something other than an EOSE (a rate limit, a
    /// subscription cap, an AUTH challenge): it is alive and no longer waited for.
    pub fn handle_alive(&mut self, now: Instant, url: &str) {
        let _ = self.clock.observe(now);
        if let Some(&relay) = self.by_url.get(url) {
            self.answered(relay);
        }
    }

    /// Whether `url` may be dialed at `now`: unknown, connected, or past its backoff.
    pub fn usable(&self, url: &str, now: Instant) -> bool {
        self.by_url
            .get(url)
            .is_none_or(|&r| self.relays[r as usize].health.usable(now))
    }

    /// Whether `url` has answered a request about `author` before, in this run or an
    /// earlier one (it holds evidence about the pair): only such a relay is asked from a
    /// catch-up window; any other is asked the whole history.
    pub fn has_answered_for(&self, author: &str, url: &str) -> bool {
        let (Some(&a), Some(&r)) = (self.by_key.get(author), self.by_url.get(url)) else {
            return false;
        };
        self.pairs.contains_key(&(a, r))
    }

    /// `url`'s socket opened. Its failures stand until it answers
    /// ([`Router::handle_eose`]): a relay that accepts and closes at once is dead too.
    pub fn handle_opened(&mut self, now: Instant, url: &str) {
        let _ = self.clock.observe(now);
        if let Some(relay) = self.known_relay(url) {
            relay.health.opened();
        }
    }

    /// `url`'s socket closed after it had opened (a failure to open is
    /// [`Router::handle_failed`]). Returns whether that counts as a failure: it closed
    /// before the relay's first answer.
    pub fn handle_closed(&mut self, now: Instant, url: &str) -> bool {
        let now = self.clock.observe(now);
        let (max, window) = (self.config.max_attempts, self.config.retry_window);
        let Some(&ix) = self.by_url.get(url) else {
            return false;
        };
        self.session.waiting.remove(&ix);
        self.relays[ix as usize].health.closed(now, max, window)
    }

    /// A connection to `url` failed.
    pub fn handle_failed(&mut self, now: Instant, url: &str) {
        let now = self.clock.observe(now);
        let (max, window) = (self.config.max_attempts, self.config.retry_window);
        let Some(&ix) = self.by_url.get(url) else {
            return;
        };
        self.session.waiting.remove(&ix);
        self.relays[ix as usize].health.failed(now, max, window);
    }

    /// `url` refused to serve. A rate limit is an answer (the relay is alive); the other
    /// refusals count as failures.
    pub fn handle_refused(&mut self, now: Instant, url: &str, why: Refusal) {
        let now = self.clock.observe(now);
        let (max, window) = (self.config.max_attempts, self.config.retry_window);
        let Some(&ix) = self.by_url.get(url) else {
            return;
        };
        if matches!(why, Refusal::RateLimited(_)) {
            self.answered(ix);
        } else {
            self.session.waiting.remove(&ix);
        }
        self.relays[ix as usize]
            .health
            .refused(now, why, max, window);
    }

    /// A liveness hint (NIP-66 kind 30166, or the application's own list): `alive` or not.
    /// It weighs a relay's estimate; it never rules a relay out.
    pub fn hint_live(&mut self, url: &str, alive: bool) {
        let Ok(url) = relay_url::normalize(url, true) else {
            return;
        };
        if let Some(relay) = self.known_relay(&url) {
            relay.health.hinted_dead = !alive;
        }
    }

    /// The earliest time a relay waiting out its backoff may be tried again: route again
    /// then. A backoff already over is not one: routing saw the relay usable (a past time
    /// here would route again every time, for ever).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let now = self.clock.now();
        let answers = self
            .session
            .waiting
            .values()
            .map(|&t| t.saturating_add(ANSWER_DEADLINE));
        self.relays
            .iter()
            .filter_map(|r| r.health.retry_at())
            .chain(answers)
            .chain(self.probe_from)
            .filter(|&t| t > now)
            .min()
    }

    /// Route: the relays to ask, within [`RouterConfig::max_relays`], and what they cover.
    /// Each call may move authors; routes already given keep their place unless a
    /// candidate is better by [`RouterConfig::hysteresis`].
    pub fn route(&mut self, now: Instant) -> Routes {
        let now = self.clock.observe(now);
        if std::mem::take(&mut self.restored) {
            self.probe_from = Some(now.saturating_add(RESTORED_PROBE_DELAY));
        }
        self.expire_silent(now);
        let chosen = plan::choose(self, now);
        let started = chosen
            .iter()
            .filter(|c| c.role == Role::Probe && self.current.get(&c.relay) != Some(&Role::Probe))
            .count();
        self.session.probes_started += started;
        self.current = chosen.iter().map(|c| (c.relay, c.role)).into_map();
        let current = &self.current;
        self.session.waiting.retain(|r, _| current.contains_key(r));
        for &relay in self.current.keys() {
            if !self.relays[relay as usize].health.has_answered() {
                self.session.waiting.entry(relay).or_insert(now);
            }
        }
        plan::routes(self, &chosen)
    }

    /// The application was away (suspended, offline) until `now`: every relay still
    /// waited for gets its whole [`ANSWER_DEADLINE`] from now.
    pub fn restart_answer_waits(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        for at in self.session.waiting.values_mut() {
            *at = now;
        }
    }

    /// Relays routed that did not answer within [`ANSWER_DEADLINE`]: each counts as a
    /// failure, and leaves the plan as any failing relay does.
    fn expire_silent(&mut self, now: Instant) {
        let (max, window) = (self.config.max_attempts, self.config.retry_window);
        let late: Vec<u32> = self
            .session
            .waiting
            .iter()
            .filter(|(_, &t)| now >= t.saturating_add(ANSWER_DEADLINE))
            .map(|(&r, _)| r)
            .collect();
        for relay in late {
            self.session.waiting.remove(&relay);
            self.relays[relay as usize].health.failed(now, max, window);
        }
    }

    /// `relay` answered on its socket: alive, and no longer waited for.
    fn answered(&mut self, relay: u32) {
        self.session.probed.insert(relay);
        self.session.waiting.remove(&relay);
        self.relays[relay as usize].health.answered();
    }

    /// How many more probes may start at `now`: the run's budget, held to a few in the
    /// first seconds after a restore.
    fn probes_left(&self, now: Instant) -> usize {
        let max = if self.probe_from.is_none_or(|t| now >= t) {
            self.config.max_probes
        } else {
            RESTORED_PROBES.min(self.config.max_probes)
        };
        max.saturating_sub(self.session.probes_started)
    }

    /// Followed authors whose events no relay has delivered: not in this run, and no
    /// tally from an earlier one.
    fn unfound(&self) -> Vec<u32> {
        let found: BTreeSet<u32> = self
            .pairs
            .iter()
            .filter(|(_, t)| t.hits > 0.0)
            .map(|(&(a, _), _)| a)
            .into_set();
        (0..self.authors.len())
            .filter_map(|i| u32::try_from(i).ok())
            .filter(|a| self.authors[*a as usize].followed && !found.contains(a))
            .collect()
    }

    /// Whether `relay` answered in this run: only then does it keep its place by
    /// hysteresis (a relay still silent has earned nothing).
    fn answered_in_run(&self, relay: u32) -> bool {
        self.session.probed.contains(&relay)
    }

    /// Authors whose lists to watch on the indexers: every followed author, for a filter of
    /// kinds 10002 and 10050.
    pub fn list_authors(&self) -> Vec<&str> {
        self.followed().collect()
    }

    // ----- internals ------------------------------------------------------------------------

    fn unix_now(&self) -> u64 {
        self.wall.map_or(0, |w| w.unix_secs(self.clock.now()))
    }

    fn half_life(&self) -> u64 {
        self.config.half_life.as_secs()
    }

    fn hit(&mut self, author: u32, relay: u32, count: u32, unix: u64) {
        let half_life = self.half_life();
        let best = self.session.best.entry(author).or_insert(0);
        if count > *best {
            let more = f64::from(count - *best);
            *best = count;
            let activity = &mut self.authors[author as usize].activity;
            activity.decay_to(unix, half_life);
            activity.hits += more;
        }
        self.pair(author, relay, unix, true);
        // Silences elsewhere before this author showed up active are misses now.
        for other in self.session.pending.remove(&author).unwrap_or_default() {
            self.miss(author, other, unix);
        }
    }

    fn miss(&mut self, author: u32, relay: u32, unix: u64) {
        self.pair(author, relay, unix, false);
    }

    fn pair(&mut self, author: u32, relay: u32, unix: u64, hit: bool) {
        let half_life = self.half_life();
        let declared = self.declares_write(author, relay);
        let tallies = &mut self.relays[relay as usize].tallies;
        let tally = if declared {
            &mut tallies.declared
        } else {
            &mut tallies.undeclared
        };
        if hit {
            tally.hit(unix, half_life);
        } else {
            tally.miss(unix, half_life);
        }
        if !self.pairs.contains_key(&(author, relay)) {
            self.make_room_for_pair(author);
        }
        let pair = self.pairs.entry((author, relay)).or_default();
        if hit {
            pair.hit(unix, half_life);
        } else {
            pair.miss(unix, half_life);
        }
    }

    /// Keep at most `max_pairs_per_author - 1` pairs of `author` before one is added: the
    /// one with the fewest hits goes, then the one that tells least beside its relay's own
    /// rate. Where an author's events were found is what routing needs; a silence on a
    /// relay that holds few authors anyway says little, while a silence on a relay asked
    /// about everyone (the popular ones) is what keeps it from counting as their cover.
    /// Forgetting a silence costs a relay being asked about them again.
    fn make_room_for_pair(&mut self, author: u32) {
        let range = (author, 0)..=(author, u32::MAX);
        if self.pairs.range(range.clone()).count() < self.config.max_pairs_per_author.max(1) {
            return;
        }
        let most = plan::most_declared(self);
        let unix = self.unix_now();
        let half_life = self.half_life();
        let weakest = self
            .pairs
            .range(range)
            .map(|(&(a, r), t)| {
                let (base, _) = plan::base_rate(self, r, self.declares_write(a, r), most);
                let mut t = *t;
                t.decay_to(unix, half_life);
                let told = (t.mean(base, PAIR_STRENGTH) - base).abs();
                ((a, r), t.hits, told)
            })
            .min_by(|a, b| {
                (a.1.total_cmp(&b.1))
                    .then(a.2.total_cmp(&b.2))
                    .then(a.0.cmp(&b.0))
            });
        if let Some((weakest, ..)) = weakest {
            self.pairs.remove(&weakest);
        }
    }

    fn declares_write(&self, author: u32, relay: u32) -> bool {
        self.authors[author as usize]
            .outbox
            .as_ref()
            .is_some_and(|l| l.write.contains(&relay))
    }

    fn count_declarations(&mut self, author: u32, by: i32) {
        let Some(list) = self.authors[author as usize].outbox.clone() else {
            return;
        };
        for relay in list.write {
            let r = &mut self.relays[relay as usize];
            r.declared_by = r.declared_by.saturating_add_signed(by);
        }
    }

    fn list_urls(&self, author: &str, kind: ListKind, write: bool) -> Vec<&str> {
        let Some(&ix) = self.by_key.get(author) else {
            return Vec::new();
        };
        let a = &self.authors[ix as usize];
        let list = match kind {
            ListKind::Outbox => a.outbox.as_ref(),
            ListKind::Inbox => a.inbox.as_ref(),
        };
        let Some(list) = list else {
            return Vec::new();
        };
        let relays = if write { &list.write } else { &list.read };
        relays
            .iter()
            .map(|&r| self.relays[r as usize].url.as_str())
            .collect()
    }

    fn known_relay(&mut self, url: &str) -> Option<&mut Relay> {
        let ix = *self.by_url.get(url)?;
        self.relays.get_mut(ix as usize)
    }

    /// The index of the author `key`, added if there is room.
    fn author_ix(&mut self, key: &str) -> Option<u32> {
        if let Some(&ix) = self.by_key.get(key) {
            return Some(ix);
        }
        if self.authors.len() >= self.config.max_authors {
            return None;
        }
        let ix = u32::try_from(self.authors.len()).ok()?;
        self.authors.push(Author {
            key: key.to_owned(),
            ..Author::default()
        });
        self.by_key.insert(key.to_owned(), ix);
        Some(ix)
    }

    /// The index of the relay `url` (normalised), added if there is room. A full table
    /// first forgets the relays nothing refers to any more.
    fn relay_ix(&mut self, url: &str) -> Option<u32> {
        self.add_relay(url, true)
    }

    /// [`Router::relay_ix`], forgetting unused relays when full only if `forget` (a restore
    /// does not: its relays are named by the lists it has yet to read).
    fn add_relay(&mut self, url: &str, forget: bool) -> Option<u32> {
        if let Some(&ix) = self.by_url.get(url) {
            return Some(ix);
        }
        if forget && self.free.is_empty() && self.relays.len() >= self.config.max_known_relays {
            self.forget_unused_relays();
        }
        let relay = Relay {
            url: url.to_owned(),
            health: Health::default(),
            tallies: RelayTallies::default(),
            declared_by: 0,
            indexer: false,
        };
        let ix = if let Some(ix) = self.free.pop() {
            self.relays[ix as usize] = relay;
            ix
        } else if self.relays.len() < self.config.max_known_relays {
            let ix = u32::try_from(self.relays.len()).ok()?;
            self.relays.push(relay);
            ix
        } else {
            return None;
        };
        self.by_url.insert(url.to_owned(), ix);
        Some(ix)
    }

    /// Forget every relay no list, tally, route or health record refers to: what superseded
    /// lists and unfollowed people left behind. Their slots are reused.
    fn forget_unused_relays(&mut self) {
        let mut used: BTreeSet<u32> = BTreeSet::new();
        for author in &self.authors {
            for list in author.outbox.iter().chain(author.inbox.iter()) {
                used.extend(list.write.iter().chain(&list.read));
            }
        }
        used.extend(self.pairs.keys().map(|&(_, r)| r));
        used.extend(self.current.keys());
        used.extend(self.session.waiting.keys());
        used.extend(self.session.delivered.keys().map(|&(r, _)| r));
        used.extend(self.session.pending.values().flatten());
        for (i, relay) in self.relays.iter_mut().enumerate() {
            let Ok(ix) = u32::try_from(i) else {
                break;
            };
            let learned = !relay.tallies.declared.faded()
                || !relay.tallies.undeclared.faded()
                || relay.health.failures > 0
                || relay.health.connected;
            if used.contains(&ix) || relay.indexer || learned || relay.url.is_empty() {
                continue;
            }
            self.by_url.remove(&relay.url);
            self.session.probed.remove(&ix);
            *relay = Relay {
                url: String::new(),
                health: Health::default(),
                tallies: RelayTallies::default(),
                declared_by: 0,
                indexer: false,
            };
            self.free.push(ix);
        }
        // Lowest slots first, so the same inputs reuse the same slots.
        crate::sort::sort_by(&mut self.free, |a, b| b.cmp(a));
    }

    /// Drop the lists dated past [`MAX_LIST_SKEW`] ahead of `unix` (a restored one, or
    /// one taken before the wall clock was known): the author's genuine list replaces it.
    fn drop_future_lists(&mut self, unix: u64) {
        let limit = unix.saturating_add(MAX_LIST_SKEW);
        for ix in 0..self.authors.len() {
            let author = &self.authors[ix];
            let future = |l: &Option<List>| l.as_ref().is_some_and(|l| l.created_at > limit);
            let (outbox, inbox) = (future(&author.outbox), future(&author.inbox));
            if outbox && author.followed {
                self.count_declarations(u32::try_from(ix).unwrap_or(u32::MAX), -1);
            }
            let author = &mut self.authors[ix];
            if outbox {
                author.outbox = None;
            }
            if inbox {
                author.inbox = None;
            }
            self.future_lists += u64::from(outbox) + u64::from(inbox);
        }
    }
}

/// Whether `key` is a public key as the router takes them: 64 lowercase hex digits.
pub fn is_public_key(key: &str) -> bool {
    lists::is_hex64(key)
}

/// Whether `parsed` replaces `held`: a newer `created_at`, or the lower id at the same
/// second (NIP-01's rule for replaceable events).
fn newer(parsed: &lists::ParsedList, held: &List) -> bool {
    parsed.created_at > held.created_at
        || (parsed.created_at == held.created_at && parsed.id < held.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_window_renews_the_probe_budget_and_keeps_what_was_learned() {
        let mut router = Router::new(RouterConfig::default());
        let author = "a".repeat(64);
        router.follow([author.as_str()]).unwrap();
        router.session.probes_started = router.config.max_probes;
        router.session.probed.insert(0);
        router.new_window();
        assert_eq!(router.session.probes_started, 0);
        assert!(router.session.probed.is_empty());
        assert_eq!(router.followed().collect::<Vec<_>>(), [author.as_str()]);
    }
}
