//! [`pool`]: many relays as one subscription, driven by one tokio task.

use std::sync::Arc;

use tether_core::pool::{PoolCheckpoint, PoolConfig, RelayId};
use tether_driver::{
    check_ws_url, pool_driver, pool_driver_restored, Config, ConnectError, PoolDriver, PoolHandle,
    PoolSubscription,
};

use tether_driver::tls::SocketTls;

use crate::runtime::TokioRuntime;
use crate::ws::TokioWs;

/// Start an empty relay pool on a spawned tokio task; add relays with
/// [`PoolHandle::add_relay`] and subscribe across all of them with
/// [`PoolHandle::subscribe`]: each event once, then one
/// [`PoolItem::Complete`](tether_driver::PoolItem::Complete) saying whether every relay
/// answered. `config` sets the channels, seed and signer; `pool_config` the pool's rules.
///
/// # Panics
/// Outside a tokio runtime (the driver is spawned with `tokio::spawn`).
#[must_use = "the pool's driver stops once every handle is dropped"]
pub fn pool(pool_config: PoolConfig, config: Config) -> PoolHandle {
    let ws = TokioWs::new(SocketTls::or_failing(&config.roots));
    let (handle, driver) = pool_driver(pool_config, config, TokioRuntime::new(), ws);
    spawn(driver);
    handle
}

/// [`pool`] for a pool restored from `checkpoint` (taken with [`PoolHandle::checkpoint`] in
/// an earlier process), its relays connecting at once: `urls` gives each relay's URL by id,
/// and every logical subscription comes back as a [`PoolSubscription`] (see
/// [`RelayPool::restore`](tether_core::pool::RelayPool::restore) for what goes on).
///
/// # Errors
/// [`ConnectError::InvalidUrl`] for a URL that breaks the URL rule;
/// [`ConnectError::Tls`] when `config.roots` cannot be used;
/// [`ConnectError::Checkpoint`] when the checkpoint does not restore.
///
/// # Panics
/// Outside a tokio runtime.
pub fn pool_restored(
    pool_config: PoolConfig,
    config: Config,
    checkpoint: &PoolCheckpoint,
    urls: &[(RelayId, String)],
) -> Result<(PoolHandle, Vec<PoolSubscription>), ConnectError> {
    for (_, url) in urls {
        check_ws_url(url)?;
    }
    let ws = TokioWs::new(SocketTls::new(&config.roots)?);
    let (handle, driver, subscriptions) = pool_driver_restored(
        pool_config,
        config,
        TokioRuntime::new(),
        ws,
        checkpoint,
        urls,
    )
    .map_err(ConnectError::Checkpoint)?;
    spawn(driver);
    Ok((handle, subscriptions))
}

/// Spawn `driver` with each relay's NIP-11 document fetched over reqwest, bounded by the
/// config's `relay_info`.
fn spawn(driver: PoolDriver<TokioRuntime>) {
    let driver = match crate::http::ReqwestHttp::default_client() {
        Ok(http) => driver.with_relay_info(Arc::new(http)),
        Err(error) => {
            tracing::warn!(%error, "no HTTP client: relay information documents are not fetched");
            driver
        }
    };
    tokio::spawn(driver);
}
