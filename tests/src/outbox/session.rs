//! Running one routing strategy for one session of a [`World`], on simulated time, and
//! scoring what it got.
//!
//! A session starts at t = 0 ms knowing the follows' relay lists (read from an indexer, which
//! holds one connection for the whole session). The strategy asks relays for authors; each
//! asked relay answers after its latency (a dead one fails after its connect time), and the
//! strategy may drop relays and ask others in reply. Nothing sleeps: the runner jumps from one
//! answer to the next until the 30 s horizon.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use super::world::{Declared, World};

/// The session ends here: later answers are never delivered.
pub const HORIZON_MS: u64 = 30_000;
/// The early mark [`Score::recall_at_10s`] is taken at.
pub const EARLY_MS: u64 = 10_000;
/// A REQ's fixed size on the wire.
pub const REQ_BYTES: u64 = 100;
/// What each author adds to a REQ (a quoted hex pubkey and a comma).
pub const REQ_AUTHOR_BYTES: u64 = 67;
/// One delivered event copy.
pub const EVENT_BYTES: u64 = 450;

/// A relay-routing algorithm under test. The runner calls [`Strategy::start`] once, then
/// [`Strategy::answered`] for every answer in time order, then [`Strategy::end`]; the same
/// value runs every session of [`run_sessions`], so it may learn across them.
pub trait Strategy {
    /// The name shown in the table.
    fn name(&self) -> String;

    /// A session starts at t = 0 ms: what it knows (the lists, as the indexer gave them) and
    /// its budget. Returns the first asks.
    fn start(&mut self, view: &View<'_>) -> Vec<Ask>;

    /// An asked relay answered at `at_ms` (per asked author: how many events it gave), or
    /// failed. The strategy may drop relays and ask new ones (within the budget) in reply;
    /// the changes apply at `at_ms`, in order (so a `Drop` before an `Ask` frees its slot).
    fn answered(
        &mut self,
        view: &View<'_>,
        at_ms: u64,
        relay: usize,
        answer: &Answer,
    ) -> Vec<Change>;

    /// The session is over (learning across sessions happens here).
    fn end(&mut self, view: &View<'_>);

    /// When the strategy wants to run again with no answer due (a timer of its own, as a
    /// pool routes again at its router's `poll_timeout`). Default: never.
    fn wake_at(&self) -> Option<u64> {
        None
    }

    /// Its [`Strategy::wake_at`] came: changes as for an answer.
    fn woke(&mut self, _view: &View<'_>, _at_ms: u64) -> Vec<Change> {
        Vec::new()
    }

    /// Whether the runner lets this strategy exceed the budget (only the ceiling, which
    /// measures what asking everything would cost). Default: no.
    fn uncapped(&self) -> bool {
        false
    }
}

/// What a strategy may know: the follows, their relay lists, relay urls, the budget.
///
/// The world's ground truth (which relays are live, where authors really write, the
/// events) is for scoring only, so `View` keeps the world private and offers only the public
/// part through its accessors.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    world: &'a World,
    /// The followed authors (indices into the world's authors), in follow-list order.
    pub follows: &'a [usize],
    /// Most concurrent connections, the indexer's included.
    pub budget: usize,
    /// 1 for the first session of a run, then 2, 3, ...
    pub session: u32,
}

impl<'a> View<'a> {
    /// What a strategy may know of `world` in `session` (1-based). The runner builds one per
    /// session; a strategy's own tests may build one to call [`Strategy::start`] directly.
    #[must_use]
    pub fn new(world: &'a World, follows: &'a [usize], budget: usize, session: u32) -> Self {
        View {
            world,
            follows,
            budget,
            session,
        }
    }

    /// How many content relays exist; relay indices are below this.
    #[must_use]
    pub fn relay_count(&self) -> usize {
        self.world.relays.len()
    }

    /// A relay's url.
    ///
    /// # Panics
    /// If `relay` is not below [`View::relay_count`].
    #[must_use]
    pub fn url(&self, relay: usize) -> &'a str {
        &self.world.relays[relay].url
    }

