//! [`RelayConfig`]: every number a relay session runs by, with the design's defaults.

use std::time::Duration;

use crate::backoff::BackoffPolicy;
use crate::gate::{GateScope, DEFAULT_WINDOW, MAX_WINDOW};
use crate::link::LinkConfig;
use crate::nostr::catch_up::CatchUpConfig;
use crate::nostr::message::DEFAULT_MAX_FRAME;

/// Configuration of a [`RelaySession`](super::session::RelaySession).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RelayConfig {
    /// Socket lifecycle: reconnect backoff (1-30 s, x2, +-50%), stable reset after 30 s,
    /// 10 s connect timeout, ping after 30 s of silence and give up 20 s later. Its
    /// `stable_after` also decides whether an EOSE was clean: a refusal within it of the EOSE
    /// continues the subscription's retry count instead of starting a new one.
    pub link: LinkConfig,
    /// Whether a rate-limit window survives reconnects.
    pub gate_scope: GateScope,
    /// Gate window without a usable hint (10 s).
    pub gate_default_window: Duration,
    /// Cap on any gate window (300 s).
    pub gate_max_window: Duration,
    /// Re-REQs of a refused subscription, and re-sends of a refused publish:
    /// 1 s, x2, 30 s, full jitter, at most 5.
    pub closed_retry: BackoffPolicy,
    /// REQs per replay batch (8).
    pub replay_batch: usize,
    /// Pause between replay batches (50 ms).
    pub replay_pause: Duration,
    /// How a subscription that was live catches up when it is sent again (see
    /// [`CatchUpConfig`]); `None` re-sends the user's filters as they are, and re-deliveries
    /// are only dropped while the memory holds them.
    pub catch_up: Option<CatchUpConfig>,
    /// How far past the wall clock an event's `created_at` may be and still count for
    /// catch-up (5 min). A later one is delivered and counted ([`Stats::future_dated`]) but
    /// kept out of the remembered window: one event dated 2106 must not make a
    /// subscription deaf after the next reconnect. Needs the wall clock
    /// ([`RelaySession::set_wall_clock`]); without one, nothing is judged.
    ///
    /// [`Stats::future_dated`]: super::Stats::future_dated
    /// [`RelaySession::set_wall_clock`]: super::RelaySession::set_wall_clock
    pub future_tolerance: Duration,
    /// The application's own bound on REQs open at once: never exceeded, never probed
    /// past. `None`: only the relay's cap applies, declared in its NIP-11 document
    /// ([`RelaySession::apply_relay_info`]) or learned from its refusals.
    ///
    /// [`RelaySession::apply_relay_info`]: super::RelaySession::apply_relay_info
    pub max_subscriptions: Option<usize>,
    /// The application answers NIP-42 challenges (the driver has a signer). With a relay
    /// whose NIP-11 document says `auth_required`, REQs then wait for authentication on
    /// each new socket instead of being refused first (false).
    pub authenticates: bool,
    /// How long REQs wait for the relay's AUTH challenge on a new socket when they wait
    /// for authentication (3 s); once it came, they wait for the AUTH's OK up to
    /// `auth_timeout`. Either way they are sent when the wait ends.
    pub challenge_wait: Duration,
    /// Most subscriptions the session holds at all (10 000); `subscribe` errs past it.
    pub max_registered: usize,
    /// A REQ with no EOSE, CLOSED or event after this long is retried (30 s).
    pub eose_timeout: Duration,
    /// Work held for `auth-required:` is surfaced if not authenticated within this (30 s).
    pub auth_timeout: Duration,
    /// A published event with no OK after this long is re-sent, bounded (10 s).
    pub publish_timeout: Duration,
    /// Most events in the publish outbox (1 000); `publish` errs past it.
    pub max_outbox: usize,
    /// Largest inbound frame decoded (4 MiB); larger ones are dropped as a peer error.
    pub max_frame: usize,
    /// Ask the driver for the relay's NIP-11 document ([`Transmit::FetchInfo`]) beside a
    /// new socket when none was asked for yet or the last ask is older than this. `None`
    /// (the default): never ask, for drivers that cannot fetch. A failed fetch counts as an
    /// ask: one bounded request per period, however often the socket drops.
    ///
    /// [`Transmit::FetchInfo`]: super::Transmit::FetchInfo
    pub info_refresh: Option<Duration>,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            link: LinkConfig::default(),
            gate_scope: GateScope::Connection,
            gate_default_window: DEFAULT_WINDOW,
            gate_max_window: MAX_WINDOW,
            closed_retry: BackoffPolicy::closed_retry(),
            replay_batch: 8,
            replay_pause: Duration::from_millis(50),
            catch_up: Some(CatchUpConfig::default()),
            future_tolerance: Duration::from_secs(300),
            max_subscriptions: None,
            authenticates: false,
            challenge_wait: Duration::from_secs(3),
            max_registered: 10_000,
            eose_timeout: Duration::from_secs(30),
            auth_timeout: Duration::from_secs(30),
            publish_timeout: Duration::from_secs(10),
            max_outbox: 1_000,
            max_frame: DEFAULT_MAX_FRAME,
            info_refresh: None,
        }
    }
}
