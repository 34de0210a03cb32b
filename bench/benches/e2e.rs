//! `cargo bench -p tether-bench --bench e2e`: tether-tokio and nostr-sdk each receive every
//! event from one in-process nostr-relay-builder preloaded with 100 000 signed notes,
//! interleaved over several rounds in one run; prints the medians and ratios as a markdown
//! table and writes every round to `target/e2e/e2e.csv`.
//!
//! `TETHER_E2E_EVENTS` and `TETHER_E2E_ROUNDS` change the corpus size (100 000) and rounds (5).
//!
//! `TETHER_E2E_RELAYS=3` runs the overlapping case instead: three relays, each holding the
//! same `TETHER_E2E_EVENTS` notes plus a tenth as many of its own; the pool contenders and
//! nostr-sdk's `Client` each receive every unique event once from all three.

use std::fmt::Write as _;
use std::path::PathBuf;

use tether_bench::e2e::{self, Contender, Measurement, Relay};

fn main() -> std::io::Result<()> {
    // `cargo bench` passes `--bench`; a filter argument from `cargo bench -- x` is ignored.
    let shared = env_usize("TETHER_E2E_EVENTS", 100_000);
    let rounds = env_usize("TETHER_E2E_ROUNDS", 5);
    let relay_count = env_usize("TETHER_E2E_RELAYS", 1).max(1);
    let own = if relay_count > 1 { shared / 10 } else { 0 };
    eprintln!("signing {shared} shared notes and {own} of each relay's own ...");
    let corpus = e2e::realistic_notes(shared, 42);
    let owns: Vec<Vec<nostr::Event>> = (0..relay_count)
        .map(|i| e2e::realistic_notes(own, 100 + i as u64))
        .collect();
    let unique: Vec<&nostr::Event> = corpus.iter().chain(owns.iter().flatten()).collect();
    let events = unique.len();
    let expected = e2e::fingerprint(unique.iter().map(|e| e.id.as_bytes()));
    let json: Vec<String> = unique
        .iter()
        .map(|e| nostr::JsonUtil::as_json(*e))
        .collect();
    let bytes: usize = json.iter().map(String::len).sum();
    eprintln!(
        "{events} unique notes, {:.1} MB of event JSON; starting {relay_count} relay(s) ...",
        bytes as f64 / 1e6
    );
    let relays: Vec<Relay> = owns
        .iter()
        .map(|mine| Relay::start(&[corpus.as_slice(), mine.as_slice()].concat()))
        .collect();
    let urls: Vec<String> = relays.iter().map(|r| r.url().to_owned()).collect();
    drop((corpus, owns));

    // One unmeasured pass each warms the relay's and the allocator's caches alike.
    let mut csv = String::from("round,contender,events,wall_s,client_cpu_s,process_cpu_s\n");
    let mut results: Vec<(Contender, Vec<Measurement>)> = contenders(relay_count)
        .into_iter()
        .map(|c| (c, Vec::new()))
        .collect();
    let mut floors = Vec::new();
    for round in 0..=rounds {
        for (contender, runs) in results.iter_mut() {
            let m = e2e::measure_many(*contender, &urls, events);
            assert_eq!(
                (m.received, m.fingerprint),
                (events, expected),
                "{} did not receive every event exactly once",
                contender.name()
            );
            eprintln!(
                "round {round}: {:<28} {:>9.0} events/s, client CPU {:>7.3} s, process CPU {:>7.3} s",
                contender.name(),
                m.events_per_sec(),
                m.client_cpu.as_secs_f64(),
                m.process_cpu.as_secs_f64()
            );
            if round == 0 {
                continue;
            }
            let _ = writeln!(
                csv,
                "{round},{},{},{:.6},{:.6},{:.6}",
                contender.name(),
                m.received,
                m.wall.as_secs_f64(),
                m.client_cpu.as_secs_f64(),
                m.process_cpu.as_secs_f64()
            );
            runs.push(m);
        }
        if round > 0 {
            floors.push(e2e::verify_floor(&json).as_secs_f64());
        }
    }
    if relay_count > 1 {
        println!("{relay_count} relays, each with the same {shared} notes and {own} of its own:");
    }
    println!("{}", table(events, rounds, &results));
    println!("{}", verification_floor(events, &floors, &results));
    let dir = out_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("e2e.csv"), csv)?;
    eprintln!("wrote {}", dir.join("e2e.csv").display());
    Ok(())
}

