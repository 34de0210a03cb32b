//! Nostr (NIP-01) over WebSocket: the frame codec and refusal reasons.

pub mod message;
pub mod reason;
