//! The NIP-11 document over a real socket: fetched when connecting, applied, cached across
//! reconnects; and a document that stalls, is huge or is not JSON changes nothing and costs
//! one bounded request.

use std::time::{Duration, Instant};

use tether_core::nostr::Error;
use tether_testkit::wait::{next_matching, until_eose};
use tether_testserver::server::TestRelay;
use tether_testserver::{LimitStyle, RelayModel, StoredEvent};
use tether_tokio::{
    fetch_relay_info, Config, Filter, Rejected, RelayClient, SessionEvent, SessionEvents,
};

fn notes() -> Vec<Filter> {
    vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()]
}

fn config() -> Config {
    let mut config = Config::default();
    config.seed = Some(3);
    config.relay_info.timeout = Duration::from_secs(1);
    config
}

/// The session's word on the document: applied, or why not.
async fn info_outcome(session: &mut SessionEvents) -> SessionEvent {
    next_matching(session, Duration::from_secs(10), |e| {
        matches!(
            e,
            SessionEvent::RelayInfo { .. } | SessionEvent::RelayInfoUnavailable { .. }
        )
    })
    .await
}

#[tokio::test]
async fn the_document_is_fetched_applied_and_cached_across_reconnects() {
    let mut model = RelayModel::with_events(1);
    model.max_subs = Some((2, LimitStyle::Closed));
    model.info_document = Some(
        r#"{"name":"test","limitation":{"max_subscriptions":2,"max_message_length":2048}}"#
            .to_owned(),
    );
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut session = client.events().unwrap();
    let SessionEvent::RelayInfo { info, applied } = info_outcome(&mut session).await else {
        panic!("no document applied");
    };
    assert_eq!(info.max_subscriptions, Some(2));
    assert_eq!(applied.subscription_limit, Some(2));
    assert_eq!(applied.max_message_length, Some(2048));

    // Larger than the relay takes: refused here, not sent.
    let big = StoredEvent::new(9, 1_700_000_000, 1)
        .json
        .replace("event 9", &"x".repeat(3_000));
    let refused = client.publish(big).await;
    assert!(
        matches!(
            refused,
            Err(Rejected::Local(Error::MessageTooLarge { max: 2048, .. }))
        ),
        "{refused:?}"
    );

    let mut sub = client.subscribe(notes()).await.unwrap();
    assert_eq!(until_eose(&mut sub, Duration::from_secs(5)).await.len(), 1);
    client.disconnect().await.unwrap();
    client.reconnect().await.unwrap();
    assert_eq!(until_eose(&mut sub, Duration::from_secs(5)).await.len(), 0);
    let log = relay.log();
    assert_eq!(log.accepted.len(), 2);
    assert_eq!(
        log.info_requests.len(),
        1,
        "the reconnect used the cached document"
    );
    assert_eq!(log.frames("EVENT").count(), 0);
}

/// A relay whose document misbehaves: the client still subscribes, nothing is applied, and
/// the document cost one request.
async fn changes_nothing(relay: &TestRelay) -> SessionEvent {
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut session = client.events().unwrap();
    let mut sub = client.subscribe(notes()).await.unwrap();
    // The fetch runs beside the socket: the subscription does not wait for it.
    assert_eq!(until_eose(&mut sub, Duration::from_secs(5)).await.len(), 1);
    let outcome = info_outcome(&mut session).await;
    assert_eq!(relay.log().info_requests.len(), 1);
    outcome
}

#[tokio::test]
async fn a_stalled_document_times_out_and_changes_nothing() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    relay.with(|s| s.faults.info_stall = true);
    let started = Instant::now();
    let outcome = changes_nothing(&relay).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(&outcome, SessionEvent::RelayInfoUnavailable { why } if why.contains("within")),
        "{outcome:?}"
    );
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn a_ten_megabyte_document_is_cut_at_the_bound_and_changes_nothing() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    relay.with(|s| s.faults.info_huge = Some(10 * 1024 * 1024));
    let outcome = changes_nothing(&relay).await;
    assert!(
        matches!(&outcome, SessionEvent::RelayInfoUnavailable { why } if why.contains("larger than 65536")),
        "{outcome:?}"
    );
    // What the server got into the socket before the client hung up (kernel buffers
    // included): far from 10 MB.
    let sent = relay.log().info_bytes_sent;
    eprintln!("huge document: {sent} bytes written before the client hung up");
    assert!(sent < 10 * 1024 * 1024, "{sent}");
}

#[tokio::test]
async fn an_invalid_document_changes_nothing() {
    let mut model = RelayModel::with_events(1);
    model.info_document = Some("<html>not json</html>".to_owned());
    let relay = TestRelay::start(model).await.unwrap();
    let outcome = changes_nothing(&relay).await;
    assert!(
        matches!(&outcome, SessionEvent::RelayInfoUnavailable { why } if why.contains("not JSON")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn no_document_is_a_404_and_changes_nothing() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let outcome = changes_nothing(&relay).await;
    assert!(
        matches!(&outcome, SessionEvent::RelayInfoUnavailable { why } if why.contains("404")),
        "{outcome:?}"
    );
    let direct = fetch_relay_info(&relay.url(), Default::default()).await;
    assert!(
        matches!(direct, Err(tether_driver::InfoFetchError::Status(404))),
        "{direct:?}"
    );
}
