//! tether-testkit: the one deterministic simulator every tether test drives.
//!
//! A simulator pairs a sans-IO session from tether-core with a sans-IO model of its peer and
//! always advances to the earliest deadline of either side, so a scenario of minutes runs in
//! microseconds and gives the same transcript for the same seed.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod fuzz;
pub mod invariants;
mod net;
pub mod outbox;
#[cfg(feature = "server")]
pub mod peers;
pub mod pool_sim;
#[cfg(feature = "server")]
pub mod proxy;
#[cfg(feature = "server")]
pub mod signer;
pub mod sim;
pub mod sse_invariants;
pub mod sse_sim;
pub mod storm;
#[cfg(feature = "server")]
pub mod trials;
#[cfg(feature = "server")]
pub mod wait;

// The relay model and its server live in tether-testserver, which the `tether` binary can
// depend on without the simulator or the core's `fuzzing` feature; these paths keep working.
pub use sim::{Action, Sim, UNIX_START};
#[cfg(feature = "server")]
pub use tether_testserver::server;
pub use tether_testserver::{
    relay_model, AnswerOrder, LimitStyle, Nip77, RelayModel, ReqBudget, StoredEvent,
};
