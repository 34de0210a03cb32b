//! Measure what ships: the whole pool routing by people over a generated [`World`].
//!
//! The loop benchmark ([`run_all`] over the [`baselines`]) scores a routing
//! [`Strategy`](super::Strategy) in a loop of its own: answers come at a relay's latency,
//! nothing is a socket. What an application runs is
//! [`RelayPool::subscribe_outbox`](tether_core::pool::RelayPool::subscribe_outbox): relay
//! sessions, sockets, verification of the relay lists, health and backoff, probes, catch-up
//! windows, a checkpoint and a restore. [`run`] drives that pool through a [`PoolSim`] over
//! the same world and measures only what the application heard (`PoolEvent::Received` for
//! its subscription) and which relays the pool dialed (`PoolSim::routed_opens`), so the
//! numbers are the ones a user gets, beside the loop benchmark's on the same world.
//!
//! The world as the pool sees it:
//!
//! - one indexer ([`INDEXER`]) holding every listed author's kind 10002;
//! - every live relay holding the notes the world says it holds, dated in the world's 7-day
//!   window, which ends at the PoolSim's wall-clock start (stored history); every dead relay
//!   either resets connections or accepts the WebSocket and closes it at once (half each);
//! - *moved* authors (5% of the listed ones, at least 3): at 8 s a newer list names a fresh
//!   relay nobody else declares, then their old list; the fresh relay holds copies of 2 of
//!   their notes and receives 3 new ones at 9, 10 and 11 s;
//! - *live* notes: a fifth of the authors post one note each between 5 and 25 s, to every
//!   live relay they write to;
//! - undeclared holdings (relays authors write to but do not list) as the world has them.
//!
//! Run 1 subscribes once at 0 s to every follow's kind 1 since the window's start and runs
//! 40 s; the pool then restarts ([`PoolSim::restart`]: its checkpoint's JSON, restored 60 s
//! later in a new process), a fifth of the authors having posted once meanwhile, and runs
//! 15 s. [`ShippedReport::goals`] holds the numbers against what routing promises.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::pool::{PoolConfig, PoolEvent, SubId};
use tether_core::{Instant, Rng};

use super::baselines::{self, Oracle};
use super::router::Tether;
use super::sample;
use super::session::{run_all, run_sessions};
use super::world::{Marker, World, WorldConfig, WorldStats};
use crate::pool_sim::{PoolAction, PoolSim};
use crate::sim::UNIX_START;
use crate::{RelayModel, StoredEvent};

/// The one indexer: it holds every relay list.
pub const INDEXER: &str = "wss://index.example";
/// Most relays connected at once, the indexer included (`RouterConfig::max_relays`).
pub const BUDGET: usize = 20;
/// How long run 1 lasts.
pub const RUN_SECS: u64 = 40;
/// When the moved authors' newer lists reach the indexer.
pub const MOVE_AT_SECS: u64 = 8;
/// When the pool is restored (run 1 ended at [`RUN_SECS`]).
pub const RESTORE_AT_SECS: u64 = 100;
/// How long run 2 lasts.
pub const RESTART_SECS: u64 = 15;
/// The early mark of run 2.
pub const EARLY_SECS: u64 = 10;

/// Event numbers (their ids are the number in 64 hex digits) by what they are, so a
/// delivered id says which of the world's sets it belongs to.
const LIST_BASE: u64 = 1 << 40;
const MOVED_LIST_BASE: u64 = 2 << 40;
const MOVED_NOTE_BASE: u64 = 3 << 40;
const LIVE_NOTE_BASE: u64 = 4 << 40;
const AWAY_NOTE_BASE: u64 = 5 << 40;
/// The world's notes are numbered from 1 (its ids from 0).
const NOTE_BASE: u64 = 1;

/// One moved author: their new relay and how quickly the pool followed.
#[derive(Clone, Debug, PartialEq)]
pub struct MovedAuthor {
    /// The author's pubkey.
    pub pubkey: String,
    /// The fresh relay their newer list names first.
    pub relay: String,
    /// From the list's arrival on the indexer ([`MOVE_AT_SECS`]) to the first dial of the
    /// new relay, in ms; `None` if it was never dialed.
    pub dial_after_ms: Option<u64>,
    /// Each new note's delivery delay after it was posted (9, 10, 11 s), in ms; `None` if
    /// it never arrived.
    pub note_delays_ms: Vec<Option<u64>>,
}

/// A live note the application did not hear in run 1.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveMiss {
    /// When it was posted, in ms.
    pub posted_ms: u64,
    /// Whether its author has a relay list.
    pub listed: bool,
    /// The live relays holding it, each with whether the author's list declares it as a
    /// write relay and the times (ms) the pool dialed it.
    pub on: Vec<(String, bool, Vec<u64>)>,
}

/// The loop benchmark's numbers on the same world: budget [`BUDGET`], one session.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopScores {
    /// The best capped field algorithm: its name and recall.
    pub best_capped: (String, f64),
    /// Every declared write relay, uncapped.
    pub ceiling: f64,
    /// tether's router in the loop (first session, nothing learned).
    pub tether: f64,
    /// The ground-truth bound within the budget.
    pub oracle: f64,
}

