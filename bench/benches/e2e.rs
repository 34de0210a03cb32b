//! `cargo bench -p tether-bench --bench e2e`: tether-tokio and nostr-sdk each receive every
//! event from one in-process nostr-relay-builder preloaded with 100 000 signed notes,
//! interleaved over several rounds in one run; prints the medians and ratios as a markdown
//! table and writes every round to `target/e2e/e2e.csv`.
//!
//! `TETHER_E2E_EVENTS` and `TETHER_E2E_ROUNDS` change the corpus size (100 000) and rounds (5).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use tether_bench::e2e::{self, Contender, Measurement, Relay};

fn main() -> std::io::Result<()> {
    // `cargo bench` passes `--bench`; a filter argument from `cargo bench -- x` is ignored.
    let events = env_usize("TETHER_E2E_EVENTS", 100_000);
    let rounds = env_usize("TETHER_E2E_ROUNDS", 5);
    eprintln!("signing {events} notes ...");
    let corpus = e2e::realistic_notes(events, 42);
    let expected = e2e::fingerprint(corpus.iter().map(|e| e.id.as_bytes()));
    let bytes: usize = corpus.iter().map(|e| nostr::JsonUtil::as_json(e).len()).sum();
    eprintln!("{events} notes, {:.1} MB of event JSON; starting the relay ...", bytes as f64 / 1e6);
    let relay = Relay::start(&corpus);
    drop(corpus);

    // One unmeasured pass each warms the relay's and the allocator's caches alike.
    let mut csv = String::from("round,contender,events,wall_s,client_cpu_s,process_cpu_s\n");
    let mut results: Vec<(Contender, Vec<Measurement>)> =
        Contender::ALL.iter().map(|&c| (c, Vec::new())).collect();
    for round in 0..=rounds {
        for (contender, runs) in results.iter_mut() {
            let m = e2e::measure(*contender, relay.url(), events);
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
    }
    println!("{}", table(events, rounds, &results));
    let dir = out_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("e2e.csv"), csv)?;
    eprintln!("wrote {}", dir.join("e2e.csv").display());
    Ok(())
}

fn table(events: usize, rounds: usize, results: &[(Contender, Vec<Measurement>)]) -> String {
    let median = |runs: &[Measurement], f: fn(&Measurement) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let rate = |runs: &[Measurement]| median(runs, Measurement::events_per_sec);
    let cpu = |runs: &[Measurement]| median(runs, |m| m.client_cpu.as_secs_f64());
    let sdk = results
        .iter()
        .find(|(c, _)| *c == Contender::NostrSdk)
        .map(|(_, runs)| (rate(runs), cpu(runs)))
        .expect("nostr-sdk measured");
    let mut out = format!(
        "{events} events, median of {rounds} interleaved rounds\n\n\
         | client | events/s | client CPU | CPU per event | events/s vs nostr-sdk | CPU vs nostr-sdk |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |\n"
    );
    for (contender, runs) in results {
        let (r, c) = (rate(runs), cpu(runs));
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.3} s | {:.2} µs | {:.2}x | {:.2}x |",
            contender.name(),
            r,
            c,
            Duration::from_secs_f64(c / events as f64).as_secs_f64() * 1e6,
            r / sdk.0,
            c / sdk.1
        );
    }
    out
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
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"))
        .join("e2e")
}
