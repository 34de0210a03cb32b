//! What the real-peer tests of this crate share.

use nostr_relay_builder::{LocalRelay, RelayBuilder};

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
