//! [`Limiter`]: how a flood of peer errors is kept from flooding the reader.

use std::time::Duration;

use crate::time::Instant;

/// Most `peer_error` (and `invalid`) lines per second: a peer that sends nothing but garbage
/// must not turn the output into a firehose; the next line admitted says how many were left
/// out.
pub const PEER_ERRORS_PER_SECOND: u32 = 10;

/// Longest `peer_error` excerpt, in characters.
pub const EXCERPT_CHARS: usize = 64;

/// At most `limit` lines per `window`; counts what it refused so the next admitted line can
/// say how many were left out.
#[derive(Clone, Debug)]
pub struct Limiter {
    limit: u32,
    window: Duration,
    started: Option<Instant>,
    admitted: u32,
    suppressed: u64,
}

impl Default for Limiter {
    /// [`PEER_ERRORS_PER_SECOND`] a second.
    fn default() -> Self {
        Limiter::new(PEER_ERRORS_PER_SECOND, Duration::from_secs(1))
    }
}

impl Limiter {
    /// At most `limit` lines per `window`.
    pub fn new(limit: u32, window: Duration) -> Self {
        Limiter {
            limit,
            window,
            started: None,
            admitted: 0,
            suppressed: 0,
        }
    }

    /// Whether a line may be written at `now`: `Some(suppressed since the last one)`, or
    /// `None` (counted) when this window is used up.
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        let fresh = self
            .started
            .is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if fresh {
            self.started = Some(now);
            self.admitted = 0;
        }
        if self.admitted >= self.limit {
            self.suppressed += 1;
            return None;
        }
        self.admitted += 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// `text` cut to [`EXCERPT_CHARS`] characters.
pub fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_n_per_window_and_reports_what_it_left_out() {
        let at = |ms: u64| Instant::from_millis(ms);
        let mut limit = Limiter::new(3, Duration::from_secs(1));
        let got: Vec<_> = [0, 10, 20, 30, 40, 999]
            .map(|ms| limit.admit(at(ms)))
            .into();
        assert_eq!(got, [Some(0), Some(0), Some(0), None, None, None]);
        // A new window: the first line carries the three left out.
        assert_eq!(limit.admit(at(1000)), Some(3));
        assert_eq!(limit.admit(at(1001)), Some(0));
    }

    #[test]
    fn excerpts_count_characters_not_bytes() {
        let long = "é".repeat(100);
        assert_eq!(excerpt(&long).chars().count(), EXCERPT_CHARS);
        assert_eq!(excerpt("short"), "short");
    }
}
