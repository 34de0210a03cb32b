//! What the real-peer tests of this crate share.

use std::time::Duration;

use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tether_tokio::tether_core::backoff::{BackoffPolicy, Jitter};
use tether_tokio::Config;

/// A seeded client configuration that reconnects within a second (real time) instead of
/// 1-30 s.
pub(crate) fn config(seed: u64) -> Config {
    let mut config = Config::default();
    config.seed = Some(seed);
    config.relay.link.reconnect = BackoffPolicy {
        base: Duration::from_millis(200),
        factor: 2.0,
        cap: Duration::from_millis(800),
        max_attempts: None,
        jitter: Jitter::Proportional(0.2),
    };
    config
}

/// nostr-relay-builder on 127.0.0.1, and its URL. It picks a random port that was free when
/// it looked and binds it later; another socket can take the port in between
/// (`AddrInUse`), so a failed start is tried again on a new port.
pub(crate) async fn start_builder() -> (LocalRelay, String) {
    let mut attempt = 0;
    loop {
        let relay = LocalRelay::new(RelayBuilder::default());
        match relay.run().await {
            Ok(()) => {
                let url = relay.url().await.to_string();
                return (relay, url);
            }
            Err(error) if attempt < 5 => {
                eprintln!("nostr-relay-builder did not start ({error}); again on another port");
                attempt += 1;
            }
            Err(error) => panic!("nostr-relay-builder did not start: {error}"),
        }
    }
}
