//! A short chaos soak over real sockets: tether-tokio → the testkit `FaultProxy` → the
//! testkit `TestRelay`, with seeded transport weather (severed connections, connections cut
//! after N bytes mid-frame, blackholes, refused connects) while the relay stores a new event
//! every 100 ms. When the weather clears, every subscription is live and has received every
//! event exactly once. The deterministic, long soak is `chaos_soak.rs` (the `Sim`); this one
//! checks that the real adapter, sockets and timers hold the same line.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::kind1;
use futures_util::StreamExt;
use tether_testkit::proxy::{FaultProxy, ProxyFaults};
use tether_testkit::server::TestRelay;
use tether_testkit::wait::{eventually, until_eose};
use tether_testkit::{RelayModel, StoredEvent};
use tether_tokio::tether_core::{Liveness, Rng};
use tether_tokio::{Config, RelayClient, SubscriptionEvent};

const SUBS: usize = 12;
const SOAK: Duration = Duration::from_secs(8);

/// What one subscription received: event numbers in order, and anything that ended it.
#[derive(Debug, Default)]
struct Received {
    events: Vec<u64>,
    closed: Option<String>,
}

fn config() -> Config {
    let mut config = Config::default();
    config.seed = Some(21);
    config.relay.link.reconnect = common::quick_reconnect(100, 500);
    // A blackhole is found by the ping watchdog and a hung handshake by the connect timeout.
    config.relay.link.liveness = Liveness::Ping {
        ping_after: Duration::from_millis(300),
        pong_timeout: Duration::from_millis(300),
    };
    config.relay.link.connect_timeout = Duration::from_millis(800);
    config
}

fn event_number(raw: &str) -> u64 {
    let start = raw.find("\"event ").expect("a testkit event") + "\"event ".len();
    let digits: String = raw[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// One fault for a short while, chosen by `rng`.
fn weather(rng: &mut Rng, proxy: &FaultProxy) -> &'static str {
    let calm = ProxyFaults::default();
    match rng.next_u64() % 5 {
        0 => {
            proxy.sever_all();
            "sever"
        }
        1 => {
            proxy.set(ProxyFaults {
                cut_after: Some(500 + rng.next_u64() % 4_000),
                ..calm
            });
            "cut"
        }
        2 => {
            proxy.set(ProxyFaults {
                blackhole: true,
                ..calm
            });
            "blackhole"
        }
        3 => {
            proxy.set(ProxyFaults {
                refuse: true,
                ..calm
            });
            proxy.sever_all();
            "refuse"
        }
        _ => {
            proxy.set(calm);
            "calm"
        }
    }
}

#[tokio::test]
async fn subscriptions_survive_seeded_transport_weather_without_loss_or_duplicates() {
    let relay = Arc::new(TestRelay::start(RelayModel::with_events(5)).await.unwrap());
    let proxy = FaultProxy::start(relay.addr()).await.unwrap();
    let client = RelayClient::connect(&format!("ws://{}", proxy.addr()), config()).unwrap();
    let mut received = Vec::new();
    for _ in 0..SUBS {
        let mut sub = client.subscribe(kind1()).await.unwrap();
        let stored = until_eose(&mut sub, Duration::from_secs(5)).await;
        let log = Arc::new(Mutex::new(Received {
            events: stored.iter().map(|e| event_number(&e.raw)).collect(),
            closed: None,
        }));
        received.push(Arc::clone(&log));
        tokio::spawn(async move {
            while let Some(item) = sub.next().await {
                let mut log = log.lock().unwrap();
                match item {
                    SubscriptionEvent::Event(e) => log.events.push(event_number(&e.raw)),
                    SubscriptionEvent::Closed { reason, .. } => log.closed = Some(reason),
                    _ => {}
                }
            }
        });
    }

    let producer = {
        let relay = Arc::clone(&relay);
        tokio::spawn(async move {
            for n in 6.. {
                // Dated now, as a relay's new events are: a catch-up's lookback is anchored
                // in wall-clock time.
                relay.store(StoredEvent::new(n, unix_now(), 1));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut rng = Rng::new(0x50a4);
    let mut faults = BTreeMap::<&str, u32>::new();
    let started = tokio::time::Instant::now();
    while started.elapsed() < SOAK {
        *faults.entry(weather(&mut rng, &proxy)).or_default() += 1;
        let hold = 200 + rng.next_u64() % 600;
        tokio::time::sleep(Duration::from_millis(hold)).await;
    }
    proxy.set(ProxyFaults::default());
    producer.abort();
    // The sentinel is stored after the weather: it comes live or by catch-up on the final
    // replay. Its arrival does not mean the catch-up is over (an answer is delivered in
    // batches, and the sentinel, newest, may lead), so wait for every stored event.
    relay.store(StoredEvent::new(1_000_000, unix_now(), 1));
    let all: Vec<u64> = relay.with(|s| s.model.events.iter().map(|e| e.n).collect());
    let has_all = |n: &[u64]| {
        received.iter().all(|r| {
            let log = r.lock().unwrap();
            n.iter().all(|n| log.events.contains(n))
        })
    };
    eventually(
        Duration::from_secs(15),
        "every subscription has every event",
        || has_all(&all),
    )
    .await;
    // A second sentinel, live on a settled socket: a duplicate still on its way from the
    // last catch-up reaches the subscription before it does.
    relay.store(StoredEvent::new(1_000_001, unix_now(), 1));
    eventually(
        Duration::from_secs(5),
        "every subscription has the live sentinel",
        || has_all(&[1_000_001]),
    )
    .await;

    let stored: Vec<u64> = relay.with(|s| s.model.events.iter().map(|e| e.n).collect());
    for (i, log) in received.iter().enumerate() {
        let log = log.lock().unwrap();
        assert_eq!(log.closed, None, "subscription {i}");
        let mut got = log.events.clone();
        got.sort_unstable();
        assert_eq!(got, stored, "subscription {i}: every event exactly once");
    }
    let reqs = relay.log().frames("REQ").count();
    eprintln!(
        "weather {faults:?}; {} events; {} connections through the proxy; {reqs} REQs",
        stored.len(),
        proxy.connections()
    );
    // Bounded: a replay per connection at most, and no reconnect storm.
    assert!(proxy.connections() < 100, "{}", proxy.connections());
    assert!(reqs <= SUBS * (proxy.connections() as usize + 1), "{reqs}");
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
