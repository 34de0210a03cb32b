//! Configuration shared by the real-socket test files (each file uses a subset); the waiting
//! helpers are `tether_testkit::wait`.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use tether_tokio::tether_core::backoff::{BackoffPolicy, Jitter};
use tether_tokio::Filter;

/// Reconnect backoff for real-time tests: the default's shape (x2, jittered, unbounded)
/// scaled to milliseconds so a test sees several reconnects within seconds. +-20% rather than
/// the default +-50% keeps each delay longer than the one before, which tests assert.
pub fn quick_reconnect(base_ms: u64, cap_ms: u64) -> BackoffPolicy {
    BackoffPolicy {
        base: Duration::from_millis(base_ms),
        factor: 2.0,
        cap: Duration::from_millis(cap_ms),
        max_attempts: None,
        jitter: Jitter::Proportional(0.2),
    }
}

/// `{"kinds":[1]}`.
pub fn kind1() -> Vec<Filter> {
    vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()]
}
