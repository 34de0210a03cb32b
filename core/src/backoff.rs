//! `Backoff`: how long to wait before the next attempt, with a cap, jitter and a stable reset.
//!
//! All arithmetic happens in `f64` seconds and is clamped before it becomes a [`Duration`], so
//! attempt 10 000, a factor of 1e300 or a cap of `Duration::MAX` cannot overflow or panic
//! (Polly #2163 overflowed its exponent; backon #240 panicked converting an infinite float).

use std::time::Duration;

use crate::rng::Rng;
use crate::time::Instant;

/// How a delay is randomised around (or below) its exponential ceiling.
///
/// `c` below is the ceiling for attempt `n`: `min(cap, base * factor^(n-1))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Jitter {
    /// Exactly `c`. Only for tests: a fleet with no jitter reconnects in lockstep.
    None,
    /// Uniform in `[c * (1 - x), c * (1 + x)]`, `x` clamped to `[0, 1]`; the maximum is
    /// `cap * (1 + x)`. The SSE analysis's +-20% is `Proportional(0.2)`.
    Proportional(f64),
    /// Uniform in `[0, c)`: AWS "full jitter", the spread Hive uses for refused subscriptions.
    Full,
    /// Uniform in `[c / 2, c)`: AWS "equal jitter", never shorter than half the ceiling.
    Equal,
    /// Uniform in `[base, 3 * previous]`, capped: AWS "decorrelated jitter"; grows from the
    /// previous delay rather than from the attempt number.
    Decorrelated,
}

/// The shape of a backoff: base, growth, cap, optional attempt limit and jitter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffPolicy {
    /// Ceiling of the first attempt.
    pub base: Duration,
    /// Growth per attempt; values below 1 (or NaN) are treated as 1.
    pub factor: f64,
    /// Largest ceiling; with `Proportional` jitter the delay may exceed it by the fraction.
    pub cap: Duration,
    /// After this many delays, [`Backoff::next_delay`] returns `None`. `None` = unbounded.
    pub max_attempts: Option<u32>,
    /// How the delay is randomised.
    pub jitter: Jitter,
}

impl BackoffPolicy {
    /// Socket reconnects: 1 s, x2, capped at 30 s, +-50%, unbounded attempts.
    ///
    /// +-50% rather than the SSE analysis's +-20%: when a server comes back to a fleet that
    /// has reached the cap, +-20% bunches every retry into a 12 s window and the first
    /// seconds after the return peak at 2.5x the uniform-spread ideal; +-50% spreads them over
    /// 30 s (1.2x) and takes fewer attempts in all (the `storm` simulation in tether-testkit;
    /// `docs/storm.md`). The price: a single client at the cap may wait 45 s.
    pub const fn reconnect() -> Self {
        BackoffPolicy {
            base: Duration::from_secs(1),
            factor: 2.0,
            cap: Duration::from_secs(30),
            max_attempts: None,
            jitter: Jitter::Proportional(0.5),
        }
    }

    /// Re-REQs of a refused subscription: 1 s, x2, capped at 30 s, full jitter, at most 5.
    pub const fn closed_retry() -> Self {
        BackoffPolicy {
            base: Duration::from_secs(1),
            factor: 2.0,
            cap: Duration::from_secs(30),
            max_attempts: Some(5),
            jitter: Jitter::Full,
        }
    }

    /// The un-jittered ceiling of attempt `n` (1-based): `min(cap, base * factor^(n-1))`.
    pub fn ceiling(&self, n: u32) -> Duration {
        secs_to_duration(self.ceiling_secs(n)).min(self.cap)
    }

    /// The largest delay this policy can ever return.
    pub fn max_delay(&self) -> Duration {
        match self.jitter {
            Jitter::Proportional(x) => {
                let extra = secs_to_duration(self.cap.as_secs_f64() * clamp_fraction(x));
                self.cap.saturating_add(extra)
            }
            _ => self.cap,
        }
    }

    /// The smallest delay attempt `n` can return (before any caller-side minimum).
    pub fn min_delay(&self, n: u32) -> Duration {
        match self.jitter {
            Jitter::None => self.ceiling(n),
            Jitter::Proportional(x) => {
                secs_to_duration(self.ceiling_secs(n) * (1.0 - clamp_fraction(x)))
            }
            Jitter::Full => Duration::ZERO,
            Jitter::Equal => secs_to_duration(self.ceiling_secs(n) / 2.0),
            Jitter::Decorrelated => self.base.min(self.cap),
        }
    }

