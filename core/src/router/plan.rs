//! Choosing the routes: candidates with estimates, a lazy greedy over expected new events
//! within the budget, then the probe slots.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::evidence::{
    DECLARED_PRIOR, DECLARED_STRENGTH, PAIR_STRENGTH, UNDECLARED_PRIOR, UNDECLARED_STRENGTH,
};
use super::{Coverage, Role, Route, Router, Routes, MOVED_SHARE};
use crate::time::Instant;
use crate::tree::IntoTree;

/// An estimate at or above this says the relay holds the author: what coverage counts.
pub(super) const BELIEVED: f64 = 0.2;
/// How much an author's second (up to `redundancy`th) relay is worth beside the expected new
/// events, as a share of its estimate: a tie-breaker. At 0.15 for every author short of the
/// target, it filled a tight budget with second relays for authors already covered while
/// others had none (the long-tail world's stored recall 88.8% against 95.9% at 0.02,
/// `outbox_shipped`).
const REDUNDANCY_BONUS: f64 = 0.02;
/// How far the uncertainty bonus lifts an unexplored pair for probing.
const EXPLORATION: f64 = 0.3;
/// The lift an undeclared pair gets on the relay most follows declare: popular relays hold
/// content beyond the lists that name them.
const POPULARITY_LIFT: f64 = 0.25;
/// A gain below this adds nothing worth a connection.
const NOTHING: f64 = 1e-3;
/// What a relay's past deliveries of an author are worth once the author's newer list
/// dropped it (one half): kept as a fallback, never above the relays they declare now.
const MOVED_AWAY: f64 = 0.5;

/// A relay chosen, and what it is asked.
#[derive(Clone, Debug)]
pub(super) struct Chosen {
    pub(super) relay: u32,
    pub(super) role: Role,
    /// `(author, estimate)`, by author.
    pub(super) asked: Vec<(u32, f64)>,
}

/// One candidate pair.
#[derive(Clone, Copy, Debug)]
struct Pair {
    author: u32,
    p: f64,
    optimistic: f64,
}

pub(super) fn choose(router: &Router, now: Instant) -> Vec<Chosen> {
    let unix = router.unix_now();
    let weights = weights(router, unix);
    let candidates = candidates(router, now);
    // Per author, indexed by the router's dense author index: looked up for every
    // candidate pair each time the greedy weighs a relay.
    let mut miss: Vec<f64> = vec![1.0; router.authors.len()];
    let mut count: Vec<usize> = vec![0; router.authors.len()];
    let mut chosen: Vec<Chosen> = Vec::new();
    let budget = router.config.max_relays;
    // Indexers first: they are connected for the lists, and asked for nothing else (they
    // keep lists, not notes).
    for (i, relay) in router.relays.iter().enumerate() {
        let Ok(ix) = u32::try_from(i) else {
            break;
        };
        if relay.indexer && relay.health.usable(now) && chosen.len() < budget {
            chosen.push(Chosen {
                relay: ix,
                role: Role::Indexer,
                asked: Vec::new(),
            });
        }
    }
    let probes_left = router.probes_left(now);
    let probe_slots = router.config.probe_slots.min(probes_left);
    let main = budget.saturating_sub(probe_slots);
    moved_floor(
        router,
        now,
        &candidates,
        main,
        &mut miss,
        &mut count,
        &mut chosen,
    );
    let weigh = |relay: u32, pairs: &[Pair], miss: &[f64], count: &[usize]| {
        // Only a relay that answered in this run has earned its place: one still
        // silent (a probe waiting, a dead relay's socket) keeps none by hysteresis.
        let sticky = if router.current.contains_key(&relay) && router.answered_in_run(relay) {
            1.0 + router.config.hysteresis
        } else {
            1.0
        };
        gain(pairs, &weights, miss, count, router.config.redundancy) * sticky
    };
    let assign = |failing: bool,
                  limit: usize,
                  chosen: &mut Vec<Chosen>,
                  miss: &mut Vec<f64>,
                  count: &mut Vec<usize>| {
        let pool: Vec<u32> = candidates
            .keys()
            .copied()
            .filter(|&r| router.relays[r as usize].health.failing() == failing)
            .filter(|r| !chosen.iter().any(|c| c.relay == *r))
            .collect();
        lazy_greedy(&pool, limit, chosen, |relay, chosen_now, take_it| {
            let pairs = &candidates[&relay];
            if take_it {
                take(chosen_now, miss, count, relay, pairs, router);
                0.0
            } else {
                weigh(relay, pairs, miss, count)
            }
        });
    };
    // Healthy relays first; failing ones only where nothing healthy adds anything.
    assign(false, main, &mut chosen, &mut miss, &mut count);
    if chosen.len() < main {
        assign(true, main, &mut chosen, &mut miss, &mut count);
    }
    probes(
        router,
        now,
        &candidates,
        &weights,
        &miss,
        &mut chosen,
        budget,
    );
    // What the probes left of the budget goes to healthy relays with expected content,
    // probed before or not: a budget is for using while anything is left to find.
    assign(false, budget, &mut chosen, &mut miss, &mut count);
    ask_for_the_unfound(router, &mut chosen);
    chosen
}

