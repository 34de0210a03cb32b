//! Routing by people's rules through the whole pool (sessions, sockets, verification,
//! health): dead relays of both kinds bounded and out of the budget, a newer list obeyed at
//! once, and lists that steer nothing unless they are checked, current and of someone
//! followed.

use std::time::Duration;

use tether_core::pool::{PoolEvent, SubId};
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::sim::UNIX_START;
use tether_testkit::{RelayModel, StoredEvent};

use tether_testkit::outbox::fixtures::{config, key, secs, url, INDEXER};

/// Event `n` by `author` dated `at` (seconds after the Sim's wall-clock start, or absolute
/// when `at` is past it); `content` is what the Sim's verifier reads ("forged" fails).
fn event(n: u64, author: &str, at: u64, kind: u64, tags: &str, content: &str) -> StoredEvent {
    let created_at = if at >= UNIX_START {
        at
    } else {
        UNIX_START + at
    };
    StoredEvent {
        n,
        created_at,
        kind,
        json: format!(
            r#"{{"id":"{n:064x}","pubkey":"{author}","created_at":{created_at},"kind":{kind},"tags":[{tags}],"content":"{content}","sig":"{n:0128x}"}}"#
        ),
    }
}

fn note(n: u64, author: &str, at: u64) -> StoredEvent {
    event(n, author, at, 1, "", "")
}

fn list(n: u64, author: &str, at: u64, relays: &[&str], content: &str) -> StoredEvent {
    let tags: Vec<String> = relays
        .iter()
        .map(|r| format!(r#"["r","{}"]"#, url(r)))
        .collect();
    event(n, author, at, 10002, &tags.join(","), content)
}

fn relay(s: &mut PoolSim, at: &str, events: Vec<StoredEvent>, shape: fn(&mut RelayModel)) {
    let mut model = RelayModel::default();
    model.events = events;
    shape(&mut model);
    s.world.insert(at.to_owned(), model);
}

fn delivered(s: &PoolSim) -> Vec<(u64, u64)> {
    s.events
        .iter()
        .filter_map(|(at, e)| match e {
            PoolEvent::Received { sub, id, .. } if *sub == SubId(1) => Some((
                u64::from_be_bytes(id.0[24..].try_into().expect("8 bytes")),
                u64::try_from(at.since_origin().as_millis()).unwrap_or(u64::MAX),
            )),
            _ => None,
        })
        .collect()
}

/// What [`delivered`] says, after asserting it is exactly `events`, in order.
fn delivered_exactly(s: &PoolSim, events: &[u64]) -> Vec<(u64, u64)> {
    let got = delivered(s);
    let numbers: Vec<u64> = got.iter().map(|&(n, _)| n).collect();
    assert_eq!(numbers, events, "{}", s.transcript());
    got
}

/// Milliseconds at which the pool dialed `name`.
fn dials(s: &PoolSim, name: &str) -> Vec<u64> {
    let at = url(name);
    s.routed_opens
        .iter()
        .filter(|(_, _, u)| *u == at)
        .map(|(t, _, _)| u64::try_from(t.since_origin().as_millis()).unwrap_or(u64::MAX))
        .collect()
}

#[test]
fn dead_relays_of_both_kinds_are_dialed_at_most_3_times_in_25_s_and_leave_the_budget() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    let lists = vec![list(100, &a, 0, &["reset", "closes", "live"], "")];
    relay(&mut s, INDEXER, lists, |_| {});
    relay(&mut s, &url("reset"), Vec::new(), |m| {
        m.down = true;
        m.resets = true;
    });
    relay(&mut s, &url("closes"), Vec::new(), |m| {
        m.drop_after = Some(Duration::ZERO);
    });
    relay(&mut s, &url("live"), vec![note(1, &a, 1)], |_| {});
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"]}}"#)),
    );
    s.at(secs(30), PoolAction::StoreAt(url("live"), note(2, &a, 30)));
    s.run_for(secs(120));
    for dead in ["reset", "closes"] {
        let dials = dials(&s, dead);
        // Routed at 1 s; failed, then tried again after 2 s and 4 s of backoff; the fourth
        // try waits for the 25 s window to pass the first (the numbers docs/outbox.md cites).
        assert_eq!(dials, [1_040, 3_080, 7_100, 26_060, 42_080], "{dead}");
        for w in dials.windows(4) {
            assert!(w[3] - w[0] >= 25_000, "{dead}: 4 dials in 25 s: {dials:?}");
        }
    }
    let got = delivered_exactly(&s, &[1, 2]);
    let live = got[1].1;
    assert!(live < 30_100, "the live note at 30 s came at {live} ms");
}

