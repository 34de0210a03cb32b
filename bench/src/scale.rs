//! Many relays, idle: `relays` connections from one client, `subs` subscriptions on each,
//! quiet after EOSE, then a trickle of one event per subscription. The relays are one
//! tether-testserver `TestRelay` serving every URL (`ws://127.0.0.1:port/r{i}`); the client
//! runs in a child process of its own (the `scale` bench re-executes itself), so its resident
//! set and CPU clock are the client's alone.
//!
//! Both contenders verify the trickle's signatures as they ship: nostr-sdk always, tether
//! with its pool's verifier on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use nostr::{EventBuilder, JsonUtil, Keys, Kind, Timestamp};

use crate::e2e::Contender;

/// What one client's run cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScaleMeasurement {
    /// From creating the client to every subscription's EOSE on every relay.
    pub connect_and_eose: Duration,
    /// Resident set growth from the client with no relay to after every EOSE, per connection.
    pub rss_per_connection_bytes: f64,
    /// Process CPU over the idle span, scaled to a minute.
    pub idle_cpu_per_minute: Duration,
    /// Unique trickle events received (one per subscription expected).
    pub trickle_received: usize,
    /// The most connections the relay had accepted and not finished upgrading at once (the
    /// relay's count: see `TestRelay::take_peak_handshakes`).
    pub peak_handshakes: usize,
}

/// The kinds the `subs` subscriptions ask for: one each, so each trickle event matches one.
pub fn kind_of(sub: usize) -> u16 {
    10_000 + sub as u16
}

/// The trickle: one signed event per subscription, in order.
pub fn trickle(subs: usize) -> Vec<nostr::Event> {
    let keys = Keys::generate();
    (0..subs)
        .map(|k| {
            EventBuilder::new(Kind::Custom(kind_of(k)), format!("trickle {k}"))
                .custom_created_at(Timestamp::from(1_760_000_000 + k as u64))
                .sign_with_keys(&keys)
                .expect("signed")
        })
        .collect()
}

/// Phases a client reports to whoever drives the trickle.
pub trait Phases {
    /// Every subscription has EOSE from every relay.
    fn ready(&mut self);
    /// The idle span is over; send the trickle now.
    fn idle_done(&mut self);
}

/// Raise the soft limit on open files to the hard one: a process holds one socket per
/// relay (and the relay process one per client connection). Returns the soft limit now.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    if setrlimit(Resource::Nofile, raised).is_ok() {
        return limit.maximum;
    }
    limit.current
}

/// Run one client against `relays` URLs under `base`, `subs` subscriptions each, idle for
/// `idle`, then wait for the trickle (one event per subscription, sent on
/// [`Phases::idle_done`]), on a current-thread runtime on this thread. `root_pem`: a private
/// CA tether trusts besides the webpki roots (a wss:// relay with a certificate the test
/// made; nostr-sdk takes no such root).
pub fn run_client(
    contender: Contender,
    base: &str,
    relays: usize,
    subs: usize,
    idle: Duration,
    root_pem: Option<Vec<u8>>,
    phases: &mut dyn Phases,
) -> ScaleMeasurement {
    let urls: Vec<String> = (0..relays).map(|i| format!("{base}/r{i}")).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let started = Instant::now();
    runtime.block_on(async {
        let mut m = ScaleMeasurement::default();
        let mut rss0 = 0.0;
        let mut client =
            Client::connect(contender, &urls, subs, root_pem, &mut || rss0 = rss_bytes()).await;
        m.connect_and_eose = started.elapsed();
        m.rss_per_connection_bytes = (rss_bytes() - rss0) / relays as f64;
        phases.ready();
        let cpu0 = crate::e2e::process_cpu_now();
        client.idle(idle).await;
        let cpu = crate::e2e::process_cpu_now() - cpu0;
        m.idle_cpu_per_minute = cpu.mul_f64(60.0 / idle.as_secs_f64());
        phases.idle_done();
        m.trickle_received = client.trickle(subs).await;
        m
    })
}

enum Client {
    Tether {
        _pool: tether_tokio::PoolHandle,
        /// Every subscription, read together: one read at a time would stall the rest (they
        /// share the driver's backpressure, and each yields an EOSE item per relay).
        items: futures_util::stream::SelectAll<tether_tokio::PoolSubscription>,
    },
    NostrSdk {
        _client: Box<nostr_sdk::Client>,
        notifications: tokio::sync::broadcast::Receiver<nostr_sdk::RelayPoolNotification>,
    },
}

impl Client {
    /// Connect and subscribe; `baseline` runs once the client exists and before its first
    /// relay, so that what it costs with no connection (runtime, threads, verifier) is not
    /// counted per connection.
    async fn connect(
        contender: Contender,
        urls: &[String],
        subs: usize,
        root_pem: Option<Vec<u8>>,
        baseline: &mut dyn FnMut(),
    ) -> Client {
        match contender {
            Contender::NostrSdk => Client::nostr_sdk(urls, subs, baseline).await,
            _ => Client::tether(urls, subs, root_pem, baseline).await,
        }
    }

