//! Pool scenarios: many relays as one subscription over real sockets.

use std::time::Duration;

use futures_util::StreamExt;
use tether_core::nostr::Filter;
use tether_core::pool::{Missing, Outcome, PoolConfig, RelayId};
use tether_driver::{PoolItem, SessionEvent};
use tether_testkit::server::TestRelay;
use tether_testkit::RelayModel;

use crate::relay::config;
use crate::{within, Harness};

/// Two live relays with the same three events and one that refuses every connection: each
/// event arrives once, both live relays answer EOSE long before the deadline (the dead one
/// holds nothing up), and the outcome is `Partial`, naming the dead relay.
pub async fn a_dead_relay_never_stalls_the_others_and_the_outcome_says_so<H: Harness>() {
    let a = H::on_server(TestRelay::start(RelayModel::with_events(3)))
        .await
        .unwrap();
    let b = H::on_server(TestRelay::start(RelayModel::with_events(3)))
        .await
        .unwrap();
    let dead = H::on_server(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        drop(listener);
        url
    })
    .await;
    let mut pool_config = PoolConfig::default();
    pool_config.relay = config().relay;
    pool_config.eose_deadline = Duration::from_secs(3);
    let pool = H::pool(pool_config, config());
    let mut relays = Vec::new();
    for url in [a.url(), b.url(), dead] {
        relays.push(pool.add_relay(&url).await.unwrap());
    }
    let started = H::now();
    let mut sub = pool
        .subscribe(vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()])
        .await
        .unwrap();
    let mut events = Vec::new();
    let mut eose = Vec::new();
    let outcome = loop {
        let item = within::<H, _>(Duration::from_secs(20), sub.next())
            .await
            .expect("an item within 20 s")
            .expect("the subscription goes on");
        match item {
            PoolItem::Event { raw, .. } => events.push(raw),
            PoolItem::Eose { relay } => eose.push((relay, H::now() - started)),
            PoolItem::Complete(outcome) => break (outcome, H::now() - started),
            _ => {}
        }
    };
    assert_eq!(
        events.len(),
        3,
        "each event once across two relays: {events:?}"
    );
    assert_eq!(
        eose.iter().map(|(r, _)| *r).collect::<Vec<_>>().len(),
        2,
        "{eose:?}"
    );
    assert!(
        eose.iter().all(|(_, at)| *at < Duration::from_secs(2)),
        "the live relays answered without waiting for the dead one: {eose:?}"
    );
    assert_eq!(
        outcome.0,
        Outcome::Partial {
            missing: vec![(RelayId(2), Missing::NoEose)]
        }
    );
    assert!(outcome.1 >= Duration::from_millis(2_900), "{:?}", outcome.1);
    assert_eq!(relays, [RelayId(0), RelayId(1), RelayId(2)]);
}

/// Each relay of a pool gets its own NIP-11 document: one that serves one has it applied
/// to its session, one that serves none (404) changes nothing.
pub async fn each_relay_of_a_pool_gets_its_information_document<H: Harness>() {
    let mut model = RelayModel::with_events(1);
    model.info_document = Some(r#"{"limitation":{"max_message_length":2048}}"#.to_owned());
    let with = H::on_server(TestRelay::start(model)).await.unwrap();
    let without = H::on_server(TestRelay::start(RelayModel::with_events(1)))
        .await
        .unwrap();
    let mut pool_config = PoolConfig::default();
    pool_config.relay = config().relay;
    let mut config = config();
    config.relay_info.fetch = true;
    let pool = H::pool(pool_config, config);
    let mut events = pool.events().unwrap();
    for url in [with.url(), without.url()] {
        pool.add_relay(&url).await.unwrap();
    }
    let mut outcomes = Vec::new();
    while outcomes.len() < 2 {
        let (relay, event) = within::<H, _>(Duration::from_secs(10), events.next())
            .await
            .expect("both documents within 10 s")
            .expect("the pool goes on");
        match event {
            SessionEvent::RelayInfo { applied, .. } => {
                outcomes.push((relay, format!("max {:?}", applied.max_message_length)));
            }
            SessionEvent::RelayInfoUnavailable { why } => outcomes.push((relay, why)),
            _ => {}
        }
    }
    outcomes.sort();
    assert_eq!(
        outcomes,
        [
            (RelayId(0), "max Some(2048)".to_owned()),
            (RelayId(1), "HTTP status 404".to_owned())
        ]
    );
    assert_eq!(with.log().info_requests.len(), 1);
    assert_eq!(without.log().info_requests.len(), 1);
}
