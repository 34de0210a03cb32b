//! tether-ffi: a C ABI over tether-core's relay and SSE sessions.
//!
//! The ABI mirrors the sans-IO driving contract and nothing more (quiche's `quiche.h` is the
//! model): an opaque handle per session, inputs that take the host's monotonic `now_ms`,
//! and outputs the host polls into buffers it owns. There are no threads, no callbacks and
//! no global state: the host's event loop drives a handle exactly as the Rust drivers do.
//!
//! # The drain loop
//!
//! After every input call, poll `*_poll_transmit` and `*_poll_event` until both return
//! [`TETHER_DONE`], then sleep until `*_poll_timeout` (or the next socket input) and call
//! `*_handle_timeout` with a fresh `now_ms`.
//!
//! # Outputs
//!
//! Each transmit and event is one JSON object (UTF-8, no terminating NUL) in the core's one
//! vocabulary, [`tether_core::line`]: the objects `tether req` and `tether sse` print as
//! lines, with subscriptions and relays named by their ids, and the handles a host needs to
//! answer (`id` on `event` and `auth`). A relay event's JSON is embedded as the `"event"`
//! member of an `event` object, byte for byte (the objects are length-delimited, so a line
//! break in it is kept; the CLI's lines compact such an event).
//! Times are relative to the `now_ms` of the input whose outputs are being polled
//! (`reconnect_in_ms`, `in_ms`, `window_ms`, rounded down). At most 10 `peer_error` (and
//! `invalid`) objects a second are handed out; the next says how many were left out
//! (`suppressed`).
//!
//! Polling takes `buf` and `*len` (its capacity). On [`TETHER_OK`] `*len` is the length
//! written; on [`TETHER_ERR_BUFFER_TOO_SMALL`] `*len` is the length needed and the item stays
//! queued for the next poll; on [`TETHER_DONE`] nothing is queued.
//!
//! # Errors and misuse
//!
//! Every function returns an `int32_t` code: [`TETHER_OK`] (0), [`TETHER_DONE`] (1) or a
//! negative `TETHER_ERR_*`. Null pointers, invalid UTF-8, unknown ids and calls in the wrong
//! state return codes, never undefined behaviour; `*_last_error` describes the last error
//! of a handle. A Rust panic is caught at every entry point: that call returns
//! [`TETHER_ERR_PANIC`] and the handle is poisoned, so every later call but `*_free` returns
//! [`TETHER_ERR_POISONED`].
//!
//! # Threads
//!
//! A handle is not synchronised: use it from one thread at a time (moving it between
//! threads is fine). Different handles are independent. [`url::tether_check_url`], the URL
//! rule the Rust entry points apply, takes no handle and is callable from any thread.
//!
//! # Safety
//!
//! Pointers passed in must be null or valid for the stated length for the duration of the
//! call; nothing is retained after a call returns. A handle must come from its `*_new` and
//! be freed once with its `*_free`.

mod outbuf;
#[allow(unsafe_code)]
#[macro_use]
mod ptr;
#[allow(unsafe_code)]
pub mod checkpoint;
#[allow(unsafe_code)]
pub mod info;
#[allow(unsafe_code)]
pub mod pool;
#[allow(unsafe_code)]
pub mod relay;
#[allow(unsafe_code)]
pub mod sign;
#[allow(unsafe_code)]
pub mod sse;
#[allow(unsafe_code)]
pub mod url;
#[allow(unsafe_code)]
pub mod verify;

/// The version of this ABI, returned by [`tether_abi_version`]: bumped on any incompatible
/// change (a removed or retyped function, a changed output field). Additions keep it.
pub const TETHER_ABI_VERSION: u32 = 1;

/// Success.
pub const TETHER_OK: i32 = 0;
/// Nothing to poll: no transmit, event or deadline is pending.
pub const TETHER_DONE: i32 = 1;
/// The output buffer is too small: `*len` now holds the length needed; the item is kept.
pub const TETHER_ERR_BUFFER_TOO_SMALL: i32 = -1;
/// A required pointer was null.
pub const TETHER_ERR_NULL: i32 = -2;
/// A text argument is not valid UTF-8.
pub const TETHER_ERR_UTF8: i32 = -3;
/// An argument is malformed: filters that are not a JSON array of objects, an event that is
/// not an event object, an unknown socket-loss code, a config of the wrong size.
pub const TETHER_ERR_INVALID_ARGUMENT: i32 = -4;
/// An unknown subscription id, or an epoch never handed out in an `open` transmit.
pub const TETHER_ERR_UNKNOWN_ID: i32 = -5;
/// The call does not fit the session's state: input before a socket's open, a second open,
/// authenticating while disconnected or for a superseded challenge.
pub const TETHER_ERR_WRONG_STATE: i32 = -6;
/// A configured bound is reached: too many subscriptions, a full outbox, an event already
/// being published.
pub const TETHER_ERR_LIMIT: i32 = -7;
/// This call panicked inside the library; the handle is now poisoned.
pub const TETHER_ERR_PANIC: i32 = -8;
/// An earlier call panicked; the handle accepts nothing but `*_free`.
pub const TETHER_ERR_POISONED: i32 = -9;
/// Checkpoint bytes that are not a checkpoint of this kind, or contradict themselves.
pub const TETHER_ERR_CHECKPOINT: i32 = -11;
/// Checkpoint bytes written by a newer format than this library reads.
pub const TETHER_ERR_CHECKPOINT_NEWER: i32 = -12;

