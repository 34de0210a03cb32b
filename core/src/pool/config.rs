//! [`PoolConfig`]: every number a [`RelayPool`](super::RelayPool) runs by, and its relays'
//! [`RelayConfig`], with the design's defaults.

use std::time::Duration;

use crate::nostr::RelayConfig;
use crate::router::RouterConfig;

/// Configuration of a [`RelayPool`](super::RelayPool).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PoolConfig {
    /// Every relay session's configuration.
    pub relay: RelayConfig,
    /// A subscription's outcome is reported at the latest this long after it was made
    /// (10 s): relays that have not answered EOSE by then are `missing`.
    pub eose_deadline: Duration,
    /// After the first relay's EOSE, give the others this long before reporting (`None`:
    /// wait for the full deadline).
    pub after_first_eose: Option<Duration>,
    /// Event ids remembered per logical subscription for dedup (10 000): the newest
    /// delivered ones. Under [`PoolConfig::verify`] an id is also held while its copy
    /// awaits a verdict; such an id evicts nothing until it is delivered.
    pub dedup_capacity: usize,
    /// Relays remembered per id in `seen_on` (8).
    pub seen_on_max: usize,
    /// Most relays in the pool (10 000).
    pub max_relays: usize,
    /// Most logical subscriptions (10 000).
    pub max_subscriptions: usize,
    /// A publish's aggregate outcome is reported at the latest this long after it (30 s);
    /// relays that have not answered are listed as pending.
    pub publish_deadline: Duration,
    /// Deliver an event only after the driver verified it (`false`): the first copy of each
    /// id in a subscription is handed out by [`RelayPool::poll_verify`](super::RelayPool::poll_verify), and the pool waits
    /// for [`RelayPool::handle_verified`](super::RelayPool::handle_verified). See the verification rules on
    /// [`VerifyRequest`](super::VerifyRequest).
    pub verify: bool,
    /// Verify the relay lists routing by people reads (`true`), whatever `verify` says
    /// about other events: a list steers every later REQ and publish, so a forged one would
    /// send the user's follows to an attacker's relay. Its copies come out of
    /// [`RelayPool::poll_verify`](super::RelayPool::poll_verify) like any other; a host
    /// that can verify nothing turns this off, and then trusts the lists as they come.
    pub verify_lists: bool,
    /// Most copies under verification at once, pool-wide (4 096). A new event past it is
    /// dropped, counted ([`PoolStats::unverified_dropped`](super::PoolStats::unverified_dropped)) and not remembered, so a later
    /// copy delivers it. A driver that stops reading sockets while verification lags never
    /// reaches it.
    pub max_unverified: usize,
    /// Most handshakes (TCP, TLS and WebSocket) in flight at once (32). Further relays wait
    /// their turn in arrival order, reported as connecting (`LinkState::Queued`) with no
    /// connect timeout running; an admitted relay holds its slot until its socket opens or
    /// fails, at most one `connect_timeout`. `add_relay` over thousands of URLs is then not a
    /// connection storm (SYN bursts, DNS and TLS CPU at once). Each handshake in flight
    /// costs 13-16 KiB of buffers that the allocator keeps resident once freed, so the
    /// limit is also the process's high-water mark while connecting (the scale bench at
    /// 1 000 relays: 16.2 KiB RSS per connection at 64, 15.7 at 32, 15.6 at 16). At 32 a
    /// loopback pool of 10 000 relays connects faster than without a limit; over the
    /// internet (a few hundred ms a handshake) about 100 relays a second: raise it for an
    /// indexer that reads thousands of relays.
    pub max_connecting: usize,
    /// How subscriptions by people are routed
    /// ([`RelayPool::subscribe_outbox`](super::RelayPool::subscribe_outbox)): the connection
    /// budget, the indexers, the learning rates.
    pub router: RouterConfig,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            relay: RelayConfig::default(),
            eose_deadline: Duration::from_secs(10),
            after_first_eose: None,
            dedup_capacity: 10_000,
            seen_on_max: 8,
            max_relays: 10_000,
            max_subscriptions: 10_000,
            publish_deadline: Duration::from_secs(30),
            verify: false,
            verify_lists: true,
            max_unverified: 4096,
            max_connecting: 32,
            router: RouterConfig::default(),
        }
    }
}
