//! [`TokioRuntime`]: tokio's clock as the core's [`Instant`].

use std::pin::Pin;
use std::time::Duration;

use tether_core::Instant;
use tether_driver::Runtime;

/// tokio's monotonic clock seen from an origin taken when the runtime value was created.
///
/// Because it reads `tokio::time::Instant`, a test with paused time
/// (`#[tokio::test(start_paused = true)]`) drives the core deterministically.
#[derive(Clone, Copy, Debug)]
pub struct TokioRuntime {
    origin: tokio::time::Instant,
}

/// How far a "never" deadline is put: tokio cannot sleep until `Instant::MAX`.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

impl TokioRuntime {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        TokioRuntime {
            origin: tokio::time::Instant::now(),
        }
    }

    fn deadline(&self, at: Instant) -> tokio::time::Instant {
        self.origin + at.since_origin().min(FAR_FUTURE)
    }
}

impl Default for TokioRuntime {
    fn default() -> Self {
        TokioRuntime::new()
    }
}

impl Runtime for TokioRuntime {
    type Sleep = Pin<Box<tokio::time::Sleep>>;

    fn now(&self) -> Instant {
        Instant::from_origin(tokio::time::Instant::now().saturating_duration_since(self.origin))
    }

    fn sleep_until(&self, deadline: Instant) -> Self::Sleep {
        Box::pin(tokio::time::sleep_until(self.deadline(deadline)))
    }

    fn reset(&self, sleep: &mut Self::Sleep, deadline: Instant) {
        let at = self.deadline(deadline);
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
    }
}
