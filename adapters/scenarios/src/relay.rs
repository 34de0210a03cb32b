//! Relay scenarios against the testkit's [`TestRelay`] (and [`FaultProxy`]) over real
//! sockets on 127.0.0.1.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{future, stream, StreamExt};
use tether_core::nostr::message::EventId;
use tether_core::nostr::{Disconnect, Filter, Rejection, RelayCheckpoint};
use tether_core::{Jitter, Lifecycle, Liveness, SocketLoss};
use tether_driver::{
    Config, Published, Rejected, RelayEvent, SessionEvent, SessionEvents, Subscription,
    SubscriptionEvent,
};
use tether_testkit::proxy::{FaultProxy, ProxyFaults};
use tether_testkit::relay_model::auth_event;
use tether_testkit::server::TestRelay;
use tether_testkit::signer::FakeSigner;
use tether_testkit::wait::{connected_on, until_eose_on};
use tether_testkit::{LimitStyle, RelayModel, ReqBudget, StoredEvent};

use crate::{eventually, next_matching, within, Harness};

/// Reconnect base delay of [`config`] (the core's default is 1 s).
pub const RECONNECT_BASE: Duration = Duration::from_millis(100);
/// Silence before a ping, in [`config`] (default 30 s).
pub const PING_AFTER: Duration = Duration::from_millis(300);
/// Wait for the pong, in [`config`] (default 20 s).
pub const PONG_TIMEOUT: Duration = Duration::from_millis(200);
/// Pause between replay batches, in [`config`] (default 50 ms): long enough that batches
/// stay apart on a loaded machine.
pub const REPLAY_PAUSE: Duration = Duration::from_millis(200);

/// The scenarios' client configuration: seed 7 and the core's defaults with short delays.
pub fn config() -> Config {
    let mut config = Config::default();
    config.seed = Some(7);
    let link = &mut config.relay.link;
    link.reconnect.base = RECONNECT_BASE;
    link.liveness = Liveness::Ping {
        ping_after: PING_AFTER,
        pong_timeout: PONG_TIMEOUT,
    };
    config.relay.replay_pause = REPLAY_PAUSE;
    // The scenarios count connections and requests; the NIP-11 fetch (one more request
    // beside the first socket) has a scenario of its own.
    config.relay_info.fetch = false;
    config
}

fn kind1() -> Vec<Filter> {
    vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()]
}

/// The test event number in an id (`StoredEvent::new(n, ..)`).
fn number(id: &EventId) -> u64 {
    u64::from_be_bytes(id.0[24..].try_into().unwrap_or([0; 8]))
}

async fn start<H: Harness>(model: RelayModel) -> TestRelay {
    H::on_server(TestRelay::start(model)).await.unwrap()
}

async fn until_eose<H: Harness>(sub: &mut Subscription) -> Vec<RelayEvent> {
    until_eose_on::<H>(sub, Duration::from_secs(20)).await
}

async fn connected<H: Harness>(events: &mut SessionEvents) {
    connected_on::<H>(events, Duration::from_secs(10)).await;
}

async fn disconnected<H: Harness>(events: &mut SessionEvents) -> SessionEvent {
    next_matching::<H, _, _>(events, Duration::from_secs(10), |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await
}

/// The relay logged `n` accepted connections, and no more. The client can see its socket
/// open a moment before the server's accept loop writes its log.
async fn accepted<H: Harness>(relay: &TestRelay, n: usize) {
    eventually::<H>(
        Duration::from_secs(5),
        "the relay logged the accept",
        || relay.log().accepted.len() >= n,
    )
    .await;
    assert_eq!(relay.log().accepted.len(), n);
}

/// Stored events, EOSE, then a live event pushed by the relay.
pub async fn stored_events_then_eose_then_live_events<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(5)).await;
    let client = H::relay(&relay.url(), config());
    let mut sub = client.subscribe(kind1()).await.unwrap();
    let seen = until_eose::<H>(&mut sub).await;
    assert_eq!(seen.len(), 5);

    relay.store(StoredEvent::new(6, 1_000_006, 1));
    let live = next_matching::<H, _, _>(&mut sub, Duration::from_secs(5), |_| true).await;
    let SubscriptionEvent::Event(event) = live else {
        panic!("{live:?}")
    };
    assert!(event.raw.contains("\"event 6\""));
}

