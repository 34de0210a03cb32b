//! The relay pool (many relays, one logical subscription across them, dedup, outcomes,
//! verification): `tether_pool_*`.
//!
//! The host owns one WebSocket per relay. Every transmit names the `relay` it is for, and
//! every socket input takes the relay and the `epoch` of the `open` transmit it belongs to,
//! with the relay session's rule: input for an epoch that relay let go is ignored, input for
//! one never handed out is [`TETHER_ERR_UNKNOWN_ID`]. Relay ids are the pool's (`add_relay`
//! hands them out; a removed relay's id is reused by a later one); subscription ids are
//! never reused.
//!
//! With `verify` set, an event is delivered only after the host checked it: poll checks
//! with [`tether_pool_poll_verify`], run them anywhere ([`tether_verify_event`](crate::verify::tether_verify_event)
//! is thread-safe), and answer each with [`tether_pool_handle_verified`], in any order.

use std::ffi::{c_char, CStr};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tether_core::nostr::ChallengeId;
use tether_core::nostr::Filter;
use tether_core::pool::{
    PoolCheckpoint, PoolConfig, PoolError, RelayId, RelayPool, SubId, VerifyTicket,
};
use tether_core::Epoch;

use crate::outbuf::Pending;
use crate::relay::TetherRelayConfig;
use crate::verify::verdict_reason;
use crate::{
    deliver, instant, ptr, socket_failure, socket_loss, Failure, Guarded, Health,
    TETHER_ERR_INVALID_ARGUMENT, TETHER_ERR_LIMIT, TETHER_ERR_NULL, TETHER_ERR_UNKNOWN_ID,
    TETHER_OK,
};
use tether_core::line::nostr::{Line, TransmitLine, VerifyLine};
use tether_core::line::{write_into, Ids, Label, Limiter};

/// Configuration of a pool. Size-versioned like [`TetherRelayConfig`]: set `struct_size` to
/// `sizeof(TetherPoolConfig)`, call [`tether_pool_config_default`], change what you need.
/// The first seven fields configure every relay's session, as in [`TetherRelayConfig`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TetherPoolConfig {
    /// `sizeof(TetherPoolConfig)` as the caller was compiled.
    pub struct_size: u32,
    /// 1: a relay's rate-limit window survives its reconnects; 0 (default): per connection.
    pub gate_per_session: u32,
    /// Seed for every relay's jittered delays: same seed and inputs, same outputs.
    pub seed: u64,
    /// Most REQs open at once per relay; 0 (default): none until learned.
    pub max_subscriptions: u64,
    /// Largest inbound frame decoded, in bytes (default 4 MiB; at least 1).
    pub max_frame: u64,
    /// A relay's REQ with no answer after this long is retried (default 30 000 ms).
    pub eose_timeout_ms: u64,
    /// A published event with no OK after this long is re-sent (default 10 000 ms).
    pub publish_timeout_ms: u64,
    /// Ask for each relay's NIP-11 document (`fetch_info`) at most this often; 0
    /// (default): never asked. Pass it to [`tether_pool_apply_relay_info`].
    pub info_refresh_ms: u64,
    /// 1: deliver an event only after the host verified it ([`tether_pool_poll_verify`]);
    /// 0 (default): deliver as received.
    pub verify: u32,
    /// Most event copies under verification at once, pool-wide (default 4 096, at least 1);
    /// a new event past it is dropped and counted (`unverified_dropped`).
    pub max_unverified: u32,
    /// A subscription's `complete` is reported at the latest this long after it was made
    /// (default 10 000 ms); relays without EOSE by then are `missing`.
    pub eose_deadline_ms: u64,
    /// After the first relay's EOSE, give the others this long before `complete`; 0
    /// (default): wait for the full deadline.
    pub after_first_eose_ms: u64,
    /// A publish's `publish_done` comes at the latest this long after it (default 30 000 ms).
    pub publish_deadline_ms: u64,
    /// Most relays (default 10 000).
    pub max_relays: u32,
    /// Most logical subscriptions (default 10 000).
    pub max_pool_subscriptions: u32,
    /// Event ids remembered per subscription for dedup (default 10 000, at least 1).
    pub dedup_capacity: u32,
    /// Relays remembered per event id (default 8).
    pub seen_on_max: u32,
    /// Most handshakes in flight at once (default 32, at least 1); further relays wait their
    /// turn in arrival order (version 2: a caller compiled before it gets the default).
    pub max_connecting: u32,
    /// Padding of version 2, ignored: a version-2 caller's `sizeof` covers it.
    pub reserved: u32,
    /// Routing by people ([`tether_pool_subscribe_outbox`]): most relays it connects at
    /// once, the indexers included (default 20, at least 1; version 3 from here on).
    pub outbox_max_relays: u32,
    /// Routing by people: how many relays each person is asked on (default 2, at least 1).
    pub outbox_redundancy: u32,
    /// Routing by people: the indexers relay lists are fetched from, as a NUL-terminated
    /// JSON array of `ws://`/`wss://` URLs, read during the call only; null (default): the
    /// well-known ones (purplepag.es, user.kindpag.es, indexer.coracle.social). An indexer
    /// on loopback or a private network lets the lists it serves name private relays.
    pub outbox_indexers: *const c_char,
}

/// Size of the first version of [`TetherPoolConfig`], which ended before `max_connecting`.
const CONFIG_V1: usize = std::mem::offset_of!(TetherPoolConfig, max_connecting);

