//! RelaySession costs: EVENT dispatch with 10 / 1 000 / 10 000 live subscriptions (the ratio
//! shows whether dispatch depends on the number of subscriptions), a 10 000-subscription
//! replay, and resident memory per subscription.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tether_core::nostr::{Filter, Priority, RelayConfig, RelaySession, Transmit};
use tether_core::{Instant, LinkConfig, Liveness};

fn filter(i: usize) -> Filter {
    Filter::new(&format!(r#"{{"kinds":[1],"authors":["{i:064x}"]}}"#)).expect("valid filter")
}

fn drain(s: &mut RelaySession) -> usize {
    let mut reqs = 0;
    loop {
        let mut any = false;
        while let Some(t) = s.poll_transmit() {
            any = true;
            if matches!(&t, Transmit::Send(text) if text.starts_with("[\"REQ\"")) {
                reqs += 1;
            }
        }
        while s.poll_event().is_some() {
            any = true;
        }
        if !any {
            return reqs;
        }
    }
}

/// A session with `n` subscriptions registered, connected, and the socket just opened.
fn opened(n: usize) -> (RelaySession, Instant) {
    // The benchmark plays a relay that never answers during the replay: no EOSE timeouts and
    // no ping watchdog, or a 60-second replay would trip them.
    let config = RelayConfig {
        max_registered: n.max(1),
        eose_timeout: Duration::from_secs(3_600),
        link: LinkConfig {
            liveness: Liveness::Off,
            ..LinkConfig::default()
        },
        ..RelayConfig::default()
    };
    let mut s = RelaySession::new(config, 1);
    let t0 = Instant::ZERO;
    for i in 0..n {
        s.subscribe(t0, vec![filter(i)], Priority::NORMAL)
            .expect("subscribe");
    }
    s.connect(t0);
    drain(&mut s);
    s.handle_open(t0);
    (s, t0)
}

/// Drive a replay to completion; returns (REQs sent, batches, session, time).
fn replay(mut s: RelaySession, mut now: Instant) -> (usize, usize, RelaySession, Instant) {
    let (mut reqs, mut batches) = (0, 0);
    loop {
        let sent = drain(&mut s);
        if sent > 0 {
            reqs += sent;
            batches += 1;
        }
        match s.poll_timeout() {
            Some(t) if t > now && t < now + Duration::from_secs(60) => now = t,
            _ => return (reqs, batches, s, now),
        }
        s.handle_timeout(now);
    }
}

/// `n` live subscriptions (REQ sent, EOSE received).
fn live(n: usize) -> (RelaySession, Instant) {
    let (s, t0) = opened(n);
    let (reqs, _, mut s, now) = replay(s, t0);
    assert_eq!(reqs, n, "every subscription replayed");
    for i in 0..n {
        s.handle_frame(now, &format!(r#"["EOSE","{i:x}:1"]"#));
    }
    drain(&mut s);
    assert_eq!(s.open_subscriptions(), n);
    (s, now)
}

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

fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("handle_frame_event");
    const FRAMES: usize = 2_000;
    group.throughput(Throughput::Elements(FRAMES as u64));
    for n in [10usize, 1_000, 10_000] {
        let (session, now) = live(n);
        // Steady state: every subscription has seen events before the measured ones (the
        // first event a subscription sees allocates its id memory).
        let warm = event_frames(n, n.max(FRAMES), 0);
        let frames = event_frames(n, FRAMES, n.max(FRAMES));
        group.bench_function(format!("{n}_subs"), |b| {
            b.iter_batched_ref(
                || {
                    let mut s = RelaySessionClone::from(&session, n);
                    for f in &warm {
                        s.0.handle_frame(now, f);
                    }
                    while s.0.poll_event().is_some() {}
                    (s, 0)
                },
                |(s, _)| {
                    for f in &frames {
                        s.0.handle_frame(now, black_box(f));
                        while let Some(e) = s.0.poll_event() {
                            black_box(e);
                        }
                    }
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// Sessions are not `Clone` (nothing should copy one by accident); the benchmark rebuilds the
/// same live session for each batch instead.
struct RelaySessionClone(RelaySession);

impl RelaySessionClone {
    fn from(_: &RelaySession, n: usize) -> Self {
        RelaySessionClone(live(n).0)
    }
}

fn replay_10k(c: &mut Criterion) {
    let (s, t0) = opened(10_000);
    let (reqs, batches, _, end) = replay(s, t0);
    println!(
        "replay of 10000 subscriptions: {reqs} REQs in {batches} batches over {:?} simulated",
        end - t0
    );
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.bench_function("10000_subs", |b| {
        b.iter_batched(
            || opened(10_000),
            |(s, t0)| black_box(replay(s, t0).0),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn rss_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn memory(_: &mut Criterion) {
    const N: usize = 100_000;
    let filter_json: usize = (0..N).map(|i| filter(i).json().len()).sum();
    let Some(before) = rss_bytes() else {
        println!("memory: /proc/self/status not available");
        return;
    };
    let (s, now) = live(N);
    let after = rss_bytes().unwrap_or(before);
    let per_sub = after.saturating_sub(before) / N;
    let json_per_sub = filter_json / N;
    println!(
        "memory: {per_sub} B resident per live subscription ({json_per_sub} B of it filter JSON, {} B beyond it); {} open at {now:?}",
        per_sub.saturating_sub(json_per_sub),
        s.open_subscriptions()
    );
    black_box(s);
}

criterion_group!(benches, memory, dispatch, replay_10k);
criterion_main!(benches);
