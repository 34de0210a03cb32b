//! The `pool` target: a [`PoolSim`] world and script decoded from the bytes, the pool's
//! promises checked after every step and its outcomes at the end.

use std::time::Duration;

use arbitrary::{Result, Unstructured};
use tether_core::pool::{PoolConfig, RelayId, SubId};
use tether_core::Instant;

use super::{filters, frame, json_str, publish_json, refusal, wire_id, RELAY_CHANGES};
use crate::pool_sim::{PoolAction, PoolSim};
use crate::relay_model::{LimitStyle, RelayModel, ReqBudget, StoredEvent};

/// Most operations decoded from one `pool` input.
pub const POOL_MAX_OPS: usize = 48;

/// The scripted part of a `pool` run, like [`MAX_SCRIPT`](super::MAX_SCRIPT) for `relay_session`.
pub const POOL_MAX_SCRIPT: Duration = Duration::from_secs(120);

/// Decode a pool world — 1 to 5 relays (honest, refusing, down, mute, flapping, silent, some
/// with auth, REQ budgets or caps), their stores, a [`PoolConfig`] with small bounds and
/// `verify` on or off, a seed — and up to [`POOL_MAX_OPS`] timed operations (the property
/// tests' subscribe, routed subscribe, unsubscribe, store, socket drop, add and remove relay,
/// publish and forged copy, plus relay down / up, frames from the relay frame grammar,
/// conflicting copies, floods of up to 201 unique ids, mute toggles and relay behaviour
/// changes), and run them in a [`PoolSim`]. The PoolSim checks the pool's promises after every
/// step (each id once while remembered, at most one outcome, `Ended` once and last, no copy
/// that fails verification delivered, pool and session bookkeeping, `poll_timeout` in the
/// future). After the script the run goes on past every outcome and publish deadline, ending
/// early once it has settled ([`PoolSim::is_settled`]), and then every subscription not
/// dropped must have had exactly one `Complete`, every publish its `PublishDone`, and no copy
/// may still await verification.
///
/// Operations that name a wire subscription mostly use the latest REQ the pool sent to that
/// relay, so the script is decoded as the run goes. The PoolSim runs quiet (no transcript);
/// [`pool_transcript`] runs an input again with it.
///
/// # Panics
/// On any violation or panic in the pool.
pub fn pool(data: &[u8]) {
    pool_run(data, true);
}

/// [`pool`] with the PoolSim's transcript on (its tail is kept and returned): what a failing
/// input did.
///
/// # Panics
/// Like [`pool`], with the transcript's tail in the message.
pub fn pool_transcript(data: &[u8]) -> String {
    pool_run(data, false)
}

