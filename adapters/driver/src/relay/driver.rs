//! The relay driver: one future per relay connection, the driver loop of `drive.rs` around a
//! [`RelaySession`]. What is its own: the handles' commands and where its events go.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::mpsc;
use tether_core::nostr::{Event, RelayCheckpoint, RelaySession, SubscriptionId};
use tether_core::CheckpointError;
use tether_core::Instant;
use tracing::{debug, info, warn};

use super::handle::{
    Command, Published, Rejected, RelayHandle, SessionEvent, SessionEvents, Subscription,
    SubscriptionEvent,
};
use crate::config::{seed_or_random, Config};
use crate::delivery::{Delivery, Route, Routes};
use crate::drive::{unix_now, App, Driver, Parts, Setup};
use crate::heard::{heard, Heard};
use crate::relays::Solo;
use crate::runtime::{Addresses, HttpConnect, Runtime, WsConnect};

/// The driver of one relay connection: spawn it on the runtime whose [`Runtime`] and
/// [`WsConnect`] it was built with. It completes when every handle and subscription is gone.
pub struct RelayDriver<R: Runtime> {
    driver: Driver<RelayApp, R>,
    url: Arc<str>,
}

/// A handle to a relay connection and the driver that serves it. The driver starts
/// connecting when first polled; spawn it with the runtime that `rt` and `ws` belong to.
pub fn relay_driver<R: Runtime>(
    url: &str,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
) -> (RelayHandle, RelayDriver<R>) {
    let url: Arc<str> = Arc::from(url);
    let mut relay_config = config.relay.clone();
    relay_config.authenticates |= config.signer.is_some();
    let mut session = RelaySession::new(relay_config, seed_or_random(config.seed));
    session.set_wall_clock(rt.now(), unix_now());
    session.connect(rt.now());
    let (handle, driver, _) = driver_for(&url, config, rt, ws, session);
    (handle, driver)
}

/// [`relay_driver`] for a session restored from `checkpoint` (see
/// [`RelaySession::restore`]), with one [`Subscription`] for each subscription it holds, in
/// slot order, already attached: nothing the restored session delivers is missed.
///
/// # Errors
/// [`CheckpointError`] when the checkpoint does not restore; nothing was started.
pub fn relay_driver_restored<R: Runtime>(
    url: &str,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
    checkpoint: &RelayCheckpoint,
) -> Result<(RelayHandle, RelayDriver<R>, Vec<Subscription>), CheckpointError> {
    let url: Arc<str> = Arc::from(url);
    let mut relay_config = config.relay.clone();
    relay_config.authenticates |= config.signer.is_some();
    let seed = seed_or_random(config.seed);
    let mut session = RelaySession::restore(relay_config, seed, checkpoint, rt.now(), unix_now())?;
    session.connect(rt.now());
    Ok(driver_for(&url, config, rt, ws, session))
}

/// The handle and driver around `session`, and a subscription stream for each subscription
/// the session already holds.
fn driver_for<R: Runtime>(
    url: &Arc<str>,
    config: Config,
    rt: R,
    ws: Arc<dyn WsConnect>,
    session: RelaySession,
) -> (RelayHandle, RelayDriver<R>, Vec<Subscription>) {
    let (commands_tx, commands) = mpsc::channel(config.command_capacity.max(1) - 1);
    let (session_tx, session_rx) = mpsc::channel(config.session_capacity.max(1) - 1);
    let slot = Arc::new(Mutex::new(Some(SessionEvents::new(session_rx))));
    let max_frame = session.config().max_frame;
    let held: Vec<SubscriptionId> = session.subscriptions().iter().map(|v| v.id).collect();
    let handle = RelayHandle {
        commands: commands_tx,
        session: Arc::clone(&slot),
        subscription_capacity: config.subscription_capacity,
        url: Arc::clone(url),
    };
    let mut driver = Driver::new(Setup {
        span: tracing::info_span!("tether.relay", url = %url),
        rt,
        ws,
        max_frame,
        machine: session,
        app: RelayApp,
        delivery: Delivery::new(session_tx, slot),
        commands,
        signer: config.signer,
        info_policy: config.relay_info,
        work_budget: config.work_budget,
    });
    driver
        .parts
        .relays
        .add(Solo, Arc::clone(url), Addresses::Any);
    let subscriptions = held
        .into_iter()
        .map(|id| {
            let (events_tx, events) = mpsc::channel(config.subscription_capacity.max(1) - 1);
            driver.parts.delivery.add_sub(id, events_tx);
            Subscription::attached(id, events, handle.commands.clone())
        })
        .collect();
    let url = Arc::clone(url);
    (handle, RelayDriver { driver, url }, subscriptions)
}

crate::drive::driver_face!(
    RelayDriver,
    "Fetch the relay's NIP-11 document with `http` when connecting (bounded and refreshed \
     rarely, per [`Config::relay_info`]) and give it to the session as starting values. \
     Without this call (or with `relay_info.fetch` off) nothing is fetched."
);

impl<R: Runtime> std::fmt::Debug for RelayDriver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayDriver")
            .field("url", &self.url)
            .field("link", &self.driver.parts.machine.link().state())
            .field("backlog", &self.driver.parts.delivery.backlog_len())
            .field("outgoing", &self.driver.outgoing_len())
            .finish_non_exhaustive()
    }
}

/// What the relay driver delivers: each subscription's events, the session's events, and
/// each publish's outcome.
pub(crate) struct RelayRoutes;

impl Routes for RelayRoutes {
    type Sub = SubscriptionId;
    type Item = SubscriptionEvent;
    type Notice = SessionEvent;
    type Reply = Result<Published, Rejected>;

