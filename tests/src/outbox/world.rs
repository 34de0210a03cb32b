//! A seeded synthetic outbox world: relays, the follows' relay lists (kind 10002) and where
//! their events really are.
//!
//! Calibrated to the nostrability outbox benchmark's published statistics
//! (github.com/nostrability/outbox): about 58% of follows publish a relay list, only about 37%
//! of declared (author, write relay) pairs work (the relay is live and really holds the author's
//! events), about 30% of declared relay entries are dead, and relay popularity has a long tail.
//! [`World::stats`] measures those numbers on a generated world; a test holds them in range.
//!
//! The model: every author's client writes to 1-4 "store" relays drawn by popularity, and
//! that is the truth. A relay list is a partial, aging picture of it: most store relays are
//! declared, plus stale entries (relays once used, now abandoned or dead) and a few read-only
//! ones. A dead relay serves nothing, even if an author still writes to it.

use std::collections::HashSet;

use tether_core::Rng;

use super::sample::{self, Weighted};
use crate::sim::UNIX_START;

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldConfig {
    /// Everything is drawn from this.
    pub seed: u64,
    /// How many authors the user follows (every author of the world is a follow).
    pub follows: usize,
    /// How many content relays exist (indexers not included).
    pub relays: usize,
    /// The window the session asks for, in days; events are spread over it.
    pub days: u32,
}

impl WorldConfig {
    /// A 7-day window over `300 + follows / 2` relays: a bigger follow list reaches further
    /// into the long tail.
    #[must_use]
    pub fn new(seed: u64, follows: usize) -> Self {
        WorldConfig {
            seed,
            follows,
            relays: 300 + follows / 2,
            days: 7,
        }
    }
}

/// One relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRelay {
    /// `wss://r{i}.example` (unique); the only part of a relay a strategy may read.
    pub url: String,
    /// Whether it accepts connections and serves (ground truth, for scoring only).
    pub live: bool,
    /// Live: connect plus the first answer, in ms. Dead: how long connecting takes before it
    /// fails (a fast refusal or a timeout). Ground truth, for the runner only.
    pub latency_ms: u64,
    /// One of the few big relays at the head of the popularity curve (always live).
    pub big: bool,
}

/// How a relay list marks an entry (NIP-65).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marker {
    /// `read`: where the author reads (its inbox).
    Read,
    /// `write`: where the author publishes (its outbox).
    Write,
    /// No marker: both read and write.
    Both,
}

impl Marker {
    /// Whether the entry declares an outbox (`write` or unmarked).
    #[must_use]
    pub fn is_write(self) -> bool {
        matches!(self, Marker::Write | Marker::Both)
    }

    /// Whether the entry declares an inbox (`read` or unmarked).
    #[must_use]
    pub fn is_read(self) -> bool {
        matches!(self, Marker::Read | Marker::Both)
    }
}

/// One entry of a relay list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// Index into [`World::relays`].
    pub relay: usize,
    /// Its marker.
    pub marker: Marker,
}

/// One note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimEvent {
    /// Unique in the world (numbered from 0 in generation order).
    pub id: u64,
    /// Unix seconds, inside the window ([`World::window`]).
    pub created_at: u64,
    /// The relays that hold it (live store relays of its author; each got it with
    /// probability 0.9).
    pub on: Vec<usize>,
}

/// One followed author.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimAuthor {
    /// 64 lowercase hex characters, unique, derived from the seed.
    pub pubkey: String,
    /// The relay list as the indexers serve it; `None` if the author never published one.
    pub list: Option<Vec<Declared>>,
    /// Where the author's client really writes (ground truth, for scoring only).
    pub stores: Vec<usize>,
    /// The author's events in the window (ground truth, for scoring only).
    pub events: Vec<SimEvent>,
}

/// The world's calibration numbers, measured.
#[derive(Clone, Debug, PartialEq)]
pub struct WorldStats {
    /// Authors.
    pub authors: usize,
    /// Share of authors with a relay list (target ~0.58).
    pub with_list: f64,
    /// Share of declared write-capable (author, relay) pairs where the relay is live and the
    /// author writes there (target ~0.37).
    pub working_pairs: f64,
    /// Share of declared relay entries (any marker) whose relay is dead (target ~0.30).
    pub declared_dead: f64,
    /// Events in the window.
    pub events_total: usize,
    /// Events held by at least one live relay: the most any strategy can recall.
    pub events_reachable: usize,
    /// Reachable events whose author has a relay list.
    pub events_reachable_listed: usize,
}