/// REQs past the relay's budget are refused with a hint; the retries wait for the window.
pub async fn rate_limited_subscriptions_recover_behind_the_gate<H: Harness>() {
    let window = Duration::from_secs(1);
    let mut model = RelayModel::with_events(2);
    model.budget = Some(ReqBudget {
        max: 3,
        window,
        hint: true,
    });
    let relay = start::<H>(model).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;

    let mut subs = Vec::new();
    for _ in 0..7 {
        subs.push(client.subscribe(kind1()).await.unwrap());
    }
    for sub in &mut subs {
        let seen = until_eose::<H>(sub).await;
        assert_eq!(seen.len(), 2);
    }
    next_matching::<H, _, _>(&mut events, Duration::from_secs(1), |e| {
        matches!(e, SessionEvent::RateLimited { .. })
    })
    .await;

    // The REQs after the first refusal waited for the hinted window (minus the time the
    // first three took to arrive), and the retries were bounded.
    let reqs = relay.with(|s| s.model.reqs.clone());
    let first = reqs[0].0;
    let refused_after = reqs
        .iter()
        .skip(7)
        .map(|(t, _, _)| t.saturating_duration_since(first))
        .min()
        .unwrap();
    assert!(refused_after >= window * 3 / 4, "{refused_after:?}");
    assert!(
        reqs.len() <= 7 + 4 * 5,
        "bounded retries: {} REQs",
        reqs.len()
    );
}

/// After a drop, 30 subscriptions are re-sent in batches of 8 with a pause between.
pub async fn replay_after_a_drop_goes_in_paced_batches<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    let mut subs = Vec::new();
    for _ in 0..30 {
        subs.push(client.subscribe(kind1()).await.unwrap());
    }
    for sub in &mut subs {
        until_eose::<H>(sub).await;
    }

    relay.sever_all();
    let SessionEvent::Disconnected {
        reconnect_in: Some(delay),
        why,
    } = disconnected::<H>(&mut events).await
    else {
        panic!("no reconnect planned")
    };
    assert!(delay >= RECONNECT_BASE / 2 && delay <= RECONNECT_BASE * 3 / 2);
    assert!(
        matches!(why, Disconnect::Lost(_)),
        "a severed socket is lost, not requested: {why:?}"
    );
    connected::<H>(&mut events).await;
    for sub in &mut subs {
        until_eose::<H>(sub).await;
    }

    // Group the second connection's REQs by arrival time: a batch arrives at once, batches
    // REPLAY_PAUSE apart.
    let reqs = relay.with(|s| s.model.reqs.clone());
    let mut batches: Vec<(tether_core::Instant, usize)> = Vec::new();
    for (t, _, _) in reqs.iter().filter(|(_, conn, _)| *conn == 1) {
        match batches.last_mut() {
            Some((at, n)) if t.saturating_duration_since(*at) < REPLAY_PAUSE / 2 => *n += 1,
            _ => batches.push((*t, 1)),
        }
    }
    let sizes: Vec<usize> = batches.iter().map(|b| b.1).collect();
    assert_eq!(sizes, vec![8, 8, 8, 6], "{batches:?}");
    for pair in batches.windows(2) {
        let gap = pair[1].0.saturating_duration_since(pair[0].0);
        assert!(gap >= REPLAY_PAUSE * 9 / 10, "{gap:?}");
    }
}

