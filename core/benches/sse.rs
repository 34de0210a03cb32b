//! SSE parser throughput against eventsource-stream, and chunking (in)sensitivity.
//!
//! Run: `cargo bench -p tether-core --bench sse`.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::time::Duration;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use eventsource_stream::Eventsource;
use futures::executor::block_on;
use futures::stream::{self, StreamExt};
use tether_core::sse::{Item, Parser, ParserConfig};

/// About 4 MB of a realistic feed: JSON change events with ids and types, an occasional
/// multi-line event, and heartbeat comments.
fn realistic_stream() -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = 0u64;
    while out.len() < 4 << 20 {
        n += 1;
        let line = format!(
            "id: {n}\nevent: change\ndata: {{\"table\":\"bitable\",\"record\":\"rec{n:08}\",\"field\":\"status\",\"old\":\"open\",\"new\":\"in progress\",\"by\":\"ou_{:016x}\",\"ts\":{}}}\n\n",
            n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            1_700_000_000_000 + n * 37
        );
        out.extend_from_slice(line.as_bytes());
        if n % 10 == 0 {
            out.extend_from_slice(b": heartbeat\n\n");
        }
        if n % 25 == 0 {
            out.extend_from_slice(b"event: batch\ndata: first line of a batch\ndata: second line\ndata: third line\n\n");
        }
    }
    out
}

fn tether_count(chunks: &[&[u8]], config: ParserConfig) -> usize {
    let mut p = Parser::new(config);
    let mut events = 0;
    for chunk in chunks {
        let mut rest = *chunk;
        while !rest.is_empty() {
            let n = p.feed(rest);
            rest = &rest[n..];
            while let Some(item) = p.next_item() {
                if let Item::Message(m) = item {
                    black_box(&m);
                    events += 1;
                }
            }
        }
    }
    events
}

fn eventsource_stream_count(chunks: &[&[u8]]) -> usize {
    let s = stream::iter(chunks.iter().map(|c| Ok::<_, Infallible>(*c))).eventsource();
    block_on(s.fold(0, |n, e| {
        black_box(&e);
        async move { n + usize::from(e.is_ok()) }
    }))
}

fn throughput(c: &mut Criterion) {
    let data = realistic_stream();
    let chunks: Vec<&[u8]> = data.chunks(4096).collect();
    let expected = tether_count(&chunks, ParserConfig::default());
    assert_eq!(eventsource_stream_count(&chunks), expected);

    let mut g = c.benchmark_group("sse_parse_4MB_in_4KiB_chunks");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.bench_function("tether", |b| {
        b.iter(|| tether_count(black_box(&chunks), ParserConfig::default()))
    });
    g.bench_function("eventsource-stream", |b| {
        b.iter(|| eventsource_stream_count(black_box(&chunks)))
    });
    g.finish();
}

fn single_line(c: &mut Criterion) {
    let mut data = b"data: ".to_vec();
    data.resize(8 << 20, b'x');
    data.extend_from_slice(b"\n\n");
    let mut config = ParserConfig::default();
    config.max_line_len = 16 << 20;
    config.max_event_len = 16 << 20;
    let piece = data.len().div_ceil(1024);
    let mut g = c.benchmark_group("sse_8MB_single_line_event");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    for pieces in [1usize, 1024] {
        let chunks: Vec<&[u8]> = if pieces == 1 {
            vec![&data[..]]
        } else {
            data.chunks(piece).collect()
        };
        assert_eq!(tether_count(&chunks, config), 1);
        g.bench_with_input(
            BenchmarkId::new("tether_chunks", pieces),
            &chunks,
            |b, ch| b.iter(|| tether_count(black_box(ch), config)),
        );
    }
    g.finish();
}

criterion_group!(benches, throughput, single_line);
criterion_main!(benches);
