//! `cargo bench -p tether-bench --bench catch_up`: what catching up after a lost connection
//! costs on the wire, against rust-nostr's nostr-relay-builder 0.44.1 (in process, NIP-77).
//!
//! Each run starts a fresh relay whose memory database holds `TETHER_CATCHUP_EVENTS` (10 000)
//! signed kind-1 notes dated over the last ~100 s, behind a byte-counting TCP proxy. A client
//! subscribes through the proxy and receives all of them up to EOSE; the proxy then severs
//! its socket and refuses new ones while 10 new notes are stored in the relay's database
//! (straight into it, not through the proxy); then the proxy lets connections through again
//! and the client catches up:
//!
//! - **tether NIP-77**: `CatchUpConfig::memory` holding every id: `NEG-OPEN` with the
//!   window's ids, `NEG-MSG` rounds, then the missing ids fetched in the subscription's REQ.
//! - **tether `since`** (`negentropy = false`): the REQ re-sent with a `since` window (the
//!   lookback, 120 s before the loss) and paged; the overlap already delivered is dropped.
//! - **tether NIP-77, default memory** (1 024 ids per subscription): the exact window shrinks
//!   to the newest ~1 024 events; the 10 new ones are still found.
//! - **nostr-sdk `sync`**: `Client::sync` (negentropy, down) for a client whose database holds
//!   the same notes, over an open connection: bytes and time of the sync call alone.
//!
//! Bytes are TCP payload through the proxy, both directions, from the proxy letting
//! connections through again to `CaughtUp` (nostr-sdk: over the `sync` call), including the
//! WebSocket upgrade (shown apart). Time is from the proxy accepting the reconnect (the
//! client's backoff, 20-50 ms here, is left out) to `CaughtUp`. The ratio compares the bytes
//! with the 10 missed events' own JSON.
//!
//! `TETHER_CATCHUP_EVENTS` and `TETHER_CATCHUP_ROUNDS` (5, after one unmeasured round) change
//! the corpus and the rounds; `TETHER_CATCHUP_REPLAY_PAUSE_MS` sets tether's
//! `RelayConfig::replay_pause` (50 ms): at most `replay_batch` (8) background sends, replay
//! REQs and catch-up steps (`NEG-OPEN`, each fetch or page REQ), in any such pause.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use nostr::{Event, JsonUtil, Kind, Timestamp};
use nostr_relay_builder::prelude::{MemoryDatabase, MemoryDatabaseOptions, NostrDatabase};
use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tether_bench::e2e;
use tether_core::backoff::{BackoffPolicy, Jitter};
use tether_tokio::{
    CatchUpConfig, CatchUpMethod, CaughtUp, Config, Filter, RelayClient, SubscriptionEvent,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::timeout;

/// Events published while the client is cut off.
const MISSED: usize = 10;
/// Gift wraps stored while the client of the inbox world is cut off.
const INBOX_MISSED: usize = 5;
/// Two days: NIP-59 dates a gift wrap at a random time this far back.
const TWO_DAYS: u64 = 2 * 86_400;

/// What the relay holds and the client reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum World {
    /// `n` notes dated over the last 100 s; 10 fresh notes missed.
    Notes,
    /// A DM inbox: `n` gift wraps (kind 1059) to one user, dated as NIP-59 dates them
    /// (spread over two days); 5 missed, each dated at random up to two days back.
    Inbox,
}

impl World {
    fn missed(self) -> usize {
        match self {
            World::Notes => MISSED,
            World::Inbox => INBOX_MISSED,
        }
    }

    fn cases(self) -> &'static [Case] {
        match self {
            World::Notes => &Case::ALL,
            // The default memory (1 024) holds about half of a 2 000-wrap inbox: its exact
            // window would not reach the wraps dated back, so it is not a contender here.
            World::Inbox => &[Case::Negentropy, Case::Since, Case::NostrSdkSync],
        }
    }
}

