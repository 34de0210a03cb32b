//! tether-tokio: tether's Nostr relay sessions over real WebSockets and SSE streams over real
//! HTTP, on tokio.
//!
//! The protocol decisions (when to retry, how long to wait, what to replay) are made by
//! [tether-core](tether_core); the handles, channels and drain loop are shared with every
//! runtime in [tether-driver](tether_driver). This crate adds what is tokio's: the clock and
//! sleeps ([`TokioRuntime`]), WebSockets through tokio-tungstenite with rustls and the webpki
//! roots, HTTP through reqwest with rustls, and `tokio::spawn`.
//!
//! # A relay
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use tether_tokio::{Config, Filter, RelayClient, SubscriptionEvent};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = RelayClient::connect("wss://relay.example.com", Config::default())?;
//! let mut notes = client.subscribe(vec![Filter::new(r#"{"kinds":[1],"limit":10}"#)?]).await?;
//! while let Some(item) = notes.next().await {
//!     match item {
//!         SubscriptionEvent::Event(event) => println!("{}", event.raw),
//!         SubscriptionEvent::Closed { reason, .. } => eprintln!("closed: {reason}"),
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! A runnable version against a local relay is in the [`RelayClient`] docs.
//!
//! # An SSE stream
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use tether_tokio::{sse, EventSource, EventSourceConfig};
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
mod launch;
mod pool;
mod relay;
mod runtime;
mod ws;

pub use event_source::EventSource;
pub use http::ReqwestHttp;
pub use pool::{pool, pool_restored};
pub use relay::{fetch_relay_info, RelayClient};
pub use runtime::TokioRuntime;
pub use tether_core::nostr::{
    CatchUpConfig, CatchUpMethod, Filter, Priority, Rejection, SubscriptionId,
};
pub use tether_core::pool::{Outcome, PoolConfig, RelayId};
pub use tether_core::sse;
pub use tether_core::Lifecycle;
pub use tether_driver::{
    AttemptParts, CaughtUp, ClientError, Config, ConnectError, EventSourceConfig, HttpOptions,
    PerAttempt, PoolClientError, PoolHandle, PoolItem, PoolSubscription, ProxyConfig, Published,
    Rejected, RelayEvent, RelayHandle, Roots, SessionEvent, SessionEvents, Signer, SignerError,
    Subscription, SubscriptionEvent,
};
pub use {tether_core, tether_driver};

/// The README's examples are compiled as doctests so they stay true; they live here because
/// this crate sees both the core and the tokio client. So are those of the pages in `docs/`
/// that use the tokio client (the core's own page, `docs/core.md`, is tether-core's doctest).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// `docs/pool.md`'s examples (the verification one needs this crate's dev-dependency on
/// tether-driver's `verify`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/pool.md")]
struct PoolDoctests;

/// `docs/sse.md`'s examples.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/sse.md")]
struct SseDoctests;

/// `docs/restarts.md`'s examples.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/restarts.md")]
struct RestartsDoctests;
