//! Delivering the core's events to the application's channels, with backpressure, for every
//! kind of driver.
//!
//! Every item goes out in the order the core produced it. When a channel is full the item
//! and everything after it wait in `backlog`, and the driver stops reading sockets until
//! [`Delivery::poll_flush`] empties it. The backlog is therefore bounded by what the inputs
//! still accepted while it is non-empty can produce: commands, timers and one frame per relay.
//!
//! Three destinations: a subscription's own channel (closed after its last item), the
//! driver-wide notice channel (kept for the application until it takes the receiver, and
//! never allowed to hold the driver back before that), and a publish's one-shot reply.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::{mpsc, oneshot};
use tether_core::nostr::message::EventId;

/// What one kind of driver delivers.
pub(crate) trait Routes {
    /// Names a subscription's channel.
    type Sub: Copy + Ord + Debug;
    /// What a subscription's channel carries.
    type Item: Debug;
    /// What the driver-wide channel carries.
    type Notice: Debug;
    /// A publish's outcome.
    type Reply;

    /// Whether `item` is the last its subscription will get (its channel closes after it).
    fn is_last(item: &Self::Item) -> bool;
}

/// Where one item goes.
pub(crate) enum Route<C: Routes> {
    /// To a subscription's channel.
    Sub(C::Sub, C::Item),
    /// To the driver-wide channel.
    Notice(C::Notice),
    /// To the caller waiting for this publish.
    Publish(EventId, C::Reply),
}

enum Pending<C: Routes> {
    Sub(C::Sub, C::Item),
    Notice(C::Notice),
}

/// The application's channels and the items waiting for room in them.
pub(crate) struct Delivery<C: Routes> {
    subs: BTreeMap<C::Sub, mpsc::Sender<C::Item>>,
    publishes: BTreeMap<EventId, oneshot::Sender<C::Reply>>,
    notices: mpsc::Sender<C::Notice>,
    /// Whether the application took the notice receiver yet.
    notices_taken: Box<dyn Fn() -> bool + Send>,
    backlog: VecDeque<Pending<C>>,
    /// Subscriptions whose receiver was dropped: the driver unsubscribes them.
    abandoned: Vec<C::Sub>,
}

