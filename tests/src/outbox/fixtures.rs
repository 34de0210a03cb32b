//! Names shared by the PoolSim tests of routing by people (`tests/tests/outbox_*.rs`): one
//! indexer, people and relays named by number and by word, and a pool configured to fetch
//! lists from that indexer.

use std::time::Duration;

use tether_core::pool::PoolConfig;
use tether_core::router::RouterConfig;

/// The one indexer of these worlds.
pub const INDEXER: &str = "wss://index.example";

/// `n` seconds.
#[must_use]
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Person `n`'s public key (hex).
#[must_use]
pub fn key(n: u64) -> String {
    format!("{:064x}", 0xa000_0000 + n)
}

/// The relay called `name`.
#[must_use]
pub fn url(name: &str) -> String {
    format!("wss://{name}.example")
}

/// A pool's configuration whose router fetches lists from [`INDEXER`] only.
#[must_use]
pub fn config() -> PoolConfig {
    let mut router = RouterConfig::default();
    router.indexers = vec![INDEXER.to_owned()];
    let mut config = PoolConfig::default();
    config.router = router;
    config
}
