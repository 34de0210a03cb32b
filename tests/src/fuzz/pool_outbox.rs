//! The `pool_outbox` target: routing by people in a [`PoolSim`] world of relays by URL, an
//! indexer holding relay lists (stale, junk and hostile ones among them), and a script of
//! routed subscriptions, publishes by outbox, list moves, deaths, NIP-11 documents and the
//! application's lifecycle, decoded from the bytes. The pool's promises are checked after
//! every step (routing's included: never more relays than the budget, each held both ways)
//! and its outcomes at the end.

use std::time::Duration;

use arbitrary::{Result, Unstructured};
use tether_core::pool::{PoolConfig, SubId};
use tether_core::router::RouterConfig;
use tether_core::Instant;

use super::refusal;
use crate::pool_sim::{PoolAction, PoolSim};
use crate::relay_model::{LimitStyle, RelayModel, StoredEvent};
use crate::sim::UNIX_START;

/// Most operations decoded from one input.
pub const OUTBOX_MAX_OPS: usize = 40;
/// The scripted part of a run.
const MAX_SCRIPT: Duration = Duration::from_secs(90);
/// The indexer every world has.
const INDEXER: &str = "wss://index.example";
/// People in the world.
const PEOPLE: u64 = 5;
/// Content relays in the world (`wss://r0.example` ...).
const RELAYS: u64 = 5;

/// Decode a world and a script and run them. After every step the PoolSim checks each id
/// once per subscription, at most one outcome, no `PublishDone` twice, `poll_timeout` in the
/// future, and the pool's, routing's and every session's consistency; after the script it
/// runs past every deadline and asserts one outcome for every subscription not dropped and
/// every publish done.
///
/// # Panics
/// On any violation or panic in the pool.
pub fn pool_outbox(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((config, seed, world)) = outbox_world(&mut u) else {
        return;
    };
    let deadline = config.eose_deadline.max(config.publish_deadline);
    let mut s = PoolSim::new(config, seed);
    s.keep_transcript = false;
    s.quiet = true;
    for (url, model) in world {
        s.world.insert(url, model);
    }
    let mut t = Duration::ZERO;
    for _ in 0..OUTBOX_MAX_OPS {
        if u.is_empty() {
            break;
        }
        let Ok(step) = step(&mut u) else {
            break;
        };
        t += step;
        if t > MAX_SCRIPT {
            break;
        }
        let Ok(action) = op(&mut u, &s) else {
            break;
        };
        s.at(t, action);
    }
    // Past every outcome and publish deadline, and the lists' wait.
    let tail = deadline + Duration::from_secs(5);
    let until = (Instant::ZERO + t + tail).saturating_duration_since(s.now());
    s.run_until_settled(until);
    for sub in &s.subscribed {
        assert!(
            s.has_outcome(*sub) || s.unsubscribed.contains(sub),
            "{sub} was never dropped and has no outcome at {:?}",
            s.now()
        );
    }
    assert_eq!(
        s.publishes_pending(),
        0,
        "a publish without its PublishDone"
    );
}

type World = (PoolConfig, u64, Vec<(String, RelayModel)>);

fn outbox_world(u: &mut Unstructured<'_>) -> Result<World> {
    let mut router = RouterConfig::default();
    router.indexers = vec![INDEXER.to_owned()];
    router.max_relays = u.int_in_range(1..=6)?;
    router.redundancy = u.int_in_range(1..=3)?;
    router.probe_slots = u.int_in_range(0..=2)?;
    router.max_list_relays = u.int_in_range(1..=4)?;
    let mut config = PoolConfig::default();
    config.router = router;
    config.verify = u.arbitrary()?;
    config.eose_deadline = Duration::from_millis(u.int_in_range(1..=15_000)?);
    config.publish_deadline = Duration::from_millis(u.int_in_range(1..=15_000)?);
    config.max_subscriptions = u.int_in_range(2..=8)?;
    let seed = u.arbitrary()?;
    let mut index = RelayModel::default();
    for _ in 0..u.int_in_range(0..=8)? {
        index.events.push(list_event(u)?);
    }
    let mut world = vec![(INDEXER.to_owned(), index)];
    for r in 0..RELAYS {
        let mut model = RelayModel::default();
        for _ in 0..u.int_in_range(0..=4)? {
            model.events.push(note(u)?);
        }
        match u.int_in_range(0..=7)? {
            0 => model.down = true,
            1 => model.ignores_tags = true,
            2 => model.auth_required = true,
            3 => model.refuse_all = Some(refusal(u)?),
            4 => model.max_subs = Some((u.int_in_range(1..=2)?, LimitStyle::Closed)),
            5 => model.drop_after = Some(Duration::from_millis(u.int_in_range(0..=5_000)?)),
            _ => {}
        }
        world.push((relay_url(r), model));
    }
    Ok((config, seed, world))
}

fn relay_url(r: u64) -> String {
    format!("wss://r{r}.example")
}

fn person(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(key(u.int_in_range(0..=PEOPLE - 1)?))
}

fn key(n: u64) -> String {
    format!("{:064x}", 0xb000_0000 + n)
}

