//! What the application holds: a cloneable [`RelayHandle`], one [`Subscription`] stream per
//! subscription and the [`SessionEvents`] stream, all talking to the driver over bounded
//! channels.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_channel::{mpsc, oneshot};
use futures_core::Stream;
use futures_util::SinkExt;
use tether_core::nostr::message::{EventId, FrameError};
use tether_core::nostr::{
    Applied, CatchUpMethod, ChallengeId, Disconnect, Error, Filter, Priority, Rejection,
    RelayCheckpoint, RelayInfo, SubscriptionId,
};
use tether_core::Lifecycle;

use crate::signer::SignerError;

/// A cheap, cloneable handle to one relay connection's driver.
///
/// Every method sends a command to the driver task over a bounded channel and waits for its
/// answer. When the driver is gone (every handle and subscription dropped, or the runtime
/// shut down) they return [`ClientError::Shutdown`] / [`Rejected::Shutdown`].
#[derive(Clone)]
#[must_use = "the driver stops once every handle and subscription is dropped"]
pub struct RelayHandle {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) session: Arc<Mutex<Option<SessionEvents>>>,
    pub(crate) subscription_capacity: usize,
    pub(crate) url: Arc<str>,
}

/// One subscription's events, in order; it ends after [`SubscriptionEvent::Closed`].
///
/// Dropping it unsubscribes. If it is not read, its channel fills and the driver stops
/// reading the socket (backpressure): read every subscription you keep.
#[must_use = "dropping a Subscription unsubscribes"]
pub struct Subscription {
    id: SubscriptionId,
    events: mpsc::Receiver<SubscriptionEvent>,
    commands: mpsc::Sender<Command>,
    ended: bool,
}

/// Session-level events: connects, disconnects, notices, auth, rate limits.
///
/// Taken once from [`RelayHandle::events`]. Until it is taken, events are buffered up to
/// [`Config::session_capacity`](crate::Config::session_capacity) and then dropped; once taken,
/// a full channel holds the driver back like a subscription does. Dropping it discards
/// session events from then on.
#[must_use = "dropping SessionEvents discards session events from then on"]
pub struct SessionEvents {
    events: mpsc::Receiver<SessionEvent>,
}

/// An event a relay sent for a subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayEvent {
    /// The event id (already checked against catch-up re-delivery).
    pub id: EventId,
    /// The event's JSON exactly as the relay sent it.
    pub raw: String,
}

/// How a subscription caught up after a gap (a reconnect, a refusal, a restart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaughtUp {
    /// NIP-77 negentropy, or the `since` fallback.
    pub method: CatchUpMethod,
    /// From which `created_at` the catch-up is exact.
    pub exact_since: u64,
    /// Events the catch-up delivered for the first time, from the relay's store (not live).
    pub recovered: u64,
}

/// What a [`Subscription`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubscriptionEvent {
    /// An event.
    Event(RelayEvent),
    /// Stored events are done; new ones stream in from here.
    Eose,
    /// A catch-up after a gap completed: everything the relay holds for the filter from
    /// `exact_since` on has now been delivered once.
    CaughtUp(CaughtUp),
    /// The relay refused the REQ; it is re-sent after `after` (this is retry `attempt`).
    Retrying {
        /// Delay until the REQ re-enters the send queue.
        after: Duration,
        /// Which retry (1-based).
        attempt: u32,
    },
    /// The subscription waits for a free slot under the relay's subscription limit.
    Queued,
    /// The relay answered nothing to the REQ in time; it is retried.
    EoseTimeout,
    /// The last item: the subscription is gone for good.
    Closed {
        /// The relay's last message, or the session's.
        reason: String,
        /// Re-REQs made before giving up.
        attempts: u32,
    },
}

/// What [`SessionEvents`] yields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// The socket opened; subscriptions are being replayed.
    Connected,
    /// The socket is gone; the next attempt starts after `reconnect_in`, or never (`None`:
    /// the application disconnected).
    Disconnected {
        /// Delay until the next connection attempt.
        reconnect_in: Option<Duration>,
        /// Why: the application asked, or what the socket saw.
        why: Disconnect,
    },
    /// A human-readable NOTICE.
    Notice {
        /// Its text.
        message: String,
    },
    /// The relay asks for NIP-42 authentication. With a [`Signer`](crate::Signer) configured
    /// the driver answers it; otherwise call [`RelayHandle::authenticate`].
    AuthChallenge {
        /// The challenge.
        challenge: String,
        /// Pass it to [`RelayHandle::authenticate`] with the signed answer.
        id: ChallengeId,
    },
    /// The relay accepted our AUTH.
    Authenticated,
    /// The relay refused our AUTH.
    AuthFailed {
        /// The relay's message.
        reason: String,
    },
    /// The configured signer failed; the challenge stays unanswered.
    SignerFailed {
        /// Why.
        error: SignerError,
    },
    /// The relay rate-limited us: background REQs wait for `window`.
    RateLimited {
        /// Remaining length of the gate window.
        window: Duration,
    },
    /// At most `max` REQs are kept open on this relay from now on.
    SubscriptionLimit {
        /// The limit.
        max: usize,
    },
    /// The relay sent a malformed frame; it was dropped.
    PeerError {
        /// What was wrong.
        error: FrameError,
    },
    /// The relay's NIP-11 document was fetched and its limits are the session's starting
    /// values.
    RelayInfo {
        /// What the document declares.
        info: RelayInfo,
        /// What the session applies.
        applied: Applied,
    },
    /// No usable NIP-11 document (none, too large, too slow, not JSON): nothing changed.
    RelayInfoUnavailable {
        /// Why.
        why: String,
    },
}

