//! [`pool`] and [`pool_with`]: many relays as one subscription, driven by one task of your
//! executor.

use tether_core::pool::{PoolCheckpoint, PoolConfig, RelayId};
use tether_driver::launch;
use tether_driver::{Config, ConnectError, PoolHandle, PoolSubscription};

use crate::spawn::{AsyncIo, Spawn};

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
    launch::pool(&AsyncIo(spawner), pool_config, config)
}

/// [`pool`] for a pool restored from `checkpoint`, spawned with
/// [`DefaultSpawn`](crate::DefaultSpawn): see [`pool_restored_with`].
///
/// # Errors
/// As [`pool_restored_with`].
#[cfg(any(feature = "async-std", feature = "smol"))]
pub fn pool_restored(
    pool_config: PoolConfig,
    config: Config,
    checkpoint: &PoolCheckpoint,
    urls: &[(RelayId, String)],
) -> Result<(PoolHandle, Vec<PoolSubscription>), ConnectError> {
    pool_restored_with(
        pool_config,
        config,
        checkpoint,
        urls,
        &crate::DefaultSpawn::default(),
    )
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
    launch::pool_restored(&AsyncIo(spawner), pool_config, config, checkpoint, urls)
}