impl TetherPoolConfig {
    fn defaults() -> Self {
        let core = PoolConfig::default();
        let relay = TetherRelayConfig::defaults();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let small = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        TetherPoolConfig {
            struct_size: CONFIG_V1 as u32,
            gate_per_session: relay.gate_per_session,
            seed: 0,
            max_subscriptions: relay.max_subscriptions,
            max_frame: relay.max_frame,
            eose_timeout_ms: relay.eose_timeout_ms,
            publish_timeout_ms: relay.publish_timeout_ms,
            info_refresh_ms: 0,
            verify: u32::from(core.verify),
            max_unverified: small(core.max_unverified),
            eose_deadline_ms: ms(core.eose_deadline),
            after_first_eose_ms: core.after_first_eose.map_or(0, ms),
            publish_deadline_ms: ms(core.publish_deadline),
            max_relays: small(core.max_relays),
            max_pool_subscriptions: small(core.max_subscriptions),
            dedup_capacity: small(core.dedup_capacity),
            seen_on_max: small(core.seen_on_max),
            max_connecting: small(core.max_connecting),
            reserved: 0,
            outbox_max_relays: small(core.router.max_relays),
            outbox_redundancy: small(core.router.redundancy),
            outbox_indexers: std::ptr::null(),
        }
    }

    /// The host's config as the core's, and the seed.
    ///
    /// # Safety
    /// `config` is null or valid for `config->struct_size` bytes, and its `outbox_indexers`
    /// is null or a NUL-terminated string.
    unsafe fn read(config: *const Self) -> Result<(PoolConfig, u64), Failure> {
        // SAFETY: the contract is the caller's.
        let host = unsafe { ptr::versioned(config, Self::defaults(), CONFIG_V1) }
            .map_err(|code| Failure::arg(code, "config"))?;
        let mut core = host.to_core()?;
        // SAFETY: the contract is the caller's.
        if let Some(indexers) = unsafe { indexers(host.outbox_indexers) }? {
            core.router.set_indexers(indexers);
        }
        Ok((core, host.seed))
    }

    fn to_core(self) -> Result<PoolConfig, Failure> {
        let bad = |what: &str| Failure::new(TETHER_ERR_INVALID_ARGUMENT, what.to_owned());
        let relay = TetherRelayConfig {
            struct_size: 0,
            gate_per_session: self.gate_per_session,
            seed: self.seed,
            max_subscriptions: self.max_subscriptions,
            max_frame: self.max_frame,
            eose_timeout_ms: self.eose_timeout_ms,
            publish_timeout_ms: self.publish_timeout_ms,
            info_refresh_ms: self.info_refresh_ms,
        };
        if self.verify > 1 {
            return Err(bad("verify must be 0 or 1"));
        }
        if self.eose_deadline_ms == 0 || self.publish_deadline_ms == 0 {
            return Err(bad("the deadlines must be at least 1"));
        }
        if self.max_unverified == 0 || self.dedup_capacity == 0 || self.max_connecting == 0 {
            return Err(bad(
                "max_unverified, dedup_capacity and max_connecting must be at least 1",
            ));
        }
        let mut config = PoolConfig::default();
        config.relay = relay.to_core()?;
        config.verify = self.verify == 1;
        config.max_unverified = self.max_unverified as usize;
        config.eose_deadline = Duration::from_millis(self.eose_deadline_ms);
        config.after_first_eose =
            (self.after_first_eose_ms > 0).then(|| Duration::from_millis(self.after_first_eose_ms));
        config.publish_deadline = Duration::from_millis(self.publish_deadline_ms);
        config.max_relays = self.max_relays as usize;
        config.max_subscriptions = self.max_pool_subscriptions as usize;
        config.dedup_capacity = self.dedup_capacity as usize;
        config.seen_on_max = self.seen_on_max as usize;
        config.max_connecting = self.max_connecting as usize;
        if self.outbox_max_relays == 0 || self.outbox_redundancy == 0 {
            return Err(bad(
                "outbox_max_relays and outbox_redundancy must be at least 1",
            ));
        }
        config.router.max_relays = self.outbox_max_relays as usize;
        config.router.redundancy = self.outbox_redundancy as usize;
        Ok(config)
    }
}

/// The indexer URLs of `outbox_indexers`, `None` for null.
///
/// # Safety
/// `text` is null or a NUL-terminated string.
unsafe fn indexers(text: *const c_char) -> Result<Option<Vec<String>>, Failure> {
    if text.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null, and NUL-terminated by this function's contract.
    let text = unsafe { CStr::from_ptr(text) }
        .to_str()
        .map_err(|_| Failure::arg(crate::TETHER_ERR_UTF8, "outbox_indexers"))?;
    let urls: Vec<String> = serde_json::from_str(text).map_err(|e| {
        Failure::new(
            TETHER_ERR_INVALID_ARGUMENT,
            format!("outbox_indexers is not a JSON array of URLs: {e}"),
        )
    })?;
    for url in &urls {
        tether_driver::url::check_ws_url(url).map_err(|e| {
            Failure::new(TETHER_ERR_INVALID_ARGUMENT, format!("outbox_indexers: {e}"))
        })?;
    }
    Ok(Some(urls))
}

