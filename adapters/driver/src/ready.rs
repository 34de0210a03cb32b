//! [`Ready`]: which relays' sockets have something to do. Each relay's socket is polled
//! with a waker of its own, which queues that relay here and wakes the driver; a wake of
//! the driver then costs the relays that were woken, never a pass over every relay.
//!
//! The queue holds each relay at most once (a flag per relay key), so it is bounded by the
//! number of relays (one for a relay driver, the pool's `max_relays` for a pool). A waker that
//! outlives its relay, or one whose key was reused by a relay added later, at worst causes
//! one poll that finds nothing to do.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Wake, Waker};

use futures_util::task::AtomicWaker;

/// How a driver names one of its relays.
pub(crate) trait Key: Copy + Ord + Eq + Hash + Debug + Send + Sync + 'static {
    /// A small dense index (for the ready queue's flags).
    fn index(self) -> usize;
}

/// The ready queue, shared by the driver and every relay's waker.
#[derive(Debug)]
pub(crate) struct Ready<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Default for Ready<K> {
    fn default() -> Self {
        Ready {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    order: VecDeque::new(),
                    queued: Vec::new(),
                }),
                any: AtomicBool::new(false),
                driver: AtomicWaker::new(),
            }),
        }
    }
}

#[derive(Debug)]
struct Shared<K> {
    queue: Mutex<Queue<K>>,
    /// Whether `queue` holds anything: read without the lock, so a pass with no socket
    /// woken takes no lock (set under the lock by every push, cleared by `take`).
    any: AtomicBool,
    /// The driver's own waker, taken by the first wake after each registration.
    driver: AtomicWaker,
}

#[derive(Debug)]
struct Queue<K> {
    order: VecDeque<K>,
    /// `queued[key.index()]`: the relay is in `order`.
    queued: Vec<bool>,
}

/// The waker a relay's socket is polled with.
struct RelayWaker<K> {
    relay: K,
    shared: Weak<Shared<K>>,
}

impl<K: Key> Ready<K> {
    /// The waker to poll `relay`'s socket with: waking it queues the relay.
    pub(crate) fn waker(&self, relay: K) -> Waker {
        Waker::from(Arc::new(RelayWaker {
            relay,
            shared: Arc::downgrade(&self.shared),
        }))
    }

    /// Wake `waker` (the driver's) when a relay is queued. Register before [`Ready::take`]:
    /// a wake between the two is then not lost.
    pub(crate) fn register(&self, waker: &Waker) {
        self.shared.driver.register(waker);
    }

    /// Append every queued relay to `batch` in the order they were queued, but those
    /// `skip` says are there already.
    pub(crate) fn take_into(&self, batch: &mut Vec<K>, skip: impl Fn(K) -> bool) {
        // A wake after this load finds the driver's waker registered, and wakes it again.
        if !self.shared.any.load(Ordering::Acquire) {
            return;
        }
        let mut queue = self.shared.lock();
        let Queue { order, queued } = &mut *queue;
        self.shared.any.store(false, Ordering::Release);
        for relay in order.drain(..) {
            if let Some(flag) = queued.get_mut(relay.index()) {
                *flag = false;
            }
            if !skip(relay) {
                batch.push(relay);
            }
        }
    }
}

impl<K: Key> Shared<K> {
    fn lock(&self) -> MutexGuard<'_, Queue<K>> {
        // The queue is a set of ids: a panic elsewhere while it was held leaves it usable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, relay: K) {
        let index = relay.index();
        let mut queue = self.lock();
        if queue.queued.len() <= index {
            queue.queued.resize(index + 1, false);
        }
        if !queue.queued[index] {
            queue.queued[index] = true;
            queue.order.push_back(relay);
            self.any.store(true, Ordering::Release);
        }
    }
}

impl<K: Key> Wake for RelayWaker<K> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        shared.push(self.relay);
        shared.driver.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::pool::RelayId;

    #[test]
    fn a_relay_is_queued_once_however_often_it_is_woken_and_wakes_the_driver() {
        let ready = Ready::default();
        let woken = Arc::new(Counter::default());
        ready.register(&Waker::from(Arc::clone(&woken)));
        let w3 = ready.waker(RelayId(3));
        w3.wake_by_ref();
        w3.wake_by_ref();
        ready.waker(RelayId(1)).wake();
        let mut batch = Vec::new();
        ready.take_into(&mut batch, |_| false);
        assert_eq!(batch, [RelayId(3), RelayId(1)]);
        assert_eq!(
            woken.count(),
            1,
            "the driver's waker is taken by the first wake"
        );
        batch.clear();
        ready.take_into(&mut batch, |_| false);
        assert!(batch.is_empty());
        w3.wake();
        ready.take_into(&mut batch, |_| false);
        assert_eq!(batch, [RelayId(3)], "queued again once taken");
    }

    #[test]
    fn a_relay_already_in_the_batch_is_not_taken_twice() {
        let ready = Ready::default();
        ready.waker(RelayId(2)).wake();
        ready.waker(RelayId(5)).wake();
        let mut batch = vec![RelayId(5)];
        ready.take_into(&mut batch, |relay| relay == RelayId(5));
        assert_eq!(batch, [RelayId(5), RelayId(2)]);
        batch.clear();
        ready.waker(RelayId(5)).wake();
        ready.take_into(&mut batch, |_| false);
        assert_eq!(
            batch,
            [RelayId(5)],
            "a skipped relay is dequeued, and can be queued again"
        );
    }

    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicUsize);

    impl Counter {
        fn count(&self) -> usize {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}
