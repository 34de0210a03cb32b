//! Real peers in one pool, through `tether_tokio::pool` (real time, real sockets, real
//! signatures): a nostr-rs-relay process, rust-nostr's nostr-relay-builder in this process,
//! and the testkit's `TestRelay`, with overlapping stores — every event on exactly two of
//! the three. nostr-rs-relay is killed and restarted mid-test. Reported as ignored, with the
//! reason, when nostr-rs-relay is missing (the testkit's `trials` harness), failed when
//! `TETHER_REQUIRE_PEERS=1`.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::StreamExt;
use nostr::prelude::*;
use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tether_testkit::peers::{self, peer, NostrRsLimits, NostrRsRelay};
use tether_testkit::server::TestRelay;
use tether_testkit::wait::{within as within_on, Tokio};
use tether_testkit::{RelayModel, StoredEvent};
use tether_tokio::tether_core::pool::Missing;
use tether_tokio::{
    Config, Filter, Outcome, PoolConfig, PoolItem, PoolSubscription, RelayClient, RelayId,
};

async fn within<O>(limit: Duration, future: impl std::future::Future<Output = O>) -> Option<O> {
    within_on::<Tokio, O>(limit, future).await
}

fn binary() -> Result<PathBuf, peers::Missing> {
    peer("nostr-rs-relay")
}

fn config(seed: u64) -> Config {
    let mut config = Config::default();
    config.seed = Some(seed);
    // Real time: reconnect within a second instead of 1-30 s.
    config.relay.link.reconnect = common::quick_reconnect(200, 800);
    config
}

fn by_author(keys: &Keys) -> Vec<Filter> {
    let filter = format!(
        r#"{{"kinds":[1],"authors":["{}"]}}"#,
        keys.public_key().to_hex()
    );
    vec![Filter::new(&filter).unwrap()]
}

/// Signed notes, one second apart in `created_at`, ending a minute ago.
fn notes(keys: &Keys, count: u64) -> Vec<Event> {
    let start = Timestamp::now().as_secs() - 60 - count;
    (0..count)
        .map(|i| {
            EventBuilder::text_note(format!("note {i}"))
                .custom_created_at(Timestamp::from(start + i))
                .sign_with_keys(keys)
                .unwrap()
        })
        .collect()
}

async fn publish(url: &str, events: &[&Event]) {
    let client = RelayClient::connect(url, config(99)).unwrap();
    for event in events {
        client.publish(event.as_json()).await.unwrap();
    }
    let _ = client.disconnect().await;
}

fn stored(n: u64, event: &Event) -> StoredEvent {
    StoredEvent {
        n,
        created_at: event.created_at.as_secs(),
        kind: u64::from(event.kind.as_u16()),
        json: event.as_json(),
    }
}

/// What a query heard: event ids with the relay that delivered each (every one once, or
/// the test fails), EOSEs, and the outcome; reads until `Complete`.
#[derive(Debug, Default)]
struct Query {
    events: BTreeMap<String, RelayId>,
    eose: Vec<RelayId>,
    outcome: Option<Outcome>,
}

async fn until_complete(sub: &mut PoolSubscription, limit: Duration) -> Query {
    let mut q = Query::default();
    while q.outcome.is_none() {
        let item = within(limit, sub.next())
            .await
            .expect("an item in time")
            .expect("the subscription goes on");
        collect(&mut q, item);
    }
    q
}

fn collect(q: &mut Query, item: PoolItem) {
    match item {
        PoolItem::Event { relay, id, .. } => {
            let first = q.events.insert(id.to_string(), relay);
            assert!(first.is_none(), "{id} delivered twice");
        }
        PoolItem::Eose { relay } => q.eose.push(relay),
        PoolItem::Complete(outcome) => q.outcome = Some(outcome),
        PoolItem::Ended { reasons } => panic!("ended: {reasons:?}"),
        _ => {}
    }
}

fn ids(events: &[&Event]) -> Vec<String> {
    let mut ids: Vec<String> = events.iter().map(|e| e.id.to_hex()).collect();
    ids.sort();
    ids
}

