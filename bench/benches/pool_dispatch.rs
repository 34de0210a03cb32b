//! The pool's per-frame cost with three relays serving one subscription: a new event (dedup
//! miss, delivered) against a duplicate (a second relay's copy: a lookup, dropped), and the
//! same new event when the pool waits for a verdict (`PoolConfig::verify`, verdicts given at
//! once, so this is the queueing cost alone): `cargo bench -p tether-bench --bench
//! pool_dispatch`.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tether_core::nostr::{Filter, Transmit};
use tether_core::pool::{PoolConfig, RelayId, RelayPool};
use tether_core::{Epoch, Instant};

const FRAMES: usize = 2_000;

/// A pool of three open relays with one subscription on all of them, and each relay's wire
/// subscription id.
fn pool(verify: bool) -> (RelayPool, Vec<(RelayId, Epoch, String)>) {
    let mut config = PoolConfig::default();
    config.verify = verify;
    let mut pool = RelayPool::new(config, 1);
    let now = Instant::from_millis(1_000);
    let relays: Vec<RelayId> = (0..3)
        .map(|_| pool.add_relay(now).expect("relay"))
        .collect();
    let mut epochs = Vec::new();
    while let Some((relay, t)) = pool.poll_transmit() {
        if let Transmit::Open { epoch, .. } = t {
            epochs.push((relay, epoch));
        }
    }
    for &(relay, epoch) in &epochs {
        pool.handle_open(now, relay, epoch).expect("open");
    }
    let filter = Filter::new(r#"{"kinds":[1]}"#).expect("filter");
    pool.subscribe(now, vec![filter]).expect("subscribe");
    let mut wire = Vec::new();
    while let Some((relay, t)) = pool.poll_transmit() {
        let Transmit::Send { text, .. } = t else {
            continue;
        };
        let id = text.split('"').nth(3).unwrap_or_default().to_owned();
        let epoch = epochs.iter().find(|(r, _)| *r == relay).map(|(_, e)| *e);
        wire.push((relay, epoch.expect("opened"), id));
    }
    while pool.poll_event().is_some() {}
    assert_eq!(relays.len(), wire.len());
    (pool, wire)
}

fn frames(sub: &str, first: usize) -> Vec<String> {
    (first..first + FRAMES)
        .map(|k| {
            format!(
                r#"["EVENT","{sub}",{{"id":"{:064x}","pubkey":"{:064x}","created_at":{},"kind":1,"tags":[],"content":"hello from event {k}, with a little text to make it realistic","sig":"{:0128x}"}}]"#,
                k + 1,
                k % 200,
                1_700_000_000 + k,
                k
            )
        })
        .collect()
}

/// Feed `frames` from one relay, draining (and answering verdicts) as a driver would.
fn feed(pool: &mut RelayPool, relay: RelayId, epoch: Epoch, frames: &[String]) {
    let now = Instant::from_millis(2_000);
    for f in frames {
        let _ = pool.handle_frame(now, relay, epoch, black_box(f));
        while let Some(request) = pool.poll_verify() {
            let _ = pool.handle_verified(now, request.ticket, Ok(()));
        }
        while let Some(e) = pool.poll_event() {
            black_box(e);
        }
    }
}

fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool_frame_3_relays");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for (name, verify, duplicate) in [
        ("new_event", false, false),
        ("duplicate", false, true),
        ("new_event_verify_queue", true, false),
        ("duplicate_verify_queue", true, true),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    let (mut pool, wire) = pool(verify);
                    let (r0, e0, sub0) = wire[0].clone();
                    let (r1, e1, sub1) = wire[1].clone();
                    // The first relay has delivered these ids already when measuring
                    // duplicates: the measured relay's copies are second copies.
                    if duplicate {
                        feed(&mut pool, r0, e0, &frames(&sub0, 0));
                    }
                    (pool, r1, e1, frames(&sub1, 0))
                },
                |(pool, relay, epoch, frames)| feed(pool, *relay, *epoch, frames),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