    /// The indexers' urls (the session already read the lists from one of them).
    pub fn indexer_urls(&self) -> impl Iterator<Item = &'a str> {
        self.world.indexers.iter().map(|r| r.url.as_str())
    }

    /// An author's pubkey (64 lowercase hex).
    ///
    /// # Panics
    /// If `author` is not an author of the world.
    #[must_use]
    pub fn pubkey(&self, author: usize) -> &'a str {
        &self.world.authors[author].pubkey
    }

    /// Whether the author published a relay list.
    #[must_use]
    pub fn has_list(&self, author: usize) -> bool {
        self.world.authors[author].list.is_some()
    }

    /// An author's relay list in its own order; empty without one.
    #[must_use]
    pub fn declared(&self, author: usize) -> &'a [Declared] {
        self.world.authors[author].list.as_deref().unwrap_or(&[])
    }

    /// An author's declared write relays (`write` or unmarked), in list order.
    pub fn write_relays(&self, author: usize) -> impl Iterator<Item = usize> + 'a {
        self.declared(author)
            .iter()
            .filter(|d| d.marker.is_write())
            .map(|d| d.relay)
    }

    /// An author's declared read relays (`read` or unmarked), in list order.
    pub fn read_relays(&self, author: usize) -> impl Iterator<Item = usize> + 'a {
        self.declared(author)
            .iter()
            .filter(|d| d.marker.is_read())
            .map(|d| d.relay)
    }

    /// The window asked for, in unix seconds `[since, until)`.
    #[must_use]
    pub fn window(&self) -> (u64, u64) {
        self.world.window()
    }
}

/// Ask one relay for these authors' events in the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// Index into the world's relays.
    pub relay: usize,
    /// Authors (indices into the world's authors); ones that are not follows are ignored, and
    /// so are ones already asked on this connection.
    pub authors: Vec<usize>,
}

/// What an asked relay said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// It answered one ask: for each author that ask added, how many events it gave (0
    /// included).
    Events(Vec<(usize, u32)>),
    /// Connecting failed: nothing it was asked will come, and its connection is closed.
    Failed,
}

/// What a strategy does in reply to an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Ask (opening the relay if it is not connected).
    Ask(Ask),
    /// Close the relay: its slot is free, answers still on the way are lost.
    Drop(usize),
}

/// How one session went.
#[derive(Clone, Debug, PartialEq)]
pub struct Score {
    /// Distinct events delivered / events of the follows held by at least one live relay.
    pub recall: f64,
    /// The same, counting only what had arrived by 10 s.
    pub recall_at_10s: f64,
    /// Most connections open at once, the indexer's included.
    pub peak_connections: usize,
    /// Connections opened in the session, the indexer's included.
    pub total_connections: usize,
    /// REQs (100 bytes plus 67 per author) and every delivered copy (450 bytes), duplicates
    /// included. An answer that never arrives costs nothing.
    pub bytes: u64,
    /// When the first event arrived.
    pub first_event_ms: Option<u64>,
    /// When 95% of the session's final distinct events had arrived.
    pub p95_ms: Option<u64>,
    /// Follows with at least one event delivered.
    pub authors_covered: usize,
    /// The recall denominator: follows' events on at least one live relay.
    pub events_reachable: usize,
    /// Asks the runner refused because opening the relay would pass the budget (always 0
    /// for a correct capped strategy; the refused relay is not opened, so breaking the budget
    /// never buys recall).
    pub over_budget: usize,
}

/// Runs one session of `strategy` over `follows` with at most `budget` concurrent
/// connections (the indexer's included), and scores it.
///
/// # Panics
/// If `budget` is 0 (the indexer needs its connection), or a strategy asks a relay index that
/// does not exist.
pub fn run_session(
    world: &World,
    follows: &[usize],
    strategy: &mut dyn Strategy,
    budget: usize,
    session: u32,
) -> Score {
    assert!(budget >= 1, "the indexer needs one connection");
    let view = View::new(world, follows, budget, session);
    let mut run = Run::new(world, follows, budget, strategy.uncapped());
    for ask in strategy.start(&view) {
        run.ask(0, ask);
    }
    run.wake(0, strategy.wake_at());
    while let Some(Reverse((at, seq))) = run.queue.pop() {
        if at > HORIZON_MS {
            break;
        }
        let changes = if matches!(run.due[seq], Some(Due::Wake)) {
            run.due[seq] = None;
            run.woken = None;
            strategy.woke(&view, at)
        } else {
            let Some((relay, answer)) = run.deliver(at, seq) else {
                continue;
            };
            strategy.answered(&view, at, relay, &answer)
        };
        for change in changes {
            match change {
                Change::Ask(ask) => run.ask(at, ask),
                Change::Drop(relay) => run.drop_relay(relay),
            }
        }
        run.wake(at, strategy.wake_at());
    }
    strategy.end(&view);
    run.score()
}

