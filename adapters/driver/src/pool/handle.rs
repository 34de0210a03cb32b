//! What the application holds for a pool.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_channel::{mpsc, oneshot};
use futures_core::Stream;
use futures_util::SinkExt;
use tether_core::nostr::message::EventId;
use tether_core::nostr::Filter;
use tether_core::pool::{
    Outcome, PoolCheckpoint, PoolError, PoolStats, PublishOutcome, RelayId, RouteReport, SubId,
};
use tether_core::Lifecycle;

use crate::relay::{CaughtUp, SessionEvent, SubscriptionEvent};

/// What a pool subscription yields: each event once, whichever relay sent it first, and
/// how the query went.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolItem {
    /// An event, the first time any relay delivered its id.
    Event {
        /// The relay that delivered it first.
        relay: RelayId,
        /// Its id.
        id: EventId,
        /// Its JSON, as that relay sent it.
        raw: String,
    },
    /// `relay` caught this subscription up after a gap.
    CaughtUp {
        /// The relay.
        relay: RelayId,
        /// How, and from which `created_at` it is exact.
        caught_up: CaughtUp,
    },
    /// `relay` sent its stored events.
    Eose {
        /// The relay.
        relay: RelayId,
    },
    /// `relay` gave up on this subscription; others may still serve it.
    RelayClosed {
        /// The relay.
        relay: RelayId,
        /// Its last message.
        reason: String,
        /// Re-REQs made before giving up.
        attempts: u32,
    },
    /// The query's outcome, exactly once.
    Complete(Outcome),
    /// No relay serves this subscription any more; nothing follows.
    Ended {
        /// Each relay's reason.
        reasons: Vec<(RelayId, String)>,
    },
    /// A copy from `relay` failed verification: dropped, never delivered (another relay's
    /// genuine copy of the same id still is).
    Invalid {
        /// The relay that sent it.
        relay: RelayId,
        /// The id it claimed.
        id: EventId,
        /// What the verifier said.
        reason: String,
    },
    /// Where a subscription by people is asked, and who is covered, whenever that changes.
    Routed(RouteReport),
    /// What one relay's session reports about this subscription: retrying (with the
    /// delay), queued for a slot, no answer to its REQ.
    Relay {
        /// The relay.
        relay: RelayId,
        /// What it said.
        event: SubscriptionEvent,
    },
}

/// Why a pool call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolClientError {
    /// The pool refused the call (unknown relay or subscription, bounds, invalid input).
    Pool(PoolError),
    /// The URL breaks the rule of [`check_ws_url`](crate::check_ws_url) (scheme, host,
    /// port): what is wrong.
    InvalidUrl(String),
    /// The driver is gone.
    Shutdown,
}

impl std::fmt::Display for PoolClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolClientError::Pool(e) => write!(f, "{e}"),
            PoolClientError::InvalidUrl(e) => write!(f, "{e}"),
            PoolClientError::Shutdown => f.write_str("the pool driver is gone"),
        }
    }
}

impl std::error::Error for PoolClientError {}

/// A handle to a pool and the driver that serves it. Cheap to clone.
#[derive(Clone, Debug)]
#[must_use = "the pool's driver stops once every handle is dropped"]
pub struct PoolHandle {
    pub(crate) commands: mpsc::Sender<PoolCommand>,
    pub(crate) subscription_capacity: usize,
    pub(crate) events: std::sync::Arc<std::sync::Mutex<Option<PoolEvents>>>,
}

/// Relay-wide events of a pool, each with its relay ([`PoolRelayEvent`]): connected,
/// disconnected (and why), notices, auth, rate limits, learned limits, peer errors. A bounded
/// channel: when the application does not read it, the driver stops reading sockets, as for
/// subscriptions.
#[derive(Debug)]
#[must_use = "dropping PoolEvents discards relay events from then on"]
pub struct PoolEvents {
    pub(crate) rx: mpsc::Receiver<PoolRelayEvent>,
}

/// One relay-wide event of a pool, with the relay it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolRelayEvent {
    /// The relay.
    pub relay: RelayId,
    /// The relay's URL when the event happened: the one it was added with, or the one
    /// routing by people chose. Routing reuses the id of a relay it let go of for another
    /// URL, so the id alone may name another relay by the time the event is read (and
    /// [`PoolHandle::relay_url`] then names that one); this names the relay the event is
    /// about. `None` only for a relay the driver never held.
    pub url: Option<std::sync::Arc<str>>,
    /// What happened.
    pub event: SessionEvent,
}

impl Stream for PoolEvents {
    type Item = PoolRelayEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.rx).poll_next(cx)
    }
}

