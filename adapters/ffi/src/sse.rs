//! The SSE session (one GET `text/event-stream` the host performs): `tether_sse_*`.
//!
//! An `open` transmit asks for a request tagged with its `epoch`; the host reports the
//! response head with [`tether_sse_handle_response`], body chunks with
//! [`tether_sse_handle_bytes`] and the end with [`tether_sse_handle_eof`] or
//! [`tether_sse_handle_error`].

use std::mem::size_of;
use std::time::Duration;

use tether_core::sse::{Request, RequestSpec, ResponseHead, SseConfig, SseSession};
use tether_core::Epoch;

use crate::outbuf::Pending;
use crate::{
    deliver, instant, ptr, socket, socket_failure, socket_loss, Failure, Guarded, Health,
    TETHER_ERR_INVALID_ARGUMENT, TETHER_ERR_NULL, TETHER_OK,
};
use tether_core::line::sse::{Line, TransmitLine};
use tether_core::line::{write_into, Limiter};

/// Configuration of an SSE session; size-versioned like
/// [`TetherRelayConfig`](crate::relay::TetherRelayConfig): set `struct_size`, call
/// [`tether_sse_config_default`], adjust, pass to [`tether_sse_new`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TetherSseConfig {
    /// `sizeof(TetherSseConfig)` as the caller was compiled.
    pub struct_size: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// Seed for the reconnect jitter.
    pub seed: u64,
    /// Silence tolerated on an open stream before reconnecting (default 90 000 ms); 0 turns
    /// the watchdog off.
    pub idle_timeout_ms: u64,
    /// A request without a response head after this long counts as failed (default
    /// 30 000 ms; at least 1).
    pub connect_timeout_ms: u64,
}

/// Size of the first version of [`TetherSseConfig`].
const CONFIG_V1: usize = size_of::<TetherSseConfig>();

impl TetherSseConfig {
    fn defaults() -> Self {
        let core = SseConfig::default();
        TetherSseConfig {
            struct_size: CONFIG_V1 as u32,
            reserved: 0,
            seed: 0,
            idle_timeout_ms: core.idle_timeout.map_or(0, |d| d.as_millis() as u64),
            connect_timeout_ms: core.connect_timeout.as_millis() as u64,
        }
    }

    /// The host's config (a size-versioned struct) as the core's, and the seed.
    ///
    /// # Safety
    /// `config` is null or valid for `config->struct_size` bytes.
    pub(crate) unsafe fn read(config: *const Self) -> Result<(SseConfig, u64), Failure> {
        // SAFETY: the contract is the caller's.
        let host = unsafe { ptr::versioned(config, Self::defaults(), CONFIG_V1) }
            .map_err(|code| Failure::arg(code, "config"))?;
        let core = host
            .to_core()
            .map_err(|code| Failure::new(code, "an invalid SSE config"))?;
        Ok((core, host.seed))
    }

    fn to_core(self) -> Result<SseConfig, i32> {
        if self.reserved != 0 || self.connect_timeout_ms == 0 {
            return Err(TETHER_ERR_INVALID_ARGUMENT);
        }
        let mut config = SseConfig::default();
        config.idle_timeout =
            (self.idle_timeout_ms != 0).then(|| Duration::from_millis(self.idle_timeout_ms));
        config.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        Ok(config)
    }
}

/// An opaque SSE session; create with [`tether_sse_new`], free with [`tether_sse_free`].
#[derive(Debug)]
pub struct TetherSse {
    session: SseSession,
    transmit: Pending,
    event: Pending,
    now: u64,
    /// `(now_ms, unix_secs)` from [`tether_sse_set_wall_clock`]: turns an HTTP-date
    /// `Retry-After` into a delay.
    wall: Option<(u64, u64)>,
    /// How many `peer_error` lines a second reach the host.
    peer_errors: Limiter,
    health: Health,
}

impl Guarded for TetherSse {
    fn health(&mut self) -> &mut Health {
        &mut self.health
    }
    fn health_ref(&self) -> &Health {
        &self.health
    }
}

impl TetherSse {
    /// A handle around `session` (new or restored).
    pub(crate) fn from_session(session: SseSession) -> Self {
        TetherSse {
            session,
            transmit: Pending::default(),
            event: Pending::default(),
            now: 0,
            wall: None,
            peer_errors: Limiter::default(),
            health: Health::default(),
        }
    }

    /// The session.
    pub(crate) fn session(&self) -> &SseSession {
        &self.session
    }

    fn at(&mut self, now_ms: u64) -> tether_core::Instant {
        self.now = self.now.max(now_ms);
        instant(now_ms)
    }

