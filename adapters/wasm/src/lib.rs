//! tether-wasm: tether-core's machines behind wasm-bindgen, for browsers and Node.
//!
//! The contract is the C ABI's (`tether-ffi`) and every Rust driver's: the host owns the
//! sockets, the timers and the clock; it calls `handle*(nowMs, ...)` with each input and then
//! drains `pollTransmit`, `pollEvent` (and, for a verifying pool, `verifyQueued` or
//! `pollVerify`) until they return `undefined`, and arms one timer at `pollTimeout`.
//! Nothing here does I/O, reads a clock or draws randomness: the same seed and inputs give
//! the same outputs, byte for byte, as the native core.
//!
//! # Outputs
//!
//! Each transmit and event is one JSON text in the core's one vocabulary
//! ([`tether_core::line`]): the objects `tether req` and `tether sse` print as lines, with
//! subscriptions and relays named by their ids. A relay event's JSON is embedded as the
//! `"event"` member byte for byte. Times inside are relative to the `nowMs` of the input
//! whose outputs are polled. At most 10 `peer_error` (and `invalid`) objects a second are
//! handed out; the next says how many were left out (`suppressed`).
//!
//! # Numbers
//!
//! Times (`nowMs`, deadlines), subscription ids, epochs, challenges and tickets are JavaScript
//! numbers: whole, not negative and at most 2^53 - 1. Anything else is an
//! `InvalidArgument` error.
//!
//! # Errors
//!
//! Local misuse (a malformed filter, an unknown id, input in the wrong state, a full bound)
//! is thrown as an `Error` whose `name` says which kind ([`ErrorKind`]); the machine is left
//! as it was. What a peer does wrong is never thrown: it is an event (`peer_error`,
//! `invalid`, `closed`, ...). A bug inside the library traps (a `RuntimeError`): the
//! instance is then unusable, as a poisoned C ABI handle is.

mod config;
mod error;
pub mod keys;
pub mod pool;
pub mod relay;
pub mod saved;
pub mod sse;

pub use error::{ErrorKind, TetherError};

use std::time::Duration;

use tether_core::{Instant, Lifecycle, SocketLoss};

/// The largest whole number a JavaScript number holds exactly (2^53 - 1).
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A JavaScript number as a whole `u64`, or an `InvalidArgument` naming `what`.
fn whole(value: f64, what: &str) -> Result<u64, TetherError> {
    if (0.0..=MAX_SAFE).contains(&value) && value.fract() == 0.0 {
        // Checked above: a whole number in 0..=2^53-1 converts exactly.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return Ok(value as u64);
    }
    Err(TetherError::invalid(format!(
        "{what} must be a whole number from 0 to 2^53 - 1, not {value}"
    )))
}

/// `nowMs` as the core's instant.
fn instant(now_ms: f64) -> Result<Instant, TetherError> {
    Ok(Instant::from_millis(whole(now_ms, "nowMs")?))
}

/// A deadline as whole milliseconds, rounded up (a timer must not fire before it).
fn deadline_ms(at: Instant) -> f64 {
    let d = at.since_origin();
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    // Deadlines past 2^53 ms (285 000 years) are as good as never.
    #[allow(clippy::cast_precision_loss)]
    let ms = u64::try_from(ms).unwrap_or(u64::MAX) as f64;
    ms.min(MAX_SAFE)
}

/// What `pollTimeout` answers: `now` while output is still held, else the machine's next
/// deadline.
fn poll_timeout(held: bool, now_ms: u64, next: Option<Instant>) -> Option<f64> {
    if held {
        #[allow(clippy::cast_precision_loss)]
        return Some(now_ms as f64);
    }
    next.map(deadline_ms)
}

/// A lifecycle signal by its name: `suspended`, `resumed`, `network_changed`,
/// `network_gone`, `online`, `offline`.
fn lifecycle(signal: &str) -> Result<Lifecycle, TetherError> {
    Ok(match signal {
        "suspended" => Lifecycle::Suspended,
        "resumed" => Lifecycle::Resumed,
        "network_changed" => Lifecycle::NetworkChanged {
            old_path_gone: false,
        },
        "network_gone" => Lifecycle::NetworkChanged {
            old_path_gone: true,
        },
        "online" => Lifecycle::Online(true),
        "offline" => Lifecycle::Online(false),
        other => {
            return Err(TetherError::invalid(format!(
                "{other:?} is not a lifecycle signal (suspended, resumed, network_changed, \
                 network_gone, online, offline)"
            )))
        }
    })
}

/// How a socket ended, by its name: `connection_refused`, `tls_rejected`,
/// `handshake_failed`, `closed_by_peer` (with the close code, if any), `frame_too_large`,
/// `network_error`, `out_of_files`.
fn socket_loss(loss: &str, close_code: Option<u16>) -> Result<SocketLoss, TetherError> {
    Ok(match loss {
        "connection_refused" => SocketLoss::ConnectionRefused,
        "tls_rejected" => SocketLoss::TlsRejected,
        "handshake_failed" => SocketLoss::HandshakeFailed,
        "closed_by_peer" => SocketLoss::ClosedByPeer { code: close_code },
        "frame_too_large" => SocketLoss::FrameTooLarge,
        "network_error" => SocketLoss::NetworkError,
        "out_of_files" => SocketLoss::OutOfFiles,
        other => {
            return Err(TetherError::invalid(format!(
                "{other:?} is not a socket loss (connection_refused, tls_rejected, \
                 handshake_failed, closed_by_peer, frame_too_large, network_error, \
                 out_of_files)"
            )))
        }
    })
}

/// Milliseconds from a config field; 0 is refused where a duration must be positive.
fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Serialize one output object.
fn text<T: serde::Serialize>(line: &T) -> String {
    // An event line is its event's bytes plus about two hundred: one allocation where
    // growing from 128 bytes took three reallocations, each a copy.
    let mut out = Vec::with_capacity(1024);
    tether_core::line::write_into(line, &mut out);
    // The core writes JSON, which is UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_must_be_whole_and_safe() {
        assert_eq!(whole(0.0, "x").unwrap(), 0);
        assert_eq!(whole(MAX_SAFE, "x").unwrap(), 9_007_199_254_740_991);
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, MAX_SAFE + 2.0] {
            let error = whole(bad, "nowMs").unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn deadlines_round_up_to_the_millisecond() {
        let at = Instant::from_millis(5) + Duration::from_micros(1);
        assert_eq!(deadline_ms(at), 6.0);
        assert_eq!(deadline_ms(Instant::from_millis(5)), 5.0);
        assert_eq!(
            poll_timeout(true, 7, Some(Instant::from_millis(9))),
            Some(7.0)
        );
        assert_eq!(poll_timeout(false, 7, None), None);
    }

    #[test]
    fn signals_and_losses_by_name() {
        assert_eq!(lifecycle("offline").unwrap(), Lifecycle::Online(false));
        assert_eq!(
            lifecycle("sleep").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            socket_loss("closed_by_peer", Some(1001)).unwrap(),
            SocketLoss::ClosedByPeer { code: Some(1001) }
        );
        assert_eq!(
            socket_loss("reset", None).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}
