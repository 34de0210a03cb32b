//! A nostr-relay-builder relay on 127.0.0.1 preloaded with `N` signed, realistic kind-1 notes
//! (tether-bench's corpus), for `bindings/python/bench/side_by_side.py`.
//!
//! `cargo run --release -p tether-ffi --example notes_relay -- 100000` prints the relay's
//! `ws://` URL once the notes are stored and serves until stdin closes.

use std::io::Read;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |s| s.parse().expect("N"));
    let notes = tether_bench::e2e::realistic_notes(n, 17);
    let relay = tether_bench::e2e::Relay::start(&notes);
    println!("{}", relay.url());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(relay);
}
