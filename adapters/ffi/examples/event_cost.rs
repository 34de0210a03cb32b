//! One EVENT frame in and its event out, `N` times, through the Rust API (`rust`), through
//! the C ABI (`abi`), the same for a pool of one relay (`pool-rust`, `pool-abi`: dedup on
//! top), or not at all (`none`, which only makes the frames): run each under
//! `valgrind --tool=callgrind` and subtract `none` for the instructions per frame, a number
//! a busy machine cannot blur the way it blurs the criterion bench's times.
//!
//! `cargo build --release -p tether-ffi --example event_cost`, then
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/event_cost abi 20000`.
#![allow(unsafe_code)]

use std::hint::black_box;

use tether_core::nostr::{Event, Filter, Priority, RelayConfig, RelaySession};
use tether_core::pool::{PoolConfig, PoolEvent, RelayId, RelayPool};
use tether_core::{Epoch, Instant};
use tether_ffi::pool::{
    tether_pool_add_relay, tether_pool_config_default, tether_pool_free, tether_pool_handle_frame,
    tether_pool_handle_open, tether_pool_new, tether_pool_poll_event, tether_pool_poll_transmit,
    tether_pool_subscribe, TetherPool, TetherPoolConfig,
};
use tether_ffi::relay::{
    tether_relay_config_default, tether_relay_connect, tether_relay_free,
    tether_relay_handle_frame, tether_relay_handle_open, tether_relay_new, tether_relay_poll_event,
    tether_relay_poll_transmit, tether_relay_subscribe, TetherRelay, TetherRelayConfig,
};
use tether_ffi::{TETHER_DONE, TETHER_OK};

fn frame(n: u64) -> String {
    format!(
        r#"["EVENT","0:1",{{"id":"{n:064x}","pubkey":"{pk}","created_at":{at},"kind":1,"tags":[["e","{e}"],["p","{pk}"]],"content":"Just setting up my relay subscriptions; tether keeps them alive across drops.","sig":"{sig}"}}]"#,
        pk = "a".repeat(64),
        at = 1_700_000_000 + n,
        e = "b".repeat(64),
        sig = "c".repeat(128),
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "abi".into());
    let n: u64 = args.next().map_or(10_000, |s| s.parse().expect("N"));

    let mut session = RelaySession::new(RelayConfig::default(), 7);
    session.connect(Instant::ZERO);
    let filter = Filter::new(r#"{"kinds":[1]}"#).expect("a filter");
    session
        .subscribe(Instant::ZERO, vec![filter], Priority(0))
        .expect("subscribed");
    session.handle_open(Instant::ZERO, Epoch(1)).expect("open");
    while session.poll_transmit().is_some() || session.poll_event().is_some() {}

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
    let mut relay: *mut TetherRelay = std::ptr::null_mut();
    let mut buf = vec![0u8; 4096];
    let filters = br#"[{"kinds":[1]}]"#;
    let mut sub = 0;
    // SAFETY: pointers to locals, valid for their lengths; the handle is freed below.
    unsafe {
        assert_eq!(tether_relay_config_default(&mut config), TETHER_OK);
        assert_eq!(tether_relay_new(&config, &mut relay), TETHER_OK);
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

    let mut pool = RelayPool::new(PoolConfig::default(), 7);
    let relay_id = pool.add_relay(Instant::ZERO).expect("a relay");
    let filter = Filter::new(r#"{"kinds":[1]}"#).expect("a filter");
    pool.subscribe(Instant::ZERO, vec![filter])
        .expect("subscribed");
    pool.handle_open(Instant::ZERO, relay_id, Epoch(1))
        .expect("open");
    while pool.poll_transmit().is_some() || pool.poll_event().is_some() {}
    let abi_pool = abi_pool(&mut buf);

    for i in 1..=n {
        let text = frame(i);
        match mode.as_str() {
            "rust" => {
                session
                    .handle_frame(Instant::ZERO, Epoch(1), &text)
                    .expect("open socket");
                let event = session.poll_event();
                assert!(matches!(event, Some(Event::Received { .. })));
                black_box(event);
            }
            "abi" => {
                let mut len = buf.len();
                // SAFETY: a live handle; the frame and buffer are valid for their lengths.
                let codes = unsafe {
                    (
                        tether_relay_handle_frame(relay, 0, 1, text.as_ptr(), text.len()),
                        tether_relay_poll_event(relay, buf.as_mut_ptr(), &mut len),
                    )
                };
                assert_eq!(codes, (TETHER_OK, TETHER_OK));
                black_box(&buf[..len]);
            }
            "pool-rust" => {
                pool.handle_frame(Instant::ZERO, RelayId(0), Epoch(1), &text)
                    .expect("open socket");
                let event = pool.poll_event();
                assert!(matches!(event, Some(PoolEvent::Received { .. })));
                black_box(event);
            }
            "pool-abi" => {
                let mut len = buf.len();
                // SAFETY: a live handle; the frame and buffer are valid for their lengths.
                let codes = unsafe {
                    (
                        tether_pool_handle_frame(abi_pool, 0, 0, 1, text.as_ptr(), text.len()),
                        tether_pool_poll_event(abi_pool, buf.as_mut_ptr(), &mut len),
                    )
                };
                assert_eq!(codes, (TETHER_OK, TETHER_OK));
                black_box(&buf[..len]);
            }
            _ => {
                black_box(&text);
            }
        }
    }
    // SAFETY: the handles from their `*_new`, freed once.
    unsafe {
        tether_relay_free(relay);
        tether_pool_free(abi_pool);
    }
}

/// A pool of one open relay with one subscription, through the C ABI, drained.
fn abi_pool(buf: &mut [u8]) -> *mut TetherPool {
    // SAFETY: a zeroed config is valid (integers only); the defaults fill it.
    let mut config: TetherPoolConfig = unsafe { std::mem::zeroed() };
    config.struct_size = std::mem::size_of::<TetherPoolConfig>() as u32;
    let mut pool: *mut TetherPool = std::ptr::null_mut();
    let filters = br#"[{"kinds":[1]}]"#;
    let (mut relay, mut sub) = (0u32, 0u64);
    // SAFETY: pointers to locals, valid for their lengths; the caller frees the handle.
    unsafe {
        assert_eq!(tether_pool_config_default(&mut config), TETHER_OK);
        assert_eq!(tether_pool_new(&config, &mut pool), TETHER_OK);
        assert_eq!(tether_pool_add_relay(pool, 0, &mut relay), TETHER_OK);
        let code = tether_pool_subscribe(pool, 0, filters.as_ptr(), filters.len(), &mut sub);
        assert_eq!(code, TETHER_OK);
        assert_eq!(tether_pool_handle_open(pool, 0, relay, 1), TETHER_OK);
        loop {
            let mut len = buf.len();
            let t = tether_pool_poll_transmit(pool, buf.as_mut_ptr(), &mut len);
            let mut len = buf.len();
            let e = tether_pool_poll_event(pool, buf.as_mut_ptr(), &mut len);
            if t == TETHER_DONE && e == TETHER_DONE {
                break;
            }
        }
    }
    pool
}
