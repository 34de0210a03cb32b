//! The pool driver: one future for every relay of a pool, the driver loop of `drive.rs`
//! around a [`RelayPool`]. What is its own: the handles' commands, where its events go, and
//! the verification workers that check events before the application hears them.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::mpsc;
use tether_core::nostr::Event;
use tether_core::pool::{
    PoolCheckpoint, PoolConfig, PoolError, PoolEvent, PublishOutcome, RelayId, RelayPool, SubId,
    VerifyRequest,
};
use tether_core::CheckpointError;
use tether_core::Instant;
use tracing::{debug, info};

use super::handle::{
    PoolCommand, PoolEvents, PoolHandle, PoolItem, PoolRelayEvent, PoolSubscription, RoutingInput,
};
use crate::config::{seed_or_random, Config};
use crate::delivery::{Delivery, Route, Routes};
use crate::drive::{unix_now, App, Driver, Parts, Setup};
use crate::heard::{heard, Heard};
use crate::relay::CaughtUp;
use crate::relay::SessionEvent;
use crate::runtime::{Addresses, HttpConnect, Runtime, WsConnect};
use crate::verify::Workers;

/// The driver of a pool: spawn it on the runtime whose [`Runtime`] and [`WsConnect`] it was
/// built with. It completes when every handle is gone.
pub struct PoolDriver<R: Runtime> {
    driver: Driver<PoolApp, R>,
}

/// A handle to a new, empty pool and the driver that serves it.
pub fn pool_driver<R: Runtime>(
    mut pool_config: PoolConfig,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
) -> (PoolHandle, PoolDriver<R>) {
    adjust(&mut pool_config, &config);
    let mut pool = RelayPool::new(pool_config, seed_or_random(config.seed));
    pool.set_wall_clock(rt.now(), unix_now());
    let (handle, driver) = driver_for(pool, config, rt, ws);
    (handle, driver)
}

/// [`pool_driver`] for a pool restored from `checkpoint` (see [`RelayPool::restore`]), its
/// relays connecting at once: `urls` names each of its relays (the checkpoint knows relays
/// by id only), and each logical subscription comes back as a [`PoolSubscription`], already
/// attached, in id order.
///
/// # Errors
/// [`CheckpointError`] when the checkpoint does not restore or a relay has no URL.
pub fn pool_driver_restored<R: Runtime>(
    mut pool_config: PoolConfig,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
    checkpoint: &PoolCheckpoint,
    urls: &[(RelayId, String)],
) -> Result<(PoolHandle, PoolDriver<R>, Vec<PoolSubscription>), CheckpointError> {
    if let Some(relay) = checkpoint
        .relays()
        .find(|r| !urls.iter().any(|(u, _)| u == r))
    {
        return Err(CheckpointError::Invalid(format!(
            "no URL for relay {relay}"
        )));
    }
    adjust(&mut pool_config, &config);
    let seed = seed_or_random(config.seed);
    let pool = RelayPool::restore(pool_config, seed, checkpoint, rt.now(), unix_now())?;
    let subs: Vec<SubId> = checkpoint.subscriptions().map(|(sub, _)| sub).collect();
    let capacity = config.subscription_capacity;
    let (handle, mut driver) = driver_for(pool, config, rt, ws);
    for (relay, url) in urls {
        if checkpoint.relays().any(|r| r == *relay) {
            driver.attach_relay(*relay, url);
        }
    }
    let subscriptions = subs
        .into_iter()
        .map(|sub| {
            let (items, rx) = mpsc::channel(capacity.max(1) - 1);
            driver.driver.parts.delivery.add_sub(sub, items);
            PoolSubscription::attached(sub, rx, handle.commands.clone())
        })
        .collect();
    Ok((handle, driver, subscriptions))
}

/// What the driver's configuration changes in the pool's.
fn adjust(pool_config: &mut PoolConfig, config: &Config) {
    // The core waits for verdicts only when someone will give them.
    pool_config.verify = config.verifier.is_some();
    // Relay lists are checked always: with the `verify` feature the driver has a checker
    // of its own for them, whatever the application asked for its events.
    pool_config.verify_lists = list_verifier(config).is_some();
    pool_config.relay.authenticates |= config.signer.is_some();
}

