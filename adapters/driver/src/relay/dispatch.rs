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

/// Where the core's `event` goes, with its times made relative to `now`.
pub(crate) fn route(now: Instant, event: Event) -> Route {
    let after = |at: Instant| at.saturating_duration_since(now);
    match event {
        Event::Connected => Route::Session(SessionEvent::Connected),
        Event::Disconnected { reconnect_at } => Route::Session(SessionEvent::Disconnected {
            reconnect_in: reconnect_at.map(after),
        }),
        Event::Event { sub, id, raw } => {
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
        Event::AuthChallenge { challenge } => {
            Route::Session(SessionEvent::AuthChallenge { challenge })
        }
        Event::Authenticated => Route::Session(SessionEvent::Authenticated),
        Event::AuthFailed { reason } => Route::Session(SessionEvent::AuthFailed { reason }),
        Event::Published { id } => Route::Publish(id, Ok(Published { id })),
        Event::Rejected { id, reason } => Route::Publish(id, Err(Rejected::Relay { id, reason })),
        Event::PeerError { error } => Route::Session(SessionEvent::PeerError { error }),
    }
}