/// The user the inbox's wraps are addressed to.
fn inbox_user() -> nostr::Keys {
    nostr::Keys::parse("6b911fd37cdf5c81d4c0adb1ab7fa822ed253ab0ad9aa18d77257c88b29b718e")
        .expect("a secret key")
}

/// `n` gift wraps to [`inbox_user`], each signed by a throwaway key as NIP-59 signs them, with
/// a 1 000-byte sealed body (a short DM's seal, base64), dated by `date(i, random)`.
fn wraps_dated(n: usize, seed: u64, date: impl Fn(usize, u64) -> u64) -> Vec<Event> {
    let to = inbox_user().public_key();
    let mut state = seed | 1;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|i| {
            let body: String = (0..1_000)
                .map(|_| {
                    char::from(
                        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                            [(random() % 64) as usize],
                    )
                })
                .collect();
            nostr::EventBuilder::new(Kind::GiftWrap, body)
                .tag(nostr::Tag::public_key(to))
                .custom_created_at(Timestamp::from(date(i, random())))
                .sign_with_keys(&nostr::Keys::generate())
                .expect("signing")
        })
        .collect()
}
/// How long the client stays cut off before the missed events are stored.
const OUTAGE: Duration = Duration::from_millis(300);
/// How long it stays cut off after the missed events are stored (`CaughtUp::recovered`
/// counts what the catch-up's answers delivered, so this only spaces the run out).
const AFTER_MISSED: Duration = Duration::from_millis(300);
/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(120);
/// Notes are dated over this many seconds before the run starts (the lookback is 120 s).
const SPREAD: u64 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Negentropy,
    Since,
    NegentropyDefaultMemory,
    NostrSdkSync,
}

impl Case {
    const ALL: [Case; 4] = [
        Case::Negentropy,
        Case::Since,
        Case::NegentropyDefaultMemory,
        Case::NostrSdkSync,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::Negentropy => "tether NIP-77 (memory 2n)",
            Case::Since => "tether since (negentropy off)",
            Case::NegentropyDefaultMemory => "tether NIP-77 (default memory 1 024)",
            Case::NostrSdkSync => "nostr-sdk 0.44 sync",
        }
    }
}