    /// The delay a `Retry-After` value asks for: delta-seconds, or an HTTP-date against the
    /// wall clock (none set: the date is ignored).
    fn retry_after(&self, value: &str) -> Option<Duration> {
        let unix_now = self.wall.map(|(set_ms, set_secs)| {
            set_secs.saturating_add(self.now.saturating_sub(set_ms) / 1000)
        });
        tether_core::sse::status::retry_after(value, unix_now)
    }
}

/// Fill `config` with the defaults for its `struct_size` (set that first).
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_INVALID_ARGUMENT` (size smaller than the first version).
///
/// # Safety
/// `config` is null or valid for `config->struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_config_default(config: *mut TetherSseConfig) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::write_versioned(config, TetherSseConfig::defaults(), CONFIG_V1) }
}

/// Create an idle SSE session and store its handle at `out`.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` is null or valid for `config->struct_size` bytes; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_new(
    config: *const TetherSseConfig,
    out: *mut *mut TetherSse,
) -> i32 {
    let make = || {
        // SAFETY: the contract is the caller's.
        let (core, seed) = unsafe { TetherSseConfig::read(config) }.map_err(|f| f.code)?;
        Ok(TetherSse::from_session(SseSession::new(core, seed)))
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::construct(out, make) }
}

/// Create an SSE session for the request `request` describes (`request_len` bytes of JSON,
/// every field optional):
///
/// ```json
/// {"method": "POST", "headers": [["content-type", "application/json"]], "body": "{...}",
///  "resume": "never", "end_data": "[DONE]", "end_event": "done", "fail_event": "error",
///  "end_on_jsonrpc_response": false}
/// ```
///
/// `method` defaults to `GET`, `body` (UTF-8) to none, `resume` to the method's default
/// (`same` for a GET, `never` for a POST; else `same`, `last-event-id[:METHOD]`,
/// `reissue[:N]`). The core decides what may be sent again, as for every driver; each `open`
/// transmit carries the `method`, `headers` and `body` of that attempt.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_UTF8`, `TETHER_ERR_INVALID_ARGUMENT` (a config or a request
/// that does not parse: an unknown field, a bad `resume`).
///
/// # Safety
/// As [`tether_sse_new`]; `request` valid for `request_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_new_request(
    config: *const TetherSseConfig,
    request: *const u8,
    request_len: usize,
    out: *mut *mut TetherSse,
) -> i32 {
    let make = || {
        // SAFETY: the contract is the caller's.
        let (core, seed) = unsafe { TetherSseConfig::read(config) }.map_err(|f| f.code)?;
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(request, request_len) }?;
        let request = parse_request(text).ok_or(TETHER_ERR_INVALID_ARGUMENT)?;
        Ok(TetherSse::from_session(SseSession::with_request(
            core, request, seed,
        )))
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::construct(out, make) }
}

/// The core's request for the JSON of [`tether_sse_new_request`] (the core's
/// `RequestSpec`), or `None` when it does not parse.
pub(crate) fn parse_request(text: &str) -> Option<Request> {
    serde_json::from_str::<RequestSpec>(text)
        .ok()?
        .into_request()
        .ok()
}

/// Free a session; null is a no-op.
///
/// # Safety
/// `sse` is null or a live handle from [`tether_sse_new`], not used again.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_free(sse: *mut TetherSse) {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::free(sse) }
}

/// Copy the message of the last failed call on `sse` into `buf` (capacity `*len`).
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_BUFFER_TOO_SMALL`.
///
/// # Safety
/// `sse` is null or live; `len` null or valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_last_error(
    sse: *const TetherSse,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::last_error(sse, buf, len) }
}

/// Copy the last event ID the next request will carry (empty: none) into `buf` (capacity
/// `*len`): the newest one that can be sent as a header.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_BUFFER_TOO_SMALL` (the length needed in `*len`).
///
/// # Safety
/// `sse` is null or live; `len` null or valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_last_event_id(
    sse: *mut TetherSse,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        // SAFETY: the contract is the caller's.
        let code = unsafe { ptr::copy_out(s.session.last_event_id().as_bytes(), buf, len) };
        match code {
            TETHER_ERR_NULL => Err(Failure::arg(TETHER_ERR_NULL, "buf or len")),
            code => Ok(code),
        }
    })
}

/// The wall clock read `unix_secs` at `now_ms`: used only to turn an HTTP-date
/// `Retry-After` into a delay.
///
/// # Safety
/// `sse` is null or a live handle used by no other thread during the call.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_set_wall_clock(
    sse: *mut TetherSse,
    now_ms: u64,
    unix_secs: u64,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        s.at(now_ms);
        s.wall = Some((now_ms, unix_secs));
        Ok(TETHER_OK)
    })
}

/// The application wants the stream: asks for a request unless one is open or pending.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_connect(sse: *mut TetherSse, now_ms: u64) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let now = s.at(now_ms);
        s.session.connect(now);
        Ok(TETHER_OK)
    })
}

