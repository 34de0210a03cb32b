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
fn relay_session_corpus() {
    replay("relay_session", fuzz::relay_session);
}

#[test]
fn sse_session_corpus() {
    replay("sse_session", fuzz::sse_session);
}