impl<C: Routes> Delivery<C> {
    /// Notices go to `notices`; `slot` holds their receiver until the application takes it.
    pub(crate) fn new<T: Send + 'static>(
        notices: mpsc::Sender<C::Notice>,
        slot: Arc<Mutex<Option<T>>>,
    ) -> Self {
        Delivery {
            subs: BTreeMap::new(),
            publishes: BTreeMap::new(),
            notices,
            notices_taken: Box::new(move || slot.lock().map_or(true, |slot| slot.is_none())),
            backlog: VecDeque::new(),
            abandoned: Vec::new(),
        }
    }

    /// Deliver `sub`'s items to `tx`.
    pub(crate) fn add_sub(&mut self, sub: C::Sub, tx: mpsc::Sender<C::Item>) {
        self.subs.insert(sub, tx);
    }

    /// Forget `sub` and the items still waiting for it.
    pub(crate) fn remove_sub(&mut self, sub: C::Sub) {
        self.subs.remove(&sub);
        self.backlog
            .retain(|p| !matches!(p, Pending::Sub(s, _) if *s == sub));
    }

    /// Answer the publish of `id` on `reply`.
    pub(crate) fn add_publish(&mut self, id: EventId, reply: oneshot::Sender<C::Reply>) {
        self.publishes.insert(id, reply);
    }

    /// Items waiting for a full channel.
    pub(crate) fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Subscriptions the application dropped since the last call.
    pub(crate) fn take_abandoned(&mut self) -> Vec<C::Sub> {
        std::mem::take(&mut self.abandoned)
    }

    /// Hand one item over, or queue it behind those already waiting.
    pub(crate) fn route(&mut self, route: Route<C>) {
        match route {
            Route::Publish(id, outcome) => {
                if let Some(reply) = self.publishes.remove(&id) {
                    // The caller may have stopped waiting; the outcome is traced anyway.
                    let _ = reply.send(outcome);
                }
            }
            Route::Sub(sub, item) => self.push(Pending::Sub(sub, item)),
            Route::Notice(notice) => self.push(Pending::Notice(notice)),
        }
    }

    /// Deliver the backlog as far as the channels allow; `Ready` once it is empty.
    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while let Some(head) = self.backlog.pop_front() {
            if let Some(blocked) = self.poll_deliver(cx, head) {
                self.backlog.push_front(blocked);
                return Poll::Pending;
            }
        }
        Poll::Ready(())
    }

    fn push(&mut self, pending: Pending<C>) {
        if !self.backlog.is_empty() {
            self.backlog.push_back(pending);
            return;
        }
        if let Some(blocked) = self.try_deliver(pending) {
            self.backlog.push_back(blocked);
        }
    }

    /// Try to hand `pending` over; returns it if its channel is full.
    fn try_deliver(&mut self, pending: Pending<C>) -> Option<Pending<C>> {
        match pending {
            Pending::Sub(sub, item) => {
                let tx = self.subs.get_mut(&sub)?;
                let last = C::is_last(&item);
                match tx.try_send(item) {
                    Ok(()) if last => {
                        self.subs.remove(&sub);
                        None
                    }
                    Ok(()) => None,
                    Err(e) if e.is_full() => Some(Pending::Sub(sub, e.into_inner())),
                    Err(_) => {
                        self.subs.remove(&sub);
                        if !last {
                            self.abandoned.push(sub);
                        }
                        None
                    }
                }
            }
            Pending::Notice(notice) => match self.notices.try_send(notice) {
                Ok(()) => None,
                // Nobody took the stream yet: do not hold the sockets hostage to it.
                Err(e) if e.is_full() && !(self.notices_taken)() => {
                    tracing::debug!(notice = ?e.into_inner(), "notice dropped: nobody listens");
                    None
                }
                Err(e) if e.is_full() => Some(Pending::Notice(e.into_inner())),
                Err(_) => None,
            },
        }
    }

    /// Like [`Delivery::try_deliver`], registering for a wake-up when the channel is full.
    fn poll_deliver(&mut self, cx: &mut Context<'_>, pending: Pending<C>) -> Option<Pending<C>> {
        let ready = match &pending {
            Pending::Sub(sub, _) => match self.subs.get_mut(sub) {
                Some(tx) => tx.poll_ready(cx),
                None => return None,
            },
            Pending::Notice(_) => self.notices.poll_ready(cx),
        };
        match ready {
            Poll::Pending => Some(pending),
            // Ready, or closed: `try_deliver` handles both.
            Poll::Ready(_) => self.try_deliver(pending),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::{
        Published, RelayEvent, RelayRoutes, SessionEvent, SessionEvents, SubscriptionEvent,
    };
    use futures::task::noop_waker_ref;
    use futures::StreamExt;
    use tether_core::nostr::SubscriptionId;

    fn dispatch(capacity: usize) -> (Delivery<RelayRoutes>, Arc<Mutex<Option<SessionEvents>>>) {
        let (tx, rx) = mpsc::channel(capacity - 1);
        let slot = Arc::new(Mutex::new(Some(SessionEvents::new(rx))));
        (Delivery::new(tx, Arc::clone(&slot)), slot)
    }

    fn event(n: u8) -> SubscriptionEvent {
        SubscriptionEvent::Event(RelayEvent {
            id: EventId([n; 32]),
            raw: n.to_string(),
        })
    }

    #[test]
    fn a_full_channel_backlogs_in_order_and_flushes_when_read() {
        let (mut d, _slot) = dispatch(4);
        let (tx, mut rx) = mpsc::channel(1);
        let sub = SubscriptionId(1);
        d.add_sub(sub, tx);
        for n in 0..5 {
            d.route(Route::Sub(sub, event(n)));
        }
        d.route(Route::Notice(SessionEvent::Connected));
        // Capacity 2 (buffer 1 + the driver's sender): three wait, and so does the session
        // event behind them, to keep the order.
        assert_eq!(d.backlog_len(), 4);
        let mut cx = Context::from_waker(noop_waker_ref());
        assert!(d.poll_flush(&mut cx).is_pending());
        let mut got = Vec::new();
        while d.backlog_len() > 0 {
            got.push(futures::executor::block_on(rx.next()).unwrap());
            let _ = d.poll_flush(&mut cx);
        }
        got.extend(std::iter::from_fn(|| rx.try_recv().ok()));
        assert_eq!(got, (0..5).map(event).collect::<Vec<_>>());
    }

    #[test]
    fn a_dropped_subscription_is_reported_abandoned_once() {
        let (mut d, _slot) = dispatch(4);
        let (tx, rx) = mpsc::channel(1);
        d.add_sub(SubscriptionId(3), tx);
        drop(rx);
        d.route(Route::Sub(SubscriptionId(3), event(1)));
        d.route(Route::Sub(SubscriptionId(3), event(2)));
        assert_eq!(d.take_abandoned(), vec![SubscriptionId(3)]);
        assert!(d.take_abandoned().is_empty());
        assert_eq!(d.backlog_len(), 0);
    }

    #[test]
    fn closed_is_the_last_item() {
        let (mut d, _slot) = dispatch(4);
        let (tx, mut rx) = mpsc::channel(4);
        let sub = SubscriptionId(2);
        d.add_sub(sub, tx);
        let closed = SubscriptionEvent::Closed {
            reason: "blocked: no".into(),
            attempts: 0,
        };
        d.route(Route::Sub(sub, closed.clone()));
        d.route(Route::Sub(sub, event(9)));
        let items: Vec<_> = futures::executor::block_on(rx.by_ref().collect());
        assert_eq!(items, vec![closed]);
    }

    #[test]
    fn session_events_nobody_took_never_hold_the_driver_back() {
        let (mut d, slot) = dispatch(2);
        for _ in 0..10 {
            d.route(Route::Notice(SessionEvent::Connected));
        }
        assert_eq!(d.backlog_len(), 0, "dropped while nobody listens");

        let mut events = slot.lock().unwrap().take().unwrap();
        let buffered: Vec<_> = std::iter::from_fn(|| {
            let mut cx = Context::from_waker(noop_waker_ref());
            match events.poll_next_unpin(&mut cx) {
                Poll::Ready(item) => item,
                Poll::Pending => None,
            }
        })
        .collect();
        assert_eq!(
            buffered.len(),
            2,
            "the first ones were kept for the listener"
        );
        for _ in 0..5 {
            d.route(Route::Notice(SessionEvent::Connected));
        }
        assert_eq!(
            d.backlog_len(),
            3,
            "a listener that does not read holds the driver back"
        );
    }

    #[test]
    fn publish_outcomes_go_to_their_waiter_only() {
        let (mut d, _slot) = dispatch(2);
        let (tx, mut rx) = oneshot::channel();
        let id = EventId([7; 32]);
        d.add_publish(id, tx);
        d.route(Route::Publish(
            EventId([8; 32]),
            Ok(Published {
                id: EventId([8; 32]),
            }),
        ));
        assert_eq!(rx.try_recv(), Ok(None));
        d.route(Route::Publish(id, Ok(Published { id })));
        assert_eq!(rx.try_recv(), Ok(Some(Ok(Published { id }))));
    }
}