pub(crate) enum PoolCommand {
    AddRelay {
        url: String,
        /// `url` normalised: one relay per key.
        key: String,
        reply: oneshot::Sender<Result<RelayId, PoolError>>,
    },
    RemoveRelay {
        relay: RelayId,
        reply: oneshot::Sender<Result<(), PoolError>>,
    },
    RelayStats {
        relay: RelayId,
        reply: oneshot::Sender<Result<PoolStats, PoolError>>,
    },
    RelayUrl {
        relay: RelayId,
        reply: oneshot::Sender<Option<String>>,
    },
    Subscribe {
        filters: Vec<Filter>,
        items: mpsc::Sender<PoolItem>,
        reply: oneshot::Sender<Result<SubId, PoolError>>,
    },
    SubscribeOutbox {
        filter: Filter,
        items: mpsc::Sender<PoolItem>,
        reply: oneshot::Sender<Result<SubId, PoolError>>,
    },
    Unsubscribe {
        sub: SubId,
        /// Answered once the pool has let go of it (its CLOSEs are queued).
        reply: Option<oneshot::Sender<()>>,
    },
    Publish {
        event: String,
        /// By outbox: to the author's and the tagged people's relays.
        outbox: bool,
        reply: oneshot::Sender<Result<PublishOutcome, PoolError>>,
    },
    Close {
        reply: oneshot::Sender<()>,
    },
    Lifecycle {
        signal: Lifecycle,
        reply: oneshot::Sender<()>,
    },
    Checkpoint {
        reply: oneshot::Sender<Box<PoolCheckpoint>>,
    },
    /// What routing by people learns from the application.
    Routing {
        input: RoutingInput,
        reply: oneshot::Sender<Result<(), PoolError>>,
    },
}

/// What the application tells routing by people.
#[derive(Debug)]
pub(crate) enum RoutingInput {
    /// A kind 10002 or 10050 relay list.
    RelayList(String),
    /// A NIP-66 relay discovery event (kind 30166).
    Liveness(String),
    /// The application's own word on a relay: its URL, and whether it is alive.
    HintLive(String, bool),
}

impl PoolHandle {
    /// Tell every relay of the pool about the application's lifecycle (see
    /// [`RelayHandle::lifecycle`](crate::RelayHandle::lifecycle)).
    ///
    /// # Errors
    /// [`PoolClientError::Shutdown`] when the driver is gone.
    pub async fn lifecycle(&self, signal: Lifecycle) -> Result<(), PoolClientError> {
        self.call(|reply| PoolCommand::Lifecycle { signal, reply })
            .await
    }

    /// A relay list (kind 10002 or 10050) the application got elsewhere, for routing by
    /// people ([`RelayPool::handle_relay_list`](tether_core::pool::RelayPool::handle_relay_list)).
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for an event that is no relay list.
    pub async fn handle_relay_list(
        &self,
        event_json: impl Into<String>,
    ) -> Result<(), PoolClientError> {
        self.routing(RoutingInput::RelayList(event_json.into()))
            .await
    }

    /// A NIP-66 relay discovery event (kind 30166) from a monitor, as a liveness hint for
    /// routing ([`RelayPool::handle_liveness`](tether_core::pool::RelayPool::handle_liveness)).
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for an event that is no kind 30166 naming a relay.
    pub async fn handle_liveness(
        &self,
        event_json: impl Into<String>,
    ) -> Result<(), PoolClientError> {
        self.routing(RoutingInput::Liveness(event_json.into()))
            .await
    }

    /// The application's own liveness word on a relay, for routing: weighed, never a rule.
    ///
    /// # Errors
    /// [`PoolClientError::Shutdown`] when the driver is gone.
    pub async fn hint_live(
        &self,
        url: impl Into<String>,
        alive: bool,
    ) -> Result<(), PoolClientError> {
        self.routing(RoutingInput::HintLive(url.into(), alive))
            .await
    }

    async fn routing(&self, input: RoutingInput) -> Result<(), PoolClientError> {
        self.call(|reply| PoolCommand::Routing { input, reply })
            .await?
            .map_err(PoolClientError::Pool)
    }

    /// The relay-wide events, once (`None` after the first call).
    #[must_use = "the stream can be taken only once; dropping it discards relay events"]
    pub fn events(&self) -> Option<PoolEvents> {
        self.events.lock().ok()?.take()
    }

    /// Add a relay (ws:// or wss://) and start connecting to it; subscriptions on every
    /// relay are replayed on it, paced and gated. The same relay given again, spelled the
    /// same after [`normalize_relay_url`](crate::normalize_relay_url) (case of scheme and
    /// host, default port, trailing slash), is the relay already held: its id is returned
    /// and no second socket opens.
    ///
    /// # Errors
    /// [`PoolClientError::InvalidUrl`] for a URL the relay clients would refuse
    /// ([`check_ws_url`](crate::check_ws_url)), checked before the driver hears of it;
    /// [`PoolClientError::Pool`] for too many relays.
    pub async fn add_relay(&self, url: &str) -> Result<RelayId, PoolClientError> {
        let key = crate::normalize_relay_url(url)
            .map_err(|e| PoolClientError::InvalidUrl(e.to_string()))?;
        let url = url.to_owned();
        self.call(|reply| PoolCommand::AddRelay { url, key, reply })
            .await?
            .map_err(PoolClientError::Pool)
    }