/// Authors whose newer list moved them are placed first on one usable write relay of
/// that list (the one that serves the most of them, then the best estimate), at most half
/// the main budget: the greedy then fills around them, evicting what is worth least.
fn moved_floor(
    router: &Router,
    now: Instant,
    candidates: &BTreeMap<u32, Vec<Pair>>,
    main: usize,
    miss: &mut [f64],
    count: &mut [usize],
    chosen: &mut Vec<Chosen>,
) {
    let limit = chosen.len() + main / MOVED_SHARE;
    let mut unplaced: Vec<(u32, Vec<u32>)> = router
        .authors
        .iter()
        .enumerate()
        .filter(|(_, a)| a.followed && a.moved)
        .filter_map(|(i, a)| {
            let write = &a.outbox.as_ref()?.write;
            let usable = |r: &u32| router.relays[*r as usize].health.usable(now);
            // The relays the move added first: the old ones may be held already, and the
            // notes posted after the move are on the new ones.
            let added: Vec<u32> = a
                .moved_to
                .iter()
                .copied()
                .filter(|r| write.contains(r) && usable(r))
                .collect();
            let usable = if added.is_empty() {
                write.iter().copied().filter(usable).collect()
            } else {
                added
            };
            Some((u32::try_from(i).ok()?, usable))
        })
        .filter(|(_, usable)| !usable.is_empty())
        .collect();
    while chosen.len() < limit {
        unplaced.retain(|(_, usable)| !chosen.iter().any(|c| usable.contains(&c.relay)));
        let mut serves: Vec<usize> = vec![0; router.relays.len()];
        for (_, usable) in &unplaced {
            for &r in usable {
                serves[r as usize] += 1;
            }
        }
        let best = serves
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .filter_map(|(r, &n)| Some((u32::try_from(r).ok()?, n)))
            .max_by(|a, b| {
                let p = |r: u32| pair_p(candidates, r);
                a.1.cmp(&b.1)
                    .then(p(a.0).total_cmp(&p(b.0)))
                    .then(b.0.cmp(&a.0))
            });
        let Some((relay, _)) = best else {
            return;
        };
        let movers: Vec<u32> = unplaced
            .iter()
            .filter(|(_, usable)| usable.contains(&relay))
            .map(|&(a, _)| a)
            .collect();
        let pairs = candidates.get(&relay).map_or(&[][..], Vec::as_slice);
        take(chosen, miss, count, relay, pairs, router);
        // A mover is asked there whatever the estimate says: the floor is the point.
        if let Some(last) = chosen.last_mut() {
            let new: Vec<(u32, f64)> = movers
                .into_iter()
                .filter(|&a| !last.asked.iter().any(|&(x, _)| x == a))
                .map(|a| (a, DECLARED_PRIOR))
                .collect();
            crate::sort::merge_by_key(&mut last.asked, new, |&(a, _)| a);
        }
    }
}

/// The best estimate any author has on relay `r`: what breaks ties between floor relays.
fn pair_p(candidates: &BTreeMap<u32, Vec<Pair>>, r: u32) -> f64 {
    candidates
        .get(&r)
        .map_or(0.0, |pairs| pairs.iter().map(|p| p.p).fold(0.0, f64::max))
}

/// Lazy greedy: gains only fall as relays are chosen (the objective is submodular), so a
/// relay whose re-weighed gain still tops the heap is the best one.
fn lazy_greedy(
    pool: &[u32],
    limit: usize,
    chosen: &mut Vec<Chosen>,
    mut weigh_or_take: impl FnMut(u32, &mut Vec<Chosen>, bool) -> f64,
) {
    let mut heap: BinaryHeap<Gain> = pool
        .iter()
        .map(|&relay| Gain(weigh_or_take(relay, chosen, false), relay))
        .collect();
    while chosen.len() < limit {
        let Some(Gain(_, relay)) = heap.pop() else {
            return;
        };
        let fresh = weigh_or_take(relay, chosen, false);
        if fresh <= NOTHING {
            continue;
        }
        if heap.peek().is_some_and(|next| *next > Gain(fresh, relay)) {
            heap.push(Gain(fresh, relay));
            continue;
        }
        weigh_or_take(relay, chosen, true);
    }
}

