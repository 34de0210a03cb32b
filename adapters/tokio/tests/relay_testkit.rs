//! tether-tokio against the testkit relay server over real sockets on 127.0.0.1.
//!
//! The server runs in the test's runtime, so these tests pause tokio's clock: the relay's
//! rate-limit windows, the core's backoffs and the server's log all read the same virtual
//! time, and minutes of retries take milliseconds.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tether_testkit::proxy::{FaultProxy, ProxyFaults};
use tether_testkit::relay_model::auth_event;
use tether_testkit::server::TestRelay;
use tether_testkit::{LimitStyle, RelayModel, ReqBudget, StoredEvent};
use tether_tokio::{
    Config, Filter, Published, Rejected, Rejection, RelayClient, SessionEvent, SessionEvents,
    Signer, SignerError, Subscription, SubscriptionEvent,
};

fn config() -> Config {
    Config {
        seed: Some(7),
        ..Config::default()
    }
}

fn kind1() -> Vec<Filter> {
    vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()]
}

/// The next item matching `pred`, within `within` (virtual time).
async fn next_matching<S, T>(stream: &mut S, within: Duration, pred: impl Fn(&T) -> bool) -> T
where
    S: Stream<Item = T> + Unpin,
    T: std::fmt::Debug,
{
    let found = tokio::time::timeout(within, async {
        while let Some(item) = stream.next().await {
            if pred(&item) {
                return Some(item);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(item)) => item,
        Ok(None) => panic!("stream ended"),
        Err(_) => panic!("nothing matching within {within:?}"),
    }
}

async fn until_eose(sub: &mut Subscription) -> Vec<SubscriptionEvent> {
    let mut seen = Vec::new();
    let within = Duration::from_secs(300);
    let done = tokio::time::timeout(within, async {
        while let Some(item) = sub.next().await {
            let eose = item == SubscriptionEvent::Eose;
            assert!(
                !matches!(item, SubscriptionEvent::Closed { .. }),
                "closed: {item:?}"
            );
            seen.push(item);
            if eose {
                return;
            }
        }
        panic!("subscription ended");
    })
    .await;
    assert!(done.is_ok(), "no EOSE within {within:?}: {seen:?}");
    seen
}

async fn connected(events: &mut SessionEvents) {
    next_matching(events, Duration::from_secs(60), |e| {
        *e == SessionEvent::Connected
    })
    .await;
}

fn events_in(seen: &[SubscriptionEvent]) -> usize {
    seen.iter()
        .filter(|e| matches!(e, SubscriptionEvent::Event(_)))
        .count()
}

#[tokio::test(start_paused = true)]
async fn stored_events_then_eose_then_live_events() {
    let relay = TestRelay::start(RelayModel::with_events(5)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    let seen = until_eose(&mut sub).await;
    assert_eq!(events_in(&seen), 5);

    relay.store(StoredEvent::new(6, 1_000_006, 1));
    let live = next_matching(&mut sub, Duration::from_secs(5), |_| true).await;
    let SubscriptionEvent::Event(event) = live else {
        panic!("{live:?}")
    };
    assert!(event.raw.contains("\"event 6\""));
}

#[tokio::test(start_paused = true)]
async fn rate_limited_subscriptions_recover_behind_the_gate() {
    let mut model = RelayModel::with_events(2);
    model.budget = Some(ReqBudget {
        max: 3,
        window: Duration::from_secs(4),
        hint: true,
    });
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;

    let mut subs = Vec::new();
    for _ in 0..7 {
        subs.push(client.subscribe(kind1()).await.unwrap());
    }
    for sub in &mut subs {
        let seen = until_eose(sub).await;
        assert_eq!(events_in(&seen), 2);
    }
    next_matching(&mut events, Duration::from_secs(1), |e| {
        matches!(e, SessionEvent::RateLimited { .. })
    })
    .await;

    // Server side: never more than 3 REQs accepted per 4 s window was possible only if the
    // retries waited for the hinted window; the REQs after the first refusal came >= 4 s on.
    let reqs = relay.with(|s| s.model.reqs.clone());
    let first = reqs[0].0;
    let refused_after = reqs
        .iter()
        .skip(7)
        .map(|(t, _, _)| t.saturating_duration_since(first))
        .min()
        .unwrap();
    assert!(refused_after >= Duration::from_secs(3), "{refused_after:?}");
    assert!(
        reqs.len() <= 7 + 4 * 5,
        "bounded retries: {} REQs",
        reqs.len()
    );
}

#[tokio::test(start_paused = true)]
async fn replay_after_a_drop_goes_in_paced_batches() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;
    let mut subs = Vec::new();
    for _ in 0..30 {
        subs.push(client.subscribe(kind1()).await.unwrap());
    }
    for sub in &mut subs {
        until_eose(sub).await;
    }

    relay.sever_all();
    let disconnected = next_matching(&mut events, Duration::from_secs(10), |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    let SessionEvent::Disconnected {
        reconnect_in: Some(delay),
    } = disconnected
    else {
        panic!("{disconnected:?}")
    };
    assert!(delay >= Duration::from_millis(800) && delay <= Duration::from_millis(1200));
    connected(&mut events).await;
    for sub in &mut subs {
        until_eose(sub).await;
    }

    // Group the second connection's REQs by arrival time (a batch arrives at one instant
    // of virtual time).
    let reqs: Vec<_> = relay.with(|s| s.model.reqs.clone());
    let mut batches: Vec<(tether_core::Instant, usize)> = Vec::new();
    for (t, _, _) in reqs.iter().filter(|(_, conn, _)| *conn == 1) {
        match batches.last_mut() {
            Some((at, n)) if t.saturating_duration_since(*at) < Duration::from_millis(10) => {
                *n += 1
            }
            _ => batches.push((*t, 1)),
        }
    }
    let sizes: Vec<usize> = batches.iter().map(|b| b.1).collect();
    assert_eq!(sizes, vec![8, 8, 8, 6], "{batches:?}");
    for pair in batches.windows(2) {
        let gap = pair[1].0.saturating_duration_since(pair[0].0);
        assert!(gap >= Duration::from_millis(50), "{gap:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn accept_then_drop_relay_sees_growing_reconnect_delays() {
    let mut model = RelayModel::default();
    model.drop_after = Some(Duration::from_millis(100));
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    tokio::time::sleep(Duration::from_secs(40)).await;

    let accepted = relay.log().accepted;
    assert!(accepted.len() >= 5, "{accepted:?}");
    let gaps: Vec<Duration> = accepted.windows(2).map(|w| w[1] - w[0]).collect();
    // 1 s, 2 s, 4 s, 8 s (+-20%), each after a socket that lived 100 ms: never reset by a
    // socket that did not stay up.
    for pair in gaps.windows(2).take(3) {
        assert!(pair[1] > pair[0] + pair[0] / 4, "{gaps:?}");
    }
    assert!(gaps[0] >= Duration::from_millis(900), "{gaps:?}");
    drop(client);
}

#[tokio::test(start_paused = true)]
async fn refused_connections_are_retried_until_the_relay_is_back() {
    let relay = TestRelay::start(RelayModel::with_events(3)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    until_eose(&mut sub).await;

    relay.refuse_for(Duration::from_secs(6));
    relay.sever_all();
    let seen = until_eose(&mut sub).await;
    let log = relay.log();
    assert!(log.refused.len() >= 2, "{log:?}");
    assert!(log.accepted.len() == 2 && log.accepted[1] >= Duration::from_secs(6));
    // The replay asked only for what it might have missed (catch-up `since`), and the
    // overlap it got back was dropped as duplicates.
    assert_eq!(events_in(&seen), 0, "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_drop_after_n_frames_loses_no_event() {
    let relay = TestRelay::start(RelayModel::with_events(10)).await.unwrap();
    relay.with(|s| s.faults.drop_after_frames = Some(4));
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    next_matching(&mut events, Duration::from_secs(10), |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    relay.with(|s| s.faults.drop_after_frames = None);
    let seen = until_eose(&mut sub).await;
    let mut ids: Vec<String> = seen
        .iter()
        .filter_map(|e| match e {
            SubscriptionEvent::Event(ev) => Some(ev.id.to_string()),
            _ => None,
        })
        .collect();
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((total, ids.len()), (10, 10), "every event once: {seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_silent_relay_is_pinged_then_replaced() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;
    relay.set_silent(true);
    let start = tokio::time::Instant::now();
    next_matching(&mut events, Duration::from_secs(120), |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    // 30 s without a frame -> ping; 20 s more without a pong -> dead.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(50) && waited < Duration::from_secs(52),
        "{waited:?}"
    );
    connected(&mut events).await;
    assert_eq!(relay.log().accepted.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_blackholing_proxy_is_detected_like_a_silent_relay() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let proxy = FaultProxy::start(relay.addr()).await.unwrap();
    let client = RelayClient::connect(&format!("ws://{}", proxy.addr()), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;
    proxy.set(ProxyFaults {
        blackhole: true,
        ..ProxyFaults::default()
    });
    next_matching(&mut events, Duration::from_secs(120), |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    proxy.set(ProxyFaults::default());
    connected(&mut events).await;
    assert_eq!(proxy.connections(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_connection_cut_mid_frame_resumes_without_loss_or_duplicates() {
    let relay = TestRelay::start(RelayModel::with_events(10)).await.unwrap();
    let proxy = FaultProxy::start(relay.addr()).await.unwrap();
    // Each stored event frame is ~330 bytes: the cut lands inside the stored events.
    proxy.set(ProxyFaults {
        cut_after: Some(1_500),
        ..ProxyFaults::default()
    });
    let client = RelayClient::connect(&format!("ws://{}", proxy.addr()), config()).unwrap();
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    let mut ids = Vec::new();
    let disconnected = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            tokio::select! {
                Some(item) = sub.next() => {
                    if let SubscriptionEvent::Event(event) = item {
                        ids.push(event.id);
                    }
                }
                Some(event) = events.next() => {
                    if matches!(event, SessionEvent::Disconnected { .. }) {
                        return;
                    }
                }
            }
        }
    })
    .await;
    assert!(disconnected.is_ok(), "the cut was noticed");
    assert!(ids.len() < 10, "cut before the end: {}", ids.len());
    proxy.set(ProxyFaults::default());
    for item in until_eose(&mut sub).await {
        if let SubscriptionEvent::Event(event) = item {
            ids.push(event.id);
        }
    }
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((total, ids.len()), (10, 10));
}

struct TestSigner;

impl Signer for TestSigner {
    fn sign_auth(
        &self,
        _relay_url: &str,
        challenge: &str,
    ) -> tether_tokio::tether_driver::BoxFuture<Result<String, SignerError>> {
        let event = auth_event(1, challenge);
        Box::pin(async move { Ok(event) })
    }
}

#[tokio::test(start_paused = true)]
async fn auth_required_relay_with_a_signer() {
    let mut model = RelayModel::with_events(2);
    model.auth_required = true;
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(
        &relay.url(),
        Config {
            signer: Some(Arc::new(TestSigner)),
            ..config()
        },
    )
    .unwrap();
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    next_matching(&mut events, Duration::from_secs(10), |e| {
        *e == SessionEvent::Authenticated
    })
    .await;
    let seen = until_eose(&mut sub).await;
    assert_eq!(events_in(&seen), 2);
    let note = StoredEvent::new(50, 1_000_050, 1).json;
    assert!(client.publish(note).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn auth_by_hand_without_a_signer() {
    let mut model = RelayModel::with_events(1);
    model.auth_required = true;
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    let challenge = next_matching(&mut events, Duration::from_secs(10), |e| {
        matches!(e, SessionEvent::AuthChallenge { .. })
    })
    .await;
    let SessionEvent::AuthChallenge { challenge } = challenge else {
        unreachable!()
    };
    let mut sub = client.subscribe(kind1()).await.unwrap();
    client
        .authenticate(auth_event(9, &challenge))
        .await
        .unwrap();
    next_matching(&mut events, Duration::from_secs(10), |e| {
        *e == SessionEvent::Authenticated
    })
    .await;
    assert_eq!(events_in(&until_eose(&mut sub).await), 1);
}

#[tokio::test(start_paused = true)]
async fn publish_outcomes_are_matched_by_event_id() {
    let mut model = RelayModel::default();
    model
        .scripted_ok
        .push_back((false, "blocked: not on the list".into()));
    model
        .scripted_ok
        .push_back((false, "duplicate: already have it".into()));
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let a = StoredEvent::new(1, 1_000_001, 1);
    let b = StoredEvent::new(2, 1_000_002, 1);
    let c = StoredEvent::new(3, 1_000_003, 1);
    let refused = client.publish(a.json.clone()).await;
    assert_eq!(
        refused,
        Err(Rejected::Relay {
            id: a.id(),
            reason: Rejection::Refused {
                message: "blocked: not on the list".into()
            }
        })
    );
    let (dup, ok) = tokio::join!(
        client.publish(b.json.clone()),
        client.publish(c.json.clone())
    );
    assert_eq!(dup, Ok(Published { id: b.id() }));
    assert_eq!(ok, Ok(Published { id: c.id() }));
    assert!(matches!(
        client.publish("not json").await,
        Err(Rejected::Local(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn notice_only_limit_is_learned_and_later_subscriptions_queue() {
    let mut model = RelayModel::with_events(1);
    model.max_subs = Some((2, LimitStyle::Notice));
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;
    let mut first = client.subscribe(kind1()).await.unwrap();
    let mut second = client.subscribe(kind1()).await.unwrap();
    until_eose(&mut first).await;
    until_eose(&mut second).await;

    let mut third = client.subscribe(kind1()).await.unwrap();
    let closed = next_matching(&mut third, Duration::from_secs(10), |_| true).await;
    assert!(
        matches!(closed, SubscriptionEvent::Closed { .. }),
        "{closed:?}"
    );
    assert_eq!(third.next().await, None);
    next_matching(&mut events, Duration::from_secs(1), |e| {
        *e == SessionEvent::SubscriptionLimit { max: 2 }
    })
    .await;

    let mut fourth = client.subscribe(kind1()).await.unwrap();
    assert_eq!(
        next_matching(&mut fourth, Duration::from_secs(1), |_| true).await,
        SubscriptionEvent::Queued
    );
    first.unsubscribe().await.unwrap();
    assert_eq!(events_in(&until_eose(&mut fourth).await), 1);
}

#[tokio::test(start_paused = true)]
async fn a_slow_reader_holds_the_relay_back_and_loses_nothing() {
    const N: u64 = 2_000;
    let padding = "x".repeat(16 * 1024);
    let mut model = RelayModel::default();
    for n in 1..=N {
        let mut event = StoredEvent::new(n, 1_000_000 + n, 1);
        event.json = event.json.replace(
            &format!("\"event {n}\""),
            &format!("\"event {n} {padding}\""),
        );
        model.events.push(event);
    }
    let relay = TestRelay::start(model).await.unwrap();
    let client = RelayClient::connect(
        &relay.url(),
        Config {
            subscription_capacity: 8,
            ..config()
        },
    )
    .unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    assert!(matches!(
        sub.next().await,
        Some(SubscriptionEvent::Event(_))
    ));

    // The application stops reading. The driver stops reading the socket, the kernel
    // buffers fill, and the relay's writes stall far short of 2000 x 16 KiB = 32 MiB.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stalled_at = relay.log().frames_sent;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        relay.log().frames_sent,
        stalled_at,
        "the relay is held back"
    );
    assert!(
        stalled_at < N / 2,
        "sent {stalled_at} of {N} frames to a stalled reader"
    );
    // Two minutes later still the same socket: the silence of a socket we do not read is
    // not a dead relay (no ping timeout, no reconnect and replay).
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(relay.log().accepted.len(), 1);

    let mut next = 2;
    while let Some(item) = sub.next().await {
        match item {
            SubscriptionEvent::Event(event) => {
                assert!(event.raw.contains(&format!("\"event {next} ")));
                next += 1;
            }
            SubscriptionEvent::Eose => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(next, N + 1, "every event, in order");
}

#[tokio::test(start_paused = true)]
async fn disconnect_closes_and_never_reconnects() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;
    client.disconnect().await.unwrap();
    assert_eq!(
        next_matching(&mut events, Duration::from_secs(1), |_| true).await,
        SessionEvent::Disconnected { reconnect_in: None }
    );
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(relay.log().accepted.len(), 1);
    assert_eq!(relay.open_connections(), 0);

    client.reconnect().await.unwrap();
    connected(&mut events).await;
    assert_eq!(relay.log().accepted.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_subscription_closes_it_on_the_relay() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    until_eose(&mut sub).await;
    assert_eq!(relay.with(|s| s.model.open_subs(0)), 1);
    drop(sub);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(relay.with(|s| s.model.open_subs(0)), 0);
}

#[tokio::test(start_paused = true)]
async fn every_handle_dropped_ends_the_driver() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let client = RelayClient::connect(&relay.url(), config()).unwrap();
    let mut events = client.events().unwrap();
    connected(&mut events).await;
    drop(client);
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(e) = events.next().await {
                let _ = e;
            }
        })
        .await,
        Ok(())
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(relay.open_connections(), 0);
}
