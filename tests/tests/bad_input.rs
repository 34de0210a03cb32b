//! The bad-input campaign: a hostile relay (the testkit's `TestRelay` with raw frames
//! injected) sends what no relay should, over real sockets in real time. For each input:
//! the client neither panics (it still answers afterwards) nor loops (the relay's log counts
//! every REQ and connection exactly) nor grows memory without bound (RSS before and after a
//! flood), the application hears a clear event where it should know, and the subscriptions
//! that were fine stay fine (a newly stored event reaches each of them exactly once).
//!
//! The scenarios run one at a time (a shared lock) so the RSS measurements see one flood.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::kind1;
use futures_util::StreamExt;
use tether_testkit::peers::rss_bytes;
use tether_testkit::relay_model::auth_event;
use tether_testkit::server::TestRelay;
use tether_testkit::wait::{eventually, next_matching, until_eose};
use tether_testkit::{RelayModel, StoredEvent};
use tether_tokio::tether_core::link::SocketLoss;
use tether_tokio::tether_core::nostr::message::FrameError;
use tether_tokio::tether_core::nostr::Disconnect;
use tether_tokio::tether_core::{BackoffPolicy, Jitter};
use tether_tokio::tether_driver::BoxFuture;
use tether_tokio::{
    Config, RelayClient, SessionEvent, Signer, SignerError, Subscription, SubscriptionEvent,
};

/// One scenario at a time: RSS is per process.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Largest RSS growth a flood may cause (the client keeps no per-frame state).
const RSS_BOUND: u64 = 32 << 20;

/// A live client with two subscriptions past EOSE on a relay with 3 stored events, and
/// every session event it hears recorded.
struct Harness {
    relay: TestRelay,
    client: RelayClient,
    subs: Vec<Subscription>,
    heard: Arc<Mutex<Vec<SessionEvent>>>,
    next_event: u64,
}

impl Harness {
    async fn start(model: RelayModel, config: Config) -> Harness {
        let relay = TestRelay::start(model).await.unwrap();
        let client = RelayClient::connect(&relay.url(), config).unwrap();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let mut session = client.events().unwrap();
        let sink = Arc::clone(&heard);
        tokio::spawn(async move {
            while let Some(event) = session.next().await {
                sink.lock().unwrap().push(event);
            }
        });
        let mut subs = Vec::new();
        for _ in 0..2 {
            let mut sub = client.subscribe(kind1()).await.unwrap();
            assert_eq!(until_eose(&mut sub, Duration::from_secs(5)).await.len(), 3);
            subs.push(sub);
        }
        Harness {
            relay,
            client,
            subs,
            heard,
            next_event: 4,
        }
    }

    fn heard(&self) -> Vec<SessionEvent> {
        self.heard.lock().unwrap().clone()
    }

    fn clear_heard(&self) {
        self.heard.lock().unwrap().clear();
    }

    /// REQs the relay has received.
    fn reqs(&self) -> Vec<String> {
        let log = self.relay.log();
        log.frames("REQ").map(|(_, _, text)| text.clone()).collect()
    }

    /// REQs under a new wire id: a subscription's attempts, not its catch-up's re-sends
    /// (which reuse the attempt's id).
    fn attempts(&self) -> usize {
        let wires: std::collections::BTreeSet<String> =
            (0..self.reqs().len()).map(|n| self.wire_id(n)).collect();
        wires.len()
    }

    /// The wire id of the `n`th REQ the relay received.
    fn wire_id(&self, n: usize) -> String {
        let req: serde_json::Value = serde_json::from_str(&self.reqs()[n]).unwrap();
        req[1].as_str().unwrap().to_owned()
    }

