//! Delivering the core's events to the application's channels, with backpressure.
//!
//! Every event goes out in the order the core produced it. When a channel is full the event
//! and everything after it wait in `backlog`, and the driver stops reading the socket until
//! [`Dispatch::poll_flush`] empties it. The backlog is therefore bounded by what the inputs
//! still accepted while it is non-empty can produce: commands, timers and one frame.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::{mpsc, oneshot};
use tether_core::nostr::message::EventId;
use tether_core::nostr::{Event, SubscriptionId};
use tether_core::Instant;

use super::handle::{
    Published, Rejected, RelayEvent, SessionEvent, SessionEvents, SubscriptionEvent,
};

pub(crate) struct Dispatch {
    subs: HashMap<SubscriptionId, mpsc::Sender<SubscriptionEvent>>,
    publishes: HashMap<EventId, oneshot::Sender<Result<Published, Rejected>>>,
    session: mpsc::Sender<SessionEvent>,
    /// Holds the [`SessionEvents`] until the application takes it.
    session_slot: Arc<Mutex<Option<SessionEvents>>>,
    backlog: VecDeque<Pending>,
    /// Subscriptions whose receiver was dropped: the driver unsubscribes them.
    abandoned: Vec<SubscriptionId>,
}

enum Pending {
    Sub(SubscriptionId, SubscriptionEvent),
    Session(SessionEvent),
}

/// Where a core event goes.
pub(crate) enum Route {
    Sub(SubscriptionId, SubscriptionEvent),
    Session(SessionEvent),
    Publish(EventId, Result<Published, Rejected>),
}

impl Dispatch {
    pub(crate) fn new(
        session: mpsc::Sender<SessionEvent>,
        session_slot: Arc<Mutex<Option<SessionEvents>>>,
    ) -> Self {
        Dispatch {
            subs: HashMap::new(),
            publishes: HashMap::new(),
            session,
            session_slot,
            backlog: VecDeque::new(),
            abandoned: Vec::new(),
        }
    }

    pub(crate) fn add_sub(&mut self, id: SubscriptionId, tx: mpsc::Sender<SubscriptionEvent>) {
        self.subs.insert(id, tx);
    }

    pub(crate) fn remove_sub(&mut self, id: SubscriptionId) {
        self.subs.remove(&id);
        self.backlog
            .retain(|p| !matches!(p, Pending::Sub(sub, _) if *sub == id));
    }

    pub(crate) fn add_publish(
        &mut self,
        id: EventId,
        reply: oneshot::Sender<Result<Published, Rejected>>,
    ) {
        self.publishes.insert(id, reply);
    }

    /// Events waiting for a full channel.
    pub(crate) fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    pub(crate) fn take_abandoned(&mut self) -> Vec<SubscriptionId> {
        std::mem::take(&mut self.abandoned)
    }

