//! Hostile relays in a pool, on the `PoolSim`: one flooding a million unique ids, one
//! sending EVENTs for subscriptions it was never sent, one that accepts and then answers
//! nothing. In each, the pool's memory stays at its documented bound, what it forgets is
//! what the documentation says, and the honest relays are unaffected. (The same id with
//! other bytes from a second relay is in `pool.rs`.)

use std::collections::BTreeMap;
use std::time::Duration;

use tether_core::nostr::message::EventId;
use tether_core::nostr::Event;
use tether_core::pool::{Missing, Outcome, PoolConfig, PoolEvent, RelayId, SubId};
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::{RelayModel, StoredEvent};

const SEED: u64 = 11;
const R0: RelayId = RelayId(0);
const R1: RelayId = RelayId(1);
const R2: RelayId = RelayId(2);
const R3: RelayId = RelayId(3);
const Q1: SubId = SubId(1);
const Q2: SubId = SubId(2);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A relay storing the events numbered `ns` (kind 1, one second apart).
fn relay_with(ns: impl IntoIterator<Item = u64>) -> Box<RelayModel> {
    let mut model = RelayModel::default();
    for n in ns {
        model.events.push(StoredEvent::new(n, 1_000_000 + n, 1));
    }
    Box::new(model)
}

fn kinds1() -> PoolAction {
    PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()])
}

fn id(n: u64) -> EventId {
    StoredEvent::new(n, 0, 1).id()
}

fn number(id: EventId) -> u64 {
    u64::from_be_bytes(id.0[24..].try_into().expect("8 bytes"))
}

/// How many times each event number reached `sub`, and from which relay first, among
/// the `Received` events the sim kept.
fn deliveries(s: &PoolSim, sub: SubId) -> BTreeMap<u64, Vec<RelayId>> {
    let mut out: BTreeMap<u64, Vec<RelayId>> = BTreeMap::new();
    for (q, relay, n) in s.heard(|e| match e {
        PoolEvent::Received { sub, relay, id, .. } => Some((*sub, *relay, number(*id))),
        _ => None,
    }) {
        if q == sub {
            out.entry(n).or_default().push(relay);
        }
    }
    out
}

/// The wire id of the first REQ sent to `relay`.
fn first_wire_id(s: &PoolSim, relay: RelayId) -> String {
    let reqs = s.reqs(relay);
    let text = reqs.first().expect("a REQ").1;
    text.split('"').nth(3).expect("a wire id").to_owned()
}

const FLOOD_FIRST: u64 = 1 << 40;
const FLOOD: u64 = 1_000_000;
const CAPACITY: usize = 10_000;

