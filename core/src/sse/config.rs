//! [`SseConfig`]: every number an [`SseSession`](super::SseSession) runs by, and which redirects
//! it follows, with the design's defaults.

use std::time::Duration;

use crate::backoff::BackoffPolicy;
use crate::link::{LinkConfig, Liveness};
use crate::sse::parser::ParserConfig;
use crate::sse::redirect::RedirectPolicy;

/// Configuration of an [`SseSession`](super::SseSession).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct SseConfig {
    /// Reconnect delays: 1 s, x2, capped at 30 s, +-50% jitter, unbounded attempts.
    pub reconnect: BackoffPolicy,
    /// The reconnect counter resets only once a stream stayed open this long (30 s), so an
    /// accept-then-drop server does not get a 1 s reconnect loop.
    pub stable_after: Duration,
    /// A request without a response head after this long counts as failed (30 s).
    pub connect_timeout: Duration,
    /// Silence (no bytes at all, heartbeats included) tolerated on an open stream before it is
    /// closed and reconnected; `None` disables the watchdog. Default 90 s = 3 x a 30 s
    /// heartbeat.
    pub idle_timeout: Option<Duration>,
    /// Smallest base delay a `retry:` field can set (500 ms), so `retry: 0` cannot make a
    /// tight reconnect loop. The largest is `reconnect.cap`.
    pub retry_floor: Duration,
    /// Largest `Retry-After` honoured (10 min); a longer one is cut to this.
    pub retry_after_cap: Duration,
    /// Messages queued before [`SseSession::handle_bytes`](super::SseSession::handle_bytes) stops consuming (1024).
    pub max_queued_events: usize,
    /// Line, event and parser-queue limits.
    pub parser: ParserConfig,
    /// How often a request that is not repeatable is sent again before its stream opened
    /// (after refused connections, 408, 429, 5xx): 5. Repeatable requests follow `reconnect`.
    pub max_unsent_retries: u32,
    /// Resume requests carrying the same `Last-Event-ID` that may fail in a row before the
    /// session gives up with [`FailReason::ResumeExhausted`](super::FailReason::ResumeExhausted) (10).
    pub max_same_id_resumes: u32,
    /// Bytes of a refusal's body kept for [`FailReason::Rejected`](super::FailReason::Rejected) (1 KiB); the rest is not read.
    pub max_error_body: usize,
    /// Which redirects are followed, and how many per attempt (see [`redirect`](super::redirect)).
    pub redirects: RedirectPolicy,
}

impl Default for SseConfig {
    fn default() -> Self {
        SseConfig {
            reconnect: BackoffPolicy::reconnect(),
            stable_after: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Some(Duration::from_secs(90)),
            retry_floor: Duration::from_millis(500),
            retry_after_cap: Duration::from_secs(600),
            max_queued_events: 1024,
            parser: ParserConfig::default(),
            max_unsent_retries: 5,
            max_same_id_resumes: 10,
            max_error_body: 1024,
            redirects: RedirectPolicy::default(),
        }
    }
}

impl SseConfig {
    /// The [`LinkConfig`] this configuration drives the connection with.
    #[must_use]
    pub(crate) fn link_config(&self) -> LinkConfig {
        LinkConfig {
            reconnect: self.reconnect,
            stable_after: self.stable_after,
            connect_timeout: self.connect_timeout,
            liveness: match self.idle_timeout {
                Some(timeout) => Liveness::Idle { timeout },
                None => Liveness::Off,
            },
            ..LinkConfig::default()
        }
    }
}
