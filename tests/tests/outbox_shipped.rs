//! What ships, measured: the whole pool (`RelayPool::subscribe_outbox` through `PoolSim`)
//! routing by people, 200 follows, seeds 1 and 2, in two worlds
//! (`tether_testkit::outbox::shipped`), beside the loop benchmark's numbers on each:
//!
//! - the loop benchmark's world: 400 relays, a long tail in which a fifth of the authors
//!   write only to relays few others use;
//! - the world issue 51 tried `tether req --outbox` in: 60 relays.
//!
//! Prints the tables (`cargo test -p tether-testkit --test outbox_shipped -- --nocapture`)
//! and holds the goals routing by people is held to. Two are absolute shares of notes by
//! authors drawn at random (live notes and notes posted while away, 95%). Beside each the
//! test prints the share a plan of the budget chosen greedily from ground truth hears (a
//! reference, not a proof that no plan does better: greedy coverage is within 1 - 1/e of
//! the best), says `GOAL FAILS` where the pool is short of 95%, and holds the pool to 0.9
//! of what that plan hears.
//! All four worlds and the repeat of seed 1 take about 8 s in the dev profile.

use tether_testkit::outbox::shipped::{self, ShippedReport, BUDGET};
use tether_testkit::outbox::WorldConfig;

const FOLLOWS: usize = 200;
/// The relay count of the world issue 51 measured the CLI in.
const ISSUE_RELAYS: usize = 60;

fn issue_world(seed: u64) -> WorldConfig {
    let mut config = WorldConfig::new(seed, FOLLOWS);
    config.relays = ISSUE_RELAYS;
    config
}

#[test]
fn the_shipped_pool_over_the_outbox_world() {
    let long_tail: Vec<ShippedReport> = [1, 2].map(|seed| shipped::run(seed, FOLLOWS)).into();
    let issue: Vec<ShippedReport> = [1, 2]
        .map(|seed| shipped::run_world(&issue_world(seed)))
        .into();
    for (name, reports) in [
        ("the loop benchmark's world (400 relays)", &long_tail),
        ("issue 51's world (60 relays)", &issue),
    ] {
        println!(
            "\nThe pool through PoolSim in {name}, {FOLLOWS} follows, budget {BUDGET}, one \
             subscription at 0 s, 40 s; restored at 100 s for 15 s\n\n{}\n{}",
            shipped::table(reports),
            shipped::goals_table(reports)
        );
        for r in reports {
            explain(name, r);
        }
    }
    // The same seed, the same run: everything the report holds, delivered set included.
    assert_eq!(shipped::run(1, FOLLOWS), long_tail[0], "seed 1 twice");
    for r in long_tail.iter().chain(&issue) {
        holds(r);
    }
    // In issue 51's world a plan of the budget can reach 95% of the notes posted while
    // away, and the pool does.
    for r in &issue {
        assert!(
            r.restart_share() >= 0.95,
            "seed {}: {:?}",
            r.seed,
            r.restart
        );
    }
}

/// Seeds the goals were not tuned on: issue 51's world at seeds 3-10 holds every goal
/// [`holds`] states, and prints the live and away shares beside the ground-truth plan's.
#[test]
fn the_shipped_pool_on_seeds_it_was_not_tuned_on() {
    let reports: Vec<ShippedReport> = (3..=10)
        .map(|seed| shipped::run_world(&issue_world(seed)))
        .collect();
    println!("\nissue 51's world (60 relays), seeds 3-10:\n");
    println!("| seed | live notes | ground truth | away within 10 s | ground truth |");
    println!("|---:|---:|---:|---:|---:|");
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    for r in &reports {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.seed,
            pct(r.live_recall()),
            pct(r.live_bound_share()),
            pct(r.restart_share()),
            pct(r.restart_bound_share())
        );
    }
    let mean =
        |f: fn(&ShippedReport) -> f64| reports.iter().map(f).sum::<f64>() / reports.len() as f64;
    println!(
        "| mean | {} | {} | {} | {} |",
        pct(mean(ShippedReport::live_recall)),
        pct(mean(ShippedReport::live_bound_share)),
        pct(mean(ShippedReport::restart_share)),
        pct(mean(ShippedReport::restart_bound_share))
    );
    for r in &reports {
        holds(r);
    }
}