/// What the restored pool did in its first seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct RestartReport {
    /// Notes posted while the app was away (reachable: each is on a live relay).
    pub away_posted: usize,
    /// Of those, the ones the ground-truth plan of `BUDGET - 1` relays would have heard
    /// (see [`ShippedReport::live_bound`]).
    pub away_bound: usize,
    /// Of those, delivered within [`EARLY_SECS`] of the restore.
    pub away_delivered_early: usize,
    /// Of those, delivered by the end of run 2.
    pub away_delivered: usize,
    /// Distinct relays dialed within [`EARLY_SECS`] of the restore, the indexer included.
    pub relays_contacted_early: usize,
    /// Most relays routing held at once in run 2, the indexer included.
    pub peak_routed: usize,
    /// The notes posted while away that did not arrive within [`EARLY_SECS`]: the relays
    /// holding each.
    pub missed: Vec<Vec<String>>,
}

/// Everything [`run`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ShippedReport {
    /// The world's seed.
    pub seed: u64,
    /// Follows (every author of the world).
    pub follows: usize,
    /// The world's calibration numbers, as the loop benchmark prints them.
    pub world: WorldStats,
    /// Relays in the world: live, dead.
    pub relays: (usize, usize),
    /// The loop benchmark on this world.
    pub loop_scores: LoopScores,
    /// The recall denominator: stored notes held by at least one live relay.
    pub stored_reachable: usize,
    /// Of those, delivered in run 1.
    pub stored_delivered: usize,
    /// Of those, held by a live relay that the author's list declares as write: the
    /// uncapped ceiling's numerator.
    pub stored_ceiling: usize,
    /// Notes posted during run 1 (not the moved authors').
    pub live_posted: usize,
    /// Of those, delivered in run 1.
    pub live_delivered: usize,
    /// Of the live notes, the ones a plan of `BUDGET - 1` content relays (the indexer holds
    /// a slot) chosen by ground truth would have heard: the movers' new relays (the moves
    /// are promised a slot each), then greedy maximum coverage of every author who writes
    /// somewhere live, not knowing who will post.
    pub live_bound: usize,
    /// The live notes not delivered in run 1: why each was missable.
    pub live_missed: Vec<LiveMiss>,
    /// The moved authors.
    pub moved: Vec<MovedAuthor>,
    /// The most dials of one dead relay within any 25 s, and that relay.
    pub dead_dials_in_25s: (usize, String),
    /// Dead relays dialed at all.
    pub dead_dialed: usize,
    /// Most relays routing held at once, the indexer included.
    pub peak_routed: usize,
    /// After 5 s, at each whole second, the dead relays routing held (slots lost to them;
    /// live candidates were always left unconnected, the budget being far below them).
    pub dead_held_samples: usize,
    /// Distinct relays dialed in run 1, the indexer included.
    pub relays_contacted: usize,
    /// Run 2, after the restore.
    pub restart: RestartReport,
    /// Every note number delivered in run 1 (determinism: the same seed, the same set).
    pub delivered: BTreeSet<u64>,
}

/// One goal and whether it held.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    /// What is promised.
    pub name: &'static str,
    /// The promise, as a bound.
    pub target: String,
    /// What was measured.
    pub seen: String,
    /// Whether it held.
    pub holds: bool,
}

impl ShippedReport {
    /// Stored-note recall: delivered reachable stored notes / reachable stored notes.
    #[must_use]
    pub fn stored_recall(&self) -> f64 {
        share(self.stored_delivered, self.stored_reachable)
    }

    /// The uncapped ceiling on the same denominator.
    #[must_use]
    pub fn ceiling(&self) -> f64 {
        share(self.stored_ceiling, self.stored_reachable)
    }

    /// Live-note recall: live notes delivered / live notes posted.
    #[must_use]
    pub fn live_recall(&self) -> f64 {
        share(self.live_delivered, self.live_posted)
    }

    /// The share of the live notes the ground-truth plan hears ([`Self::live_bound`]).
    #[must_use]
    pub fn live_bound_share(&self) -> f64 {
        share(self.live_bound, self.live_posted)
    }

    /// The share of the notes posted while away that the ground-truth plan hears.
    #[must_use]
    pub fn restart_bound_share(&self) -> f64 {
        share(self.restart.away_bound, self.restart.away_posted)
    }

    /// The restored pool's share of the notes posted while away, within [`EARLY_SECS`].
    #[must_use]
    pub fn restart_share(&self) -> f64 {
        share(self.restart.away_delivered_early, self.restart.away_posted)
    }

    /// The slowest dial of a moved author's new relay (`None`: one was never dialed).
    #[must_use]
    pub fn worst_move_dial_ms(&self) -> Option<u64> {
        self.moved
            .iter()
            .map(|m| m.dial_after_ms)
            .try_fold(0, |worst, d| d.map(|d| worst.max(d)))
    }

    /// The slowest new note of a moved author (`None`: one never arrived).
    #[must_use]
    pub fn worst_move_note_ms(&self) -> Option<u64> {
        self.moved
            .iter()
            .flat_map(|m| &m.note_delays_ms)
            .try_fold(0, |worst, d| d.map(|d| worst.max(d)))
    }

