//! RelaySession costs: EVENT dispatch with 10 / 1 000 / 10 000 live subscriptions (the ratio
//! shows whether dispatch depends on the number of subscriptions) and a 10 000-subscription
//! replay. Memory per subscription is counted exactly by `tests/memory.rs`.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tether_bench::{live_session, opened, replay};
use tether_core::nostr::RelaySession;
use tether_core::{Epoch, Instant};

fn event_frames(subs: usize, count: usize, first: usize) -> Vec<String> {
    (first..first + count)
        .map(|k| {
            let sub = (k * 7919) % subs;
            format!(
                r#"["EVENT","{sub:x}:1",{{"id":"{:064x}","pubkey":"{:064x}","created_at":{},"kind":1,"tags":[["p","{:064x}"]],"content":"hello from event {k}, with a little text to make it realistic","sig":"{:0128x}"}}]"#,
                k + 1,
                sub,
                1_700_000_000 + k,
                k,
                k
            )
        })
        .collect()
}

/// Hand `frames` to the session, draining the events each produces (the measured work).
fn feed(s: &mut RelaySession, now: Instant, frames: &[String]) {
    for f in frames {
        let _ = s.handle_frame(now, Epoch(1), black_box(f));
        while let Some(e) = s.poll_event() {
            black_box(e);
        }
    }
}

fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("handle_frame_event");
    const FRAMES: usize = 2_000;
    group.throughput(Throughput::Elements(FRAMES as u64));
    for n in [10usize, 1_000, 10_000] {
        // Later than any replay: the session treats time as never going backwards anyway.
        let now = Instant::from_millis(3_600_000);
        // Steady state: every subscription has seen events before the measured ones (the
        // first event a subscription sees allocates its id memory).
        let warm = event_frames(n, n.max(FRAMES), 0);
        let frames = event_frames(n, FRAMES, n.max(FRAMES));
        group.bench_function(format!("{n}_subs"), |b| {
            b.iter_batched_ref(
                || {
                    let mut s = live_session(n);
                    for f in &warm {
                        let _ = s.handle_frame(now, Epoch(1), f);
                    }
                    while s.poll_event().is_some() {}
                    s
                },
                |s| feed(s, now, &frames),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// One live subscription streaming `count` events, `per_sec` of them per second of
/// `created_at`: a firehose fills the catch-up memory (5 s of ids, at most 256), a trickle
/// keeps it nearly empty.
fn stream_frames(count: usize, per_sec: usize) -> Vec<String> {
    (0..count)
        .map(|k| {
            format!(
                r#"["EVENT","0:1",{{"id":"{:064x}","pubkey":"{:064x}","created_at":{},"kind":1,"tags":[],"content":"streaming event {k}","sig":"{:0128x}"}}]"#,
                k + 1,
                7,
                1_700_000_000 + k / per_sec,
                k
            )
        })
        .collect()
}

fn streaming(c: &mut Criterion) {
    let mut group = c.benchmark_group("live_stream");
    const FRAMES: usize = 4_000;
    group.throughput(Throughput::Elements(FRAMES as u64));
    for per_sec in [1usize, 100] {
        let now = Instant::from_millis(3_600_000);
        let frames = stream_frames(FRAMES, per_sec);
        group.bench_function(format!("{per_sec}_per_sec"), |b| {
            b.iter_batched_ref(
                || live_session(1),
                |s| feed(s, now, &frames),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn replay_10k(c: &mut Criterion) {
    let mut s = opened(10_000);
    let (reqs, batches, end) = replay(&mut s);
    println!(
        "replay of 10000 subscriptions: {reqs} REQs in {batches} batches over {:?} simulated",
        end.since_origin()
    );
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.bench_function("10000_subs", |b| {
        b.iter_batched(
            || opened(10_000),
            |mut s| black_box(replay(&mut s).0),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, dispatch, streaming, replay_10k);
criterion_main!(benches);
