//! Helpers shared by the real-socket test files (each file uses a subset).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tether_tokio::tether_core::backoff::{BackoffPolicy, Jitter};
use tether_tokio::{
    Filter, RelayEvent, SessionEvent, SessionEvents, Subscription, SubscriptionEvent,
};

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

/// The next item of `stream` matching `pred` within `within`.
///
/// # Panics
/// When the stream ends or nothing matches in time.
pub async fn next_matching<S, T>(stream: &mut S, within: Duration, pred: impl Fn(&T) -> bool) -> T
where
    S: Stream<Item = T> + Unpin,
    T: std::fmt::Debug,
{
    let found = tokio::time::timeout(within, async {
        while let Some(item) = stream.next().await {
            if pred(&item) {
                return Some(item);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(item)) => item,
        Ok(None) => panic!("stream ended"),
        Err(_) => panic!("nothing matching within {within:?}"),
    }
}

/// Events up to and including the next EOSE (the EOSE itself is not returned).
///
/// # Panics
/// On `Closed`, the end of the stream, or no EOSE within `within`.
pub async fn until_eose(sub: &mut Subscription, within: Duration) -> Vec<RelayEvent> {
    let mut events = Vec::new();
    let mut other = Vec::new();
    let done = tokio::time::timeout(within, async {
        while let Some(item) = sub.next().await {
            match item {
                SubscriptionEvent::Eose => return,
                SubscriptionEvent::Event(event) => events.push(event),
                SubscriptionEvent::Closed { .. } => panic!("closed: {item:?}"),
                other_item => other.push(other_item),
            }
        }
        panic!("subscription ended");
    })
    .await;
    assert!(
        done.is_ok(),
        "no EOSE within {within:?}; events {}, other {other:?}",
        events.len()
    );
    events
}

/// Wait for `SessionEvent::Connected`.
pub async fn connected(events: &mut SessionEvents, within: Duration) {
    next_matching(events, within, |e| *e == SessionEvent::Connected).await;
}

/// `{"kinds":[1]}`.
pub fn kind1() -> Vec<Filter> {
    vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()]
}

/// Poll `cond` every 20 ms until it holds.
///
/// # Panics
/// When it does not hold within `within`.
pub async fn eventually(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
