//! Starting a relay client or a pool, written once for every runtime: the URL rule, the
//! shared TLS configuration, the driver, the NIP-11 client and the spawn. A runtime crate
//! only says what it has ([`Launch`]); its `RelayClient::connect`, `restore`, `pool` and
//! `pool_restored` are one call each to the functions here.

use std::future::Future;
use std::sync::Arc;

use tether_core::nostr::RelayCheckpoint;
use tether_core::pool::{PoolCheckpoint, PoolConfig, RelayId};

use crate::runtime::{BoxFuture, HttpConnect, Runtime, WsConnect};
use crate::tls::SocketTls;
use crate::{
    check_ws_url, connect_relay, pool_driver, pool_driver_restored, relay::RelayDriver,
    relay_driver_restored, Config, ConnectError, PoolDriver, PoolHandle, PoolSubscription,
    RelayHandle, Subscription,
};

/// What a runtime crate brings to start a driver: its clock and timers, its WebSocket
/// connector, its HTTP client for NIP-11 documents, and a way to run the driver task.
pub trait Launch {
    /// The runtime's clock and timers.
    type Runtime: Runtime;

    /// A fresh [`Launch::Runtime`] for one driver.
    fn runtime(&self) -> Self::Runtime;

    /// The runtime's WebSocket connector, every wss:// socket of it configured by `tls`.
    fn ws(&self, tls: SocketTls) -> Arc<dyn WsConnect>;

    /// The client that fetches relays' information documents.
    ///
    /// # Errors
    /// Why no client could be built: the driver then runs without NIP-11 documents, and the
    /// reason is logged.
    fn http(&self) -> Result<Arc<dyn HttpConnect>, ConnectError>;

    /// Run `task` (a driver) in the background, detached.
    fn spawn(&self, task: BoxFuture<()>);
}

/// Start a relay client for `url`: its handle, the driver already running.
///
/// # Errors
/// [`ConnectError::InvalidUrl`] when `url` breaks the URL rule ([`check_ws_url`]);
/// [`ConnectError::Tls`] when `config.roots` cannot be used.
pub fn relay<L: Launch>(
    launch: &L,
    url: &str,
    config: Config,
) -> Result<RelayHandle, ConnectError> {
    let ws = launch.ws(SocketTls::new(&config.roots)?);
    let (handle, driver) = connect_relay(url, config, launch.runtime(), ws)?;
    start(launch, driver, RelayDriver::with_relay_info);
    Ok(handle)
}

/// [`relay`] for a session restored from `checkpoint`: its handle and a [`Subscription`]
/// for each subscription the checkpoint holds, in slot order.
///
/// # Errors
/// As [`relay`]; [`ConnectError::Checkpoint`] when the checkpoint does not restore.
pub fn relay_restored<L: Launch>(
    launch: &L,
    url: &str,
    config: Config,
    checkpoint: &RelayCheckpoint,
) -> Result<(RelayHandle, Vec<Subscription>), ConnectError> {
    check_ws_url(url)?;
    let ws = launch.ws(SocketTls::new(&config.roots)?);
    let (handle, driver, subscriptions) =
        relay_driver_restored(url, config, launch.runtime(), ws, checkpoint)
            .map_err(ConnectError::Checkpoint)?;
    start(launch, driver, RelayDriver::with_relay_info);
    Ok((handle, subscriptions))
}

/// Start an empty pool: its handle, the driver already running. Roots that cannot be used
/// do not fail here (a pool has no URL yet to fail): each wss:// connect fails instead, as
/// [`SocketTls::or_failing`] says.
pub fn pool<L: Launch>(launch: &L, pool_config: PoolConfig, config: Config) -> PoolHandle {
    let ws = launch.ws(SocketTls::or_failing(&config.roots));
    let (handle, driver) = pool_driver(pool_config, config, launch.runtime(), ws);
    start(launch, driver, PoolDriver::with_relay_info);
    handle
}

/// [`pool`] for a pool restored from `checkpoint`, `urls` naming each of its relays: its
/// handle and a [`PoolSubscription`] for each logical subscription, in id order.
///
/// # Errors
/// [`ConnectError::InvalidUrl`] for a URL that breaks the URL rule; [`ConnectError::Tls`]
/// when `config.roots` cannot be used; [`ConnectError::Checkpoint`] when the checkpoint
/// does not restore.
pub fn pool_restored<L: Launch>(
    launch: &L,
    pool_config: PoolConfig,
    config: Config,
    checkpoint: &PoolCheckpoint,
    urls: &[(RelayId, String)],
) -> Result<(PoolHandle, Vec<PoolSubscription>), ConnectError> {
    for (_, url) in urls {
        check_ws_url(url)?;
    }
    let ws = launch.ws(SocketTls::new(&config.roots)?);
    let (handle, driver, subscriptions) =
        pool_driver_restored(pool_config, config, launch.runtime(), ws, checkpoint, urls)
            .map_err(ConnectError::Checkpoint)?;
    start(launch, driver, PoolDriver::with_relay_info);
    Ok((handle, subscriptions))
}

/// Run `driver` with the runtime's HTTP client for NIP-11 documents, or without documents
/// (and a warning) when there is none.
fn start<L: Launch, D>(launch: &L, driver: D, with_relay_info: fn(D, Arc<dyn HttpConnect>) -> D)
where
    D: Future<Output = ()> + Send + 'static,
{
    let driver = match launch.http() {
        Ok(http) => with_relay_info(driver, http),
        Err(error) => {
            tracing::warn!(%error, "no HTTP client: relay information documents are not fetched");
            driver
        }
    };
    launch.spawn(Box::pin(driver));
}
