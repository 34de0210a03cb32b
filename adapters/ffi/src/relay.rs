//! The relay session (NIP-01 over a WebSocket the host owns): `tether_relay_*`.
//!
//! Every function takes the handle first and returns a `TETHER_*` code. Socket inputs carry
//! the `epoch` of the `open` transmit they belong to; input for an epoch the session already
//! let go is ignored (and counted), input for one never handed out is
//! [`TETHER_ERR_UNKNOWN_ID`].

use std::time::Duration;

use serde_json::value::RawValue;
use tether_core::nostr::RelaySession;
use tether_core::nostr::{ChallengeId, Error, Filter, Priority, RelayConfig, SubscriptionId};
use tether_core::{Epoch, GateScope};

use crate::outbuf::Pending;
use crate::{
    deliver, instant, ptr, socket, socket_loss, Failure, Guarded, Health,
    TETHER_ERR_INVALID_ARGUMENT, TETHER_ERR_LIMIT, TETHER_ERR_NULL, TETHER_ERR_UNKNOWN_ID,
    TETHER_ERR_WRONG_STATE, TETHER_OK,
};
use tether_core::line::nostr::{Line, TransmitLine};
use tether_core::line::{write_into, Ids, Limiter};

/// Configuration of a relay session. Size-versioned: set `struct_size` to
/// `sizeof(TetherRelayConfig)`, call [`tether_relay_config_default`], change what you need,
/// pass it to [`tether_relay_new`]. Fields added in later versions go at the end; a library
/// given an older (smaller) struct uses its defaults for the fields the caller does not know.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TetherRelayConfig {
    /// `sizeof(TetherRelayConfig)` as the caller was compiled.
    pub struct_size: u32,
    /// 1: a rate-limit window survives reconnects (relays that limit per IP or pubkey);
    /// 0 (default): it belongs to the connection.
    pub gate_per_session: u32,
    /// Seed for every jittered delay: same seed and inputs, same outputs.
    pub seed: u64,
    /// Most REQs open at once (NIP-11 `max_subscriptions`); 0 (default): none until learned.
    pub max_subscriptions: u64,
    /// Largest inbound frame decoded, in bytes (default 4 MiB; at least 1).
    pub max_frame: u64,
    /// A REQ with no EOSE, CLOSED or event after this long is retried (default 30 000 ms;
    /// at least 1).
    pub eose_timeout_ms: u64,
    /// A published event with no OK after this long is re-sent (default 10 000 ms; at
    /// least 1).
    pub publish_timeout_ms: u64,
    /// Ask for the relay's NIP-11 document (a `fetch_info` transmit) when a socket opens
    /// and it was last asked for this long ago or never; 0 (default): never asked. Pass
    /// what the host fetched to [`tether_relay_apply_relay_info`].
    pub info_refresh_ms: u64,
}

/// Size of the first version of [`TetherRelayConfig`], which ended at
/// `publish_timeout_ms`.
const CONFIG_V1: usize = std::mem::offset_of!(TetherRelayConfig, info_refresh_ms);

impl TetherRelayConfig {
    pub(crate) fn defaults() -> Self {
        let core = RelayConfig::default();
        TetherRelayConfig {
            struct_size: CONFIG_V1 as u32,
            gate_per_session: 0,
            seed: 0,
            max_subscriptions: 0,
            max_frame: core.max_frame as u64,
            eose_timeout_ms: core.eose_timeout.as_millis() as u64,
            publish_timeout_ms: core.publish_timeout.as_millis() as u64,
            info_refresh_ms: 0,
        }
    }

    /// The host's config (a size-versioned struct) as the core's, and the seed.
    ///
    /// # Safety
    /// `config` is null or valid for `config->struct_size` bytes.
    pub(crate) unsafe fn read(config: *const Self) -> Result<(RelayConfig, u64), Failure> {
        // SAFETY: the contract is the caller's.
        let host = unsafe { ptr::versioned(config, Self::defaults(), CONFIG_V1) }
            .map_err(|code| Failure::arg(code, "config"))?;
        Ok((host.to_core()?, host.seed))
    }

