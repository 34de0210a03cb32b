//! Subscriptions by people in the pool (`RelayPool::subscribe_outbox`), against relay models
//! that apply `authors` and `#p` as deployed relays do: relay lists fetched from the
//! indexer, routes that follow a list update without losing what arrived meanwhile, an
//! inbox that does not leak another user's wraps, a follow feed cut to the relay's frame
//! size, and a restart that routes straight back.

use std::collections::BTreeMap;
use std::time::Duration;

use tether_core::nostr::Carries;
use tether_core::pool::{Outcome, PoolCheckpoint, PoolEvent, RelayId, RelayPool, SubId};
use tether_core::Instant;
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::sim::UNIX_START;
use tether_testkit::{RelayModel, StoredEvent};

use tether_testkit::outbox::fixtures::{config, key, secs, url, INDEXER};

/// An event numbered `n` by `author`, dated `at` seconds after the Sim's wall-clock start.
fn note(n: u64, author: &str, at: u64, kind: u64, tags: &str) -> StoredEvent {
    let created_at = UNIX_START + at;
    StoredEvent {
        n,
        created_at,
        kind,
        json: format!(
            r#"{{"id":"{n:064x}","pubkey":"{author}","created_at":{created_at},"kind":{kind},"tags":[{tags}],"content":"","sig":"{n:0128x}"}}"#
        ),
    }
}

/// `author`'s relay list of `kind` (10002 or 10050) naming `relays`.
fn list(n: u64, author: &str, at: u64, kind: u64, relays: &[&str]) -> StoredEvent {
    let tag = if kind == 10002 { "r" } else { "relay" };
    let tags: Vec<String> = relays
        .iter()
        .map(|r| format!(r#"["{tag}","{}"]"#, url(r)))
        .collect();
    note(n, author, at, kind, &tags.join(","))
}

/// `a`'s list names r1, which holds one note of theirs; a feed of `a` from time zero.
fn one_author_on_r1(s: &mut PoolSim, a: &str) {
    world(
        s,
        &[
            ("index", vec![list(100, a, 0, 10002, &["r1"])]),
            ("r1", vec![note(1, a, 1, 1, "")]),
        ],
    );
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"]}}"#)),
    );
}

fn world(s: &mut PoolSim, relays: &[(&str, Vec<StoredEvent>)]) {
    for (name, events) in relays {
        let mut model = RelayModel::default();
        model.events = events.clone();
        let at = if *name == "index" {
            INDEXER.to_owned()
        } else {
            url(name)
        };
        s.world.insert(at, model);
    }
}

/// Event numbers delivered to `sub`, each with how many times.
fn delivered(s: &PoolSim, sub: SubId) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for n in s.heard(|e| match e {
        PoolEvent::Received { sub: q, id, .. } if *q == sub => {
            Some(u64::from_be_bytes(id.0[24..].try_into().expect("8 bytes")))
        }
        _ => None,
    }) {
        *out.entry(n).or_default() += 1;
    }
    out
}

fn relay_of(s: &PoolSim, name: &str) -> Option<RelayId> {
    s.held_at(&url(name))
}

fn reqs_to(s: &PoolSim, name: &str) -> Vec<String> {
    let Some(relay) = relay_of(s, name) else {
        return Vec::new();
    };
    s.sent
        .iter()
        .filter(|(_, r, c, _)| *r == relay && matches!(c, Carries::Req(_)))
        .map(|(_, _, _, text)| text.clone())
        .collect()
}

