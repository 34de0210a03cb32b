//! The `relay_session` target: a [`Sim`] script decoded from the bytes ([`RelayScript`], which
//! the property tests share), with the invariants checked after every step.

use std::time::Duration;

use arbitrary::{Result, Unstructured};
use tether_core::gate::GateScope;
use tether_core::nostr::{CatchUpConfig, Priority, RelayConfig, SubscriptionId};

use super::{filters, frame, publish_json, refusal, MAX_OPS, RELAY_CHANGES};
use crate::relay_model::{LimitStyle, RelayModel, ReqBudget, StoredEvent};
use crate::sim::{Action, Sim};

/// Decode a relay's behaviour, a session configuration and up to [`MAX_OPS`] timed operations
/// from `data` ([`RelayScript::decode`]), run them in the [`Sim`] with its invariants checked
/// after every step (the same [`Invariants`](crate::invariants::Invariants) the property tests
/// use), then let retries, windows and reconnects play out for a bounded simulated time, or
/// until the run has settled ([`Sim::run_until_settled`]). The Sim runs quiet (no transcript);
/// [`relay_session_transcript`] replays an input with it.
///
/// # Panics
/// On any invariant violation or panic in the session.
pub fn relay_session(data: &[u8]) {
    relay_session_run(data, true);
}

/// [`relay_session`] with the Sim's transcript kept, returned at the end: what a failing
/// input did (the fuzz target itself runs quiet, and a run is deterministic).
///
/// # Panics
/// Like [`relay_session`], with the transcript's tail in the message.
pub fn relay_session_transcript(data: &[u8]) -> String {
    relay_session_run(data, false)
}

fn relay_session_run(data: &[u8], quiet: bool) -> String {
    let Ok(script) = RelayScript::decode(data) else {
        return String::new();
    };
    let mut sim = script.sim();
    sim.quiet = quiet;
    sim.run_for(script.end());
    // Long enough for five retries at the 30 s cap, or a 300 s gate window, to play out; a
    // run that settles earlier has nothing left to play out.
    sim.run_until_settled(Duration::from_secs(330));
    sim.check_all();
    sim.transcript().to_owned()
}

/// The scripted part of a relay_session run: simulated time is what costs (pings, reconnect
/// cycles), so it is bounded to keep one input in the milliseconds.
pub const MAX_SCRIPT: Duration = Duration::from_secs(300);

/// One generated relay scenario: the relay's behaviour, the session's configuration and the
/// application's timed operations. The one generator behind both the `relay_session` fuzz
/// target and the property tests (`tests/relay_properties.rs`), which feed it proptest's
/// bytes.
#[derive(Clone, Debug)]
pub struct RelayScript {
    /// The session's configuration.
    pub config: RelayConfig,
    /// The relay at the start.
    pub relay: RelayModel,
    /// One-way latency.
    pub latency: Duration,
    /// Whether the app answers AUTH challenges.
    pub auto_auth: bool,
    /// The session's seed.
    pub seed: u64,
    /// Operations at times after the start, in order (time only moves forward), within
    /// [`MAX_SCRIPT`].
    pub ops: Vec<(Duration, Action)>,
}

impl RelayScript {
    /// Decode a scenario from bytes: a world, then up to [`MAX_OPS`] operations until the
    /// bytes or [`MAX_SCRIPT`] run out.
    ///
    /// # Errors
    /// When the bytes do not hold a whole world.
    pub fn decode(data: &[u8]) -> Result<Self> {
        let mut u = Unstructured::new(data);
        let (config, relay, latency, auto_auth, seed) = relay_world(&mut u)?;
        let mut ops = Vec::new();
        let mut t = Duration::ZERO;
        for _ in 0..MAX_OPS {
            if u.is_empty() {
                break;
            }
            let Ok((step, action)) = relay_op(&mut u) else {
                break;
            };
            // Time only moves forward: each operation is a non-negative step after the last.
            t += step;
            if t > MAX_SCRIPT {
                break;
            }
            ops.push((t, action));
        }
        Ok(RelayScript {
            config,
            relay,
            latency,
            auto_auth,
            seed,
            ops,
        })
    }

    /// A Sim with the world set up and every operation scheduled, checking invariants.
    pub fn sim(&self) -> Sim {
        let mut sim = Sim::new(self.config.clone(), self.seed, self.relay.clone());
        sim.set_latency(self.latency);
        sim.auto_auth = self.auto_auth;
        sim.check = true;
        for (at, action) in &self.ops {
            sim.at(*at, action.clone());
        }
        sim
    }

    /// When the last operation happens.
    pub fn end(&self) -> Duration {
        self.ops.last().map_or(Duration::ZERO, |(at, _)| *at)
    }
}

type World = (RelayConfig, RelayModel, Duration, bool, u64);