/// Runs `sessions` sessions (numbered from 1) of `strategy` over every author of `world`,
/// the same value throughout, so what it learns carries over.
///
/// # Panics
/// As [`run_session`].
pub fn run_sessions(
    world: &World,
    strategy: &mut dyn Strategy,
    budget: usize,
    sessions: u32,
) -> Vec<Score> {
    let follows: Vec<usize> = (0..world.authors.len()).collect();
    (1..=sessions)
        .map(|session| run_session(world, &follows, strategy, budget, session))
        .collect()
}

/// Runs every strategy for `sessions` sessions, in order: the rows of a
/// [`table`](super::table).
pub fn run_all(
    world: &World,
    strategies: &mut [Box<dyn Strategy>],
    budget: usize,
    sessions: u32,
) -> Vec<(String, Vec<Score>)> {
    strategies
        .iter_mut()
        .map(|s| (s.name(), run_sessions(world, s.as_mut(), budget, sessions)))
        .collect()
}

/// One connection of the session.
struct Conn {
    /// Tells its pending answers from a later connection's to the same relay.
    generation: u32,
    /// When its first answer (or its failure) is due.
    ready_at: u64,
    /// Authors asked on it.
    asked: HashSet<usize>,
}

/// Something due at a time.
enum Due {
    Answer {
        relay: usize,
        generation: u32,
        authors: Vec<usize>,
    },
    Fail {
        relay: usize,
        generation: u32,
    },
    /// The strategy's own timer.
    Wake,
}

/// The runner's state for one session.
struct Run<'w> {
    world: &'w World,
    follow: Vec<bool>,
    budget: usize,
    uncapped: bool,
    conns: Vec<Option<Conn>>,
    generation: u32,
    open: usize,
    peak: usize,
    total: usize,
    over_budget: usize,
    bytes: u64,
    queue: BinaryHeap<Reverse<(u64, usize)>>,
    due: Vec<Option<Due>>,
    /// Event id to the time its first copy arrived.
    arrived: HashMap<u64, u64>,
    covered: HashSet<usize>,
    /// When the strategy's pending wake is (one at a time).
    woken: Option<u64>,
}

impl<'w> Run<'w> {
    fn new(world: &'w World, follows: &[usize], budget: usize, uncapped: bool) -> Self {
        let mut follow = vec![false; world.authors.len()];
        for &a in follows {
            follow[a] = true;
        }
        Run {
            world,
            follow,
            budget,
            uncapped,
            conns: (0..world.relays.len()).map(|_| None).collect(),
            generation: 0,
            open: 0,
            // The indexer: one connection, open all session.
            peak: 1,
            total: 1,
            woken: None,
            over_budget: 0,
            bytes: 0,
            queue: BinaryHeap::new(),
            due: Vec::new(),
            arrived: HashMap::new(),
            covered: HashSet::new(),
        }
    }

    /// Schedule the strategy's wake at `at` (one pending at a time, the earliest), if it is
    /// after `now`.
    fn wake(&mut self, now: u64, at: Option<u64>) {
        let Some(at) = at.filter(|&t| t > now) else {
            return;
        };
        if self.woken.is_some_and(|t| t <= at) {
            return;
        }
        self.woken = Some(at);
        self.schedule(at, Due::Wake);
    }

    fn schedule(&mut self, at: u64, due: Due) {
        self.queue.push(Reverse((at, self.due.len())));
        self.due.push(Some(due));
    }

    fn ask(&mut self, now: u64, ask: Ask) {
        let relay = ask.relay;
        let sim = &self.world.relays[relay];
        let mut authors: Vec<usize> = Vec::new();
        for a in ask.authors {
            if self.follow.get(a).copied().unwrap_or(false) && !authors.contains(&a) {
                authors.push(a);
            }
        }
        if self.conns[relay].is_none() {
            if !self.uncapped && self.open + 2 > self.budget {
                self.over_budget += 1;
                return;
            }
            self.generation += 1;
            let generation = self.generation;
            let ready_at = now + sim.latency_ms;
            self.conns[relay] = Some(Conn {
                generation,
                ready_at,
                asked: authors.iter().copied().collect(),
            });
            self.open += 1;
            self.total += 1;
            self.peak = self.peak.max(self.open + 1);
            let due = if sim.live {
                Due::Answer {
                    relay,
                    generation,
                    authors,
                }
            } else {
                Due::Fail { relay, generation }
            };
            self.schedule(ready_at, due);
            return;
        }
        let Some(conn) = self.conns[relay].as_mut() else {
            return;
        };
        authors.retain(|a| conn.asked.insert(*a));
        // A dead relay's pending failure already answers for everything asked of it.
        if authors.is_empty() || !sim.live {
            return;
        }
        // On an open connection a new REQ costs one round trip; on one still connecting it
        // goes out with the first.
        let at = conn.ready_at.max(now + sim.latency_ms / 2);
        let generation = conn.generation;
        self.schedule(
            at,
            Due::Answer {
                relay,
                generation,
                authors,
            },
        );
    }