/// Route `relay` as an assigned relay, and count what it covers into `miss` and `count`.
fn take(
    chosen: &mut Vec<Chosen>,
    miss: &mut [f64],
    count: &mut [usize],
    relay: u32,
    pairs: &[Pair],
    router: &Router,
) {
    let asked = asks(pairs, Role::Assigned, router);
    for &(a, p) in &asked {
        miss[a as usize] *= 1.0 - p;
        if p >= BELIEVED {
            count[a as usize] += 1;
        }
    }
    chosen.push(Chosen {
        relay,
        role: Role::Assigned,
        asked,
    });
}

/// The authors a relay in `role` is asked about, with their estimates: those whose estimate
/// reaches the ask threshold (a probe's optimistic one, so it asks about what it may hold).
fn asks(pairs: &[Pair], role: Role, router: &Router) -> Vec<(u32, f64)> {
    let threshold = router.config.ask_threshold;
    pairs
        .iter()
        .filter(|pair| {
            let p = if role == Role::Probe {
                pair.optimistic
            } else {
                pair.p
            };
            p >= threshold
        })
        .map(|pair| (pair.author, pair.p))
        .collect()
}

fn gain(pairs: &[Pair], weights: &[f64], miss: &[f64], count: &[usize], redundancy: usize) -> f64 {
    pairs
        .iter()
        .map(|pair| {
            let a = pair.author as usize;
            let (w, m, held) = (weights[a], miss[a], count[a]);
            let bonus = if (1..redundancy).contains(&held) && pair.p >= BELIEVED {
                REDUNDANCY_BONUS * pair.p
            } else {
                0.0
            };
            w * (pair.p * m + bonus)
        })
        .sum()
}

