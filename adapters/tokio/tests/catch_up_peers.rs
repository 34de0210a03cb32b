//! Catch-up after an outage against real relays, with real keys and signatures: rust-nostr's
//! nostr-relay-builder in this process (it speaks NIP-77, so the catch-up is a negentropy
//! reconciliation plus `ids` fetches) and a nostr-rs-relay process (no NIP-77: the `since`
//! fallback), each behind the testkit's TCP proxy so the client's socket can be cut while the
//! relay keeps serving (and, for nostr-rs-relay, is killed and restarted on its database).
//!
//! During each outage notes are published straight to the relay (a second client, not
//! through the proxy): three fresh ones and one "late" one whose `created_at` is 60 s in the
//! past. 60 s, not 10 min: the `since` window starts at the loss of the socket minus the
//! lookback (120 s), so a note 10 min old is outside it by design; it is still delivered
//! when it arrives live, which the tests check too. NIP-77 reconciles the memory's whole
//! exact span (a note 30 min late is recovered), and a gift wrap's lookback is two days.
//!
//! No sleep decides an outcome: every wait is bounded, and "nothing twice" is checked up to
//! a sentinel note published last on each relay (one connection delivers in order, so
//! anything the relay sent before the sentinel has arrived by then).
//!
//! The nostr-rs-relay tests are reported as ignored, with the reason, when the binary is
//! missing (the testkit's `trials` harness), and fail when `TETHER_REQUIRE_PEERS=1`.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use nostr::prelude::*;
use tether_testkit::peers::{peer, Missing, NostrRsLimits, NostrRsRelay};
use tether_testkit::proxy::{FaultProxy, ProxyFaults};
use tether_tokio::tether_core::nostr::CatchUpMethod;
use tether_tokio::tether_driver::relay::CaughtUp;
use tether_tokio::{
    Filter, PoolConfig, PoolItem, RelayClient, RelayId, SessionEvent, SubscriptionEvent,
};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(30);

/// How long the client stays cut off (the only sleep: the outage itself).
const OUTAGE: Duration = Duration::from_millis(1_500);

/// The tests that start nostr-rs-relay run one at a time (two cores, another build beside).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn filter(json: &str) -> Vec<Filter> {
    vec![Filter::new(json).unwrap()]
}

fn now() -> u64 {
    Timestamp::now().as_secs()
}

/// A signed kind-1 note with `created_at` = `at`.
fn note_at(keys: &Keys, text: &str, at: u64) -> Event {
    EventBuilder::text_note(text)
        .custom_created_at(Timestamp::from(at))
        .sign_with_keys(keys)
        .unwrap()
}

fn hex(events: &[&Event]) -> Vec<String> {
    let mut ids: Vec<String> = events.iter().map(|e| e.id.to_hex()).collect();
    ids.sort();
    ids
}

/// Publish straight to the relay (not through the proxy) and wait for each OK.
async fn publish(url: &str, events: &[&Event]) {
    let client = RelayClient::connect(url, common::config(99)).unwrap();
    for event in events {
        let published = timeout(WAIT, client.publish(event.as_json()))
            .await
            .expect("an OK in time");
        assert!(
            published.is_ok(),
            "{url} refused {}: {published:?}",
            event.id
        );
    }
    let _ = client.disconnect().await;
}

/// `ws://host:port` -> the socket address behind it.
fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("ws://")
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

fn proxied(proxy: &FaultProxy) -> String {
    format!("ws://{}", proxy.addr())
}

/// Cut every client socket through `proxy` and refuse new ones until [`restore`].
fn cut(proxy: &FaultProxy) {
    proxy.set(ProxyFaults {
        refuse: true,
        ..ProxyFaults::default()
    });
    proxy.sever_all();
}

fn restore(proxy: &FaultProxy) {
    proxy.set(ProxyFaults::default());
}

/// A stream's items forwarded to an unbounded channel, so a bounded driver channel never
/// fills while the test looks elsewhere.
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