/// An opaque pool; create with [`tether_pool_new`] (or restore with
/// [`tether_pool_restore`]), free with [`tether_pool_free`].
#[derive(Debug)]
pub struct TetherPool {
    pool: RelayPool,
    transmit: Pending,
    event: Pending,
    verify: Pending,
    /// The latest `now_ms` seen: what `poll_timeout` says while output is held.
    now: u64,
    /// How many `peer_error` and `invalid` lines a second reach the host.
    peer_errors: Limiter,
    invalid: Limiter,
    health: Health,
}

impl Guarded for TetherPool {
    fn health(&mut self) -> &mut Health {
        &mut self.health
    }
    fn health_ref(&self) -> &Health {
        &self.health
    }
}

impl TetherPool {
    fn from_pool(pool: RelayPool, now_ms: u64) -> Self {
        TetherPool {
            pool,
            transmit: Pending::default(),
            event: Pending::default(),
            verify: Pending::default(),
            now: now_ms,
            peer_errors: Limiter::default(),
            invalid: Limiter::default(),
            health: Health::default(),
        }
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
pub unsafe extern "C" fn tether_pool_config_default(config: *mut TetherPoolConfig) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::write_versioned(config, TetherPoolConfig::defaults(), CONFIG_V1) }
}

/// Create an empty pool and store its handle at `out`.
///
/// # Errors
/// `TETHER_ERR_NULL`; `TETHER_ERR_INVALID_ARGUMENT` for a bad size or field value.
///
/// # Safety
/// `config` is null or valid for `config->struct_size` bytes, its `outbox_indexers` null or
/// a NUL-terminated string; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_new(
    config: *const TetherPoolConfig,
    out: *mut *mut TetherPool,
) -> i32 {
    let make = || {
        // SAFETY: the contract is the caller's.
        let (core, seed) = unsafe { TetherPoolConfig::read(config) }.map_err(|f| f.code)?;
        Ok(TetherPool::from_pool(RelayPool::new(core, seed), 0))
    };
    // SAFETY: the contract is the caller's.
    unsafe { ptr::construct(out, make) }
}

/// Free a pool; null is a no-op. Poisoned handles are freed too.
///
/// # Safety
/// `pool` is null or a live handle, not used again.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_free(pool: *mut TetherPool) {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::free(pool) }
}

/// Copy the message of the last failed call on `pool` into `buf` (capacity `*len`).
///
/// # Safety
/// `pool` is null or live; `len` is null or valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_last_error(
    pool: *const TetherPool,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { ptr::last_error(pool, buf, len) }
}

/// The wall clock read `unix_secs` at `now_ms`; passed to every relay (catch-up windows).
///
/// # Safety
/// `pool` is null or a live handle used by no other thread during the call.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_set_wall_clock(
    pool: *mut TetherPool,
    now_ms: u64,
    unix_secs: u64,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        p.pool.set_wall_clock(now, unix_secs);
        Ok(TETHER_OK)
    })
}

/// The application's lifecycle (a `TETHER_LIFECYCLE_*` `signal`), applied to every relay.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` for an unknown `signal`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_lifecycle(
    pool: *mut TetherPool,
    now_ms: u64,
    signal: u32,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let Some(signal) = crate::lifecycle(signal) else {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("{signal} is not a TETHER_LIFECYCLE_* code"),
            ));
        };
        let now = p.at(now_ms);
        p.pool.handle_lifecycle(now, signal);
        Ok(TETHER_OK)
    })
}

/// Add a relay (the host keeps its URL by the id stored at `out_relay`). It connects at
/// once: an `open` transmit for it follows, and every subscription made for all relays is
/// opened on it.
///
/// # Errors
/// `TETHER_ERR_LIMIT` past `max_relays`; `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `out_relay` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_add_relay(
    pool: *mut TetherPool,
    now_ms: u64,
    out_relay: *mut u32,
) -> i32 {
    let add = |pool: &mut RelayPool, now| pool.add_relay(now).map_err(|e| pool_failure(&e));
    // SAFETY: the contract is the caller's.
    unsafe { adding(pool, now_ms, out_relay, add) }
}

/// Add the relay at `url` (UTF-8, `len` bytes), or find the one the pool holds there
/// already, routing's included: one relay and one socket per URL, normalised by the rule
/// relay lists' URLs follow. The id goes to `out_relay`. It connects at once, as with
/// [`tether_pool_add_relay`]; a relay routing opened becomes the application's.
///
/// # Errors
/// `TETHER_ERR_INVALID_URL` for no `ws://` or `wss://` relay URL by the core's rule (add such
/// a relay with [`tether_pool_add_relay`]), `TETHER_ERR_LIMIT` past `max_relays`, and the
/// pointer errors.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `url` valid for `len` bytes; `out_relay` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_add_relay_url(
    pool: *mut TetherPool,
    now_ms: u64,
    url: *const u8,
    len: usize,
    out_relay: *mut u32,
) -> i32 {
    let add = |pool: &mut RelayPool, now| {
        // SAFETY: the contract is the caller's.
        let url = unsafe { ptr::text(url, len) }.map_err(|c| Failure::arg(c, "url"))?;
        pool.add_relay_url(now, url).map_err(|e| pool_failure(&e))
    };
    // SAFETY: the contract is the caller's.
    unsafe { adding(pool, now_ms, out_relay, add) }
}