/// A publish the relay accepted (or already had).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// The event.
    pub id: EventId,
}

/// Why a publish did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// The relay refused it, or no OK came in time on any attempt.
    Relay {
        /// The event.
        id: EventId,
        /// Why.
        reason: Rejection,
    },
    /// The session refused it before sending (invalid event, outbox full, already publishing).
    Local(Error),
    /// The driver is gone.
    Shutdown,
}

/// A handle call that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// The session refused the call (unknown subscription, no filters, not connected, ...).
    Session(Error),
    /// The driver is gone.
    Shutdown,
}

impl RelayHandle {
    /// The relay's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The session's checkpoint now ([`RelayCheckpoint`]): write it down (its
    /// [`to_json`](RelayCheckpoint::to_json)) and restore it in a later process with the
    /// adapter's `restore`. Nothing changes and nothing is sent.
    ///
    /// # Errors
    /// [`ClientError::Shutdown`] when the driver is gone.
    pub async fn checkpoint(&self) -> Result<RelayCheckpoint, ClientError> {
        self.call(|reply| Command::Checkpoint { reply })
            .await
            .map(|boxed| *boxed)
    }

    /// Subscribe with these filters at normal priority.
    ///
    /// # Errors
    /// [`ClientError::Session`] for no filters or too many subscriptions.
    pub async fn subscribe(&self, filters: Vec<Filter>) -> Result<Subscription, ClientError> {
        self.subscribe_with_priority(filters, Priority::NORMAL)
            .await
    }

    /// Subscribe with these filters; higher priorities are replayed first after a reconnect.
    ///
    /// # Errors
    /// [`ClientError::Session`] for no filters or too many subscriptions.
    pub async fn subscribe_with_priority(
        &self,
        filters: Vec<Filter>,
        priority: Priority,
    ) -> Result<Subscription, ClientError> {
        let (events_tx, events) = mpsc::channel(self.subscription_capacity.max(1) - 1);
        let id = self
            .call(|reply| Command::Subscribe {
                filters,
                priority,
                events: events_tx,
                reply,
            })
            .await?
            .map_err(ClientError::Session)?;
        Ok(Subscription {
            id,
            events,
            commands: self.commands.clone(),
            ended: false,
        })
    }

    /// Drop a subscription by id (dropping its [`Subscription`] does the same).
    ///
    /// # Errors
    /// [`ClientError::Session`] if it is not registered.
    pub async fn unsubscribe(&self, id: SubscriptionId) -> Result<(), ClientError> {
        self.call(|reply| Command::Unsubscribe {
            id,
            reply: Some(reply),
        })
        .await?
        .map_err(ClientError::Session)
    }

    /// Publish a signed event (JSON object) and wait for the relay's verdict: its OK, or the
    /// session giving up after its retries and timeouts.
    ///
    /// # Errors
    /// [`Rejected`]: by the relay, by the session before sending, or the driver is gone.
    pub async fn publish(&self, event_json: impl Into<String>) -> Result<Published, Rejected> {
        let event = event_json.into();
        match self.call(|reply| Command::Publish { event, reply }).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Rejected::Shutdown),
        }
    }

    /// Answer the relay's NIP-42 challenge with a signed kind 22242 event yourself (instead of
    /// configuring a [`Signer`](crate::Signer)). Returns the AUTH event's id.
    ///
    /// # Errors
    /// [`ClientError::Session`] for an invalid event or when not connected.
    pub async fn authenticate(
        &self,
        challenge: ChallengeId,
        event_json: impl Into<String>,
    ) -> Result<EventId, ClientError> {
        let event = event_json.into();
        self.call(|reply| Command::Authenticate {
            challenge,
            event,
            reply,
        })
        .await?
        .map_err(ClientError::Session)
    }

    /// Close the connection and stop reconnecting; subscriptions and unsent publishes stay
    /// registered for [`RelayHandle::reconnect`].
    ///
    /// # Errors
    /// [`ClientError::Shutdown`] when the driver is gone.
    pub async fn disconnect(&self) -> Result<(), ClientError> {
        self.call(|reply| Command::Disconnect { reply }).await
    }

    /// Connect again after [`RelayHandle::disconnect`] (a no-op while connected).
    ///
    /// # Errors
    /// [`ClientError::Shutdown`] when the driver is gone.
    pub async fn reconnect(&self) -> Result<(), ClientError> {
        self.call(|reply| Command::Connect { reply }).await
    }

    /// Tell the session about the application's lifecycle: wire the platform's signals here
    /// (scene phase or sleep/wake to `Suspended`/`Resumed`, the network path monitor to
    /// `NetworkChanged`/`Online`). After a resume, a socket that died meanwhile is found
    /// within `LinkConfig::probe_timeout` (5 s) and replaced; offline, nothing is attempted.
    ///
    /// # Errors
    /// [`ClientError::Shutdown`] when the driver is gone.
    pub async fn lifecycle(&self, signal: Lifecycle) -> Result<(), ClientError> {
        self.call(|reply| Command::Lifecycle { signal, reply })
            .await
    }

    /// Take the session-level event stream; `None` if it was taken already.
    #[must_use = "the stream can be taken only once; dropping it discards session events"]
    pub fn events(&self) -> Option<SessionEvents> {
        self.session.lock().ok()?.take()
    }

    async fn call<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, ClientError> {
        let (reply, answer) = oneshot::channel();
        let mut commands = self.commands.clone();
        commands
            .send(command(reply))
            .await
            .map_err(|_| ClientError::Shutdown)?;
        answer.await.map_err(|_| ClientError::Shutdown)
    }
}