/// The generated world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// What it was generated from.
    pub config: WorldConfig,
    /// Content relays, by popularity rank: index 0 is the most popular.
    pub relays: Vec<SimRelay>,
    /// The two indexer relays: live, hold every relay list and no notes. A session reads the
    /// lists from them before it starts; they are not in [`World::relays`].
    pub indexers: Vec<SimRelay>,
    /// The follows.
    pub authors: Vec<SimAuthor>,
}

impl World {
    /// The world `config` describes; the same config always gives the same world.
    #[must_use]
    pub fn generate(config: &WorldConfig) -> World {
        let mut rng = Rng::new(config.seed);
        let relays = gen_relays(&mut rng, config.relays);
        let popularity = Weighted::new((0..relays.len()).map(zipf_weight));
        let uniform = Weighted::new(relays.iter().map(|_| 1.0));
        let (start, end) = window(config.days);
        let mut pubkeys = HashSet::new();
        let mut next_id = 0u64;
        // Exactly the benchmark's share has a list (who, is drawn): a 200-follow world would
        // otherwise wander by a few points from coin flips alone.
        let mut listed = vec![false; config.follows];
        let with_list = (LIST_SHARE * config.follows as f64).round() as usize;
        listed[..with_list].fill(true);
        sample::shuffle(&mut rng, &mut listed);
        let authors = listed
            .into_iter()
            .map(|has_list| {
                let pubkey = unique_pubkey(&mut rng, &mut pubkeys);
                let stores = draw_stores(&mut rng, &popularity);
                let list = has_list.then(|| draw_list(&mut rng, &stores, &popularity, &uniform));
                let events = draw_events(
                    &mut rng,
                    &relays,
                    &stores,
                    config.days,
                    (start, end),
                    &mut next_id,
                );
                SimAuthor {
                    pubkey,
                    list,
                    stores,
                    events,
                }
            })
            .collect();
        World {
            config: config.clone(),
            relays,
            indexers: (0..2)
                .map(|i| SimRelay {
                    url: format!("wss://indexer{i}.example"),
                    live: true,
                    latency_ms: 140 + 20 * i as u64,
                    big: false,
                })
                .collect(),
            authors,
        }
    }

    /// The calibration numbers of this world.
    #[must_use]
    pub fn stats(&self) -> WorldStats {
        let (mut listed, mut write_pairs, mut working, mut entries, mut dead) = (0, 0, 0, 0, 0);
        let (mut total, mut reachable, mut reachable_listed) = (0, 0, 0);
        for author in &self.authors {
            if let Some(list) = &author.list {
                listed += 1;
                for d in list {
                    entries += 1;
                    let live = self.relays[d.relay].live;
                    dead += usize::from(!live);
                    if d.marker.is_write() {
                        write_pairs += 1;
                        working += usize::from(live && author.stores.contains(&d.relay));
                    }
                }
            }
            for event in &author.events {
                total += 1;
                if self.reachable(event) {
                    reachable += 1;
                    reachable_listed += usize::from(author.list.is_some());
                }
            }
        }
        let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        WorldStats {
            authors: self.authors.len(),
            with_list: share(listed, self.authors.len()),
            working_pairs: share(working, write_pairs),
            declared_dead: share(dead, entries),
            events_total: total,
            events_reachable: reachable,
            events_reachable_listed: reachable_listed,
        }
    }

    /// This world as it is during `session` (1-based): each live relay outside the big head
    /// is down with probability 0.02 for that session (a transient outage: connecting times
    /// out), drawn from the seed and the session. The lists and events do not change, so a
    /// strategy sees the same public knowledge; only what answers differs.
    /// [`run_sessions`](super::run_sessions) uses the world as given: pass a variation to
    /// [`run_session`](super::run_session) to score with churn.
    #[must_use]
    pub fn session_variation(&self, session: u32) -> World {
        let mut rng = Rng::new(self.config.seed ^ (u64::from(session) << 32) ^ 0x5e55_1011);
        let mut world = self.clone();
        for relay in world.relays.iter_mut().filter(|r| r.live && !r.big) {
            if sample::chance(&mut rng, 0.02) {
                relay.live = false;
                relay.latency_ms = TIMEOUT_MS;
            }
        }
        world
    }

    /// The window's bounds in unix seconds, `[start, end)`.
    #[must_use]
    pub fn window(&self) -> (u64, u64) {
        window(self.config.days)
    }

    /// Whether some live relay holds `event`.
    #[must_use]
    pub fn reachable(&self, event: &SimEvent) -> bool {
        event.on.iter().any(|&r| self.relays[r].live)
    }
}

