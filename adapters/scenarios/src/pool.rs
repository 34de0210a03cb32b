//! Pool scenarios: many relays as one subscription over real sockets.

use std::time::Duration;

use futures_util::StreamExt;
use tether_core::nostr::Filter;
use tether_core::pool::{Missing, Outcome, PoolConfig, RelayId};
use tether_driver::{PoolItem, SessionEvent};
use tether_testkit::server::TestRelay;
use tether_testkit::{RelayModel, StoredEvent};

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

/// A kind-1 note signed by a fixed key, stored as a relay would.
fn signed_note(n: u64) -> StoredEvent {
    use nostr::{EventBuilder, JsonUtil, Keys, SecretKey, Timestamp};
    let keys = Keys::new(SecretKey::from_hex(&"03".repeat(32)).unwrap());
    let created_at = 1_700_000_000 + n;
    let json = EventBuilder::text_note(format!("note {n}"))
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(&keys)
        .unwrap()
        .as_json();
    StoredEvent {
        n,
        created_at,
        kind: 1,
        json,
    }
}

fn json_field(event: &StoredEvent, name: &str) -> String {
    let start = event.json.find(&format!(r#""{name}":""#)).unwrap() + name.len() + 4;
    let len = event.json[start..].find('"').unwrap();
    event.json[start..start + len].to_owned()
}

/// A pool with the verifier on, over two relays: relay a holds notes 1 and 2, a copy of note
/// 3 with other content, and note 4 with note 1's signature; relay b holds the genuine note
/// 3. Notes 1-3 arrive once each, genuine; note 4 never; every failed copy is an `Invalid`
/// item naming relay a and counted in its stats; relay b's count stays 0.
pub async fn verification_drops_forgeries_and_counts_them_against_their_relay<H: Harness>() {
    let genuine: Vec<StoredEvent> = (1..=4).map(signed_note).collect();
    let mut forged3 = genuine[2].clone();
    forged3.json = forged3.json.replace("note 3", "note three");
    let mut bad_sig4 = genuine[3].clone();
    bad_sig4.json = bad_sig4.json.replace(
        &json_field(&genuine[3], "sig"),
        &json_field(&genuine[0], "sig"),
    );
    let mut model_a = RelayModel::default();
    model_a.events = vec![genuine[0].clone(), genuine[1].clone(), forged3, bad_sig4];
    let mut model_b = RelayModel::default();
    model_b.events = vec![genuine[2].clone()];
    let a = H::on_server(TestRelay::start(model_a)).await.unwrap();
    let b = H::on_server(TestRelay::start(model_b)).await.unwrap();
    let mut pool_config = PoolConfig::default();
    pool_config.relay = config().relay;
    let mut driver_config = config();
    driver_config.verifier = Some(std::sync::Arc::new(tether_driver::verify::Verifier::new()));
    let pool = H::pool(pool_config, driver_config);
    let ra = pool.add_relay(&a.url()).await.unwrap();
    let rb = pool.add_relay(&b.url()).await.unwrap();
    let mut sub = pool
        .subscribe(vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()])
        .await
        .unwrap();
    let (mut contents, mut invalid) = (Vec::new(), Vec::new());
    loop {
        let item = within::<H, _>(Duration::from_secs(20), sub.next())
            .await
            .expect("an item within 20 s")
            .expect("the subscription goes on");
        match item {
            PoolItem::Event { raw, .. } => {
                let at = raw.find(r#""content":""#).unwrap() + 11;
                contents.push(raw[at..at + raw[at..].find('"').unwrap()].to_owned());
            }
            PoolItem::Invalid { relay, id, reason } => invalid.push((relay, id, reason)),
            PoolItem::Complete(outcome) => {
                assert_eq!(outcome, Outcome::Complete);
                break;
            }
            _ => {}
        }
    }
    contents.sort_unstable();
    assert_eq!(contents, ["note 1", "note 2", "note 3"]);
    let id4 =
        tether_core::nostr::message::EventId::from_hex(&json_field(&genuine[3], "id")).unwrap();
    assert!(
        invalid
            .iter()
            .any(|(r, id, why)| *r == ra && *id == id4 && why == "bad signature"),
        "{invalid:?}"
    );
    assert!(invalid.iter().all(|(r, ..)| *r == ra), "{invalid:?}");
    let stats_a = pool.relay_stats(ra).await.unwrap();
    let stats_b = pool.relay_stats(rb).await.unwrap();
    assert_eq!(stats_a.invalid, invalid.len() as u64);
    assert_eq!(stats_b.invalid, 0);
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
        let notice = within::<H, _>(Duration::from_secs(10), events.next())
            .await
            .expect("both documents within 10 s")
            .expect("the pool goes on");
        let relay = notice.relay;
        match notice.event {
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

/// A relay URL given twice, spelled differently (a trailing slash), is one relay: one id,
/// one socket, one REQ.
pub async fn the_same_relay_given_twice_is_one_relay<H: Harness>() {
    let relay = H::on_server(TestRelay::start(RelayModel::with_events(2)))
        .await
        .unwrap();
    let mut pool_config = PoolConfig::default();
    pool_config.relay = config().relay;
    let pool = H::pool(pool_config, config());
    let url = relay.url();
    let first = pool.add_relay(&url).await.unwrap();
    let again = pool.add_relay(&format!("{url}/")).await.unwrap();
    assert_eq!(again, first);
    let mut sub = pool
        .subscribe(vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()])
        .await
        .unwrap();
    let mut events = 0;
    loop {
        let item = within::<H, _>(Duration::from_secs(10), sub.next())
            .await
            .expect("an item within 10 s")
            .expect("the subscription goes on");
        match item {
            PoolItem::Event { .. } => events += 1,
            PoolItem::Complete(outcome) => {
                assert_eq!(outcome, Outcome::Complete);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(events, 2);
    let log = relay.log();
    assert_eq!(log.accepted.len(), 1, "one socket");
    assert_eq!(log.frames("REQ").count(), 1, "one REQ");
}