/// A relay that accepts and drops at once sees the reconnect delay double each time.
pub async fn accept_then_drop_relay_sees_growing_reconnect_delays<H: Harness>() {
    // A longer base than the other scenarios: the doubling must stand out from the noise
    // of a loaded machine in the real-time runs.
    let base = RECONNECT_BASE * 2;
    let mut model = RelayModel::default();
    model.drop_after = Some(Duration::from_millis(10));
    let relay = start::<H>(model).await;
    let mut config = config();
    config.relay.link.reconnect.base = base;
    // The default +-50% lets a delay come out shorter than the one before; +-20% keeps each
    // doubling visible in the gaps, which is what this scenario checks.
    config.relay.link.reconnect.jitter = Jitter::Proportional(0.2);
    let client = H::relay(&relay.url(), config);
    // 0.2 + 0.4 + 0.8 + 1.6 s (+-20%) of delays before the fifth socket.
    eventually::<H>(Duration::from_secs(10), "five sockets", || {
        relay.log().accepted.len() >= 5
    })
    .await;

    let accepted = relay.log().accepted;
    let gaps: Vec<Duration> = accepted.windows(2).map(|w| w[1] - w[0]).collect();
    // Each delay follows a socket that lived 10 ms, so none resets the backoff: every gap
    // is longer than the one before, and the fourth is about 8x the first.
    for pair in gaps.windows(2).take(3) {
        assert!(pair[1] > pair[0], "{gaps:?}");
    }
    assert!(gaps[3] >= gaps[0] * 4, "{gaps:?}");
    assert!(gaps[0] >= base * 4 / 5, "{gaps:?}");
    drop(client);
}

/// Connections refused for a while are retried until the relay takes them again, and the
/// replay only asks for what it may have missed.
pub async fn refused_connections_are_retried_until_the_relay_is_back<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(3)).await;
    let client = H::relay(&relay.url(), config());
    let mut sub = client.subscribe(kind1()).await.unwrap();
    until_eose::<H>(&mut sub).await;

    let refusing_from = relay.elapsed();
    let refuse = Duration::from_secs(1);
    relay.refuse_for(refuse);
    relay.sever_all();
    let seen = until_eose::<H>(&mut sub).await;
    let log = relay.log();
    assert!(log.refused.len() >= 2, "{log:?}");
    assert!(log.accepted.len() == 2 && log.accepted[1] >= refusing_from + refuse);
    // The replay asked only for what it might have missed (catch-up `since`), and the
    // overlap it got back was dropped as duplicates.
    assert_eq!(seen.len(), 0, "{seen:?}");
}

/// A socket dropped after a few frames: after the reconnect every event arrives once.
pub async fn a_drop_after_n_frames_loses_no_event<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(10)).await;
    relay.with(|s| s.faults.drop_after_frames = Some(4));
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    disconnected::<H>(&mut events).await;
    relay.with(|s| s.faults.drop_after_frames = None);
    let seen = until_eose::<H>(&mut sub).await;
    let mut ids: Vec<String> = seen.iter().map(|ev| ev.id.to_string()).collect();
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((total, ids.len()), (10, 10), "every event once: {seen:?}");
}

/// How long a silent peer is tolerated: a ping after [`PING_AFTER`], then [`PONG_TIMEOUT`].
fn assert_liveness_budget(waited: Duration) {
    let budget = PING_AFTER + PONG_TIMEOUT;
    // The silence began at the last frame, a moment before the test started its watch.
    assert!(
        waited >= budget * 9 / 10 && waited < budget * 2,
        "{waited:?}"
    );
}

/// A relay that stops answering (socket open) is pinged, then replaced.
pub async fn a_silent_relay_is_pinged_then_replaced<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    relay.set_silent(true);
    let start = H::now();
    disconnected::<H>(&mut events).await;
    assert_liveness_budget(H::now() - start);
    connected::<H>(&mut events).await;
    accepted::<H>(&relay, 2).await;
}

