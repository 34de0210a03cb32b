//! tether-tokio against a real nostr-rs-relay 0.8 process on 127.0.0.1 (real time, real
//! signatures). Reported as ignored, with the reason, when the binary is missing (the
//! testkit's `trials` harness), failed when `TETHER_REQUIRE_PEERS=1`.
//!
//! What nostr-rs-relay does that the tests lean on: it refuses the 33rd concurrent
//! subscription with a NOTICE only (no subscription id); over `subscriptions_per_min` it
//! stalls the connection instead of refusing; over `messages_per_sec` it delays writes.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use futures_util::future::join_all;
use nostr::prelude::*;
use tether_testkit::peers::{peer, Missing, NostrRsLimits, NostrRsRelay};
use tether_testkit::proxy::{FaultProxy, ProxyFaults};
use tether_testkit::wait::{connected, eventually, next_matching, until_eose};
use tether_tokio::tether_core::nostr::CatchUpMethod;
use tether_tokio::{Config, Filter, RelayClient, SessionEvent, SubscriptionEvent};

fn binary() -> Result<PathBuf, Missing> {
    peer("nostr-rs-relay")
}

/// The tests in this file start real relay processes; run one at a time so a loaded CI
/// machine is not also running four relays and their SQLite writers against each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

fn note(keys: &Keys, text: &str) -> Event {
    EventBuilder::text_note(text).sign_with_keys(keys).unwrap()
}

async fn forty_subscriptions_leave_thirty_two_live_and_the_rest_queued() -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = binary()?;
    let relay = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    let client = RelayClient::connect(&relay.url(), config(1)).unwrap();
    let mut session = client.events().unwrap();
    let keys = Keys::generate();
    let mut subs = Vec::new();
    for _ in 0..40 {
        subs.push(client.subscribe(by_author(&keys)).await.unwrap());
    }
    // The relay refuses the REQs past its 32nd with NOTICEs that name no subscription. The
    // session pins each on the newest REQ still waiting, learns the cap, and queues the
    // refused ones; REQs not yet sent by then wait as `Queued` without being sent at all.
    let mut live = Vec::new();
    let mut waiting = Vec::new();
    for mut sub in subs {
        let item = next_matching(&mut sub, Duration::from_secs(20), |e| {
            matches!(
                e,
                SubscriptionEvent::Eose
                    | SubscriptionEvent::Closed { .. }
                    | SubscriptionEvent::Queued
            )
        })
        .await;
        match item {
            SubscriptionEvent::Eose => live.push(sub),
            SubscriptionEvent::Queued => waiting.push(sub),
            other => panic!("a cap refusal queues, never closes: {other:?}"),
        }
    }
    assert_eq!((live.len(), waiting.len()), (32, 8));
    // The limit was learned from the NOTICEs: the last one says 32.
    let mut learned = None;
    while learned != Some(32) {
        let event = next_matching(&mut session, Duration::from_secs(10), |e| {
            matches!(e, SessionEvent::SubscriptionLimit { .. })
        })
        .await;
        let SessionEvent::SubscriptionLimit { max } = event else {
            unreachable!()
        };
        learned = Some(max);
    }
    let sent = relay.reqs_received();
    assert!(
        (33..=40).contains(&sent),
        "the cap is only known once the relay refused: {sent} REQs"
    );

    // A 41st subscription waits for a slot too.
    let mut extra = client.subscribe(by_author(&keys)).await.unwrap();
    let first = next_matching(&mut extra, Duration::from_secs(10), |_| true).await;
    assert_eq!(first, SubscriptionEvent::Queued);
    assert_eq!(
        relay.reqs_received(),
        sent,
        "the 41st was not sent over the cap"
    );
    waiting.push(extra);
    // Free one slot: the longest-waiting subscription takes it, and only it. When the relay
    // refused some REQs before the last subscribe, their slots were reused by the newest
    // subscriptions, so this also checks that queue order is registration order, not id order.
    drop(live.pop());
    let mut promoted = waiting.remove(0);
    until_eose(&mut promoted, Duration::from_secs(10)).await;
    live.push(promoted);
    assert_eq!(relay.reqs_received(), sent + 1);

    // The live ones are really live.
    let publisher = RelayClient::connect(&relay.url(), config(2)).unwrap();
    publisher
        .publish(note(&keys, "to all").as_json())
        .await
        .unwrap();
    for sub in &mut live {
        let item = next_matching(sub, Duration::from_secs(10), |_| true).await;
        assert!(matches!(item, SubscriptionEvent::Event(_)), "{item:?}");
    }
    assert_eq!(relay.reqs_received(), sent + 1);
    Ok(())
}