    pub(crate) fn to_core(self) -> Result<RelayConfig, Failure> {
        let bad = |what: &str| Failure::new(TETHER_ERR_INVALID_ARGUMENT, what.to_owned());
        let mut config = RelayConfig::default();
        config.gate_scope = match self.gate_per_session {
            0 => GateScope::Connection,
            1 => GateScope::Session,
            _ => return Err(bad("gate_per_session must be 0 or 1")),
        };
        config.max_subscriptions = match self.max_subscriptions {
            0 => None,
            n => Some(usize::try_from(n).map_err(|_| bad("max_subscriptions is too large"))?),
        };
        if self.max_frame == 0 || self.eose_timeout_ms == 0 || self.publish_timeout_ms == 0 {
            return Err(bad("max_frame and the timeouts must be at least 1"));
        }
        config.max_frame = usize::try_from(self.max_frame).unwrap_or(usize::MAX);
        config.eose_timeout = Duration::from_millis(self.eose_timeout_ms);
        config.publish_timeout = Duration::from_millis(self.publish_timeout_ms);
        config.info_refresh =
            (self.info_refresh_ms > 0).then(|| Duration::from_millis(self.info_refresh_ms));
        Ok(config)
    }
}

/// An opaque relay session; create with [`tether_relay_new`], free with
/// [`tether_relay_free`].
#[derive(Debug)]
pub struct TetherRelay {
    session: RelaySession,
    transmit: Pending,
    event: Pending,
    /// The latest `now_ms` seen: what `poll_timeout` says while output is held.
    now: u64,
    /// How many `peer_error` lines a second reach the host.
    peer_errors: Limiter,
    health: Health,
}

impl Guarded for TetherRelay {
    fn health(&mut self) -> &mut Health {
        &mut self.health
    }
    fn health_ref(&self) -> &Health {
        &self.health
    }
}

impl TetherRelay {
    /// A handle around `session` (new or restored), its clock at `now_ms`.
    pub(crate) fn from_session(session: RelaySession, now_ms: u64) -> Self {
        TetherRelay {
            session,
            transmit: Pending::default(),
            event: Pending::default(),
            now: now_ms,
            peer_errors: Limiter::default(),
            health: Health::default(),
        }
    }

    /// The session.
    pub(crate) fn session(&self) -> &RelaySession {
        &self.session
    }

    fn at(&mut self, now_ms: u64) -> tether_core::Instant {
        self.now = self.now.max(now_ms);
        instant(now_ms)
    }
}

/// Fill `config` with the defaults for its `struct_size` (set that first).
///
/// # Errors
/// `TETHER_ERR_NULL`; `TETHER_ERR_INVALID_ARGUMENT` for a `struct_size` smaller than the
/// first version.
///
/// # Safety
/// `config` is null or valid for `config->struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_config_default(config: *mut TetherRelayConfig) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::write_versioned(config, TetherRelayConfig::defaults(), CONFIG_V1) }
}

/// Create a disconnected relay session and store its handle at `out`.
///
/// # Errors
/// `TETHER_ERR_NULL`; `TETHER_ERR_INVALID_ARGUMENT` for a bad size or field value, or
/// non-zero bytes past the fields this library knows.
///
/// # Safety
/// `config` is null or valid for `config->struct_size` bytes; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_new(
    config: *const TetherRelayConfig,
    out: *mut *mut TetherRelay,
) -> i32 {
    let make = || {
        // SAFETY: the contract is the caller's.
        let (core, seed) = unsafe { TetherRelayConfig::read(config) }.map_err(|f| f.code)?;
        Ok(TetherRelay::from_session(RelaySession::new(core, seed), 0))
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::construct(out, make) }
}

/// Free a session; null is a no-op. Poisoned handles are freed too.
///
/// # Safety
/// `relay` is null or a live handle from [`tether_relay_new`], not used again.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_free(relay: *mut TetherRelay) {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::free(relay) }
}

/// Copy the message of the last failed call on `relay` into `buf` (capacity `*len`); `*len`
/// becomes its length. Empty when nothing failed yet.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_BUFFER_TOO_SMALL` (with the length needed in `*len`).
///
/// # Safety
/// `relay` is null or live; `len` is null or valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_last_error(
    relay: *const TetherRelay,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::last_error(relay, buf, len) }
}

/// The wall clock read `unix_secs` at `now_ms` (it bounds catch-up `since`).
///
/// # Safety
/// `relay` is null or a live handle used by no other thread during the call.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_set_wall_clock(
    relay: *mut TetherRelay,
    now_ms: u64,
    unix_secs: u64,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        r.session.set_wall_clock(now, unix_secs);
        Ok(TETHER_OK)
    })
}

/// Start connecting, and keep reconnecting until [`tether_relay_disconnect`].
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_connect(relay: *mut TetherRelay, now_ms: u64) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        r.session.connect(now);
        Ok(TETHER_OK)
    })
}