    fn ceiling_secs(&self, n: u32) -> f64 {
        let cap = self.cap.as_secs_f64();
        let factor = if self.factor >= 1.0 { self.factor } else { 1.0 };
        // Past ~1100 doublings f64 is already infinite; bounding the exponent keeps powi
        // cheap and well-defined for any attempt count.
        let exp = n.saturating_sub(1).min(4096) as i32;
        let raw = self.base.as_secs_f64() * factor.powi(exp);
        if raw.is_finite() && raw < cap {
            raw
        } else {
            cap
        }
    }
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self::reconnect()
    }
}

/// An attempt counter walking a [`BackoffPolicy`].
#[derive(Clone, Debug, PartialEq)]
pub struct Backoff {
    policy: BackoffPolicy,
    attempts: u32,
    /// The previous delay, which `Decorrelated` grows from.
    prev: Duration,
    /// The base is a floor the peer set (SSE's `retry:`): no delay is shorter than the
    /// attempt's ceiling, and the jitter only adds, by up to [`ABOVE_FLOOR`] of it.
    floor: bool,
}

/// How much a delay may exceed its ceiling when the base is a floor: enough to keep a fleet
/// from reconnecting in lockstep, little enough to honour the peer's figure (WHATWG allows
/// waiting longer; MCP's conformance suite allows 200 ms over a 500 ms `retry`).
pub const ABOVE_FLOOR: f64 = 0.2;

impl Backoff {
    /// A fresh counter for `policy`.
    #[must_use]
    pub fn new(policy: BackoffPolicy) -> Self {
        Backoff {
            policy,
            attempts: 0,
            prev: policy.base,
            floor: false,
        }
    }

    /// A counter for `policy` that has already handed out `attempts` delays; lets a caller
    /// keep just the count (a few bytes per subscription) instead of a whole `Backoff`.
    pub(crate) fn with_attempts(policy: BackoffPolicy, attempts: u32) -> Self {
        Backoff {
            policy,
            attempts,
            prev: policy.ceiling(attempts.max(1)),
            floor: false,
        }
    }

    /// [`BackoffPolicy::reconnect`].
    pub fn reconnect() -> Self {
        Self::new(BackoffPolicy::reconnect())
    }

    /// [`BackoffPolicy::closed_retry`].
    pub fn closed_retry() -> Self {
        Self::new(BackoffPolicy::closed_retry())
    }

    /// The policy being walked.
    pub fn policy(&self) -> &BackoffPolicy {
        &self.policy
    }

    /// Delays handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether `max_attempts` delays have been handed out.
    pub(crate) fn is_exhausted(&self) -> bool {
        matches!(self.policy.max_attempts, Some(max) if self.attempts >= max)
    }

    /// The delay before the next attempt, or `None` once `max_attempts` are spent.
    pub fn next_delay(&mut self, rng: &mut Rng) -> Option<Duration> {
        if self.is_exhausted() {
            return None;
        }
        self.attempts = self.attempts.saturating_add(1);
        let delay = self.jittered(self.attempts, rng);
        self.prev = delay;
        Some(delay)
    }

    /// Start again from the first attempt.
    pub fn reset(&mut self) {
        self.attempts = 0;
        self.prev = self.policy.base;
    }

    /// Reset only if the connection opened at `opened_at` has stayed up for `stable_after`.
    ///
    /// Resetting on every open turns a relay that accepts and immediately drops into a
    /// base-delay reconnect loop; waiting for stability keeps the delays growing.
    /// Returns whether it reset.
    pub(crate) fn reset_if_stable(
        &mut self,
        now: Instant,
        opened_at: Instant,
        stable_after: Duration,
    ) -> bool {
        if now.saturating_duration_since(opened_at) < stable_after {
            return false;
        }
        self.reset();
        true
    }

    /// Replace the base delay with one the peer set (SSE's `retry:`), keeping the attempt
    /// count: from now on no delay is shorter than its attempt's ceiling (`base`, then
    /// growing), and the jitter only adds, by up to [`ABOVE_FLOOR`] of it.
    pub fn set_floor(&mut self, base: Duration) {
        self.policy.base = base;
        self.floor = true;
    }

    fn jittered(&self, n: u32, rng: &mut Rng) -> Duration {
        let p = &self.policy;
        let c = p.ceiling_secs(n);
        if self.floor {
            // Never below the ceiling; `max_delay` is at least the cap, which bounds `c`.
            let secs = c * (1.0 + ABOVE_FLOOR * rng.unit());
            return secs_to_duration(secs).min(p.max_delay().max(p.ceiling(n)));
        }
        let secs = match p.jitter {
            Jitter::None => c,
            Jitter::Proportional(x) => {
                let x = clamp_fraction(x);
                c * rng.range_f64(1.0 - x, 1.0 + x)
            }
            Jitter::Full => c * rng.unit(),
            Jitter::Equal => c / 2.0 + (c / 2.0) * rng.unit(),
            Jitter::Decorrelated => {
                let cap = p.cap.as_secs_f64();
                let lo = p.base.as_secs_f64().min(cap);
                let hi = (self.prev.as_secs_f64() * 3.0).min(cap).max(lo);
                rng.range_f64(lo, hi)
            }
        };
        // Rounding f64 back to nanoseconds can land one tick past the bound; clamp so the
        // documented maximum is a hard one.
        secs_to_duration(secs).min(p.max_delay())
    }
}