/// Frames per direction and message type: (count, bytes).
type FrameCounts = BTreeMap<(&'static str, String), (u64, u64)>;

/// One run's cost.
#[derive(Clone, Debug, Default)]
struct Sample {
    /// Client to relay, bytes.
    up: u64,
    /// Relay to client, bytes.
    down: u64,
    /// Of `up + down`, the HTTP upgrade (request and response heads).
    upgrade: u64,
    /// Accept of the reconnect (nostr-sdk: start of `sync`) to `CaughtUp` (end of `sync`).
    ms: f64,
    /// Restore of the proxy to `CaughtUp`: `ms` plus the client's remaining backoff.
    ms_from_restore: f64,
    /// The missed events' own JSON.
    missed_json: u64,
    /// The stored events' JSON (what a full re-download would carry).
    corpus_json: u64,
    /// `CaughtUp::recovered` (nostr-sdk: events received by the sync).
    recovered: u64,
    /// How far back the exact window reached, from the loss of the socket (tether).
    window_s: Option<u64>,
    /// Bytes after `CaughtUp` within 200 ms (what the catch-up sends after reporting).
    trailing: u64,
    /// Their frames.
    trailing_frames: FrameCounts,
    /// Frames per direction and message type: (count, bytes).
    frames: FrameCounts,
    /// Runs of frames over time.
    timeline: Vec<Run>,
}

impl Sample {
    fn total(&self) -> u64 {
        self.up + self.down
    }

    fn ratio(&self) -> f64 {
        self.total() as f64 / self.missed_json as f64
    }
}

fn main() {
    let rounds = env_usize("TETHER_CATCHUP_ROUNDS", 5).max(1);
    let worlds: &[World] = match std::env::var("TETHER_CATCHUP_WORLD").as_deref() {
        Ok("notes") => &[World::Notes],
        Ok("inbox") => &[World::Inbox],
        _ => &[World::Notes, World::Inbox],
    };
    for &world in worlds {
        let n = match world {
            World::Notes => env_usize("TETHER_CATCHUP_EVENTS", 10_000).max(1),
            World::Inbox => env_usize("TETHER_CATCHUP_WRAPS", 2_000).max(1),
        };
        measure(world, n, rounds);
    }
}

fn measure(world: World, n: usize, rounds: usize) {
    let relay_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("relay runtime");
    let mut results: Vec<(Case, Vec<Sample>)> =
        world.cases().iter().map(|c| (*c, vec![])).collect();
    let mut seed = 1_000;
    for round in 0..=rounds {
        for (case, samples) in results.iter_mut() {
            seed += 1;
            let sample = run(*case, world, &relay_rt, n, seed);
            eprintln!(
                "round {round}: {:<38} up {:>9} B, down {:>9} B ({:>7.1}x), {:>8.1} ms ({:.1} ms from restore), recovered {}, window {}",
                case.name(),
                sample.up,
                sample.down,
                sample.ratio(),
                sample.ms,
                sample.ms_from_restore,
                sample.recovered,
                sample
                    .window_s
                    .map_or("-".to_owned(), |s| format!("{s} s")),
            );
            if round > 0 {
                samples.push(sample);
            }
        }
    }
    println!("{}", table(world, n, rounds, &results));
    println!("{}", frames(&results));
}

/// One catch-up of `case`, on a fresh relay holding `n` events of `world`.
fn run(case: Case, world: World, relay_rt: &Runtime, n: usize, seed: u64) -> Sample {
    let start = Timestamp::now().as_secs();
    let corpus = match world {
        World::Notes => e2e::realistic_notes_dated(n, seed, |i, _| {
            start - SPREAD + (i as u64 * SPREAD) / n as u64
        }),
        World::Inbox => wraps_dated(n, seed, |i, _| {
            start - TWO_DAYS + (i as u64 * TWO_DAYS) / n as u64
        }),
    };
    let corpus_json = json_len(&corpus);
    let relay = TestRelay::start(relay_rt, &corpus, n);
    let proxy = Proxy::start(relay_rt, relay.addr);
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let mut sample = client_rt.block_on(async {
        match case {
            Case::NostrSdkSync => nostr_sdk_sync(world, &relay, &proxy, corpus, seed).await,
            _ => tether(case, world, &relay, &proxy, n, seed).await,
        }
    });
    drop(client_rt);
    drop(proxy);
    drop(relay);
    sample.corpus_json = corpus_json;
    sample
}

fn tether_config(case: Case, n: usize) -> Config {
    let mut config = Config::default();
    config.seed = Some(7);
    // Keep trying through the outage, so the reconnect follows the restore within 50 ms.
    config.relay.link.reconnect = BackoffPolicy {
        base: Duration::from_millis(20),
        factor: 1.5,
        cap: Duration::from_millis(50),
        max_attempts: None,
        jitter: Jitter::Proportional(0.2),
    };
    let mut catch_up = CatchUpConfig::default();
    if case != Case::NegentropyDefaultMemory {
        catch_up.memory = (2 * n).max(catch_up.memory);
        catch_up.memory_total = (2 * n).max(catch_up.memory_total);
    }
    catch_up.negentropy = case != Case::Since;
    config.relay.catch_up = Some(catch_up);
    // Catch-up steps (NEG-OPEN, each fetch or page REQ) are paced like replays.
    if let Ok(ms) = std::env::var("TETHER_CATCHUP_REPLAY_PAUSE_MS") {
        config.relay.replay_pause = Duration::from_millis(ms.parse().expect("milliseconds"));
    }
    config
}

async fn tether(
    case: Case,
    world: World,
    relay: &TestRelay,
    proxy: &Proxy,
    n: usize,
    seed: u64,
) -> Sample {
    let client = RelayClient::connect(&proxy.url(), tether_config(case, n)).expect("connects");
    let filter = match world {
        World::Notes => format!(r#"{{"kinds":[1],"limit":{n}}}"#),
        // Every wrap: without a `limit` nostr-relay-builder answers 500 at most.
        World::Inbox => format!(
            r##"{{"kinds":[1059],"#p":["{}"],"limit":{n}}}"##,
            inbox_user().public_key().to_hex()
        ),
    };
    let filter = Filter::new(&filter).expect("filter");
    let sub = client.subscribe(vec![filter]).await.expect("subscribes");
    let mut rx = forward(sub);
    let mut seen = 0;
    loop {
        match next(&mut rx, "EOSE").await {
            SubscriptionEvent::Event(_) => seen += 1,
            SubscriptionEvent::Eose => break,
            SubscriptionEvent::Closed { reason, .. } => panic!("closed: {reason}"),
            _ => {}
        }
    }
    assert_eq!(seen, n, "every stored event before EOSE");

    proxy.cut();
    let lost_at = Timestamp::now().as_secs();
    tokio::time::sleep(OUTAGE).await;
    let missed = relay.publish_missed(world, seed).await;
    let missed_ids: HashSet<String> = missed.iter().map(|e| e.id.to_hex()).collect();
    tokio::time::sleep(AFTER_MISSED).await;

    let restored = Instant::now();
    proxy.restore();
    let mut found = HashSet::new();
    let caught: CaughtUp = loop {
        match next(&mut rx, "CaughtUp").await {
            SubscriptionEvent::Event(event) => {
                let id = event.id.to_string();
                assert!(missed_ids.contains(&id), "delivered again: {id}");
                assert!(found.insert(id), "delivered twice");
            }
            SubscriptionEvent::CaughtUp(caught) => break caught,
            SubscriptionEvent::Closed { reason, .. } => panic!("closed: {reason}"),
            _ => {}
        }
    };
    let done = Instant::now();
    let tally = proxy.tally();
    let accepted = proxy
        .first_accept()
        .expect("the reconnect went through the proxy");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (trailing, trailing_frames) = proxy.tally().since(&tally);
    while let Ok(item) = rx.try_recv() {
        assert!(
            !matches!(item, SubscriptionEvent::Event(_)),
            "an event after CaughtUp: {item:?}"
        );
    }

    assert_eq!(
        found.len(),
        world.missed(),
        "every missed event, before CaughtUp"
    );
    let method = if case == Case::Since {
        CatchUpMethod::Since
    } else {
        CatchUpMethod::Negentropy
    };
    assert_eq!(caught.method, method, "{caught:?}");
    if method == CatchUpMethod::Negentropy {
        assert_eq!(caught.recovered, world.missed() as u64, "{caught:?}");
    }
    drop(client);
    Sample {
        up: tally.up,
        down: tally.down,
        upgrade: tally.upgrade(),
        ms: (done - accepted).as_secs_f64() * 1e3,
        ms_from_restore: (done - restored).as_secs_f64() * 1e3,
        missed_json: json_len(&missed),
        corpus_json: 0,
        recovered: caught.recovered,
        window_s: Some(lost_at.saturating_sub(caught.exact_since)),
        trailing,
        trailing_frames,
        frames: tally.frames,
        timeline: tally.timeline,
    }
}

async fn nostr_sdk_sync(
    world: World,
    relay: &TestRelay,
    proxy: &Proxy,
    corpus: Vec<Event>,
    seed: u64,
) -> Sample {
    let database = MemoryDatabase::with_opts(MemoryDatabaseOptions {
        events: true,
        max_events: Some(corpus.len() + 2 * MISSED),
    });
    for event in &corpus {
        database.save_event(event).await.expect("preload");
    }
    drop(corpus);
    let client = nostr_sdk::Client::builder().database(database).build();
    client.add_relay(proxy.url()).await.expect("adds relay");
    let connected = client.try_connect(Duration::from_secs(10)).await;
    assert!(
        connected.failed.is_empty(),
        "connects: {:?}",
        connected.failed
    );

    let missed = relay.publish_missed(world, seed).await;
    proxy.reset();
    let started = Instant::now();
    let filter = match world {
        World::Notes => nostr::Filter::new().kind(Kind::TextNote),
        World::Inbox => nostr::Filter::new()
            .kind(Kind::GiftWrap)
            .pubkey(inbox_user().public_key()),
    };
    let output = client
        .sync(filter, &nostr_sdk::SyncOptions::default())
        .await
        .expect("syncs");
    let done = Instant::now();
    let tally = proxy.tally();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (trailing, trailing_frames) = proxy.tally().since(&tally);
    let expected: HashSet<_> = missed.iter().map(|e| e.id).collect();
    assert_eq!(output.val.received, expected, "{output:?}");
    drop(client);
    let ms = (done - started).as_secs_f64() * 1e3;
    Sample {
        up: tally.up,
        down: tally.down,
        upgrade: tally.upgrade(),
        ms,
        ms_from_restore: ms,
        missed_json: json_len(&missed),
        corpus_json: 0,
        recovered: output.val.received.len() as u64,
        window_s: None,
        trailing,
        trailing_frames,
        frames: tally.frames,
        timeline: tally.timeline,
    }
}

fn json_len(events: &[Event]) -> u64 {
    events.iter().map(|e| e.as_json().len() as u64).sum()
}

/// A stream's items on an unbounded channel, so the driver's channel never fills.
fn forward<S>(mut stream: S) -> mpsc::UnboundedReceiver<S::Item>
where
    S: Stream + Unpin + Send + 'static,
    S::Item: Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    rx
}

async fn next<I>(rx: &mut mpsc::UnboundedReceiver<I>, what: &str) -> I {
    match timeout(WAIT, rx.recv()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("stream ended before {what}"),
        Err(_) => panic!("no {what} within {WAIT:?}"),
    }
}

/// nostr-relay-builder on its own runtime, its memory database preloaded.
struct TestRelay {
    addr: SocketAddr,
    database: Arc<MemoryDatabase>,
    handle: Handle,
    // Dropped inside the runtime: LocalRelay's shutdown reaches into it.
    relay: Option<LocalRelay>,
}

impl TestRelay {
    fn start(rt: &Runtime, corpus: &[Event], n: usize) -> TestRelay {
        let database = Arc::new(MemoryDatabase::with_opts(MemoryDatabaseOptions {
            events: true,
            max_events: Some(corpus.len() + 16 * MISSED),
        }));
        let (relay, url) = rt.block_on(async {
            for event in corpus {
                database.save_event(event).await.expect("preload");
            }
            // It picks a free port and binds it later; another socket may take it between.
            let mut attempt = 0;
            loop {
                let builder = RelayBuilder::default()
                    .addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
                    .database(Arc::clone(&database))
                    .max_filter_limit(2 * n + 1_000);
                let relay = LocalRelay::new(builder);
                match relay.run().await {
                    Ok(()) => {
                        let url = relay.url().await.to_string();
                        break (relay, url);
                    }
                    Err(error) if attempt < 5 => {
                        eprintln!("relay did not start ({error}); again");
                        attempt += 1;
                    }
                    Err(error) => panic!("relay did not start: {error}"),
                }
            }
        });
        let addr = url
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .parse()
            .expect("ws://ip:port");
        TestRelay {
            addr,
            database,
            handle: rt.handle().clone(),
            relay: Some(relay),
        }
    }

    /// Store the world's missed events in the relay's database: new notes dated now, or
    /// wraps dated at random up to two days back; returns them.
    async fn publish_missed(&self, world: World, seed: u64) -> Vec<Event> {
        let now = Timestamp::now().as_secs();
        let missed = match world {
            World::Notes => e2e::realistic_notes_dated(MISSED, seed + 1_000_000, |_, _| now),
            World::Inbox => wraps_dated(INBOX_MISSED, seed + 1_000_000, |_, r| {
                now - 60 - r % (TWO_DAYS - 60)
            }),
        };
        let database = Arc::clone(&self.database);
        let events = missed.clone();
        self.handle
            .spawn(async move {
                for event in &events {
                    let status = database.save_event(event).await.expect("stored");
                    assert!(status.is_success(), "{status:?}");
                }
            })
            .await
            .expect("stores");
        missed
    }
}

impl Drop for TestRelay {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.take() {
            let _guard = self.handle.enter();
            relay.shutdown();
        }
    }
}

