//! End to end against nostr-sdk: one in-process relay (rust-nostr's nostr-relay-builder,
//! preloaded with signed notes), and a client that connects, subscribes and receives every
//! stored event up to EOSE. Each contender runs alone on a fresh current-thread tokio runtime
//! in a thread of its own, so that thread's CPU clock is the client's whole cost; the relay
//! runs on a separate one-worker runtime.
//!
//! nostr-sdk verifies every event's id and Schnorr signature before handing it over (it has
//! no switch to turn that off); tether hands over the relay's bytes, checked for shape. So
//! besides tether as shipped, [`Contender::TetherVerifying`] does the same verification in
//! the application (`nostr::Event::from_json` and `verify`) on the client's thread, and
//! [`Contender::TetherPoolVerifying`] lets tether's pool verify (tether-verify, once per id
//! after dedup, on worker threads) to compare like with like.
//!
//! [`measure_many`] runs the pool contenders and nostr-sdk against several relays at once.
//! A client's CPU is its thread's plus that of tether's verification workers.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use nostr::{Event, EventBuilder, JsonUtil, Keys, Kind, SecretKey, Tag, Timestamp};
use nostr_relay_builder::prelude::{MemoryDatabase, MemoryDatabaseOptions, NostrDatabase};
use nostr_relay_builder::{LocalRelay, RelayBuilder};
use tether_core::Rng;

/// Who receives the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    /// tether-tokio as shipped: the events' JSON, checked for shape, ids extracted.
    Tether,
    /// tether-tokio, with the application parsing and verifying each event like nostr-sdk.
    TetherVerifying,
    /// nostr-sdk's `Client` with default options, streaming the filter's events to EOSE.
    NostrSdk,
    /// tether-tokio's pool as shipped (no verification).
    TetherPool,
    /// tether-tokio's pool with its verifier on (`Config::verifier`).
    TetherPoolVerifying,
}

impl Contender {
    /// Every contender, in the order a run measures them.
    pub const ALL: [Contender; 5] = [
        Contender::Tether,
        Contender::TetherVerifying,
        Contender::TetherPool,
        Contender::TetherPoolVerifying,
        Contender::NostrSdk,
    ];

    /// The contenders that can span several relays.
    pub const MANY: [Contender; 3] = [
        Contender::TetherPool,
        Contender::TetherPoolVerifying,
        Contender::NostrSdk,
    ];

    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Contender::Tether => "tether-tokio",
            Contender::TetherVerifying => "tether-tokio + app verifies",
            Contender::NostrSdk => "nostr-sdk 0.44",
            Contender::TetherPool => "tether pool",
            Contender::TetherPoolVerifying => "tether pool + verify",
        }
    }
}

/// What one contender's run cost.
#[derive(Clone, Copy, Debug)]
pub struct Measurement {
    /// Events received before EOSE.
    pub received: usize,
    /// [`fingerprint`] of the received ids: equal to the corpus's when every event arrived once.
    pub fingerprint: u64,
    /// From creating the client to EOSE.
    pub wall: Duration,
    /// CPU time of the client's thread over the same span.
    pub client_cpu: Duration,
    /// CPU time of the whole process (relay included) over the same span.
    pub process_cpu: Duration,
}

impl Measurement {
    /// Received events per wall-clock second.
    pub fn events_per_sec(&self) -> f64 {
        self.received as f64 / self.wall.as_secs_f64()
    }

    /// Client CPU per received event.
    pub fn cpu_per_event(&self) -> Duration {
        self.client_cpu / self.received.max(1) as u32
    }
}

/// A relay on its own runtime, serving a preloaded database on 127.0.0.1.
pub struct Relay {
    url: String,
    // Dropped before the runtime: LocalRelay's drop reaches into it.
    relay: Option<LocalRelay>,
    runtime: tokio::runtime::Runtime,
}

