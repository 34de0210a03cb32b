//! [`RateLimit`]: how the commands keep a flood of peer errors from flooding stdout.

use std::time::{Duration, Instant};

/// Most `peer_error` lines per second: a peer that sends nothing but garbage must not turn
/// stdout into a firehose; the next line admitted says how many were left out.
pub(crate) const PEER_ERRORS_PER_SECOND: u32 = 10;

/// Longest `peer_error` excerpt, in characters.
pub(crate) const EXCERPT_CHARS: usize = 64;

/// At most `limit` lines per `window`; counts what it refused so the next admitted line can
/// say how many were left out.
#[derive(Debug)]
pub(crate) struct RateLimit {
    limit: u32,
    window: Duration,
    started: Option<Instant>,
    admitted: u32,
    suppressed: u64,
}

impl RateLimit {
    pub(crate) fn new(limit: u32, window: Duration) -> Self {
        RateLimit {
            limit,
            window,
            started: None,
            admitted: 0,
            suppressed: 0,
        }
    }

    /// Whether a line may be written at `now`: `Some(suppressed since the last one)`, or
    /// `None` (counted) when this window is used up.
    pub(crate) fn admit(&mut self, now: Instant) -> Option<u64> {
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
pub(crate) fn excerpt(text: &str) -> String {
    text.chars().take(EXCERPT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_admits_n_per_window_and_reports_what_it_left_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut limit = RateLimit::new(3, Duration::from_secs(1));
        let got: Vec<_> = [0, 10, 20, 30, 40, 999]
            .map(|ms| limit.admit(at(ms)))
            .into();
        assert_eq!(got, [Some(0), Some(0), Some(0), None, None, None]);
        // A new window: the first line carries the three left out.
        assert_eq!(limit.admit(at(1000)), Some(3));
        assert_eq!(limit.admit(at(1001)), Some(0));
    }
}