/// Prints why each failing goal fails: the notes missed and where they were.
fn explain(world: &str, r: &ShippedReport) {
    for m in &r.moved {
        println!(
            "seed {} moved {}… to {}: dialed after {:?} ms, new notes after {:?} ms",
            r.seed,
            &m.pubkey[..8],
            m.relay,
            m.dial_after_ms,
            m.note_delays_ms
        );
    }
    for m in &r.live_missed {
        println!("seed {} live note missed: {m:?}", r.seed);
    }
    println!(
        "seed {} restart: notes posted while away and missed at 10 s, on {:?}",
        r.seed, r.restart.missed
    );
    for g in r.goals().iter().filter(|g| !g.holds) {
        println!(
            "GOAL FAILS in {world}, seed {}: {} ({}): {}",
            r.seed, g.name, g.target, g.seen
        );
    }
}

/// The goals that hold in every world.
fn holds(r: &ShippedReport) {
    let seed = r.seed;
    let recall = r.stored_recall();
    assert!(
        recall >= 0.95 * r.ceiling(),
        "seed {seed}: stored recall {recall:.3} < 0.95 × ceiling {:.3}",
        r.ceiling()
    );
    let best = r.loop_scores.best_capped.1;
    assert!(
        recall >= best + 0.03,
        "seed {seed}: stored recall {recall:.3} < best capped {best:.3} + 0.03"
    );
    // Live notes and notes posted while away are by authors drawn at random: the pool
    // hears at least 0.9 of what a plan of the budget chosen by ground truth hears
    // (the movers' new relays, then greedy coverage of every author).
    assert!(
        r.live_recall() >= 0.9 * r.live_bound_share(),
        "seed {seed}: live {}/{} against a ground-truth plan's {}: {:?}",
        r.live_delivered,
        r.live_posted,
        r.live_bound,
        r.live_missed
    );
    assert!(
        r.restart_share() >= 0.9 * r.restart_bound_share(),
        "seed {seed}: {:?}",
        r.restart
    );
    // A newer list's new relay is dialed within 2 s (the floor puts the mover on a relay
    // the list added) and each note posted there after the move arrives within 5 s.
    assert!(
        r.worst_move_dial_ms().is_some_and(|d| d <= 2_000),
        "seed {seed}: {:?}",
        r.moved
    );
    assert!(
        r.worst_move_note_ms().is_some_and(|d| d <= 5_000),
        "seed {seed}: {:?}",
        r.moved
    );
    assert!(
        r.dead_dials_in_25s.0 <= 3,
        "seed {seed}: {:?}",
        r.dead_dials_in_25s
    );
    assert!(
        r.peak_routed <= BUDGET && r.restart.peak_routed <= BUDGET,
        "seed {seed}: {} / {}",
        r.peak_routed,
        r.restart.peak_routed
    );
    assert_eq!(r.dead_held_samples, 0, "seed {seed}: dead relays held");
    // At most 25 relays in the first 10 s after a restart: the learned plan, re-checked by
    // the answer deadline, and `RESTORED_PROBES` probes.
    assert!(
        r.restart.relays_contacted_early <= 25,
        "seed {seed}: {:?}",
        r.restart
    );
}

/// The PoolSim transcripts of both runs of each seed, written under Cargo's test temp dir
/// for reading why a number is what it is (`-- --ignored --nocapture` prints the paths).
#[test]
#[ignore = "writes transcripts of several MB; run on demand"]
fn write_transcripts() {
    for (name, config) in [1, 2].into_iter().flat_map(|seed| {
        [
            (format!("seed{seed}"), WorldConfig::new(seed, FOLLOWS)),
            (format!("issue_seed{seed}"), issue_world(seed)),
        ]
    }) {
        let (report, runs) = shipped::run_traced(&config);
        assert_eq!(
            report,
            shipped::run_world(&config),
            "a transcript changes nothing"
        );
        for (i, text) in runs.iter().enumerate() {
            let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("outbox_shipped_{name}_run{}.txt", i + 1));
            std::fs::write(&path, text).expect("write the transcript");
            println!("{}", path.display());
        }
    }
}