/// Stop: close the socket, cancel the reconnect and every retry (queued transmits are
/// dropped). Subscriptions stay registered for a later connect.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_disconnect(relay: *mut TetherRelay, now_ms: u64) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        // The core drops its queued transmits; one held for a larger buffer goes too.
        r.transmit.clear();
        r.session.disconnect(now);
        Ok(TETHER_OK)
    })
}

/// The application's lifecycle: a `TETHER_LIFECYCLE_*` `signal` (suspended, resumed, the
/// network changed or gone, online, offline). Wire the platform's signals here: scene phase
/// and sleep/wake, `NWPathMonitor`, `ConnectivityManager`. After a resume a socket that died
/// meanwhile is found within 5 s (a ping, then `disconnected` with `why` `resume_probe`);
/// offline, no `open` is asked for.
///
/// # Errors
/// `TETHER_ERR_NULL`; `TETHER_ERR_INVALID_ARGUMENT` for an unknown `signal`.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_lifecycle(
    relay: *mut TetherRelay,
    now_ms: u64,
    signal: u32,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let Some(signal) = crate::lifecycle(signal) else {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("{signal} is not a TETHER_LIFECYCLE_* code"),
            ));
        };
        let now = r.at(now_ms);
        r.session.handle_lifecycle(now, signal);
        Ok(TETHER_OK)
    })
}

/// Register a subscription: `filters` is a JSON array of NIP-01 filter objects (`len`
/// bytes of UTF-8); its id is stored at `out_sub`. Higher `priority` replays first.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_UTF8`, `TETHER_ERR_INVALID_ARGUMENT` (not an array of
/// objects, or empty), `TETHER_ERR_LIMIT` (too many subscriptions).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`]; `filters` valid for `len` bytes; `out_sub` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_subscribe(
    relay: *mut TetherRelay,
    now_ms: u64,
    filters: *const u8,
    len: usize,
    priority: i32,
    out_sub: *mut u64,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        if out_sub.is_null() {
            return Err(Failure::arg(TETHER_ERR_NULL, "out_sub"));
        }
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(filters, len) }.map_err(|c| Failure::arg(c, "filters"))?;
        let filters = filter_array(text)?;
        let now = r.at(now_ms);
        let id = r
            .session
            .subscribe(now, filters, Priority(priority))
            .map_err(|e| failure(&e))?;
        // SAFETY: non-null (checked above) and writable by the contract.
        let _ = unsafe { ptr::write(out_sub, id.0) };
        Ok(TETHER_OK)
    })
}

/// Drop subscription `sub`; a CLOSE goes out if its REQ is open.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID` when it is not registered (never was, or already `closed`).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_unsubscribe(
    relay: *mut TetherRelay,
    now_ms: u64,
    sub: u64,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        r.session
            .unsubscribe(now, SubscriptionId(sub))
            .map_err(|e| failure(&e))?;
        Ok(TETHER_OK)
    })
}

/// Publish a signed event (a JSON object, `len` bytes); its 32-byte id is written to
/// `out_id` unless that is null. Sent now when connected, else after the next connect.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_UTF8`, `TETHER_ERR_INVALID_ARGUMENT` (not an event),
/// `TETHER_ERR_LIMIT` (outbox full, or already publishing it).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`]; `event` valid for `len` bytes; `out_id` null or
/// writable for 32 bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_publish(
    relay: *mut TetherRelay,
    now_ms: u64,
    event: *const u8,
    len: usize,
    out_id: *mut u8,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(event, len) }.map_err(|c| Failure::arg(c, "event"))?;
        let now = r.at(now_ms);
        let id = r.session.publish(now, text).map_err(|e| failure(&e))?;
        // SAFETY: null or writable by the contract.
        unsafe { ptr::write_opt(out_id.cast::<[u8; 32]>(), id.0) };
        Ok(TETHER_OK)
    })
}

/// Apply the relay's NIP-11 information document (`len` bytes, as fetched): the limits it
/// declares (`max_subscriptions`, `max_message_length`, `max_subid_length`, `max_limit`,
/// `auth_required`, NIP-77 in `supported_nips`) take effect, and `buf` (capacity `*len`, at
/// least [`TETHER_APPLIED_MAX`](crate::info::TETHER_APPLIED_MAX)) gets what is in force:
/// `{"subscription_limit":N|null,"limit_is_declared":B,"max_message_length":N|null,
/// "max_subid_length":N|null,"auth_first":B,"max_limit":N|null}`.
///
/// # Errors
/// [`TETHER_INFO_UNREADABLE`](crate::info::TETHER_INFO_UNREADABLE) (positive: the peer's
/// document is not one; nothing changed; `buf` holds `{"error":"..."}`),
/// `TETHER_ERR_BUFFER_TOO_SMALL` (nothing applied; `*len` says the capacity needed),
/// `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`]; `document` valid for `document_len` bytes; `len`
/// valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_apply_relay_info(
    relay: *mut TetherRelay,
    now_ms: u64,
    document: *const u8,
    document_len: usize,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        // SAFETY: the contract is the caller's.
        unsafe {
            crate::info::apply_document(document, document_len, buf, len, |info| {
                Ok(r.session.apply_relay_info(now, info))
            })
        }
    })
}

