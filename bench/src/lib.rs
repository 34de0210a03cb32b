//! Measurement harness for tether: a counting global allocator for exact heap accounting
//! (resident-set sizes are too coarse and too noisy to compare), and helpers that build
//! sessions in known states.
#![warn(missing_docs)]

pub mod e2e;
pub mod scale;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tether_core::nostr::{Carries, Filter, Priority, RelayConfig, RelaySession, Transmit};
use tether_core::{Epoch, Instant, Liveness};

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

/// A session with `n` subscriptions registered and its socket just opened: the replay is
/// about to start. The relay never speaks, so the watchdog and EOSE timeout are off.
pub fn opened(n: usize) -> RelaySession {
    let mut config = RelayConfig::default();
    config.max_registered = n.max(1);
    config.eose_timeout = Duration::from_secs(3_600);
    config.link.liveness = Liveness::Off;
    let mut s = RelaySession::new(config, 1);
    for i in 0..n {
        let _ = s.subscribe(Instant::ZERO, vec![filter(i)], Priority::NORMAL);
    }
    s.connect(Instant::ZERO);
    s.handle_open(Instant::ZERO, Epoch(1))
        .expect("the first socket is epoch 1");
    s
}

/// Drive a replay to its end, driver-style; returns (REQs sent, batches, when it ended).
pub fn replay(s: &mut RelaySession) -> (usize, usize, Instant) {
    let mut now = Instant::ZERO;
    let (mut reqs, mut batches) = (0, 0);
    loop {
        let sent = drain(s);
        if sent > 0 {
            reqs += sent;
            batches += 1;
        }
        match s.poll_timeout() {
            Some(t) if t > now && t < now + Duration::from_secs(60) => now = t,
            _ => return (reqs, batches, now),
        }
        s.handle_timeout(now);
    }
}

/// A session with `n` live subscriptions: replayed through every batch, each answered
/// with EOSE.
pub fn live_session(n: usize) -> RelaySession {
    let mut s = opened(n);
    let (_, _, now) = replay(&mut s);
    for i in 0..n {
        let _ = s.handle_frame(now, Epoch(1), &format!(r#"["EOSE","{i:x}:1"]"#));
        drain(&mut s);
    }
    s
}

/// Drain both output queues; returns how many REQs went out.
pub fn drain(s: &mut RelaySession) -> usize {
    let mut reqs = 0;
    loop {
        let mut any = false;
        while let Some(t) = s.poll_transmit() {
            any = true;
            reqs += usize::from(matches!(
                &t,
                Transmit::Send {
                    carries: Carries::Req(_),
                    ..
                }
            ));
        }
        while s.poll_event().is_some() {
            any = true;
        }
        if !any {
            return reqs;
        }
    }
}