impl Relay {
    /// Start a relay whose database holds `events`, answering filters of up to
    /// `events.len()` events.
    pub fn start(events: &[Event]) -> Relay {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("relay runtime");
        let (relay, url) = runtime.block_on(async {
            let database = Arc::new(MemoryDatabase::with_opts(MemoryDatabaseOptions {
                events: true,
                max_events: Some(events.len() + 1),
            }));
            for event in events {
                database.save_event(event).await.expect("preload");
            }
            let builder = RelayBuilder::default()
                .addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
                .database(database)
                .max_filter_limit(events.len());
            let relay = LocalRelay::new(builder);
            relay.run().await.expect("relay starts");
            let url = relay.url().await.to_string();
            (relay, url)
        });
        Relay {
            url,
            relay: Some(relay),
            runtime,
        }
    }

    /// The relay's `ws://` address.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.take() {
            let _guard = self.runtime.enter();
            relay.shutdown();
        }
    }
}

/// `n` signed kind-1 notes shaped like a public relay's: 200 authors, text from a few words
/// to a few paragraphs (with quotes, newlines, links and emoji that JSON must escape or
/// carry), replies with `e` and `p` tags, some hashtags, a month of timestamps. The same
/// seed gives the same content (signatures differ: signing draws fresh nonces).
pub fn realistic_notes(n: usize, seed: u64) -> Vec<Event> {
    realistic_notes_dated(n, seed, |i, draw| {
        1_760_000_000 + (i as u64 * 26) + (draw % 26)
    })
}

/// [`realistic_notes`] with the `i`-th note dated `date(i, draw)`, `draw` a random `u64` the
/// caller may use for jitter (or ignore).
pub fn realistic_notes_dated(n: usize, seed: u64, date: impl Fn(usize, u64) -> u64) -> Vec<Event> {
    let mut rng = Rng::new(seed);
    let authors: Vec<Keys> = (0..200).map(|_| keys(&mut rng)).collect();
    let mut notes: Vec<Event> = Vec::with_capacity(n);
    for i in 0..n {
        let author = &authors[pick(&mut rng, authors.len())];
        let mut tags = Vec::new();
        if !notes.is_empty() && rng.unit() < 0.4 {
            let parent = &notes[pick(&mut rng, notes.len())];
            tags.push(Tag::event(parent.id));
            tags.push(Tag::public_key(parent.pubkey));
        }
        if rng.unit() < 0.2 {
            tags.push(Tag::hashtag(WORDS[pick(&mut rng, WORDS.len())]));
        }
        let created_at = date(i, rng.next_u64());
        let note = EventBuilder::text_note(text(&mut rng))
            .tags(tags)
            .custom_created_at(Timestamp::from(created_at))
            .sign_with_keys(author)
            .expect("signing");
        notes.push(note);
    }
    notes
}

/// An order-independent digest of a set of ids: the wrapping sum of each id's first 8 bytes.
pub fn fingerprint<'a>(ids: impl IntoIterator<Item = &'a [u8; 32]>) -> u64 {
    ids.into_iter()
        .fold(0u64, |sum, id| sum.wrapping_add(id_head(id)))
}

/// Run `contender` against the relay at `url` until EOSE for a filter of all `expected`
/// kind-1 events, on a fresh thread and runtime, and measure it.
pub fn measure(contender: Contender, url: &str, expected: usize) -> Measurement {
    measure_many(contender, &[url.to_owned()], expected)
}

/// Run `contender` against every relay in `urls` at once, until it has `expected` unique
/// events (each relay's EOSE, or the pool's outcome), and measure it.
pub fn measure_many(contender: Contender, urls: &[String], expected: usize) -> Measurement {
    let urls = urls.to_vec();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        // The verification workers of an earlier contender may still be alive: only what
        // they do from here on is this one's.
        let (cpu0, process0, workers0) = (thread_cpu(), process_cpu(), verify_workers_cpu());
        let started = std::time::Instant::now();
        let (received, fingerprint, client) = runtime.block_on(receive(contender, &urls, expected));
        let wall = started.elapsed();
        let workers = workers_cpu_since(&workers0, &verify_workers_cpu());
        let (client_cpu, process_cpu) = (thread_cpu() - cpu0 + workers, process_cpu() - process0);
        // Closing connections and tasks is not part of receiving.
        drop(client);
        drop(runtime);
        Measurement {
            received,
            fingerprint,
            wall,
            client_cpu,
            process_cpu,
        }
    })
    .join()
    .expect("client thread")
}