async fn a_req_burst_over_subscriptions_per_min_ends_all_live() -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = binary()?;
    // A burst of 30 REQs, then one every 2 s: REQs 31 and 32 stall the connection ~2 and ~4 s.
    let limits = NostrRsLimits {
        subscriptions_per_min: Some(30),
        ..NostrRsLimits::default()
    };
    let relay = NostrRsRelay::start(&binary, limits).await.unwrap();
    let mut config = config(3);
    // Longer than the deepest stall: a stalled REQ is waited for, not abandoned and re-sent
    // (which would cost another token and stall longer).
    config.relay.eose_timeout = Duration::from_secs(20);
    let client = RelayClient::connect(&relay.url(), config).unwrap();
    let keys = Keys::generate();
    let started = tokio::time::Instant::now();
    let mut subs = Vec::new();
    for _ in 0..32 {
        subs.push(client.subscribe(by_author(&keys)).await.unwrap());
    }
    for sub in &mut subs {
        until_eose(sub, Duration::from_secs(20)).await;
    }
    let took = started.elapsed();
    eprintln!("32 subscriptions live after {took:?}");
    assert!(
        took >= Duration::from_secs(3),
        "the relay did stall: {took:?}"
    );
    assert_eq!(relay.reqs_received(), 32, "no REQ re-sent");
    Ok(())
}

async fn two_hundred_publishes_are_all_ok_by_id() -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = binary()?;
    // 3 events/s averaged over a minute: a burst of 180, then one every 333 ms.
    let limits = NostrRsLimits {
        messages_per_sec: Some(3),
        ..NostrRsLimits::default()
    };
    let relay = NostrRsRelay::start(&binary, limits).await.unwrap();
    let mut config = config(4);
    // The throttled tail takes ~7 s; a re-send would only come back `duplicate:`.
    config.relay.publish_timeout = Duration::from_secs(20);
    let client = RelayClient::connect(&relay.url(), config).unwrap();
    let keys = Keys::generate();
    let notes: Vec<Event> = (0..200)
        .map(|i| note(&keys, &format!("note {i}")))
        .collect();
    let started = tokio::time::Instant::now();
    let outcomes = join_all(notes.iter().map(|n| client.publish(n.as_json()))).await;
    eprintln!("200 publishes answered after {:?}", started.elapsed());
    for (note, outcome) in notes.iter().zip(outcomes) {
        let published = outcome.unwrap_or_else(|e| panic!("{}: {e}", note.id));
        assert_eq!(published.id.to_string(), note.id.to_hex());
    }
    // The relay stored every one.
    let mut sub = client.subscribe(by_author(&keys)).await.unwrap();
    let stored = until_eose(&mut sub, Duration::from_secs(20)).await;
    assert_eq!(stored.len(), 200);
    Ok(())
}

