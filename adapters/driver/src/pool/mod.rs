//! Many relays as one subscription: the handles the application holds ([`PoolHandle`],
//! [`PoolSubscription`]) and the driver future that serves them ([`PoolDriver`], built by
//! [`pool_driver`]) around the core's [`RelayPool`](tether_core::pool::RelayPool).
//!
//! Each relay has its own socket, polled independently and only when its own waker says it
//! has something to do (see the driver loop), so a slow or dead relay never stalls the
//! others; every rule (dedup, outcome, retries, replay) is the core pool's.

mod driver;
mod handle;

pub use driver::{pool_driver, pool_driver_restored, PoolDriver};
pub use handle::{
    PoolClientError, PoolEvents, PoolHandle, PoolItem, PoolRelayEvent, PoolSubscription,
};