    pub(crate) fn route(&mut self, route: Route) {
        match route {
            Route::Publish(id, outcome) => {
                if let Some(reply) = self.publishes.remove(&id) {
                    // The caller may have stopped waiting; the outcome is traced anyway.
                    let _ = reply.send(outcome);
                }
            }
            Route::Sub(id, event) => self.push(Pending::Sub(id, event)),
            Route::Session(event) => self.push(Pending::Session(event)),
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

    fn push(&mut self, pending: Pending) {
        if !self.backlog.is_empty() {
            self.backlog.push_back(pending);
            return;
        }
        if let Some(blocked) = self.try_deliver(pending) {
            self.backlog.push_back(blocked);
        }
    }

    /// Try to hand `pending` over; returns it if its channel is full.
    fn try_deliver(&mut self, pending: Pending) -> Option<Pending> {
        match pending {
            Pending::Sub(id, event) => {
                let tx = self.subs.get_mut(&id)?;
                let closes = matches!(event, SubscriptionEvent::Closed { .. });
                match tx.try_send(event) {
                    Ok(()) if closes => {
                        self.subs.remove(&id);
                        None
                    }
                    Ok(()) => None,
                    Err(e) if e.is_full() => Some(Pending::Sub(id, e.into_inner())),
                    Err(_) => {
                        self.subs.remove(&id);
                        if !closes {
                            self.abandoned.push(id);
                        }
                        None
                    }
                }
            }
            Pending::Session(event) => match self.session.try_send(event) {
                Ok(()) => None,
                // Nobody took the stream yet: do not hold the socket hostage to it.
                Err(e) if e.is_full() && !self.session_taken() => {
                    tracing::debug!(event = ?e.into_inner(), "session event dropped: nobody listens");
                    None
                }
                Err(e) if e.is_full() => Some(Pending::Session(e.into_inner())),
                Err(_) => None,
            },
        }
    }

    /// Like [`Dispatch::try_deliver`], registering for a wake-up when the channel is full.
    fn poll_deliver(&mut self, cx: &mut Context<'_>, pending: Pending) -> Option<Pending> {
        let ready = match &pending {
            Pending::Sub(id, _) => match self.subs.get_mut(id) {
                Some(tx) => tx.poll_ready(cx),
                None => return None,
            },
            Pending::Session(_) => self.session.poll_ready(cx),
        };
        match ready {
            Poll::Pending => Some(pending),
            // Ready, or closed: `try_deliver` handles both.
            Poll::Ready(_) => self.try_deliver(pending),
        }
    }

    fn session_taken(&self) -> bool {
        self.session_slot.lock().map_or(true, |slot| slot.is_none())
    }
}

/// Where the core's `event` goes, with its times made relative to `now`; `None` for an
/// event this driver does not know yet (the core's `Event` grows).
pub(crate) fn route(now: Instant, event: Event) -> Option<Route> {
    let after = |at: Instant| at.saturating_duration_since(now);
    Some(match event {
        Event::Connected => Route::Session(SessionEvent::Connected),
        Event::Disconnected { reconnect_at, why } => Route::Session(SessionEvent::Disconnected {
            reconnect_in: reconnect_at.map(after),
            why,
        }),
        Event::Received { sub, id, raw } => {
            Route::Sub(sub, SubscriptionEvent::Event(RelayEvent { id, raw }))
        }
        Event::Eose { sub } => Route::Sub(sub, SubscriptionEvent::Eose),
        Event::Closed {
            sub,
            reason,
            attempts,
        } => Route::Sub(sub, SubscriptionEvent::Closed { reason, attempts }),
        Event::Retrying { sub, at, attempt } => Route::Sub(
            sub,
            SubscriptionEvent::Retrying {
                after: after(at),
                attempt,
            },
        ),
        Event::Queued { sub } => Route::Sub(sub, SubscriptionEvent::Queued),
        Event::EoseTimeout { sub } => Route::Sub(sub, SubscriptionEvent::EoseTimeout),
        Event::RateLimited { until } => Route::Session(SessionEvent::RateLimited {
            window: after(until),
        }),
        Event::SubscriptionLimit { max } => Route::Session(SessionEvent::SubscriptionLimit { max }),
        Event::Notice { message } => Route::Session(SessionEvent::Notice { message }),
        Event::AuthChallenge { challenge, id } => {
            Route::Session(SessionEvent::AuthChallenge { challenge, id })
        }
        Event::Authenticated => Route::Session(SessionEvent::Authenticated),
        Event::AuthFailed { reason } => Route::Session(SessionEvent::AuthFailed { reason }),
        Event::Published { id } => Route::Publish(id, Ok(Published { id })),
        Event::Rejected { id, reason } => Route::Publish(id, Err(Rejected::Relay { id, reason })),
        Event::PeerError { error } => Route::Session(SessionEvent::PeerError { error }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker_ref;
    use futures::StreamExt;

    fn dispatch(capacity: usize) -> (Dispatch, Arc<Mutex<Option<SessionEvents>>>) {
        let (tx, rx) = mpsc::channel(capacity - 1);
        let slot = Arc::new(Mutex::new(Some(SessionEvents::new(rx))));
        (Dispatch::new(tx, Arc::clone(&slot)), slot)
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
        d.route(Route::Session(SessionEvent::Connected));
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
            d.route(Route::Session(SessionEvent::Connected));
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
            d.route(Route::Session(SessionEvent::Connected));
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