/// What checks the relay lists routing reads: the application's verifier, or without one
/// libsecp256k1's (feature `verify`).
fn list_verifier(config: &Config) -> Option<Arc<dyn crate::verify::Verify>> {
    #[cfg(feature = "verify")]
    let fallback = Some(Arc::new(crate::verify::Verifier::new()) as Arc<dyn crate::verify::Verify>);
    #[cfg(not(feature = "verify"))]
    let fallback = None;
    config.verifier.clone().or(fallback)
}

/// The handle and driver around `pool`.
fn driver_for<R: Runtime>(
    pool: RelayPool,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
) -> (PoolHandle, PoolDriver<R>) {
    let (commands_tx, commands) = mpsc::channel(config.command_capacity.max(1) - 1);
    let (relay_events, rx) = mpsc::channel(config.session_capacity.max(1) - 1);
    let max_frame = pool.config().relay.max_frame;
    let workers = list_verifier(&config).map(|v| Workers::start(v, config.verify_workers));
    let slot = Arc::new(Mutex::new(Some(PoolEvents { rx })));
    let handle = PoolHandle {
        commands: commands_tx,
        subscription_capacity: config.subscription_capacity,
        events: Arc::clone(&slot),
    };
    let driver = Driver::new(Setup {
        span: tracing::info_span!("tether.pool"),
        rt,
        ws,
        max_frame,
        machine: pool,
        app: PoolApp {
            workers,
            to_verify: VecDeque::new(),
            by_url: BTreeMap::new(),
            url_of: BTreeMap::new(),
        },
        delivery: Delivery::new(relay_events, slot),
        commands,
        signer: config.signer,
        info_policy: config.relay_info,
        work_budget: config.work_budget,
    });
    (handle, PoolDriver { driver })
}

crate::drive::driver_face!(
    PoolDriver,
    "Fetch each relay's NIP-11 document with `http` when it connects (bounded and refreshed \
     rarely, per [`Config::relay_info`]) and give it to that relay's session, as \
     [`RelayDriver::with_relay_info`](crate::relay::RelayDriver::with_relay_info) does."
);

impl<R: Runtime> PoolDriver<R> {
    /// Give a restored relay its URL, as `AddRelay` does for a new one: the core too, which
    /// saved no application's URL, so that routing by people wanting the same URL asks this
    /// relay on its socket rather than opening a second.
    fn attach_relay(&mut self, relay: RelayId, url: &str) {
        if let Err(error) = self.driver.parts.machine.name_relay(relay, url) {
            // A URL past the core's rule stays the driver's alone, as in `AddRelay`.
            debug!(%relay, %error, "relay not named in the pool");
        }
        let key = crate::normalize_relay_url(url).unwrap_or_else(|_| url.to_owned());
        self.driver
            .parts
            .relays
            .add(relay, Arc::from(url), Addresses::Any);
        let key: Arc<str> = Arc::from(key.as_str());
        self.driver.app.by_url.insert(Arc::clone(&key), relay);
        self.driver.app.url_of.insert(relay, key);
    }
}

impl<R: Runtime> std::fmt::Debug for PoolDriver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolDriver")
            .field("relays", &self.driver.parts.relays.len())
            .field("backlog", &self.driver.parts.delivery.backlog_len())
            .finish_non_exhaustive()
    }
}

/// What the pool driver delivers: each logical subscription's items, relay-wide events
/// tagged with their relay, and each publish's aggregate outcome.
pub(crate) struct PoolRoutes;

impl Routes for PoolRoutes {
    type Sub = SubId;
    type Item = PoolItem;
    type Notice = PoolRelayEvent;
    type Reply = Result<PublishOutcome, PoolError>;

    fn is_last(item: &PoolItem) -> bool {
        matches!(item, PoolItem::Ended { .. })
    }
}

/// The pool driver's own part.
pub(crate) struct PoolApp {
    /// The verification workers, when a verifier is configured, and the checks the core
    /// asked for that they have no room for yet.
    workers: Option<Workers>,
    to_verify: VecDeque<VerifyRequest>,
    /// Relays by normalised URL (`normalize_relay_url`): the same relay given twice is one
    /// relay.
    by_url: BTreeMap<Arc<str>, RelayId>,
    url_of: BTreeMap<RelayId, Arc<str>>,
}

impl PoolApp {
    fn remove_relay(
        &mut self,
        parts: &mut Parts<Self>,
        now: Instant,
        relay: RelayId,
    ) -> Result<(), PoolError> {
        let result = parts.machine.remove_relay(now, relay);
        if let Some(key) = self.url_of.remove(&relay) {
            self.by_url.remove(&key);
        }
        parts.relays.remove(relay);
        result
    }

