//! [`pool_with`]: many relays as one subscription, driven by one task of your executor.

use std::sync::Arc;

use tether_core::pool::PoolConfig;
use tether_driver::{pool_driver, Config, PoolHandle};

use crate::runtime::AsyncIoRuntime;
use crate::spawn::Spawn;
use crate::ws::AsyncIoWs;

/// Start an empty relay pool, its driver spawned with `spawner` (async-std's, smol's or your
/// own); the handle works as on tokio (see `tether_tokio::pool`).
pub fn pool_with(pool_config: PoolConfig, config: Config, spawner: &dyn Spawn) -> PoolHandle {
    let (handle, driver) = pool_driver(
        pool_config,
        config,
        AsyncIoRuntime::new(),
        Arc::new(AsyncIoWs),
    );
    // Each relay's NIP-11 document over hyper, bounded by `config.relay_info`.
    let driver = driver.with_relay_info(Arc::new(crate::http::HyperHttp));
    spawner.spawn(Box::pin(driver));
    handle
}
