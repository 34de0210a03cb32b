//! RelayPool costs with 10 / 100 / 1 000 relays, one subscription on every relay: an EVENT
//! from one relay (dispatch plus cross-relay dedup), an EOSE from one relay (the outcome
//! bookkeeping), and `poll_timeout` with every relay holding a deadline. Flat from 10 to
//! 1 000 relays means no input scans the relays; the 1000/10 ratio is the number to read.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::time::{Duration, Instant as WallInstant};

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tether_core::nostr::{Filter, Transmit};
use tether_core::pool::{PoolConfig, RelayId, RelayPool};
use tether_core::{Epoch, Instant};

const SIZES: [usize; 3] = [10, 100, 1_000];
/// Events fed per measured batch.
const FRAMES: usize = 2_000;

/// A pool of `n` relays, every socket open, one subscription on every relay; returns each
/// relay's socket epoch and the wire id of its REQ.
fn live_pool(n: usize) -> (RelayPool, Vec<(RelayId, Epoch, String)>) {
    let now = Instant::from_millis(1_000);
    let mut config = PoolConfig::default();
    // The outcome deadline far away: it is not what is measured.
    config.eose_deadline = Duration::from_secs(3_600);
    let mut pool = RelayPool::new(config, 7);
    for _ in 0..n {
        pool.add_relay(now).expect("under max_relays");
    }
    let mut epochs = vec![Epoch(0); n];
    while let Some((relay, t)) = pool.poll_transmit() {
        if let Transmit::Open { epoch, .. } = t {
            epochs[relay.0 as usize] = epoch;
        }
    }
    for (i, &epoch) in epochs.iter().enumerate() {
        pool.handle_open(now, RelayId(i as u32), epoch)
            .expect("open");
    }
    pool.subscribe(now, vec![Filter::new(r#"{"kinds":[1]}"#).expect("filter")])
        .expect("subscribe");
    let mut wires = vec![String::new(); n];
    while let Some((relay, t)) = pool.poll_transmit() {
        if let Transmit::Send { text, .. } = t {
            // ["REQ","<wire id>",...]
            if let Some(wire) = text.split('"').nth(3) {
                wires[relay.0 as usize] = wire.to_owned();
            }
        }
    }
    while pool.poll_event().is_some() {}
    let relays = epochs
        .into_iter()
        .zip(wires)
        .enumerate()
        .map(|(i, (epoch, wire))| (RelayId(i as u32), epoch, wire))
        .collect();
    (pool, relays)
}

fn event_frame(wire: &str, k: usize) -> String {
    format!(
        r#"["EVENT","{wire}",{{"id":"{:064x}","pubkey":"{:064x}","created_at":{},"kind":1,"tags":[],"content":"hello from event {k}, with a little text to make it realistic","sig":"{:0128x}"}}]"#,
        k + 1,
        k % 97,
        1_700_000_000 + k,
        k
    )
}

/// EVENT dispatch: frames from relays spread over the pool, each id sent by two relays
/// (one delivery, one duplicate dropped by the dedup).
fn event(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool_event");
    group.throughput(Throughput::Elements(FRAMES as u64));
    // `busy`: how many of the relays send the measured frames. All of them spread the work
    // over every session (more cache misses as the pool grows); ten of a thousand shows the
    // cost of the pool's size alone.
    for (n, busy) in SIZES.map(|n| (n, n)).into_iter().chain([(1_000, 10)]) {
        let now = Instant::from_millis(2_000);
        let (pool, relays) = live_pool(n);
        let frames: Vec<(RelayId, Epoch, String)> = (0..FRAMES)
            .map(|k| {
                let (relay, epoch, wire) = &relays[(k / 2 * 7919 + k % 2) % busy];
                (*relay, *epoch, event_frame(wire, 20_000 + k / 2))
            })
            .collect();
        // Warm: the dedup memory at its bound, as in a long-running pool.
        let warm: Vec<(RelayId, Epoch, String)> = (0..10_000)
            .map(|k| {
                let (relay, epoch, wire) = &relays[k % n];
                (*relay, *epoch, event_frame(wire, k))
            })
            .collect();
        let mut pool = Some(pool);
        let name = if busy == n {
            format!("{n}_relays")
        } else {
            format!("{n}_relays_{busy}_busy")
        };
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    let mut p = pool.take().unwrap_or_else(|| live_pool(n).0);
                    for (relay, epoch, text) in &warm {
                        let _ = p.handle_frame(now, *relay, *epoch, text);
                    }
                    while p.poll_event().is_some() {}
                    p
                },
                |p| {
                    for (relay, epoch, text) in &frames {
                        let _ = p.handle_frame(now, *relay, *epoch, black_box(text));
                        while let Some(e) = p.poll_event() {
                            black_box(e);
                        }
                    }
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

/// EOSE from every relay of a fresh subscription, timed per EOSE: the last one completes
/// the outcome. Before the pool counted its answers, each EOSE scanned every relay.
fn eose(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool_eose");
    for n in SIZES {
        let now = Instant::from_millis(2_000);
        let (mut pool, relays) = live_pool(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("{n}_relays"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let sub = pool
                        .subscribe(now, vec![Filter::new(r#"{"kinds":[2]}"#).expect("filter")])
                        .expect("subscribe");
                    let mut frames = vec![String::new(); n];
                    while let Some((relay, t)) = pool.poll_transmit() {
                        if let Transmit::Send { text, .. } = t {
                            if let Some(wire) = text.split('"').nth(3) {
                                frames[relay.0 as usize] = format!(r#"["EOSE","{wire}"]"#);
                            }
                        }
                    }
                    while pool.poll_event().is_some() {}
                    let started = WallInstant::now();
                    for ((relay, epoch, _), frame) in relays.iter().zip(&frames) {
                        let _ = pool.handle_frame(now, *relay, *epoch, black_box(frame));
                        while let Some(e) = pool.poll_event() {
                            black_box(e);
                        }
                    }
                    total += started.elapsed();
                    let _ = pool.unsubscribe(now, sub);
                    while pool.poll_transmit().is_some() {}
                }
                total
            });
        });
    }
    group.finish();
}

/// `poll_timeout` with every relay's liveness deadline in the index.
fn poll_timeout(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool_poll_timeout");
    for n in SIZES {
        let (pool, _) = live_pool(n);
        assert!(pool.poll_timeout().is_some(), "every relay has a deadline");
        group.bench_function(format!("{n}_relays"), |b| {
            b.iter(|| black_box(&pool).poll_timeout());
        });
    }
    group.finish();
}

criterion_group!(benches, event, eose, poll_timeout);
criterion_main!(benches);