    fn remove_all(&mut self, parts: &mut Parts<Self>, now: Instant) {
        let relays: Vec<RelayId> = parts.machine.relay_ids().collect();
        for relay in relays {
            let _ = self.remove_relay(parts, now, relay);
        }
    }
}

impl App for PoolApp {
    type Machine = RelayPool;
    type Command = PoolCommand;
    type Routes = PoolRoutes;

    fn command(&mut self, parts: &mut Parts<Self>, now: Instant, command: PoolCommand) {
        match command {
            PoolCommand::AddRelay { url, key, reply } => {
                if let Some(&relay) = self.by_url.get(key.as_str()) {
                    debug!(%url, %relay, "relay already in the pool");
                    let _ = reply.send(Ok(relay));
                    return;
                }
                // One relay per URL in the core: a relay routing opened at this URL is the
                // one the application gets, on its socket. A URL past the core's rule (over
                // 8 KiB, or one the WHATWG parser refuses) is still the application's to add.
                let result = match parts.machine.add_relay_url(now, &url) {
                    Err(PoolError::InvalidUrl(_)) => parts.machine.add_relay(now),
                    other => other,
                };
                if let Ok(relay) = result {
                    debug!(%url, %relay, "relay added");
                    if parts.relays.url(relay).is_some() {
                        parts.relays.allow(relay, Addresses::Any);
                    } else {
                        parts
                            .relays
                            .add(relay, Arc::from(url.as_str()), Addresses::Any);
                    }
                    let key: Arc<str> = Arc::from(key.as_str());
                    self.by_url.insert(Arc::clone(&key), relay);
                    self.url_of.insert(relay, key);
                }
                let _ = reply.send(result);
            }
            PoolCommand::RemoveRelay { relay, reply } => {
                let _ = reply.send(self.remove_relay(parts, now, relay));
            }
            PoolCommand::RelayStats { relay, reply } => {
                let stats = parts
                    .machine
                    .relay_stats(relay)
                    .ok_or(PoolError::UnknownRelay(relay));
                let _ = reply.send(stats);
            }
            PoolCommand::RelayUrl { relay, reply } => {
                let _ = reply.send(parts.relays.url(relay).map(|url| url.to_string()));
            }
            PoolCommand::Subscribe {
                filters,
                items,
                reply,
            } => {
                let result = parts.machine.subscribe(now, filters);
                if let Ok(sub) = result {
                    parts.delivery.add_sub(sub, items);
                }
                let _ = reply.send(result);
            }
            PoolCommand::SubscribeOutbox {
                filter,
                items,
                reply,
            } => {
                let result = parts.machine.subscribe_outbox(now, filter);
                if let Ok(sub) = result {
                    parts.delivery.add_sub(sub, items);
                }
                let _ = reply.send(result);
            }
            PoolCommand::Unsubscribe { sub, reply } => {
                parts.delivery.remove_sub(sub);
                let _ = parts.machine.unsubscribe(now, sub);
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
            }
            PoolCommand::Publish {
                event,
                outbox,
                reply,
            } => {
                let published = if outbox {
                    parts.machine.publish_outbox(now, &event)
                } else {
                    parts.machine.publish(now, &event, None)
                };
                match published {
                    Ok(id) => parts.delivery.add_publish(id, reply),
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            PoolCommand::Routing { input, reply } => {
                let result = match input {
                    RoutingInput::RelayList(json) => parts.machine.handle_relay_list(now, &json),
                    RoutingInput::Liveness(json) => parts.machine.handle_liveness(now, &json),
                    RoutingInput::HintLive(url, alive) => {
                        parts.machine.hint_live(now, &url, alive);
                        Ok(())
                    }
                };
                let _ = reply.send(result);
            }
            PoolCommand::Close { reply } => {
                self.remove_all(parts, now);
                let _ = reply.send(());
            }
            PoolCommand::Lifecycle { signal, reply } => {
                info!(signal = signal.as_str(), "lifecycle");
                parts.machine.handle_lifecycle(now, signal);
                let _ = reply.send(());
            }
            PoolCommand::Checkpoint { reply } => {
                let _ = reply.send(Box::new(parts.machine.checkpoint()));
            }
        }
    }

    fn route(&mut self, parts: &mut Parts<Self>, now: Instant, event: PoolEvent) {
        let route = match event {
            PoolEvent::Received {
                sub,
                relay,
                id,
                raw,
            } => Route::Sub(sub, PoolItem::Event { relay, id, raw }),
            PoolEvent::Eose { sub, relay } => Route::Sub(sub, PoolItem::Eose { relay }),
            PoolEvent::CaughtUp {
                sub,
                relay,
                method,
                exact_since,
                recovered,
            } => Route::Sub(
                sub,
                PoolItem::CaughtUp {
                    relay,
                    caught_up: CaughtUp {
                        method,
                        exact_since,
                        recovered,
                    },
                },
            ),
            PoolEvent::RelayClosed {
                sub,
                relay,
                reason,
                attempts,
            } => Route::Sub(
                sub,
                PoolItem::RelayClosed {
                    relay,
                    reason,
                    attempts,
                },
            ),
            PoolEvent::Complete { sub, outcome } => Route::Sub(sub, PoolItem::Complete(outcome)),
            PoolEvent::Routed { sub, report } => Route::Sub(sub, PoolItem::Routed(report)),
            PoolEvent::Ended { sub, reasons } => Route::Sub(sub, PoolItem::Ended { reasons }),
            PoolEvent::Invalid {
                sub,
                relay,
                id,
                reason,
            } => {
                let url = parts.relays.url(relay);
                // The application hears it (`PoolItem::Invalid`); a log line per forgery
                // would let a hostile relay flood the log.
                debug!(?url, %id, %reason, "event failed verification");
                Route::Sub(sub, PoolItem::Invalid { relay, id, reason })
            }
            PoolEvent::PublishDone { id, outcome } => Route::Publish(id, Ok(outcome)),
            PoolEvent::Relay { relay, sub, event } => {
                trace_relay_event(parts, relay, &event);
                // The session's instants, made relative to now, as the relay driver does.
                match (sub, heard(now, event)) {
                    (Some(sub), Some(Heard::Sub(_, event))) => {
                        Route::Sub(sub, PoolItem::Relay { relay, event })
                    }
                    (None, Some(Heard::Session(event))) => {
                        let url = parts.relays.name(relay).cloned();
                        Route::Notice(PoolRelayEvent { relay, url, event })
                    }
                    _ => return,
                }
            }
            other => {
                debug!(?other, "pool event");
                return;
            }
        };
        parts.delivery.route(route);
    }

    fn notice(relay: RelayId, url: Option<Arc<str>>, event: SessionEvent) -> PoolRelayEvent {
        PoolRelayEvent { relay, url, event }
    }

    fn abandon(&mut self, pool: &mut RelayPool, now: Instant, sub: SubId) {
        let _ = pool.unsubscribe(now, sub);
    }

    fn shut_down(&mut self, pool: &mut RelayPool, now: Instant) {
        // The relays stay held until the driver drained their closes.
        let relays: Vec<RelayId> = pool.relay_ids().collect();
        for relay in relays {
            let _ = pool.remove_relay(now, relay);
        }
    }

    /// Hand checks to the workers while they have room; feed their verdicts to the core.
    fn poll_extra(&mut self, parts: &mut Parts<Self>, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(workers) = self.workers.as_mut() else {
            return false;
        };
        let mut worked = false;
        while workers.has_room() {
            let Some(request) = self.to_verify.pop_front() else {
                break;
            };
            if let Some((ticket, verdict)) = workers.submit(request) {
                let _ = parts.machine.handle_verified(now, ticket, verdict);
                worked = true;
            }
        }
        while let Poll::Ready(Some((ticket, verdict))) = workers.poll_verdict(cx) {
            // A ticket of a subscription dropped meanwhile is not awaited any more.
            let _ = parts.machine.handle_verified(now, ticket, verdict);
            worked = true;
        }
        worked
    }

    fn extra_backlogged(&self) -> bool {
        self.workers
            .as_ref()
            .is_some_and(|w| self.to_verify.len() >= w.capacity())
    }

    fn drain_extra(&mut self, pool: &mut RelayPool) -> bool {
        let Some(request) = pool.poll_verify() else {
            return false;
        };
        self.to_verify.push_back(request);
        true
    }
}

/// A relay's events in the log, with its URL.
fn trace_relay_event(parts: &Parts<PoolApp>, relay: RelayId, event: &Event) {
    let Some(url) = parts.relays.url(relay) else {
        return;
    };
    match event {
        Event::Disconnected { why, .. } => info!(%url, ?why, "disconnected"),
        Event::Connected => info!(%url, "connected"),
        other => debug!(%url, ?other, "relay event"),
    }
}