/// A TCP proxy on 127.0.0.1 that counts the bytes it forwards, by direction and by
/// WebSocket message type, and can cut every connection and refuse new ones.
struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

struct Shared {
    upstream: SocketAddr,
    refuse: AtomicBool,
    pumps: Mutex<Vec<AbortHandle>>,
    first_accept: Mutex<Option<Instant>>,
    tally: Mutex<Tally>,
}

#[derive(Clone, Debug, Default)]
struct Tally {
    up: u64,
    down: u64,
    frames: FrameCounts,
    /// When (since the tally was zeroed), runs of frames of one direction and type.
    timeline: Vec<Run>,
    zeroed: Option<Instant>,
}

#[derive(Clone, Debug)]
struct Run {
    first_ms: f64,
    last_ms: f64,
    dir: &'static str,
    kind: String,
    count: u64,
    bytes: u64,
}

/// Runs kept per tally (later frames are counted, not placed on the timeline).
const TIMELINE: usize = 1_024;

impl Tally {
    fn record(&mut self, dir: &'static str, kind: String, bytes: u64) {
        let ms = self
            .zeroed
            .get_or_insert_with(Instant::now)
            .elapsed()
            .as_secs_f64()
            * 1e3;
        let full = self.timeline.len() >= TIMELINE;
        match self.timeline.last_mut() {
            Some(run) if run.dir == dir && run.kind == kind && !full => {
                run.last_ms = ms;
                run.count += 1;
                run.bytes += bytes;
            }
            _ if !full => self.timeline.push(Run {
                first_ms: ms,
                last_ms: ms,
                dir,
                kind: kind.clone(),
                count: 1,
                bytes,
            }),
            _ => {}
        }
        let entry = self.frames.entry((dir, kind)).or_default();
        entry.0 += 1;
        entry.1 += bytes;
    }
}

