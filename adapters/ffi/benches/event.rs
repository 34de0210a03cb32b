//! One EVENT frame in and its event out, through the Rust API and through the C ABI, in the
//! same run: the ABI's cost is UTF-8 validation of the frame, the panic guard, and encoding
//! the event as a JSON object into the caller's buffer. The goal is at most 1.3x.
//!
//! `cargo bench -p tether-ffi --bench event`
#![allow(missing_docs, unsafe_code)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use tether_core::nostr::{Event, Filter, Priority, RelayConfig, RelaySession, Transmit};
use tether_core::{Epoch, Instant};
use tether_ffi::relay::{
    tether_relay_config_default, tether_relay_connect, tether_relay_free,
    tether_relay_handle_frame, tether_relay_handle_open, tether_relay_poll_event,
    tether_relay_poll_transmit, tether_relay_subscribe, TetherRelay, TetherRelayConfig,
};
use tether_ffi::{TETHER_DONE, TETHER_OK};

/// A typical kind-1 note as a relay sends it, for subscription 0's first REQ; every frame
/// has a fresh id and a later `created_at` so none is dropped as a re-delivery.
fn frame(n: u64) -> String {
    format!(
        r#"["EVENT","0:1",{{"id":"{n:064x}","pubkey":"{pk}","created_at":{at},"kind":1,"tags":[["e","{e}"],["p","{pk}"]],"content":"Just setting up my relay subscriptions; tether keeps them alive across drops.","sig":"{sig}"}}]"#,
        pk = "a".repeat(64),
        at = 1_700_000_000 + n,
        e = "b".repeat(64),
        sig = "c".repeat(128),
    )
}

fn rust_session() -> RelaySession {
    let mut session = RelaySession::new(RelayConfig::default(), 7);
    session.connect(Instant::ZERO);
    let filter = Filter::new(r#"{"kinds":[1]}"#).expect("a filter");
    session
        .subscribe(Instant::ZERO, vec![filter], Priority(0))
        .expect("subscribed");
    session.handle_open(Instant::ZERO, Epoch(1)).expect("open");
    while session.poll_transmit().is_some() || session.poll_event().is_some() {}
    session
}

fn abi_session() -> *mut TetherRelay {
    let mut config = TetherRelayConfig {
        struct_size: std::mem::size_of::<TetherRelayConfig>() as u32,
        gate_per_session: 0,
        seed: 0,
        max_subscriptions: 0,
        max_frame: 0,
        eose_timeout_ms: 0,
        publish_timeout_ms: 0,
        info_refresh_ms: 0,
    };
    let mut relay = std::ptr::null_mut();
    let filters = br#"[{"kinds":[1]}]"#;
    let mut sub = 0;
    let mut buf = vec![0u8; 4096];
    // SAFETY: pointers to locals, valid for the stated lengths; the handle is freed by the
    // caller.
    unsafe {
        assert_eq!(tether_relay_config_default(&mut config), TETHER_OK);
        config.seed = 7;
        assert_eq!(
            tether_ffi::relay::tether_relay_new(&config, &mut relay),
            TETHER_OK
        );
        assert_eq!(tether_relay_connect(relay, 0), TETHER_OK);
        let code = tether_relay_subscribe(relay, 0, filters.as_ptr(), filters.len(), 0, &mut sub);
        assert_eq!(code, TETHER_OK);
        assert_eq!(tether_relay_handle_open(relay, 0, 1), TETHER_OK);
        loop {
            let mut len = buf.len();
            let t = tether_relay_poll_transmit(relay, buf.as_mut_ptr(), &mut len);
            let mut len = buf.len();
            let e = tether_relay_poll_event(relay, buf.as_mut_ptr(), &mut len);
            if t == TETHER_DONE && e == TETHER_DONE {
                break;
            }
        }
    }
    relay
}

fn event_in_event_out(c: &mut Criterion) {
    let mut group = c.benchmark_group("event_frame");

    let mut session = rust_session();
    let mut n = 0;
    group.bench_function("rust_api", |b| {
        b.iter_batched(
            || {
                n += 1;
                frame(n)
            },
            |text| {
                session
                    .handle_frame(Instant::ZERO, Epoch(1), &text)
                    .expect("open socket");
                let event = session.poll_event();
                assert!(matches!(event, Some(Event::Received { .. })));
                black_box(event);
            },
            BatchSize::SmallInput,
        );
    });
    assert!(!matches!(
        session.poll_transmit(),
        Some(Transmit::Close { .. })
    ));

    let relay = abi_session();
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    group.bench_function("c_abi", |b| {
        b.iter_batched(
            || {
                n += 1;
                frame(n)
            },
            |text| {
                let mut len = buf.len();
                // SAFETY: a live handle; the frame and buffer are valid for their lengths.
                let (fed, polled) = unsafe {
                    (
                        tether_relay_handle_frame(relay, 0, 1, text.as_ptr(), text.len()),
                        tether_relay_poll_event(relay, buf.as_mut_ptr(), &mut len),
                    )
                };
                assert_eq!((fed, polled), (TETHER_OK, TETHER_OK));
                black_box(&buf[..len]);
            },
            BatchSize::SmallInput,
        );
    });
    // SAFETY: the handle from `abi_session`, freed once.
    unsafe { tether_relay_free(relay) };
    group.finish();
}

criterion_group!(benches, event_in_event_out);
criterion_main!(benches);