/// The body of an entry point that adds a relay: the relay `add` makes, its id to
/// `out_relay`.
///
/// # Safety
/// As [`tether_pool_add_relay`].
unsafe fn adding(
    pool: *mut TetherPool,
    now_ms: u64,
    out_relay: *mut u32,
    add: impl FnOnce(&mut RelayPool, tether_core::Instant) -> Result<RelayId, Failure>,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        if out_relay.is_null() {
            return Err(Failure::arg(TETHER_ERR_NULL, "out_relay"));
        }
        let now = p.at(now_ms);
        let relay = add(&mut p.pool, now)?;
        // SAFETY: non-null (checked above) and writable by the contract.
        let _ = unsafe { ptr::write(out_relay, relay.0) };
        Ok(TETHER_OK)
    })
}

/// Name the URL (UTF-8, `len` bytes) of a relay the pool holds without one: after
/// [`tether_pool_restore`], each relay the application added (a checkpoint never saves an
/// application's URL, which may carry credentials). It is then the one relay at that URL:
/// routing by people asks it on its socket rather than opening a second. Naming a relay by
/// the URL it has does nothing.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`; `TETHER_ERR_INVALID_URL` for no relay URL by the core's rule;
/// `TETHER_ERR_INVALID_ARGUMENT` when the relay has another URL or another relay has this
/// one; the pointer errors.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `url` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_name_relay(
    pool: *mut TetherPool,
    relay: u32,
    url: *const u8,
    len: usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let url = unsafe { ptr::text(url, len) }.map_err(|c| Failure::arg(c, "url"))?;
        p.pool
            .name_relay(RelayId(relay), url)
            .map_err(|e| pool_failure(&e))?;
        Ok(TETHER_OK)
    })
}

/// Remove a relay: its socket is closed (a `close` transmit) and every subscription it
/// served reports it `removed` if its outcome is still open.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_remove_relay(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        p.pool
            .remove_relay(now, RelayId(relay))
            .map_err(|e| pool_failure(&e))?;
        Ok(TETHER_OK)
    })
}

/// Subscribe on every relay, present and future, with `filters` (a JSON array of NIP-01
/// filter objects, `len` bytes); the subscription's id goes to `out_sub`.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (not an array of filter objects, or empty),
/// `TETHER_ERR_LIMIT`, and the pointer errors.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `filters` valid for `len` bytes; `out_sub` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_subscribe(
    pool: *mut TetherPool,
    now_ms: u64,
    filters: *const u8,
    len: usize,
    out_sub: *mut u64,
) -> i32 {
    let subscribe = |pool: &mut RelayPool, now, text: &str| {
        let filters = crate::relay::filter_array(text)?;
        pool.subscribe(now, filters).map_err(|e| pool_failure(&e))
    };
    // SAFETY: the contract is the caller's.
    unsafe { subscribing(pool, now_ms, (filters, len, "filters"), out_sub, subscribe) }
}

/// The body of a subscribing entry point: the host's `input` text (pointer, length, and
/// its name in errors) made a subscription by `subscribe`, whose id goes to `out_sub`.
///
/// # Safety
/// As [`tether_pool_subscribe`], for `input` and `out_sub`.
unsafe fn subscribing(
    pool: *mut TetherPool,
    now_ms: u64,
    (input, len, what): (*const u8, usize, &'static str),
    out_sub: *mut u64,
    subscribe: impl FnOnce(&mut RelayPool, tether_core::Instant, &str) -> Result<SubId, Failure>,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        if out_sub.is_null() {
            return Err(Failure::arg(TETHER_ERR_NULL, "out_sub"));
        }
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(input, len) }.map_err(|c| Failure::arg(c, what))?;
        let now = p.at(now_ms);
        let sub = subscribe(&mut p.pool, now, text)?;
        // SAFETY: non-null (checked above) and writable by the contract.
        let _ = unsafe { ptr::write(out_sub, sub.0) };
        Ok(TETHER_OK)
    })
}

/// One entry of a routed subscription.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Route<'a> {
    relay: u32,
    #[serde(borrow)]
    filters: Vec<&'a RawValue>,
}

/// Subscribe on the named relays, each with its own filters (an outbox / NIP-65 router
/// decides): `routing` is a JSON array of `{"relay":R,"filters":[...]}` (`len` bytes).
/// Relays added later are not targeted; a relay named twice gets one subscription with all
/// of its filters.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID` (a relay not in the pool), `TETHER_ERR_INVALID_ARGUMENT`,
/// `TETHER_ERR_LIMIT`, and the pointer errors.
///
/// # Safety
/// As [`tether_pool_subscribe`], for `routing`.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_subscribe_routed(
    pool: *mut TetherPool,
    now_ms: u64,
    routing: *const u8,
    len: usize,
    out_sub: *mut u64,
) -> i32 {
    let subscribe = |pool: &mut RelayPool, now, text: &str| {
        let routes: Vec<Route<'_>> = serde_json::from_str(text).map_err(|e| {
            Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("routing is not a JSON array of {{\"relay\",\"filters\"}}: {e}"),
            )
        })?;
        let routing = routes
            .into_iter()
            .map(|r| Ok((RelayId(r.relay), crate::relay::filters(&r.filters)?)))
            .collect::<Result<Vec<_>, Failure>>()?;
        pool.subscribe_routed(now, routing)
            .map_err(|e| pool_failure(&e))
    };
    // SAFETY: the contract is the caller's.
    unsafe { subscribing(pool, now_ms, (routing, len, "routing"), out_sub, subscribe) }
}

