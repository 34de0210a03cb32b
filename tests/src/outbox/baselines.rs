//! The field's relay-routing algorithms, written from their published descriptions (the
//! nostrability outbox report's summaries of each client), so the core's router can be
//! scored beside them.
//!
//! All of them plan once at [`Strategy::start`] and do nothing in reply to answers: a dead
//! relay just fails, and its authors go unserved that session. Only
//! [`ThompsonSessions`] learns, between sessions. As published, none serves an author without
//! a relay list.

use std::collections::{HashMap, HashSet};

use tether_core::Rng;

use super::sample::{self, Weighted};
use super::session::{Answer, Ask, Change, Strategy, View};
use super::world::World;

/// Every baseline, in the table's order; `seed` seeds the random ones.
#[must_use]
pub fn all(seed: u64) -> Vec<Box<dyn Strategy>> {
    vec![
        Box::new(GreedySetCover),
        Box::new(NdkPriority),
        Box::new(WelshmanWeighted::new(seed)),
        Box::new(RustNostrDecomposition),
        Box::new(ThompsonSessions::new(seed)),
        Box::new(Ceiling),
    ]
}

/// Gossip's and applesauce's greedy set cover: repeatedly open the declared write relay that
/// covers the most authors still below two relays, until the budget (less the indexer) is
/// used; each author is asked on up to two of the chosen relays.
#[derive(Clone, Copy, Debug, Default)]
pub struct GreedySetCover;

impl Strategy for GreedySetCover {
    fn name(&self) -> String {
        "greedy set cover (Gossip, applesauce)".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let candidates = candidates(view, |_, _| 1.0);
        greedy_cover(view, candidates)
    }

    fn answered(&mut self, _: &View<'_>, _: u64, _: usize, _: &Answer) -> Vec<Change> {
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {}
}

/// NDK's priority: author by author, prefer write relays already chosen, then the write relay
/// most common among the follows' lists; up to two per author, no new relay past the budget.
#[derive(Clone, Copy, Debug, Default)]
pub struct NdkPriority;

impl Strategy for NdkPriority {
    fn name(&self) -> String {
        "NDK priority".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let popularity = popularity(view);
        let slots = slots(view);
        let mut chosen: HashSet<usize> = HashSet::new();
        let mut plan = Vec::new();
        for &author in view.follows {
            let mut relays: Vec<usize> = view.write_relays(author).collect();
            relays.sort_by_key(|&r| (std::cmp::Reverse(popularity[r]), r));
            let mut mine: Vec<usize> = relays
                .iter()
                .copied()
                .filter(|r| chosen.contains(r))
                .take(PER_AUTHOR)
                .collect();
            for &r in &relays {
                if mine.len() >= PER_AUTHOR || chosen.len() >= slots {
                    break;
                }
                if chosen.insert(r) {
                    mine.push(r);
                }
            }
            plan.push((author, mine));
        }
        asks_from(&plan)
    }

    fn answered(&mut self, _: &View<'_>, _: u64, _: usize, _: &Answer) -> Vec<Change> {
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {}
}

/// Welshman's (Coracle's) weighted random choice: per author three write relays drawn at
/// random, weighted by how many follows list each, then only the budget's most used relays
/// are kept. The draws differ every session.
#[derive(Clone, Debug)]
pub struct WelshmanWeighted {
    rng: Rng,
}

impl WelshmanWeighted {
    /// Seeded draws.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        WelshmanWeighted {
            rng: Rng::new(seed ^ 0x3e15_4a11),
        }
    }
}

impl Strategy for WelshmanWeighted {
    fn name(&self) -> String {
        "Welshman weighted random".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let popularity = popularity(view);
        let plan: Vec<(usize, Vec<usize>)> = view
            .follows
            .iter()
            .map(|&author| {
                let relays: Vec<usize> = view.write_relays(author).collect();
                if relays.len() <= WELSHMAN_PICKS {
                    return (author, relays);
                }
                let table = Weighted::new(relays.iter().map(|&r| f64::from(popularity[r])));
                let picks = table.draw_distinct(&mut self.rng, WELSHMAN_PICKS, &[]);
                (author, picks.into_iter().map(|i| relays[i]).collect())
            })
            .collect();
        asks_from(&keep_most_used(plan, slots(view)))
    }

    fn answered(&mut self, _: &View<'_>, _: u64, _: usize, _: &Answer) -> Vec<Change> {
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {}
}

/// rust-nostr's filter decomposition: the first three write relays of each author's list,
/// then only the budget's most used relays.
#[derive(Clone, Copy, Debug, Default)]
pub struct RustNostrDecomposition;

impl Strategy for RustNostrDecomposition {
    fn name(&self) -> String {
        "rust-nostr decomposition".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let plan = view
            .follows
            .iter()
            .map(|&a| (a, view.write_relays(a).take(RUST_NOSTR_PICKS).collect()))
            .collect();
        asks_from(&keep_most_used(plan, slots(view)))
    }

