//! The relays routing by people opens, as the pool driver dials and names them.
//!
//! Where it dials: a relay that only a stranger's relay list names at public addresses only
//! (the core's rule, `relay_url::private_addresses_allowed`), the relays the application gave
//! (added, indexers) at any. The connector here records each dial and opens nothing; the
//! runtimes' own connectors refuse a private address when told to (their unit tests).
//!
//! How it names them: routing reuses the id of a relay it let go of, and each relay event
//! carries the URL its relay had when it happened.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use nostr::{EventBuilder, JsonUtil, Keys, Kind, SecretKey, Tag, Timestamp};
use tether_tokio::tether_driver::{
    pool_driver, Addresses, BoxFuture, BoxSocket, PoolHandle, PoolRelayEvent, PoolSubscription,
    WsConnect, WsError,
};
use tether_tokio::{Config, Filter, PoolConfig, SessionEvent, TokioRuntime};

/// Records every dial; no socket ever opens.
#[derive(Default)]
struct Recording {
    dials: Mutex<Vec<(String, Addresses)>>,
}

impl WsConnect for Recording {
    fn connect(
        &self,
        url: &str,
        _max_message: usize,
        addresses: Addresses,
    ) -> BoxFuture<Result<BoxSocket, WsError>> {
        self.dials.lock().unwrap().push((url.to_owned(), addresses));
        Box::pin(std::future::pending())
    }
}

impl Recording {
    /// Wait (5 s at most) until `url` was dialed.
    async fn dialed(&self, url: &str) {
        for _ in 0..100 {
            if self.dials.lock().unwrap().iter().any(|(u, _)| u == url) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{url} not dialed: {:?}", self.dials.lock().unwrap());
    }

    /// Every dial, in URL order.
    fn sorted(&self) -> Vec<(String, Addresses)> {
        let mut dials = self.dials.lock().unwrap().clone();
        dials.sort_by(|a, b| a.0.cmp(&b.0));
        dials
    }
}

/// A pool with `wss://given.example` added and one indexer, routing the author of `keys`
/// (for as long as the subscription is held).
async fn routing(
    keys: &Keys,
    allow_private_relays: bool,
    max_relays: usize,
) -> (PoolHandle, Arc<Recording>, PoolSubscription) {
    let ws = Arc::new(Recording::default());
    let mut pool_config = PoolConfig::default();
    pool_config
        .router
        .set_indexers(vec!["wss://indexer.example".into()]);
    pool_config.router.allow_private_relays = allow_private_relays;
    pool_config.router.max_relays = max_relays;
    let mut config = Config::default();
    config.seed = Some(1);
    let (pool, driver) = pool_driver(pool_config, config, TokioRuntime::new(), ws.clone());
    tokio::spawn(driver);
    pool.add_relay("wss://given.example").await.unwrap();
    let filter = format!(
        r#"{{"kinds":[1],"authors":["{}"]}}"#,
        keys.public_key().to_hex()
    );
    let sub = pool
        .subscribe_outbox(Filter::new(&filter).unwrap())
        .await
        .unwrap();
    (pool, ws, sub)
}

/// `keys`' relay list naming `relay`, dated `created_at`.
fn list(keys: &Keys, relay: &str, created_at: u64) -> String {
    EventBuilder::new(Kind::RelayList, "")
        .tag(Tag::parse(["r", relay]).unwrap())
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(keys)
        .unwrap()
        .as_json()
}

fn keys() -> Keys {
    Keys::new(SecretKey::from_hex(&"03".repeat(32)).unwrap())
}

#[tokio::test]
async fn a_relay_from_a_strangers_list_is_dialed_at_public_addresses_only() {
    let keys = keys();
    let (pool, ws, _sub) = routing(&keys, false, 20).await;
    pool.handle_relay_list(list(&keys, "wss://relay.example", 1_700_000_000))
        .await
        .unwrap();
    ws.dialed("wss://relay.example").await;
    assert_eq!(
        ws.sorted(),
        [
            ("wss://given.example".to_owned(), Addresses::Any),
            ("wss://indexer.example".to_owned(), Addresses::Any),
            ("wss://relay.example".to_owned(), Addresses::Public),
        ]
    );
}

#[tokio::test]
async fn a_router_that_allows_private_relays_dials_them_anywhere() {
    let keys = keys();
    let (pool, ws, _sub) = routing(&keys, true, 20).await;
    pool.handle_relay_list(list(&keys, "wss://relay.example", 1_700_000_000))
        .await
        .unwrap();
    ws.dialed("wss://relay.example").await;
    assert_eq!(
        ws.sorted(),
        [
            ("wss://given.example".to_owned(), Addresses::Any),
            ("wss://indexer.example".to_owned(), Addresses::Any),
            ("wss://relay.example".to_owned(), Addresses::Any),
        ]
    );
}

/// The author moves: routing lets the old relay go and gives its id to the new one. The old
/// one's last event still names it.
#[tokio::test]
async fn a_relay_event_names_its_relay_after_its_id_is_reused() {
    let keys = keys();
    // The given relay, the indexer and one routed relay.
    let (pool, ws, _sub) = routing(&keys, false, 3).await;
    let mut events = pool.events().unwrap();
    pool.handle_relay_list(list(&keys, "wss://old.example", 1_700_000_000))
        .await
        .unwrap();
    ws.dialed("wss://old.example").await;
    pool.handle_relay_list(list(&keys, "wss://new.example", 1_700_000_100))
        .await
        .unwrap();
    ws.dialed("wss://new.example").await;
    let let_go = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let event = events.next().await.expect("the pool goes on");
            if matches!(event.event, SessionEvent::Disconnected { .. }) {
                break event;
            }
        }
    })
    .await
    .expect("the old relay's disconnect");
    let PoolRelayEvent { relay, url, .. } = let_go;
    assert_eq!(url.as_deref(), Some("wss://old.example"));
    assert_eq!(
        pool.relay_url(relay).await.unwrap().as_deref(),
        Some("wss://new.example"),
        "the id was reused"
    );
}
