//! [`RouterConfig`]: the budget, the bounds and the learning rates a
//! [`Router`](super::Router) runs by, with their defaults.

use std::time::Duration;

/// Configuration of a [`Router`](super::Router).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RouterConfig {
    /// Most relays connected at once, the indexers included (20). Measured in the field, 20
    /// connections come within 1-2% of an unlimited pool.
    pub max_relays: usize,
    /// How many relays each author should be asked on (2) where the budget allows: one relay
    /// more than recall needs, so one relay dying loses nothing while it is replaced. Under
    /// a tight budget a first relay for an uncovered author comes before a second one.
    pub redundancy: usize,
    /// Of `max_relays`, how many rotate through candidate relays to find where content is
    /// (3). A probe is asked about every author it may hold, answers, and its slot goes to
    /// the next candidate unless what it delivered earned it a place.
    pub probe_slots: usize,
    /// Most probes in one session (60): probing stops even if candidates remain.
    pub max_probes: usize,
    /// Relays the relay lists are fetched from (the defaults: [`DEFAULT_INDEXERS`]). They
    /// count against `max_relays` and are also asked for content, as any relay.
    pub indexers: Vec<String>,
    /// Most authors routed (10 000); `follow` past it is refused.
    pub max_authors: usize,
    /// Most relays kept from one relay list (16); a longer list is cut, in its own order.
    pub max_list_relays: usize,
    /// Most relays the router knows (4 096): relays first named past it are not learned.
    pub max_known_relays: usize,
    /// Most learned (author, relay) pairs per author (24): the weakest is forgotten first.
    pub max_pairs_per_author: usize,
    /// Learned evidence halves in this long of wall-clock time (14 days): what a relay
    /// delivered a month ago counts a quarter of what it delivered today.
    pub half_life: Duration,
    /// A relay in the plan keeps its place against a candidate up to this much better
    /// (0.25, 25%): routes do not flap between near-equals.
    pub hysteresis: f64,
    /// An author is asked on a relay whose estimate for them is at least this (0.02).
    pub ask_threshold: f64,
    /// Connection attempts to one failing relay within `retry_window` (3).
    pub max_attempts: usize,
    /// The window `max_attempts` counts in (25 s).
    pub retry_window: Duration,
    /// Accept relay URLs on loopback and private networks from relay lists (`false`): a
    /// stranger's list must not make the client dial into its own network. Tests on loopback
    /// turn it on.
    pub allow_private_relays: bool,
}

/// Well-known relays that serve relay lists (kinds 0, 3, 10002, 10050) for anyone: the
/// default [`RouterConfig::indexers`].
pub const DEFAULT_INDEXERS: [&str; 3] = [
    "wss://purplepag.es",
    "wss://user.kindpag.es",
    "wss://indexer.coracle.social",
];

impl RouterConfig {
    /// Fetch relay lists from `indexers` instead of the defaults. An indexer on a loopback
    /// or private network is one the user runs (a test bed, a company relay): it vouches
    /// for the private relays its lists name, so [`RouterConfig::allow_private_relays`]
    /// follows it. A public indexer's lists still cannot point into the local network.
    pub fn set_indexers(&mut self, indexers: Vec<String>) {
        self.allow_private_relays = indexers.iter().any(|u| {
            super::relay_url::normalize(u, false) == Err(super::relay_url::BadRelayUrl::Private)
        });
        self.indexers = indexers;
    }
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            max_relays: 20,
            redundancy: 2,
            probe_slots: 3,
            max_probes: 60,
            indexers: DEFAULT_INDEXERS.iter().map(|s| (*s).to_owned()).collect(),
            max_authors: 10_000,
            max_list_relays: 16,
            max_known_relays: 4096,
            max_pairs_per_author: 24,
            half_life: Duration::from_secs(14 * 86_400),
            hysteresis: 0.25,
            ask_threshold: 0.02,
            max_attempts: 3,
            retry_window: Duration::from_secs(25),
            allow_private_relays: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_indexer_on_a_private_network_vouches_for_private_relays() {
        let mut config = RouterConfig::default();
        assert!(!config.allow_private_relays);
        config.set_indexers(vec!["wss://purplepag.es".into()]);
        assert!(!config.allow_private_relays);
        config.set_indexers(vec![
            "wss://purplepag.es".into(),
            "ws://127.0.0.1:7000".into(),
        ]);
        assert!(config.allow_private_relays);
        assert_eq!(config.indexers.len(), 2);
        config.set_indexers(vec!["ws://10.1.2.3".into()]);
        assert!(config.allow_private_relays);
        config.set_indexers(vec!["not a url".into()]);
        assert!(!config.allow_private_relays, "junk vouches for nothing");
    }
}