fn clamp_fraction(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// Seconds to a `Duration`, saturating instead of panicking on negative, NaN or huge values.
pub(crate) fn secs_to_duration(secs: f64) -> Duration {
    // NaN fails every comparison, so test for the one good case.
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_floor_is_never_undercut_and_the_jitter_only_adds() {
        let mut rng = Rng::new(5);
        let mut b = Backoff::reconnect();
        b.set_floor(Duration::from_millis(500));
        let mut first = Vec::new();
        for _ in 0..200 {
            b.reset();
            first.push(b.next_delay(&mut rng).unwrap_or_default());
        }
        let (lo, hi) = (first.iter().min(), first.iter().max());
        assert!(lo >= Some(&Duration::from_millis(500)), "{lo:?}");
        assert!(hi < Some(&Duration::from_millis(600)), "{hi:?}");
        assert!(lo < hi, "still decorrelated: {lo:?}..{hi:?}");
        // Later attempts grow from the floor and stay at or above their ceiling.
        let second = b.next_delay(&mut rng).unwrap_or_default();
        assert!(second >= Duration::from_millis(1_000), "{second:?}");
    }

    use super::*;

    fn delays(policy: BackoffPolicy, n: usize, seed: u64) -> Vec<Duration> {
        let mut b = Backoff::new(policy);
        let mut rng = Rng::new(seed);
        (0..n).filter_map(|_| b.next_delay(&mut rng)).collect()
    }

    #[test]
    fn reconnect_defaults_grow_then_cap_with_fifty_percent_jitter() {
        let d = delays(BackoffPolicy::reconnect(), 8, 1);
        let ceilings = [1, 2, 4, 8, 16, 30, 30, 30];
        for (got, c) in d.iter().zip(ceilings) {
            let c = Duration::from_secs(c);
            assert!(
                *got >= c.mul_f64(0.5) && *got <= c.mul_f64(1.5),
                "{got:?} vs {c:?}"
            );
        }
    }

    #[test]
    fn closed_retry_stops_after_five() {
        let mut b = Backoff::closed_retry();
        let mut rng = Rng::new(3);
        for n in 1..=5u32 {
            let d = b.next_delay(&mut rng).expect("within budget");
            assert!(d < Duration::from_secs(1 << (n - 1)));
        }
        assert_eq!(b.next_delay(&mut rng), None);
        assert!(b.is_exhausted());
        assert_eq!(b.attempts(), 5);
    }

    #[test]
    fn stable_reset_waits_for_stability() {
        let mut b = Backoff::reconnect();
        let mut rng = Rng::new(1);
        b.next_delay(&mut rng);
        b.next_delay(&mut rng);
        let opened = Instant::from_millis(10_000);
        assert!(!b.reset_if_stable(
            Instant::from_millis(39_999),
            opened,
            Duration::from_secs(30)
        ));
        assert_eq!(b.attempts(), 2);
        assert!(b.reset_if_stable(
            Instant::from_millis(40_000),
            opened,
            Duration::from_secs(30)
        ));
        assert_eq!(b.attempts(), 0);
    }

    #[test]
    fn extreme_configs_do_not_panic() {
        let extremes = [
            BackoffPolicy {
                base: Duration::MAX,
                factor: f64::MAX,
                cap: Duration::MAX,
                max_attempts: None,
                jitter: Jitter::Proportional(5.0),
            },
            BackoffPolicy {
                base: Duration::ZERO,
                factor: f64::NAN,
                cap: Duration::ZERO,
                max_attempts: None,
                jitter: Jitter::Decorrelated,
            },
            BackoffPolicy {
                base: Duration::from_nanos(1),
                factor: 1e300,
                cap: Duration::MAX,
                max_attempts: None,
                jitter: Jitter::Equal,
            },
            BackoffPolicy {
                base: Duration::from_secs(5),
                factor: -3.0,
                cap: Duration::from_secs(1),
                max_attempts: Some(0),
                jitter: Jitter::Full,
            },
        ];
        for p in extremes {
            let mut b = Backoff::new(p);
            let mut rng = Rng::new(9);
            for _ in 0..10_000 {
                if let Some(d) = b.next_delay(&mut rng) {
                    assert!(d <= p.max_delay());
                }
            }
        }
    }
}
