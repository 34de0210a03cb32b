//! The `checkpoint` target: arbitrary bytes restored as a relay, pool and SSE checkpoint.

use std::time::Duration;

use tether_core::nostr::RelayConfig;
use tether_core::pool::PoolConfig;
use tether_core::sse::SseConfig;
use tether_core::Instant;

/// Restore `data` as each kind of checkpoint, under small bounds. A restore may fail (with a
/// typed error); one that succeeds gives a session whose bookkeeping is consistent, and stays
/// so once it connects, opens a socket and runs its timers.
///
/// # Panics
/// On a panic inside a restore, or an inconsistent restored session.
pub fn checkpoint(data: &[u8]) {
    use tether_core::nostr::{RelayCheckpoint, RelaySession};
    use tether_core::pool::{PoolCheckpoint, RelayPool};
    use tether_core::sse::{SseCheckpoint, SseSession};

    let now = Instant::from_millis(1_000);
    let unix = crate::sim::UNIX_START;
    let mut relay = RelayConfig::default();
    relay.max_registered = 8;
    relay.max_outbox = 4;
    if let Some(c) = relay.catch_up.as_mut() {
        c.memory = 4;
        c.memory_total = 10;
    }
    if let Ok(saved) = RelayCheckpoint::from_json(data) {
        if let Ok(mut session) = RelaySession::restore(relay.clone(), 1, &saved, now, unix) {
            check(session.check_consistency(), "restored relay session");
            session.connect(now);
            if let Some(tether_core::nostr::Transmit::Open { epoch, .. }) = session.poll_transmit()
            {
                let _ = session.handle_open(now, epoch);
            }
            for step in 1..=4u64 {
                while session.poll_transmit().is_some() || session.poll_event().is_some() {}
                session.handle_timeout(now + Duration::from_secs(step * 30));
                check(
                    session.check_consistency(),
                    "a restored relay session, running",
                );
            }
        }
    }
    if let Ok(saved) = PoolCheckpoint::from_json(data) {
        let mut config = PoolConfig::default();
        config.relay = relay;
        config.max_relays = 4;
        config.max_subscriptions = 4;
        config.dedup_capacity = 4;
        if let Ok(mut pool) = RelayPool::restore(config, 1, &saved, now, unix) {
            check(pool.check_consistency(), "restored pool");
            for step in 1..=4u64 {
                while pool.poll_transmit().is_some() || pool.poll_event().is_some() {}
                pool.handle_timeout(now + Duration::from_secs(step * 30));
                check(pool.check_consistency(), "a restored pool, running");
            }
        }
    }
    if let Ok(saved) = SseCheckpoint::from_json(data) {
        let request = saved.request();
        if let Ok(mut session) = SseSession::restore(SseConfig::default(), request, &saved, 1) {
            check(session.check_consistency(), "restored SSE session");
            session.connect(now);
            while session.poll_transmit().is_some() || session.poll_event().is_some() {}
            check(
                session.check_consistency(),
                "a restored SSE session, connected",
            );
        }
    }
}

fn check(result: std::result::Result<(), String>, what: &str) {
    if let Err(e) = result {
        panic!("{what}: {e}");
    }
}