    /// Remove a relay; the subscriptions it served count it as missing.
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for an unknown relay.
    pub async fn remove_relay(&self, relay: RelayId) -> Result<(), PoolClientError> {
        self.call(|reply| PoolCommand::RemoveRelay { relay, reply })
            .await?
            .map_err(PoolClientError::Pool)
    }

    /// What the pool counted for one relay: duplicates, conflicting copies, events that
    /// failed verification. A relay that keeps sending bad events shows here.
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for an unknown relay.
    pub async fn relay_stats(&self, relay: RelayId) -> Result<PoolStats, PoolClientError> {
        self.call(|reply| PoolCommand::RelayStats { relay, reply })
            .await?
            .map_err(PoolClientError::Pool)
    }

    /// The URL the pool dials for `relay`: the one it was added with, or for a relay that
    /// routing by people opened, the one routing chose. `None` for a relay the pool no
    /// longer holds.
    ///
    /// A relay's items can come before the [`PoolItem::Routed`] report that names a routed
    /// relay; this names it at once. It names the relay that holds the id now: a relay
    /// event carries the URL of the relay it is about ([`PoolRelayEvent::url`]).
    ///
    /// # Errors
    /// [`PoolClientError`] once the driver stopped.
    pub async fn relay_url(&self, relay: RelayId) -> Result<Option<String>, PoolClientError> {
        self.call(|reply| PoolCommand::RelayUrl { relay, reply })
            .await
    }

    /// Subscribe on every relay, present and future, with these filters.
    ///
    /// Read every subscription you hold (or drop it): they share the driver's backpressure,
    /// so one whose channel is full stops the sockets for all of them. Each yields one
    /// `Eose` item per relay, which on hundreds of relays fills a channel that is not read
    /// alongside the others (`futures_util::stream::select_all` reads them together).
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for no filters or too many subscriptions.
    pub async fn subscribe(
        &self,
        filters: Vec<Filter>,
    ) -> Result<PoolSubscription, PoolClientError> {
        self.open_subscription(|items, reply| PoolCommand::Subscribe {
            filters,
            items,
            reply,
        })
        .await
    }

    /// Subscribe to people: `filter`'s `authors` (a follow feed), or with no `authors` its
    /// one `#p` key (an inbox). The pool finds their relays from their relay lists on
    /// [`RouterConfig::indexers`](tether_core::router::RouterConfig::indexers), opens
    /// them within the router's budget and keeps the subscription exact while routes move
    /// (see [`RelayPool::subscribe_outbox`](tether_core::pool::RelayPool::subscribe_outbox));
    /// [`PoolItem::Routed`] says where it is asked whenever that changes.
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for a filter that names no people, or too many
    /// subscriptions.
    pub async fn subscribe_outbox(
        &self,
        filter: Filter,
    ) -> Result<PoolSubscription, PoolClientError> {
        self.open_subscription(|items, reply| PoolCommand::SubscribeOutbox {
            filter,
            items,
            reply,
        })
        .await
    }

    /// A subscription the driver registers with `command`, its items on a channel of the
    /// configured capacity.
    async fn open_subscription(
        &self,
        command: impl FnOnce(
            mpsc::Sender<PoolItem>,
            oneshot::Sender<Result<SubId, PoolError>>,
        ) -> PoolCommand,
    ) -> Result<PoolSubscription, PoolClientError> {
        let (items, rx) = mpsc::channel(self.subscription_capacity.max(1) - 1);
        let sub = self
            .call(|reply| command(items, reply))
            .await?
            .map_err(PoolClientError::Pool)?;
        Ok(PoolSubscription {
            sub,
            items: rx,
            commands: self.commands.clone(),
            ended: false,
        })
    }

    /// Publish a signed event to every relay; resolves when all answered or the pool's
    /// publish deadline passed.
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for an invalid event or one already being published.
    pub async fn publish(
        &self,
        event_json: impl Into<String>,
    ) -> Result<PublishOutcome, PoolClientError> {
        let event = event_json.into();
        self.call(|reply| PoolCommand::Publish {
            event,
            outbox: false,
            reply,
        })
        .await?
        .map_err(PoolClientError::Pool)
    }