#[test]
fn a_newer_list_is_obeyed_within_2_s_and_forged_future_and_strangers_lists_steer_nothing() {
    let (a, stranger) = (key(1), key(9));
    let mut s = PoolSim::new(config(), 7);
    relay(
        &mut s,
        INDEXER,
        vec![list(100, &a, 0, &["old"], "")],
        |_| {},
    );
    relay(&mut s, &url("old"), vec![note(1, &a, 1)], |_| {});
    for name in ["new", "evil1", "evil2", "evil3"] {
        relay(&mut s, &url(name), Vec::new(), |_| {});
    }
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"]}}"#)),
    );
    // A forged newer list, one dated ten years ahead, a stranger's: none may steer.
    for (at, event) in [
        (4, list(101, &a, 4, &["evil1"], "forged")),
        (
            5,
            list(102, &a, UNIX_START + 10 * 365 * 86_400, &["evil2"], ""),
        ),
        (6, list(103, &stranger, 6, &["evil3"], "")),
        // Then A's genuine move.
        (8, list(104, &a, 8, &["new"], "")),
    ] {
        s.at(secs(at), PoolAction::StoreAt(INDEXER.into(), event));
    }
    for (n, at) in [(2, 9), (3, 10), (4, 11)] {
        s.at(secs(at), PoolAction::StoreAt(url("new"), note(n, &a, at)));
    }
    s.run_for(secs(30));
    for evil in ["evil1", "evil2", "evil3"] {
        assert_eq!(
            dials(&s, evil),
            Vec::<u64>::new(),
            "{evil}: {}",
            s.transcript()
        );
    }
    let new = dials(&s, "new");
    assert!(
        new.first().is_some_and(|&t| t <= 10_000),
        "the move at 8 s dialed at {new:?}"
    );
    let got = delivered(&s);
    for (n, posted) in [(2, 9_000), (3, 10_000), (4, 11_000)] {
        let at = got.iter().find(|&&(m, _)| m == n).map(|&(_, t)| t);
        assert!(
            at.is_some_and(|t| t <= posted + 5_000),
            "note {n} posted at {posted} ms came at {at:?}: {}",
            s.transcript()
        );
    }
    assert_eq!(s.pool.router().map(|r| r.future_lists()), Some(1));
}

#[test]
fn an_auth_required_refusal_reaches_the_publish_outcome_at_once_without_a_signer() {
    let a = key(1);
    let mut s = PoolSim::new(config(), 7);
    let mut model = RelayModel::default();
    model.scripted_ok.push_back((
        false,
        "auth-required: we only accept events from members".into(),
    ));
    s.at(secs(0), PoolAction::AddRelay(Box::new(model)));
    s.at(secs(1), PoolAction::Publish(note(1, &a, 1).json));
    s.run_for(secs(60));
    let done = s
        .events
        .iter()
        .find_map(|(at, e)| match e {
            PoolEvent::PublishDone { outcome, .. } => Some((at.since_origin(), outcome.clone())),
            _ => None,
        })
        .expect("a publish_done");
    assert!(done.0 < secs(2), "answered at {:?}", done.0);
    assert_eq!(
        done.1
            .rejected
            .iter()
            .map(|(_, why)| why.as_str())
            .collect::<Vec<_>>(),
        ["auth-required: we only accept events from members"]
    );
    assert!(done.1.pending.is_empty());
}