/// A proxy that swallows traffic both ways looks like a silent relay.
pub async fn a_blackholing_proxy_is_detected_like_a_silent_relay<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let proxy = H::on_server(FaultProxy::start(relay.addr())).await.unwrap();
    let client = H::relay(&format!("ws://{}", proxy.addr()), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    proxy.set(ProxyFaults {
        blackhole: true,
        ..ProxyFaults::default()
    });
    let start = H::now();
    disconnected::<H>(&mut events).await;
    assert_liveness_budget(H::now() - start);
    proxy.set(ProxyFaults::default());
    connected::<H>(&mut events).await;
    assert_eq!(proxy.connections(), 2);
}

/// An app resumed with a socket that died while it was away (the proxy now blackholes it:
/// no close ever comes): the resume probe finds it dead within `probe_timeout`, not the
/// liveness budget, and the client reconnects.
pub async fn a_zombie_socket_is_found_by_the_resume_probe<H: Harness>() {
    const PROBE: Duration = Duration::from_millis(300);
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let proxy = H::on_server(FaultProxy::start(relay.addr())).await.unwrap();
    let mut config = config();
    // Liveness alone would take 30 s + 20 s to notice.
    config.relay.link.liveness = Liveness::Ping {
        ping_after: Duration::from_secs(30),
        pong_timeout: Duration::from_secs(20),
    };
    config.relay.link.probe_timeout = PROBE;
    let client = H::relay(&format!("ws://{}", proxy.addr()), config);
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    client.lifecycle(Lifecycle::Suspended).await.unwrap();
    proxy.set(ProxyFaults {
        blackhole: true,
        ..ProxyFaults::default()
    });
    let start = H::now();
    client.lifecycle(Lifecycle::Resumed).await.unwrap();
    let why = within::<H, _>(Duration::from_secs(10), async {
        while let Some(event) = events.next().await {
            if let SessionEvent::Disconnected { why, .. } = event {
                return Some(why);
            }
        }
        None
    })
    .await
    .flatten();
    let waited = H::now() - start;
    assert_eq!(why, Some(Disconnect::Lost(SocketLoss::ResumeProbe)));
    assert!(
        waited >= PROBE * 9 / 10 && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    proxy.set(ProxyFaults::default());
    connected::<H>(&mut events).await;
    assert_eq!(proxy.connections(), 2);
}

/// A client stopped with its checkpoint written down and restored (from the JSON bytes) in a
/// new client while the relay stored two new events and one late one: the restored
/// subscription delivers exactly those three, none of the old ones, and says it caught up.
pub async fn a_restored_client_gets_exactly_what_it_missed<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(3)).await;
    let client = H::relay(&relay.url(), config());
    let mut sub = client.subscribe(kind1()).await.unwrap();
    let first = until_eose::<H>(&mut sub).await;
    assert_eq!(first.len(), 3);
    let bytes = client.checkpoint().await.unwrap().to_json();
    drop(sub);
    client.disconnect().await.unwrap();
    drop(client);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    relay.store(StoredEvent::new(10, now, 1));
    relay.store(StoredEvent::new(11, now, 1));
    // Authored a minute before, reaching the relay while the client is away.
    relay.store(StoredEvent::new(12, now - 60, 1));
    let checkpoint = RelayCheckpoint::from_json(&bytes).unwrap();
    let (client, mut subs) = H::restore_relay(&relay.url(), config(), &checkpoint);
    assert_eq!(subs.len(), 1);
    let mut sub = subs.remove(0);
    let mut got = Vec::new();
    let caught_up = within::<H, _>(Duration::from_secs(20), async {
        while let Some(item) = sub.next().await {
            match item {
                SubscriptionEvent::Event(e) => got.push(number(&e.id)),
                SubscriptionEvent::CaughtUp(c) => return Some(c),
                _ => {}
            }
        }
        None
    })
    .await
    .flatten();
    assert!(caught_up.is_some(), "no catch-up report; got {got:?}");
    got.sort_unstable();
    assert_eq!(got, [10, 11, 12], "only what was missed");
    drop(client);
}