/// Subscribe to people (NIP-65 outbox, NIP-17 inbox): `filter` is one JSON filter object
/// (`len` bytes) naming them by `authors` (a feed), or with no `authors` by its one `#p`
/// key (an inbox). The pool fetches their relay lists from the config's indexers, opens
/// the relays routing picks (their `open` transmits carry the `url` to dial), keeps the
/// subscription exact as routes move, and reports `routed` events whenever routing
/// changes. Events, EOSEs and the outcome come as for [`tether_pool_subscribe`].
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (a filter naming nobody, a bad key), `TETHER_ERR_LIMIT`,
/// and the pointer errors.
///
/// # Safety
/// As [`tether_pool_subscribe`], for `filter`.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_subscribe_outbox(
    pool: *mut TetherPool,
    now_ms: u64,
    filter: *const u8,
    len: usize,
    out_sub: *mut u64,
) -> i32 {
    let subscribe = |pool: &mut RelayPool, now, text: &str| {
        let filter = Filter::new(text)
            .map_err(|e| crate::relay::failure(&tether_core::nostr::Error::InvalidFilter(e)))?;
        pool.subscribe_outbox(now, filter)
            .map_err(|e| pool_failure(&e))
    };
    // SAFETY: the contract is the caller's.
    unsafe { subscribing(pool, now_ms, (filter, len, "filter"), out_sub, subscribe) }
}

/// A relay list (a kind 10002 or 10050 event as JSON, `len` bytes) the application got
/// elsewhere: routing reads it as one a relay delivered (the newer one wins) and routes
/// again shortly if it changed anything.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` for an event that is no relay list, and the pointer
/// errors.
///
/// # Safety
/// As [`tether_pool_subscribe`], for `event`.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_relay_list(
    pool: *mut TetherPool,
    now_ms: u64,
    event: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { routing_event(pool, now_ms, event, len, RelayPool::handle_relay_list) }
}

/// A NIP-66 relay discovery event (kind 30166, JSON, `len` bytes) from a monitor, as a
/// liveness hint for routing by people: one a day old or less says its relay is alive, one
/// three days old or more that its monitor stopped seeing it. A hint is weighed, never a
/// rule.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` for an event that is no kind 30166 naming a relay, and the
/// pointer errors.
///
/// # Safety
/// As [`tether_pool_subscribe`], for `event`.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_liveness(
    pool: *mut TetherPool,
    now_ms: u64,
    event: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: the contract is the caller's.
    unsafe { routing_event(pool, now_ms, event, len, RelayPool::handle_liveness) }
}

/// The body of an entry point handing routing one event (a relay list, a discovery event).
///
/// # Safety
/// As [`tether_pool_subscribe`], for `event`.
unsafe fn routing_event(
    pool: *mut TetherPool,
    now_ms: u64,
    event: *const u8,
    len: usize,
    apply: fn(&mut RelayPool, tether_core::Instant, &str) -> Result<(), PoolError>,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(event, len) }.map_err(|c| Failure::arg(c, "event"))?;
        let now = p.at(now_ms);
        socket(apply(&mut p.pool, now, text))
    })
}

/// The application's own liveness word on a relay (`url`, `len` bytes; `alive` 1 or 0) for
/// routing by people: weighed, never a rule.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` for `alive` other than 0 or 1, and the pointer errors.
///
/// # Safety
/// As [`tether_pool_subscribe`], for `url`.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_hint_live(
    pool: *mut TetherPool,
    now_ms: u64,
    url: *const u8,
    len: usize,
    alive: u32,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(url, len) }.map_err(|c| Failure::arg(c, "url"))?;
        if alive > 1 {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                "alive must be 0 or 1".to_owned(),
            ));
        }
        let now = p.at(now_ms);
        p.pool.hint_live(now, text, alive == 1);
        Ok(TETHER_OK)
    })
}

/// Drop a subscription on every relay (CLOSE where its REQ is open); nothing more is heard
/// of it.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_unsubscribe(
    pool: *mut TetherPool,
    now_ms: u64,
    sub: u64,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        p.pool
            .unsubscribe(now, SubId(sub))
            .map_err(|e| pool_failure(&e))?;
        Ok(TETHER_OK)
    })
}

/// Publish a signed event (a JSON object, `len` bytes) to `relays` (`relay_count` ids), or
/// to every relay when `relays` is null; its id goes to `out_id` unless null. Each relay's
/// answer is a `published` or `rejected` event, and `publish_done` sums them up (`accepted`,
/// `rejected`, `pending` by relay id; `urls`, the relays routing opened for it by URL, is
/// empty here).
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (not an event), `TETHER_ERR_UNKNOWN_ID` (a relay not in
/// the pool), `TETHER_ERR_LIMIT` (already publishing it, or an outbox full).
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `event` valid for `len` bytes; `relays` null or valid
/// for `relay_count` ids; `out_id` null or writable for 32 bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_publish(
    pool: *mut TetherPool,
    now_ms: u64,
    event: *const u8,
    len: usize,
    relays: *const u32,
    relay_count: usize,
    out_id: *mut u8,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(event, len) }.map_err(|c| Failure::arg(c, "event"))?;
        let targets: Option<Vec<RelayId>> = if relays.is_null() {
            None
        } else {
            // SAFETY: valid for `relay_count` ids by the contract.
            let ids = unsafe { std::slice::from_raw_parts(relays, relay_count) };
            Some(ids.iter().map(|&r| RelayId(r)).collect())
        };
        let now = p.at(now_ms);
        let id = p
            .pool
            .publish(now, text, targets.as_deref())
            .map_err(|e| pool_failure(&e))?;
        // SAFETY: null or writable by the contract.
        unsafe { ptr::write_opt(out_id.cast::<[u8; 32]>(), id.0) };
        Ok(TETHER_OK)
    })
}

