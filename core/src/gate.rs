//! `RateLimitGate`: the window during which background work must not ask the relay again.
//!
//! One refusal slows every request behind it, instead of each subscription rediscovering the
//! relay's budget on its own. Windows extend and never shrink: a second refusal carrying a
//! shorter hint (or none) must not release every waiter early, straight back into the budget
//! that just refused them.

use std::time::Duration;

use crate::time::Instant;

/// The window opened when the relay gives no usable hint.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
/// The longest window any single refusal can open, however large the hint.
pub const MAX_WINDOW: Duration = Duration::from_secs(300);

/// Whether the gate's window outlives the connection that was refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GateScope {
    /// Reset on disconnect: the budget belonged to that connection (the default).
    #[default]
    Connection,
    /// Kept across reconnects, for relays that limit per IP or per pubkey.
    Session,
}

/// A session-owned rate-limit window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitGate {
    until: Option<Instant>,
    default_window: Duration,
    max_window: Duration,
}

impl Default for RateLimitGate {
    fn default() -> Self {
        Self::new(DEFAULT_WINDOW, MAX_WINDOW)
    }
}

impl RateLimitGate {
    /// A closed gate with the given window used without a hint, and cap on any window.
    #[must_use]
    pub fn new(default_window: Duration, max_window: Duration) -> Self {
        RateLimitGate {
            until: None,
            default_window: default_window.min(max_window),
            max_window,
        }
    }

    /// Record a refusal at `now` with the relay's optional `retry in Ns` hint.
    ///
    /// The window is the hint when it is positive, else the default, capped at the maximum.
    /// The gate then holds until `max(previous until, now + window)`. Returns that instant.
    pub fn refuse(&mut self, now: Instant, hint: Option<Duration>) -> Instant {
        let window = match hint {
            Some(h) if !h.is_zero() => h.min(self.max_window),
            _ => self.default_window,
        };
        let candidate = now.saturating_add(window);
        let until = self.until.map_or(candidate, |u| u.max(candidate));
        self.until = Some(until);
        until
    }

    /// How long background work must still wait at `now`; zero when the gate is clear.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.until
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(now))
    }

    /// Whether a window is open (background work must wait) at `now`.
    pub fn is_open(&self, now: Instant) -> bool {
        !self.remaining(now).is_zero()
    }

    /// The instant the latest window ends, if one was ever opened since the last reset.
    pub fn ready_at(&self) -> Option<Instant> {
        self.until
    }

    /// Forget any window (the refusing connection is gone).
    pub fn reset(&mut self) {
        self.until = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn no_hint_opens_ten_seconds() {
        let mut g = RateLimitGate::default();
        assert_eq!(g.refuse(t(1_000), None), t(11_000));
        assert!(g.is_open(t(10_999)));
        assert!(!g.is_open(t(11_000)));
        assert_eq!(g.remaining(t(6_000)), Duration::from_secs(5));
    }

    #[test]
    fn hint_is_honoured_and_capped() {
        let mut g = RateLimitGate::default();
        assert_eq!(g.refuse(t(0), Some(Duration::from_secs(3))), t(3_000));
        let mut g = RateLimitGate::default();
        assert_eq!(
            g.refuse(t(0), Some(Duration::from_secs(99_999_999_999))),
            t(300_000)
        );
    }

    #[test]
    fn zero_hint_counts_as_no_hint() {
        let mut g = RateLimitGate::default();
        assert_eq!(g.refuse(t(0), Some(Duration::ZERO)), t(10_000));
    }

    #[test]
    fn shorter_second_hint_does_not_shrink() {
        let mut g = RateLimitGate::default();
        g.refuse(t(0), Some(Duration::from_secs(60)));
        assert_eq!(g.refuse(t(1_000), Some(Duration::from_secs(2))), t(60_000));
        assert_eq!(g.refuse(t(2_000), None), t(60_000));
        assert_eq!(
            g.refuse(t(55_000), Some(Duration::from_secs(20))),
            t(75_000)
        );
    }

    #[test]
    fn reset_releases() {
        let mut g = RateLimitGate::default();
        g.refuse(t(0), None);
        g.reset();
        assert!(!g.is_open(t(1)));
        assert_eq!(g.ready_at(), None);
    }
}