fn pool_run(data: &[u8], quiet: bool) -> String {
    let mut u = Unstructured::new(data);
    let Ok((config, seed, latency, relays)) = pool_world(&mut u) else {
        return String::new();
    };
    let eose_deadline = config.eose_deadline;
    let publish_deadline = config.publish_deadline;
    let verify = config.verify;
    let mut s = PoolSim::new(config, seed);
    s.keep_transcript = false;
    s.quiet = quiet;
    s.set_latency(latency);
    // `Received` events are checked as they come but not kept: nothing reads them here.
    s.forget_received_from.extend((0..=5).map(RelayId));
    for (model, mute) in relays {
        let model = Box::new(model);
        s.at(
            Duration::ZERO,
            if mute {
                PoolAction::AddMutedRelay(model)
            } else {
                PoolAction::AddRelay(model)
            },
        );
    }
    let mut t = Duration::ZERO;
    for _ in 0..POOL_MAX_OPS {
        if u.is_empty() {
            break;
        }
        let Ok(step) = pool_step(&mut u) else {
            break;
        };
        t += step;
        if t > POOL_MAX_SCRIPT {
            break;
        }
        // Up to the operation's time, so that it can name what the pool has sent by then.
        s.run_for(t.saturating_sub(s.now().since_origin()));
        let Ok(action) = pool_op(&mut u, &s) else {
            break;
        };
        s.at(t, action);
    }
    // Past every subscription's outcome deadline and every publish's: all are due by then.
    let tail = eose_deadline.max(publish_deadline) + Duration::from_secs(1);
    let until = (Instant::ZERO + t + tail).saturating_duration_since(s.now());
    s.run_until_settled(until);
    // A run that has not settled (a flapping relay replays on every reconnect) can stop with
    // a copy under verification, and what the pool says about its subscription (the outcome
    // included) waiting behind it: let verdicts come back, a few milliseconds at a time.
    for _ in 0..2_000 {
        if s.pool.unverified() == 0 {
            break;
        }
        s.run_for(Duration::from_millis(5));
    }
    let tail = || {
        let lines: Vec<&str> = s.transcript().lines().rev().take(60).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    for sub in &s.subscribed {
        assert!(
            s.has_outcome(*sub) || s.unsubscribed.contains(sub),
            "{sub} was never dropped and has no outcome at {:?}\n{}",
            s.now(),
            tail()
        );
    }
    assert!(
        s.publishes_pending() == 0,
        "a publish without its PublishDone\n{}",
        tail()
    );
    assert!(
        !verify || s.pool.unverified() == 0,
        "copies still awaiting a verdict\n{}",
        tail()
    );
    s.transcript().to_owned()
}

type PoolWorld = (PoolConfig, u64, Duration, Vec<(RelayModel, bool)>);

fn pool_world(u: &mut Unstructured<'_>) -> Result<PoolWorld> {
    let mut config = PoolConfig::default();
    config.verify = u.arbitrary()?;
    config.dedup_capacity = u.int_in_range(0..=8)?;
    config.seen_on_max = u.int_in_range(0..=3)?;
    config.max_unverified = u.int_in_range(0..=8)?;
    config.eose_deadline = Duration::from_millis(u.int_in_range(0..=15_000)?);
    config.after_first_eose = if u.arbitrary()? {
        Some(Duration::from_millis(u.int_in_range(0..=5_000)?))
    } else {
        None
    };
    config.publish_deadline = Duration::from_millis(u.int_in_range(0..=15_000)?);
    config.max_relays = u.int_in_range(1..=6)?;
    config.max_subscriptions = u.int_in_range(1..=12)?;
    config.relay.eose_timeout = Duration::from_secs(u.int_in_range(1..=30)?);
    config.relay.publish_timeout = Duration::from_secs(u.int_in_range(1..=10)?);
    if let Some(catch_up) = config.relay.catch_up.as_mut() {
        catch_up.memory = u.int_in_range(0..=4)?;
    }
    config.relay.max_subscriptions = if u.ratio(1, 4)? {
        Some(u.int_in_range(1..=3)?)
    } else {
        None
    };
    let seed = u.arbitrary()?;
    let latency = Duration::from_millis(u.int_in_range(0..=50)?);
    let relays = (0..u.int_in_range(1..=5)?)
        .map(|_| pool_relay(u))
        .collect::<Result<_>>()?;
    // At most 4 handshakes against up to 5 relays (and more added): mostly a limit the
    // relays contend for.
    config.max_connecting = u.int_in_range(1..=4)?;
    Ok((config, seed, latency, relays))
}

/// A relay of the property tests' kinds (honest, refusing, down, mute, flapping, silent),
/// sometimes with auth, a REQ budget or a subscription cap, storing a few of events 1-10
/// (sometimes a forged copy); and whether it starts mute.
fn pool_relay(u: &mut Unstructured<'_>) -> Result<(RelayModel, bool)> {
    let mut m = RelayModel::default();
    for _ in 0..u.int_in_range(0..=5)? {
        m.events.push(pool_event(u, 10)?);
    }
    let mut mute = false;
    match u.int_in_range(0..=8)? {
        0..=2 => {}
        3 => m.refuse_all = Some(refusal(u)?),
        4 => m.down = true,
        5 => mute = true,
        6 => m.drop_after = Some(Duration::from_millis(u.int_in_range(0..=5_000)?)),
        7 => m.silent_reqs = true,
        _ => {
            m.auth_required = u.arbitrary()?;
            if u.arbitrary()? {
                m.budget = Some(ReqBudget {
                    max: u.int_in_range(1..=3)?,
                    window: Duration::from_secs(u.int_in_range(1..=10)?),
                    hint: u.arbitrary()?,
                });
            }
            if u.arbitrary()? {
                m.max_subs = Some((u.int_in_range(1..=3)?, LimitStyle::Closed));
            }
            for _ in 0..u.int_in_range(0..=2)? {
                m.scripted_closed.push_back(refusal(u)?);
            }
        }
    }
    Ok((m, mute))
}

/// A kind-1 event numbered 1..=`max`, genuine, forged (PoolSim's verifier refuses it) or a
/// conflicting copy (other bytes, same id).
fn pool_event(u: &mut Unstructured<'_>, max: u64) -> Result<StoredEvent> {
    let n = u.int_in_range(1..=max)?;
    let mut event = StoredEvent::new(n, 1_000_000 + n, 1);
    match u.int_in_range(0..=7)? {
        0 => event.json = event.json.replace("event", "forged"),
        1 => event.json = event.json.replace("event", "other"),
        _ => {}
    }
    Ok(event)
}

fn pool_step(u: &mut Unstructured<'_>) -> Result<Duration> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u.int_in_range(0..=100)?),
        2 => Duration::from_millis(u.int_in_range(0..=3_000)?),
        _ => Duration::from_secs(u.int_in_range(0..=20)?),
    })
}