/// A connection cut inside a frame: the replay fills the gap without duplicates.
pub async fn a_connection_cut_mid_frame_resumes_without_loss_or_duplicates<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(10)).await;
    let proxy = H::on_server(FaultProxy::start(relay.addr())).await.unwrap();
    // Each stored event frame is ~330 bytes: the cut lands inside the stored events.
    proxy.set(ProxyFaults {
        cut_after: Some(1_500),
        ..ProxyFaults::default()
    });
    let client = H::relay(&format!("ws://{}", proxy.addr()), config());
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    let mut ids = Vec::new();
    {
        let mut both = stream::select(
            (&mut sub).map(Either::Sub),
            (&mut events).map(Either::Session),
        );
        let cut = within::<H, _>(Duration::from_secs(10), async {
            while let Some(item) = both.next().await {
                match item {
                    Either::Sub(SubscriptionEvent::Event(event)) => ids.push(event.id),
                    Either::Session(SessionEvent::Disconnected { .. }) => return true,
                    _ => {}
                }
            }
            false
        })
        .await;
        assert_eq!(cut, Some(true), "the cut was noticed");
    }
    assert!(ids.len() < 10, "cut before the end: {}", ids.len());
    proxy.set(ProxyFaults::default());
    ids.extend(
        until_eose::<H>(&mut sub)
            .await
            .into_iter()
            .map(|event| event.id),
    );
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((total, ids.len()), (10, 10));
}

/// Items of two streams, merged.
enum Either {
    Sub(SubscriptionEvent),
    Session(SessionEvent),
}

/// An auth-required relay: the configured signer answers the challenge.
pub async fn auth_required_relay_with_a_signer<H: Harness>() {
    let mut model = RelayModel::with_events(2);
    model.auth_required = true;
    let relay = start::<H>(model).await;
    let mut config = config();
    config.signer = Some(Arc::new(FakeSigner));
    let client = H::relay(&relay.url(), config);
    let mut events = client.events().unwrap();
    let mut sub = client.subscribe(kind1()).await.unwrap();
    next_matching::<H, _, _>(&mut events, Duration::from_secs(10), |e| {
        *e == SessionEvent::Authenticated
    })
    .await;
    let seen = until_eose::<H>(&mut sub).await;
    assert_eq!(seen.len(), 2);
    let note = StoredEvent::new(50, 1_000_050, 1).json;
    assert!(client.publish(note).await.is_ok());
}

/// An auth-required relay without a signer: the application answers the challenge.
pub async fn auth_by_hand_without_a_signer<H: Harness>() {
    let mut model = RelayModel::with_events(1);
    model.auth_required = true;
    let relay = start::<H>(model).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    let challenge = next_matching::<H, _, _>(&mut events, Duration::from_secs(10), |e| {
        matches!(e, SessionEvent::AuthChallenge { .. })
    })
    .await;
    let SessionEvent::AuthChallenge { challenge, id } = challenge else {
        unreachable!()
    };
    let mut sub = client.subscribe(kind1()).await.unwrap();
    client
        .authenticate(id, auth_event(9, &challenge))
        .await
        .unwrap();
    next_matching::<H, _, _>(&mut events, Duration::from_secs(10), |e| {
        *e == SessionEvent::Authenticated
    })
    .await;
    assert_eq!(until_eose::<H>(&mut sub).await.len(), 1);
}

/// Publish verdicts reach the caller that published that event id.
pub async fn publish_outcomes_are_matched_by_event_id<H: Harness>() {
    let mut model = RelayModel::default();
    model
        .scripted_ok
        .push_back((false, "blocked: not on the list".into()));
    model
        .scripted_ok
        .push_back((false, "duplicate: already have it".into()));
    let relay = start::<H>(model).await;
    let client = H::relay(&relay.url(), config());
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
    let (dup, ok) = future::join(
        client.publish(b.json.clone()),
        client.publish(c.json.clone()),
    )
    .await;
    assert_eq!(dup, Ok(Published { id: b.id() }));
    assert_eq!(ok, Ok(Published { id: c.id() }));
    assert!(matches!(
        client.publish("not json").await,
        Err(Rejected::Local(_))
    ));
}