#[test]
fn a_list_update_moves_an_author_and_what_arrived_meanwhile_is_delivered_once() {
    let (a, b) = (key(1), key(2));
    let mut s = PoolSim::new(config(), 7);
    world(
        &mut s,
        &[
            (
                "index",
                vec![
                    list(100, &a, 0, 10002, &["r1"]),
                    list(101, &b, 0, 10002, &["r2"]),
                ],
            ),
            ("r1", vec![note(1, &a, 1, 1, ""), note(2, &a, 2, 1, "")]),
            ("r2", vec![note(3, &b, 3, 1, "")]),
            ("r3", vec![]),
        ],
    );
    // `limit: 1`: the first answer is the newest event only. A route move must not be cut
    // by it: the new relay is asked for the whole gap.
    let filter = format!(r#"{{"kinds":[1],"authors":["{a}","{b}"],"limit":1}}"#);
    s.at(secs(0), PoolAction::SubscribeOutbox(filter));
    // A moves to r3 at 20 s; two events of A's, dated 15 s and 18 s, reached only r3 before
    // the move.
    s.at(
        secs(16),
        PoolAction::StoreAt(url("r3"), note(4, &a, 15, 1, "")),
    );
    s.at(
        secs(17),
        PoolAction::StoreAt(url("r3"), note(6, &a, 18, 1, "")),
    );
    s.at(
        secs(20),
        PoolAction::StoreAt(INDEXER.into(), list(102, &a, 20, 10002, &["r3"])),
    );
    s.at(
        secs(30),
        PoolAction::StoreAt(url("r3"), note(5, &a, 30, 1, "")),
    );
    s.run_for(secs(40));
    let sub = SubId(1);
    assert_eq!(
        delivered(&s, sub),
        BTreeMap::from([(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1)]),
        "the move catches up ev#4 and ev#6, which `limit: 1` alone would cut to ev#6 (ev#1 \
         comes with A's catch-up on r1 when its REQ there changes: a window reaches back its \
         lookback past the first answer); {}",
        s.transcript()
    );
    let r3 = reqs_to(&s, "r3");
    assert_eq!(r3.len(), 1, "{r3:?}");
    // r3 never answered about A: it is asked the user's filter as it is (whole history,
    // `limit` included), beside the window from when A was last served live (no `limit`).
    assert!(r3[0].contains(r#""limit":1"#), "{r3:?}");
    assert!(!r3[0].contains(r#""limit":0"#), "{r3:?}");
    assert!(r3[0].contains(r#""since":"#), "{r3:?}");
    let routed = s.heard(|e| match e {
        PoolEvent::Routed { report, .. } => Some(report.clone()),
        _ => None,
    });
    let last = routed.last().expect("routing was reported");
    assert!(last.relays.iter().any(|(_, u)| *u == url("r3")), "{last:?}");
    assert!(last.uncovered.is_empty(), "{last:?}");
    assert_eq!(last.covered.len(), 2, "{last:?}");
}

#[test]
fn a_newcomer_on_a_relay_gets_a_req_of_its_own_and_the_others_are_not_asked_again() {
    let (a, b) = (key(1), key(2));
    let mut s = PoolSim::new(config(), 7);
    world(
        &mut s,
        &[
            ("index", vec![list(100, &a, 0, 10002, &["r1"])]),
            ("r1", vec![note(1, &a, 1, 1, ""), note(2, &b, 2, 1, "")]),
        ],
    );
    let filter = format!(r#"{{"kinds":[1],"authors":["{a}","{b}"]}}"#);
    s.at(secs(0), PoolAction::SubscribeOutbox(filter));
    // B publishes a list naming r1 as well.
    s.at(
        secs(10),
        PoolAction::StoreAt(INDEXER.into(), list(101, &b, 10, 10002, &["r1"])),
    );
    s.run_for(secs(20));
    assert_eq!(delivered(&s, SubId(1)), BTreeMap::from([(1, 1), (2, 1)]));
    let r1 = reqs_to(&s, "r1");
    let asking_a = r1.iter().filter(|r| r.contains(&a)).count();
    let asking_b = r1.iter().filter(|r| r.contains(&b)).count();
    assert_eq!((asking_a, asking_b), (1, 1), "{r1:?}");
}

#[test]
fn a_relay_that_gave_up_on_a_req_is_asked_again_after_its_backoff() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    one_author_on_r1(&mut s, &a);
    // Past the session's own bounded retries: the relay gives up on the first REQ.
    if let Some(r1) = s.world.get_mut(&url("r1")) {
        r1.scripted_closed = (0..6).map(|_| "rate-limited: retry in 2s".into()).collect();
    }
    s.run_for(secs(120));
    let closed = s.heard(|e| match e {
        PoolEvent::RelayClosed { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(closed.len(), 1, "{}", s.transcript());
    assert_eq!(
        delivered(&s, SubId(1)),
        BTreeMap::from([(1, 1)]),
        "{}",
        s.transcript()
    );
}

#[test]
fn routing_waits_while_the_app_is_suspended() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    one_author_on_r1(&mut s, &a);
    // The lists arrive within milliseconds; routing would run a second later.
    s.at(Duration::from_millis(200), PoolAction::Suspend);
    s.at(secs(30), PoolAction::Resume);
    s.run_for(secs(40));
    let r1 = relay_of(&s, "r1").expect("r1 is opened after the resume");
    let opened: Vec<Duration> = s
        .opens()
        .into_iter()
        .filter(|&(_, relay)| relay == r1.0)
        .map(|(ms, _)| Duration::from_millis(ms))
        .collect();
    assert!(!opened.is_empty() && opened[0] >= secs(30), "{opened:?}");
    assert!(opened[0] <= secs(32), "{opened:?}");
    assert_eq!(delivered(&s, SubId(1)), BTreeMap::from([(1, 1)]));
}

#[test]
fn an_inbox_is_routed_to_the_dm_relays_and_a_relay_ignoring_p_leaks_nothing() {
    let (me, other, sender) = (key(1), key(2), key(3));
    let mut s = PoolSim::new(config(), 7);
    world(
        &mut s,
        &[
            (
                "index",
                vec![
                    list(100, &me, 0, 10050, &["dm"]),
                    list(101, &me, 0, 10002, &["public"]),
                ],
            ),
            (
                "dm",
                vec![
                    note(1, &sender, 1, 1059, &format!(r#"["p","{me}"]"#)),
                    note(2, &sender, 2, 1059, &format!(r#"["p","{other}"]"#)),
                ],
            ),
            (
                "public",
                vec![note(3, &sender, 3, 1059, &format!(r#"["p","{me}"]"#))],
            ),
        ],
    );
    if let Some(dm) = s.world.get_mut(&url("dm")) {
        dm.ignores_tags = true;
    }
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r##"{{"kinds":[1059],"#p":["{me}"]}}"##)),
    );
    s.run_for(secs(10));
    assert_eq!(
        delivered(&s, SubId(1)),
        BTreeMap::from([(1, 1)]),
        "only my wrap, only from my DM relay: {}",
        s.transcript()
    );
    let dm = relay_of(&s, "dm").expect("the DM relay was opened");
    assert_eq!(s.pool.relay_stats(dm).map(|st| st.unmatched), Some(1));
    assert!(
        relay_of(&s, "public").is_none(),
        "a 10050 list wins over 10002"
    );
}

/// A feed of `n` authors whose lists all name relay `name`, which holds one note of the
/// last one's: subscribed at time zero.
fn one_relay_feed(n: u64, name: &str) -> (PoolSim, Vec<String>) {
    let authors: Vec<String> = (0..n).map(key).collect();
    let lists: Vec<StoredEvent> = authors
        .iter()
        .zip(10_000..)
        .map(|(a, i)| list(i, a, 0, 10002, &[name]))
        .collect();
    let mut s = PoolSim::new(config(), 7);
    let last = authors.last().cloned().unwrap_or_default();
    world(
        &mut s,
        &[("index", lists), (name, vec![note(1, &last, 5, 1, "")])],
    );
    let quoted: Vec<String> = authors.iter().map(|a| format!("\"{a}\"")).collect();
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(
            r#"{{"kinds":[1],"authors":[{}]}}"#,
            quoted.join(",")
        )),
    );
    (s, authors)
}

#[test]
fn a_follow_feed_of_2000_is_cut_to_64_kib_frames() {
    let (mut s, authors) = one_relay_feed(2_000, "big");
    s.run_for(secs(10));
    let reqs = reqs_to(&s, "big");
    assert_eq!(
        reqs.len(),
        5,
        "2 000 keys are 134 KB, and a relay session holds a REQ to twice its filters (its \
         catch-up after a reconnect asks each twice): five frames of 64 KiB"
    );
    assert!(
        reqs.iter().all(|r| r.len() <= 64 * 1024),
        "{:?}",
        reqs.iter().map(String::len).collect::<Vec<_>>()
    );
    for a in &authors {
        assert!(
            reqs.iter().any(|r| r.contains(a.as_str())),
            "{a} asked nowhere"
        );
    }
    assert_eq!(delivered(&s, SubId(1)), BTreeMap::from([(1, 1)]));
    // The indexer's lists frames are cut the same way.
    let index_reqs: Vec<&String> = s
        .sent
        .iter()
        .filter(|(_, _, c, t)| matches!(c, Carries::Req(_)) && t.contains("10002"))
        .map(|(_, _, _, t)| t)
        .collect();
    assert!(index_reqs.iter().all(|r| r.len() <= 64 * 1024));
}

#[test]
fn a_restart_routes_straight_back_and_catches_up_what_arrived_while_down() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    one_author_on_r1(&mut s, &a);
    s.at(secs(10), PoolAction::Kill);
    s.at(
        secs(15),
        PoolAction::StoreAt(url("r1"), note(2, &a, 14, 1, "")),
    );
    s.at(secs(20), PoolAction::Restore);
    s.run_for(secs(30));
    assert_eq!(
        delivered(&s, SubId(1)),
        BTreeMap::from([(1, 1), (2, 1)]),
        "{}",
        s.transcript()
    );
    // After the restart r1 is asked at once (from the checkpoint's router), not after the
    // indexer answered again.
    let r1 = relay_of(&s, "r1").expect("r1");
    let first_req_after = s
        .sent
        .iter()
        .filter(|(t, r, c, _)| {
            *r == r1 && matches!(c, Carries::Req(_)) && t.since_origin() >= secs(20)
        })
        .map(|(t, ..)| t.since_origin())
        .min()
        .expect("r1 asked after the restart");
    assert!(first_req_after < secs(21), "{first_req_after:?}");
    // The outcome once per run: the restored pool places the subscription afresh and says
    // when it is caught up there.
    let outcomes: Vec<(Duration, &Outcome)> = s
        .events
        .iter()
        .filter_map(|(t, e)| match e {
            PoolEvent::Complete { sub, outcome } if *sub == SubId(1) => {
                Some((t.since_origin(), outcome))
            }
            _ => None,
        })
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(
        outcomes[0].0 < secs(10) && outcomes[1].0 >= secs(20),
        "{outcomes:?}"
    );
    assert!(
        outcomes.iter().all(|(_, o)| **o == Outcome::Complete),
        "{outcomes:?}"
    );
}

#[test]
fn a_restart_while_events_await_their_verdict_restores_and_delivers_them_once() {
    let a = key(1);
    let mut config = config();
    config.verify = true;
    let mut s = PoolSim::new(config, 7);
    // Lists (ids numbered from 100) are verified at once, notes take 5 s: the kill at 3 s
    // finds the notes, sent at about 1.1 s by a relay routing opened, still held.
    s.verifier.delay = |req| {
        if req.id.0[31] >= 100 {
            Duration::from_millis(1)
        } else {
            secs(5)
        }
    };
    world(
        &mut s,
        &[
            ("index", vec![list(100, &a, 0, 10002, &["r1"])]),
            ("r1", vec![note(1, &a, 1, 1, ""), note(2, &a, 2, 1, "")]),
        ],
    );
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"]}}"#)),
    );
    s.at(secs(2), PoolAction::Kill);
    s.at(secs(3), PoolAction::Restore);
    s.run_for(secs(20));
    assert!(
        s.transcript()
            .contains("killed (checkpoint: 0 relays, 1 subscriptions)"),
        "{}",
        s.transcript()
    );
    assert_eq!(
        delivered(&s, SubId(1)),
        BTreeMap::from([(1, 1), (2, 1)]),
        "{}",
        s.transcript()
    );
}

#[test]
fn a_refused_subscription_leaves_no_one_followed() {
    use tether_core::nostr::Filter;
    use tether_core::pool::{PoolError, RelayPool};
    use tether_core::Instant;
    let mut config = config();
    // The pool's own list watch and one feed.
    config.max_subscriptions = 2;
    let mut pool = RelayPool::new(config, 7);
    let feed = |keys: &[String]| {
        let quoted: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        Filter::new(&format!(
            r#"{{"kinds":[1],"authors":[{}]}}"#,
            quoted.join(",")
        ))
        .unwrap()
    };
    let (a, b, c) = (key(1), key(2), key(3));
    pool.subscribe_outbox(Instant::ZERO, feed(&[a.clone(), b.clone()]))
        .unwrap();
    let refused = pool.subscribe_outbox(Instant::ZERO, feed(&[b.clone(), c.clone()]));
    assert!(matches!(
        refused,
        Err(PoolError::TooManySubscriptions { max: 2 })
    ));
    let followed: Vec<&str> = pool.router().unwrap().followed().collect();
    assert_eq!(
        followed,
        [a.as_str(), b.as_str()],
        "b stays (the first feed names b)"
    );
}

/// What the pool said of each publish: per relay URL (as the pool named it when the relay
/// answered), accepted or the reason, and the relays the one outcome counted.
fn publish_answers(s: &PoolSim) -> (BTreeMap<String, Option<String>>, Vec<usize>) {
    let mut by_url = BTreeMap::new();
    let mut done = Vec::new();
    for (at, e) in &s.events {
        let (relay, answer) = match e {
            PoolEvent::Published { relay, .. } => (*relay, None),
            PoolEvent::Rejected { relay, reason, .. } => (*relay, Some(reason.clone())),
            PoolEvent::PublishDone { outcome, .. } => {
                done.push(outcome.accepted.len() + outcome.rejected.len() + outcome.pending.len());
                continue;
            }
            _ => continue,
        };
        let url = s.routed_url_at(relay, *at).unwrap_or_default().to_owned();
        by_url.insert(url, answer);
    }
    (by_url, done)
}

#[test]
fn a_note_goes_to_my_write_relays_and_the_tagged_persons_read_relays_once_lists_are_in() {
    let (me, you) = (key(1), key(2));
    let mut s = PoolSim::new(config(), 7);
    world(
        &mut s,
        &[
            (
                "index",
                vec![
                    list(100, &me, 0, 10002, &["w1"]),
                    list(101, &you, 0, 10002, &["yours"]),
                    list(102, &you, 0, 10050, &["dm"]),
                ],
            ),
            ("w1", vec![]),
            ("yours", vec![]),
            ("dm", vec![]),
        ],
    );
    let reply = note(7, &me, 5, 1, &format!(r#"["p","{you}"]"#));
    s.at(secs(5), PoolAction::PublishOutbox(reply.json.clone()));
    s.run_for(secs(10));
    let (answers, done) = publish_answers(&s);
    assert_eq!(
        answers,
        BTreeMap::from([(url("w1"), None), (url("yours"), None)]),
        "{}",
        s.transcript()
    );
    assert_eq!(done, vec![2]);
    // The lists were looked up before it went out, not after LIST_WAIT.
    let first_event = s
        .sent
        .iter()
        .find(|(_, _, c, _)| matches!(c, Carries::Event(_)))
        .map(|(t, ..)| *t)
        .expect("an EVENT was sent");
    assert!(first_event < Instant::ZERO + secs(6), "{first_event:?}");
    // Once it is done, the relays only it wanted are let go: the indexer alone stays.
    let held: Vec<&str> = s
        .pool
        .relay_ids()
        .filter_map(|r| s.pool.relay_url(r))
        .collect();
    assert_eq!(held, [INDEXER], "{}", s.transcript());
}

#[test]
fn a_gift_wrap_goes_to_the_recipients_dm_relays_and_a_publish_nobody_routes_is_done_empty() {
    let (ephemeral, you, nobody) = (key(9), key(2), key(3));
    let mut s = PoolSim::new(config(), 7);
    world(
        &mut s,
        &[
            (
                "index",
                vec![
                    list(101, &you, 0, 10002, &["yours"]),
                    list(102, &you, 0, 10050, &["dm"]),
                ],
            ),
            ("yours", vec![]),
            ("dm", vec![]),
        ],
    );
    let wrap = note(7, &ephemeral, 5, 1059, &format!(r#"["p","{you}"]"#));
    s.at(secs(1), PoolAction::PublishOutbox(wrap.json.clone()));
    let lost = note(8, &nobody, 5, 1, "");
    s.at(secs(20), PoolAction::PublishOutbox(lost.json.clone()));
    s.run_for(secs(30));
    let (answers, done) = publish_answers(&s);
    assert_eq!(
        answers,
        BTreeMap::from([(url("dm"), None)]),
        "{}",
        s.transcript()
    );
    // The wrap on one relay; the note of someone with no list on none.
    assert_eq!(done, vec![1, 0]);
}

#[test]
fn a_frame_size_learned_after_the_reqs_went_out_recuts_them_on_the_same_relay() {
    const MAX: usize = 8 * 1024;
    let (mut s, authors) = one_relay_feed(600, "small");
    // The relay's NIP-11 document arrives after its REQs were cut to 64 KiB.
    s.at(
        secs(3),
        PoolAction::RelayInfoAt(
            url("small"),
            format!(r#"{{"limitation":{{"max_message_length":{MAX}}}}}"#),
        ),
    );
    s.run_for(secs(10));
    let relay = relay_of(&s, "small").expect("small is held");
    let after: Vec<&str> = s
        .sent
        .iter()
        .filter(|(t, r, c, _)| {
            *r == relay && matches!(c, Carries::Req(_)) && *t >= Instant::ZERO + secs(3)
        })
        .map(|(_, _, _, text)| text.as_str())
        .collect();
    assert!(after.len() >= 11, "{}", after.len());
    for a in &authors {
        let asked = after.iter().filter(|r| r.contains(a.as_str())).count();
        assert_eq!(asked, 1, "{a}: {}", s.transcript());
    }
    for text in &after {
        assert!(text.len() <= MAX, "{}", text.len());
    }
    // The same socket: no refusal reached the router or the application.
    let opens = s
        .routed_opens
        .iter()
        .filter(|(_, r, _)| *r == relay)
        .count();
    assert_eq!(opens, 1, "{}", s.transcript());
    let closed = s.heard(|e| matches!(e, PoolEvent::RelayClosed { .. }).then_some(()));
    assert!(closed.is_empty(), "{}", s.transcript());
    assert_eq!(delivered(&s, SubId(1)), BTreeMap::from([(1, 1)]));
}

/// The relay routing asks A on, with A's list naming r1 and r2 and a budget of the indexer
/// and one relay, after `hint` (a NIP-66 event, handed in before the feed).
fn routed_with_hint(hint: Option<String>) -> Vec<String> {
    let a = key(1);
    let mut config = config();
    // Room for the indexer and one relay: the hint decides which.
    config.router.redundancy = 1;
    config.router.max_relays = 2;
    config.router.probe_slots = 0;
    let mut s = PoolSim::new(config, 7);
    world(
        &mut s,
        &[
            ("index", vec![list(100, &a, 0, 10002, &["r1", "r2"])]),
            ("r1", vec![note(1, &a, 1, 1, "")]),
            ("r2", vec![note(1, &a, 1, 1, "")]),
        ],
    );
    // The router learns of r1 and r2 from A's list first; the hint comes after.
    s.pool
        .handle_relay_list(Instant::ZERO, &list(100, &a, 0, 10002, &["r1", "r2"]).json)
        .unwrap();
    if let Some(hint) = hint {
        s.pool.handle_liveness(Instant::ZERO, &hint).unwrap();
    }
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"]}}"#)),
    );
    s.run_for(secs(5));
    let routed = s.heard(|e| match e {
        PoolEvent::Routed { report, .. } => Some(report.clone()),
        _ => None,
    });
    let last = routed.last().expect("routed");
    last.relays
        .iter()
        .map(|(_, u)| u.clone())
        .filter(|u| u != INDEXER)
        .collect()
}

#[test]
fn a_stale_nip66_discovery_event_weighs_a_relay_down_and_bad_ones_are_refused() {
    let monitor = key(7);
    let discovery = |url: &str, at: u64| {
        note(
            200,
            &monitor,
            0,
            30166,
            &format!(r#"["d","{url}"],["n","clearnet"]"#),
        )
        .json
        .replace(
            &format!("\"created_at\":{}", UNIX_START),
            &format!("\"created_at\":{at}"),
        )
    };
    assert_eq!(routed_with_hint(None), [url("r1")]);
    // A monitor last saw r1 four days ago.
    let stale = discovery(&url("r1"), UNIX_START - 4 * 24 * 3600);
    assert_eq!(routed_with_hint(Some(stale)), [url("r2")]);
    // A fresh one says nothing against it.
    let fresh = discovery(&url("r1"), UNIX_START - 3600);
    assert_eq!(routed_with_hint(Some(fresh)), [url("r1")]);
    let mut s = PoolSim::new(config(), 7);
    assert!(s
        .pool
        .handle_liveness(Instant::ZERO, r#"{"kind":1}"#)
        .is_err());
    let no_d = note(3, &monitor, 0, 30166, "").json;
    assert!(s.pool.handle_liveness(Instant::ZERO, &no_d).is_err());
}

/// Routing's relays are in the checkpoint: after a restart each routed REQ goes again on
/// its relay as soon as the socket opens (before routing has run), under its old wire id,
/// and catches up from the checkpoint as any restored subscription does.
#[test]
fn a_restart_resumes_each_routed_req_on_its_saved_relay_with_its_catch_up() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    one_author_on_r1(&mut s, &a);
    s.at(secs(10), PoolAction::Kill);
    s.at(secs(20), PoolAction::Restore);
    s.run_for(secs(30));
    let r1 = relay_of(&s, "r1").expect("r1");
    let reqs: Vec<(Duration, &String)> = s
        .sent
        .iter()
        .filter(|(_, r, c, _)| *r == r1 && matches!(c, Carries::Req(_)))
        .map(|(t, _, _, text)| (t.since_origin(), text))
        .collect();
    let wire_id = |text: &str| text.split('"').nth(3).map(str::to_owned);
    let first = reqs.iter().find(|(t, _)| *t < secs(10)).expect("run 1 REQ");
    let resumed = reqs
        .iter()
        .find(|(t, _)| *t >= secs(20))
        .expect("resumed REQ");
    // The socket opens 20 ms after the restore; routing first runs a second later.
    assert_eq!(resumed.0, secs(20) + Duration::from_millis(20), "{reqs:?}");
    assert_eq!(wire_id(resumed.1), wire_id(first.1), "{reqs:?}");
    let caught_up = s.heard(|e| match e {
        PoolEvent::CaughtUp { sub, relay, .. } if *sub == SubId(1) && *relay == r1 => Some(()),
        _ => None,
    });
    assert_eq!(caught_up.len(), 1, "{}", s.transcript());
    assert_eq!(
        delivered(&s, SubId(1)),
        BTreeMap::from([(1, 1)]),
        "{}",
        s.transcript()
    );
}

/// A checkpoint is input: one whose routed REQ asks someone the subscription does not
/// follow, or whose relay routing opened is not routing's, is refused with the reason.
#[test]
fn a_checkpoint_with_a_routed_req_for_a_stranger_or_an_orphaned_routed_relay_is_refused() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    one_author_on_r1(&mut s, &a);
    s.run_for(secs(5));
    let json = String::from_utf8(s.pool.checkpoint().to_json()).expect("utf-8");
    let restore = |json: &str| {
        let saved = PoolCheckpoint::from_json(json.as_bytes()).expect("a pool checkpoint");
        RelayPool::restore(config(), 7, &saved, Instant::ZERO, UNIX_START).map(drop)
    };
    assert!(restore(&json).is_ok(), "{json}");
    let stranger = json.replace(
        &format!(r#"["{a}"],false]"#),
        &format!(r#"["{}"],false]"#, key(2)),
    );
    assert_ne!(stranger, json, "{json}");
    let refused = restore(&stranger)
        .expect_err("a stranger's REQ")
        .to_string();
    assert!(refused.contains("does not follow"), "{refused}");
    let orphan = json.replace(r#""opened":true,"routing":true"#, r#""opened":true"#);
    assert_ne!(orphan, json, "{json}");
    let refused = restore(&orphan).expect_err("an orphaned relay").to_string();
    assert!(
        refused.contains("opened by routing, which does not hold it"),
        "{refused}"
    );
}
