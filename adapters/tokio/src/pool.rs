//! [`pool`]: many relays as one subscription, driven by one tokio task.

use std::sync::Arc;

use tether_core::pool::PoolConfig;
use tether_driver::{pool_driver, Config, PoolHandle};

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
    let (handle, driver) = pool_driver(pool_config, config, TokioRuntime::new(), Arc::new(TokioWs));
    // Each relay's NIP-11 document over reqwest, bounded by `config.relay_info`.
    let driver = match crate::http::ReqwestHttp::default_client() {
        Ok(http) => driver.with_relay_info(Arc::new(http)),
        Err(error) => {
            tracing::warn!(%error, "no HTTP client: relay information documents are not fetched");
            driver
        }
    };
    tokio::spawn(driver);
    handle
}