fn relay_world(u: &mut Unstructured<'_>) -> Result<World> {
    let mut relay = RelayModel::with_events(u.int_in_range(0..=4)?);
    if u.arbitrary()? {
        relay.budget = Some(ReqBudget {
            max: u.int_in_range(1..=5)?,
            window: Duration::from_secs(u.int_in_range(1..=20)?),
            hint: u.arbitrary()?,
        });
    }
    if u.arbitrary()? {
        let style = if u.arbitrary()? {
            LimitStyle::Notice
        } else {
            LimitStyle::Closed
        };
        relay.max_subs = Some((u.int_in_range(1..=5)?, style));
    }
    relay.auth_required = u.ratio(1, 4)?;
    for _ in 0..u.int_in_range(0..=4)? {
        relay.scripted_closed.push_back(refusal(u)?);
    }
    if u.ratio(1, 8)? {
        relay.refuse_all = Some(refusal(u)?);
    }
    for _ in 0..u.int_in_range(0..=2)? {
        relay.scripted_ok.push_back((u.arbitrary()?, refusal(u)?));
    }
    relay.silent_reqs = u.ratio(1, 8)?;
    relay.ignore_pings = u.ratio(1, 8)?;
    if u.ratio(1, 8)? {
        relay.drop_after = Some(Duration::from_millis(u.int_in_range(0..=40_000)?));
    }
    let mut config = RelayConfig::default();
    config.gate_scope = if u.arbitrary()? {
        GateScope::Session
    } else {
        GateScope::Connection
    };
    config.max_subscriptions = if u.arbitrary()? {
        Some(u.int_in_range(1..=5)?)
    } else {
        None
    };
    config.replay_batch = u.int_in_range(1..=8)?;
    let catch_up = !u.ratio(1, 4)?;
    let mut memory = CatchUpConfig::default();
    memory.memory = u.int_in_range(0..=4)?;
    // A short lookback keeps windows (and so the bytes re-delivered) small.
    memory.lookback.default = Duration::from_secs(5);
    config.catch_up = catch_up.then_some(memory);
    config.max_registered = u.int_in_range(1..=16)?;
    config.eose_timeout = Duration::from_secs(u.int_in_range(1..=30)?);
    config.max_outbox = u.int_in_range(1..=4)?;
    // Derived, not drawn, so existing corpus inputs keep their meaning: half the runs can
    // authenticate (an `auth_required` document then holds REQs for NIP-42).
    config.authenticates = config.eose_timeout.as_secs() % 2 == 0;
    let latency = Duration::from_millis(u.int_in_range(0..=200)?);
    Ok((config, relay, latency, !u.ratio(1, 4)?, u.arbitrary()?))
}

fn relay_op(u: &mut Unstructured<'_>) -> Result<(Duration, Action)> {
    let step = match u.int_in_range(0..=3)? {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u.int_in_range(0..=100)?),
        2 => Duration::from_millis(u.int_in_range(0..=5_000)?),
        _ => Duration::from_secs(u.int_in_range(0..=60)?),
    };
    let action = match u.int_in_range(0..=13)? {
        0..=2 => Action::Subscribe(filters(u)?, Priority(u.int_in_range(-2..=2)?)),
        3 => {
            let slot: u64 = u.int_in_range(0..=9)?;
            let generation: u64 = u.int_in_range(0..=2)?;
            Action::Unsubscribe(SubscriptionId((generation << 32) | slot))
        }
        4 => Action::Publish(publish_json(u)?),
        5 => Action::Connect,
        6 => Action::Disconnect,
        7 => Action::DropSocket,
        8 => Action::RelayDown,
        9 => Action::RelayUp,
        10 | 11 => Action::RelayFrame(frame(u)?),
        12 => {
            let n = u.int_in_range(1..=12)?;
            Action::Store(StoredEvent::new(n, 1_000_000 + n, u.int_in_range(1..=2)?))
        }
        // One in eight of these is a NIP-11 document instead (drawn here so the other ops
        // keep their bytes).
        _ if u.ratio(1, 8)? => Action::RelayInfo((*u.choose(RELAY_INFOS)?).to_owned()),
        // And one in four of the rest is the application's lifecycle.
        _ if u.ratio(1, 4)? => match u.int_in_range(0..=5)? {
            0 => Action::Suspend,
            1 => Action::Resume,
            2 => Action::NetworkChanged(u.arbitrary()?),
            3 => Action::Online(u.arbitrary()?),
            4 => Action::Vanish,
            _ => Action::Online(true),
        },
        _ => Action::Relay(*u.choose(RELAY_CHANGES)?),
    };
    Ok((step, action))
}

/// NIP-11 documents the relay's driver may hand the session mid-run: caps below and above
/// the relay's, a small frame bound, short wire ids, auth first, and broken ones.
const RELAY_INFOS: &[&str] = &[
    r#"{"limitation":{"max_subscriptions":1}}"#,
    r#"{"limitation":{"max_subscriptions":3}}"#,
    r#"{"limitation":{"max_subscriptions":50,"auth_required":true}}"#,
    r#"{"limitation":{"max_message_length":1024}}"#,
    r#"{"limitation":{"max_subid_length":3,"max_limit":10}}"#,
    r#"{"limitation":{"auth_required":true}}"#,
    r#"{"limitation":{"max_subscriptions":"2","max_message_length":-1}}"#,
    "<html>",
    "{}",
];