    /// Store a new event; every open subscription receives exactly it, next (skipping the
    /// EOSE of a replay and retry notes).
    async fn assert_subs_fine(&mut self) {
        let n = self.next_event;
        self.next_event += 1;
        self.relay.store(StoredEvent::new(n, 2_000_000 + n, 1));
        let want = format!("\"event {n}\"");
        for sub in &mut self.subs {
            let item = next_matching(sub, Duration::from_secs(10), |e| {
                matches!(
                    e,
                    SubscriptionEvent::Event(_) | SubscriptionEvent::Closed { .. }
                )
            })
            .await;
            let SubscriptionEvent::Event(event) = item else {
                panic!("{item:?}")
            };
            assert!(event.raw.contains(&want), "{} is not {want}", event.raw);
        }
        // The driver still answers commands: it did not panic or wedge.
        let probe = StoredEvent::new(10_000 + n, 2_000_000 + n, 7).json;
        let published = tokio::time::timeout(Duration::from_secs(5), self.client.publish(probe));
        assert!(matches!(published.await, Ok(Ok(_))), "publish answered");
    }

    /// Send `frames` as text frames, `per_tick` of them every 100 ms.
    async fn flood(&self, frames: impl Iterator<Item = String>, per_tick: usize) {
        let mut frames = frames.peekable();
        while frames.peek().is_some() {
            for frame in frames.by_ref().take(per_tick) {
                self.relay.broadcast(&frame);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn peer_errors(&self) -> Vec<FrameError> {
        self.heard()
            .into_iter()
            .filter_map(|e| match e {
                SessionEvent::PeerError { error } => Some(error),
                _ => None,
            })
            .collect()
    }
}

fn config() -> Config {
    let mut config = Config::default();
    config.seed = Some(9);
    config.relay.link.reconnect = common::quick_reconnect(100, 400);
    config
}

fn rss() -> u64 {
    rss_bytes().unwrap_or(0)
}

#[tokio::test]
async fn non_json_frames_are_peer_errors_and_nothing_else() {
    let _serial = SERIAL.lock().await;
    let mut h = Harness::start(RelayModel::with_events(3), config()).await;
    let before = rss();
    h.flood((0..5_000).map(|i| format!("not json {i} {{")), 1_000)
        .await;
    eventually(Duration::from_secs(10), "5000 peer errors heard", || {
        h.peer_errors().len() == 5_000
    })
    .await;
    let grown = rss().saturating_sub(before);
    assert!(
        h.peer_errors()
            .iter()
            .all(|e| matches!(e, FrameError::Json(_))),
        "{:?}",
        h.peer_errors().first()
    );
    h.assert_subs_fine().await;
    assert_eq!(h.reqs().len(), 2);
    assert_eq!(h.relay.log().accepted.len(), 1);
    assert!(grown < RSS_BOUND, "RSS grew {grown} bytes");
    eprintln!("non-JSON x5000: RSS +{} KiB", grown >> 10);
}

#[tokio::test]
async fn wrong_arity_and_shape_are_peer_errors() {
    let _serial = SERIAL.lock().await;
    let mut h = Harness::start(RelayModel::with_events(3), config()).await;
    let bad = [
        r#"["EVENT"]"#,
        r#"["EVENT","sub"]"#,
        r#"["EOSE"]"#,
        r#"["CLOSED"]"#,
        r#"["OK","00"]"#,
        r#"["NOTICE"]"#,
        r#"["AUTH"]"#,
        r#"[]"#,
        r#"{"EVENT":1}"#,
        r#""EOSE""#,
        r#"[1,2,3]"#,
        r#"["WHAT","x"]"#,
        r#"["EOSE",1]"#,
    ];
    h.flood(bad.iter().map(|s| s.to_string()), bad.len()).await;
    eventually(Duration::from_secs(5), "a peer error per frame", || {
        h.peer_errors().len() == bad.len()
    })
    .await;
    h.assert_subs_fine().await;
    assert_eq!(h.reqs().len(), 2);
    assert_eq!(h.relay.log().accepted.len(), 1);
}

#[tokio::test]
async fn a_64_mib_frame_is_refused_by_size_and_the_client_reconnects() {
    let _serial = SERIAL.lock().await;
    let mut h = Harness::start(RelayModel::with_events(3), config()).await;
    let huge = format!("[\"NOTICE\",\"{}\"]", "x".repeat(64 << 20));
    h.relay.broadcast(&huge);
    drop(huge);
    // tungstenite refuses the frame by its header (max 4 MiB, the core's max_frame): the
    // socket is lost, not the client.
    eventually(Duration::from_secs(10), "reconnected", || {
        h.heard().contains(&SessionEvent::Connected) && h.relay.log().accepted.len() == 2
    })
    .await;
    assert!(
        h.heard().iter().any(|e| matches!(
            e,
            SessionEvent::Disconnected {
                reconnect_in: Some(_),
                why: Disconnect::Lost(SocketLoss::FrameTooLarge),
            }
        )),
        "{:?}",
        h.heard()
    );
    h.assert_subs_fine().await;
    // Both subscriptions replayed once on the new socket.
    assert_eq!(h.attempts(), 4);
    assert!(h.peer_errors().is_empty(), "{:?}", h.peer_errors());
}

#[tokio::test]
async fn a_huge_retry_hint_is_capped_by_the_gate() {
    let _serial = SERIAL.lock().await;
    let mut config = config();
    config.relay.gate_max_window = Duration::from_secs(2);
    let mut h = Harness::start(RelayModel::with_events(3), config).await;
    let wire = h.wire_id(0);
    h.relay.broadcast(&format!(
        r#"["CLOSED","{wire}","rate-limited: slow down, retry in 99999999999s"]"#
    ));
    let item = next_matching(&mut h.subs[0], Duration::from_secs(5), |e| {
        matches!(e, SubscriptionEvent::Retrying { .. })
    })
    .await;
    // The hint is cut to the gate's cap (2 s here, 300 s by default); the driver reports
    // what is left of it when it routes the event, a hair under the cap.
    let capped = |d: Duration| d <= Duration::from_secs(2) && d > Duration::from_millis(1_900);
    let SubscriptionEvent::Retrying { after, attempt } = item else {
        unreachable!()
    };
    assert!(capped(after) && attempt == 1, "{item:?}");
    until_eose(&mut h.subs[0], Duration::from_secs(5)).await;
    let windows: Vec<Duration> = h
        .heard()
        .into_iter()
        .filter_map(|e| match e {
            SessionEvent::RateLimited { window } => Some(window),
            _ => None,
        })
        .collect();
    assert!(windows.len() == 1 && capped(windows[0]), "{windows:?}");
    h.assert_subs_fine().await;
    assert_eq!(h.attempts(), 3, "one re-REQ");
}

#[tokio::test]
async fn ten_thousand_closed_for_unknown_ids_in_a_second_change_nothing() {
    let _serial = SERIAL.lock().await;
    let mut h = Harness::start(RelayModel::with_events(3), config()).await;
    h.clear_heard();
    let before = rss();
    let started = tokio::time::Instant::now();
    h.flood(
        (0..10_000).map(|i| format!(r#"["CLOSED","unknown-{i}","error: go away"]"#)),
        1_000,
    )
    .await;
    // The stored event travels behind the flood on the same socket.
    h.assert_subs_fine().await;
    let took = started.elapsed();
    let grown = rss().saturating_sub(before);
    assert_eq!(h.heard(), Vec::new(), "nothing to tell the application");
    assert_eq!(h.reqs().len(), 2);
    assert_eq!(h.relay.log().accepted.len(), 1);
    assert!(grown < RSS_BOUND, "RSS grew {grown} bytes");
    eprintln!("CLOSED x10000 in {took:?}: RSS +{} KiB", grown >> 10);
}

/// Answers every challenge with a (fake-signed) AUTH event the testkit relay understands.
struct CountingSigner(AtomicU64);

impl Signer for CountingSigner {
    fn sign_auth(&self, _url: &str, challenge: &str) -> BoxFuture<Result<String, SignerError>> {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        let event = auth_event(n, challenge);
        Box::pin(async move { Ok(event) })
    }
}

#[tokio::test]
async fn an_auth_challenge_loop_is_answered_at_most_once_each_and_latest_last() {
    let _serial = SERIAL.lock().await;
    let mut config = config();
    config.signer = Some(Arc::new(CountingSigner(AtomicU64::new(0))));
    let mut h = Harness::start(RelayModel::with_events(3), config).await;
    let before = rss();
    h.flood((0..2_000).map(|i| format!(r#"["AUTH","loop-{i}"]"#)), 500)
        .await;
    eventually(Duration::from_secs(10), "2000 challenges heard", || {
        h.heard()
            .iter()
            .filter(|e| matches!(e, SessionEvent::AuthChallenge { .. }))
            .count()
            == 2_000
    })
    .await;
    h.assert_subs_fine().await;
    let grown = rss().saturating_sub(before);
    let log = h.relay.log();
    let auths: Vec<&str> = log
        .frames("AUTH")
        .map(|(_, _, text)| text.as_str())
        .collect();
    assert!(
        !auths.is_empty() && auths.len() <= 2_000,
        "{} AUTHs",
        auths.len()
    );
    let last = auths.last().unwrap();
    assert!(last.contains("\"loop-1999\""), "{last}");
    assert_eq!(h.reqs().len(), 2);
    assert!(grown < RSS_BOUND, "RSS grew {grown} bytes");
    eprintln!(
        "AUTH x2000: {} answered, RSS +{} KiB",
        auths.len(),
        grown >> 10
    );
}

#[tokio::test]
async fn events_for_a_closed_subscription_reach_nobody() {
    let _serial = SERIAL.lock().await;
    let mut h = Harness::start(RelayModel::with_events(3), config()).await;
    let closed_wire = h.wire_id(0);
    let closed = h.subs.remove(0);
    closed.unsubscribe().await.unwrap();
    h.clear_heard();
    let frame = |i: u64| {
        let event = StoredEvent::new(100 + i, 3_000_000 + i, 1).json;
        format!(r#"["EVENT","{closed_wire}",{event}]"#)
    };
    h.flood((0..1_000).map(frame), 500).await;
    // The remaining subscription's next event is the new one, not one of the 1000.
    h.assert_subs_fine().await;
    assert_eq!(h.heard(), Vec::new());
    assert_eq!(h.reqs().len(), 2);
}

#[tokio::test]
async fn binary_frames_are_ignored() {
    let _serial = SERIAL.lock().await;
    let mut h = Harness::start(RelayModel::with_events(3), config()).await;
    h.clear_heard();
    for i in 0..1_000u32 {
        h.relay.broadcast_binary(&i.to_le_bytes().repeat(64));
    }
    h.assert_subs_fine().await;
    assert_eq!(h.heard(), Vec::new());
    assert_eq!(h.reqs().len(), 2);
    assert_eq!(h.relay.log().accepted.len(), 1);
}

#[tokio::test]
async fn a_relay_that_never_answers_a_req_cannot_hang_the_client() {
    let _serial = SERIAL.lock().await;
    let mut model = RelayModel::with_events(3);
    model.silent_reqs = true;
    let relay = TestRelay::start(model).await.unwrap();
    let mut config = config();
    config.relay.eose_timeout = Duration::from_millis(500);
    config.relay.closed_retry = BackoffPolicy {
        base: Duration::from_millis(100),
        factor: 2.0,
        cap: Duration::from_millis(400),
        max_attempts: Some(3),
        jitter: Jitter::Full,
    };
    let client = RelayClient::connect(&relay.url(), config).unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    let started = tokio::time::Instant::now();
    let mut timeouts = 0;
    let closed = loop {
        let item = next_matching(&mut sub, Duration::from_secs(5), |_| true).await;
        match item {
            SubscriptionEvent::EoseTimeout => timeouts += 1,
            SubscriptionEvent::Retrying { .. } => {}
            SubscriptionEvent::Closed { reason, attempts } => break (reason, attempts),
            other => panic!("{other:?}"),
        }
    };
    let took = started.elapsed();
    assert_eq!(timeouts, 4, "the first REQ and 3 retries");
    assert_eq!(closed.1, 3);
    assert!(closed.0.starts_with("eose-timeout"), "{}", closed.0);
    // 4 x 500 ms of waiting plus at most 100 + 200 + 400 ms of backoff.
    assert!(took < Duration::from_secs(4), "{took:?}");
    let reqs = relay.log().frames("REQ").count();
    assert_eq!(reqs, 4);
    // The client itself was never stuck: it still publishes.
    let note = StoredEvent::new(50, 1_700_000_000, 1).json;
    tokio::time::timeout(Duration::from_secs(5), client.publish(note))
        .await
        .expect("publish answered")
        .unwrap();
    eprintln!("silent REQ surfaced as Closed after {took:?}");
}