/// Publish a signed event (a JSON object, `len` bytes) by outbox: to its author's write
/// relays and each p-tagged person's read relays (their DM relays for a gift wrap, kind
/// 1059), whose lists the pool fetches first (at most 3 s). The relays it opens come as
/// `open` transmits with their `url`; their answers are `published`/`rejected` events and
/// one `publish_done`, as for [`tether_pool_publish`], whose `urls` names those relays by
/// URL: the pool then lets them go, and their ids name nothing after. Its id goes to
/// `out_id` unless null.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (not an event), `TETHER_ERR_LIMIT` (already publishing it,
/// or 64 publishes by outbox under way).
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `event` valid for `len` bytes; `out_id` null or
/// writable for 32 bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_publish_outbox(
    pool: *mut TetherPool,
    now_ms: u64,
    event: *const u8,
    len: usize,
    out_id: *mut u8,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(event, len) }.map_err(|c| Failure::arg(c, "event"))?;
        let now = p.at(now_ms);
        let id = p
            .pool
            .publish_outbox(now, text)
            .map_err(|e| pool_failure(&e))?;
        // SAFETY: null or writable by the contract.
        unsafe { ptr::write_opt(out_id.cast::<[u8; 32]>(), id.0) };
        Ok(TETHER_OK)
    })
}

/// Answer `relay`'s NIP-42 challenge `challenge` (the `id` of its `auth` event, with
/// its `relay`) with a signed kind 22242 event.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_INVALID_ARGUMENT`, `TETHER_ERR_WRONG_STATE`.
///
/// # Safety
/// As [`tether_pool_publish`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_authenticate(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    challenge: u64,
    event: *const u8,
    len: usize,
    out_id: *mut u8,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(event, len) }.map_err(|c| Failure::arg(c, "event"))?;
        let now = p.at(now_ms);
        let id = p
            .pool
            .authenticate(now, RelayId(relay), ChallengeId(challenge), text)
            .map_err(|e| pool_failure(&e))?;
        // SAFETY: null or writable by the contract.
        unsafe { ptr::write_opt(out_id.cast::<[u8; 32]>(), id.0) };
        Ok(TETHER_OK)
    })
}

/// Apply `relay`'s NIP-11 document: as [`tether_relay_apply_relay_info`](crate::relay::tether_relay_apply_relay_info),
/// for one relay of the pool.
///
/// # Errors
/// As `tether_relay_apply_relay_info`, and `TETHER_ERR_UNKNOWN_ID`.
///
/// # Safety
/// As `tether_relay_apply_relay_info`.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_apply_relay_info(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    document: *const u8,
    document_len: usize,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        // SAFETY: the contract is the caller's.
        unsafe {
            crate::info::apply_document(document, document_len, buf, len, |info| {
                p.pool
                    .apply_relay_info(now, RelayId(relay), info)
                    .map_err(|e| pool_failure(&e))
            })
        }
    })
}

/// `relay`'s socket of `epoch` opened.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID` (no such relay, or an epoch never handed out),
/// `TETHER_ERR_WRONG_STATE` (a second open).
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_open(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    epoch: u64,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        socket(p.pool.handle_open(now, RelayId(relay), Epoch(epoch)))
    })
}

/// `relay`'s socket of `epoch` closed or failed: `loss` is a `TETHER_LOSS_*` code,
/// `close_code` the peer's close code or -1.
///
/// # Errors
/// `TETHER_ERR_INVALID_ARGUMENT` (unknown `loss`), `TETHER_ERR_UNKNOWN_ID`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_close(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    epoch: u64,
    loss: u32,
    close_code: i32,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let Some(loss) = socket_loss(loss, close_code) else {
            return Err(Failure::new(
                TETHER_ERR_INVALID_ARGUMENT,
                format!("{loss} is not a TETHER_LOSS_* code"),
            ));
        };
        let now = p.at(now_ms);
        socket(p.pool.handle_close(now, RelayId(relay), Epoch(epoch), loss))
    })
}

/// A text frame (`len` bytes of UTF-8) from `relay` on `epoch`. Malformed frames are peer
/// errors (`peer_error` inside a `relay` event), not error codes.
///
/// # Errors
/// `TETHER_ERR_UTF8`, `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_WRONG_STATE` (before the open),
/// `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `text` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_frame(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    epoch: u64,
    text: *const u8,
    len: usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text = unsafe { ptr::text(text, len) }.map_err(|c| Failure::arg(c, "frame"))?;
        let now = p.at(now_ms);
        socket(p.pool.handle_frame(now, RelayId(relay), Epoch(epoch), text))
    })
}

/// A binary frame of `len` bytes from `relay` on `epoch` (counted and ignored).
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_binary(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    epoch: u64,
    len: usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        socket(p.pool.handle_binary(now, RelayId(relay), Epoch(epoch), len))
    })
}

/// A pong (or ping) from `relay` on `epoch`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_pong(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    epoch: u64,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        socket(p.pool.handle_pong(now, RelayId(relay), Epoch(epoch)))
    })
}

