//! [`Wake`]: why a machine asks to be woken at its `poll_timeout`.
//!
//! Every machine's `poll_timeout` is the earliest of several deadlines. `poll_wake` returns
//! the same instant together with the deadline it came from, so a driver's log and a test
//! transcript can say what it is waiting for (as quinn's `TimerTable` names its timers and
//! firezone pairs each deadline with a reason). The reason is information only: the machine
//! acts on whatever is due when `handle_timeout` runs, whichever reason was named.

use std::fmt;

/// What the next deadline of a machine is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Wake {
    /// Output is queued: drain it now.
    Output,
    /// The next connection attempt, after the reconnect backoff.
    Reconnect,
    /// A socket or request that has not opened gives up.
    ConnectTimeout,
    /// The relay has been silent for `ping_after`: send a ping.
    Ping,
    /// A ping went unanswered for `pong_timeout`: the socket is dead.
    PongTimeout,
    /// An SSE stream has been silent for `idle_timeout`: the stream is dead.
    Idle,
    /// A socket probed after a resume or a network change showed no life in time: it is
    /// dead.
    Probe,
    /// A subscription's own timer: its refusal retry, its EOSE timeout or its wait for auth.
    Subscription,
    /// A publish's timer: its OK timeout or its retry.
    Publish,
    /// The next paced batch of REQs (replay, queue, retries behind the gate).
    ReplayBatch,
    /// REQs held for the relay's AUTH challenge stop waiting for it.
    AuthHold,
    /// A pool subscription's outcome deadline (`Complete` or `Partial`).
    Outcome,
    /// A pool publish's aggregate deadline.
    PublishOutcome,
    /// A pool routing subscriptions by people routes again.
    Reroute,
}

impl Wake {
    /// A short, stable name for logs and transcripts.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::Output => "output",
            Wake::Reconnect => "reconnect",
            Wake::ConnectTimeout => "connect-timeout",
            Wake::Ping => "ping",
            Wake::PongTimeout => "pong-timeout",
            Wake::Idle => "idle",
            Wake::Probe => "probe",
            Wake::Subscription => "subscription",
            Wake::Publish => "publish",
            Wake::ReplayBatch => "replay-batch",
            Wake::AuthHold => "auth-hold",
            Wake::Outcome => "outcome",
            Wake::Reroute => "reroute",
            Wake::PublishOutcome => "publish-outcome",
        }
    }
}

impl fmt::Display for Wake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The earlier of two wakes; on a tie, `first` (callers name them in the order the machine
/// acts on them). Chained pairwise rather than folded over an array: moving the array
/// into its iterator and on was a `memory.copy` per move in the wasm build, every frame.
pub(crate) fn sooner<T: Ord + Copy>(
    first: Option<(T, Wake)>,
    second: Option<(T, Wake)>,
) -> Option<(T, Wake)> {
    match (first, second) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sooner_wake_wins_and_a_tie_goes_to_the_first_named() {
        let (a, b) = (Some((5, Wake::Ping)), Some((3, Wake::Idle)));
        assert_eq!(sooner(a, b), b);
        assert_eq!(sooner(b, a), b);
        assert_eq!(sooner(Some((3, Wake::Ping)), b), Some((3, Wake::Ping)));
        assert_eq!(sooner(b, Some((3, Wake::Ping))), b);
        assert_eq!(sooner(None, a), a);
        assert_eq!(sooner(a, None), a);
        assert_eq!(sooner::<u32>(None, None), None);
    }
}
