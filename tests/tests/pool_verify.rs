//! Delivery after verification in the relay pool (`PoolConfig::verify`): each id is verified
//! once per subscription (after dedup), delivered in arrival order whatever order the
//! verdicts come back in, and a forged copy is never delivered, even when it races ahead
//! of the genuine one. PoolSim's verifier refuses copies containing `forged` and answers in
//! 1-4 ms by the id's last byte, so verdicts overtake each other.

use std::time::Duration;

use tether_core::nostr::message::EventId;
use tether_core::pool::{PoolConfig, PoolEvent, RelayId, SubId};
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::{AnswerOrder, RelayModel, StoredEvent};

const R0: RelayId = RelayId(0);
const R1: RelayId = RelayId(1);
const R2: RelayId = RelayId(2);
const Q1: SubId = SubId(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn genuine(n: u64) -> StoredEvent {
    StoredEvent::new(n, 1_000_000 + n, 1)
}

fn forged(n: u64) -> StoredEvent {
    let mut event = genuine(n);
    event.json = event.json.replace(&format!("event {n}"), "forged");
    event
}

/// A relay that answers in the order given: these tests script the order copies reach the
/// pool (the verification's arrival order), not a relay's storage order, which the pool's
/// property tests cover both ways.
fn relay(events: Vec<StoredEvent>) -> RelayModel {
    let mut model = RelayModel::default();
    model.events = events;
    model.order = AnswerOrder::OldestFirst;
    model
}

fn verifying(relays: Vec<RelayModel>) -> PoolSim {
    verifying_with(PoolConfig::default(), relays)
}

fn verifying_with(config: PoolConfig, relays: Vec<RelayModel>) -> PoolSim {
    let mut config = config;
    config.verify = true;
    let mut s = PoolSim::new(config, 7);
    for model in relays {
        s.at(ms(0), PoolAction::AddRelay(Box::new(model)));
    }
    s.at(
        ms(100),
        PoolAction::Subscribe(vec![r#"{"kinds":[1]}"#.into()]),
    );
    s
}

fn number(id: EventId) -> u64 {
    u64::from_be_bytes(id.0[24..].try_into().expect("8 bytes"))
}

/// What the application heard about `Q1`, in order: `(relay, n)` per event, `EOSE`,
/// `COMPLETE`.
fn heard(s: &PoolSim) -> Vec<String> {
    s.heard(|e| match e {
        PoolEvent::Received { relay, id, .. } => Some(format!("{relay} #{}", number(*id))),
        PoolEvent::Eose { relay, .. } => Some(format!("{relay} EOSE")),
        PoolEvent::Complete { outcome, .. } => Some(format!("COMPLETE {outcome:?}")),
        PoolEvent::Invalid {
            relay, id, reason, ..
        } => Some(format!("{relay} INVALID #{} {reason}", number(*id))),
        _ => None,
    })
}

fn verifications(s: &PoolSim) -> usize {
    s.transcript().matches(" Verify ").count()
}

#[test]
fn each_id_is_verified_once_and_delivered_in_arrival_order_behind_late_verdicts() {
    let mut s = verifying(vec![
        relay(vec![genuine(1), genuine(2), genuine(3)]),
        relay(vec![genuine(2), genuine(3), genuine(4)]),
        relay(vec![genuine(3), genuine(4), genuine(5)]),
    ]);
    s.run_for(Duration::from_secs(1));
    assert_eq!(verifications(&s), 5, "five unique ids, nine copies");
    assert_eq!(
        heard(&s),
        [
            "r0 #1",
            "r0 #2",
            "r0 #3",
            "r0 EOSE",
            "r1 #4",
            "r1 EOSE",
            "r2 #5",
            "r2 EOSE",
            "COMPLETE Complete"
        ]
    );
    assert_eq!(s.pool.relay_stats(R2).map(|st| st.duplicates), Some(2));
    assert_eq!(s.pool.unverified(), 0);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_forgery_raced_ahead_of_the_genuine_copy_is_dropped_and_the_genuine_one_delivered() {
    let mut s = verifying(vec![
        relay(vec![genuine(1), forged(3)]),
        relay(vec![genuine(1), genuine(2), genuine(3)]),
    ]);
    s.run_for(Duration::from_secs(1));
    assert_eq!(
        heard(&s),
        [
            "r0 #1",
            "r0 INVALID #3 bad signature",
            // The alternate takes the forgery's place in r0's order.
            "r1 #3",
            "r0 EOSE",
            "r1 #2",
            "r1 EOSE",
            "COMPLETE Complete"
        ]
    );
    // #1 once for both relays; #3 twice: the forgery, then the genuine alternate.
    assert_eq!(verifications(&s), 4);
    let stats = |r| s.pool.relay_stats(r).expect("relay");
    assert_eq!((stats(R0).invalid, stats(R0).conflicts), (1, 0));
    assert_eq!((stats(R1).invalid, stats(R1).duplicates), (0, 1));
    assert_eq!(s.pool.seen_on(Q1, genuine(3).id()), Some(&[R1][..]));
}

#[test]
fn once_verified_an_id_never_vouches_for_other_bytes() {
    let mut s = verifying(vec![relay(vec![genuine(1)]), relay(Vec::new())]);
    let other = genuine(1).json.replace("event 1", "event one");
    s.at(
        ms(500),
        PoolAction::RelayFrame(R1, format!(r#"["EVENT","0:1",{other}]"#)),
    );
    s.run_for(Duration::from_secs(1));
    assert_eq!(
        heard(&s),
        ["r0 #1", "r0 EOSE", "r1 EOSE", "COMPLETE Complete"]
    );
    assert_eq!(
        verifications(&s),
        1,
        "the conflicting copy is not even verified"
    );
    assert_eq!(s.pool.relay_stats(R1).map(|st| st.conflicts), Some(1));
}

#[test]
fn a_forged_copy_with_no_genuine_one_is_reported_and_forgotten() {
    let mut s = verifying(vec![relay(vec![forged(7)]), relay(Vec::new())]);
    // The genuine copy turns up later from another relay: verified afresh, delivered. (The
    // forger's own session remembers the id it sent, so its own re-send would be dropped.)
    s.at(
        ms(500),
        PoolAction::RelayFrame(R1, format!(r#"["EVENT","0:1",{}]"#, genuine(7).json)),
    );
    s.run_for(Duration::from_secs(1));
    assert_eq!(
        heard(&s),
        [
            "r0 INVALID #7 bad signature",
            "r0 EOSE",
            "r1 EOSE",
            "COMPLETE Complete",
            "r1 #7"
        ]
    );
    assert_eq!(s.pool.relay_stats(R0).map(|st| st.invalid), Some(1));
}

#[test]
fn a_dropped_subscription_hears_nothing_more_and_its_verdicts_are_ignored() {
    let mut s = verifying(vec![relay(vec![genuine(1), genuine(2)])]);
    // The REQ reaches the relay at 110 ms, the events the pool at 120 ms; verdicts take
    // 2-3 ms: drop the subscription in between.
    s.at(ms(121), PoolAction::Unsubscribe(Q1));
    s.run_for(Duration::from_secs(1));
    assert_eq!(heard(&s), Vec::<String>::new());
    assert_eq!(s.pool.unverified(), 0);
    assert_eq!(verifications(&s), 2);
}

#[test]
fn past_the_bound_new_events_are_dropped_counted_and_not_remembered() {
    let mut config = PoolConfig::default();
    config.max_unverified = 2;
    let events = (1..=5).map(genuine).collect();
    let mut s = verifying_with(config, vec![relay(events), relay(vec![genuine(5)])]);
    s.run_for(Duration::from_secs(1));
    // r0's frames come in one burst: two are taken, three dropped and counted. r1's copy of
    // #5 arrives in the same burst, also past the bound.
    assert_eq!(
        s.pool.relay_stats(R0).map(|st| st.unverified_dropped),
        Some(3)
    );
    assert_eq!(
        s.pool.relay_stats(R1).map(|st| st.unverified_dropped),
        Some(1)
    );
    assert_eq!(
        heard(&s),
        ["r0 #1", "r0 #2", "r0 EOSE", "r1 EOSE", "COMPLETE Complete"]
    );
    // Not remembered: a later copy of a dropped id is delivered.
    s.at(
        ms(1_500),
        PoolAction::RelayFrame(R1, format!(r#"["EVENT","0:1",{}]"#, genuine(4).json)),
    );
    s.run_for(Duration::from_secs(1));
    assert_eq!(heard(&s).last().map(String::as_str), Some("r1 #4"));
}

#[test]
fn a_different_copy_kept_while_the_first_is_verified_is_a_conflict_once_it_passes() {
    // Both copies arrive in the same burst: r1's forgery while r0's genuine copy waits.
    let mut s = verifying(vec![relay(vec![genuine(6)]), relay(vec![forged(6)])]);
    s.run_for(Duration::from_secs(1));
    assert_eq!(
        heard(&s),
        ["r0 #6", "r0 EOSE", "r1 EOSE", "COMPLETE Complete"]
    );
    assert_eq!(verifications(&s), 1, "the alternate is never verified");
    let stats = |r| s.pool.relay_stats(r).expect("relay");
    assert_eq!((stats(R1).conflicts, stats(R1).invalid), (1, 0));
    assert_eq!(stats(R0).conflicts, 0);
}

/// Found by the `pool` fuzz target (`fuzz/corpus/pool/regression-verify-dropped-copy-evicts`):
/// a copy that is never delivered — it fails verification, or arrives past
/// `max_unverified` — must not cost a delivered id its place in the dedup memory. It used
/// to: the id was remembered on arrival, evicting the oldest delivered id at the bound, and
/// forgotten again when dropped, so the evicted id was delivered a second time when a relay
/// re-sent it (PoolSim: "delivered twice to q1 while the pool remembers it").
#[test]
fn a_copy_that_is_never_delivered_does_not_evict_a_delivered_id() {
    // Copies on the wire; a second relay re-sends (a session drops its own repeats).
    let copy = |relay: RelayId, n: u64| {
        PoolAction::RelayFrame(relay, format!(r#"["EVENT","0:1",{}]"#, genuine(n).json))
    };
    // A forged copy of a new id, at the bound.
    let mut config = PoolConfig::default();
    config.dedup_capacity = 2;
    let mut s = verifying_with(
        config,
        vec![relay(vec![genuine(1), genuine(2)]), relay(Vec::new())],
    );
    s.at(
        ms(500),
        PoolAction::RelayFrame(R0, format!(r#"["EVENT","0:1",{}]"#, forged(3).json)),
    );
    s.at(ms(600), copy(R1, 1));
    s.run_for(ms(1_000));
    let delivered = s.heard(|e| match e {
        PoolEvent::Received { id, .. } => Some(number(*id)),
        _ => None,
    });
    assert_eq!(delivered, [1, 2], "1 is among the 2 newest delivered ids");
    assert_eq!(s.pool.dedup(Q1).map(|d| d.ids), Some(2));

    // A new id dropped past `max_unverified` (one copy under verification at a time).
    let mut config = PoolConfig::default();
    config.dedup_capacity = 2;
    config.max_unverified = 1;
    let mut s = verifying_with(config, vec![relay(Vec::new()), relay(Vec::new())]);
    for (at, n) in [(500, 1), (510, 2), (520, 3)] {
        s.at(ms(at), copy(R0, n));
    }
    // 4 arrives while 3 is under verification: dropped, not remembered.
    s.at(ms(520), copy(R0, 4));
    s.at(ms(600), copy(R1, 2));
    s.run_for(ms(1_000));
    let delivered = s.heard(|e| match e {
        PoolEvent::Received { id, .. } => Some(number(*id)),
        _ => None,
    });
    assert_eq!(
        delivered,
        [1, 2, 3],
        "2 is among the 2 newest delivered ids"
    );
    assert_eq!(
        s.pool.relay_stats(R0).map(|st| st.unverified_dropped),
        Some(1)
    );
}

/// Found by the `pool` fuzz target (`fuzz/corpus/pool/regression-verify-alternate-keeps-its-age`):
/// when a forged first copy fails and the alternate copy is verified in its place, the id
/// keeps its place in the dedup memory's age order — the place of its delivery. It used to
/// go to the back (forgotten and remembered anew), so at the bound the pool forgot a newer
/// delivered id first, and delivered it again when a relay re-sent it (PoolSim: "delivered
/// twice to q1 while the pool remembers it").
#[test]
fn an_alternate_copy_verified_in_place_of_a_forgery_keeps_the_ids_age() {
    let copy = |relay: RelayId, event: StoredEvent| {
        PoolAction::RelayFrame(relay, format!(r#"["EVENT","0:1",{}]"#, event.json))
    };
    let mut config = PoolConfig::default();
    config.dedup_capacity = 2;
    let mut s = verifying_with(config, vec![relay(Vec::new()), relay(Vec::new())]);
    // 1 forged then 2 from r0, the genuine 1 from r1 while the forgery is being verified.
    s.at(ms(500), copy(R0, forged(1)));
    s.at(ms(500), copy(R0, genuine(2)));
    s.at(ms(500), copy(R1, genuine(1)));
    // 3 pushes the oldest delivered id, 1, out; r1 re-sending 2 is a duplicate.
    s.at(ms(600), copy(R0, genuine(3)));
    s.at(ms(700), copy(R1, genuine(2)));
    s.run_for(ms(1_000));
    let delivered = s.heard(|e| match e {
        PoolEvent::Received { relay, id, .. } => Some((*relay, number(*id))),
        _ => None,
    });
    assert_eq!(delivered, [(R1, 1), (R0, 2), (R0, 3)]);
    assert_eq!(s.pool.seen_on(Q1, genuine(1).id()), None, "1 is the oldest");
    assert_eq!(s.pool.seen_on(Q1, genuine(2).id()), Some(&[R0, R1][..]));
}