    /// Publish a signed event by outbox: to its author's write relays and each p-tagged
    /// person's read relays (their DM relays for a gift wrap), which the pool opens and
    /// lets go again ([`RelayPool::publish_outbox`](tether_core::pool::RelayPool::publish_outbox)).
    /// Resolves when all answered or the pool's publish deadline passed; the outcome's
    /// `urls` name the relays.
    ///
    /// # Errors
    /// [`PoolClientError::Pool`] for an invalid event or one already being published.
    pub async fn publish_outbox(
        &self,
        event_json: impl Into<String>,
    ) -> Result<PublishOutcome, PoolClientError> {
        let event = event_json.into();
        self.call(|reply| PoolCommand::Publish {
            event,
            outbox: true,
            reply,
        })
        .await?
        .map_err(PoolClientError::Pool)
    }

    /// The pool's checkpoint now ([`PoolCheckpoint`]), to restore in a later process with
    /// the adapter's pool `restore` (which also needs each relay's URL by id). Nothing
    /// changes and nothing is sent.
    ///
    /// # Errors
    /// [`PoolClientError::Shutdown`] when the driver is gone.
    pub async fn checkpoint(&self) -> Result<PoolCheckpoint, PoolClientError> {
        self.call(|reply| PoolCommand::Checkpoint { reply })
            .await
            .map(|boxed| *boxed)
    }

    /// Close every relay's socket; the driver ends once every handle is dropped.
    ///
    /// # Errors
    /// [`PoolClientError::Shutdown`] when the driver is gone.
    pub async fn close(&self) -> Result<(), PoolClientError> {
        self.call(|reply| PoolCommand::Close { reply }).await
    }

    async fn call<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> PoolCommand,
    ) -> Result<T, PoolClientError> {
        let (reply, answer) = oneshot::channel();
        let mut commands = self.commands.clone();
        commands
            .send(command(reply))
            .await
            .map_err(|_| PoolClientError::Shutdown)?;
        answer.await.map_err(|_| PoolClientError::Shutdown)
    }
}

/// One logical subscription: a `Stream` of [`PoolItem`]s. Dropping it unsubscribes.
#[derive(Debug)]
#[must_use = "dropping a PoolSubscription unsubscribes"]
pub struct PoolSubscription {
    sub: SubId,
    items: mpsc::Receiver<PoolItem>,
    commands: mpsc::Sender<PoolCommand>,
    ended: bool,
}

impl PoolSubscription {
    /// The stream of a subscription the driver already serves (a restored one).
    pub(crate) fn attached(
        sub: SubId,
        items: mpsc::Receiver<PoolItem>,
        commands: mpsc::Sender<PoolCommand>,
    ) -> Self {
        PoolSubscription {
            sub,
            items,
            commands,
            ended: false,
        }
    }

    /// Its id in the pool.
    pub fn id(&self) -> SubId {
        self.sub
    }

    /// Unsubscribe, and return once the pool has let go of it: its CLOSEs are on their way
    /// to the relays ahead of anything asked after. Dropping it unsubscribes too, without
    /// waiting.
    ///
    /// # Errors
    /// [`PoolClientError::Shutdown`] when the driver is gone.
    pub async fn unsubscribe(mut self) -> Result<(), PoolClientError> {
        self.ended = true;
        let (reply, answer) = oneshot::channel();
        let mut commands = self.commands.clone();
        commands
            .send(PoolCommand::Unsubscribe {
                sub: self.sub,
                reply: Some(reply),
            })
            .await
            .map_err(|_| PoolClientError::Shutdown)?;
        answer.await.map_err(|_| PoolClientError::Shutdown)
    }
}

impl Stream for PoolSubscription {
    type Item = PoolItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<PoolItem>> {
        let next = Pin::new(&mut self.items).poll_next(cx);
        if let Poll::Ready(Some(PoolItem::Ended { .. }) | None) = &next {
            self.ended = true;
        }
        next
    }
}

impl Drop for PoolSubscription {
    fn drop(&mut self) {
        if !self.ended {
            // Best effort: a full command channel means the driver is busy or gone; the
            // driver also notices the closed channel when it next delivers.
            let _ = self.commands.try_send(PoolCommand::Unsubscribe {
                sub: self.sub,
                reply: None,
            });
        }
    }
}

impl std::fmt::Debug for PoolCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PoolCommand::AddRelay { .. } => "AddRelay",
            PoolCommand::RemoveRelay { .. } => "RemoveRelay",
            PoolCommand::RelayStats { .. } => "RelayStats",
            PoolCommand::RelayUrl { .. } => "RelayUrl",
            PoolCommand::Subscribe { .. } => "Subscribe",
            PoolCommand::SubscribeOutbox { .. } => "SubscribeOutbox",
            PoolCommand::Unsubscribe { .. } => "Unsubscribe",
            PoolCommand::Publish { .. } => "Publish",
            PoolCommand::Close { .. } => "Close",
            PoolCommand::Lifecycle { .. } => "Lifecycle",
            PoolCommand::Checkpoint { .. } => "Checkpoint",
            PoolCommand::Routing { .. } => "Routing",
        })
    }
}