    /// Every goal routing by people is held to, with what was measured.
    #[must_use]
    pub fn goals(&self) -> Vec<Goal> {
        let recall = self.stored_recall();
        let (best_name, best) = &self.loop_scores.best_capped;
        let ms = |v: Option<u64>| v.map_or_else(|| "never".to_owned(), |v| format!("{v} ms"));
        vec![
            Goal {
                name: "stored recall vs the uncapped ceiling",
                target: "≥ 0.95 × ceiling".into(),
                seen: format!(
                    "{} vs 0.95 × {} = {}",
                    pct(recall),
                    pct(self.ceiling()),
                    pct(0.95 * self.ceiling())
                ),
                holds: recall >= 0.95 * self.ceiling(),
            },
            Goal {
                name: "stored recall vs the best capped field algorithm",
                target: "≥ best + 3 points".into(),
                seen: format!("{} vs {} ({best_name}) + 3", pct(recall), pct(*best)),
                holds: recall >= best + 0.03,
            },
            Goal {
                name: "live notes delivered",
                target: "≥ 95%".into(),
                seen: format!(
                    "{} ({}/{})",
                    pct(self.live_recall()),
                    self.live_delivered,
                    self.live_posted
                ),
                holds: self.live_recall() >= 0.95,
            },
            Goal {
                name: "live notes delivered vs a ground-truth plan of 19",
                target: "≥ 0.9 × its share".into(),
                seen: format!(
                    "{} vs 0.9 × {}",
                    pct(self.live_recall()),
                    pct(self.live_bound_share())
                ),
                holds: self.live_recall() >= 0.9 * self.live_bound_share(),
            },
            Goal {
                name: "moved author: list to first dial of the new relay",
                target: "≤ 2000 ms each".into(),
                seen: format!("worst {}", ms(self.worst_move_dial_ms())),
                holds: self.worst_move_dial_ms().is_some_and(|d| d <= 2_000),
            },
            Goal {
                name: "moved author: new note delivery delay",
                target: "≤ 5000 ms each".into(),
                seen: format!("worst {}", ms(self.worst_move_note_ms())),
                holds: self.worst_move_note_ms().is_some_and(|d| d <= 5_000),
            },
            Goal {
                name: "dials of one dead relay in any 25 s",
                target: "≤ 3".into(),
                seen: format!(
                    "{} ({})",
                    self.dead_dials_in_25s.0, self.dead_dials_in_25s.1
                ),
                holds: self.dead_dials_in_25s.0 <= 3,
            },
            Goal {
                name: "peak simultaneous routed relays (run 1, run 2)",
                target: format!("≤ {BUDGET}"),
                seen: format!("{}, {}", self.peak_routed, self.restart.peak_routed),
                holds: self.peak_routed.max(self.restart.peak_routed) <= BUDGET,
            },
            Goal {
                name: "restart: notes posted while away, delivered within 10 s",
                target: "≥ 95%".into(),
                seen: format!(
                    "{} ({}/{})",
                    pct(self.restart_share()),
                    self.restart.away_delivered_early,
                    self.restart.away_posted
                ),
                holds: self.restart_share() >= 0.95,
            },
            Goal {
                name: "restart: away notes within 10 s vs a ground-truth plan of 19",
                target: "≥ 0.9 × its share".into(),
                seen: format!(
                    "{} vs 0.9 × {}",
                    pct(self.restart_share()),
                    pct(self.restart_bound_share())
                ),
                holds: self.restart_share() >= 0.9 * self.restart_bound_share(),
            },
            Goal {
                name: "restart: distinct relays dialed in the first 10 s",
                target: "≤ 25".into(),
                seen: self.restart.relays_contacted_early.to_string(),
                holds: self.restart.relays_contacted_early <= 25,
            },
        ]
    }
}

/// Runs the whole pool over the world of `seed` with `follows` follows (see the module
/// docs) and measures it; the same arguments give the same report.
#[must_use]
pub fn run(seed: u64, follows: usize) -> ShippedReport {
    run_world(&WorldConfig::new(seed, follows))
}

/// [`run`] over the world `config` describes (another relay count, say).
#[must_use]
pub fn run_world(config: &WorldConfig) -> ShippedReport {
    measure(config, false).0
}

/// [`run`], keeping both runs' PoolSim transcripts (run 1, then the restored run 2): slower,
/// for reading why a number is what it is.
#[must_use]
pub fn run_traced(config: &WorldConfig) -> (ShippedReport, [String; 2]) {
    measure(config, true)
}