    async fn tether(
        urls: &[String],
        subs: usize,
        root_pem: Option<Vec<u8>>,
        baseline: &mut dyn FnMut(),
    ) -> Client {
        use tether_tokio::tether_driver::verify::Verifier;
        use tether_tokio::{Config, Filter, PoolConfig, PoolItem};
        let mut config = Config::default();
        config.verifier = Some(Arc::new(Verifier::new()));
        // nostr-sdk asks for no NIP-11 document: neither does tether here, so both clients
        // open the same sockets and the relay's handshake count is WebSocket upgrades only.
        config.relay_info.fetch = false;
        config.roots.extra_pem.extend(root_pem);
        let mut pool_config = PoolConfig::default();
        pool_config.eose_deadline = Duration::from_secs(300);
        // `TETHER_SCALE_MAX_CONNECTING` compares other limits (the default is the pool's).
        if let Some(limit) = std::env::var("TETHER_SCALE_MAX_CONNECTING")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            pool_config.max_connecting = limit;
        }
        let pool = tether_tokio::pool(pool_config, config);
        // The driver task has run once: what it holds with no relay is the client's own.
        tokio::task::yield_now().await;
        baseline();
        for url in urls {
            pool.add_relay(url).await.expect("tether adds relay");
        }
        let mut items = futures_util::stream::SelectAll::new();
        for k in 0..subs {
            let filter = Filter::new(&format!(r#"{{"kinds":[{}]}}"#, kind_of(k))).expect("filter");
            items.push(pool.subscribe(vec![filter]).await.expect("subscribe"));
        }
        let mut complete = 0;
        while complete < subs {
            match items.next().await.expect("subscriptions live") {
                PoolItem::Complete(tether_tokio::Outcome::Complete) => complete += 1,
                PoolItem::Complete(partial) => panic!("tether: {partial:?}"),
                _ => {}
            }
        }
        Client::Tether { _pool: pool, items }
    }

    async fn nostr_sdk(urls: &[String], subs: usize, baseline: &mut dyn FnMut()) -> Client {
        use nostr_sdk::{RelayMessage, RelayPoolNotification};
        let client = nostr_sdk::Client::default();
        baseline();
        for url in urls {
            client.add_relay(url).await.expect("nostr-sdk adds relay");
        }
        let mut notifications = client.notifications();
        client.try_connect(Duration::from_secs(60)).await;
        for k in 0..subs {
            let filter = nostr::Filter::new().kind(Kind::Custom(kind_of(k)));
            client
                .subscribe(filter, None)
                .await
                .expect("nostr-sdk subscribes");
        }
        // Nothing else is said in this span, so messages the broadcast channel dropped while
        // this receiver lagged are counted as the EOSEs they were.
        let mut eose = 0;
        while eose < urls.len() * subs {
            match notifications.recv().await {
                Ok(RelayPoolNotification::Message {
                    message: RelayMessage::EndOfStoredEvents(_),
                    ..
                }) => eose += 1,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => eose += n as usize,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => panic!("nostr-sdk closed"),
                Ok(_) => {}
            }
        }
        Client::NostrSdk {
            _client: Box::new(client),
            notifications,
        }
    }

    /// Stay connected, serving pings and timers, for `d`.
    async fn idle(&mut self, d: Duration) {
        match self {
            Client::Tether { items, .. } => {
                if let Ok(item) = tokio::time::timeout(d, items.next()).await {
                    panic!("tether heard something while idle: {item:?}");
                }
            }
            Client::NostrSdk { .. } => tokio::time::sleep(d).await,
        }
    }

    /// Unique trickle events received, one per subscription expected, within 60 s.
    async fn trickle(&mut self, subs: usize) -> usize {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        match self {
            Client::Tether { items, .. } => {
                // Each trickle event matches one subscription: one `Event` each.
                let mut received = 0;
                while received < subs {
                    match tokio::time::timeout_at(deadline, items.next()).await {
                        Ok(Some(tether_tokio::PoolItem::Event { .. })) => received += 1,
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => break,
                    }
                }
                received
            }
            Client::NostrSdk { notifications, .. } => {
                let mut ids = std::collections::BTreeSet::new();
                while ids.len() < subs {
                    match tokio::time::timeout_at(deadline, notifications.recv()).await {
                        Ok(Ok(nostr_sdk::RelayPoolNotification::Event { event, .. })) => {
                            ids.insert(event.id);
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                ids.len()
            }
        }
    }
}

/// The trickle as JSON, for the server.
pub fn trickle_json(events: &[nostr::Event]) -> Vec<String> {
    events.iter().map(JsonUtil::as_json).collect()
}

fn rss_bytes() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib * 1024.0)
}
