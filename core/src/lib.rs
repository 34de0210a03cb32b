//! tether-core: sans-IO state machines that keep Nostr relay subscriptions and Server-Sent
//! Events streams alive.
//!
//! The core decides *what* to do — send this REQ now, retry that one in 3.2 s, give up on
//! this one and tell the application — and never does I/O, reads a clock, draws thread
//! randomness or spawns tasks. A driver (tether-tokio, tether-async-std, a GUI loop, an FFI
//! host, the test simulator) does the I/O and keeps time.
//!
//! # Driving contract
//!
//! Every state machine has the same shape:
//!
//! - Inputs are methods taking `now: Instant` first (`connect(now)`, `handle_frame(now, text)`,
//!   `handle_timeout(now)`, ...). Time never goes backwards: an earlier `now` is treated as
//!   the last one seen.
//! - Outputs are drained: `poll_transmit()` (what to put on the wire), `poll_event()` (what the
//!   application hears) and `poll_timeout()` (when to call `handle_timeout` next).
//! - After every input, drain `poll_transmit` and `poll_event` until both are `None`, then sleep
//!   until `poll_timeout()` or the next input, and pass a *fresh* `now` to `handle_timeout`
//!   (never the deadline you slept to).
//! - Local misuse returns `Result`; anything the peer does is counted and surfaced as an event
//!   and never stops the session or panics.
//!
//! # Building blocks
//!
//! [`time::Instant`], [`rng::Rng`], [`backoff::Backoff`], [`gate::RateLimitGate`],
//! [`link::Link`], the NIP-01 codec in [`nostr::message`] and refusal reasons in
//! [`nostr::reason`], and the SSE parser and session in [`sse`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backoff;
pub mod checkpoint;
pub mod gate;
pub mod line;
pub mod link;
pub mod nostr;
pub mod pool;
pub mod rng;
pub mod router;
mod small;
mod sort;
pub mod sse;
pub mod time;
mod timers;
mod tree;
pub mod wake;

pub use backoff::{Backoff, BackoffPolicy, Jitter};
pub use checkpoint::CheckpointError;
pub use gate::{GateScope, RateLimitGate};
pub use link::{
    Epoch, Lifecycle, Link, LinkAction, LinkConfig, LinkState, Liveness, SocketError, SocketLoss,
};
pub use rng::Rng;
pub use sse::{SseConfig, SseSession};
pub use time::{Clock, Instant, WallClock};
pub use wake::Wake;

/// `docs/core.md`'s example is run as a doctest, so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../docs/core.md")]
struct CoreDoctests;
