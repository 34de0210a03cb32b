//! Waiting in real-socket tests: the next matching item of a stream, a subscription's stored
//! events up to EOSE, a condition that must come true — each with a limit that fails the test
//! instead of hanging it.
//!
//! Every helper comes twice: `*_on::<T>` waits on the clock of a [`Timer`] (the adapter
//! scenarios pass their harness, so the same code waits on tokio, async-std or smol), and
//! the plain name waits on tokio's clock ([`Tokio`]), which honours a paused test clock.

use std::future::Future;
use std::pin::{pin, Pin};
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::{Stream, StreamExt};
use tether_driver::{RelayEvent, SessionEvent, SessionEvents, Subscription, SubscriptionEvent};

/// A runtime's clock, as the helpers wait on it.
pub trait Timer {
    /// Sleep for `duration` on this runtime.
    fn sleep(duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

    /// This runtime's idea of now (under a paused tokio clock, the paused time).
    fn now() -> std::time::Instant;
}

/// tokio's clock (`tokio::time`), paused or not.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tokio;

impl Timer for Tokio {
    fn sleep(duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn now() -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// `future`'s output, or `None` when `limit` passes first on `T`'s clock.
pub async fn within<T: Timer, O>(limit: Duration, future: impl Future<Output = O>) -> Option<O> {
    match select(pin!(future), T::sleep(limit)).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}

/// The next item of `stream` matching `pred` within `limit`, on `T`'s clock.
///
/// # Panics
/// When the stream ends or nothing matches in time.
pub async fn next_matching_on<T, S, I>(
    stream: &mut S,
    limit: Duration,
    pred: impl Fn(&I) -> bool,
) -> I
where
    T: Timer,
    S: Stream<Item = I> + Unpin,
    I: std::fmt::Debug,
{
    let found = within::<T, _>(limit, async {
        while let Some(item) = stream.next().await {
            if pred(&item) {
                return Some(item);
            }
        }
        None
    })
    .await;
    match found {
        Some(Some(item)) => item,
        Some(None) => panic!("stream ended"),
        None => panic!("nothing matching within {limit:?}"),
    }
}

/// [`next_matching_on`] on tokio's clock.
///
/// # Panics
/// When the stream ends or nothing matches in time.
pub async fn next_matching<S, I>(stream: &mut S, limit: Duration, pred: impl Fn(&I) -> bool) -> I
where
    S: Stream<Item = I> + Unpin,
    I: std::fmt::Debug,
{
    next_matching_on::<Tokio, _, _>(stream, limit, pred).await
}

/// The events `sub` delivers up to its next EOSE (the EOSE itself is not returned), on
/// `T`'s clock.
///
/// # Panics
/// On `Closed`, the end of the subscription, or no EOSE within `limit`.
pub async fn until_eose_on<T: Timer>(sub: &mut Subscription, limit: Duration) -> Vec<RelayEvent> {
    let mut events = Vec::new();
    let mut other = Vec::new();
    let done = within::<T, _>(limit, async {
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
        done.is_some(),
        "no EOSE within {limit:?}; events {}, other {other:?}",
        events.len()
    );
    events
}

/// [`until_eose_on`] on tokio's clock.
///
/// # Panics
/// On `Closed`, the end of the subscription, or no EOSE within `limit`.
pub async fn until_eose(sub: &mut Subscription, limit: Duration) -> Vec<RelayEvent> {
    until_eose_on::<Tokio>(sub, limit).await
}

/// Wait for `SessionEvent::Connected` on `T`'s clock.
///
/// # Panics
/// When the stream ends or no connect comes within `limit`.
pub async fn connected_on<T: Timer>(events: &mut SessionEvents, limit: Duration) {
    next_matching_on::<T, _, _>(events, limit, |e| *e == SessionEvent::Connected).await;
}

/// [`connected_on`] on tokio's clock.
///
/// # Panics
/// When the stream ends or no connect comes within `limit`.
pub async fn connected(events: &mut SessionEvents, limit: Duration) {
    connected_on::<Tokio>(events, limit).await;
}

/// Check `cond` every 10 ms of `T`'s clock until it holds.
///
/// # Panics
/// When it does not hold within `limit`; `what` names it in the message.
pub async fn eventually_on<T: Timer>(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = T::now();
    while !cond() {
        assert!(T::now() - start < limit, "not within {limit:?}: {what}");
        T::sleep(Duration::from_millis(10)).await;
    }
}

/// [`eventually_on`] on tokio's clock.
///
/// # Panics
/// When it does not hold within `limit`; `what` names it in the message.
pub async fn eventually(limit: Duration, what: &str, cond: impl FnMut() -> bool) {
    eventually_on::<Tokio>(limit, what, cond).await;
}
