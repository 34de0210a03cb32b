//! tether-driver: the runtime-independent half of tether's adapters.
//!
//! tether-core decides what to do; an adapter does the I/O and keeps time. Most of an adapter
//! does not depend on the async runtime: the handle types the application holds, the bounded
//! channels between them and the driver, and the loop that feeds the core and drains it.
//! That part lives here, written against [`futures_core`]/[`futures_channel`] and three small
//! traits ([`Runtime`], [`WsConnect`], [`HttpConnect`]). A runtime adapter (tether-tokio,
//! tether-async-std) supplies timers, sockets and spawning, and nothing else.
//!
//! # What is here
//!
//! - [`RelayHandle`], [`Subscription`], [`SessionEvents`]: what the application holds for a
//!   Nostr relay connection. [`relay_driver`] builds the matching driver future, which the
//!   runtime adapter spawns.
//! - [`EventStream`]: a `Stream` of SSE events that drives an
//!   [`SseSession`](tether_core::SseSession) as it is polled (a runtime crate's
//!   `EventSource` is an `EventStream` on its runtime; [`EventStream::connect`] and
//!   [`EventStream::open`] check the URL first); [`sse_request`] has the request headers and
//!   failure kinds every HTTP client shares, [`HttpResponse::from_head`] reads a response
//!   head.
//! - [`url`]: the one URL rule every entry point applies (scheme, host, port), and
//!   [`normalize_relay_url`], one spelling per relay.
//! - [`Signer`]: how the application answers NIP-42 challenges without the driver holding keys.
//! - [`Verify`]: how a pool checks events before the application hears them, on worker
//!   threads (the `verify` feature supplies libsecp256k1's check).
//!
//! # The driver loop
//!
//! One loop, written once for the relay driver, the pool driver and [`EventStream`], over
//! one machine interface that the core's `RelaySession` and `RelayPool` implement. Per wake,
//! in a fixed order: a due timeout (checked against a fresh `now` *before* the sleep is
//! polled, because a cooperative-budget runtime may report a sleep as pending past its
//! deadline), then the drain of every transmit and event the core queued, then side tasks
//! (the delivery backlog, signer answers, NIP-11 documents, verification), then one command
//! from the handles, then the sockets that woke. Each wake does at most
//! [`Config::work_budget`] passes of work and then yields. The machine says what its next
//! deadline is for ([`tether_core::Wake`]), and the driver logs it at debug level.
//!
//! # Backpressure
//!
//! Events reach the application through bounded channels. When one is full the event waits in
//! a small backlog and the driver stops reading the socket until the application catches up,
//! so a slow reader slows the relay down through TCP instead of growing a buffer.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod burst;
mod config;
mod connect_error;
mod delivery;
mod drive;
mod event_source;
mod heard;
pub mod http_options;
mod io_error;
#[cfg(feature = "tls")]
pub mod launch;
mod lines;
mod machine;
pub mod pool;
mod ready;
pub mod relay;
pub mod relay_info;
mod relays;
mod retry_after;
mod runtime;
mod signer;
pub mod sse;
pub mod sse_request;
#[cfg(feature = "tls")]
pub mod tls;
pub mod url;
pub mod verify;
mod wire;
#[cfg(feature = "tls")]
pub mod ws_dial;

pub use config::{seed_or_random, AttemptParts, Config, EventSourceConfig, PerAttempt};
pub use connect_error::ConnectError;
pub use event_source::DefaultHttp;
pub use http_options::{HttpOptions, ProxyConfig, Roots};
pub use pool::{
    pool_driver, pool_driver_restored, PoolClientError, PoolDriver, PoolEvents, PoolHandle,
    PoolItem, PoolRelayEvent, PoolSubscription,
};
pub use relay::{
    connect_relay, relay_driver, relay_driver_restored, CaughtUp, ClientError, Published, Rejected,
    RelayEvent, RelayHandle, SessionEvent, SessionEvents, Subscription, SubscriptionEvent,
};
pub use relay_info::{fetch_info, info_url, InfoFetchError, InfoPolicy};
pub use retry_after::retry_after;
pub use runtime::{
    Addresses, BoxFuture, BoxSocket, HttpConnect, HttpError, HttpResponse, Runtime, WsConnect,
    WsError, WsSocket,
};
pub use signer::{Signer, SignerError};
pub use sse::EventStream;
pub use sse_request::{request_headers, RequestError};
pub use url::{check_http_url, check_ws_url, normalize_relay_url};
pub use verify::Verify;

/// The core and protocol types an application meets through the handles.
pub use tether_core;