/// The application no longer wants the stream: aborts the request, ends with `closed`.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_disconnect(sse: *mut TetherSse, now_ms: u64) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let now = s.at(now_ms);
        s.session.disconnect(now);
        Ok(TETHER_OK)
    })
}

/// The application's lifecycle: a `TETHER_LIFECYCLE_*` `signal`, as
/// [`tether_relay_lifecycle`](crate::relay::tether_relay_lifecycle). Suspended, no deadline
/// runs; resumed, the idle watchdog restarts; offline, no request is asked for; the old
/// network gone ends the request (a resumable one resumes with `Last-Event-ID`).
///
/// # Errors
/// `TETHER_ERR_NULL`; `TETHER_ERR_INVALID_ARGUMENT` for an unknown `signal`.
///
/// # Safety
/// As [`tether_sse_disconnect`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_lifecycle(
    sse: *mut TetherSse,
    now_ms: u64,
    signal: u32,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let Some(signal) = crate::lifecycle(signal) else {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("{signal} is not a TETHER_LIFECYCLE_* code"),
            ));
        };
        let now = s.at(now_ms);
        s.session.handle_lifecycle(now, signal);
        Ok(TETHER_OK)
    })
}

/// The response head of `epoch` arrived: HTTP `status`, the `Content-Type` header
/// (`content_type`, `content_type_len` bytes; null when absent) and the `Retry-After` header
/// (null when absent; delta-seconds, or an HTTP-date once the wall clock is set).
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_WRONG_STATE` (a second head), `TETHER_ERR_UTF8`.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`]; each text null or valid for its length.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_response(
    sse: *mut TetherSse,
    now_ms: u64,
    epoch: u64,
    status: u16,
    content_type: *const u8,
    content_type_len: usize,
    retry_after: *const u8,
    retry_after_len: usize,
) -> i32 {
    // SAFETY: the contract is the caller's, and the headers it leaves out are null.
    unsafe {
        tether_sse_handle_head(
            sse,
            now_ms,
            epoch,
            status,
            content_type,
            content_type_len,
            retry_after,
            retry_after_len,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
        )
    }
}

/// The response head of `epoch` arrived, with every header the core judges: HTTP `status`,
/// `Content-Type`, `Retry-After` (delta-seconds, or an HTTP-date once the wall clock is set),
/// `Content-Encoding` (a 200 stream that is not `identity` fails: ask for
/// `Accept-Encoding: identity` and do not decode), `Location`, and `url`, the URL the request
/// went to (a relative `Location` resolves against it). Each text is null when absent, else
/// valid for its length.
///
/// A redirect (301, 302, 303, 307, 308) is followed with an `open` transmit whose
/// `redirect` is the target (the same attempt and epoch), or fails the stream (`failed`,
/// `why` `redirect`): the HTTP client must follow none by itself, or it could send a POST
/// again without the core knowing. [`tether_sse_handle_response`] is this call with the first
/// three headers only.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_WRONG_STATE` (a second head), `TETHER_ERR_UTF8`.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`]; each text null or valid for its length.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // C has no optional arguments; each header is a pointer and a length
pub unsafe extern "C" fn tether_sse_handle_head(
    sse: *mut TetherSse,
    now_ms: u64,
    epoch: u64,
    status: u16,
    content_type: *const u8,
    content_type_len: usize,
    retry_after: *const u8,
    retry_after_len: usize,
    content_encoding: *const u8,
    content_encoding_len: usize,
    location: *const u8,
    location_len: usize,
    url: *const u8,
    url_len: usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        // SAFETY: the contract is the caller's.
        let content_type = unsafe { ptr::opt_text(content_type, content_type_len) }
            .map_err(|c| Failure::arg(c, "content_type"))?;
        // SAFETY: the contract is the caller's.
        let retry_after = unsafe { ptr::opt_text(retry_after, retry_after_len) }
            .map_err(|c| Failure::arg(c, "retry_after"))?;
        // SAFETY: the contract is the caller's.
        let content_encoding = unsafe { ptr::opt_text(content_encoding, content_encoding_len) }
            .map_err(|c| Failure::arg(c, "content_encoding"))?;
        // SAFETY: the contract is the caller's.
        let location = unsafe { ptr::opt_text(location, location_len) }
            .map_err(|c| Failure::arg(c, "location"))?;
        // SAFETY: the contract is the caller's.
        let url = unsafe { ptr::opt_text(url, url_len) }.map_err(|c| Failure::arg(c, "url"))?;
        let now = s.at(now_ms);
        let retry_after = retry_after.and_then(|v| s.retry_after(v));
        let head = ResponseHead::new(status)
            .content_type(content_type)
            .retry_after(retry_after)
            .content_encoding(content_encoding)
            .location(location)
            .url(url);
        socket(s.session.handle_head(now, Epoch(epoch), &head))
    })
}

