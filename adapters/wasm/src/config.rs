//! Configs as JSON objects with camelCase fields (what a TypeScript options object
//! serializes to). Missing fields take the core's defaults; unknown fields are refused, so a
//! misspelt option is an error rather than silently ignored.

use serde::Deserialize;
use tether_core::nostr::RelayConfig;
use tether_core::pool::PoolConfig;
use tether_core::sse::SseConfig;
use tether_core::{GateScope, Liveness};

use crate::{millis, TetherError};

/// A relay session's settings (also every relay's in a pool).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RelayOptions {
    /// Seed for the jittered delays: same seed and inputs, same outputs.
    pub(crate) seed: u64,
    /// A relay's rate-limit window survives its reconnects (default: per connection).
    gate_per_session: bool,
    /// Most REQs open at once per relay; absent: none until learned.
    max_subscriptions: Option<usize>,
    /// Largest inbound frame decoded, in bytes.
    max_frame: Option<usize>,
    /// A REQ with no answer after this long is retried.
    eose_timeout_ms: Option<u64>,
    /// A published event with no OK after this long is re-sent.
    publish_timeout_ms: Option<u64>,
    /// Ask for the NIP-11 document at most this often; absent: never asked.
    info_refresh_ms: Option<u64>,
    /// `false` where the host cannot send WebSocket pings (a browser): the silence watchdog
    /// is off, as no pong could ever answer it.
    ping: Option<bool>,
}

impl RelayOptions {
    pub(crate) fn to_core(&self) -> Result<RelayConfig, TetherError> {
        let mut config = RelayConfig::default();
        config.gate_scope = if self.gate_per_session {
            GateScope::Session
        } else {
            GateScope::Connection
        };
        config.max_subscriptions = self.max_subscriptions;
        if let Some(max_frame) = self.max_frame {
            config.max_frame = positive(max_frame as u64, "maxFrame")? as usize;
        }
        if let Some(ms) = self.eose_timeout_ms {
            config.eose_timeout = millis(positive(ms, "eoseTimeoutMs")?);
        }
        if let Some(ms) = self.publish_timeout_ms {
            config.publish_timeout = millis(positive(ms, "publishTimeoutMs")?);
        }
        config.info_refresh = self.info_refresh_ms.filter(|&ms| ms > 0).map(millis);
        if self.ping == Some(false) {
            config.link.liveness = Liveness::Off;
        }
        Ok(config)
    }
}

/// A pool's settings: every relay's, then the pool's own.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PoolOptions {
    /// Seed for every relay's jittered delays.
    seed: u64,
    /// Each relay's rate-limit window survives its reconnects.
    gate_per_session: bool,
    /// Most REQs open at once per relay; absent: none until learned.
    max_subscriptions: Option<usize>,
    /// Largest inbound frame decoded, in bytes.
    max_frame: Option<usize>,
    /// A REQ with no answer after this long is retried.
    eose_timeout_ms: Option<u64>,
    /// A published event with no OK after this long is re-sent.
    publish_timeout_ms: Option<u64>,
    /// Ask for each relay's NIP-11 document at most this often; absent: never asked.
    info_refresh_ms: Option<u64>,
    /// `false` where the host cannot send WebSocket pings (a browser).
    ping: Option<bool>,
    /// Deliver an event only after it verified (`verifyQueued` or `pollVerify`).
    verify: bool,
    /// Most event copies under verification at once, pool-wide.
    max_unverified: Option<usize>,
    /// A subscription's `complete` comes at the latest this long after it was made.
    eose_deadline_ms: Option<u64>,
    /// After the first relay's EOSE, give the others this long before `complete`.
    after_first_eose_ms: Option<u64>,
    /// A publish's `publish_done` comes at the latest this long after it.
    publish_deadline_ms: Option<u64>,
    /// Most relays.
    max_relays: Option<usize>,
    /// Most logical subscriptions.
    max_pool_subscriptions: Option<usize>,
    /// Event ids remembered per subscription for dedup.
    dedup_capacity: Option<usize>,
    /// Relays remembered per event id.
    seen_on_max: Option<usize>,
    /// Most handshakes in flight at once.
    max_connecting: Option<usize>,
    /// Routing by people: most relays it connects at once, the indexers included.
    outbox_max_relays: Option<usize>,
    /// Routing by people: how many relays each person is asked on.
    outbox_redundancy: Option<usize>,
    /// Routing by people: the indexers relay lists come from (`ws://`/`wss://` URLs).
    outbox_indexers: Option<Vec<String>>,
}

impl PoolOptions {
    pub(crate) fn parse(json: Option<String>) -> Result<(PoolConfig, u64), TetherError> {
        let options: PoolOptions = parse(json, "pool")?;
        Ok((options.to_core()?, options.seed))
    }