    fn answered(&mut self, _: &View<'_>, _: u64, _: usize, _: &Answer) -> Vec<Change> {
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {}
}

/// The benchmark's learning baseline: a Beta(1, 1) prior per (author, declared write relay);
/// each session samples θ for every pair and runs the greedy cover on the sum of sampled θ
/// over authors still below two relays. At the end, each asked pair is a success if the relay
/// gave the author at least one event, a failure otherwise (a dead relay included).
#[derive(Clone, Debug)]
pub struct ThompsonSessions {
    rng: Rng,
    /// (author, relay) to (successes, failures).
    history: HashMap<(usize, usize), (u32, u32)>,
    asked: Vec<(usize, usize)>,
    delivered: HashSet<(usize, usize)>,
}

impl ThompsonSessions {
    /// Seeded sampling, nothing learned yet.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        ThompsonSessions {
            rng: Rng::new(seed ^ 0x7a0b_5e55),
            history: HashMap::new(),
            asked: Vec::new(),
            delivered: HashSet::new(),
        }
    }
}

impl Strategy for ThompsonSessions {
    fn name(&self) -> String {
        "Thompson sampling (learns per session)".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let (history, rng) = (&self.history, &mut self.rng);
        let candidates = candidates(view, |author, relay| {
            let (s, f) = history.get(&(author, relay)).copied().unwrap_or((0, 0));
            sample::beta(rng, 1.0 + f64::from(s), 1.0 + f64::from(f))
        });
        let asks = greedy_cover(view, candidates);
        self.asked = asks
            .iter()
            .flat_map(|ask| ask.authors.iter().map(|&a| (a, ask.relay)))
            .collect();
        self.delivered.clear();
        asks
    }

    fn answered(&mut self, _: &View<'_>, _: u64, relay: usize, answer: &Answer) -> Vec<Change> {
        if let Answer::Events(counts) = answer {
            for &(author, n) in counts {
                if n > 0 {
                    self.delivered.insert((author, relay));
                }
            }
        }
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {
        for pair in std::mem::take(&mut self.asked) {
            let entry = self.history.entry(pair).or_insert((0, 0));
            if self.delivered.contains(&pair) {
                entry.0 += 1;
            } else {
                entry.1 += 1;
            }
        }
    }
}

/// Every declared write relay of every author, ignoring the budget: the most the lists can
/// give, and what that costs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ceiling;

impl Strategy for Ceiling {
    fn name(&self) -> String {
        "ceiling (every write relay, uncapped)".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let plan: Vec<(usize, Vec<usize>)> = view
            .follows
            .iter()
            .map(|&a| (a, view.write_relays(a).collect()))
            .collect();
        asks_from(&plan)
    }

    fn answered(&mut self, _: &View<'_>, _: u64, _: usize, _: &Answer) -> Vec<Change> {
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {}

    fn uncapped(&self) -> bool {
        true
    }
}

/// Not a client: a bound. Built from the world's ground truth (where events really are),
/// it opens the budget's relays that hold the most not-yet-covered events of the follows,
/// lists or not, and asks each for exactly the authors it holds. No strategy that reads only
/// the lists is expected to reach it; it shows how much the budget itself allows.
#[derive(Clone, Debug)]
pub struct Oracle {
    /// Per relay, the follows' events it holds: (author, event id).
    holds: Vec<Vec<(usize, u64)>>,
}

impl Oracle {
    /// Reads where `world`'s events are (the only place a strategy may).
    #[must_use]
    pub fn new(world: &World) -> Self {
        let mut holds = vec![Vec::new(); world.relays.len()];
        for (a, author) in world.authors.iter().enumerate() {
            for event in &author.events {
                for &r in event.on.iter().filter(|&&r| world.relays[r].live) {
                    holds[r].push((a, event.id));
                }
            }
        }
        Oracle { holds }
    }
}

impl Strategy for Oracle {
    fn name(&self) -> String {
        "oracle (ground truth, within budget)".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let follow: HashSet<usize> = view.follows.iter().copied().collect();
        let mut got: HashSet<u64> = HashSet::new();
        let mut taken = vec![false; self.holds.len()];
        let mut asks = Vec::new();
        while asks.len() < slots(view) {
            let gain = |r: usize| {
                self.holds[r]
                    .iter()
                    .filter(|(a, id)| follow.contains(a) && !got.contains(id))
                    .count()
            };
            let best = (0..self.holds.len())
                .filter(|&r| !taken[r])
                .map(|r| (gain(r), std::cmp::Reverse(r)))
                .max();
            let Some((_, std::cmp::Reverse(relay))) = best.filter(|&(n, _)| n > 0) else {
                break;
            };
            taken[relay] = true;
            let mut authors: Vec<usize> = Vec::new();
            for &(a, id) in &self.holds[relay] {
                if follow.contains(&a) {
                    got.insert(id);
                    authors.push(a);
                }
            }
            authors.sort_unstable();
            authors.dedup();
            asks.push(Ask { relay, authors });
        }
        asks
    }

