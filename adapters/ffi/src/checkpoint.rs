//! Checkpoints through the ABI: a session's durable state as JSON bytes into the host's
//! buffer (`tether_relay_checkpoint`, `tether_sse_checkpoint`), and a new handle restored
//! from such bytes (`tether_relay_restore`, `tether_sse_restore`). The bytes are the core's
//! checkpoint format (`tether_core::checkpoint`): the same a Rust driver writes, so a
//! checkpoint taken under tokio restores here and the other way round.

use tether_core::nostr::{RelayCheckpoint, RelaySession};
use tether_core::sse::{Request, SseCheckpoint, SseSession};
use tether_core::CheckpointError;

use crate::relay::{TetherRelay, TetherRelayConfig};
use crate::sse::{TetherSse, TetherSseConfig};
use crate::{instant, ptr, Failure, TETHER_ERR_CHECKPOINT, TETHER_ERR_CHECKPOINT_NEWER};
use crate::{TETHER_ERR_NULL, TETHER_OK};

/// Copy `relay`'s checkpoint (JSON) into `buf` of capacity `*len`; `*len` becomes its length.
/// Taking one changes nothing.
///
/// # Errors
/// `TETHER_ERR_NULL`; `TETHER_ERR_BUFFER_TOO_SMALL` with the length needed in `*len` (call
/// again with that much room: the same state gives the same bytes).
///
/// # Safety
/// `relay` is null or a live handle used by no other thread during the call; `len` is null
/// or valid; `buf` is null or valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_checkpoint(
    relay: *mut TetherRelay,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let bytes = r.session().checkpoint().to_json();
        // SAFETY: the contract is the caller's.
        Ok(unsafe { ptr::copy_out(&bytes, buf, len) })
    })
}

/// Create a relay session from `checkpoint` (bytes from [`tether_relay_checkpoint`] or any
/// tether driver) at `now_ms`, when the wall clock reads `unix_secs`, and store its handle at
/// `out`. It is disconnected: call `tether_relay_connect`. Its subscriptions keep their ids
/// (the checkpoint's `subscriptions[].id`) and catch up from the checkpoint's time;
/// unacknowledged publishes are sent again.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_INVALID_ARGUMENT` (the config), `TETHER_ERR_CHECKPOINT`
/// (not a relay checkpoint, or inconsistent), `TETHER_ERR_CHECKPOINT_NEWER` (a newer
/// format), each with its message in `why` as `tether_check_url` writes it (`why_len` may
/// be null when the message is not wanted).
///
/// # Safety
/// `config` is null or valid for `config->struct_size` bytes; `checkpoint` is null or valid
/// for `checkpoint_len` bytes; `out` is null or writable; `why_len` is null or valid;
/// `why` is null or valid for `*why_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_restore(
    config: *const TetherRelayConfig,
    checkpoint: *const u8,
    checkpoint_len: usize,
    now_ms: u64,
    unix_secs: u64,
    out: *mut *mut TetherRelay,
    why: *mut u8,
    why_len: *mut usize,
) -> i32 {
    let make = || -> Result<TetherRelay, Failure> {
        // SAFETY: the contract is the caller's.
        let (core, seed) = unsafe { TetherRelayConfig::read(config) }?;
        // SAFETY: the contract is the caller's.
        let bytes = unsafe { ptr::bytes(checkpoint, checkpoint_len) }
            .map_err(|code| Failure::arg(code, "checkpoint"))?;
        let saved = RelayCheckpoint::from_json(bytes).map_err(refused)?;
        let session = RelaySession::restore(core, seed, &saved, instant(now_ms), unix_secs)
            .map_err(refused)?;
        Ok(TetherRelay::from_session(session, now_ms))
    };
    // SAFETY: the contract is the caller's.
    unsafe { restore_into(out, why, why_len, make) }
}

/// Copy `sse`'s checkpoint (JSON) into `buf` of capacity `*len`; with `with_body` 1 the
/// request body is kept too (when it is UTF-8 and holds no secret). Credentials are never
/// kept.
///
/// # Errors
/// As [`tether_relay_checkpoint`]; `TETHER_ERR_INVALID_ARGUMENT` for a `with_body` other
/// than 0 or 1.
///
/// # Safety
/// As [`tether_relay_checkpoint`], for `sse`.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_checkpoint(
    sse: *mut TetherSse,
    with_body: u32,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let checkpoint = match with_body {
            0 => s.session().checkpoint(),
            1 => s.session().checkpoint_with_body(),
            _ => {
                return Err(Failure::new(
                    crate::TETHER_ERR_INVALID_ARGUMENT,
                    "with_body must be 0 or 1",
                ))
            }
        };
        // SAFETY: the contract is the caller's.
        Ok(unsafe { ptr::copy_out(&checkpoint.to_json(), buf, len) })
    })
}