/// `loss` code: the connection was refused, the host unreachable or its name unresolved.
pub const TETHER_LOSS_CONNECTION_REFUSED: u32 = 1;
/// `loss` code: the TLS handshake failed.
pub const TETHER_LOSS_TLS_REJECTED: u32 = 2;
/// `loss` code: the WebSocket or HTTP handshake failed.
pub const TETHER_LOSS_HANDSHAKE_FAILED: u32 = 3;
/// `loss` code: the peer closed the socket (pass its close code, or -1).
pub const TETHER_LOSS_CLOSED_BY_PEER: u32 = 4;
/// `loss` code: the peer sent a frame over the size limit.
pub const TETHER_LOSS_FRAME_TOO_LARGE: u32 = 5;
/// `loss` code: a reset, broken pipe or other network error.
pub const TETHER_LOSS_NETWORK_ERROR: u32 = 6;
/// `loss` code: the process or the system has no file descriptor left (`EMFILE`, `ENFILE`).
pub const TETHER_LOSS_OUT_OF_FILES: u32 = 7;

/// `signal` code: the application went to the background or the machine to sleep.
pub const TETHER_LIFECYCLE_SUSPENDED: u32 = 1;
/// `signal` code: the application is in the foreground again (sockets are probed).
pub const TETHER_LIFECYCLE_RESUMED: u32 = 2;
/// `signal` code: the network path changed; open sockets are probed.
pub const TETHER_LIFECYCLE_NETWORK_CHANGED: u32 = 3;
/// `signal` code: the network path changed and the old interface is gone; open sockets are
/// given up at once.
pub const TETHER_LIFECYCLE_NETWORK_GONE: u32 = 4;
/// `signal` code: the device has the network (again).
pub const TETHER_LIFECYCLE_ONLINE: u32 = 5;
/// `signal` code: the device lost the network; nothing is attempted until `ONLINE`.
pub const TETHER_LIFECYCLE_OFFLINE: u32 = 6;

/// The lifecycle signal a host's `signal` code names; `None` for an unknown code.
fn lifecycle(signal: u32) -> Option<tether_core::Lifecycle> {
    use tether_core::Lifecycle;
    Some(match signal {
        TETHER_LIFECYCLE_SUSPENDED => Lifecycle::Suspended,
        TETHER_LIFECYCLE_RESUMED => Lifecycle::Resumed,
        TETHER_LIFECYCLE_NETWORK_CHANGED => Lifecycle::NetworkChanged {
            old_path_gone: false,
        },
        TETHER_LIFECYCLE_NETWORK_GONE => Lifecycle::NetworkChanged {
            old_path_gone: true,
        },
        TETHER_LIFECYCLE_ONLINE => Lifecycle::Online(true),
        TETHER_LIFECYCLE_OFFLINE => Lifecycle::Online(false),
        _ => return None,
    })
}

/// The ABI version this library implements ([`TETHER_ABI_VERSION`]); a host checks it
/// against the header it was compiled with.
#[no_mangle]
#[allow(unsafe_code)] // `#[no_mangle]` is an unsafe attribute: the symbol name is global.
pub extern "C" fn tether_abi_version() -> u32 {
    TETHER_ABI_VERSION
}

/// A failed call: its code, and the message `*_last_error` returns for it.
#[derive(Debug)]
struct Failure {
    code: i32,
    message: String,
}