/// The host stopped (`paused` non-zero) or resumed reading `relay`'s socket.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_read_paused(
    pool: *mut TetherPool,
    now_ms: u64,
    relay: u32,
    paused: u32,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        p.pool
            .handle_read_paused(now, RelayId(relay), paused != 0)
            .map_err(|e| pool_failure(&e))?;
        Ok(TETHER_OK)
    })
}

/// Time passed: fire what is due at `now_ms`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_timeout(pool: *mut TetherPool, now_ms: u64) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let now = p.at(now_ms);
        p.pool.handle_timeout(now);
        Ok(TETHER_OK)
    })
}

/// Take the next transmit (a relay transmit with `"relay":R`) into `buf` of capacity
/// `*len`.
///
/// # Errors
/// `TETHER_DONE` when none is queued; `TETHER_ERR_BUFFER_TOO_SMALL` with the length needed
/// in `*len` (the transmit stays queued); `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `len` valid; `buf` valid for `*len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_poll_transmit(
    pool: *mut TetherPool,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let TetherPool { pool, transmit, .. } = p;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(transmit, buf, len, |out| {
                pool.poll_transmit()
                    .map(|(relay, t)| {
                        let label = Label::Id(relay.0.into());
                        write_into(&TransmitLine::pool(&t, label, pool.relay_url(relay)), out);
                    })
                    .is_some()
            })
        }
    })
}

/// Take the next event (see the header for the types) into `buf` of capacity `*len`.
///
/// # Errors
/// As [`tether_pool_poll_transmit`].
///
/// # Safety
/// As [`tether_pool_poll_transmit`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_poll_event(
    pool: *mut TetherPool,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let TetherPool {
            pool,
            event,
            peer_errors,
            invalid,
            ..
        } = p;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(event, buf, len, |out| {
                while let Some(e) = pool.poll_event() {
                    let now = pool.now();
                    let line = Line::pool_event(&e, now, &Ids);
                    let limiter = match line {
                        Line::Invalid { .. } => &mut *invalid,
                        _ => &mut *peer_errors,
                    };
                    if let Some(line) = line.admit(limiter, now) {
                        write_into(&line, out);
                        return true;
                    }
                }
                false
            })
        }
    })
}

/// Take the next event copy to verify (`verify` set):
/// `{"ticket":N,"relay":R,"id":"hex","event":{...}}`. Check `event` (for instance with
/// [`tether_verify_event`](crate::verify::tether_verify_event), on any thread) and answer
/// with [`tether_pool_handle_verified`]. Until then, that subscription's later events wait.
///
/// # Errors
/// As [`tether_pool_poll_transmit`].
///
/// # Safety
/// As [`tether_pool_poll_transmit`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_poll_verify(
    pool: *mut TetherPool,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let TetherPool { pool, verify, .. } = p;
        // SAFETY: the contract is the caller's.
        unsafe {
            deliver(verify, buf, len, |out| {
                pool.poll_verify()
                    .map(|r| write_into(&VerifyLine::new(&r), out))
                    .is_some()
            })
        }
    })
}

/// The verdict on verification `ticket`: `verdict` is `TETHER_OK` (genuine: delivered in its
/// subscription's order) or a `TETHER_VERIFY_*` code, what [`tether_verify_event`](crate::verify::tether_verify_event)
/// returned (dropped, counted against the relay, reported as `invalid`). `reason`
/// (`reason_len` bytes) is the `invalid` event's text; null takes the code's own wording.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID` (a ticket not awaited: never handed out, answered already, or its
/// subscription is gone), `TETHER_ERR_INVALID_ARGUMENT` (a `verdict` that is neither),
/// `TETHER_ERR_UTF8`.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `reason` null or valid for `reason_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_handle_verified(
    pool: *mut TetherPool,
    now_ms: u64,
    ticket: u64,
    verdict: i32,
    reason: *const u8,
    reason_len: usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        // SAFETY: the contract is the caller's.
        let text =
            unsafe { ptr::opt_text(reason, reason_len) }.map_err(|c| Failure::arg(c, "reason"))?;
        let verdict = match verdict {
            TETHER_OK => Ok(()),
            code => {
                let Some(wording) = verdict_reason(code) else {
                    return Err(Failure::new(
                        TETHER_ERR_INVALID_ARGUMENT,
                        format!("{code} is neither TETHER_OK nor a TETHER_VERIFY_* code"),
                    ));
                };
                Err(text.map_or(wording, str::to_owned))
            }
        };
        let now = p.at(now_ms);
        p.pool
            .handle_verified(now, VerifyTicket(ticket), verdict)
            .map_err(|e| pool_failure(&e))?;
        Ok(TETHER_OK)
    })
}

/// When to call [`tether_pool_handle_timeout`] next, stored at `out_ms`: the latest
/// `now_ms` while output is queued.
///
/// # Errors
/// `TETHER_DONE` when nothing will happen without an input.
///
/// # Safety
/// As [`tether_pool_set_wall_clock`]; `out_ms` writable.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_poll_timeout(pool: *mut TetherPool, out_ms: *mut u64) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let held = p.transmit.is_ready() || p.event.is_ready() || p.verify.is_ready();
        // SAFETY: the contract is the caller's.
        unsafe { crate::poll_timeout(out_ms, held, p.now, p.pool.poll_timeout()) }
    })
}

