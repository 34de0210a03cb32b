//! Decode throughput of realistic EVENT frames: tether's codec vs the `nostr` crate vs the
//! floor of merely validating the JSON (`serde_json` into `IgnoredAny`), in the same run.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use nostr::JsonUtil;
use serde::de::IgnoredAny;
use tether_core::nostr::message::{RelayMessage, DEFAULT_MAX_FRAME};

/// Deterministic frames of ~300-1500 bytes: hex ids and keys, e/p/t tags, mixed-script text.
fn corpus() -> Vec<String> {
    const WORDS: &[&str] = &[
        "gm",
        "nostr",
        "relay",
        "über",
        "café",
        "日本語",
        "テスト",
        "🚀",
        "⚡️",
        "zap",
        "\\\"quoted\\\"",
        "line\\nbreak",
        "пример",
        "مرحبا",
        "subscription",
        "bitcoin",
        "#plebchain",
        "https://example.com/a?b=c",
    ];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let hex = |n: &mut dyn FnMut() -> u64, len: usize| -> String {
        (0..len).map(|_| format!("{:x}", n() % 16)).collect()
    };
    (0..512)
        .map(|i| {
            let id = hex(&mut next, 64);
            let pubkey = hex(&mut next, 64);
            let sig = hex(&mut next, 128);
            let ntags = (next() % 5) as usize;
            let tags: Vec<String> = (0..ntags)
                .map(|t| match t % 3 {
                    0 => format!(r#"["e","{}","wss://relay.damus.io","reply"]"#, hex(&mut next, 64)),
                    1 => format!(r#"["p","{}"]"#, hex(&mut next, 64)),
                    _ => r#"["t","nostr"]"#.to_owned(),
                })
                .collect();
            let nwords = 5 + (next() % 120) as usize;
            let content: Vec<&str> = (0..nwords).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
            format!(
                r#"["EVENT","sub-{}",{{"id":"{id}","pubkey":"{pubkey}","created_at":{},"kind":1,"tags":[{}],"content":"{}","sig":"{sig}"}}]"#,
                i % 7,
                1_700_000_000 + i,
                tags.join(","),
                content.join(" ")
            )
        })
        .collect()
}

fn decode(c: &mut Criterion) {
    let frames = corpus();
    let bytes: usize = frames.iter().map(String::len).sum();
    for f in &frames {
        RelayMessage::decode(f, DEFAULT_MAX_FRAME).expect("tether decodes the corpus");
        nostr::RelayMessage::from_json(f).expect("nostr decodes the corpus");
    }
    let mut group = c.benchmark_group("decode_event_frames");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("tether", |b| {
        b.iter(|| {
            for f in &frames {
                black_box(RelayMessage::decode(black_box(f), DEFAULT_MAX_FRAME).is_ok());
            }
        })
    });
    group.bench_function("nostr_crate", |b| {
        b.iter(|| {
            for f in &frames {
                black_box(nostr::RelayMessage::from_json(black_box(f)).is_ok());
            }
        })
    });
    group.bench_function("serde_json_ignored_any_floor", |b| {
        b.iter(|| {
            for f in &frames {
                black_box(serde_json::from_str::<IgnoredAny>(black_box(f)).is_ok());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