impl Failure {
    fn new(code: i32, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A code from a pointer helper (null, UTF-8, too small), with a message naming `what`.
    fn arg(code: i32, what: &str) -> Self {
        let why = match code {
            TETHER_ERR_NULL => "is a null pointer",
            TETHER_ERR_UTF8 => "is not valid UTF-8",
            _ => "is invalid",
        };
        Failure::new(code, format!("{what} {why}"))
    }
}

/// What every handle keeps for [`ptr::guard`]: whether it is poisoned, and the last error.
#[derive(Debug, Default)]
struct Health {
    poisoned: bool,
    error: String,
}

impl Health {
    fn poison(&mut self) {
        self.poisoned = true;
        self.error = "a call panicked; the handle is poisoned".to_owned();
    }
}

/// A handle [`ptr::guard`] can run entry points on.
trait Guarded {
    fn health(&mut self) -> &mut Health;
    fn health_ref(&self) -> &Health;
}

/// The code for a socket input's outcome: an epoch never handed out is
/// [`TETHER_ERR_UNKNOWN_ID`], any other refusal [`TETHER_ERR_WRONG_STATE`].
fn socket(result: Result<(), tether_core::SocketError>) -> Result<i32, Failure> {
    result.map(|()| TETHER_OK).map_err(socket_failure)
}

fn socket_failure(e: tether_core::SocketError) -> Failure {
    let code = match e {
        tether_core::SocketError::UnknownEpoch(_) => TETHER_ERR_UNKNOWN_ID,
        _ => TETHER_ERR_WRONG_STATE,
    };
    Failure::new(code, e.to_string())
}

/// Hand the held or next item to the host, keeping it when the buffer is too small.
///
/// # Safety
/// As [`ptr::copy_out`].
#[allow(unsafe_code)]
unsafe fn deliver(
    pending: &mut outbuf::Pending,
    buf: *mut u8,
    len: *mut usize,
    next: impl FnOnce(&mut Vec<u8>) -> bool,
) -> Result<i32, Failure> {
    if len.is_null() {
        return Err(Failure::arg(TETHER_ERR_NULL, "len"));
    }
    let Some(item) = pending.get(next) else {
        return Ok(TETHER_DONE);
    };
    // SAFETY: the contract is passed on.
    let code = unsafe { ptr::copy_out(item, buf, len) };
    match code {
        TETHER_OK => {
            pending.consume();
            Ok(TETHER_OK)
        }
        TETHER_ERR_NULL => Err(Failure::arg(TETHER_ERR_NULL, "buf")),
        other => Ok(other),
    }
}

/// `*_poll_timeout`: the latest `now_ms` while output is `held` (the host must poll it
/// first), else the session's `next` deadline, stored at `out_ms`; [`TETHER_DONE`] when
/// there is neither.
///
/// # Safety
/// `out_ms` is null or writable.
#[allow(unsafe_code)]
unsafe fn poll_timeout(
    out_ms: *mut u64,
    held: bool,
    now: u64,
    next: Option<tether_core::Instant>,
) -> Result<i32, Failure> {
    if out_ms.is_null() {
        return Err(Failure::arg(TETHER_ERR_NULL, "out_ms"));
    }
    let deadline = if held {
        Some(now)
    } else {
        next.map(millis_ceil)
    };
    let Some(deadline) = deadline else {
        return Ok(TETHER_DONE);
    };
    // SAFETY: non-null and writable by this function's contract.
    let _ = unsafe { ptr::write(out_ms, deadline) };
    Ok(TETHER_OK)
}

/// The socket loss a host's `loss` code names; `None` for an unknown code.
fn socket_loss(loss: u32, close_code: i32) -> Option<tether_core::SocketLoss> {
    use tether_core::SocketLoss;
    Some(match loss {
        TETHER_LOSS_CONNECTION_REFUSED => SocketLoss::ConnectionRefused,
        TETHER_LOSS_TLS_REJECTED => SocketLoss::TlsRejected,
        TETHER_LOSS_HANDSHAKE_FAILED => SocketLoss::HandshakeFailed,
        TETHER_LOSS_CLOSED_BY_PEER => SocketLoss::ClosedByPeer {
            code: u16::try_from(close_code).ok(),
        },
        TETHER_LOSS_FRAME_TOO_LARGE => SocketLoss::FrameTooLarge,
        TETHER_LOSS_NETWORK_ERROR => SocketLoss::NetworkError,
        TETHER_LOSS_OUT_OF_FILES => SocketLoss::OutOfFiles,
        _ => return None,
    })
}

/// The core's time for the host's milliseconds.
fn instant(now_ms: u64) -> tether_core::Instant {
    tether_core::Instant::from_millis(now_ms)
}

/// Milliseconds on the host's scale, rounded up so a host that sleeps to a deadline never
/// wakes before it.
fn millis_ceil(at: tether_core::Instant) -> u64 {
    duration_ms_ceil(at.since_origin())
}

/// A duration in milliseconds, rounded up.
fn duration_ms_ceil(d: std::time::Duration) -> u64 {
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn millis_round_up_and_saturate() {
        assert_eq!(duration_ms_ceil(Duration::from_millis(5)), 5);
        assert_eq!(duration_ms_ceil(Duration::from_micros(5_001)), 6);
        assert_eq!(duration_ms_ceil(Duration::MAX), u64::MAX);
    }

    #[test]
    fn loss_codes_map_and_unknown_ones_do_not() {
        use tether_core::SocketLoss;
        assert_eq!(
            socket_loss(TETHER_LOSS_CLOSED_BY_PEER, 1001),
            Some(SocketLoss::ClosedByPeer { code: Some(1001) })
        );
        assert_eq!(
            socket_loss(TETHER_LOSS_CLOSED_BY_PEER, -1),
            Some(SocketLoss::ClosedByPeer { code: None })
        );
        assert_eq!(socket_loss(0, 0), None);
        assert_eq!(socket_loss(7, 0), Some(SocketLoss::OutOfFiles));
        assert_eq!(socket_loss(8, 0), None);
    }
}