    /// The settings every relay of the pool shares (JSON cannot flatten them in while
    /// refusing unknown fields).
    fn relay(&self) -> RelayOptions {
        RelayOptions {
            seed: self.seed,
            gate_per_session: self.gate_per_session,
            max_subscriptions: self.max_subscriptions,
            max_frame: self.max_frame,
            eose_timeout_ms: self.eose_timeout_ms,
            publish_timeout_ms: self.publish_timeout_ms,
            info_refresh_ms: self.info_refresh_ms,
            ping: self.ping,
        }
    }

    fn to_core(&self) -> Result<PoolConfig, TetherError> {
        let mut config = PoolConfig::default();
        config.relay = self.relay().to_core()?;
        config.verify = self.verify;
        set(
            &mut config.max_unverified,
            self.max_unverified,
            "maxUnverified",
        )?;
        if let Some(ms) = self.eose_deadline_ms {
            config.eose_deadline = millis(positive(ms, "eoseDeadlineMs")?);
        }
        if let Some(ms) = self.after_first_eose_ms {
            config.after_first_eose = (ms > 0).then(|| millis(ms));
        }
        if let Some(ms) = self.publish_deadline_ms {
            config.publish_deadline = millis(positive(ms, "publishDeadlineMs")?);
        }
        if let Some(n) = self.max_relays {
            config.max_relays = n;
        }
        if let Some(n) = self.max_pool_subscriptions {
            config.max_subscriptions = n;
        }
        set(
            &mut config.dedup_capacity,
            self.dedup_capacity,
            "dedupCapacity",
        )?;
        if let Some(n) = self.seen_on_max {
            config.seen_on_max = n;
        }
        set(
            &mut config.max_connecting,
            self.max_connecting,
            "maxConnecting",
        )?;
        set(
            &mut config.router.max_relays,
            self.outbox_max_relays,
            "outboxMaxRelays",
        )?;
        set(
            &mut config.router.redundancy,
            self.outbox_redundancy,
            "outboxRedundancy",
        )?;
        if let Some(indexers) = &self.outbox_indexers {
            for url in indexers {
                crate::keys::normalize_relay_url(url, true).map_err(|e| {
                    TetherError::invalid(format!("outboxIndexers: {}", e.message()))
                })?;
            }
            config.router.set_indexers(indexers.clone());
        }
        Ok(config)
    }
}

/// An SSE session's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SseOptions {
    /// Seed for the jittered delays.
    seed: u64,
    /// A stream silent this long is cut and resumed; 0: never.
    idle_timeout_ms: Option<u64>,
    /// A request whose head has not come this long after it was sent is cut.
    connect_timeout_ms: Option<u64>,
}

impl SseOptions {
    pub(crate) fn parse(json: Option<String>) -> Result<(SseConfig, u64), TetherError> {
        let options: SseOptions = parse(json, "sse")?;
        let mut config = SseConfig::default();
        if let Some(ms) = options.idle_timeout_ms {
            config.idle_timeout = (ms > 0).then(|| millis(ms));
        }
        if let Some(ms) = options.connect_timeout_ms {
            config.connect_timeout = millis(positive(ms, "connectTimeoutMs")?);
        }
        Ok((config, options.seed))
    }
}

/// Options of `what` from JSON; absent or `null`: every default.
pub(crate) fn parse<T: Default + for<'de> Deserialize<'de>>(
    json: Option<String>,
    what: &str,
) -> Result<T, TetherError> {
    let Some(json) = json.filter(|j| !j.trim().is_empty()) else {
        return Ok(T::default());
    };
    serde_json::from_str::<Option<T>>(&json)
        .map(Option::unwrap_or_default)
        .map_err(|e| TetherError::invalid(format!("the {what} options do not parse: {e}")))
}

fn positive(n: u64, what: &str) -> Result<u64, TetherError> {
    if n == 0 {
        return Err(TetherError::invalid(format!("{what} must be at least 1")));
    }
    Ok(n)
}

fn set(field: &mut usize, value: Option<usize>, what: &str) -> Result<(), TetherError> {
    if let Some(n) = value {
        *field = positive(n as u64, what)? as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn absent_options_are_the_defaults_and_misspelt_ones_are_refused() {
        let (config, seed) = PoolOptions::parse(None).unwrap();
        assert_eq!(seed, 0);
        assert_eq!(config.max_connecting, PoolConfig::default().max_connecting);
        let (config, seed) = PoolOptions::parse(Some(
            r#"{"seed":7,"verify":true,"eoseTimeoutMs":500}"#.into(),
        ))
        .unwrap();
        assert_eq!(seed, 7);
        assert!(config.verify);
        assert_eq!(config.relay.eose_timeout, millis(500));
        let error = PoolOptions::parse(Some(r#"{"verifyy":true}"#.into())).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.message().contains("verifyy"), "{error}");
        let error = PoolOptions::parse(Some(r#"{"maxConnecting":0}"#.into())).unwrap_err();
        assert_eq!(error.message(), "maxConnecting must be at least 1");
    }
}