async fn a_killed_and_restarted_relay_gets_every_subscription_back_and_missed_events(
) -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = binary()?;
    let mut relay = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    let upstream = relay.url().trim_start_matches("ws://").parse().unwrap();
    // The proxy lets the test hold the client off while the missed events are written.
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let client = RelayClient::connect(&format!("ws://{}", proxy.addr()), config(5)).unwrap();
    let mut session = client.events().unwrap();
    let publisher = RelayClient::connect(&relay.url(), config(6)).unwrap();
    let keys = Keys::generate();
    let before = note(&keys, "before the crash");
    publisher.publish(before.as_json()).await.unwrap();
    let mut subs = Vec::new();
    for _ in 0..10 {
        let mut sub = client.subscribe(by_author(&keys)).await.unwrap();
        let seen = until_eose(&mut sub, Duration::from_secs(20)).await;
        assert_eq!(seen.len(), 1);
        subs.push(sub);
    }

    proxy.set(ProxyFaults {
        refuse: true,
        ..ProxyFaults::default()
    });
    relay.kill();
    next_matching(&mut session, Duration::from_secs(20), |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    relay.restart().await.unwrap();
    let publisher = RelayClient::connect(&relay.url(), config(7)).unwrap();
    let missed: Vec<Event> = (0..3)
        .map(|i| note(&keys, &format!("missed {i}")))
        .collect();
    for event in &missed {
        publisher.publish(event.as_json()).await.unwrap();
    }
    let reqs_before = relay.reqs_received();
    proxy.set(ProxyFaults::default());
    connected(&mut session, Duration::from_secs(20)).await;

    let mut want: Vec<String> = missed.iter().map(|e| e.id.to_hex()).collect();
    want.sort();
    for sub in &mut subs {
        // The replayed REQ's stored events are the missed ones only: the catch-up overlap
        // re-delivers "before the crash" and the session drops it as a duplicate.
        let mut got: Vec<String> = until_eose(sub, Duration::from_secs(20))
            .await
            .iter()
            .map(|e| e.id.to_string())
            .collect();
        got.sort();
        assert_eq!(got, want);
    }
    eventually(Duration::from_secs(10), "10 REQs replayed", || {
        relay.reqs_received() == reqs_before + 10
    })
    .await;
    // And live again.
    let after = note(&keys, "after the restart");
    publisher.publish(after.as_json()).await.unwrap();
    for sub in &mut subs {
        // Each catch-up reports itself first: `since` (nostr-rs-relay has no NIP-77, and
        // says so in its document), the 3 missed events recovered.
        let item = next_matching(sub, Duration::from_secs(10), |_| true).await;
        let SubscriptionEvent::CaughtUp(caught_up) = item else {
            panic!("{item:?}")
        };
        assert_eq!(
            (caught_up.method, caught_up.recovered),
            (CatchUpMethod::Since, 3)
        );
        let item = next_matching(sub, Duration::from_secs(10), |_| true).await;
        let SubscriptionEvent::Event(event) = item else {
            panic!("{item:?}")
        };
        assert_eq!(event.id.to_string(), after.id.to_hex());
    }
    assert_eq!(relay.reqs_received(), reqs_before + 10);
    Ok(())
}

async fn its_information_document_is_fetched_and_declares_no_limits() -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = binary()?;
    let relay = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    // What nostr-rs-relay 0.8 serves: name, software, supported NIPs, and a `limitation`
    // holding only `payment_required` (its 32-subscription cap is enforced, not declared).
    let document = tether_tokio::fetch_relay_info(&relay.url(), Default::default())
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&document).unwrap();
    assert_eq!(
        json["software"],
        "https://git.sr.ht/~gheartsfield/nostr-rs-relay"
    );
    assert_eq!(
        json["limitation"],
        serde_json::json!({"payment_required": false})
    );
    let info = tether_tokio::tether_core::nostr::RelayInfo::parse(&document).unwrap();
    assert_eq!(
        (info.max_subscriptions, info.max_limit, info.negentropy),
        (None, None, Some(false)),
        "no limits; supported_nips without 77: {info:?}"
    );

    // The client fetches it too when connecting, applies it (nothing to apply), and the
    // cap is still learned the hard way.
    let client = RelayClient::connect(&relay.url(), config(7)).unwrap();
    let mut session = client.events().unwrap();
    let applied = next_matching(&mut session, Duration::from_secs(10), |e| {
        matches!(
            e,
            SessionEvent::RelayInfo { .. } | SessionEvent::RelayInfoUnavailable { .. }
        )
    })
    .await;
    let SessionEvent::RelayInfo { info, applied } = applied else {
        panic!("{applied:?}");
    };
    assert_eq!(info.negentropy, Some(false), "{info:?}");
    assert_eq!(applied.subscription_limit, None);
    assert_eq!(applied.max_message_length, None);
    Ok(())
}

tether_testkit::tokio_main!(
    forty_subscriptions_leave_thirty_two_live_and_the_rest_queued,
    a_req_burst_over_subscriptions_per_min_ends_all_live,
    two_hundred_publishes_are_all_ok_by_id,
    a_killed_and_restarted_relay_gets_every_subscription_back_and_missed_events,
    its_information_document_is_fetched_and_declares_no_limits,
);