/// A Markdown table of `reports` side by side (one column each): the world, the loop
/// benchmark on it, and what the pool did.
#[must_use]
pub fn table(reports: &[ShippedReport]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, cell: &dyn Fn(&ShippedReport) -> String| {
        rows.push((name.to_owned(), reports.iter().map(cell).collect()));
    };
    row("follows", &|r| r.follows.to_string());
    row("relays (live / dead)", &|r| {
        format!("{} / {}", r.relays.0, r.relays.1)
    });
    row("world: with a list", &|r| pct(r.world.with_list));
    row("world: declared write pairs that work", &|r| {
        pct(r.world.working_pairs)
    });
    row("world: declared entries dead", &|r| {
        pct(r.world.declared_dead)
    });
    row("world: notes (reachable, of listed authors)", &|r| {
        format!(
            "{} ({}, {})",
            r.world.events_total, r.world.events_reachable, r.world.events_reachable_listed
        )
    });
    row("loop: best capped field algorithm", &|r| {
        format!(
            "{} {}",
            pct(r.loop_scores.best_capped.1),
            r.loop_scores.best_capped.0
        )
    });
    row("loop: ceiling (uncapped)", &|r| pct(r.loop_scores.ceiling));
    row("loop: tether router, session 1", &|r| {
        pct(r.loop_scores.tether)
    });
    row("loop: oracle (ground truth, budget)", &|r| {
        pct(r.loop_scores.oracle)
    });
    row("**pool: stored recall**", &|r| {
        format!(
            "**{}** ({}/{})",
            pct(r.stored_recall()),
            r.stored_delivered,
            r.stored_reachable
        )
    });
    row("pool: ceiling, same denominator", &|r| {
        format!("{} ({})", pct(r.ceiling()), r.stored_ceiling)
    });
    row("pool: recall / ceiling", &|r| {
        format!(
            "{:.2}",
            r.stored_recall() / r.ceiling().max(f64::MIN_POSITIVE)
        )
    });
    row("pool: points over best capped", &|r| {
        format!(
            "{:+.1}",
            100.0 * (r.stored_recall() - r.loop_scores.best_capped.1)
        )
    });
    row("live notes a ground-truth plan of 19 hears", &|r| {
        format!(
            "{} ({}/{})",
            pct(share(r.live_bound, r.live_posted)),
            r.live_bound,
            r.live_posted
        )
    });
    row("pool: live-note recall", &|r| {
        format!(
            "{} ({}/{})",
            pct(r.live_recall()),
            r.live_delivered,
            r.live_posted
        )
    });
    row("moved: list → first dial of new relay, ms", &|r| {
        list_ms(r.moved.iter().map(|m| m.dial_after_ms))
    });
    row("moved: new-note delays, ms (worst)", &|r| {
        r.worst_move_note_ms()
            .map_or_else(|| "never".to_owned(), |v| v.to_string())
    });
    row("dead relays dialed; most dials in 25 s", &|r| {
        format!("{}; {}", r.dead_dialed, r.dead_dials_in_25s.0)
    });
    row("peak routed relays", &|r| r.peak_routed.to_string());
    row(
        "dead relays held, (second, relay) samples after 5 s",
        &|r| r.dead_held_samples.to_string(),
    );
    row("distinct relays dialed (40 s)", &|r| {
        r.relays_contacted.to_string()
    });
    row(
        "restart: away notes a ground-truth plan of 19 hears",
        &|r| {
            format!(
                "{} ({}/{})",
                pct(share(r.restart.away_bound, r.restart.away_posted)),
                r.restart.away_bound,
                r.restart.away_posted
            )
        },
    );
    row("restart: away notes within 10 s (by 15 s)", &|r| {
        format!(
            "{} ({}/{}; {})",
            pct(r.restart_share()),
            r.restart.away_delivered_early,
            r.restart.away_posted,
            r.restart.away_delivered
        )
    });
    row("restart: distinct relays dialed in 10 s", &|r| {
        r.restart.relays_contacted_early.to_string()
    });
    row("restart: peak routed relays", &|r| {
        r.restart.peak_routed.to_string()
    });
    let mut out = String::from("| |");
    for r in reports {
        let _ = write!(out, " seed {} |", r.seed);
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(reports.len()));
    out.push('\n');
    for (name, cells) in rows {
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    }
    out
}

/// A Markdown table of each report's goals: one row per goal, its bound, what each seed
/// measured (✅ held, ❌ failed).
#[must_use]
pub fn goals_table(reports: &[ShippedReport]) -> String {
    let per: Vec<Vec<Goal>> = reports.iter().map(ShippedReport::goals).collect();
    let mut out = String::from("| goal | bound |");
    for r in reports {
        let _ = write!(out, " seed {} |", r.seed);
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(reports.len()));
    out.push('\n');
    for (i, goal) in per.first().into_iter().flatten().enumerate() {
        let _ = write!(out, "| {} | {} |", goal.name, goal.target);
        for goals in &per {
            let g = &goals[i];
            let _ = write!(out, " {} {} |", if g.holds { "✅" } else { "❌" }, g.seen);
        }
        out.push('\n');
    }
    out
}

/// The world as relay models and a script, with the ground truth the numbers are taken
/// against.
struct Scenario {
    world: World,
    /// Relay models by URL, the indexer's included.
    models: BTreeMap<String, RelayModel>,
    /// What happens during run 1 (besides the subscription at 0 s).
    script: Vec<(Duration, PoolAction)>,
    /// Dead relays' URLs.
    dead: BTreeSet<String>,
    /// Stored notes held by a live relay, by number.
    reachable: BTreeSet<u64>,
    /// Of those, the ones a live declared write relay holds.
    ceiling: BTreeSet<u64>,
    /// Run 1's live notes: number, when posted, author.
    live: Vec<(u64, Duration, usize)>,
    /// The moved authors.
    moved: Vec<Mover>,
    /// Per author, the live relays they write to (a moved author's new relay included).
    writes_to: Vec<Vec<String>>,
}