/// A relay id: mostly one of the first five (some may be gone), now and then one never added.
fn pool_relay_id(u: &mut Unstructured<'_>) -> Result<RelayId> {
    Ok(RelayId(u.int_in_range(0..=5)?))
}

/// The application's lifecycle, for the whole pool, or one relay's socket dying unannounced.
fn pool_lifecycle(u: &mut Unstructured<'_>) -> Result<PoolAction> {
    Ok(match u.int_in_range(0..=5)? {
        0 => PoolAction::Suspend,
        1 => PoolAction::Resume,
        2 => PoolAction::NetworkChanged(u.arbitrary()?),
        3 => PoolAction::Online(u.arbitrary()?),
        4 => PoolAction::Vanish(pool_relay_id(u)?),
        _ => PoolAction::Online(true),
    })
}

/// Mostly the latest wire id the pool sent `relay` a REQ with, else one from the grammar.
fn pool_wire(u: &mut Unstructured<'_>, s: &PoolSim, relay: RelayId) -> Result<String> {
    match s.last_wire_id(relay) {
        Some(wire) if u.ratio(3, 4)? => Ok(wire.to_owned()),
        _ => wire_id(u),
    }
}

fn pool_op(u: &mut Unstructured<'_>, s: &PoolSim) -> Result<PoolAction> {
    let subs = s.subscribed.len() as u64;
    Ok(match u.int_in_range(0..=17)? {
        0..=2 => PoolAction::Subscribe(filters(u)?),
        3 => {
            let routing = (0..u.int_in_range(1..=3)?)
                .map(|_| Ok((pool_relay_id(u)?, filters(u)?)))
                .collect::<Result<_>>()?;
            PoolAction::SubscribeRouted(routing)
        }
        4 => PoolAction::Unsubscribe(SubId(u.int_in_range(1..=subs + 1)?)),
        5 | 6 => PoolAction::Store(pool_relay_id(u)?, pool_event(u, 30)?),
        // One in three socket drops is the application's lifecycle instead (a zombie socket
        // among them), drawn here so the other ops keep their bytes.
        7 if u.ratio(1, 3)? => pool_lifecycle(u)?,
        7 => PoolAction::DropSocket(pool_relay_id(u)?),
        8 => {
            if u.arbitrary()? {
                PoolAction::Down(pool_relay_id(u)?)
            } else {
                PoolAction::Up(pool_relay_id(u)?)
            }
        }
        9 => {
            let (model, mute) = pool_relay(u)?;
            if mute {
                PoolAction::AddMutedRelay(Box::new(model))
            } else {
                PoolAction::AddRelay(Box::new(model))
            }
        }
        10 => PoolAction::RemoveRelay(pool_relay_id(u)?),
        11 => PoolAction::Publish(publish_json(u)?),
        12 | 13 => {
            // A copy on the wire: genuine, forged or conflicting, for a live REQ (mostly).
            let relay = pool_relay_id(u)?;
            let wire = pool_wire(u, s, relay)?;
            let event = pool_event(u, 30)?;
            PoolAction::RelayFrame(
                relay,
                format!(r#"["EVENT",{},{}]"#, json_str(&wire), event.json),
            )
        }
        14 => {
            // Any frame of the relay_session grammar; an EOSE or CLOSED for a live REQ.
            let relay = pool_relay_id(u)?;
            let frame = match u.int_in_range(0..=3)? {
                0 => format!(r#"["EOSE",{}]"#, json_str(&pool_wire(u, s, relay)?)),
                1 => format!(
                    r#"["CLOSED",{},{}]"#,
                    json_str(&pool_wire(u, s, relay)?),
                    json_str(&refusal(u)?)
                ),
                _ => frame(u)?,
            };
            PoolAction::RelayFrame(relay, frame)
        }
        15 => {
            // Unique ids, some overlapping the small numbers relays store.
            let relay = pool_relay_id(u)?;
            let wire = pool_wire(u, s, relay)?;
            let first = if u.arbitrary()? {
                u.int_in_range(1..=30)?
            } else {
                1 << 40
            };
            PoolAction::Flood {
                relay,
                wire,
                first,
                // Up to a couple of hundred: far past any dedup bound here (8), and the
                // frames are most of an input's work.
                count: u.int_in_range(1..=400)? / 2 + 1,
                per_ms: u.int_in_range(1..=200)?,
            }
        }
        16 if u.ratio(1, 3)? => PoolAction::Hang(pool_relay_id(u)?, u.arbitrary()?),
        16 => PoolAction::Mute(pool_relay_id(u)?, u.arbitrary()?),
        _ => PoolAction::Relay(pool_relay_id(u)?, *u.choose(RELAY_CHANGES)?),
    })
}
