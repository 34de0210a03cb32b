//! Monotonic time as the core sees it: a point fed in by the driver, never read from a clock.
//!
//! `std::time::Instant` is not used because it cannot be constructed from a foreign runtime's
//! clock (a GUI loop, an FFI host, a simulator) and panics on `wasm32-unknown-unknown`.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A monotonic point in time: a [`Duration`] since an origin the driver chose.
///
/// All arithmetic saturates: adding to the far future stays at the far future, and
/// subtracting past the origin stays at the origin. Nothing here can panic.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Duration);

impl Instant {
    /// The driver's origin.
    pub const ZERO: Instant = Instant(Duration::ZERO);

    /// The furthest representable point; used as "never".
    pub const MAX: Instant = Instant(Duration::MAX);

    /// The point `since_origin` after the driver's origin.
    pub const fn from_origin(since_origin: Duration) -> Self {
        Instant(since_origin)
    }

    /// The point `ms` milliseconds after the origin; handy in tests and simulators.
    pub const fn from_millis(ms: u64) -> Self {
        Instant(Duration::from_millis(ms))
    }

    /// How far this point lies from the origin.
    pub const fn since_origin(self) -> Duration {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// `self + d`, or `None` if that is not representable.
    #[cfg(test)]
    pub(crate) fn checked_add(self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d).map(Instant)
    }

    /// `self + d`, stopping at [`Instant::MAX`].
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d))
    }

    /// `self - d`, stopping at the origin.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// Saturating; see [`Instant::saturating_add`].
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    /// Saturating; see [`Instant::saturating_sub`].
    fn sub(self, rhs: Duration) -> Instant {
        self.saturating_sub(rhs)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// Saturating; see [`Instant::saturating_duration_since`].
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}ms", self.0.as_millis())
    }
}

/// Keeps time from going backwards: an earlier `now` is treated as the last one seen.
///
/// Drivers on different threads or clocks can hand the core a `now` slightly older than the
/// previous one; every state machine passes its inputs through one of these first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    last: Instant,
}

impl Clock {
    /// Record `now` and return the effective (never decreasing) time.
    pub fn observe(&mut self, now: Instant) -> Instant {
        self.last = self.last.max(now);
        self.last
    }

    /// The latest time observed.
    pub fn now(&self) -> Instant {
        self.last
    }
}

/// Wall-clock time, as an input: the Unix time the driver read at one monotonic instant,
/// carried forward on the monotonic clock. The core never reads a clock; it needs the wall
/// clock only to judge peers' timestamps (`created_at`), never to schedule anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    at: Instant,
    unix_secs: u64,
}

impl WallClock {
    /// The wall clock read `unix_secs` (seconds since 1970) at `at`.
    #[must_use]
    pub fn new(at: Instant, unix_secs: u64) -> Self {
        WallClock { at, unix_secs }
    }

    /// Unix seconds at `now` (never before the reading: time does not go backwards).
    #[must_use]
    pub fn unix_secs(&self, now: Instant) -> u64 {
        self.unix_secs
            .saturating_add(now.saturating_duration_since(self.at).as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_at_both_ends() {
        let t = Instant::from_millis(1_000);
        assert_eq!(t - Duration::from_secs(5), Instant::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(t - Instant::ZERO, Duration::from_secs(1));
        assert_eq!(Instant::MAX.checked_add(Duration::from_nanos(1)), None);
    }

    #[test]
    fn clock_never_goes_backwards() {
        let mut c = Clock::default();
        assert_eq!(
            c.observe(Instant::from_millis(10)),
            Instant::from_millis(10)
        );
        assert_eq!(c.observe(Instant::from_millis(4)), Instant::from_millis(10));
        assert_eq!(
            c.observe(Instant::from_millis(11)),
            Instant::from_millis(11)
        );
        assert_eq!(c.now(), Instant::from_millis(11));
    }
}
