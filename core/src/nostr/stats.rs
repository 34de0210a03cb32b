//! [`Stats`]: what a [`RelaySession`](super::session::RelaySession) counted rather than
//! surfaced one by one.

/// Counters: what the session sent, and what the peer did that was dropped rather than
/// surfaced one by one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// REQ frames sent (first sends, replays and retries).
    pub reqs: u64,
    /// Binary frames received (NIP-01 is text only: ignored).
    pub binary: u64,
    /// Text frames received on an open socket.
    pub frames: u64,
    /// Frames that failed to decode.
    pub malformed: u64,
    /// Socket input tagged with an epoch the session already let go.
    pub stale_socket: u64,
    /// Frames for a subscription id this session never sent, or no longer has.
    pub unknown_subscription: u64,
    /// Frames for an earlier attempt of a live subscription.
    pub stale_attempt: u64,
    /// Events dropped as re-deliveries (a catch-up's overlap, a retry, a relay that repeats).
    pub duplicates: u64,
    /// Events a catch-up dropped as older than its window (below the memory's floor, where a
    /// re-delivery cannot be told from a first one): the catch-up reports itself exact only
    /// from the floor on.
    pub below_window: u64,
    /// NIP-77 sessions opened.
    pub negentropy: u64,
    /// NIP-77 sessions that ended in the `since` fallback (refused, silent, malformed, over a
    /// bound).
    pub negentropy_failed: u64,
    /// Events dated more than `future_tolerance` past the wall clock: delivered, but kept
    /// out of catch-up (a peer oddity: a wrong clock, or an attempt to silence a
    /// subscription).
    pub future_dated: u64,
    /// OKs for events not in the outbox.
    pub unknown_ok: u64,
    /// Frames this client never asks for (e.g. COUNT).
    pub unexpected: u64,
}