/// The cost of the verification alone, with no network: parse each event's JSON with
/// `nostr` and check its id and signature, on this thread. Returns the thread's CPU time.
pub fn verify_floor(events: &[String]) -> Duration {
    let cpu0 = thread_cpu();
    for json in events {
        let event = Event::from_json(json).expect("corpus JSON");
        event.verify().expect("corpus is signed");
    }
    thread_cpu() - cpu0
}

/// Keeps a client alive until the clock has stopped.
type Kept = Box<dyn std::any::Any>;

async fn receive(contender: Contender, urls: &[String], expected: usize) -> (usize, u64, Kept) {
    match contender {
        Contender::Tether => receive_tether(&urls[0], expected, false).await,
        Contender::TetherVerifying => receive_tether(&urls[0], expected, true).await,
        Contender::NostrSdk => receive_nostr_sdk(urls, expected).await,
        Contender::TetherPool => receive_tether_pool(urls, expected, false).await,
        Contender::TetherPoolVerifying => receive_tether_pool(urls, expected, true).await,
    }
}

async fn receive_tether_pool(urls: &[String], expected: usize, verify: bool) -> (usize, u64, Kept) {
    use tether_tokio::tether_driver::verify::Verifier;
    use tether_tokio::{Config, Filter, PoolConfig, PoolItem};
    let mut config = Config::default();
    if verify {
        config.verifier = Some(Arc::new(Verifier::new()));
        // `TETHER_E2E_WORKERS` pins the verification threads (default: one per core).
        config.verify_workers = std::env::var("TETHER_E2E_WORKERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
    }
    let mut pool_config = PoolConfig::default();
    // Every id stays remembered: a second relay's copy may come 100 000 events later.
    pool_config.dedup_capacity = expected + 1;
    pool_config.eose_deadline = Duration::from_secs(600);
    let pool = tether_tokio::pool(pool_config, config);
    for url in urls {
        pool.add_relay(url).await.expect("tether adds relay");
    }
    let filter = Filter::new(&format!(r#"{{"kinds":[1],"limit":{expected}}}"#)).expect("filter");
    let mut sub = pool.subscribe(vec![filter]).await.expect("subscribe");
    let (mut received, mut sum) = (0usize, 0u64);
    while let Some(item) = sub.next().await {
        match item {
            PoolItem::Event { id, .. } => {
                received += 1;
                sum = sum.wrapping_add(id_head(&id.0));
            }
            PoolItem::Complete(_) => break,
            PoolItem::Invalid { reason, .. } => panic!("tether: invalid event: {reason}"),
            _ => {}
        }
    }
    (received, sum, Box::new((pool, sub)))
}

async fn receive_tether(url: &str, expected: usize, verify: bool) -> (usize, u64, Kept) {
    use tether_tokio::{Config, Filter, RelayClient, SubscriptionEvent};
    let client = RelayClient::connect(url, Config::default()).expect("tether connects");
    let filter = Filter::new(&format!(r#"{{"kinds":[1],"limit":{expected}}}"#)).expect("filter");
    let mut sub = client.subscribe(vec![filter]).await.expect("subscribe");
    let (mut received, mut sum) = (0usize, 0u64);
    while let Some(item) = sub.next().await {
        match item {
            SubscriptionEvent::Event(event) => {
                if verify {
                    let parsed = Event::from_json(&event.raw).expect("relay sent valid JSON");
                    parsed.verify().expect("relay sent signed events");
                }
                received += 1;
                sum = sum.wrapping_add(id_head(&event.id.0));
            }
            SubscriptionEvent::Eose => break,
            SubscriptionEvent::Closed { reason, .. } => panic!("tether: closed: {reason}"),
            _ => {}
        }
    }
    (received, sum, Box::new((client, sub)))
}

async fn receive_nostr_sdk(urls: &[String], expected: usize) -> (usize, u64, Kept) {
    let client = nostr_sdk::Client::default();
    for url in urls {
        client.add_relay(url).await.expect("nostr-sdk adds relay");
    }
    client.try_connect(Duration::from_secs(10)).await;
    let filter = nostr::Filter::new().kind(Kind::TextNote).limit(expected);
    let mut events = client
        .stream_events(filter, Duration::from_secs(600))
        .await
        .expect("nostr-sdk streams");
    let (mut received, mut sum) = (0usize, 0u64);
    while let Some(event) = events.next().await {
        received += 1;
        sum = sum.wrapping_add(id_head(event.id.as_bytes()));
    }
    (received, sum, Box::new(client))
}

fn id_head(id: &[u8; 32]) -> u64 {
    u64::from_le_bytes(id[..8].try_into().expect("8 bytes"))
}

fn keys(rng: &mut Rng) -> Keys {
    loop {
        let mut secret = [0u8; 32];
        for chunk in secret.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        // All but a 2^-128 sliver of 32-byte strings are valid secp256k1 secrets.
        if let Ok(secret) = SecretKey::from_slice(&secret) {
            return Keys::new(secret);
        }
    }
}

fn pick(rng: &mut Rng, len: usize) -> usize {
    (rng.next_u64() % len as u64) as usize
}

/// Short posts dominate a public relay's notes; some run to paragraphs.
fn text(rng: &mut Rng) -> String {
    let words = match rng.unit() {
        u if u < 0.55 => 3 + pick(rng, 20),
        u if u < 0.9 => 20 + pick(rng, 60),
        _ => 80 + pick(rng, 300),
    };
    let mut text = String::new();
    for w in 0..words {
        if w > 0 {
            text.push(if rng.unit() < 0.03 { '\n' } else { ' ' });
        }
        match rng.unit() {
            u if u < 0.02 => text.push_str("https://example.com/media/2f9a7c.jpg"),
            u if u < 0.04 => text.push_str("\"quoted\""),
            u if u < 0.06 => text.push_str("🤙⚡️"),
            _ => text.push_str(WORDS[pick(rng, WORDS.len())]),
        }
    }
    text
}

const WORDS: [&str; 24] = [
    "nostr",
    "relay",
    "zap",
    "gm",
    "bitcoin",
    "the",
    "of",
    "and",
    "a",
    "to",
    "is",
    "note",
    "client",
    "sats",
    "lightning",
    "coffee",
    "morning",
    "build",
    "open",
    "protocol",
    "keys",
    "freedom",
    "pura",
    "vida",
];

/// CPU time of the live `tether-verify-*` worker threads (Linux: `/proc/self/task`), in
/// clock ticks by thread id; a pool's workers start with it and stop after it.
fn verify_workers_cpu() -> std::collections::BTreeMap<String, u64> {
    let mut by_thread = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_thread;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("tether-verify") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        let field = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
        let ticks = field(14).unwrap_or(0) + field(15).unwrap_or(0);
        by_thread.insert(task.file_name().to_string_lossy().into_owned(), ticks);
    }
    by_thread
}

/// The workers' CPU between two [`verify_workers_cpu`] readings: each thread's growth, so a
/// worker of an earlier run that is still alive counts only for what it did meanwhile.
fn workers_cpu_since(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> Duration {
    let ticks_per_sec = 100; // USER_HZ, fixed at 100 on Linux's ABI
    let ticks: u64 = after
        .iter()
        .map(|(tid, &t)| t.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum();
    Duration::from_millis(ticks * 1000 / ticks_per_sec)
}

/// CPU time of this whole process so far.
pub fn process_cpu_now() -> Duration {
    process_cpu()
}

fn thread_cpu() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn process_cpu() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

#[allow(unsafe_code)]
fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({id})");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