#[test]
fn one_relay_flooding_a_million_unique_ids_keeps_the_dedup_at_its_bound_and_the_others_unaffected()
{
    let mut s = PoolSim::new(PoolConfig::default(), SEED);
    assert_eq!(s.pool.config().dedup_capacity, CAPACITY);
    s.keep_transcript = false;
    s.forget_received_from.insert(R0);
    s.at(ms(0), PoolAction::AddRelay(relay_with([])));
    s.at(ms(0), PoolAction::AddRelay(relay_with(1..=50)));
    s.at(ms(0), PoolAction::AddRelay(relay_with(26..=75)));
    s.at(ms(100), kinds1());
    s.run_for(secs(1));
    let wire = first_wire_id(&s, R0);
    assert_eq!(s.pool.dedup(Q1).map(|d| d.ids), Some(75));

    // One relay floods, 10 000 frames per simulated millisecond.
    s.at(
        secs(1),
        PoolAction::Flood {
            relay: R0,
            wire,
            first: FLOOD_FIRST,
            count: FLOOD,
            per_ms: 10_000,
        },
    );
    s.run_for(secs(1));
    assert_eq!(
        s.received_from.get(&R0),
        Some(&FLOOD),
        "each unique id is new to the pool: it cannot tell junk from news"
    );
    let d = s.pool.dedup(Q1).expect("the subscription lives");
    assert_eq!(
        (d.ids, d.capacity, d.seen_on, d.seen_on_max),
        (CAPACITY, CAPACITY, CAPACITY, 8),
        "the bound holds: 10 000 ids, one seen_on entry each"
    );
    assert_eq!(
        d.forgotten,
        FLOOD + 75 - CAPACITY as u64,
        "every id but the newest 10 000 forgotten"
    );
    // Oldest first: the honest ids went before any flood id, the newest flood ids stay.
    assert_eq!(s.pool.seen_on(Q1, id(1)), None);
    assert_eq!(s.pool.seen_on(Q1, id(75)), None);
    let newest = FLOOD_FIRST + FLOOD - 1;
    assert_eq!(s.pool.seen_on(Q1, id(newest)), Some(&[R0][..]));
    let oldest_kept = FLOOD_FIRST + FLOOD - CAPACITY as u64;
    assert_eq!(s.pool.seen_on(Q1, id(oldest_kept)), Some(&[R0][..]));
    assert_eq!(s.pool.seen_on(Q1, id(oldest_kept - 1)), None);

    // The honest relays reconnect: their catch-up's overlap (NIP-77 refused as nostr-rs-relay
    // refuses it, then the `since` window) is dropped by each session's own memory, so
    // nothing they had sent is delivered again even though the pool forgot those ids.
    s.at(secs(3), PoolAction::DropSocket(R1));
    s.at(secs(3), PoolAction::DropSocket(R2));
    s.run_for(secs(10));
    let r1_reqs: Vec<&str> = s.reqs(R1).iter().map(|(_, t)| *t).collect();
    assert_eq!(
        r1_reqs,
        [
            r#"["REQ","0:1",{"kinds":[1]}]"#,
            r#"["REQ","0:2",{"kinds":[1],"limit":1}]"#,
            r#"["REQ","0:2",{"kinds":[1],"limit":0},{"kinds":[1],"limit":500,"since":1749999880}]"#
        ]
    );
    let honest = deliveries(&s, Q1);
    assert_eq!(
        honest.keys().copied().collect::<Vec<_>>(),
        (1..=75).collect::<Vec<_>>()
    );
    assert!(
        honest.values().all(|relays| relays.len() == 1),
        "each honest id once"
    );
    assert_eq!(
        s.pool.session(R1).map(|x| x.stats().duplicates),
        Some(1),
        "r1 re-sent its newest (the live half's one stored event while NIP-77 was tried), \
         its session dropped it; the `since` window (lookback before the drop) holds none \
         of its old events"
    );
    assert_eq!(s.pool.session(R2).map(|x| x.stats().duplicates), Some(1));
    assert_eq!(s.pool.relay_stats(R1).map(|x| x.duplicates), Some(0));
    assert_eq!(
        s.pool.relay_stats(R2).map(|x| x.duplicates),
        Some(25),
        "26..=50 arrived from r1 first"
    );
    assert_eq!(s.pool.relay_stats(R0).map(|x| x.conflicts), Some(0));

    // The documented rule, at its edge: a relay with no memory of its own (new to the
    // pool) sending ids the pool forgot delivers them once more, and once only.
    s.at(secs(14), PoolAction::AddRelay(relay_with(1..=75)));
    s.run_for(secs(4));
    let again = deliveries(&s, Q1);
    assert!(
        again
            .values()
            .all(|relays| relays[..] == [relays[0], R3][..]),
        "each forgotten honest id delivered a second time, by r3: {again:?}"
    );
    assert_eq!(again.len(), 75);
    assert_eq!(s.pool.seen_on(Q1, id(1)), Some(&[R3][..]));
    assert_eq!(
        s.pool.dedup(Q1).map(|d| (d.ids, d.forgotten)),
        Some((CAPACITY, FLOOD + 150 - CAPACITY as u64))
    );
    // Outcome and liveness of the subscription are untouched by the flood.
    assert_eq!(
        s.heard(|e| match e {
            PoolEvent::Complete { sub, outcome } => Some((*sub, outcome.clone())),
            _ => None,
        }),
        [(Q1, Outcome::Complete)]
    );
    assert_eq!(s.pool.serving(Q1), Some(vec![R0, R1, R2, R3]));
}

