//! The cost of one verification, against the `nostr` crate's `Event::verify` on the same
//! event: `cargo bench -p tether-verify --bench verify`.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{criterion_group, criterion_main, Criterion};
use nostr::{Event, EventBuilder, JsonUtil, Keys};
use tether_verify::Verifier;

fn verify(c: &mut Criterion) {
    let keys = Keys::generate();
    let raw = EventBuilder::text_note("a note of ordinary length, with a little text in it")
        .sign_with_keys(&keys)
        .expect("signed")
        .as_json();
    let verifier = Verifier::new();
    let mut group = c.benchmark_group("verify");
    group.bench_function("tether_verify", |b| {
        b.iter(|| verifier.verify(std::hint::black_box(&raw)))
    });
    group.bench_function("nostr_parse_and_verify", |b| {
        b.iter(|| Event::from_json(std::hint::black_box(&raw)).map(|event| event.verify().is_ok()))
    });
    group.finish();
}

criterion_group!(benches, verify);
criterion_main!(benches);