    fn is_last(item: &SubscriptionEvent) -> bool {
        matches!(item, SubscriptionEvent::Closed { .. })
    }
}

/// The relay driver's own part: its commands and its routing.
pub(crate) struct RelayApp;

impl App for RelayApp {
    type Machine = RelaySession;
    type Command = Command;
    type Routes = RelayRoutes;

    fn command(&mut self, parts: &mut Parts<Self>, now: Instant, command: Command) {
        match command {
            Command::Subscribe {
                filters,
                priority,
                events,
                reply,
            } => {
                let result = parts.machine.subscribe(now, filters, priority);
                if let Ok(id) = result {
                    debug!(sub = %id, "subscribed");
                    parts.delivery.add_sub(id, events);
                }
                let _ = reply.send(result);
            }
            Command::Unsubscribe { id, reply } => {
                let result = parts.machine.unsubscribe(now, id);
                parts.delivery.remove_sub(id);
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            Command::Publish { event, reply } => match parts.machine.publish(now, &event) {
                Ok(id) => {
                    debug!(%id, "publishing");
                    parts.delivery.add_publish(id, reply);
                }
                Err(e) => {
                    let _ = reply.send(Err(Rejected::Local(e)));
                }
            },
            Command::Authenticate {
                challenge,
                event,
                reply,
            } => {
                let _ = reply.send(parts.machine.authenticate(now, challenge, &event));
            }
            Command::Disconnect { reply } => {
                info!("disconnect requested");
                parts.machine.disconnect(now);
                let _ = reply.send(());
            }
            Command::Connect { reply } => {
                parts.machine.connect(now);
                let _ = reply.send(());
            }
            Command::Checkpoint { reply } => {
                let _ = reply.send(Box::new(parts.machine.checkpoint()));
            }
            Command::Lifecycle { signal, reply } => {
                info!(signal = signal.as_str(), "lifecycle");
                parts.machine.handle_lifecycle(now, signal);
                let _ = reply.send(());
            }
        }
    }

    fn route(&mut self, parts: &mut Parts<Self>, now: Instant, event: Event) {
        trace_event(now, &event);
        let Some(heard) = heard(now, event) else {
            return;
        };
        parts.delivery.route(match heard {
            Heard::Sub(sub, item) => Route::Sub(sub, item),
            Heard::Session(event) => Route::Notice(event),
            Heard::Publish(id, outcome) => Route::Publish(id, outcome),
        });
    }

    fn notice(_: Solo, _: Option<Arc<str>>, event: SessionEvent) -> SessionEvent {
        event
    }

    fn abandon(&mut self, session: &mut RelaySession, now: Instant, sub: SubscriptionId) {
        let _ = session.unsubscribe(now, sub);
    }

    fn shut_down(&mut self, session: &mut RelaySession, now: Instant) {
        session.disconnect(now);
    }
}

fn trace_event(now: Instant, event: &Event) {
    match event {
        Event::Connected => info!("connected"),
        Event::Disconnected { reconnect_at, why } => info!(
            reconnect_in = ?reconnect_at.map(|at| at.saturating_duration_since(now)),
            ?why,
            "disconnected"
        ),
        Event::Retrying { sub, at, attempt } => info!(
            %sub, attempt, after = ?at.saturating_duration_since(now),
            "subscription refused; retrying"
        ),
        Event::Closed {
            sub,
            reason,
            attempts,
        } => warn!(%sub, %reason, attempts, "subscription closed"),
        Event::RateLimited { until } => info!(
            window = ?until.saturating_duration_since(now),
            "rate limited: gate window open"
        ),
        Event::SubscriptionLimit { max } => info!(max, "subscription limit"),
        Event::Queued { sub } => debug!(%sub, "subscription queued for a slot"),
        Event::EoseTimeout { sub } => warn!(%sub, "no answer to REQ; retrying"),
        Event::Notice { message } => info!(%message, "notice"),
        Event::AuthChallenge { .. } => info!("auth challenge"),
        Event::Authenticated => info!("authenticated"),
        Event::AuthFailed { reason } => warn!(%reason, "auth refused"),
        Event::Rejected { id, reason } => warn!(%id, ?reason, "publish rejected"),
        Event::Published { id } => debug!(%id, "published"),
        Event::PeerError { error } => warn!(?error, "malformed frame dropped"),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use tether_core::link::SocketLoss;

    use crate::runtime::WsError;
    use crate::wire::socket_loss;

    #[test]
    fn socket_errors_say_why_the_socket_was_lost() {
        let io_error = |kind, text: &str| WsError::Io(io::Error::new(kind, text.to_owned()));
        let cases = [
            (
                io_error(io::ErrorKind::ConnectionRefused, "refused"),
                SocketLoss::ConnectionRefused,
            ),
            // How tokio-rustls and futures-rustls report a self-signed certificate.
            (
                io_error(
                    io::ErrorKind::InvalidData,
                    "invalid peer certificate: UnknownIssuer",
                ),
                SocketLoss::TlsRejected,
            ),
            (
                io_error(io::ErrorKind::InvalidData, "corrupt message"),
                SocketLoss::NetworkError,
            ),
            (
                io_error(io::ErrorKind::ConnectionReset, "reset"),
                SocketLoss::NetworkError,
            ),
            (
                WsError::Capacity(tungstenite::error::CapacityError::MessageTooLong {
                    size: 10,
                    max_size: 5,
                }),
                SocketLoss::FrameTooLarge,
            ),
            (
                WsError::ConnectionClosed,
                SocketLoss::ClosedByPeer { code: None },
            ),
        ];
        for (error, loss) in cases {
            assert_eq!(socket_loss(&error), loss, "{error}");
        }
    }
}
