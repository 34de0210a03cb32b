//! A Nostr relay connection: the handles the application holds ([`RelayHandle`],
//! [`Subscription`], [`SessionEvents`]) and the driver future that serves them
//! ([`RelayDriver`], built by [`relay_driver`]).

mod client;
mod driver;
mod handle;

pub use client::{check_ws_url, connect_relay};
#[cfg(test)]
pub(crate) use driver::RelayRoutes;
pub use driver::{relay_driver, relay_driver_restored, RelayDriver};
pub use handle::{
    CaughtUp, ClientError, Published, Rejected, RelayEvent, RelayHandle, SessionEvent,
    SessionEvents, Subscription, SubscriptionEvent,
};
