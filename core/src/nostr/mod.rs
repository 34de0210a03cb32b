//! Nostr (NIP-01) over WebSocket: the frame codec, refusal reasons, and the relay session.

pub mod config;
pub mod event;
pub mod message;
mod outbox;
pub mod reason;
mod registry;
pub mod session;
pub mod subscription;

pub use config::RelayConfig;
pub use event::{Error, Event, Rejection, Stats, Transmit};
pub use session::RelaySession;
pub use subscription::{Filter, Priority, SubState, SubscriptionId};