/// A moved author as the scenario made them.
struct Mover {
    pubkey: String,
    /// The fresh relay their newer list names.
    relay: String,
    /// Their 3 new notes: number and when posted.
    notes: Vec<(u64, Duration)>,
}

fn measure(config: &WorldConfig, trace: bool) -> (ShippedReport, [String; 2]) {
    let seed = config.seed;
    let world = World::generate(config);
    let loop_scores = loop_scores(&world, seed);
    let scenario = Scenario::build(world);
    let mut config = PoolConfig::default();
    config.router.indexers = vec![INDEXER.to_owned()];
    config.router.max_relays = BUDGET;
    let mut s = PoolSim::new(config, seed);
    // The checks run either way; formatting every line of a 40 s run over hundreds of
    // relays is most of its time, so the transcript is written only when asked for.
    s.quiet = !trace;
    s.world = scenario.models.clone();
    let (since, _) = scenario.world.window();
    let authors: Vec<String> = scenario
        .world
        .authors
        .iter()
        .map(|a| format!("\"{}\"", a.pubkey))
        .collect();
    s.at(
        Duration::ZERO,
        PoolAction::SubscribeOutbox(format!(
            r#"{{"kinds":[1],"authors":[{}],"since":{since}}}"#,
            authors.join(",")
        )),
    );
    for (at, action) in scenario.script.iter().cloned() {
        s.at(at, action);
    }
    let watch1 = drive(&mut s, RUN_SECS, &scenario.dead);
    let sub = *s
        .subscribed
        .first()
        .expect("the pool took the subscription");
    let heard1 = heard(&s, sub);
    let opens1: Vec<(u64, String)> = s
        .routed_opens
        .iter()
        .map(|(at, _, url)| (ms_of(*at), url.clone()))
        .collect();
    let transcript1 = s.transcript().to_owned();

    // Run 2: the app was away from 40 s to 100 s; a fifth of the authors posted once.
    let away = scenario.away_notes(seed);
    let restore_at = Instant::ZERO + Duration::from_secs(RESTORE_AT_SECS);
    let mut s2 = s.restart(restore_at);
    for (urls, event) in &away {
        for url in urls {
            if let Some(model) = s2.world.get_mut(url) {
                let _ = model.store(event.clone());
            }
        }
    }
    let watch2 = drive(&mut s2, RESTART_SECS, &scenario.dead);
    let heard2 = heard(&s2, sub);
    let early_ms = (RESTORE_AT_SECS + EARLY_SECS) * 1000;
    let restart = RestartReport {
        away_posted: away.len(),
        away_bound: {
            let plan = scenario.ground_truth_plan();
            away.iter()
                .filter(|(urls, _)| urls.iter().any(|u| plan.contains(u.as_str())))
                .count()
        },
        away_delivered_early: away
            .iter()
            .filter(|(_, e)| heard2.get(&e.n).is_some_and(|&t| t <= early_ms))
            .count(),
        away_delivered: away
            .iter()
            .filter(|(_, e)| heard2.contains_key(&e.n))
            .count(),
        relays_contacted_early: s2
            .routed_opens
            .iter()
            .filter(|(at, ..)| ms_of(*at) < early_ms)
            .map(|(.., url)| url.as_str())
            .collect::<BTreeSet<_>>()
            .len(),
        peak_routed: watch2.peak_routed,
        missed: away
            .iter()
            .filter(|(_, e)| heard2.get(&e.n).is_none_or(|&t| t > early_ms))
            .map(|(urls, _)| urls.clone())
            .collect(),
    };
    let transcript2 = s2.transcript().to_owned();
    let report = scenario.report(loop_scores, &heard1, &opens1, &watch1, restart);
    (report, [transcript1, transcript2])
}

/// What [`drive`] saw between steps.
struct Watch {
    peak_routed: usize,
    dead_held_samples: usize,
}

/// Runs `s` for `secs` seconds, step by step: the peak of relays routing holds is taken
/// after every step (a relay is held and let go only within one), the dead relays held at
/// each whole second after the fifth.
fn drive(s: &mut PoolSim, secs: u64, dead: &BTreeSet<String>) -> Watch {
    let start = s.now();
    let mut watch = Watch {
        peak_routed: 0,
        dead_held_samples: 0,
    };
    for second in 1..=secs {
        let end = start + Duration::from_secs(second);
        while s.step(end) {
            let held = s
                .pool
                .relay_ids()
                .filter(|&r| s.pool.relay_url(r).is_some())
                .count();
            watch.peak_routed = watch.peak_routed.max(held);
        }
        if second > 5 {
            watch.dead_held_samples += s
                .pool
                .relay_ids()
                .filter_map(|r| s.pool.relay_url(r))
                .filter(|url| dead.contains(*url))
                .count();
        }
    }
    // Every step due by the end is done; the clock is left at the end, as `run_for` leaves it.
    let end = start + Duration::from_secs(secs);
    s.run_for(end.saturating_duration_since(s.now()));
    watch
}