/// Body bytes of `epoch` arrived; how many were consumed goes to `out_consumed`: all unless
/// the event queue filled up — then drain events and offer the rest again.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_WRONG_STATE` (before the response head),
/// `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`]; `bytes` valid for `len`; `out_consumed` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_bytes(
    sse: *mut TetherSse,
    now_ms: u64,
    epoch: u64,
    bytes: *const u8,
    len: usize,
    out_consumed: *mut usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        if out_consumed.is_null() {
            return Err(Failure::arg(TETHER_ERR_NULL, "out_consumed"));
        }
        // SAFETY: the contract is the caller's.
        let bytes = unsafe { ptr::bytes(bytes, len) }.map_err(|c| Failure::arg(c, "bytes"))?;
        let now = s.at(now_ms);
        let consumed = s
            .session
            .handle_bytes(now, Epoch(epoch), bytes)
            .map_err(socket_failure)?;
        // SAFETY: non-null and writable by the contract.
        let _ = unsafe { ptr::write(out_consumed, consumed) };
        Ok(TETHER_OK)
    })
}

/// The body of `epoch` ended cleanly; the session reconnects after backoff.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_eof(
    sse: *mut TetherSse,
    now_ms: u64,
    epoch: u64,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let now = s.at(now_ms);
        socket(s.session.handle_eof(now, Epoch(epoch)))
    })
}

/// The request or body of `epoch` failed on the network (`loss`, a `TETHER_LOSS_*` code).
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (unknown `loss`), `TETHER_ERR_UNKNOWN_ID`.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_error(
    sse: *mut TetherSse,
    now_ms: u64,
    epoch: u64,
    loss: u32,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let Some(loss) = socket_loss(loss, -1) else {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("{loss} is not a TETHER_LOSS_* code"),
            ));
        };
        let now = s.at(now_ms);
        socket(s.session.handle_error(now, Epoch(epoch), loss))
    })
}

/// The host could not build the request of `epoch` (`detail`, UTF-8, says why): the
/// session fails for good instead of retrying the same request.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`]; `detail` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_request_invalid(
    sse: *mut TetherSse,
    now_ms: u64,
    epoch: u64,
    detail: *const u8,
    len: usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        // SAFETY: the contract is the caller's.
        let detail = unsafe { ptr::text(detail, len) }.map_err(|c| Failure::arg(c, "detail"))?;
        let now = s.at(now_ms);
        socket(s.session.handle_request_invalid(now, Epoch(epoch), detail))
    })
}

/// The host stopped (`paused` non-zero) or resumed reading the body.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_read_paused(
    sse: *mut TetherSse,
    now_ms: u64,
    paused: u32,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let now = s.at(now_ms);
        s.session.handle_read_paused(now, paused != 0);
        Ok(TETHER_OK)
    })
}

/// Act on any deadline passed at `now_ms`.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_handle_timeout(sse: *mut TetherSse, now_ms: u64) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let now = s.at(now_ms);
        s.session.handle_timeout(now);
        Ok(TETHER_OK)
    })
}

/// Take the next transmit into `buf` (capacity `*len`), as
/// [`tether_relay_poll_transmit`](crate::relay::tether_relay_poll_transmit) does.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`]; `len` valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_poll_transmit(
    sse: *mut TetherSse,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let TetherSse {
            session, transmit, ..
        } = s;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(transmit, buf, len, |out| {
                session
                    .poll_transmit()
                    .map(|t| write_into(&TransmitLine::new(&t, &session.attempt_info()), out))
                    .is_some()
            })
        }
    })
}

/// Take the next event into `buf` (capacity `*len`).
///
/// # Safety
/// As [`tether_sse_poll_transmit`].
#[no_mangle]
pub unsafe extern "C" fn tether_sse_poll_event(
    sse: *mut TetherSse,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let TetherSse {
            session,
            event,
            peer_errors,
            ..
        } = s;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(event, buf, len, |out| {
                while let Some(e) = session.poll_event() {
                    let now = session.now();
                    let line = Line::new(&e, now, session.last_event_id());
                    if let Some(line) = line.admit(peer_errors, now) {
                        write_into(&line, out);
                        return true;
                    }
                }
                false
            })
        }
    })
}

/// When to call [`tether_sse_handle_timeout`] next, stored at `out_ms`.
///
/// # Errors
/// `TETHER_DONE` when idle.
///
/// # Safety
/// As [`tether_sse_set_wall_clock`]; `out_ms` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_sse_poll_timeout(sse: *mut TetherSse, out_ms: *mut u64) -> i32 {
    guarded!(sse, |s: &mut TetherSse| {
        let held = s.transmit.is_ready() || s.event.is_ready();
        // SAFETY: the contract is the caller's.
        unsafe { crate::poll_timeout(out_ms, held, s.now, s.session.poll_timeout()) }
    })
}