/// Medians, and ratios to nostr-sdk taken round by round (the two ran back to back, under the
/// same machine load) before the median: the machine's speed drifts between rounds.
fn table(events: usize, rounds: usize, results: &[(Contender, Vec<Measurement>)]) -> String {
    let rate = |m: &Measurement| m.events_per_sec();
    let cpu = |m: &Measurement| m.client_cpu.as_secs_f64();
    let sdk = results
        .iter()
        .find(|(c, _)| *c == Contender::NostrSdk)
        .map(|(_, runs)| runs.as_slice());
    let mut out = format!(
        "{events} events, median of {rounds} interleaved rounds; ratios are per-round medians\n\n\
         | client | events/s | client CPU | CPU per event | process CPU | events/s vs nostr-sdk | client CPU vs nostr-sdk |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    );
    for (contender, runs) in results {
        let paired = |f: fn(&Measurement) -> f64| match sdk {
            Some(sdk) => format!(
                "{:.2}x",
                median(runs.iter().zip(sdk).map(|(m, s)| f(m) / f(s)))
            ),
            None => "-".into(),
        };
        let c = median(runs.iter().map(cpu));
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.3} s | {:.2} µs | {:.3} s | {} | {} |",
            contender.name(),
            median(runs.iter().map(rate)),
            c,
            c / events as f64 * 1e6,
            median(runs.iter().map(|m| m.process_cpu.as_secs_f64())),
            paired(rate),
            paired(cpu),
        );
    }
    out
}

/// The verification alone (no network, same round) and what it bounds: a client that verifies
/// on one thread, as nostr-sdk does, cannot beat nostr-sdk by more than nostr-sdk's CPU over
/// that floor. (Subtracting the floor from each client's CPU is not reported: the difference
/// of two noisy 7 s figures is smaller than their noise; callgrind's counts are the clean split.)
fn verification_floor(
    events: usize,
    floors: &[f64],
    results: &[(Contender, Vec<Measurement>)],
) -> String {
    let floor = median(floors.iter().copied());
    let mut out = format!(
        "verification alone (nostr `Event::from_json` + `verify`, no network): {:.2} µs per event\n",
        floor / events as f64 * 1e6
    );
    if let Some((_, sdk)) = results.iter().find(|(c, _)| *c == Contender::NostrSdk) {
        let bound = median(
            sdk.iter()
                .zip(floors)
                .map(|(m, floor)| m.client_cpu.as_secs_f64() / floor),
        );
        let _ = writeln!(
            out,
            "nostr-sdk CPU / verification alone: {bound:.2}x (the most a one-thread verifying client can gain)"
        );
    }
    out
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `TETHER_E2E_ONLY=tether` (or `verifying`, `pool`, `pool-verifying`, `nostr-sdk`) runs one
/// contender, for profiling. Several relays: only the contenders that span them.
fn contenders(relays: usize) -> Vec<Contender> {
    let all = if relays > 1 {
        Contender::MANY.to_vec()
    } else {
        Contender::ALL.to_vec()
    };
    let Ok(only) = std::env::var("TETHER_E2E_ONLY") else {
        return all;
    };
    all.into_iter()
        .filter(|c| match c {
            Contender::Tether => only == "tether",
            Contender::TetherVerifying => only == "verifying",
            Contender::TetherPool => only == "pool",
            Contender::TetherPoolVerifying => only == "pool-verifying",
            Contender::NostrSdk => only == "nostr-sdk",
        })
        .collect()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn out_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
        })
        .join("e2e")
}
