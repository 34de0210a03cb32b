//! [`pool`] and [`pool_with`]: many relays as one subscription, driven by one task of your
//! executor.

use std::sync::Arc;

use tether_core::pool::{PoolCheckpoint, PoolConfig, RelayId};
use tether_driver::{
    check_ws_url, pool_driver, pool_driver_restored, Config, ConnectError, PoolHandle,
    PoolSubscription,
};

use crate::runtime::AsyncIoRuntime;
use crate::spawn::Spawn;
use crate::ws::AsyncIoWs;
use tether_driver::tls::SocketTls;

/// Start an empty relay pool, its driver spawned with [`DefaultSpawn`](crate::DefaultSpawn)
/// (async-std's, or smol's without the `async-std` feature): the same entry as
/// `tether_tokio::pool`. Add relays with [`PoolHandle::add_relay`] and subscribe across all
/// of them with [`PoolHandle::subscribe`].
#[cfg(any(feature = "async-std", feature = "smol"))]
#[must_use = "the pool's driver stops once every handle is dropped"]
pub fn pool(pool_config: PoolConfig, config: Config) -> PoolHandle {
    pool_with(pool_config, config, &crate::DefaultSpawn::default())
}

/// Like [`pool`], spawning the driver with `spawner` (for example `Smol` with the `smol`
/// feature, or a closure handing the task to your own executor), as
/// [`RelayClient::connect_with`](crate::RelayClient::connect_with) does for one relay.
#[must_use = "the pool's driver stops once every handle is dropped"]
pub fn pool_with(pool_config: PoolConfig, config: Config, spawner: &dyn Spawn) -> PoolHandle {
    let ws = AsyncIoWs::new(SocketTls::or_failing(&config.roots));
    let (handle, driver) = pool_driver(pool_config, config, AsyncIoRuntime::new(), ws);
    // Each relay's NIP-11 document over hyper, bounded by `config.relay_info`.
    let driver = driver.with_relay_info(Arc::new(crate::http::HyperHttp::default()));
    spawner.spawn(Box::pin(driver));
    handle
}

/// [`pool_with`] for a pool restored from `checkpoint` (taken with [`PoolHandle::checkpoint`]
/// in an earlier process, under any runtime), its relays connecting at once: `urls` gives
/// each relay's URL by id, and every logical subscription comes back as a
/// [`PoolSubscription`].
///
/// # Errors
/// [`ConnectError::InvalidUrl`] for a URL that breaks the URL rule;
/// [`ConnectError::Tls`] when `config.roots` cannot be used;
/// [`ConnectError::Checkpoint`] when the checkpoint does not restore.
pub fn pool_restored_with(
    pool_config: PoolConfig,
    config: Config,
    checkpoint: &PoolCheckpoint,
    urls: &[(RelayId, String)],
    spawner: &dyn Spawn,
) -> Result<(PoolHandle, Vec<PoolSubscription>), ConnectError> {
    for (_, url) in urls {
        check_ws_url(url)?;
    }
    let ws = AsyncIoWs::new(SocketTls::new(&config.roots)?);
    let (handle, driver, subscriptions) = pool_driver_restored(
        pool_config,
        config,
        AsyncIoRuntime::new(),
        ws,
        checkpoint,
        urls,
    )
    .map_err(ConnectError::Checkpoint)?;
    let driver = driver.with_relay_info(Arc::new(crate::http::HyperHttp::default()));
    spawner.spawn(Box::pin(driver));
    Ok((handle, subscriptions))
}