#[test]
fn a_publish_relay_that_is_dead_is_dialed_under_the_bound_and_its_publish_ends_early() {
    let me = key(1);
    let mut s = PoolSim::new(config(), 7);
    relay(
        &mut s,
        INDEXER,
        vec![list(100, &me, 0, &["dead", "w1"], "")],
        |_| {},
    );
    relay(&mut s, &url("dead"), Vec::new(), |m| {
        m.down = true;
        m.resets = true;
    });
    relay(&mut s, &url("w1"), Vec::new(), |_| {});
    s.at(secs(1), PoolAction::PublishOutbox(note(7, &me, 1).json));
    s.run_for(secs(40));
    let (at, outcome) = s
        .events
        .iter()
        .find_map(|(at, e)| match e {
            PoolEvent::PublishDone { outcome, .. } => Some((at.since_origin(), outcome.clone())),
            _ => None,
        })
        .expect("publish_done");
    assert!(at < secs(10), "done at {at:?}, not at the 30 s deadline");
    assert_eq!(outcome.accepted.len(), 1, "{outcome:?}");
    assert_eq!(
        outcome
            .rejected
            .iter()
            .map(|(_, why)| why.as_str())
            .collect::<Vec<_>>(),
        ["relay unreachable: routing gave it up"]
    );
    let dials = dials(&s, "dead");
    assert!(!dials.is_empty() && dials.len() <= 3, "{dials:?}");
}

/// A restored plan is checked again: routing's relay that answered before the restart but
/// is silent after it (it accepts the socket and the REQ, and says nothing) gives up its
/// place within the answer deadline, and the author's other relay, which the budget left
/// out before, serves them.
#[test]
fn a_restored_relay_that_no_longer_answers_is_replaced_within_the_answer_deadline() {
    let a = key(1);
    let mut config = config();
    // The indexer and one relay: the author's two relays cannot both be asked.
    config.router.max_relays = 2;
    let mut s = PoolSim::new(config, 7);
    let lists = vec![list(100, &a, 0, &["first", "second"], "")];
    relay(&mut s, INDEXER, lists, |_| {});
    relay(&mut s, &url("first"), vec![note(1, &a, 1)], |_| {});
    relay(&mut s, &url("second"), vec![note(1, &a, 1)], |_| {});
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"]}}"#)),
    );
    s.run_for(secs(9));
    // Whichever the router chose is `held`; the other is left out.
    let (held, other) = match s.held_at(&url("first")) {
        Some(_) => ("first", "second"),
        None => ("second", "first"),
    };
    let relay = s.held_at(&url(held)).expect("one of the two is routing's");
    assert_eq!(s.held_at(&url(other)), None, "{}", s.transcript());
    s.at(secs(10), PoolAction::Kill);
    // While stopped the held relay stalls, and the author posts on both relays.
    s.at(secs(40), PoolAction::Relay(relay, |m| m.silent_reqs = true));
    s.at(secs(45), PoolAction::StoreAt(url("first"), note(2, &a, 45)));
    s.at(
        secs(45),
        PoolAction::StoreAt(url("second"), note(2, &a, 45)),
    );
    s.at(secs(50), PoolAction::Restore);
    s.run_for(secs(71));
    let got = delivered_exactly(&s, &[1, 2]);
    // The answer deadline (4 s) after the restored socket opened, then the other relay
    // dialed and answering: within 6 s of the restore.
    let at = got[1].1;
    assert!(
        (54_000..56_000).contains(&at),
        "the note on the other relay came at {at} ms\n{}",
        s.transcript()
    );
    // The restore resumed the held relay alone; the other was dialed once it gave up.
    let after: Vec<u64> = dials(&s, other)
        .into_iter()
        .filter(|&t| t >= 50_000)
        .collect();
    assert_eq!(after.first(), Some(&54_000), "{after:?}");
}
