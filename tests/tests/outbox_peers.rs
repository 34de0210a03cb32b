//! Routing by people against real relays on loopback: rust-nostr's nostr-relay-builder as
//! the indexer and as one content relay, a nostr-rs-relay process as the other. Signed
//! relay lists on the indexer name where each author writes; the pool finds the notes
//! there, each once, and follows a note published afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::StreamExt;
use nostr::prelude::*;
use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tether_testkit::peers::{self, peer, NostrRsLimits, NostrRsRelay};
use tether_testkit::wait::{within as within_on, Tokio};
use tether_tokio::tether_core::router::{relay_url, RouterConfig};
use tether_tokio::{Config, Filter, PoolConfig, PoolItem, PoolSubscription, RelayClient, RelayId};

async fn within<O>(limit: Duration, future: impl std::future::Future<Output = O>) -> Option<O> {
    within_on::<Tokio, O>(limit, future).await
}

async fn publish(url: &str, events: &[&Event]) {
    let client = RelayClient::connect(url, Config::default()).unwrap();
    for event in events {
        client.publish(event.as_json()).await.unwrap();
    }
    let _ = client.disconnect().await;
}

fn note(keys: &Keys, text: &str) -> Event {
    EventBuilder::text_note(text)
        .custom_created_at(Timestamp::from(Timestamp::now().as_secs() - 30))
        .sign_with_keys(keys)
        .unwrap()
}

/// `keys`' kind 10002 list: writes to `url`.
fn relay_list(keys: &Keys, url: &str) -> Event {
    EventBuilder::new(Kind::RelayList, "")
        .tags([Tag::parse(["r", url]).unwrap()])
        .sign_with_keys(keys)
        .unwrap()
}

/// Event ids until `want` are all in (each once, or the test fails), and the relays the
/// `Routed` reports named.
async fn collect_until(
    sub: &mut PoolSubscription,
    want: &BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    routed: &mut BTreeMap<RelayId, String>,
) {
    while !want.is_subset(seen) {
        let item = within(Duration::from_secs(20), sub.next())
            .await
            .expect("the notes in time")
            .expect("the subscription goes on");
        match item {
            PoolItem::Event { id, .. } => {
                assert!(seen.insert(id.to_string()), "{id} delivered twice");
            }
            PoolItem::Routed(report) => routed.extend(report.relays),
            _ => {}
        }
    }
}

async fn authors_are_found_on_the_real_relays_their_lists_name() -> Result<(), peers::Missing> {
    let binary = peer("nostr-rs-relay")?;
    let indexer = LocalRelay::new(RelayBuilder::default());
    indexer.run().await.unwrap();
    let builder = LocalRelay::new(RelayBuilder::default());
    builder.run().await.unwrap();
    let rs = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    let (index_url, builder_url) = (
        indexer.url().await.to_string(),
        builder.url().await.to_string(),
    );
    let (a, b) = (Keys::generate(), Keys::generate());
    let (a1, b1) = (note(&a, "a1"), note(&b, "b1"));
    publish(
        &index_url,
        &[&relay_list(&a, &rs.url()), &relay_list(&b, &builder_url)],
    )
    .await;
    publish(&rs.url(), &[&a1]).await;
    publish(&builder_url, &[&b1]).await;

    let mut pool_config = PoolConfig::default();
    let mut router = RouterConfig::default();
    router.indexers = vec![index_url.clone()];
    router.allow_private_relays = true;
    pool_config.router = router;
    let pool = tether_tokio::pool(pool_config, Config::default());
    let filter = format!(
        r#"{{"kinds":[1],"authors":["{}","{}"]}}"#,
        a.public_key().to_hex(),
        b.public_key().to_hex()
    );
    let mut sub = pool
        .subscribe_outbox(Filter::new(&filter).unwrap())
        .await
        .unwrap();
    let (mut seen, mut routed) = (BTreeSet::new(), BTreeMap::new());
    let want: BTreeSet<String> = [&a1, &b1].iter().map(|e| e.id.to_hex()).collect();
    collect_until(&mut sub, &want, &mut seen, &mut routed).await;
    // The handle names each relay routing opened by the URL it dials, as `Routed` does.
    let urls: BTreeSet<&str> = routed.values().map(String::as_str).collect();
    for url in [&index_url, &rs.url(), &builder_url] {
        let url = relay_url::normalize(url, true).unwrap();
        assert!(urls.contains(url.as_str()), "{url} in {urls:?}");
    }
    for (relay, url) in &routed {
        assert_eq!(pool.relay_url(*relay).await.unwrap().as_ref(), Some(url));
    }
    assert_eq!(pool.relay_url(RelayId(9_999)).await.unwrap(), None);
    // Live: a note published afterwards arrives from the relay A's list names.
    let a2 = note(&a, "a2");
    publish(&rs.url(), &[&a2]).await;
    let want: BTreeSet<String> = [a2.id.to_hex()].into();
    collect_until(&mut sub, &want, &mut seen, &mut routed).await;
    assert_eq!(seen.len(), 3);
    pool.close().await.unwrap();
    indexer.shutdown();
    builder.shutdown();
    Ok(())
}

tether_testkit::tokio_main!(authors_are_found_on_the_real_relays_their_lists_name);