/// Share of authors with a relay list (the benchmark's ~58%).
const LIST_SHARE: f64 = 0.58;
/// The big relays at the head: always live.
const BIG: usize = 10;
/// How long a connection to an unanswering address takes to give up.
const TIMEOUT_MS: u64 = 10_000;
/// A refused connection or a failed DNS lookup.
const FAST_FAIL_MS: u64 = 300;
/// The popularity curve's exponent.
const ZIPF: f64 = 1.1;
/// Most stale write entries in one list (uniform from 0). Tuned so ~37% of declared write
/// pairs work.
const STALE_MAX: usize = 4;
/// Chance that the last relay of the tail is dead; the head is far healthier. Tuned so ~30%
/// of declared entries are dead.
const TAIL_DEAD: f64 = 0.62;
/// Chance that a relay just after the big head is dead.
const HEAD_DEAD: f64 = 0.10;

fn zipf_weight(rank: usize) -> f64 {
    1.0 / ((rank + 1) as f64).powf(ZIPF)
}

fn window(days: u32) -> (u64, u64) {
    (UNIX_START - u64::from(days) * 86_400, UNIX_START)
}

fn gen_relays(rng: &mut Rng, n: usize) -> Vec<SimRelay> {
    (0..n)
        .map(|i| {
            let big = i < BIG;
            // Dead chance climbs with log-rank: the head is maintained, the tail is where
            // hobby relays go quiet.
            let dead_p = if big {
                0.0
            } else {
                let x = ((i + 1 - BIG) as f64).ln() / ((n.max(BIG + 2) - BIG) as f64).ln();
                HEAD_DEAD + (TAIL_DEAD - HEAD_DEAD) * x
            };
            let live = !sample::chance(rng, dead_p);
            let latency_ms = if live {
                // Big relays are well provisioned: the low half of the range.
                let hi = if big { 300.0 } else { 600.0 };
                rng.range_f64(80.0, hi) as u64
            } else if sample::chance(rng, 0.4) {
                FAST_FAIL_MS
            } else {
                TIMEOUT_MS
            };
            SimRelay {
                url: format!("wss://r{i}.example"),
                live,
                latency_ms,
                big,
            }
        })
        .collect()
}

fn unique_pubkey(rng: &mut Rng, seen: &mut HashSet<String>) -> String {
    loop {
        let key: String = (0..4).map(|_| format!("{:016x}", rng.next_u64())).collect();
        if seen.insert(key.clone()) {
            return key;
        }
    }
}

/// 1-4 relays (30/35/25/10%) by popularity, without replacement; dead ones included.
fn draw_stores(rng: &mut Rng, popularity: &Weighted) -> Vec<usize> {
    let u = rng.unit();
    let k = match u {
        u if u < 0.30 => 1,
        u if u < 0.65 => 2,
        u if u < 0.90 => 3,
        _ => 4,
    };
    popularity.draw_distinct(rng, k, &[])
}

/// A relay list: most store relays, stale write entries, a few read-only ones, shuffled
/// (lists are in whatever order the author's client wrote them).
fn draw_list(
    rng: &mut Rng,
    stores: &[usize],
    popularity: &Weighted,
    uniform: &Weighted,
) -> Vec<Declared> {
    let write_marker = |rng: &mut Rng| {
        if sample::chance(rng, 0.6) {
            Marker::Both
        } else {
            Marker::Write
        }
    };
    let mut list: Vec<Declared> = Vec::new();
    for &relay in stores {
        if sample::chance(rng, 0.8) {
            let marker = write_marker(rng);
            list.push(Declared { relay, marker });
        }
    }
    // Stale entries are never store relays: they are where the author no longer writes.
    let stale = sample::below(rng, STALE_MAX + 1);
    for _ in 0..stale {
        let mut taken: Vec<usize> = stores.to_vec();
        taken.extend(list.iter().map(|d| d.relay));
        let table = if sample::chance(rng, 0.5) {
            popularity
        } else {
            uniform
        };
        if let Some(&relay) = table.draw_distinct(rng, 1, &taken).first() {
            let marker = write_marker(rng);
            list.push(Declared { relay, marker });
        }
    }
    let reads = sample::below(rng, 3);
    let taken: Vec<usize> = list.iter().map(|d| d.relay).collect();
    for relay in popularity.draw_distinct(rng, reads, &taken) {
        list.push(Declared {
            relay,
            marker: Marker::Read,
        });
    }
    sample::shuffle(rng, &mut list);
    list
}