/// Note number to when (ms on the sim's clock) the application first heard it in `sub`.
fn heard(s: &PoolSim, sub: SubId) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for (at, e) in &s.events {
        if let PoolEvent::Received { sub: q, id, .. } = e {
            if *q == sub {
                let n = u64::from_be_bytes(id.0[24..].try_into().unwrap_or([0; 8]));
                out.entry(n).or_insert(ms_of(*at));
            }
        }
    }
    out
}

fn ms_of(at: Instant) -> u64 {
    u64::try_from(at.since_origin().as_millis()).unwrap_or(u64::MAX)
}

/// The loop benchmark's rows on `world`: budget [`BUDGET`], one session.
fn loop_scores(world: &World, seed: u64) -> LoopScores {
    let mut field = baselines::all(seed);
    let rows = run_all(world, &mut field, BUDGET, 1);
    let recall = |scores: &[super::Score]| scores.first().map_or(0.0, |s| s.recall);
    let mut best_capped = (String::new(), f64::MIN);
    let mut ceiling = 0.0;
    for ((name, scores), strategy) in rows.iter().zip(&field) {
        if strategy.uncapped() {
            ceiling = recall(scores);
        } else if recall(scores) > best_capped.1 {
            best_capped = (name.clone(), recall(scores));
        }
    }
    let tether = recall(&run_sessions(world, &mut Tether::new(), BUDGET, 1));
    let oracle = recall(&run_sessions(world, &mut Oracle::new(world), BUDGET, 1));
    LoopScores {
        best_capped,
        ceiling,
        tether,
        oracle,
    }
}

impl Scenario {
    fn build(world: World) -> Scenario {
        let mut rng = Rng::new(world.config.seed ^ 0x5b1_99ed);
        let url = |r: usize| world.relays[r].url.clone();
        let mut models: BTreeMap<String, RelayModel> = BTreeMap::new();
        let mut dead = BTreeSet::new();
        for (i, relay) in world.relays.iter().enumerate() {
            let mut model = RelayModel::default();
            if !relay.live {
                // Both ways a dead relay looks dead to a client: a reset, and an accepted
                // WebSocket closed at once (health must count a loss before the first answer).
                if dead.len() % 2 == 0 {
                    model.down = true;
                    model.resets = true;
                } else {
                    model.drop_after = Some(Duration::ZERO);
                }
                dead.insert(relay.url.clone());
            }
            models.insert(url(i), model);
        }
        let (mut reachable, mut ceiling) = (BTreeSet::new(), BTreeSet::new());
        let mut lists = Vec::new();
        for (a, author) in world.authors.iter().enumerate() {
            if let Some(list) = &author.list {
                let tags: Vec<String> = list
                    .iter()
                    .map(|d| r_tag(&world.relays[d.relay].url, d.marker))
                    .collect();
                // Published long before the window: the current list, long settled.
                let at = UNIX_START - 30 * 86_400;
                lists.push(event(
                    LIST_BASE + a as u64,
                    &author.pubkey,
                    at,
                    10002,
                    &tags,
                ));
            }
            for e in &author.events {
                let n = NOTE_BASE + e.id;
                let note = event(n, &author.pubkey, e.created_at, 1, &[]);
                for &r in &e.on {
                    if let Some(model) = models.get_mut(&world.relays[r].url) {
                        model.events.push(note.clone());
                    }
                }
                if world.reachable(e) {
                    reachable.insert(n);
                    let declared = author.list.iter().flatten().any(|d| {
                        d.marker.is_write() && world.relays[d.relay].live && e.on.contains(&d.relay)
                    });
                    if declared {
                        ceiling.insert(n);
                    }
                }
            }
        }
        let mut writes_to: Vec<Vec<String>> = world
            .authors
            .iter()
            .map(|a| {
                a.stores
                    .iter()
                    .filter(|&&r| world.relays[r].live)
                    .map(|&r| url(r))
                    .collect()
            })
            .collect();
        let mut script = Vec::new();

        // Moved authors: listed, with at least two reachable notes to copy.
        let mut candidates: Vec<usize> = world
            .authors
            .iter()
            .enumerate()
            .filter(|(_, a)| {
                a.list.is_some() && a.events.iter().filter(|e| world.reachable(e)).count() >= 2
            })
            .map(|(i, _)| i)
            .collect();
        let listed = world.authors.iter().filter(|a| a.list.is_some()).count();
        let count = ((listed as f64 * 0.05).round() as usize).max(3);
        sample::shuffle(&mut rng, &mut candidates);
        let mut movers: Vec<usize> = candidates.into_iter().take(count).collect();
        movers.sort_unstable();
        let mut moved = Vec::new();
        for (k, &a) in movers.iter().enumerate() {
            let author = &world.authors[a];
            let fresh = format!("wss://moved{k}.example");
            let mut model = RelayModel::default();
            // The move took their latest history along.
            for e in author
                .events
                .iter()
                .filter(|e| world.reachable(e))
                .rev()
                .take(2)
            {
                let note = event(NOTE_BASE + e.id, &author.pubkey, e.created_at, 1, &[]);
                model.events.push(note);
            }
            models.insert(fresh.clone(), model);
            let mut tags = vec![r_tag(&fresh, Marker::Both)];
            tags.extend(
                author
                    .list
                    .iter()
                    .flatten()
                    .map(|d| r_tag(&world.relays[d.relay].url, d.marker)),
            );
            let list = event(
                MOVED_LIST_BASE + a as u64,
                &author.pubkey,
                UNIX_START + MOVE_AT_SECS,
                10002,
                &tags,
            );
            script.push((
                Duration::from_secs(MOVE_AT_SECS),
                PoolAction::StoreAt(INDEXER.to_owned(), list),
            ));
            let mut notes = Vec::new();
            for (j, at) in [9u64, 10, 11].into_iter().enumerate() {
                let n = MOVED_NOTE_BASE + 3 * k as u64 + j as u64;
                let note = event(n, &author.pubkey, UNIX_START + at, 1, &[]);
                let posted = Duration::from_secs(at);
                script.push((posted, PoolAction::StoreAt(fresh.clone(), note)));
                notes.push((n, posted));
            }
            writes_to[a].insert(0, fresh.clone());
            moved.push(Mover {
                pubkey: author.pubkey.clone(),
                relay: fresh,
                notes,
            });
        }

        // Live notes: a fifth of the authors who write somewhere live (movers aside: their
        // notes are measured on their own), one each between 5 and 25 s.
        let mut posters: Vec<usize> = (0..world.authors.len())
            .filter(|&a| !writes_to[a].is_empty() && !movers.contains(&a))
            .collect();
        sample::shuffle(&mut rng, &mut posters);
        posters.truncate((world.authors.len() as f64 * 0.2).round() as usize);
        posters.sort_unstable();
        let mut live = Vec::new();
        for (k, &a) in posters.iter().enumerate() {
            let posted = Duration::from_millis(5_000 + sample::below(&mut rng, 20_000) as u64);
            let n = LIVE_NOTE_BASE + k as u64;
            let created_at = UNIX_START + posted.as_secs();
            let note = event(n, &world.authors[a].pubkey, created_at, 1, &[]);
            for url in &writes_to[a] {
                script.push((posted, PoolAction::StoreAt(url.clone(), note.clone())));
            }
            live.push((n, posted, a));
        }
        script.sort_by_key(|(at, _)| *at);

        let mut index = RelayModel::default();
        index.events = lists;
        models.insert(INDEXER.to_owned(), index);
        Scenario {
            world,
            models,
            script,
            dead,
            reachable,
            ceiling,
            live,
            moved,
            writes_to,
        }
    }