    fn drop_relay(&mut self, relay: usize) {
        if self.conns[relay].take().is_some() {
            self.open -= 1;
        }
    }

    /// Carries out what is due at `at`; `None` if it belonged to a closed connection.
    fn deliver(&mut self, at: u64, seq: usize) -> Option<(usize, Answer)> {
        let due = self.due[seq].take()?;
        match due {
            Due::Wake => None,
            Due::Fail { relay, generation } => {
                self.current(relay, generation)?;
                self.conns[relay] = None;
                self.open -= 1;
                Some((relay, Answer::Failed))
            }
            Due::Answer {
                relay,
                generation,
                authors,
            } => {
                self.current(relay, generation)?;
                self.bytes += REQ_BYTES + REQ_AUTHOR_BYTES * authors.len() as u64;
                let counts = authors
                    .into_iter()
                    .map(|a| (a, self.hand_over(at, relay, a)))
                    .collect();
                Some((relay, Answer::Events(counts)))
            }
        }
    }

    fn current(&self, relay: usize, generation: u32) -> Option<()> {
        let conn = self.conns[relay].as_ref()?;
        (conn.generation == generation).then_some(())
    }

    /// Relay `relay` sends every event of `author` it holds; returns how many.
    fn hand_over(&mut self, at: u64, relay: usize, author: usize) -> u32 {
        let mut n = 0;
        for event in &self.world.authors[author].events {
            if event.on.contains(&relay) {
                n += 1;
                self.bytes += EVENT_BYTES;
                self.arrived.entry(event.id).or_insert(at);
            }
        }
        if n > 0 {
            self.covered.insert(author);
        }
        n
    }