/// Answer the NIP-42 challenge `challenge` (the `id` of an `auth` event) with a
/// signed kind 22242 event (`len` bytes of JSON); its id goes to `out_id` unless null.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (not an event), `TETHER_ERR_WRONG_STATE` (no socket open,
/// or the challenge was superseded), and the pointer errors.
///
/// # Safety
/// As [`tether_relay_publish`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_authenticate(
    relay: *mut TetherRelay,
    now_ms: u64,
    challenge: u64,
    event: *const u8,
    len: usize,
    out_id: *mut u8,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(event, len) }.map_err(|c| Failure::arg(c, "event"))?;
        let now = r.at(now_ms);
        let id = r
            .session
            .authenticate(now, ChallengeId(challenge), text)
            .map_err(|e| failure(&e))?;
        // SAFETY: null or writable by the contract.
        unsafe { ptr::write_opt(out_id.cast::<[u8; 32]>(), id.0) };
        Ok(TETHER_OK)
    })
}

/// The socket of `epoch` opened.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID` (epoch never handed out), `TETHER_ERR_WRONG_STATE` (second open).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_open(
    relay: *mut TetherRelay,
    now_ms: u64,
    epoch: u64,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        socket(r.session.handle_open(now, Epoch(epoch)))
    })
}

/// The socket of `epoch` closed or failed without the application asking: `loss` is a
/// `TETHER_LOSS_*` code, `close_code` the peer's WebSocket close code or -1. A reconnect is
/// scheduled.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (unknown `loss`), `TETHER_ERR_UNKNOWN_ID`.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_close(
    relay: *mut TetherRelay,
    now_ms: u64,
    epoch: u64,
    loss: u32,
    close_code: i32,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let Some(loss) = socket_loss(loss, close_code) else {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("{loss} is not a TETHER_LOSS_* code"),
            ));
        };
        let now = r.at(now_ms);
        socket(r.session.handle_close(now, Epoch(epoch), loss))
    })
}

/// A text frame (`len` bytes of UTF-8) arrived on `epoch`. Malformed frames are the peer's
/// doing: they become `peer_error` events, not error codes.
///
/// # Errors
/// `TETHER_ERR_NULL`, `TETHER_ERR_UTF8` (a WebSocket text frame is always UTF-8),
/// `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_WRONG_STATE` (before the open).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`]; `text` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_frame(
    relay: *mut TetherRelay,
    now_ms: u64,
    epoch: u64,
    text: *const u8,
    len: usize,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(text, len) }.map_err(|c| Failure::arg(c, "frame"))?;
        let now = r.at(now_ms);
        socket(r.session.handle_frame(now, Epoch(epoch), text))
    })
}

/// A binary frame of `len` bytes arrived on `epoch` (counted and ignored: NIP-01 is text).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_binary(
    relay: *mut TetherRelay,
    now_ms: u64,
    epoch: u64,
    len: usize,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        socket(r.session.handle_binary(now, Epoch(epoch), len))
    })
}

/// A pong (or ping) arrived on `epoch`.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_pong(
    relay: *mut TetherRelay,
    now_ms: u64,
    epoch: u64,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        socket(r.session.handle_pong(now, Epoch(epoch)))
    })
}

/// The host stopped (`paused` non-zero) or resumed reading the socket, for backpressure;
/// the liveness watchdog is suspended meanwhile.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_read_paused(
    relay: *mut TetherRelay,
    now_ms: u64,
    paused: u32,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        r.session.handle_read_paused(now, paused != 0);
        Ok(TETHER_OK)
    })
}

/// Time passed: fire what is due at `now_ms` (a fresh reading, not the deadline slept to).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_handle_timeout(relay: *mut TetherRelay, now_ms: u64) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let now = r.at(now_ms);
        r.session.handle_timeout(now);
        Ok(TETHER_OK)
    })
}