impl fmt::Debug for RelayHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayHandle")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// The stream of a subscription the driver already serves (a restored one).
    pub(crate) fn attached(
        id: SubscriptionId,
        events: mpsc::Receiver<SubscriptionEvent>,
        commands: mpsc::Sender<Command>,
    ) -> Self {
        Subscription {
            id,
            events,
            commands,
            ended: false,
        }
    }

    /// Its id in the session.
    pub fn id(&self) -> SubscriptionId {
        self.id
    }

    /// Unsubscribe and wait for the driver to confirm.
    ///
    /// # Errors
    /// [`ClientError::Session`] if the session already closed it.
    pub async fn unsubscribe(mut self) -> Result<(), ClientError> {
        self.ended = true;
        let (reply, answer) = oneshot::channel();
        let id = self.id;
        self.commands
            .send(Command::Unsubscribe {
                id,
                reply: Some(reply),
            })
            .await
            .map_err(|_| ClientError::Shutdown)?;
        answer
            .await
            .map_err(|_| ClientError::Shutdown)?
            .map_err(ClientError::Session)
    }
}

impl Stream for Subscription {
    type Item = SubscriptionEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = Pin::new(&mut self.events).poll_next(cx);
        if let Poll::Ready(Some(SubscriptionEvent::Closed { .. }) | None) = &item {
            self.ended = true;
        }
        item
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // Every sender has one guaranteed slot, and this clone has never sent, so this only
        // fails when the driver is gone. If it did fail, the driver would still notice the
        // closed channel at the next event for this subscription.
        let _ = self.commands.try_send(Command::Unsubscribe {
            id: self.id,
            reply: None,
        });
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl SessionEvents {
    pub(crate) fn new(events: mpsc::Receiver<SessionEvent>) -> Self {
        SessionEvents { events }
    }
}

impl Stream for SessionEvents {
    type Item = SessionEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.events).poll_next(cx)
    }
}

impl fmt::Debug for SessionEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionEvents").finish_non_exhaustive()
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::Relay {
                id,
                reason: Rejection::Refused { message },
            } => write!(f, "relay refused {id}: {message}"),
            Rejected::Relay {
                id,
                reason: Rejection::TimedOut,
            } => write!(f, "no OK for {id} in time"),
            Rejected::Relay { id, reason } => write!(f, "{id} not published: {reason:?}"),
            Rejected::Local(e) => write!(f, "{e}"),
            Rejected::Shutdown => f.write_str("the relay driver is gone"),
        }
    }
}

impl std::error::Error for Rejected {}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Session(e) => write!(f, "{e}"),
            ClientError::Shutdown => f.write_str("the relay driver is gone"),
        }
    }
}

impl std::error::Error for ClientError {}

/// A request from a handle to the driver.
pub(crate) enum Command {
    Subscribe {
        filters: Vec<Filter>,
        priority: Priority,
        events: mpsc::Sender<SubscriptionEvent>,
        reply: oneshot::Sender<Result<SubscriptionId, Error>>,
    },
    /// `reply` is `None` when a dropped [`Subscription`] asks.
    Unsubscribe {
        id: SubscriptionId,
        reply: Option<oneshot::Sender<Result<(), Error>>>,
    },
    Publish {
        event: String,
        reply: oneshot::Sender<Result<Published, Rejected>>,
    },
    Authenticate {
        challenge: ChallengeId,
        event: String,
        reply: oneshot::Sender<Result<EventId, Error>>,
    },
    Disconnect {
        reply: oneshot::Sender<()>,
    },
    Connect {
        reply: oneshot::Sender<()>,
    },
    Lifecycle {
        signal: Lifecycle,
        reply: oneshot::Sender<()>,
    },
    Checkpoint {
        reply: oneshot::Sender<Box<RelayCheckpoint>>,
    },
}
