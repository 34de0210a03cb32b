//! tether-async-std: tether's Nostr relay sessions over real WebSockets and SSE streams over
//! real HTTP, on async-std or smol.
//!
//! The same client surface as tether-tokio ([`RelayClient`], [`Subscription`] streams,
//! [`publish`](RelayHandle::publish), [`Signer`], [`EventSource`], [`pool`]): switching
//! runtime is a change of crate name. The protocol decisions are made by [tether-core](tether_core); the
//! handles, channels and drain loop are shared with every runtime in
//! [tether-driver](tether_driver). This crate adds only what is runtime-specific, built on
//! the crates async-std and smol share: timers from async-io ([`AsyncIoRuntime`]), sockets
//! from async-net, WebSockets through async-tungstenite and HTTP through hyper 1.x (both with
//! rustls, ring and the webpki roots), and a [`Spawn`] hook for the relay driver task.
//!
//! async-std is discontinued upstream (RUSTSEC-2025-0052); prefer smol for new code. Turn
//! off the default `async-std` feature and turn on `smol` to drop the async-std dependency.
//!
//! # A relay, on async-std
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use tether_async_std::{Config, Filter, RelayClient, SubscriptionEvent};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = RelayClient::connect("wss://relay.example.com", Config::default())?;
//! let mut notes = client.subscribe(vec![Filter::new(r#"{"kinds":[1],"limit":10}"#)?]).await?;
//! while let Some(item) = notes.next().await {
//!     if let SubscriptionEvent::Event(event) = item {
//!         println!("{}", event.raw);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # A relay, on smol
//!
//! ```no_run
//! # #[cfg(feature = "smol")]
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tether_async_std::{Config, Filter, RelayClient, Smol};
//!
//! smol::block_on(async {
//!     let client = RelayClient::connect_with("wss://relay.example.com", Config::default(), &Smol)?;
//!     let sub = client.subscribe(vec![Filter::new(r#"{"kinds":[1]}"#)?]).await?;
//!     # drop(sub);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # An SSE stream (any executor: nothing is spawned)
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use tether_async_std::{sse, EventSource, EventSourceConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut stream = EventSource::connect("https://example.com/events", EventSourceConfig::default())?;
//! while let Some(event) = stream.next().await {
//!     if let sse::Event::Message(message) = event {
//!         println!("{}: {}", message.event, message.data);
//!     }
//! }
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod burst;
mod event_source;
mod http;
mod net;
mod pool;
mod relay;
mod runtime;
mod spawn;
mod ws;

pub use event_source::EventSource;
pub use http::HyperHttp;
#[cfg(any(feature = "async-std", feature = "smol"))]
pub use pool::{pool, pool_restored};
pub use pool::{pool_restored_with, pool_with};
pub use relay::RelayClient;
pub use runtime::{AsyncIoRuntime, Sleep};
#[cfg(feature = "async-std")]
pub use spawn::AsyncStd;
#[cfg(any(feature = "async-std", feature = "smol"))]
pub use spawn::DefaultSpawn;
#[cfg(feature = "smol")]
pub use spawn::Smol;
pub use spawn::Spawn;
pub use tether_core::nostr::{
    CatchUpConfig, CatchUpMethod, Filter, Priority, Rejection, SubscriptionId,
};
pub use tether_core::pool::{Outcome, PoolConfig, RelayId};
pub use tether_core::sse;
pub use tether_core::Lifecycle;
pub use tether_driver::{
    CaughtUp, ClientError, Config, ConnectError, EventSourceConfig, PoolClientError, PoolHandle,
    PoolItem, PoolSubscription, Published, Rejected, RelayEvent, RelayHandle, SessionEvent,
    SessionEvents, Signer, SignerError, Subscription, SubscriptionEvent,
};
pub use {tether_core, tether_driver};