/// A signed-looking event of `kind` by `author` at `at` seconds after the Sim's start.
fn event(n: u64, author: &str, at: u64, kind: u64, tags: &str) -> StoredEvent {
    let created_at = UNIX_START.saturating_sub(3_600) + at;
    StoredEvent {
        n,
        created_at,
        kind,
        json: format!(
            r#"{{"id":"{n:064x}","pubkey":"{author}","created_at":{created_at},"kind":{kind},"tags":[{tags}],"content":"","sig":"{n:0128x}"}}"#
        ),
    }
}

/// A relay list: some of the world's relays (or junk, or a private address), marked or not,
/// of kind 10002 or 10050, dated anywhere in the last hour (an older one must not replace a
/// newer one).
fn list_event(u: &mut Unstructured<'_>) -> Result<StoredEvent> {
    let author = person(u)?;
    let kind = if u.ratio(1, 3)? { 10050 } else { 10002 };
    let mut tags = Vec::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let url = match u.int_in_range(0..=9)? {
            0 => "not a url".to_owned(),
            1 => "ws://127.0.0.1:7777".to_owned(),
            2 => format!("wss://{}.example", "x".repeat(u.int_in_range(1..=300)?)),
            _ => relay_url(u.int_in_range(0..=RELAYS - 1)?),
        };
        let name = if kind == 10050 { "relay" } else { "r" };
        let marker = match u.int_in_range(0..=3)? {
            0 => r#","read""#,
            1 => r#","write""#,
            _ => "",
        };
        tags.push(format!(r#"["{name}","{url}"{marker}]"#));
    }
    let n = u.int_in_range(1_000..=1_999)?;
    Ok(event(
        n,
        &author,
        u.int_in_range(0..=3_600)?,
        kind,
        &tags.join(","),
    ))
}

/// A note by someone (kind 1), or a gift wrap (kind 1059) for someone.
fn note(u: &mut Unstructured<'_>) -> Result<StoredEvent> {
    let n = u.int_in_range(1..=60)?;
    let at = u.int_in_range(0..=3_700)?;
    if u.ratio(1, 3)? {
        let to = person(u)?;
        Ok(event(n, &key(99), at, 1059, &format!(r#"["p","{to}"]"#)))
    } else {
        Ok(event(n, &person(u)?, at, 1, ""))
    }
}

fn step(u: &mut Unstructured<'_>) -> Result<Duration> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u.int_in_range(0..=500)?),
        2 => Duration::from_millis(u.int_in_range(0..=3_000)?),
        _ => Duration::from_secs(u.int_in_range(0..=20)?),
    })
}

fn any_url(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(if u.ratio(1, 6)? {
        INDEXER.to_owned()
    } else {
        relay_url(u.int_in_range(0..=RELAYS - 1)?)
    })
}

fn op(u: &mut Unstructured<'_>, s: &PoolSim) -> Result<PoolAction> {
    let subs = s.subscribed.len() as u64;
    Ok(match u.int_in_range(0..=11)? {
        0 | 1 => {
            let mut people: Vec<String> = (0..u.int_in_range(1..=PEOPLE)?)
                .map(|_| person(u))
                .collect::<Result<_>>()?;
            people.sort();
            people.dedup();
            let quoted: Vec<String> = people.iter().map(|p| format!("\"{p}\"")).collect();
            let limit = if u.arbitrary()? { r#","limit":2"# } else { "" };
            PoolAction::SubscribeOutbox(format!(
                r#"{{"kinds":[1],"authors":[{}]{limit}}}"#,
                quoted.join(",")
            ))
        }
        2 => {
            PoolAction::SubscribeOutbox(format!(r##"{{"kinds":[1059],"#p":["{}"]}}"##, person(u)?))
        }
        3 => PoolAction::Unsubscribe(SubId(u.int_in_range(1..=subs + 2)?)),
        4 => PoolAction::StoreAt(INDEXER.to_owned(), list_event(u)?),
        5 | 6 => PoolAction::StoreAt(any_url(u)?, note(u)?),
        7 => PoolAction::DownAt(any_url(u)?, u.arbitrary()?),
        8 => {
            let author = person(u)?;
            let to = person(u)?;
            let kind = if u.arbitrary()? { 1 } else { 1059 };
            let n = u.int_in_range(2_000..=2_099)?;
            PoolAction::PublishOutbox(
                event(n, &author, 3_600, kind, &format!(r#"["p","{to}"]"#)).json,
            )
        }
        9 => PoolAction::RelayInfoAt(
            any_url(u)?,
            format!(
                r#"{{"limitation":{{"max_message_length":{},"max_subscriptions":{}}}}}"#,
                u.int_in_range(200..=70_000)?,
                u.int_in_range(1..=20)?
            ),
        ),
        10 => match u.int_in_range(0..=3)? {
            0 => PoolAction::Suspend,
            1 => PoolAction::Resume,
            2 => PoolAction::Online(false),
            _ => PoolAction::Online(true),
        },
        _ => PoolAction::NetworkChanged(u.arbitrary()?),
    })
}