/// Take the next transmit (a JSON object, see the crate docs) into `buf` of capacity `*len`.
///
/// # Errors
/// `TETHER_DONE` when none is queued; `TETHER_ERR_BUFFER_TOO_SMALL` with the length needed
/// in `*len` (the transmit stays queued); `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_relay_set_wall_clock`]; `len` valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_poll_transmit(
    relay: *mut TetherRelay,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let TetherRelay {
            session, transmit, ..
        } = r;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(transmit, buf, len, |out| {
                session
                    .poll_transmit()
                    .map(|t| write_into(&TransmitLine::new(&t, None), out))
                    .is_some()
            })
        }
    })
}

/// Take the next event (a JSON object, see the crate docs) into `buf` of capacity `*len`.
///
/// # Errors
/// As [`tether_relay_poll_transmit`].
///
/// # Safety
/// As [`tether_relay_poll_transmit`].
#[no_mangle]
pub unsafe extern "C" fn tether_relay_poll_event(
    relay: *mut TetherRelay,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let TetherRelay {
            session,
            event,
            peer_errors,
            ..
        } = r;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(event, buf, len, |out| {
                while let Some(e) = session.poll_event() {
                    let now = session.now();
                    let line = Line::relay_event(&e, now, None, &Ids);
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

/// When to call [`tether_relay_handle_timeout`] next, in `now_ms` milliseconds, stored at
/// `out_ms`: the latest `now_ms` while output is queued.
///
/// # Errors
/// `TETHER_DONE` when nothing will happen without an input (`out_ms` untouched).
///
/// # Safety
/// As [`tether_relay_set_wall_clock`]; `out_ms` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_relay_poll_timeout(
    relay: *mut TetherRelay,
    out_ms: *mut u64,
) -> i32 {
    guarded!(relay, |r: &mut TetherRelay| {
        let held = r.transmit.is_ready() || r.event.is_ready();
        // SAFETY: the contract is the caller's.
        unsafe { crate::poll_timeout(out_ms, held, r.now, r.session.poll_timeout()) }
    })
}

/// A JSON array of NIP-01 filter objects, as `*_subscribe` takes it.
pub(crate) fn filter_array(text: &str) -> Result<Vec<Filter>, Failure> {
    let list: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| {
        Failure::new(
            TETHER_ERR_INVALID_ARGUMENT,
            format!("filters are not a JSON array: {e}"),
        )
    })?;
    filters(&list)
}

/// Each raw filter object as a [`Filter`].
pub(crate) fn filters(list: &[&RawValue]) -> Result<Vec<Filter>, Failure> {
    list.iter()
        .map(|raw| Filter::new(raw.get()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failure(&Error::InvalidFilter(e)))
}

/// The code for the application's mistake `e`.
pub(crate) fn failure(e: &Error) -> Failure {
    let code = match e {
        Error::UnknownSubscription(_) => TETHER_ERR_UNKNOWN_ID,
        Error::TooManySubscriptions { .. }
        | Error::OutboxFull { .. }
        | Error::AlreadyPublishing(_) => TETHER_ERR_LIMIT,
        Error::NotConnected | Error::StaleChallenge(_) => TETHER_ERR_WRONG_STATE,
        _ => TETHER_ERR_INVALID_ARGUMENT,
    };
    Failure::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TETHER_ERR_PANIC, TETHER_ERR_POISONED};

    #[test]
    fn a_panic_poisons_the_handle_and_only_free_still_works() {
        let mut config = TetherRelayConfig::defaults();
        let mut relay: *mut TetherRelay = std::ptr::null_mut();
        let mut buf = [0u8; 64];
        let mut len = buf.len();
        let mut at = 0u64;
        // SAFETY: valid pointers to locals; the handle is freed once at the end.
        unsafe {
            assert_eq!(tether_relay_config_default(&mut config), TETHER_OK);
            assert_eq!(tether_relay_new(&config, &mut relay), TETHER_OK);
            assert_eq!(tether_relay_connect(relay, 0), TETHER_OK);
            let code = ptr::guard(relay, |_| -> Result<i32, Failure> {
                panic!("a bug inside the library")
            });
            assert_eq!(code, TETHER_ERR_PANIC);
            assert_eq!(tether_relay_connect(relay, 1), TETHER_ERR_POISONED);
            assert_eq!(
                tether_relay_poll_transmit(relay, buf.as_mut_ptr(), &mut len),
                TETHER_ERR_POISONED
            );
            assert_eq!(
                tether_relay_poll_timeout(relay, &mut at),
                TETHER_ERR_POISONED
            );
            assert_eq!(
                tether_relay_last_error(relay, buf.as_mut_ptr(), &mut len),
                TETHER_OK
            );
            assert_eq!(&buf[..len], b"a call panicked; the handle is poisoned");
            tether_relay_free(relay);
        }
    }
}