/// A NOTICE-only subscription limit is learned; later subscriptions queue for a slot.
pub async fn notice_only_limit_is_learned_and_later_subscriptions_queue<H: Harness>() {
    let mut model = RelayModel::with_events(1);
    model.max_subs = Some((2, LimitStyle::Notice));
    let relay = start::<H>(model).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    let mut first = client.subscribe(kind1()).await.unwrap();
    let mut second = client.subscribe(kind1()).await.unwrap();
    until_eose::<H>(&mut first).await;
    until_eose::<H>(&mut second).await;

    // The refused third waits for a slot, like the fourth that is never sent.
    let mut third = client.subscribe(kind1()).await.unwrap();
    let queued = next_matching::<H, _, _>(&mut third, Duration::from_secs(10), |_| true).await;
    assert_eq!(queued, SubscriptionEvent::Queued);
    next_matching::<H, _, _>(&mut events, Duration::from_secs(1), |e| {
        *e == SessionEvent::SubscriptionLimit { max: 2 }
    })
    .await;

    let mut fourth = client.subscribe(kind1()).await.unwrap();
    assert_eq!(
        next_matching::<H, _, _>(&mut fourth, Duration::from_secs(1), |_| true).await,
        SubscriptionEvent::Queued
    );
    let reqs = relay.log().frames("REQ").count();
    assert_eq!(reqs, 3, "the fourth was not sent over the cap");
    // Slots free in turn: the longest waiting first.
    first.unsubscribe().await.unwrap();
    assert_eq!(until_eose::<H>(&mut third).await.len(), 1);
    second.unsubscribe().await.unwrap();
    assert_eq!(until_eose::<H>(&mut fourth).await.len(), 1);
}

