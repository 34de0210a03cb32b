//! A relay's health as routing sees it: whether it is worth a connection now, and how much
//! its failures weigh against it.
//!
//! A relay that failed waits out a doubling backoff (2 s, 4 s, 8 s, ... up to 10 min) and is
//! never tried more than `max_attempts` times within `retry_window`. While it waits it is no
//! candidate at all, and once it may be tried again it is chosen only when no healthy
//! candidate has anything to add: a dead relay never keeps a live one from the budget.

use std::collections::VecDeque;
use std::time::Duration;

use crate::time::Instant;

/// The longest a failing relay waits between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// The first wait after a failure.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);

/// How a relay refused to serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Asked for NIP-42 AUTH and there is no signer to answer (an answered challenge is no
    /// refusal).
    AuthRequired,
    /// Rate-limited: not to be asked again before this long.
    RateLimited(Duration),
    /// Blocked, restricted or paid: it will not serve this client.
    Blocked,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Health {
    /// Failures since it last answered; kept across restarts.
    pub(crate) failures: u32,
    /// Failed attempts within the retry window, oldest first (at most `max_attempts`).
    recent: VecDeque<Instant>,
    /// Not to be tried before this.
    retry_at: Option<Instant>,
    pub(crate) connected: bool,
    /// Its current socket carried an answer (an EOSE, a refusal): the relay behind the
    /// address is alive, not only its TCP port.
    answered: bool,
    /// A liveness hint said it is down. A hint, never a verdict: it only weighs.
    pub(crate) hinted_dead: bool,
}

impl Health {
    pub(crate) fn restored(failures: u32, hinted_dead: bool) -> Self {
        Health {
            failures,
            hinted_dead,
            ..Health::default()
        }
    }

    /// Its socket opened. Failures stand until it answers: a relay that accepts the
    /// WebSocket and closes it at once is as dead as one that refuses the TCP connection.
    pub(crate) fn opened(&mut self) {
        self.connected = true;
        self.answered = false;
    }

    /// It answered on its socket: what clears its failures.
    pub(crate) fn answered(&mut self) {
        self.failures = 0;
        self.recent.clear();
        self.retry_at = None;
        self.answered = true;
        self.hinted_dead = false;
    }

    /// Its socket closed at `now`; returns whether that counts as a failure (it closed
    /// before the relay's first answer).
    pub(crate) fn closed(&mut self, now: Instant, max_attempts: usize, window: Duration) -> bool {
        let silent = self.connected && !self.answered;
        self.connected = false;
        self.answered = false;
        if silent {
            self.failed(now, max_attempts, window);
        }
        silent
    }

    /// A connection attempt failed at `now`.
    pub(crate) fn failed(&mut self, now: Instant, max_attempts: usize, window: Duration) {
        self.connected = false;
        self.answered = false;
        self.failures = self.failures.saturating_add(1);
        while self
            .recent
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= window)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        while self.recent.len() > max_attempts.max(1) {
            self.recent.pop_front();
        }
        let shift = self.failures.saturating_sub(1).min(16);
        let backoff = FIRST_BACKOFF.saturating_mul(1 << shift).min(MAX_BACKOFF);
        let mut at = now.saturating_add(backoff);
        if self.recent.len() >= max_attempts.max(1) {
            if let Some(&oldest) = self.recent.front() {
                at = at.max(oldest.saturating_add(window));
            }
        }
        self.retry_at = Some(at);
    }

    pub(crate) fn refused(
        &mut self,
        now: Instant,
        why: Refusal,
        max_attempts: usize,
        window: Duration,
    ) {
        match why {
            Refusal::RateLimited(wait) => {
                let at = now.saturating_add(wait);
                self.retry_at = Some(self.retry_at.map_or(at, |t| t.max(at)));
            }
            Refusal::AuthRequired | Refusal::Blocked => self.failed(now, max_attempts, window),
        }
    }

    /// Whether its current socket carried an answer.
    pub(crate) fn has_answered(&self) -> bool {
        self.connected && self.answered
    }

    /// Whether it may be asked at `now`.
    pub(crate) fn usable(&self, now: Instant) -> bool {
        self.connected || self.retry_at.is_none_or(|t| now >= t)
    }

    /// When it may be asked again, while it waits.
    pub(crate) fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|_| !self.connected)
    }

    /// Whether it has failed since it last answered and holds no socket now: chosen only
    /// when nothing healthy helps.
    pub(crate) fn failing(&self) -> bool {
        self.failures > 0 && !self.connected
    }

    /// How much its estimate counts: halved per failure, and cut by a liveness hint.
    pub(crate) fn factor(&self) -> f64 {
        let failures = i32::try_from(self.failures.min(8)).unwrap_or(8);
        let hint = if self.hinted_dead { 0.3 } else { 1.0 };
        0.5f64.powi(failures) * hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Instant {
        Instant::from_millis(secs * 1000)
    }

    #[test]
    fn a_dead_relay_is_tried_at_most_three_times_in_25_s() {
        let window = Duration::from_secs(25);
        let mut h = Health::default();
        let mut tries = vec![0u64];
        h.failed(at(0), 3, window);
        let mut now = 0;
        while now < 120 {
            now += 1;
            if h.usable(at(now)) {
                tries.push(now);
                h.failed(at(now), 3, window);
            }
        }
        assert_eq!(tries, [0, 2, 6, 25, 41, 73]);
        for w in tries.windows(4) {
            assert!(w[3] - w[0] >= 25, "{w:?}");
        }
    }

    #[test]
    fn an_answer_forgets_the_failures_an_open_socket_does_not() {
        let window = Duration::from_secs(25);
        let mut h = Health::default();
        h.failed(at(0), 3, window);
        assert!(!h.usable(at(1)) && h.failing());
        assert!((h.factor() - 0.5).abs() < 1e-12);
        h.opened();
        assert_eq!(h.failures, 1, "an open socket proves nothing yet");
        assert!(h.usable(at(1)) && !h.failing());
        h.answered();
        assert_eq!(h.failures, 0);
        assert!((h.factor() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_socket_closed_before_the_first_answer_is_a_failure() {
        let window = Duration::from_secs(25);
        let mut h = Health::default();
        h.opened();
        assert!(h.closed(at(0), 3, window), "accept-then-close");
        assert_eq!(
            (h.failures, h.usable(at(1)), h.usable(at(2))),
            (1, false, true)
        );
        h.opened();
        h.answered();
        assert!(
            !h.closed(at(5), 3, window),
            "a relay that answered and then went away"
        );
        assert_eq!(h.failures, 0);
    }

    #[test]
    fn a_rate_limit_waits_without_counting_as_death() {
        let mut h = Health::default();
        h.refused(
            at(0),
            Refusal::RateLimited(Duration::from_secs(30)),
            3,
            Duration::from_secs(25),
        );
        assert_eq!(
            (h.failures, h.usable(at(29)), h.usable(at(30))),
            (0, false, true)
        );
    }
}