    fn score(&self) -> Score {
        let reachable = self
            .world
            .authors
            .iter()
            .enumerate()
            .filter(|(a, _)| self.follow[*a])
            .flat_map(|(_, author)| &author.events)
            .filter(|e| self.world.reachable(e))
            .count();
        let mut times: Vec<u64> = self.arrived.values().copied().collect();
        times.sort_unstable();
        let share = |n: usize| {
            if reachable == 0 {
                0.0
            } else {
                n as f64 / reachable as f64
            }
        };
        let p95 = (!times.is_empty()).then(|| times[(times.len() * 95).div_ceil(100) - 1]);
        Score {
            recall: share(times.len()),
            recall_at_10s: share(times.partition_point(|&t| t <= EARLY_MS)),
            peak_connections: self.peak,
            total_connections: self.total,
            bytes: self.bytes,
            first_event_ms: times.first().copied(),
            p95_ms: p95,
            authors_covered: self.covered.len(),
            events_reachable: reachable,
            over_budget: self.over_budget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::world::{SimAuthor, SimEvent, SimRelay, WorldConfig};
    use super::*;

    /// Relay 0 live (100 ms), relay 1 dead (fails at 300 ms), relay 2 live (400 ms).
    /// Author 0: two events on relay 0, one on both 0 and 2. Author 1: one event on relay 2.
    fn tiny() -> World {
        let relay = |i: usize, live: bool, latency_ms: u64| SimRelay {
            url: format!("wss://r{i}.example"),
            live,
            latency_ms,
            big: false,
        };
        let event = |id: u64, on: Vec<usize>| SimEvent {
            id,
            created_at: 1,
            on,
        };
        World {
            config: WorldConfig {
                seed: 0,
                follows: 2,
                relays: 3,
                days: 7,
            },
            relays: vec![
                relay(0, true, 100),
                relay(1, false, 300),
                relay(2, true, 400),
            ],
            indexers: vec![relay(9, true, 150)],
            authors: vec![
                SimAuthor {
                    pubkey: "a".repeat(64),
                    list: None,
                    stores: vec![0, 2],
                    events: vec![event(0, vec![0]), event(1, vec![0]), event(2, vec![0, 2])],
                },
                SimAuthor {
                    pubkey: "b".repeat(64),
                    list: None,
                    stores: vec![1, 2],
                    events: vec![event(3, vec![2])],
                },
            ],
        }
    }

    /// A scripted strategy: fixed first asks, and on each answer the changes queued for it.
    #[derive(Default)]
    struct Script {
        first: Vec<Ask>,
        replies: Vec<Vec<Change>>,
        heard: Vec<(u64, usize, Answer)>,
        ended: bool,
    }

    impl Strategy for Script {
        fn name(&self) -> String {
            "script".into()
        }
        fn start(&mut self, _: &View<'_>) -> Vec<Ask> {
            std::mem::take(&mut self.first)
        }
        fn answered(&mut self, _: &View<'_>, at: u64, relay: usize, a: &Answer) -> Vec<Change> {
            self.heard.push((at, relay, a.clone()));
            if self.replies.is_empty() {
                Vec::new()
            } else {
                self.replies.remove(0)
            }
        }
        fn end(&mut self, _: &View<'_>) {
            self.ended = true;
        }
    }

    fn ask(relay: usize, authors: &[usize]) -> Ask {
        Ask {
            relay,
            authors: authors.to_vec(),
        }
    }

    #[test]
    fn answers_on_simulated_time_with_exact_scores() {
        let world = tiny();
        let mut s = Script {
            first: vec![ask(0, &[0]), ask(1, &[1])],
            // After relay 0 answers (100 ms), ask relay 0 again for author 1 (one round trip,
            // 50 ms) and open relay 2 for both (400 ms).
            replies: vec![vec![
                Change::Ask(ask(0, &[1, 0])),
                Change::Ask(ask(2, &[0, 1])),
            ]],
            ..Script::default()
        };
        let score = run_session(&world, &[0, 1], &mut s, 10, 1);
        assert!(s.ended);
        assert_eq!(
            s.heard,
            vec![
                (100, 0, Answer::Events(vec![(0, 3)])),
                (150, 0, Answer::Events(vec![(1, 0)])),
                (300, 1, Answer::Failed),
                (500, 2, Answer::Events(vec![(0, 1), (1, 1)])),
            ]
        );
        assert_eq!(score.events_reachable, 4);
        assert_eq!(score.recall, 1.0);
        assert_eq!(score.recall_at_10s, 1.0);
        assert_eq!(score.first_event_ms, Some(100));
        // 4 distinct events: the 95% mark is the 4th, at 500 ms.
        assert_eq!(score.p95_ms, Some(500));
        // Indexer + relays 0, 1, 2, all open at once until relay 1 fails at 300 ms.
        assert_eq!(score.peak_connections, 4);
        assert_eq!(score.total_connections, 4);
        // Two REQs of one author, one of two (the dead relay never got one); five copies
        // (event 2 twice).
        assert_eq!(score.bytes, 2 * (100 + 67) + (100 + 2 * 67) + 5 * 450);
        assert_eq!(score.authors_covered, 2);
        assert_eq!(score.over_budget, 0);
    }

    #[test]
    fn budget_refuses_and_counts_a_connection_too_many_and_a_drop_frees_a_slot() {
        let world = tiny();
        let mut s = Script {
            // Budget 2: the indexer and one relay.
            first: vec![ask(0, &[0]), ask(2, &[1])],
            replies: vec![vec![Change::Drop(0), Change::Ask(ask(2, &[1]))]],
            ..Script::default()
        };
        let score = run_session(&world, &[0, 1], &mut s, 2, 1);
        assert_eq!(score.over_budget, 1);
        assert_eq!(score.peak_connections, 2);
        assert_eq!(score.total_connections, 3);
        assert_eq!(
            s.heard,
            vec![
                (100, 0, Answer::Events(vec![(0, 3)])),
                (500, 2, Answer::Events(vec![(1, 1)])),
            ]
        );
        assert_eq!(score.recall, 1.0);
    }

    #[test]
    fn a_dropped_relay_delivers_nothing_more_and_late_answers_are_lost() {
        let world = tiny();
        let mut s = Script {
            first: vec![ask(0, &[0]), ask(2, &[0, 1])],
            replies: vec![vec![Change::Drop(2)]],
            ..Script::default()
        };
        let score = run_session(&world, &[0, 1], &mut s, 10, 1);
        assert_eq!(s.heard.len(), 1);
        assert_eq!(score.recall, 0.75);
        assert_eq!(score.bytes, 167 + 3 * 450);
    }

    #[test]
    fn non_follows_are_not_asked() {
        let world = tiny();
        let mut s = Script {
            first: vec![ask(2, &[0, 1])],
            ..Script::default()
        };
        let score = run_session(&world, &[0], &mut s, 10, 1);
        assert_eq!(s.heard, vec![(400, 2, Answer::Events(vec![(0, 1)]))]);
        assert_eq!(score.events_reachable, 3);
        assert_eq!(score.authors_covered, 1);
    }
}
