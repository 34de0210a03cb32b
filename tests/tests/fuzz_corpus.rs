//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/*`) through the same target
//! functions the fuzzer runs, on stable Rust, so CI checks the corpora without nightly.

use std::path::{Path, PathBuf};

use tether_testkit::fuzz;

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    // An empty or missing corpus would make this test pass without checking anything.
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    files
}

/// Run `target` on every file of its corpus; report every failing file, not just the first.
fn replay(name: &str, target: fn(&[u8])) {
    let mut failed = Vec::new();
    for path in corpus(name) {
        let data = std::fs::read(&path).expect("readable corpus file");
        if std::panic::catch_unwind(|| target(&data)).is_err() {
            failed.push(path.display().to_string());
            if name == "relay_session" {
                // The target runs the Sim quiet; the same run with the transcript on panics
                // again, this time with the transcript's tail in its message.
                let _ = std::panic::catch_unwind(|| fuzz::relay_session_transcript(&data));
            }
            if name == "pool" {
                // Likewise: the pool target runs its PoolSim quiet.
                let _ = std::panic::catch_unwind(|| fuzz::pool_transcript(&data));
            }
        }
    }
    assert!(failed.is_empty(), "{name} fails on {failed:#?}");
}

#[test]
fn relay_frame_corpus() {
    replay("relay_frame", fuzz::relay_frame);
}

#[test]
fn sse_parser_corpus() {
    replay("sse_parser", fuzz::sse_parser);
}

#[test]
fn checkpoint_corpus() {
    replay("checkpoint", fuzz::checkpoint);
}

#[test]
fn negentropy_corpus() {
    replay("negentropy", fuzz::negentropy);
}

#[test]
fn relay_session_corpus() {
    replay("relay_session", fuzz::relay_session);
}

#[test]
fn pool_corpus() {
    replay("pool", fuzz::pool);
}

#[test]
fn pool_outbox_corpus() {
    replay("pool_outbox", fuzz::pool_outbox);
}

#[test]
fn router_corpus() {
    replay("router", fuzz::router);
}

#[test]
fn sse_session_corpus() {
    replay("sse_session", fuzz::sse_session);
}

/// A target's name and body.
type Target = (&'static str, fn(&[u8]));

/// Inputs per second of each target over its committed corpus, in this build's profile: the
/// before/after measure of fuzz-target speed (run it in release, it is ignored by default).
///
/// `cargo test --release -p tether-testkit --test fuzz_corpus -- --ignored --nocapture`
#[test]
#[ignore = "a timing harness, not a check: run it in release"]
fn corpus_rates() {
    let targets: [Target; 5] = [
        ("relay_frame", fuzz::relay_frame),
        ("sse_parser", fuzz::sse_parser),
        ("relay_session", fuzz::relay_session),
        ("sse_session", fuzz::sse_session),
        ("pool", fuzz::pool),
    ];
    let only = std::env::var("TETHER_FUZZ_TARGET").ok();
    for (name, target) in targets {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        // TETHER_FUZZ_CORPUS: another corpus root (`<root>/<target>/*`), e.g. an older one.
        let files = match std::env::var("TETHER_FUZZ_CORPUS") {
            Ok(root) => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(&root).join(name))
                    .expect("TETHER_FUZZ_CORPUS/<target>")
                    .map(|entry| entry.expect("corpus entry").path())
                    .collect();
                files.sort();
                files
            }
            Err(_) => corpus(name),
        };
        let inputs: Vec<Vec<u8>> = files
            .iter()
            .map(|p| std::fs::read(p).expect("readable corpus file"))
            .collect();
        let start = std::time::Instant::now();
        let cpu_start = cpu_seconds();
        let mut runs = 0u64;
        // At least three passes and two seconds, so one slow input does not decide the rate.
        while runs < 3 * inputs.len() as u64 || start.elapsed().as_secs_f64() < 2.0 {
            for data in &inputs {
                target(data);
                runs += 1;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        // The machine is shared: inputs per CPU second is the comparable number.
        let cpu = cpu_seconds().map(|c| c - cpu_start.unwrap_or(0.0));
        println!(
            "{name:<14} {} files, {runs} inputs in {secs:.2} s: {:.0} inputs/s wall, {} inputs/s CPU",
            inputs.len(),
            runs as f64 / secs,
            cpu.map_or("?".to_owned(), |c| format!("{:.0}", runs as f64 / c)),
        );
    }
}

/// This process's user + system CPU time, from `/proc/self/stat` (Linux; `None` elsewhere).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(ticks / 100.0)
}
