//! tether-tokio against rust-nostr's nostr-relay-builder (in-process, real WebSocket on
//! 127.0.0.1) in its rate-limit and NIP-42 modes, with real keys and signatures.

use std::sync::Arc;
use std::time::Duration;

use nostr::prelude::*;
use nostr_relay_builder::builder::{RateLimit, RelayBuilderNip42, RelayBuilderNip42Mode};
use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tether_testkit::signer::KeySigner;
use tether_testkit::wait::{next_matching, until_eose};
use tether_tokio::{Config, Filter, RelayClient, SessionEvent, SubscriptionEvent};

async fn start(builder: RelayBuilder) -> (LocalRelay, String) {
    let relay = LocalRelay::new(builder);
    relay.run().await.unwrap();
    let url = relay.url().await.to_string();
    (relay, url)
}

fn config() -> Config {
    let mut config = Config::default();
    config.seed = Some(11);
    config
}

fn notes() -> Vec<Filter> {
    vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()]
}

fn note(keys: &Keys, text: &str) -> String {
    EventBuilder::text_note(text)
        .sign_with_keys(keys)
        .unwrap()
        .as_json()
}

#[tokio::test]
async fn its_max_reqs_cap_queues_the_refused_subscriptions_until_slots_free() {
    // nostr-relay-builder refuses REQs past `max_reqs` open ones with `rate-limited: too
    // many REQs`: a cap in a rate limit's words. The session learns the cap and queues the
    // refused subscriptions; they go out when slots free, with no retry timer.
    let (_relay, url) = start(RelayBuilder::default().rate_limit(RateLimit {
        max_reqs: 3,
        notes_per_minute: 600,
    }))
    .await;
    let client = RelayClient::connect(&url, config()).unwrap();
    let mut session = client.events().unwrap();
    let keys = Keys::generate();
    client.publish(note(&keys, "hello")).await.unwrap();

    let mut subs = Vec::new();
    for _ in 0..5 {
        subs.push(client.subscribe(notes()).await.unwrap());
    }
    let mut queued = Vec::new();
    let mut live = Vec::new();
    for sub in subs {
        let mut sub = sub;
        let item = next_matching(&mut sub, Duration::from_secs(5), |e| {
            matches!(e, SubscriptionEvent::Eose | SubscriptionEvent::Queued)
        })
        .await;
        if item == SubscriptionEvent::Eose {
            live.push(sub);
        } else {
            queued.push(sub);
        }
    }
    assert_eq!((live.len(), queued.len()), (3, 2));
    let limit = next_matching(&mut session, Duration::from_secs(5), |e| {
        matches!(e, SessionEvent::SubscriptionLimit { .. })
    })
    .await;
    assert_eq!(limit, SessionEvent::SubscriptionLimit { max: 3 });

    // Free two slots: the queued subscriptions get in at once.
    for sub in live.drain(..2) {
        sub.unsubscribe().await.unwrap();
    }
    for sub in &mut queued {
        assert_eq!(until_eose(sub, Duration::from_secs(5)).await.len(), 1);
    }
}

#[tokio::test]
async fn it_serves_no_information_document_and_nothing_changes() {
    // Its local relay accepts WebSocket upgrades only: a plain GET fails the handshake.
    let (_relay, url) = start(RelayBuilder::default()).await;
    let client = RelayClient::connect(&url, config()).unwrap();
    let mut session = client.events().unwrap();
    let mut sub = client.subscribe(notes()).await.unwrap();
    assert!(until_eose(&mut sub, Duration::from_secs(5))
        .await
        .is_empty());
    let info = next_matching(&mut session, Duration::from_secs(10), |e| {
        matches!(
            e,
            SessionEvent::RelayInfo { .. } | SessionEvent::RelayInfoUnavailable { .. }
        )
    })
    .await;
    assert!(
        matches!(info, SessionEvent::RelayInfoUnavailable { .. }),
        "{info:?}"
    );
    let direct = tether_tokio::fetch_relay_info(&url, Default::default()).await;
    assert!(direct.is_err(), "{direct:?}");
}

#[tokio::test]
async fn nip42_auth_completes_then_reads_and_writes_succeed() {
    let (_relay, url) = start(RelayBuilder::default().nip42(RelayBuilderNip42 {
        mode: RelayBuilderNip42Mode::Both,
    }))
    .await;
    let keys = Keys::generate();
    let mut config = config();
    config.signer = Some(Arc::new(KeySigner(keys.clone())));
    let client = RelayClient::connect(&url, config).unwrap();
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(notes()).await.unwrap();
    next_matching(&mut events, Duration::from_secs(10), |e| {
        *e == SessionEvent::Authenticated
    })
    .await;
    until_eose(&mut sub, Duration::from_secs(10)).await;

    let published = client.publish(note(&keys, "authenticated hello")).await;
    assert!(published.is_ok(), "{published:?}");
    let item = next_matching(&mut sub, Duration::from_secs(10), |e| {
        matches!(e, SubscriptionEvent::Event(_))
    })
    .await;
    let SubscriptionEvent::Event(event) = item else {
        unreachable!()
    };
    assert!(event.raw.contains("authenticated hello"));
}

#[tokio::test]
async fn publishes_are_accepted_and_duplicates_count_as_published() {
    let (_relay, url) = start(RelayBuilder::default()).await;
    let client = RelayClient::connect(&url, config()).unwrap();
    let keys = Keys::generate();
    let event = note(&keys, "once");
    let first_try = client.publish(event.clone()).await.unwrap();
    let again = client.publish(event).await.unwrap();
    assert_eq!(first_try, again);
}