impl Tally {
    fn total(&self) -> u64 {
        self.up + self.down
    }

    /// Bytes and frames since `before`.
    fn since(&self, before: &Tally) -> (u64, FrameCounts) {
        let mut frames = self.frames.clone();
        for (key, (count, bytes)) in &before.frames {
            if let Some(entry) = frames.get_mut(key) {
                entry.0 -= count;
                entry.1 -= bytes;
            }
        }
        frames.retain(|_, (count, _)| *count > 0);
        (self.total() - before.total(), frames)
    }

    fn upgrade(&self) -> u64 {
        self.frames
            .iter()
            .filter(|((_, kind), _)| kind.starts_with("HTTP"))
            .map(|(_, (_, bytes))| bytes)
            .sum()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Proxy {
    fn start(rt: &Runtime, upstream: SocketAddr) -> Proxy {
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream,
            refuse: AtomicBool::new(false),
            pumps: Mutex::new(Vec::new()),
            first_accept: Mutex::new(None),
            tally: Mutex::new(Tally::default()),
        });
        let accept = rt
            .spawn(accept_loop(listener, Arc::clone(&shared)))
            .abort_handle();
        Proxy {
            addr,
            shared,
            accept,
        }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Sever every connection and refuse new ones.
    fn cut(&self) {
        self.shared.refuse.store(true, Ordering::SeqCst);
        for pump in lock(&self.shared.pumps).drain(..) {
            pump.abort();
        }
    }

    /// Zero the counters and let connections through again.
    fn restore(&self) {
        self.reset();
        self.shared.refuse.store(false, Ordering::SeqCst);
    }

    /// Zero the counters and forget the first accept.
    fn reset(&self) {
        *lock(&self.shared.tally) = Tally {
            zeroed: Some(Instant::now()),
            ..Tally::default()
        };
        *lock(&self.shared.first_accept) = None;
    }

    fn tally(&self) -> Tally {
        lock(&self.shared.tally).clone()
    }

    fn first_accept(&self) -> Option<Instant> {
        *lock(&self.shared.first_accept)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if shared.refuse.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        lock(&shared.first_accept).get_or_insert_with(Instant::now);
        tokio::spawn(connection(client, Arc::clone(&shared)));
    }
}

async fn connection(client: TcpStream, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(pump(client_read, server_write, Arc::clone(&shared), "up"));
    let down = tokio::spawn(pump(server_read, client_write, Arc::clone(&shared), "down"));
    let mut pumps = lock(&shared.pumps);
    pumps.push(up.abort_handle());
    pumps.push(down.abort_handle());
}

async fn pump<R, W>(mut from: R, mut to: W, shared: Arc<Shared>, dir: &'static str)
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let mut buf = vec![0u8; 64 * 1024];
    let mut frames = Frames::default();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // Counted before forwarding: whatever the client has read is in the tally.
        {
            let mut tally = lock(&shared.tally);
            if dir == "up" {
                tally.up += n as u64;
            } else {
                tally.down += n as u64;
            }
            frames.feed(&buf[..n], &mut |kind, bytes| tally.record(dir, kind, bytes));
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Splits one direction of a connection into its HTTP head and WebSocket frames, and names
/// each text frame by its Nostr message type (`EVENT`, `NEG-MSG`, ...).
#[derive(Default)]
struct Frames {
    /// `None` until the HTTP head is complete; then whether it upgraded to WebSocket.
    websocket: Option<bool>,
    buf: Vec<u8>,
}

impl Frames {
    fn feed(&mut self, data: &[u8], record: &mut impl FnMut(String, u64)) {
        self.buf.extend_from_slice(data);
        match self.websocket {
            None => {
                let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    return;
                };
                let end = end + 4;
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let websocket = head.contains("upgrade: websocket");
                self.websocket = Some(websocket);
                record(
                    if websocket { "HTTP upgrade" } else { "HTTP" }.to_owned(),
                    end as u64,
                );
                self.buf.drain(..end);
                if !websocket {
                    return self.plain(record);
                }
            }
            Some(false) => return self.plain(record),
            Some(true) => {}
        }
        let mut at = 0;
        while let Some((kind, len)) = frame(&self.buf[at..]) {
            record(kind, len as u64);
            at += len;
        }
        self.buf.drain(..at);
    }

    fn plain(&mut self, record: &mut impl FnMut(String, u64)) {
        if !self.buf.is_empty() {
            record("HTTP".to_owned(), self.buf.len() as u64);
            self.buf.clear();
        }
    }
}

/// The first complete WebSocket frame in `b`: its kind and length (head included).
fn frame(b: &[u8]) -> Option<(String, usize)> {
    if b.len() < 2 {
        return None;
    }
    let opcode = b[0] & 0x0f;
    let (len, mut head) = match b[1] & 0x7f {
        126 => (u16::from_be_bytes([*b.get(2)?, *b.get(3)?]) as usize, 4),
        127 => (
            u64::from_be_bytes(b.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        len => (len as usize, 2),
    };
    let mask = if b[1] & 0x80 != 0 {
        let key: [u8; 4] = b.get(head..head + 4)?.try_into().ok()?;
        head += 4;
        key
    } else {
        [0; 4]
    };
    let payload = b.get(head..head + len)?;
    let kind = match opcode {
        0 => "continuation".to_owned(),
        1 => {
            let start: Vec<u8> = payload
                .iter()
                .take(24)
                .enumerate()
                .map(|(i, byte)| byte ^ mask[i % 4])
                .collect();
            let text = String::from_utf8_lossy(&start);
            text.split('"').nth(1).unwrap_or("text").to_owned()
        }
        2 => "binary".to_owned(),
        8 => "close".to_owned(),
        9 => "ping".to_owned(),
        10 => "pong".to_owned(),
        _ => "other".to_owned(),
    };
    Some((kind, head + len))
}

fn table(world: World, n: usize, rounds: usize, results: &[(Case, Vec<Sample>)]) -> String {
    let all = || results.iter().flat_map(|(_, s)| s);
    let missed = median(all().map(|s| s.missed_json as f64));
    let corpus = median(all().map(|s| s.corpus_json as f64));
    let mut out = format!(
        "{world:?}: {n} stored events ({corpus:.0} bytes of event JSON), {} missed ({missed:.0} bytes), \
         medians of {rounds} rounds\n\n\
         | catch-up | bytes up | bytes down | total | of which HTTP upgrade | x missed JSON | ms (accept to CaughtUp) | recovered | exact window |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        world.missed()
    );
    for (case, samples) in results {
        let med = |f: fn(&Sample) -> f64| median(samples.iter().map(f));
        let window = if samples.iter().any(|s| s.window_s.is_some()) {
            format!("{:.0} s", med(|s| s.window_s.unwrap_or_default() as f64))
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1}x | {:.1} | {:.0} | {} |",
            case.name(),
            med(|s| s.up as f64),
            med(|s| s.down as f64),
            med(|s| s.total() as f64),
            med(|s| s.upgrade as f64),
            med(Sample::ratio),
            med(|s| s.ms),
            med(|s| s.recovered as f64),
            window,
        );
    }
    out.push_str(
        "\nnostr-sdk: over an open connection, the `sync` call alone (no reconnect, no upgrade).\n\
         exact window: how far before the loss of the socket the catch-up is exact.",
    );
    out
}

/// The last round's frames, per case.
fn frames(results: &[(Case, Vec<Sample>)]) -> String {
    let mut out = String::from("frames in the last round (count x, bytes):\n");
    for (case, samples) in results {
        let Some(last) = samples.last() else { continue };
        let _ = writeln!(
            out,
            "  {} (then {} bytes within 200 ms after):",
            case.name(),
            last.trailing
        );
        for ((dir, kind), (count, bytes)) in &last.frames {
            let _ = writeln!(out, "    {dir:<4} {kind:<14} {count:>6}x {bytes:>10}");
        }
        for ((dir, kind), (count, bytes)) in &last.trailing_frames {
            let _ = writeln!(
                out,
                "    after: {dir:<4} {kind:<14} {count:>6}x {bytes:>10}"
            );
        }
        let _ = writeln!(out, "    timeline (ms since the proxy let connections through; nostr-sdk: since just before `sync`):");
        let runs = &last.timeline;
        for (i, run) in runs.iter().enumerate() {
            // Long timelines (the `since` pages): the first and last few.
            if runs.len() > 40 && (16..runs.len() - 8).contains(&i) {
                if i == 16 {
                    let _ = writeln!(out, "    ... {} more runs ...", runs.len() - 24);
                }
                continue;
            }
            let _ = writeln!(
                out,
                "    {:>8.1} .. {:>8.1}  {:<4} {:<14} {:>6}x {:>10}",
                run.first_ms, run.last_ms, run.dir, run.kind, run.count, run.bytes
            );
        }
    }
    out
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