    /// Notes posted while the app was away (between the runs): a fifth of the authors who
    /// write somewhere live, one each, on every live relay they write to.
    fn away_notes(&self, seed: u64) -> Vec<(Vec<String>, StoredEvent)> {
        let mut rng = Rng::new(seed ^ 0xa_a4a7);
        let mut posters: Vec<usize> = (0..self.world.authors.len())
            .filter(|&a| !self.writes_to[a].is_empty())
            .collect();
        sample::shuffle(&mut rng, &mut posters);
        posters.truncate((self.world.authors.len() as f64 * 0.2).round() as usize);
        posters.sort_unstable();
        let gap = RESTORE_AT_SECS - RUN_SECS;
        posters
            .iter()
            .enumerate()
            .map(|(k, &a)| {
                // Dated inside the gap, away from both ends.
                let at = RUN_SECS + 5 + sample::below(&mut rng, (gap - 10) as usize) as u64;
                let note = event(
                    AWAY_NOTE_BASE + k as u64,
                    &self.world.authors[a].pubkey,
                    UNIX_START + at,
                    1,
                    &[],
                );
                (self.writes_to[a].clone(), note)
            })
            .collect()
    }

    fn report(
        &self,
        loop_scores: LoopScores,
        heard: &BTreeMap<u64, u64>,
        opens: &[(u64, String)],
        watch: &Watch,
        restart: RestartReport,
    ) -> ShippedReport {
        let mut dials: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for (at, url) in opens {
            dials.entry(url.as_str()).or_default().push(*at);
        }
        let mut dead_dials_in_25s = (0, String::new());
        for (url, times) in dials.iter().filter(|(u, _)| self.dead.contains(**u)) {
            for (i, &t) in times.iter().enumerate() {
                let within = times[i..].iter().take_while(|&&u| u < t + 25_000).count();
                if within > dead_dials_in_25s.0 {
                    dead_dials_in_25s = (within, (*url).to_owned());
                }
            }
        }
        let moved = self
            .moved
            .iter()
            .map(
                |Mover {
                     pubkey,
                     relay,
                     notes,
                 }| MovedAuthor {
                    pubkey: pubkey.clone(),
                    relay: relay.clone(),
                    dial_after_ms: dials
                        .get(relay.as_str())
                        .and_then(|t| t.first())
                        .map(|&t| t.saturating_sub(MOVE_AT_SECS * 1000)),
                    note_delays_ms: notes
                        .iter()
                        .map(|(n, posted)| {
                            let posted = u64::try_from(posted.as_millis()).unwrap_or(u64::MAX);
                            heard.get(n).map(|&t| t.saturating_sub(posted))
                        })
                        .collect(),
                },
            )
            .collect();
        let live_relays = self.world.relays.iter().filter(|r| r.live).count();
        ShippedReport {
            seed: self.world.config.seed,
            follows: self.world.config.follows,
            world: self.world.stats(),
            relays: (live_relays, self.world.relays.len() - live_relays),
            loop_scores,
            stored_reachable: self.reachable.len(),
            stored_delivered: self
                .reachable
                .iter()
                .filter(|n| heard.contains_key(n))
                .count(),
            stored_ceiling: self.ceiling.len(),
            live_posted: self.live.len(),
            live_delivered: self
                .live
                .iter()
                .filter(|(n, ..)| heard.contains_key(n))
                .count(),
            live_bound: self.live_bound(),
            live_missed: self.live_missed(heard, &dials),
            moved,
            dead_dials_in_25s,
            dead_dialed: dials.keys().filter(|u| self.dead.contains(**u)).count(),
            peak_routed: watch.peak_routed,
            dead_held_samples: watch.dead_held_samples,
            relays_contacted: dials.len(),
            restart,
            delivered: heard.keys().copied().collect(),
        }
    }
}