/// Wait for the next item matching `pred`, keeping the others in `seen`.
async fn wait_for<I: std::fmt::Debug>(
    rx: &mut mpsc::UnboundedReceiver<I>,
    what: &str,
    pred: impl Fn(&I) -> bool,
) -> I {
    let found = timeout(WAIT, async {
        while let Some(item) = rx.recv().await {
            if pred(&item) {
                return Some(item);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(item)) => item,
        Ok(None) => panic!("stream ended before {what}"),
        Err(_) => panic!("no {what} within {WAIT:?}"),
    }
}

/// What one subscription delivered: how often each id, and its catch-ups.
#[derive(Debug, Default)]
struct Heard {
    counts: BTreeMap<String, usize>,
    caught_up: Vec<CaughtUp>,
    eose: usize,
    other: Vec<SubscriptionEvent>,
}

impl Heard {
    fn has(&self, event: &Event) -> bool {
        self.counts.contains_key(&event.id.to_hex())
    }

    fn count(&self, event: &Event) -> usize {
        self.counts.get(&event.id.to_hex()).copied().unwrap_or(0)
    }

    fn ids(&self) -> Vec<String> {
        self.counts.keys().cloned().collect()
    }

    fn twice(&self) -> Vec<(&String, &usize)> {
        self.counts.iter().filter(|(_, n)| **n > 1).collect()
    }

    /// Read `rx` until `done` holds (checked after every item).
    async fn read_until(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<SubscriptionEvent>,
        what: &str,
        done: impl Fn(&Heard) -> bool,
    ) {
        let finished = timeout(WAIT, async {
            while !done(self) {
                match rx.recv().await {
                    Some(SubscriptionEvent::Event(event)) => {
                        *self.counts.entry(event.id.to_string()).or_default() += 1;
                    }
                    Some(SubscriptionEvent::Eose) => self.eose += 1,
                    Some(SubscriptionEvent::CaughtUp(c)) => self.caught_up.push(c),
                    Some(SubscriptionEvent::Closed { reason, .. }) => panic!("closed: {reason}"),
                    Some(other) => self.other.push(other),
                    None => panic!("subscription ended before {what}"),
                }
            }
        })
        .await;
        assert!(finished.is_ok(), "no {what} within {WAIT:?}: {self:?}");
    }
}

async fn nostr_relay_builder_catches_up_by_negentropy_every_note_once() {
    let (relay, relay_url) = common::start_builder().await;
    let proxy = FaultProxy::start(addr_of(&relay_url)).await.unwrap();
    let keys = Keys::generate();
    let t0 = now();

    // Before: one note an hour old (outside any catch-up window) and three recent ones.
    let old = note_at(&keys, "an hour ago", t0 - 3_600);
    let recent: Vec<Event> = (0..3)
        .map(|i| note_at(&keys, &format!("recent {i}"), t0 - 30 + 10 * i))
        .collect();
    let mut before: Vec<&Event> = vec![&old];
    before.extend(recent.iter());
    publish(&relay_url, &before).await;

    let client = RelayClient::connect(&proxied(&proxy), common::config(1)).unwrap();
    let mut session = forward(client.events().unwrap());
    let mut all = forward(client.subscribe(filter(r#"{"kinds":[1]}"#)).await.unwrap());
    let mut two = forward(
        client
            .subscribe(filter(r#"{"kinds":[1],"limit":2}"#))
            .await
            .unwrap(),
    );
    let mut heard_all = Heard::default();
    let mut heard_two = Heard::default();
    heard_all
        .read_until(&mut all, "first EOSE (all)", |h| h.eose == 1)
        .await;
    heard_two
        .read_until(&mut two, "first EOSE (limit 2)", |h| h.eose == 1)
        .await;
    assert_eq!(heard_all.ids(), hex(&before));
    assert_eq!(heard_two.ids(), hex(&[&recent[1], &recent[2]]));

    // The outage: the client's socket is cut and new ones refused; the relay keeps running
    // and takes three new notes and one 60 s late.
    cut(&proxy);
    wait_for(&mut session, "Disconnected", |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    // A few seconds in the past: `recovered` counts only what is older than the catch-up's
    // start (a note stamped after the reconnect counts as live).
    let t1 = now();
    let fresh: Vec<Event> = (0..3)
        .map(|i| note_at(&keys, &format!("during the outage {i}"), t1 - 3 + i))
        .collect();
    let late = note_at(&keys, "60 s late", t1 - 60);
    let mut missed: Vec<&Event> = fresh.iter().collect();
    missed.push(&late);
    publish(&relay_url, &missed).await;
    tokio::time::sleep(OUTAGE).await;
    restore(&proxy);

    // Back: each subscription catches up by NIP-77 and gets every missed note once.
    heard_all
        .read_until(&mut all, "CaughtUp (all)", |h| !h.caught_up.is_empty())
        .await;
    heard_two
        .read_until(&mut two, "CaughtUp (limit 2)", |h| !h.caught_up.is_empty())
        .await;

    // Live after the catch-up: a note 10 min old still arrives (the live half keeps the
    // user's filter); then a sentinel, after which nothing more can be in flight.
    let old_live = note_at(&keys, "10 min old, published live", now() - 600);
    let sentinel = note_at(&keys, "sentinel", now());
    publish(&relay_url, &[&old_live, &sentinel]).await;
    heard_all
        .read_until(&mut all, "the sentinel (all)", |h| h.has(&sentinel))
        .await;
    heard_two
        .read_until(&mut two, "the sentinel (limit 2)", |h| h.has(&sentinel))
        .await;

    // `{"kinds":[1]}`: everything once, the missed notes recovered by negentropy.
    let mut expected = before.clone();
    expected.extend(missed.iter().copied());
    expected.extend([&old_live, &sentinel]);
    assert_eq!(
        heard_all.twice(),
        Vec::<(&String, &usize)>::new(),
        "{heard_all:?}"
    );
    assert_eq!(heard_all.ids(), hex(&expected), "{heard_all:?}");
    assert_eq!(heard_all.caught_up.len(), 1, "{heard_all:?}");
    let c = heard_all.caught_up[0];
    assert_eq!(c.method, CatchUpMethod::Negentropy, "{c:?}");
    assert_eq!(c.recovered, 4, "the four missed notes: {c:?}");
    // The first answer was the relay's whole set for the filter (the hour-old note too):
    // the reconciliation covers everything the memory holds.
    assert_eq!(c.exact_since, 0, "{c:?}");

    // `{"kinds":[1],"limit":2}`: the limit bounded the first answer only. The catch-up is
    // exact from `exact_since` on, so the recent note the limit left out is delivered too
    // (once), the hour-old one is not.
    assert_eq!(
        heard_two.twice(),
        Vec::<(&String, &usize)>::new(),
        "{heard_two:?}"
    );
    let c2 = heard_two.caught_up[0];
    assert_eq!(heard_two.caught_up.len(), 1, "{heard_two:?}");
    assert_eq!(c2.method, CatchUpMethod::Negentropy, "{c2:?}");
    assert!(c2.exact_since <= recent[0].created_at.as_secs(), "{c2:?}");
    assert_eq!(heard_two.count(&old), 0, "{heard_two:?}");
    let mut expected_two: Vec<&Event> = recent.iter().collect();
    expected_two.extend(missed.iter().copied());
    expected_two.extend([&old_live, &sentinel]);
    assert_eq!(heard_two.ids(), hex(&expected_two), "{heard_two:?}");
    assert_eq!(
        c2.recovered, 5,
        "four missed notes and the one the limit left out: {c2:?}"
    );

    let _ = client.disconnect().await;
    relay.shutdown();
}

async fn nostr_rs_relay_killed_and_restarted_catches_up_by_since_every_note_once(
) -> Result<(), Missing> {
    // Its NIP-11 document lists no 77: NIP-77 is not tried at all.
    let session = nostr_rs_relay_outage(true).await?;
    assert!(
        !session
            .iter()
            .any(|e| matches!(e, SessionEvent::Notice { .. })),
        "{session:?}"
    );
    Ok(())
}

async fn nostr_rs_relay_without_its_nip11_refuses_neg_open_and_the_catch_up_falls_back_to_since(
) -> Result<(), Missing> {
    // Without the document NIP-77 is tried: nostr-rs-relay answers the NEG-OPEN with a
    // NOTICE (no NEG-ERR), and the same subscription falls back to `since`.
    let session = nostr_rs_relay_outage(false).await?;
    assert!(
        session
            .iter()
            .any(|e| matches!(e, SessionEvent::Notice { .. })),
        "the NEG-OPEN was answered by a NOTICE: {session:?}"
    );
    Ok(())
}

/// One outage of nostr-rs-relay (socket cut, process killed and restarted on its database,
/// four notes missed, one of them 60 s late), with or without fetching its NIP-11 document;
/// asserts every note once and a `since` catch-up, and returns the session's events.
async fn nostr_rs_relay_outage(fetch_info: bool) -> Result<Vec<SessionEvent>, Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = peer("nostr-rs-relay")?;
    let mut rs = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    let proxy = FaultProxy::start(addr_of(&rs.url())).await.unwrap();
    let keys = Keys::generate();
    let t0 = now();
    let before: Vec<Event> = (0..2)
        .map(|i| note_at(&keys, &format!("before {i}"), t0 - 20 + 10 * i))
        .collect();
    let before: Vec<&Event> = before.iter().collect();
    publish(&rs.url(), &before).await;

    let mut client_config = common::config(2);
    client_config.relay_info.fetch = fetch_info;
    let client = RelayClient::connect(&proxied(&proxy), client_config).unwrap();
    let mut session = forward(client.events().unwrap());
    let mut sub = forward(client.subscribe(filter(r#"{"kinds":[1]}"#)).await.unwrap());
    let mut heard = Heard::default();
    heard
        .read_until(&mut sub, "first EOSE", |h| h.eose == 1)
        .await;
    assert_eq!(heard.ids(), hex(&before));

    // The outage: socket cut, the relay killed (SIGKILL) and restarted on its database,
    // three new notes and one 60 s late published to it while the client is kept out.
    cut(&proxy);
    wait_for(&mut session, "Disconnected", |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    rs.kill();
    rs.restart().await.unwrap();
    let t1 = now();
    let fresh: Vec<Event> = (0..3)
        .map(|i| note_at(&keys, &format!("during the outage {i}"), t1 - 3 + i))
        .collect();
    let late = note_at(&keys, "60 s late", t1 - 60);
    let mut missed: Vec<&Event> = fresh.iter().collect();
    missed.push(&late);
    publish(&rs.url(), &missed).await;
    tokio::time::sleep(OUTAGE).await;
    restore(&proxy);

    heard
        .read_until(&mut sub, "CaughtUp", |h| !h.caught_up.is_empty())
        .await;
    let old_live = note_at(&keys, "10 min old, published live", now() - 600);
    let sentinel = note_at(&keys, "sentinel", now());
    publish(&rs.url(), &[&old_live, &sentinel]).await;
    heard
        .read_until(&mut sub, "the sentinel", |h| h.has(&sentinel))
        .await;

    let mut expected = before.clone();
    expected.extend(missed.iter().copied());
    expected.extend([&old_live, &sentinel]);
    assert_eq!(heard.twice(), Vec::<(&String, &usize)>::new(), "{heard:?}");
    assert_eq!(heard.ids(), hex(&expected), "{heard:?}");
    assert_eq!(heard.caught_up.len(), 1, "{heard:?}");
    let c = heard.caught_up[0];
    assert_eq!(c.method, CatchUpMethod::Since, "{c:?}");
    assert_eq!(c.recovered, 4, "the four missed notes: {c:?}");
    assert!(c.exact_since <= late.created_at.as_secs(), "{c:?}");

    let _ = client.disconnect().await;
    // Everything the session said up to the requested disconnect.
    let mut events = Vec::new();
    let all_said = timeout(WAIT, async {
        while let Some(event) = session.recv().await {
            let last = matches!(
                event,
                SessionEvent::Disconnected {
                    reconnect_in: None,
                    ..
                }
            );
            events.push(event);
            if last {
                return;
            }
        }
    })
    .await;
    assert!(all_said.is_ok(), "no requested disconnect: {events:?}");
    Ok(events)
}

async fn a_pool_of_both_catches_up_per_relay_every_note_once() -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = peer("nostr-rs-relay")?;
    let mut rs = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    let rs_proxy = FaultProxy::start(addr_of(&rs.url())).await.unwrap();
    let (builder, builder_url) = common::start_builder().await;
    let builder_proxy = FaultProxy::start(addr_of(&builder_url)).await.unwrap();
    let keys = Keys::generate();
    let t0 = now();

    // Before: one note on both, one on each.
    let both0 = note_at(&keys, "before, on both", t0 - 30);
    let rs0 = note_at(&keys, "before, nostr-rs-relay only", t0 - 20);
    let builder0 = note_at(&keys, "before, builder only", t0 - 10);
    publish(&rs.url(), &[&both0, &rs0]).await;
    publish(&builder_url, &[&both0, &builder0]).await;

    let mut pool_config = PoolConfig::default();
    pool_config.relay = common::config(3).relay;
    let pool = tether_tokio::pool(pool_config, common::config(3));
    let mut pool_events = forward(pool.events().unwrap());
    let rs_id = pool.add_relay(&proxied(&rs_proxy)).await.unwrap();
    let builder_id = pool.add_relay(&proxied(&builder_proxy)).await.unwrap();
    let filter = format!(
        r#"{{"kinds":[1],"authors":["{}"]}}"#,
        keys.public_key().to_hex()
    );
    let mut sub = forward(pool.subscribe(self::filter(&filter)).await.unwrap());

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut caught_up: BTreeMap<RelayId, Vec<CaughtUp>> = BTreeMap::new();
    let mut complete = false;
    let mut log: Vec<String> = Vec::new();
    macro_rules! read_until {
        ($what:expr, $done:expr) => {{
            let finished = timeout(WAIT, async {
                while !$done(&counts, &caught_up, complete) {
                    let item = sub.recv().await.expect("the pool subscription goes on");
                    log.push(format!("{item:?}"));
                    match item {
                        PoolItem::Event { id, .. } => {
                            *counts.entry(id.to_string()).or_default() += 1
                        }
                        PoolItem::CaughtUp {
                            relay,
                            caught_up: c,
                        } => caught_up.entry(relay).or_default().push(c),
                        PoolItem::Complete(_) => complete = true,
                        PoolItem::Ended { reasons } => panic!("ended: {reasons:?}"),
                        _ => {}
                    }
                }
            })
            .await;
            assert!(finished.is_ok(), "no {} within {WAIT:?}: {log:#?}", $what);
        }};
    }
    type Counts = BTreeMap<String, usize>;
    type Caught = BTreeMap<RelayId, Vec<CaughtUp>>;
    read_until!("Complete", |_: &Counts, _: &Caught, complete: bool| {
        complete
    });
    assert_eq!(
        counts.keys().cloned().collect::<Vec<_>>(),
        hex(&[&both0, &rs0, &builder0])
    );

    // The outage of both: sockets cut, nostr-rs-relay killed and restarted; new notes on
    // both, on each only, and one 60 s late on both.
    cut(&rs_proxy);
    cut(&builder_proxy);
    let mut down = Vec::new();
    while down.len() < 2 {
        let e = wait_for(&mut pool_events, "Disconnected", |e| {
            matches!(e.event, SessionEvent::Disconnected { .. })
        })
        .await;
        if !down.contains(&e.relay) {
            down.push(e.relay);
        }
    }
    rs.kill();
    rs.restart().await.unwrap();
    let t1 = now();
    let both1 = note_at(&keys, "during, on both", t1 - 3);
    let rs1 = note_at(&keys, "during, nostr-rs-relay only", t1 - 2);
    let builder1 = note_at(&keys, "during, builder only", t1 - 1);
    let late = note_at(&keys, "during, 60 s late, on both", t1 - 60);
    publish(&rs.url(), &[&both1, &rs1, &late]).await;
    publish(&builder_url, &[&both1, &builder1, &late]).await;
    tokio::time::sleep(OUTAGE).await;
    restore(&rs_proxy);
    restore(&builder_proxy);

    read_until!(
        "a CaughtUp from each relay",
        |_: &Counts, c: &Caught, _: bool| c.len() == 2
    );
    // A sentinel on each relay: after both, nothing either relay sent can be in flight.
    let rs_end = note_at(&keys, "sentinel, nostr-rs-relay", now());
    let builder_end = note_at(&keys, "sentinel, builder", now());
    publish(&rs.url(), &[&rs_end]).await;
    publish(&builder_url, &[&builder_end]).await;
    let (rs_end_id, builder_end_id) = (rs_end.id.to_hex(), builder_end.id.to_hex());
    read_until!("both sentinels", |c: &Counts, _: &Caught, _: bool| {
        c.contains_key(&rs_end_id) && c.contains_key(&builder_end_id)
    });

    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}\n{log:#?}");
    assert_eq!(
        counts.keys().cloned().collect::<Vec<_>>(),
        hex(&[
            &both0,
            &rs0,
            &builder0,
            &both1,
            &rs1,
            &builder1,
            &late,
            &rs_end,
            &builder_end
        ]),
        "{log:#?}"
    );
    let rs_caught = &caught_up[&rs_id];
    let builder_caught = &caught_up[&builder_id];
    assert_eq!(rs_caught.len(), 1, "{log:#?}");
    assert_eq!(builder_caught.len(), 1, "{log:#?}");
    assert_eq!(rs_caught[0].method, CatchUpMethod::Since, "{log:#?}");
    assert_eq!(
        builder_caught[0].method,
        CatchUpMethod::Negentropy,
        "{log:#?}"
    );
    for c in [rs_caught[0], builder_caught[0]] {
        assert!(c.exact_since <= late.created_at.as_secs(), "{c:?}");
    }

    pool.close().await.unwrap();
    builder.shutdown();
    Ok(())
}

/// A gift wrap (NIP-59, kind 1059) to `to`, signed by a throwaway key as NIP-59 signs them,
/// dated `at`.
fn wrap_at(to: &PublicKey, at: u64) -> Event {
    EventBuilder::new(Kind::GiftWrap, "sealed")
        .tag(Tag::public_key(*to))
        .custom_created_at(Timestamp::from(at))
        .sign_with_keys(&Keys::generate())
        .unwrap()
}

/// One late event across an outage: `stored` is read up to EOSE through `proxy` with
/// `filter`, the client is cut off while `late()` reaches the relay at `url`, then it is let
/// back and read until `CaughtUp` and a `sentinel()` published after it. Returns what the
/// subscription heard and the late event.
async fn one_late_event(
    url: &str,
    proxy: &FaultProxy,
    filter_json: &str,
    stored: &[&Event],
    late: impl FnOnce() -> Event,
    sentinel: impl FnOnce() -> Event,
) -> (Heard, Event) {
    publish(url, stored).await;
    let client = RelayClient::connect(&proxied(proxy), common::config(3)).unwrap();
    let mut session = forward(client.events().unwrap());
    let mut sub = forward(client.subscribe(filter(filter_json)).await.unwrap());
    let mut heard = Heard::default();
    heard
        .read_until(&mut sub, "first EOSE", |h| h.eose == 1)
        .await;
    assert_eq!(heard.ids(), hex(stored));
    cut(proxy);
    wait_for(&mut session, "Disconnected", |e| {
        matches!(e, SessionEvent::Disconnected { .. })
    })
    .await;
    let late = late();
    publish(url, &[&late]).await;
    tokio::time::sleep(OUTAGE).await;
    restore(proxy);
    heard
        .read_until(&mut sub, "CaughtUp", |h| !h.caught_up.is_empty())
        .await;
    let sentinel = sentinel();
    publish(url, &[&sentinel]).await;
    heard
        .read_until(&mut sub, "the sentinel", |h| h.has(&sentinel))
        .await;
    assert_eq!(heard.twice(), Vec::<(&String, &usize)>::new(), "{heard:?}");
    assert_eq!(heard.count(&late), 1, "{heard:?}");
    assert_eq!(heard.caught_up.len(), 1, "{heard:?}");
    let _ = client.disconnect().await;
    (heard, late)
}

async fn nostr_relay_builder_recovers_a_note_30_minutes_late_by_negentropy() {
    let (relay, relay_url) = common::start_builder().await;
    let proxy = FaultProxy::start(addr_of(&relay_url)).await.unwrap();
    let keys = Keys::generate();
    let t0 = now();
    // Fifty notes over the last hour (nostr-relay-builder takes 60 a minute per connection
    // by default): the first answer is the relay's whole set for the filter, so the memory
    // is exact over the hour. The late note is dated 30 min back: far past the 2-minute
    // lookback, inside what the memory holds.
    let hour: Vec<Event> = (0..50)
        .map(|i| note_at(&keys, &format!("hour {i}"), t0 - 3_600 + 70 * i))
        .collect();
    let hour: Vec<&Event> = hour.iter().collect();
    let (heard, _) = one_late_event(
        &relay_url,
        &proxy,
        r#"{"kinds":[1]}"#,
        &hour,
        || note_at(&keys, "30 min late", now() - 1_800),
        || note_at(&keys, "sentinel", now()),
    )
    .await;
    let c = heard.caught_up[0];
    assert_eq!(c.method, CatchUpMethod::Negentropy, "{c:?}");
    assert_eq!(c.recovered, 1, "{c:?}");
    assert_eq!(c.exact_since, 0, "the whole set was read: {c:?}");
    relay.shutdown();
}

async fn nostr_rs_relay_recovers_a_gift_wrap_dated_30_hours_back_by_since() -> Result<(), Missing> {
    let _one_at_a_time = SERIAL.lock().await;
    let binary = peer("nostr-rs-relay")?;
    let rs = NostrRsRelay::start(&binary, NostrRsLimits::default())
        .await
        .unwrap();
    let proxy = FaultProxy::start(addr_of(&rs.url())).await.unwrap();
    let me = Keys::generate().public_key();
    let t0 = now();
    let stored: Vec<Event> = (1..=5).map(|i| wrap_at(&me, t0 - i * 7 * 3_600)).collect();
    let stored: Vec<&Event> = stored.iter().collect();
    let inbox = format!(r##"{{"kinds":[1059],"#p":["{}"]}}"##, me.to_hex());
    let (heard, _) = one_late_event(
        &rs.url(),
        &proxy,
        &inbox,
        &stored,
        || wrap_at(&me, now() - 30 * 3_600),
        || wrap_at(&me, now()),
    )
    .await;
    let c = heard.caught_up[0];
    assert_eq!(c.method, CatchUpMethod::Since, "{c:?}");
    assert_eq!(c.recovered, 1, "{c:?}");
    assert!(
        c.exact_since <= t0 - 49 * 3_600 + 5,
        "the window reaches two days back: {c:?}"
    );
    Ok(())
}

tether_testkit::tokio_main!(
    nostr_relay_builder_catches_up_by_negentropy_every_note_once,
    nostr_rs_relay_killed_and_restarted_catches_up_by_since_every_note_once,
    nostr_rs_relay_without_its_nip11_refuses_neg_open_and_the_catch_up_falls_back_to_since,
    a_pool_of_both_catches_up_per_relay_every_note_once,
    nostr_relay_builder_recovers_a_note_30_minutes_late_by_negentropy,
    nostr_rs_relay_recovers_a_gift_wrap_dated_30_hours_back_by_since,
);