/// The relay's NIP-11 document is fetched beside the first socket and applied: its
/// `max_message_length` makes a larger publish a local error; reconnects reuse it.
pub async fn the_relay_information_document_is_fetched_and_applied<H: Harness>() {
    let mut model = RelayModel::with_events(1);
    model.info_document =
        Some(r#"{"limitation":{"max_subscriptions":5,"max_message_length":2048}}"#.to_owned());
    let relay = start::<H>(model).await;
    let mut config = config();
    config.relay_info.fetch = true;
    let client = H::relay(&relay.url(), config);
    let mut events = client.events().unwrap();
    let applied = next_matching::<H, _, _>(&mut events, Duration::from_secs(10), |e| {
        matches!(
            e,
            SessionEvent::RelayInfo { .. } | SessionEvent::RelayInfoUnavailable { .. }
        )
    })
    .await;
    let SessionEvent::RelayInfo { applied, .. } = applied else {
        panic!("{applied:?}");
    };
    assert_eq!(applied.subscription_limit, Some(5));
    assert_eq!(applied.max_message_length, Some(2048));
    let big = StoredEvent::new(5, 1_700_000_000, 1)
        .json
        .replace("event 5", &"x".repeat(3_000));
    assert!(matches!(
        client.publish(big).await,
        Err(Rejected::Local(
            tether_core::nostr::Error::MessageTooLarge { max: 2048, .. }
        ))
    ));
    let mut sub = client.subscribe(kind1()).await.unwrap();
    assert_eq!(until_eose::<H>(&mut sub).await.len(), 1);
    client.disconnect().await.unwrap();
    client.reconnect().await.unwrap();
    assert_eq!(until_eose::<H>(&mut sub).await.len(), 0);
    assert_eq!(
        relay.log().info_requests.len(),
        1,
        "cached across the reconnect"
    );
}

/// An application that stops reading stalls the relay through TCP, loses nothing, and is
/// not mistaken for a dead connection.
pub async fn a_slow_reader_holds_the_relay_back_and_loses_nothing<H: Harness>() {
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
    let relay = start::<H>(model).await;
    let mut config = config();
    config.subscription_capacity = 8;
    let client = H::relay(&relay.url(), config);
    let mut sub = client.subscribe(kind1()).await.unwrap();
    assert!(matches!(
        sub.next().await,
        Some(SubscriptionEvent::Event(_))
    ));

    // The application stops reading. The driver stops reading the socket, the kernel
    // buffers fill, and the relay's writes stall far short of 2000 x 16 KiB = 32 MiB.
    let stalled_at = stalled::<H>(&relay).await;
    H::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        relay.log().frames_sent,
        stalled_at,
        "the relay is held back"
    );
    assert!(
        stalled_at < N / 2,
        "sent {stalled_at} of {N} frames to a stalled reader"
    );
    // Several liveness budgets later still the same socket: the silence of a socket we do
    // not read is not a dead relay (no ping timeout, no reconnect and replay).
    H::sleep((PING_AFTER + PONG_TIMEOUT) * 3).await;
    assert_eq!(relay.log().accepted.len(), 1);

    // The relay answers newest first: the first event read was N.
    let mut next = N - 1;
    while let Some(item) = sub.next().await {
        match item {
            SubscriptionEvent::Event(event) => {
                assert!(event.raw.contains(&format!("\"event {next} ")));
                next -= 1;
            }
            SubscriptionEvent::Eose => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(next, 0, "every event, in the relay's order");
}

/// The relay's sent-frame count once it stops moving (unchanged over 300 ms).
async fn stalled<H: Harness>(relay: &TestRelay) -> u64 {
    let mut last = relay.log().frames_sent;
    loop {
        H::sleep(Duration::from_millis(300)).await;
        let now = relay.log().frames_sent;
        if now == last {
            return now;
        }
        last = now;
    }
}

/// `disconnect` closes the socket and nothing reconnects until `reconnect`.
pub async fn disconnect_closes_and_never_reconnects<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    client.disconnect().await.unwrap();
    assert_eq!(
        next_matching::<H, _, _>(&mut events, Duration::from_secs(1), |_| true).await,
        SessionEvent::Disconnected {
            reconnect_in: None,
            why: Disconnect::Requested
        }
    );
    eventually::<H>(Duration::from_secs(5), "the relay saw the close", || {
        relay.open_connections() == 0
    })
    .await;
    // Many reconnect delays later: still no second connection.
    H::sleep(RECONNECT_BASE * 20).await;
    assert_eq!(relay.log().accepted.len(), 1);

    client.reconnect().await.unwrap();
    connected::<H>(&mut events).await;
    accepted::<H>(&relay, 2).await;
}

/// Dropping a `Subscription` sends CLOSE.
pub async fn dropping_a_subscription_closes_it_on_the_relay<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let client = H::relay(&relay.url(), config());
    let mut sub = client.subscribe(kind1()).await.unwrap();
    until_eose::<H>(&mut sub).await;
    assert_eq!(relay.with(|s| s.model.open_subs(0)), 1);
    drop(sub);
    eventually::<H>(Duration::from_secs(5), "CLOSE reached the relay", || {
        relay.with(|s| s.model.open_subs(0)) == 0
    })
    .await;
    drop(client);
}

/// With every handle gone the driver ends and closes its socket.
pub async fn every_handle_dropped_ends_the_driver<H: Harness>() {
    let relay = start::<H>(RelayModel::with_events(1)).await;
    let client = H::relay(&relay.url(), config());
    let mut events = client.events().unwrap();
    connected::<H>(&mut events).await;
    drop(client);
    let ended = within::<H, _>(Duration::from_secs(5), async {
        while let Some(e) = events.next().await {
            let _ = e;
        }
    })
    .await;
    assert_eq!(ended, Some(()));
    eventually::<H>(Duration::from_secs(5), "the socket closed", || {
        relay.open_connections() == 0
    })
    .await;
}