/// Events for one author: 25% post nothing; the rest a log-normal weekly count (median 8,
/// a tail into the hundreds), capped at 500 a week, scaled to the window.
fn draw_events(
    rng: &mut Rng,
    relays: &[SimRelay],
    stores: &[usize],
    days: u32,
    (start, end): (u64, u64),
    next_id: &mut u64,
) -> Vec<SimEvent> {
    if sample::chance(rng, 0.25) {
        return Vec::new();
    }
    let weekly = (8f64.ln() + 1.3 * sample::normal(rng))
        .exp()
        .clamp(1.0, 500.0);
    let count = (weekly * f64::from(days) / 7.0).round().max(1.0) as usize;
    let span = (end - start).max(1);
    let mut events: Vec<SimEvent> = (0..count)
        .map(|_| {
            let on = stores
                .iter()
                .copied()
                .filter(|&r| relays[r].live)
                .filter(|_| sample::chance(rng, 0.9))
                .collect();
            let id = *next_id;
            *next_id += 1;
            SimEvent {
                id,
                created_at: start + sample::below(rng, span as usize) as u64,
                on,
            }
        })
        .collect();
    events.sort_by_key(|e| (e.created_at, e.id));
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_world_other_seed_other_world() {
        let a = World::generate(&WorldConfig::new(1, 200));
        let b = World::generate(&WorldConfig::new(1, 200));
        let c = World::generate(&WorldConfig::new(2, 200));
        assert_eq!(a, b);
        assert_ne!(a.authors, c.authors);
        assert_ne!(a.relays, c.relays);
    }

    #[test]
    fn shape_of_a_world() {
        let world = World::generate(&WorldConfig::new(3, 400));
        assert_eq!(world.relays.len(), 500);
        assert_eq!(world.authors.len(), 400);
        assert_eq!(world.indexers.len(), 2);
        assert!(world.indexers.iter().all(|r| r.live));
        let urls: HashSet<&str> = world.relays.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls.len(), world.relays.len());
        assert_eq!(world.relays[7].url, "wss://r7.example");
        assert!(world.relays.iter().take(BIG).all(|r| r.big && r.live));
        assert!(world.relays.iter().skip(BIG).all(|r| !r.big));
        let keys: HashSet<&str> = world.authors.iter().map(|a| a.pubkey.as_str()).collect();
        assert_eq!(keys.len(), world.authors.len());
        assert!(world.authors.iter().all(|a| a.pubkey.len() == 64
            && a.pubkey
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))));
        let (start, end) = world.window();
        assert_eq!(end - start, 7 * 86_400);
        let mut ids = HashSet::new();
        for author in &world.authors {
            assert!((1..=4).contains(&author.stores.len()));
            assert!(author.events.len() <= 500);
            for event in &author.events {
                assert!(ids.insert(event.id));
                assert!((start..end).contains(&event.created_at));
                assert!(event.on.iter().all(|r| author.stores.contains(r)));
                assert!(event.on.iter().all(|&r| world.relays[r].live));
            }
            if let Some(list) = &author.list {
                let relays: HashSet<usize> = list.iter().map(|d| d.relay).collect();
                assert_eq!(relays.len(), list.len(), "a relay is declared once");
            }
        }
        for relay in &world.relays {
            if relay.live {
                assert!((80..600).contains(&relay.latency_ms));
            } else {
                assert!([FAST_FAIL_MS, TIMEOUT_MS].contains(&relay.latency_ms));
            }
        }
    }

    #[test]
    fn calibrated_to_the_benchmark() {
        for follows in [200, 2000] {
            for seed in [1, 2, 3] {
                let stats = World::generate(&WorldConfig::new(seed, follows)).stats();
                let msg = format!("follows {follows} seed {seed}: {stats:?}");
                assert!((stats.with_list - 0.58).abs() <= 0.04, "{msg}");
                assert!((stats.working_pairs - 0.37).abs() <= 0.05, "{msg}");
                assert!((stats.declared_dead - 0.30).abs() <= 0.06, "{msg}");
                assert!(stats.events_reachable <= stats.events_total);
                assert!(stats.events_reachable_listed <= stats.events_reachable);
                // 75% post, median 8 a week with a heavy tail: well over 8 per follow on
                // average, well under 100.
                let per_follow = stats.events_total as f64 / follows as f64;
                assert!((8.0..40.0).contains(&per_follow), "{msg}");
            }
        }
    }

    #[test]
    fn session_variation_keeps_public_knowledge_and_the_head() {
        let world = World::generate(&WorldConfig::new(4, 300));
        let s2 = world.session_variation(2);
        assert_eq!(s2, world.session_variation(2));
        assert_ne!(s2.relays, world.session_variation(3).relays);
        assert_eq!(s2.authors, world.authors);
        let down = world
            .relays
            .iter()
            .zip(&s2.relays)
            .filter(|(a, b)| a.live && !b.live)
            .count();
        assert!((1..30).contains(&down), "{down}");
        assert!(s2.relays.iter().all(|r| !r.big || r.live));
        assert!(world
            .relays
            .iter()
            .zip(&s2.relays)
            .all(|(a, b)| a.live || !b.live));
    }
}
