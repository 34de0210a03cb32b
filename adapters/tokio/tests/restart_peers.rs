//! A client process stopped and started again around notes published while it was down,
//! against real relays with real signatures: rust-nostr's nostr-relay-builder (NIP-77: the
//! restored subscription catches up by negentropy) and a nostr-rs-relay process (the `since`
//! fallback). The first client takes its checkpoint with a publish still waiting in its
//! outbox (it was made while the client had no socket) and is dropped; the second is
//! restored from the checkpoint's JSON bytes. It delivers exactly the notes it missed, one
//! of them 60 s late, plus the publish it sent again, each once, and none of the notes the
//! first client already had.
//!
//! The nostr-rs-relay test is reported as ignored, with the reason, when the binary is
//! missing (the testkit's `trials` harness), and fails when `TETHER_REQUIRE_PEERS=1`.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use nostr::prelude::*;
use tether_testkit::peers::{peer, Missing, NostrRsLimits, NostrRsRelay};
use tether_tokio::tether_core::nostr::{CatchUpMethod, RelayCheckpoint};
use tether_tokio::{Filter, RelayClient, Subscription, SubscriptionEvent};
use tokio::time::timeout;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(30);

fn note_at(keys: &Keys, text: &str, at: u64) -> Event {
    EventBuilder::text_note(text)
        .custom_created_at(Timestamp::from(at))
        .sign_with_keys(keys)
        .unwrap()
}

fn now() -> u64 {
    Timestamp::now().as_secs()
}

/// Publish straight to the relay and wait for each OK.
async fn publish(url: &str, events: &[&Event]) {
    let client = RelayClient::connect(url, common::config(99)).unwrap();
    for event in events {
        let published = timeout(WAIT, client.publish(event.as_json())).await;
        assert!(
            matches!(published, Ok(Ok(_))),
            "{url} refused {}: {published:?}",
            event.id
        );
    }
    let _ = client.disconnect().await;
}

/// Read `sub` until `done`; how often each id came, and the catch-up reports.
async fn read_until(
    sub: &mut Subscription,
    counts: &mut BTreeMap<String, usize>,
    caught_up: &mut Vec<CatchUpMethod>,
    what: &str,
    done: impl Fn(&BTreeMap<String, usize>, &[CatchUpMethod]) -> bool,
) {
    let finished = timeout(WAIT, async {
        while !done(counts, caught_up) {
            match sub.next().await {
                Some(SubscriptionEvent::Event(e)) => {
                    *counts.entry(e.id.to_string()).or_default() += 1
                }
                Some(SubscriptionEvent::CaughtUp(c)) => caught_up.push(c.method),
                Some(SubscriptionEvent::Closed { reason, .. }) => panic!("closed: {reason}"),
                Some(_) => {}
                None => panic!("the subscription ended before {what}"),
            }
        }
    })
    .await;
    assert!(finished.is_ok(), "no {what} within {WAIT:?}: {counts:?}");
}

fn ids(events: &[&Event]) -> Vec<String> {
    let mut ids: Vec<String> = events.iter().map(|e| e.id.to_hex()).collect();
    ids.sort();
    ids
}

/// The restart, against the relay at `url`; returns how the restored subscription caught up.
async fn restart_around_missed_notes(url: &str) -> CatchUpMethod {
    let keys = Keys::generate();
    let t0 = now();
    let before: Vec<Event> = (0..2)
        .map(|i| note_at(&keys, &format!("before {i}"), t0 - 20 + 10 * i))
        .collect();
    publish(url, &before.iter().collect::<Vec<_>>()).await;

    // The first process: live, then without a socket, a publish waiting in its outbox.
    let client = RelayClient::connect(url, common::config(1)).unwrap();
    let mut sub = client
        .subscribe(vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()])
        .await
        .unwrap();
    let (mut counts, mut caught_up) = (BTreeMap::new(), Vec::new());
    read_until(
        &mut sub,
        &mut counts,
        &mut caught_up,
        "the stored notes",
        |c, _| c.len() == 2,
    )
    .await;
    client.disconnect().await.unwrap();
    let pending = note_at(&keys, "published while away", now());
    let waiting = {
        let client = client.clone();
        let json = pending.as_json();
        tokio::spawn(async move { client.publish(json).await })
    };
    // The publish command reaches the driver on its own task: checkpoint until it is in
    // the outbox (bounded), with no sleep deciding it.
    let checkpoint = timeout(WAIT, async {
        loop {
            let checkpoint = client.checkpoint().await.unwrap();
            if checkpoint.publishes() == 1 {
                return checkpoint;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the publish waits in the outbox");
    let bytes = checkpoint.to_json();
    drop(sub);
    drop(client);
    waiting.abort();

    // While no process runs: three new notes and one authored 60 s earlier.
    let t1 = now();
    let mut missed: Vec<Event> = (0..3)
        .map(|i| note_at(&keys, &format!("missed {i}"), t1 - 3 + i))
        .collect();
    missed.push(note_at(&keys, "60 s late", t1 - 60));
    publish(url, &missed.iter().collect::<Vec<_>>()).await;

    // The second process.
    let checkpoint = RelayCheckpoint::from_json(&bytes).unwrap();
    let (client, mut subs) = RelayClient::restore(url, common::config(2), &checkpoint).unwrap();
    assert_eq!(subs.len(), 1);
    let mut sub = subs.remove(0);
    let (mut counts, mut caught_up) = (BTreeMap::new(), Vec::new());
    read_until(
        &mut sub,
        &mut counts,
        &mut caught_up,
        "the catch-up",
        |_, c| !c.is_empty(),
    )
    .await;
    let sentinel = note_at(&keys, "sentinel", now());
    publish(url, &[&sentinel]).await;
    read_until(
        &mut sub,
        &mut counts,
        &mut caught_up,
        "the sentinel",
        |c, _| c.contains_key(&sentinel.id.to_hex()),
    )
    .await;
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    let mut expected: Vec<&Event> = missed.iter().collect();
    expected.extend([&pending, &sentinel]);
    let got: Vec<String> = counts.keys().cloned().collect();
    assert_eq!(
        got,
        ids(&expected),
        "exactly what was missed, and the re-sent publish"
    );
    assert_eq!(caught_up.len(), 1);
    let _ = client.disconnect().await;
    caught_up[0]
}

async fn nostr_relay_builder_restored_client_catches_up_by_negentropy() {
    // The relay must outlive the test's requests: keep it bound.
    let (_relay, url) = common::start_builder().await;
    assert_eq!(
        restart_around_missed_notes(&url).await,
        CatchUpMethod::Negentropy
    );
}

async fn nostr_rs_relay_restored_client_catches_up_by_since() -> Result<(), Missing> {
    let binary = peer("nostr-rs-relay")?;
    let rs = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    assert_eq!(
        restart_around_missed_notes(&rs.url()).await,
        CatchUpMethod::Since
    );
    Ok(())
}

tether_testkit::tokio_main!(
    nostr_relay_builder_restored_client_catches_up_by_negentropy,
    nostr_rs_relay_restored_client_catches_up_by_since,
);