/// Create an SSE session (a GET, as `tether_sse_new` makes) from `checkpoint` and store its
/// handle at `out`. On `tether_sse_connect` a stream that was open when the checkpoint was
/// taken resumes with its `Last-Event-ID`.
///
/// # Errors
/// As [`tether_relay_restore`]; a checkpoint of a request other than a GET is
/// `TETHER_ERR_CHECKPOINT` (restore it with [`tether_sse_restore_request`]).
///
/// # Safety
/// As [`tether_relay_restore`], with `config` a `TetherSseConfig`.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_restore(
    config: *const TetherSseConfig,
    checkpoint: *const u8,
    checkpoint_len: usize,
    out: *mut *mut TetherSse,
    why: *mut u8,
    why_len: *mut usize,
) -> i32 {
    let make = || -> Result<TetherSse, Failure> {
        // SAFETY: the contract is the caller's.
        unsafe { restore_sse(config, Request::get(), checkpoint, checkpoint_len) }
    };
    // SAFETY: the contract is the caller's.
    unsafe { restore_into(out, why, why_len, make) }
}

/// Create an SSE session for `request` (the JSON of
/// [`tether_sse_new_request`](crate::sse::tether_sse_new_request), rebuilt by the host as it
/// first built it: a checkpoint keeps no credentials, and no body unless asked to) from
/// `checkpoint`, and store its handle at `out`. On `tether_sse_connect` the stream goes on as
/// its resume policy says: a POST resumed with a GET and `Last-Event-ID`, re-issued, or not
/// sent again if the server may have had it.
///
/// # Errors
/// As [`tether_sse_restore`]; a request that does not parse is
/// `TETHER_ERR_INVALID_ARGUMENT`, one of another method than the checkpoint's
/// `TETHER_ERR_CHECKPOINT`.
///
/// # Safety
/// As [`tether_sse_restore`]; `request` valid for `request_len` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tether_sse_restore_request(
    config: *const TetherSseConfig,
    request: *const u8,
    request_len: usize,
    checkpoint: *const u8,
    checkpoint_len: usize,
    out: *mut *mut TetherSse,
    why: *mut u8,
    why_len: *mut usize,
) -> i32 {
    let make = || -> Result<TetherSse, Failure> {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(request, request_len) }
            .map_err(|code| Failure::arg(code, "request"))?;
        let request = crate::sse::parse_request(text).ok_or_else(|| {
            Failure::new(
                crate::TETHER_ERR_INVALID_ARGUMENT,
                "the request does not parse",
            )
        })?;
        // SAFETY: the contract is the caller's.
        unsafe { restore_sse(config, request, checkpoint, checkpoint_len) }
    };
    // SAFETY: the contract is the caller's.
    unsafe { restore_into(out, why, why_len, make) }
}

/// An SSE handle for `request` from the checkpoint bytes.
///
/// # Safety
/// `config` as in `tether_sse_new`; `checkpoint` null or valid for `checkpoint_len` bytes.
unsafe fn restore_sse(
    config: *const TetherSseConfig,
    request: Request,
    checkpoint: *const u8,
    checkpoint_len: usize,
) -> Result<TetherSse, Failure> {
    // SAFETY: the contract is the caller's.
    let (core, seed) = unsafe { TetherSseConfig::read(config) }?;
    // SAFETY: the contract is the caller's.
    let bytes = unsafe { ptr::bytes(checkpoint, checkpoint_len) }
        .map_err(|code| Failure::arg(code, "checkpoint"))?;
    let saved = SseCheckpoint::from_json(bytes).map_err(refused)?;
    let session = SseSession::restore(core, request, &saved, seed).map_err(refused)?;
    Ok(TetherSse::from_session(session))
}

/// The ABI's code and message for a refused checkpoint.
pub(crate) fn refused(error: CheckpointError) -> Failure {
    let code = match error {
        CheckpointError::Newer { .. } => TETHER_ERR_CHECKPOINT_NEWER,
        _ => TETHER_ERR_CHECKPOINT,
    };
    Failure::new(code, error.to_string())
}

/// Build a handle with `make` and hand it to the host at `out`; a failure's (or a panic's)
/// code is returned and its message copied to `why`.
///
/// # Safety
/// `out` is null or writable; `why_len` is null or valid; `why` is null or valid for
/// `*why_len` bytes.
pub(crate) unsafe fn restore_into<H>(
    out: *mut *mut H,
    why: *mut u8,
    why_len: *mut usize,
    make: impl FnOnce() -> Result<H, Failure> + std::panic::UnwindSafe,
) -> i32 {
    if out.is_null() {
        return TETHER_ERR_NULL;
    }
    let (code, message) = match std::panic::catch_unwind(make) {
        Ok(Ok(handle)) => {
            let raw = Box::into_raw(Box::new(handle));
            // SAFETY: non-null and writable by this function's contract.
            unsafe { out.write_unaligned(raw) };
            (TETHER_OK, String::new())
        }
        Ok(Err(failure)) => (failure.code, failure.message),
        Err(_) => (crate::TETHER_ERR_PANIC, "the restore panicked".to_owned()),
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::code_with_message(code, &message, why, why_len) }
}