/// Fill what is left of the budget with probes: relays not yet probed in this run, by the
/// new events an optimistic estimate expects of them. A probe still waiting for its answer
/// keeps its slot.
fn probes(
    router: &Router,
    now: Instant,
    candidates: &BTreeMap<u32, Vec<Pair>>,
    weights: &[f64],
    miss: &[f64],
    chosen: &mut Vec<Chosen>,
    budget: usize,
) {
    let mut scored: Vec<(f64, u32)> = candidates
        .iter()
        .filter(|(r, _)| !chosen.iter().any(|c| c.relay == **r))
        .filter(|(r, _)| !router.relays[**r as usize].health.failing())
        .filter(|(r, _)| !router.session.probed.contains(r))
        .map(|(&r, pairs)| {
            let waiting = router.current.get(&r) == Some(&Role::Probe);
            let score: f64 = pairs
                .iter()
                .map(|p| weights[p.author as usize] * miss[p.author as usize] * p.optimistic)
                .sum();
            (if waiting { f64::INFINITY } else { score }, r)
        })
        .filter(|(s, _)| *s > NOTHING)
        .collect();
    crate::sort::sort_by(&mut scored, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = router.probes_left(now);
    // A probe covers nothing yet: what the main set still misses is not counted down.
    for (_, relay) in scored.into_iter().take(left) {
        if chosen.len() >= budget {
            break;
        }
        chosen.push(Chosen {
            relay,
            role: Role::Probe,
            asked: asks(&candidates[&relay], Role::Probe, router),
        });
    }
}

/// Any relay may hold an author no relay has delivered yet (no list, or every relay it
/// names dead or silent), and a routed relay's connection is paid for: each is asked about
/// them too, the whole history, and its silence about them is no miss.
fn ask_for_the_unfound(router: &Router, chosen: &mut [Chosen]) {
    let unfound = router.unfound();
    let (unix, most) = (router.unix_now(), most_declared(router));
    for c in chosen.iter_mut().filter(|c| c.role != Role::Indexer) {
        // A set, not a scan per author: both lists reach `max_authors` (10 000).
        let asked: BTreeSet<u32> = c.asked.iter().map(|&(a, _)| a).into_set();
        let new: Vec<(u32, f64)> = unfound
            .iter()
            .filter(|a| !asked.contains(a))
            .map(|&a| (a, estimate(router, a, c.relay, unix, most).p))
            .collect();
        crate::sort::merge_by_key(&mut c.asked, new, |&(a, _)| a);
    }
}

/// Each followed author's weight, by author index: one, plus the log of the events they are
/// known to post, so a prolific author counts more without drowning the rest. An author no
/// one follows is never a candidate; their one is never read.
fn weights(router: &Router, unix: u64) -> Vec<f64> {
    let half_life = router.half_life();
    router
        .authors
        .iter()
        .map(|a| {
            if !a.followed {
                return 1.0;
            }
            let mut activity = a.activity;
            activity.decay_to(unix, half_life);
            1.0 + activity.hits.ln_1p()
        })
        .collect()
}

/// Every usable relay that may hold a followed author, with its pairs: declared write
/// relays, relays with evidence, and the relays most likely to hold content beyond the
/// lists, for every author.
fn candidates(router: &Router, now: Instant) -> BTreeMap<u32, Vec<Pair>> {
    let unix = router.unix_now();
    let most = most_declared(router);
    let usable = |r: u32| router.relays[r as usize].health.usable(now);
    let mut out: BTreeMap<u32, BTreeMap<u32, Pair>> = BTreeMap::new();
    let followed: Vec<u32> = router
        .authors
        .iter()
        .enumerate()
        .filter(|(_, a)| a.followed)
        .filter_map(|(i, _)| u32::try_from(i).ok())
        .collect();
    for &a in &followed {
        let Some(list) = router.authors[a as usize].outbox.as_ref() else {
            continue;
        };
        for &r in list.write.iter().filter(|&&r| usable(r)) {
            out.entry(r)
                .or_default()
                .insert(a, estimate(router, a, r, unix, most));
        }
    }
    for &(a, r) in router.pairs.keys() {
        if router.authors[a as usize].followed && usable(r) {
            out.entry(r)
                .or_default()
                .insert(a, estimate(router, a, r, unix, most));
        }
    }
    for r in wide(router, now) {
        let pairs = out.entry(r).or_default();
        for &a in &followed {
            pairs
                .entry(a)
                .or_insert_with(|| estimate(router, a, r, unix, most));
        }
    }
    out.into_iter()
        .map(|(r, pairs)| (r, pairs.into_values().collect()))
        .into_map()
}

/// The relays asked about every author: the `max_relays` relays with the best rate beyond
/// the lists (indexers keep lists, not notes).
fn wide(router: &Router, now: Instant) -> Vec<u32> {
    let most = most_declared(router);
    let mut ranked: Vec<(f64, u32)> = router
        .relays
        .iter()
        .enumerate()
        .filter(|(_, r)| r.health.usable(now) && !r.indexer)
        .filter(|(_, r)| r.declared_by > 0 || r.tallies.undeclared.weight() > 0.0)
        .filter_map(|(i, _)| {
            let r = u32::try_from(i).ok()?;
            Some((undeclared_rate(router, r, most), r))
        })
        .collect();
    crate::sort::sort_by(&mut ranked, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked
        .into_iter()
        .take(router.config.max_relays)
        .filter(|(rate, _)| *rate >= router.config.ask_threshold)
        .map(|(_, r)| r)
        .collect()
}

/// The most follows that declare any one relay: what a relay's popularity is a share of.
pub(super) fn most_declared(router: &Router) -> u32 {
    router
        .relays
        .iter()
        .map(|r| r.declared_by)
        .max()
        .unwrap_or(0)
        .max(1)
}

fn undeclared_rate(router: &Router, r: u32, most: u32) -> f64 {
    let relay = &router.relays[r as usize];
    let popularity = f64::from(relay.declared_by) / f64::from(most);
    let prior = UNDECLARED_PRIOR + POPULARITY_LIFT * popularity;
    relay.tallies.undeclared.mean(prior, UNDECLARED_STRENGTH)
}

/// What relay `r` is believed to hold of an author before their pair's own evidence (its
/// rate over the authors that declare it, or over those that do not: `declared`), and how
/// much evidence that rests on.
pub(super) fn base_rate(router: &Router, r: u32, declared: bool, most: u32) -> (f64, f64) {
    let relay = &router.relays[r as usize];
    if declared {
        let t = &relay.tallies.declared;
        (t.mean(DECLARED_PRIOR, DECLARED_STRENGTH), t.weight())
    } else {
        (
            undeclared_rate(router, r, most),
            relay.tallies.undeclared.weight(),
        )
    }
}

/// The chance that relay `r` holds author `a`'s events, and an optimistic version of it.
fn estimate(router: &Router, a: u32, r: u32, unix: u64, most: u32) -> Pair {
    let relay = &router.relays[r as usize];
    let declared = router.declares_write(a, r);
    let (base, evidence) = base_rate(router, r, declared, most);
    let (p, pair_evidence) = match router.pairs.get(&(a, r)) {
        Some(tally) => {
            let mut tally = *tally;
            tally.decay_to(unix, router.half_life());
            (tally.mean(base, PAIR_STRENGTH), tally.weight())
        }
        None => (base, 0.0),
    };
    let mut factor = relay.health.factor();
    if !declared && router.authors[a as usize].moved {
        factor *= MOVED_AWAY;
    }
    let uncertainty = 1.0 / (1.0 + evidence + 4.0 * pair_evidence).sqrt();
    Pair {
        author: a,
        p: p * factor,
        optimistic: ((p + EXPLORATION * uncertainty) * factor).min(1.0),
    }
}

/// The routes for `chosen`, and their coverage: an author is covered by the relays their
/// list declares or that delivered their events before, and served only by fallback when
/// asked only elsewhere.
pub(super) fn routes(router: &Router, chosen: &[Chosen]) -> Routes {
    // Per author index: the relays asked about them, and of those the ones grounded.
    let mut asked: Vec<usize> = vec![0; router.authors.len()];
    let mut grounded: Vec<usize> = vec![0; router.authors.len()];
    let mut relays: Vec<Route> = chosen
        .iter()
        .map(|c| {
            for &(a, _) in &c.asked {
                asked[a as usize] += 1;
                // Where a moved author was found before their new list is a fallback.
                let seen = !router.authors[a as usize].moved
                    && router
                        .pairs
                        .get(&(a, c.relay))
                        .is_some_and(|t| t.hits > 0.0);
                if seen || router.declares_write(a, c.relay) {
                    grounded[a as usize] += 1;
                }
            }
            Route {
                url: router.relays[c.relay as usize].url.clone(),
                role: c.role,
                authors: c
                    .asked
                    .iter()
                    .map(|&(a, _)| router.authors[a as usize].key.clone())
                    .collect(),
            }
        })
        .collect();
    crate::sort::sort_by(&mut relays, |a, b| {
        (a.role != Role::Indexer, &a.url).cmp(&(b.role != Role::Indexer, &b.url))
    });
    let mut coverage = Coverage {
        relays: relays.len(),
        ..Coverage::default()
    };
    for (i, author) in router.authors.iter().enumerate() {
        if !author.followed {
            continue;
        }
        match (grounded[i], asked[i]) {
            (0, 0) => coverage.uncovered.push(author.key.clone()),
            (0, _) => coverage.fallback_only.push(author.key.clone()),
            (n, _) => coverage.covered.push((author.key.clone(), n)),
        }
    }
    Routes { relays, coverage }
}

/// A gain in the heap, ordered by value then by the lower relay index (determinism).
#[derive(Clone, Copy, Debug)]
struct Gain(f64, u32);

impl PartialEq for Gain {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Gain {}

impl PartialOrd for Gain {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Gain {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::RouterConfig;

    fn list(author: &str, relay: &str) -> String {
        format!(
            r#"{{"id":"{}","pubkey":"{author}","created_at":100,"kind":10002,"tags":[["r","{relay}","write"]],"content":"","sig":""}}"#,
            "e".repeat(64)
        )
    }

    #[test]
    fn every_routed_relay_but_an_indexer_asks_about_the_authors_found_nowhere() {
        let mut router = Router::new(RouterConfig::default());
        let (one, two) = ("1".repeat(64), "2".repeat(64));
        router.follow([one.as_str(), two.as_str()]).unwrap();
        let now = Instant::from_millis(0);
        router
            .handle_list(now, &list(&two, "wss://a.example"))
            .unwrap();
        let a = router.by_url["wss://a.example"];
        let index = router.by_url[crate::router::DEFAULT_INDEXERS[0]];
        let chosen = |router: &Router| {
            let mut chosen = vec![
                Chosen {
                    relay: index,
                    role: Role::Indexer,
                    asked: Vec::new(),
                },
                Chosen {
                    relay: a,
                    role: Role::Assigned,
                    asked: vec![(1, DECLARED_PRIOR)],
                },
            ];
            ask_for_the_unfound(router, &mut chosen);
            chosen
                .iter()
                .map(|c| c.asked.iter().map(|&(x, _)| x).collect())
                .collect::<Vec<Vec<u32>>>()
        };
        // Author one (0) has no list and no relay delivered them: a asks about them too.
        assert_eq!(chosen(&router), [vec![], vec![0, 1]]);
        // Once a relay delivered them, only the relays that hold them are asked.
        router.handle_event(now, "wss://a.example", &one);
        router.handle_eose(now, "wss://a.example", [one.as_str()]);
        assert_eq!(chosen(&router), [vec![], vec![1]]);
    }
}