/// Whether `relay` may be dialed at public addresses only (`*out` 1) or at any (0): a relay
/// routing opened from a stranger's relay list is dialed only when no address its name
/// resolves to is private ([`tether_is_private_ip`](crate::url::tether_is_private_ip)); the
/// application's relays and the indexers may be dialed anywhere. Ask when an `open`
/// transmit comes, before resolving its URL.
///
/// # Errors
/// `TETHER_ERR_NULL`.
///
/// # Safety
/// `pool` is a live handle; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn tether_pool_public_only(
    pool: *mut TetherPool,
    relay: u32,
    out: *mut u32,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        if out.is_null() {
            return Err(Failure::arg(TETHER_ERR_NULL, "out"));
        }
        let public_only = p.pool.dials_public_only(RelayId(relay));
        // SAFETY: non-null (checked above) and writable by the contract.
        let _ = unsafe { ptr::write(out, u32::from(public_only)) };
        Ok(TETHER_OK)
    })
}

/// What the pool counted for `relay`, into `buf` (capacity `*len`):
/// `{"duplicates":N,"conflicts":N,"invalid":N,"unverified_dropped":N,"unmatched":N}`.
///
/// # Errors
/// `TETHER_ERR_UNKNOWN_ID`, `TETHER_ERR_BUFFER_TOO_SMALL`, `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_pool_poll_transmit`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_relay_stats(
    pool: *mut TetherPool,
    relay: u32,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let Some(stats) = p.pool.relay_stats(RelayId(relay)) else {
            return Err(pool_failure(&PoolError::UnknownRelay(RelayId(relay))));
        };
        let mut out = Vec::with_capacity(96);
        write_into(&stats, &mut out);
        // SAFETY: the contract is the caller's.
        Ok(unsafe { ptr::copy_out(&out, buf, len) })
    })
}

/// The pool's durable state (JSON bytes: every relay's session, every subscription with its
/// dedup memory, publishes in flight, events awaiting a verdict) into `buf` (capacity
/// `*len`). Taking one changes nothing. Restore it with [`tether_pool_restore`]; the host
/// keeps its own map from relay ids to URLs beside it.
///
/// # Errors
/// `TETHER_ERR_BUFFER_TOO_SMALL` (with the length needed), `TETHER_ERR_NULL`.
///
/// # Safety
/// As [`tether_pool_poll_transmit`].
#[no_mangle]
pub unsafe extern "C" fn tether_pool_checkpoint(
    pool: *mut TetherPool,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guarded!(pool, |p: &mut TetherPool| {
        let bytes = p.pool.checkpoint().to_json();
        // SAFETY: the contract is the caller's.
        Ok(unsafe { ptr::copy_out(&bytes, buf, len) })
    })
}

/// A pool from a checkpoint taken `now_ms`/`unix_secs` ago or earlier: the same relay and
/// subscription ids, each relay connecting again and catching its subscriptions up from
/// where the checkpoint left them. On failure `why` (capacity `*why_len`, may be null) gets
/// the reason.
///
/// # Errors
/// `TETHER_ERR_CHECKPOINT`, `TETHER_ERR_CHECKPOINT_NEWER`, and the config errors of
/// [`tether_pool_new`].
///
/// # Safety
/// `config` as in [`tether_pool_new`]; `checkpoint` valid for `checkpoint_len` bytes; `out`
/// writable; `why` null or valid for `*why_len` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tether_pool_restore(
    config: *const TetherPoolConfig,
    checkpoint: *const u8,
    checkpoint_len: usize,
    now_ms: u64,
    unix_secs: u64,
    out: *mut *mut TetherPool,
    why: *mut u8,
    why_len: *mut usize,
) -> i32 {
    let make = || -> Result<TetherPool, Failure> {
        // SAFETY: the contract is the caller's.
        let (core, seed) = unsafe { TetherPoolConfig::read(config) }?;
        // SAFETY: the contract is the caller's.
        let bytes = unsafe { ptr::bytes(checkpoint, checkpoint_len) }
            .map_err(|code| Failure::arg(code, "checkpoint"))?;
        let saved = PoolCheckpoint::from_json(bytes).map_err(crate::checkpoint::refused)?;
        let pool = RelayPool::restore(core, seed, &saved, instant(now_ms), unix_secs)
            .map_err(crate::checkpoint::refused)?;
        Ok(TetherPool::from_pool(pool, now_ms))
    };
    // SAFETY: the contract is the caller's.
    unsafe { crate::checkpoint::restore_into(out, why, why_len, make) }
}

fn socket(result: Result<(), PoolError>) -> Result<i32, Failure> {
    result.map(|()| TETHER_OK).map_err(|e| pool_failure(&e))
}

/// The code for the application's mistake `e`.
fn pool_failure(e: &PoolError) -> Failure {
    match e {
        PoolError::Session(e) => crate::relay::failure(e),
        PoolError::Socket(e) => socket_failure(*e),
        PoolError::UnknownRelay(_)
        | PoolError::UnknownSubscription(_)
        | PoolError::UnknownTicket(_) => Failure::new(TETHER_ERR_UNKNOWN_ID, e.to_string()),
        PoolError::TooManyRelays { .. }
        | PoolError::TooManySubscriptions { .. }
        | PoolError::TooManyPublishes { .. }
        | PoolError::AlreadyPublishing(_) => Failure::new(TETHER_ERR_LIMIT, e.to_string()),
        PoolError::InvalidUrl(_) => Failure::new(crate::url::TETHER_ERR_INVALID_URL, e.to_string()),
        _ => Failure::new(TETHER_ERR_INVALID_ARGUMENT, e.to_string()),
    }
}
