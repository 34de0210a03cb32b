//! [`AsyncIoRuntime`]: async-io's timers as the core's clock, for async-std and smol alike.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_io::Timer;
use tether_core::Instant;
use tether_driver::Runtime;

/// The monotonic clock seen from an origin taken when the value was created, with sleeps
/// from async-io's reactor.
///
/// async-std and smol both run their timers on async-io, so one runtime value serves both.
#[derive(Clone, Copy, Debug)]
pub struct AsyncIoRuntime {
    origin: std::time::Instant,
}

/// How far a "never" deadline is put: a deadline must be representable as a
/// `std::time::Instant`, and `Instant::MAX` is not.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

impl AsyncIoRuntime {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        AsyncIoRuntime {
            origin: std::time::Instant::now(),
        }
    }

    fn deadline(&self, at: Instant) -> std::time::Instant {
        self.origin + at.since_origin().min(FAR_FUTURE)
    }
}

impl Default for AsyncIoRuntime {
    fn default() -> Self {
        AsyncIoRuntime::new()
    }
}

impl Runtime for AsyncIoRuntime {
    type Sleep = Sleep;

    fn now(&self) -> Instant {
        Instant::from_origin(std::time::Instant::now().saturating_duration_since(self.origin))
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        let at = self.deadline(deadline);
        Sleep {
            timer: Timer::at(at),
            at,
        }
    }

    fn reset(&self, sleep: &mut Sleep, deadline: Instant) {
        let at = self.deadline(deadline);
        // Re-arming registers with the reactor again: only do it when the deadline moved.
        if sleep.at != at {
            sleep.timer.set_at(at);
            sleep.at = at;
        }
    }
}

/// A sleep on async-io's reactor that can be moved to a new deadline.
#[derive(Debug)]
pub struct Sleep {
    timer: Timer,
    at: std::time::Instant,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The clock decides, not the timer's fired state: a timer that already fired for
        // this same deadline does not fire twice.
        if std::time::Instant::now() >= self.at {
            return Poll::Ready(());
        }
        Pin::new(&mut self.timer).poll(cx).map(|_| ())
    }
}