    fn answered(&mut self, _: &View<'_>, _: u64, _: usize, _: &Answer) -> Vec<Change> {
        Vec::new()
    }

    fn end(&mut self, _: &View<'_>) {}
}

/// Relays per author the set-cover and priority algorithms aim for.
const PER_AUTHOR: usize = 2;
/// Welshman's draws per author.
const WELSHMAN_PICKS: usize = 3;
/// rust-nostr's write relays per author.
const RUST_NOSTR_PICKS: usize = 3;

/// Content-relay connections the budget leaves after the indexer's.
fn slots(view: &View<'_>) -> usize {
    view.budget.saturating_sub(1)
}

/// How many follows declare each relay as a write relay.
fn popularity(view: &View<'_>) -> Vec<u32> {
    let mut count = vec![0u32; view.relay_count()];
    for &a in view.follows {
        for r in view.write_relays(a) {
            count[r] += 1;
        }
    }
    count
}

/// Per relay, the follows declaring it as a write relay with a weight for each pair.
fn candidates(
    view: &View<'_>,
    mut weight: impl FnMut(usize, usize) -> f64,
) -> Vec<Vec<(usize, f64)>> {
    let mut by_relay = vec![Vec::new(); view.relay_count()];
    for &a in view.follows {
        for r in view.write_relays(a) {
            by_relay[r].push((a, weight(a, r)));
        }
    }
    by_relay
}

/// Greedy weighted set cover: take the relay whose pairs with authors still below
/// [`PER_AUTHOR`] relays weigh most, until the slots are used or nothing is left to cover;
/// ties go to the lower index (the more popular relay).
fn greedy_cover(view: &View<'_>, candidates: Vec<Vec<(usize, f64)>>) -> Vec<Ask> {
    let mut assigned: HashMap<usize, usize> = HashMap::new();
    let mut taken = vec![false; candidates.len()];
    let mut asks = Vec::new();
    while asks.len() < slots(view) {
        let open = |a: &usize| assigned.get(a).copied().unwrap_or(0) < PER_AUTHOR;
        let mut best: Option<(usize, f64)> = None;
        for (r, pairs) in candidates.iter().enumerate() {
            if taken[r] {
                continue;
            }
            let gain: f64 = pairs.iter().filter(|(a, _)| open(a)).map(|(_, w)| w).sum();
            if gain > 0.0 && best.is_none_or(|(_, g)| gain > g) {
                best = Some((r, gain));
            }
        }
        let Some((relay, _)) = best else {
            break;
        };
        taken[relay] = true;
        let authors: Vec<usize> = candidates[relay]
            .iter()
            .map(|&(a, _)| a)
            .filter(|a| open(a))
            .collect();
        for &a in &authors {
            *assigned.entry(a).or_insert(0) += 1;
        }
        asks.push(Ask { relay, authors });
    }
    asks
}

/// Keeps only the `keep` relays the plan uses most (ties to the lower index).
fn keep_most_used(plan: Vec<(usize, Vec<usize>)>, keep: usize) -> Vec<(usize, Vec<usize>)> {
    let mut uses: HashMap<usize, usize> = HashMap::new();
    for (_, relays) in &plan {
        for &r in relays {
            *uses.entry(r).or_insert(0) += 1;
        }
    }
    let mut ranked: Vec<(usize, usize)> = uses.into_iter().collect();
    ranked.sort_by_key(|&(r, n)| (std::cmp::Reverse(n), r));
    let kept: HashSet<usize> = ranked.into_iter().take(keep).map(|(r, _)| r).collect();
    plan.into_iter()
        .map(|(a, relays)| (a, relays.into_iter().filter(|r| kept.contains(r)).collect()))
        .collect()
}

/// One ask per relay, relays and authors in ascending order.
fn asks_from(plan: &[(usize, Vec<usize>)]) -> Vec<Ask> {
    let mut by_relay: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (a, relays) in plan {
        for &r in relays {
            by_relay.entry(r).or_default().push(*a);
        }
    }
    by_relay
        .into_iter()
        .map(|(relay, mut authors)| {
            authors.sort_unstable();
            authors.dedup();
            Ask { relay, authors }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::session::run_sessions;
    use super::super::world::{Declared, Marker, SimAuthor, SimEvent, SimRelay, WorldConfig};
    use super::*;

    #[test]
    fn no_capped_baseline_passes_the_budget_and_the_ceiling_recalls_most() {
        for (follows, seed) in [(200, 1), (600, 2)] {
            let world = World::generate(&WorldConfig::new(seed, follows));
            for budget in [5, 20] {
                let mut ceiling = 0.0;
                let mut capped = Vec::new();
                for mut s in all(seed) {
                    let scores = run_sessions(&world, s.as_mut(), budget, 3);
                    for score in &scores {
                        if s.uncapped() {
                            ceiling = score.recall;
                            assert!(score.peak_connections > budget);
                        } else {
                            assert_eq!(score.over_budget, 0, "{}", s.name());
                            assert!(score.peak_connections <= budget, "{}", s.name());
                            capped.push((s.name(), score.recall));
                        }
                    }
                }
                for (name, recall) in capped {
                    assert!(recall <= ceiling, "{name} {recall} > {ceiling}");
                }
            }
        }
    }

    #[test]
    fn baselines_are_deterministic() {
        let world = World::generate(&WorldConfig::new(5, 300));
        let run = || -> Vec<_> {
            all(9)
                .into_iter()
                .map(|mut s| run_sessions(&world, s.as_mut(), 20, 2))
                .collect()
        };
        assert_eq!(run(), run());
    }

    /// 20 authors all declare relays 0 and 1 but write only to relay 1; one slot.
    fn stale_head() -> World {
        let relay = |i: usize| SimRelay {
            url: format!("wss://r{i}.example"),
            live: true,
            latency_ms: 100,
            big: false,
        };
        let list = [0, 1].map(|relay| Declared {
            relay,
            marker: Marker::Both,
        });
        World {
            config: WorldConfig {
                seed: 0,
                follows: 20,
                relays: 2,
                days: 7,
            },
            relays: vec![relay(0), relay(1)],
            indexers: vec![relay(9)],
            authors: (0..20)
                .map(|a| SimAuthor {
                    pubkey: format!("{a:064x}"),
                    list: Some(list.to_vec()),
                    stores: vec![1],
                    events: vec![SimEvent {
                        id: a,
                        created_at: 1,
                        on: vec![1],
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn thompson_learns_where_greedy_repeats_its_mistake() {
        let world = stale_head();
        let greedy = run_sessions(&world, &mut GreedySetCover, 2, 8);
        assert!(greedy.iter().all(|s| s.recall == 0.0));
        let thompson = run_sessions(&world, &mut ThompsonSessions::new(1), 2, 8);
        let recall: Vec<f64> = thompson.iter().map(|s| s.recall).collect();
        assert!(recall[4..].iter().all(|&r| r == 1.0), "{recall:?}");
    }

    #[test]
    fn the_oracle_serves_list_less_authors_and_beats_the_capped_baselines() {
        let world = World::generate(&WorldConfig::new(2, 400));
        let best_baseline = all(2)
            .into_iter()
            .filter(|s| !s.uncapped())
            .map(|mut s| run_sessions(&world, s.as_mut(), 20, 1)[0].recall)
            .fold(0.0, f64::max);
        let oracle = &run_sessions(&world, &mut Oracle::new(&world), 20, 1)[0];
        assert_eq!(oracle.over_budget, 0);
        assert!(oracle.peak_connections <= 20);
        assert!(
            oracle.recall > best_baseline,
            "{} {best_baseline}",
            oracle.recall
        );
    }

    #[test]
    fn list_less_authors_are_not_asked() {
        let world = World::generate(&WorldConfig::new(6, 300));
        let follows: Vec<usize> = (0..300).collect();
        let view = View::new(&world, &follows, 20, 1);
        for mut s in all(1) {
            for ask in s.start(&view) {
                assert!(
                    ask.authors.iter().all(|&a| view.has_list(a)),
                    "{}",
                    s.name()
                );
                assert!(ask
                    .authors
                    .iter()
                    .all(|&a| view.write_relays(a).any(|r| r == ask.relay)));
            }
        }
    }

    #[test]
    fn greedy_takes_the_relay_covering_most_first_and_two_per_author() {
        let world = World::generate(&WorldConfig::new(7, 400));
        let follows: Vec<usize> = (0..400).collect();
        let view = View::new(&world, &follows, 20, 1);
        let asks = GreedySetCover.start(&view);
        assert_eq!(asks.len(), 19);
        let pop = popularity(&view);
        let top = (0..pop.len()).max_by_key(|&r| (pop[r], std::cmp::Reverse(r)));
        assert_eq!(Some(asks[0].relay), top);
        assert_eq!(asks[0].authors.len(), pop[asks[0].relay] as usize);
        let mut per_author: HashMap<usize, usize> = HashMap::new();
        for ask in &asks {
            for &a in &ask.authors {
                *per_author.entry(a).or_default() += 1;
            }
        }
        assert!(per_author.values().all(|&n| n <= PER_AUTHOR));
    }
}
