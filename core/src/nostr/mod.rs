//! Nostr (NIP-01) over WebSocket: the frame codec, refusal reasons, and the relay session.

mod auth;
pub mod catch_up;
pub mod checkpoint;
pub mod config;
pub mod error;
mod inbound;
pub mod message;
mod outbox;
pub mod output;
pub mod reason;
mod refusals;
mod registry;
pub mod relay_info;
mod scheduler;
pub mod session;
pub mod stats;
pub mod subscription;

pub use catch_up::{CatchUpConfig, CatchUpMethod, Lookbacks, GIFT_WRAP};
pub use checkpoint::RelayCheckpoint;
pub use config::RelayConfig;
pub use error::Error;
pub use output::{Carries, ChallengeId, Disconnect, Event, Rejection, Transmit};
pub use relay_info::{Applied, InfoError, RelayInfo};
pub use session::RelaySession;
pub use stats::Stats;
pub use subscription::{Filter, Priority, SubState, SubscriptionId};
