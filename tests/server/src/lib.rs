//! tether-testserver: peers that misbehave the way real relays do, to test clients against.
//!
//! [`RelayModel`] is a sans-IO Nostr relay (stored answers newest first and capped per
//! filter, REQ budgets refused with `retry in Ns`, subscription caps as CLOSED or as a bare
//! NOTICE, NIP-42, NIP-77 negentropy or its absence, scripted refusals, silence,
//! accept-then-drop). tether-testkit's simulator drives it in virtual time; with the
//! `server` feature, `server::TestRelay` serves it over a real WebSocket on 127.0.0.1
//! with transport faults on top. With the `sse` feature, `sse::ScriptedSse` answers SSE
//! requests from a script. `tether demo` runs its hostile relay on this crate, which is
//! why it carries nothing of the simulator or the fuzz targets.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "tls")]
pub mod files;
pub mod relay_model;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "sse")]
pub mod sse;
#[cfg(feature = "tls")]
mod tls;

pub use relay_model::{
    auth_event, AnswerOrder, LimitStyle, Nip77, RelayModel, ReqBudget, StoredEvent,
};