impl Scenario {
    /// The plan of `BUDGET - 1` relays (the indexer holds a slot) chosen by ground truth:
    /// each mover's new relay (the moves are promised a slot each), then greedy maximum
    /// coverage of every author who writes somewhere live. Who will post is not known to it,
    /// so it bounds what any plan hears of notes posted by authors drawn at random.
    fn ground_truth_plan(&self) -> BTreeSet<&str> {
        let mut left: Vec<usize> = (0..self.writes_to.len())
            .filter(|&a| !self.writes_to[a].is_empty())
            .collect();
        let mut plan: BTreeSet<&str> = self.moved.iter().map(|m| m.relay.as_str()).collect();
        left.retain(|&a| !self.writes_to[a].iter().any(|u| plan.contains(u.as_str())));
        while plan.len() < BUDGET - 1 {
            let mut gain: BTreeMap<&str, usize> = BTreeMap::new();
            for &a in &left {
                for url in &self.writes_to[a] {
                    *gain.entry(url.as_str()).or_default() += 1;
                }
            }
            let Some((best, _)) = gain
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            else {
                break;
            };
            plan.insert(best);
            left.retain(|&a| !self.writes_to[a].iter().any(|u| u == best));
        }
        plan
    }

    /// The live notes the [ground-truth plan](Self::ground_truth_plan) hears.
    fn live_bound(&self) -> usize {
        let plan = self.ground_truth_plan();
        self.live
            .iter()
            .filter(|&&(.., a)| self.writes_to[a].iter().any(|u| plan.contains(u.as_str())))
            .count()
    }

    fn live_missed(
        &self,
        heard: &BTreeMap<u64, u64>,
        dials: &BTreeMap<&str, Vec<u64>>,
    ) -> Vec<LiveMiss> {
        self.live
            .iter()
            .filter(|(n, ..)| !heard.contains_key(n))
            .map(|&(_, posted, a)| {
                let author = &self.world.authors[a];
                let declared = |url: &str| {
                    author
                        .list
                        .iter()
                        .flatten()
                        .any(|d| d.marker.is_write() && self.world.relays[d.relay].url == url)
                };
                LiveMiss {
                    posted_ms: u64::try_from(posted.as_millis()).unwrap_or(u64::MAX),
                    listed: author.list.is_some(),
                    on: self.writes_to[a]
                        .iter()
                        .map(|url| {
                            let times = dials.get(url.as_str()).cloned().unwrap_or_default();
                            (url.clone(), declared(url), times)
                        })
                        .collect(),
                }
            })
            .collect()
    }
}

/// A relay list's `r` tag for `url` with `marker`.
fn r_tag(url: &str, marker: Marker) -> String {
    match marker {
        Marker::Both => format!(r#"["r","{url}"]"#),
        Marker::Write => format!(r#"["r","{url}","write"]"#),
        Marker::Read => format!(r#"["r","{url}","read"]"#),
    }
}

/// Event `n` (its id is `n` in 64 hex digits) by `pubkey`. The PoolSim's verifier refuses
/// only content containing "forged", so any signature will do.
fn event(n: u64, pubkey: &str, created_at: u64, kind: u64, tags: &[String]) -> StoredEvent {
    StoredEvent {
        n,
        created_at,
        kind,
        json: format!(
            r#"{{"id":"{n:064x}","pubkey":"{pubkey}","created_at":{created_at},"kind":{kind},"tags":[{}],"content":"","sig":"{n:0128x}"}}"#,
            tags.join(",")
        ),
    }
}

fn share(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn list_ms(values: impl Iterator<Item = Option<u64>>) -> String {
    let shown: Vec<String> = values
        .map(|v| v.map_or_else(|| "never".to_owned(), |v| v.to_string()))
        .collect();
    shown.join(", ")
}
