//! Measurement harness for tether: a counting global allocator for exact heap accounting
//! (resident-set sizes are too coarse and too noisy to compare), and helpers that build
//! sessions in known states.
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tether_core::nostr::{Filter, Priority, RelayConfig, RelaySession};
use tether_core::{Instant, LinkConfig, Liveness};

/// The system allocator, counting live heap bytes. Install it with `#[global_allocator]`
/// in a test or bench binary, then read [`live_bytes`].
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code)]
// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// adds bookkeeping on an atomic counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Heap bytes currently allocated (requested sizes, without allocator overhead).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// A realistic filter: one kind and one 64-hex author.
pub fn filter(i: usize) -> Filter {
    Filter::new(&format!(r#"{{"kinds":[1],"authors":["{i:064x}"]}}"#))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A session with `n` live subscriptions: registered, replayed through every batch, each
/// answered with EOSE. The relay never speaks otherwise, so the watchdog and EOSE timeout
/// are off.
pub fn live_session(n: usize) -> RelaySession {
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
    let mut now = Instant::ZERO;
    for i in 0..n {
        let _ = s.subscribe(now, vec![filter(i)], Priority::NORMAL);
    }
    s.connect(now);
    s.handle_open(now);
    loop {
        drain(&mut s);
        match s.poll_timeout() {
            Some(t) if t > now && t < now + Duration::from_secs(60) => now = t,
            _ => break,
        }
        s.handle_timeout(now);
    }
    for i in 0..n {
        s.handle_frame(now, &format!(r#"["EOSE","{i:x}:1"]"#));
        drain(&mut s);
    }
    s
}

/// Drain both output queues.
pub fn drain(s: &mut RelaySession) {
    while s.poll_transmit().is_some() || s.poll_event().is_some() {}
}
