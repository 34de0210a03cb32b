//! [`pool`]: many relays as one subscription, driven by one tokio task.

use tether_core::pool::{PoolCheckpoint, PoolConfig, RelayId};
use tether_driver::launch;
use tether_driver::{Config, ConnectError, PoolHandle, PoolSubscription};

use crate::launch::Tokio;

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
    launch::pool(&Tokio, pool_config, config)
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
    launch::pool_restored(&Tokio, pool_config, config, checkpoint, urls)
}
