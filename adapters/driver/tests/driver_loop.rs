//! The relay driver loop on a hand-cranked runtime: a clock the test sets and sleeps that
//! never fire, so only the loop's own `now >= deadline` check can run a due timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::{pending, Pending};
use futures::task::noop_waker_ref;
use tether_core::Instant;
use tether_driver::{
    relay_driver, Addresses, BoxFuture, BoxSocket, Config, Runtime, WsConnect, WsError,
};

#[derive(Clone, Default)]
struct Crank {
    now_ms: Arc<AtomicU64>,
}

impl Runtime for Crank {
    type Sleep = Pending<()>;

    fn now(&self) -> Instant {
        Instant::from_millis(self.now_ms.load(Ordering::SeqCst))
    }

    fn sleep_until(&self, _deadline: Instant) -> Pending<()> {
        pending()
    }

    fn reset(&self, _sleep: &mut Pending<()>, _deadline: Instant) {}
}

/// Every connection attempt fails at once.
#[derive(Default)]
struct Refusing {
    attempts: AtomicUsize,
}

impl WsConnect for Refusing {
    fn connect(
        &self,
        _url: &str,
        _max: usize,
        _addresses: Addresses,
    ) -> BoxFuture<Result<BoxSocket, WsError>> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Err(WsError::ConnectionClosed) })
    }
}

fn poll(driver: &mut (impl Future<Output = ()> + Unpin)) -> Poll<()> {
    Pin::new(driver).poll(&mut Context::from_waker(noop_waker_ref()))
}

#[test]
fn a_due_timeout_runs_even_if_the_sleep_never_fires() {
    let rt = Crank::default();
    let ws = Arc::new(Refusing::default());
    let mut config = Config::default();
    config.seed = Some(1);
    let (_handle, mut driver) = relay_driver("ws://test", config, rt.clone(), ws.clone());
    assert!(poll(&mut driver).is_pending());
    assert_eq!(ws.attempts.load(Ordering::SeqCst), 1);
    assert!(poll(&mut driver).is_pending());
    assert_eq!(
        ws.attempts.load(Ordering::SeqCst),
        1,
        "the reconnect waits ~1 s"
    );

    // The first reconnect delay is 1 s +-50%, the second 2 s +-50%.
    rt.now_ms.store(1_500, Ordering::SeqCst);
    assert!(poll(&mut driver).is_pending());
    assert_eq!(ws.attempts.load(Ordering::SeqCst), 2);
    rt.now_ms.store(1_500 + 3_000, Ordering::SeqCst);
    assert!(poll(&mut driver).is_pending());
    assert_eq!(ws.attempts.load(Ordering::SeqCst), 3);
}

#[test]
fn the_driver_ends_when_every_handle_is_gone() {
    let rt = Crank::default();
    let ws = Arc::new(Refusing::default());
    let (handle, mut driver) = relay_driver("ws://test", Config::default(), rt, ws);
    assert!(poll(&mut driver).is_pending());
    drop(handle);
    assert!(poll(&mut driver).is_ready());
}