#[test]
fn events_for_subscriptions_a_relay_was_never_sent_are_dropped_and_counted() {
    let mut s = PoolSim::new(PoolConfig::default(), SEED);
    s.at(ms(0), PoolAction::AddRelay(relay_with([1])));
    s.at(ms(0), PoolAction::AddRelay(relay_with([2])));
    let only = |relay: RelayId| {
        PoolAction::SubscribeRouted(vec![(relay, vec![r#"{"kinds":[1]}"#.into()])])
    };
    s.at(ms(100), only(R0));
    s.at(ms(100), only(R1));
    let forged = |n: u64, wire: &str| {
        let e = StoredEvent::new(n, 1_000_000 + n, 1);
        format!(r#"["EVENT","{wire}",{}]"#, e.json)
    };
    // r0 was sent one REQ ("0:1"): a wire id it never saw, an attempt never made, q2's
    // own name, and r1's wire id (the same string: each session numbers its own).
    for (at, wire) in [(1_000, "1:1"), (1_001, "0:2"), (1_002, "q2"), (1_003, "x")] {
        s.at(ms(at), PoolAction::RelayFrame(R0, forged(900 + at, wire)));
    }
    s.run_for(secs(2));
    assert_eq!(
        deliveries(&s, Q1),
        BTreeMap::from([(1, vec![R0])]),
        "q1 has only r0's own event"
    );
    assert_eq!(deliveries(&s, Q2), BTreeMap::from([(2, vec![R1])]));
    let stats = s.pool.session(R0).expect("r0").stats();
    assert_eq!(
        (stats.unknown_subscription, stats.stale_attempt),
        (3, 1),
        "counted, not delivered"
    );
    assert_eq!(
        s.pool.session(R1).map(|x| x.stats().unknown_subscription),
        Some(0)
    );
    assert_eq!(s.pool.dedup(Q1).map(|d| d.ids), Some(1));
}

#[test]
fn a_relay_that_accepts_and_then_answers_nothing_costs_a_bounded_retry_and_is_named_missing() {
    let mut s = PoolSim::new(PoolConfig::default(), SEED);
    s.at(ms(0), PoolAction::AddRelay(relay_with([1, 2])));
    s.at(ms(0), PoolAction::AddRelay(relay_with([2, 3])));
    s.at(ms(0), PoolAction::AddRelay(relay_with([4])));
    s.at(ms(0), PoolAction::Mute(R2, true));
    s.at(ms(100), kinds1());
    s.at(
        secs(60),
        PoolAction::Store(R0, StoredEvent::new(5, 1_000_005, 1)),
    );
    s.run_for(secs(600));
    assert_eq!(
        deliveries(&s, Q1),
        BTreeMap::from([(1, vec![R0]), (2, vec![R0]), (3, vec![R1]), (5, vec![R0])])
    );
    let outcome = s
        .events
        .iter()
        .find_map(|(at, e)| match e {
            PoolEvent::Complete { outcome, .. } => Some((at.since_origin(), outcome.clone())),
            _ => None,
        })
        .expect("an outcome");
    assert_eq!(
        outcome,
        (
            ms(10_100),
            Outcome::Partial {
                missing: vec![(R2, Missing::NoEose)]
            }
        )
    );
    let silent = s.pool.session(R2).expect("r2").stats();
    let reqs = s.reqs(R2).len();
    let opens = s
        .transcript()
        .lines()
        .filter(|l| l.ends_with("tx  r2 Open"))
        .count();
    let timeouts = s
        .heard(|e| match e {
            PoolEvent::Relay {
                relay: R2,
                event: Event::EoseTimeout { .. },
                ..
            } => Some(()),
            _ => None,
        })
        .len();
    // Each connection to it costs two REQs (the first, and one retry when no EOSE came
    // within `eose_timeout`, 30 s), one ping, and a close when no pong came 20 s later;
    // then the socket was up past `stable_after`, so the reconnect is quick again: one
    // cycle every ~51 s, twelve in ten minutes. Linear in time, nothing piles up.
    assert_eq!(
        (reqs, opens, timeouts, silent.frames),
        (24, 12, 12, 0),
        "two REQs, one socket, one EOSE timeout per cycle; nothing ever read"
    );
    let open_times: Vec<u128> = s
        .transcript()
        .lines()
        .filter(|l| l.ends_with("tx  r2 Open"))
        .filter_map(|l| l.trim().split("ms").next()?.parse().ok())
        .collect();
    assert!(
        open_times.windows(2).all(|w| w[1] - w[0] >= 50_000),
        "at most one connection per 50 s: {open_times:?}"
    );
    assert_eq!(s.pool.serving(Q1), Some(vec![R0, R1, R2]));
    assert_eq!(
        s.pool.session(R0).map(|x| x.stats().reqs),
        Some(1),
        "r0 undisturbed"
    );
}

/// A relay id handed out again (routing drops and opens relays all the time) starts its
/// socket epochs after the removed relay's: input a host still had in flight for the old
/// socket is ignored as let go, never taken as the new relay's socket opening.
#[test]
fn a_reused_relay_id_ignores_the_old_sockets_input_in_flight() {
    use tether_core::nostr::Transmit;
    use tether_core::pool::RelayPool;
    use tether_core::Instant;
    let mut pool = RelayPool::new(PoolConfig::default(), 7);
    let at = Instant::ZERO;
    let first = pool.add_relay(at).unwrap();
    assert!(
        matches!(pool.poll_transmit(), Some((r, Transmit::Open { epoch, .. })) if r == first && epoch.0 == 1)
    );
    pool.remove_relay(at, first).unwrap();
    while pool.poll_transmit().is_some() || pool.poll_event().is_some() {}
    let again = pool.add_relay(at).unwrap();
    assert_eq!(again, first, "the id is reused");
    let Some((_, Transmit::Open { epoch, .. })) = pool.poll_transmit() else {
        panic!("the new relay connects");
    };
    assert_eq!(epoch.0, 2, "its first socket comes after the old relay's");
    // The old socket's open, still in flight: ignored, and the new relay is not open.
    pool.handle_open(at, again, tether_core::Epoch(1)).unwrap();
    while pool.poll_transmit().is_some() {}
    let heard: Vec<PoolEvent> = std::iter::from_fn(|| pool.poll_event()).collect();
    assert!(heard.is_empty(), "{heard:?}");
    pool.handle_open(at, again, epoch).unwrap();
    assert!(matches!(
        pool.poll_event(),
        Some(PoolEvent::Relay {
            event: Event::Connected,
            ..
        })
    ));
}