async fn three_real_relays_with_overlapping_stores_one_killed_and_restarted_every_event_once(
) -> Result<(), peers::Missing> {
    let binary = binary()?;
    let keys = Keys::generate();
    let all = notes(&keys, 9);
    let e: Vec<&Event> = all.iter().collect();

    // nostr-rs-relay holds notes 0-5, nostr-relay-builder 3-8, the TestRelay 0-2 and 6-8.
    let mut rs = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    publish(&rs.url(), &e[0..6]).await;
    let builder = LocalRelay::new(RelayBuilder::default());
    builder.run().await.unwrap();
    let builder_url = builder.url().await.to_string();
    publish(&builder_url, &e[3..9]).await;
    let mut model = RelayModel::default();
    for (n, event) in e.iter().enumerate() {
        if !(3..6).contains(&n) {
            model.events.push(stored(n as u64, event));
        }
    }
    let testkit = TestRelay::start(model).await.unwrap();

    let mut pool_config = PoolConfig::default();
    pool_config.relay = config(1).relay;
    pool_config.eose_deadline = Duration::from_secs(3);
    let pool = tether_tokio::pool(pool_config, config(1));
    let (rs_id, builder_id, testkit_id) = (
        pool.add_relay(&rs.url()).await.unwrap(),
        pool.add_relay(&builder_url).await.unwrap(),
        pool.add_relay(&testkit.url()).await.unwrap(),
    );
    assert_eq!(
        (rs_id, builder_id, testkit_id),
        (RelayId(0), RelayId(1), RelayId(2))
    );

    // 1. All three up: every stored event once, each relay answers EOSE, `Complete`.
    let mut live = pool.subscribe(by_author(&keys)).await.unwrap();
    let first = until_complete(&mut live, Duration::from_secs(10)).await;
    assert_eq!(first.outcome, Some(Outcome::Complete));
    assert_eq!(first.events.keys().cloned().collect::<Vec<_>>(), ids(&e));
    let mut eosed = first.eose.clone();
    eosed.sort();
    assert_eq!(eosed, [rs_id, builder_id, testkit_id]);

    // 2. nostr-rs-relay killed (no goodbye): a query made now still gets every event, from
    //    the other two, and its outcome names the dead relay at the deadline.
    rs.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut during = pool.subscribe(by_author(&keys)).await.unwrap();
    let q = until_complete(&mut during, Duration::from_secs(10)).await;
    assert_eq!(
        q.outcome,
        Some(Outcome::Partial {
            missing: vec![(rs_id, Missing::NoEose)]
        })
    );
    assert_eq!(q.events.keys().cloned().collect::<Vec<_>>(), ids(&e));
    assert!(
        q.events.values().all(|r| *r != rs_id),
        "nothing from the dead relay: {:?}",
        q.events
    );
    drop(during);

    // 3. While it is down, a new note reaches the live subscription through the testkit
    //    relay; then nostr-rs-relay restarts with a note only it has, and the pool's
    //    reconnect replays the live subscription there (with `since`): it arrives, once.
    let late = notes(&keys, 2);
    let while_down = &late[0];
    testkit.store(stored(100, while_down));
    let restarted_only = EventBuilder::text_note("only on the restarted relay")
        .sign_with_keys(&keys)
        .unwrap();
    rs.restart().await.unwrap();
    publish(&rs.url(), &[&restarted_only]).await;
    let mut after = Query::default();
    let wanted = [while_down.id.to_hex(), restarted_only.id.to_hex()];
    while !wanted.iter().all(|id| after.events.contains_key(id)) {
        let item = within(Duration::from_secs(15), live.next())
            .await
            .expect("the missed events within 15 s")
            .expect("the subscription goes on");
        collect(&mut after, item);
    }
    // Let anything re-sent by the replay's overlap arrive before counting.
    while let Some(Some(item)) = within(Duration::from_millis(700), live.next()).await {
        collect(&mut after, item);
    }
    assert_eq!(
        after.events,
        BTreeMap::from([
            (while_down.id.to_hex(), testkit_id),
            (restarted_only.id.to_hex(), rs_id),
        ]),
        "only the two new events: the replay's stored events were dropped as duplicates"
    );
    assert!(
        after.eose.contains(&rs_id),
        "the restarted relay answered the replayed REQ: {:?}",
        after.eose
    );

    // 4. A fresh query after the restart: all eleven events once, `Complete`.
    let mut again = pool.subscribe(by_author(&keys)).await.unwrap();
    let q = until_complete(&mut again, Duration::from_secs(10)).await;
    assert_eq!(q.outcome, Some(Outcome::Complete));
    let mut everything: Vec<&Event> = e.clone();
    everything.push(while_down);
    everything.push(&restarted_only);
    assert_eq!(
        q.events.keys().cloned().collect::<Vec<_>>(),
        ids(&everything)
    );

    pool.close().await.unwrap();
    builder.shutdown();
    Ok(())
}

tether_testkit::tokio_main!(
    three_real_relays_with_overlapping_stores_one_killed_and_restarted_every_event_once,
);
