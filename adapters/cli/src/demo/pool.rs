//! The demo's pool part: one subscription over five relays in this process — two honest
//! ones with overlapping stores, a hostile one (forged copies of other relays' events,
//! EVENTs for a subscription it was never sent), one that accepts and never answers, and
//! one that is severed twice — then a summary that checks the pool's claims from what the
//! application saw on the subscription's stream: each id once, every stored event, no
//! forged copy, `Partial` naming exactly the silent relay, the subscription alive through
//! the flapping.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{pin, Pin};
use std::time::Duration;

use futures_util::StreamExt;
use tether_testserver::server::TestRelay;
use tether_testserver::{RelayModel, StoredEvent};
use tether_tokio::tether_core::backoff::{BackoffPolicy, Jitter};
use tether_tokio::tether_core::pool::Missing;
use tether_tokio::tether_driver::PoolEvents;
use tether_tokio::{
    Config, Filter, Outcome, PoolConfig, PoolItem, PoolSubscription, RelayId, SessionEvent,
};
use tokio::time::Instant;

use super::display::Display;
use super::tally::{secs, Check};
use crate::Failure;

/// The pool's outcome deadline in the demo.
const DEADLINE: Duration = Duration::from_secs(3);
/// When the flapper's connections are severed.
const FLAPS: [Duration; 2] = [Duration::from_millis(1_000), Duration::from_millis(2_500)];
/// When the hostile relay sends its forgeries.
const FORGE_AT: Duration = Duration::from_millis(700);
/// When an event only the flapper has is stored.
const LATE_AT: Duration = Duration::from_millis(2_700);
/// The number of that event.
const LATE: u64 = 40;
/// The number of the event the hostile relay sends for a subscription it was never sent.
const STRAY: u64 = 999;
/// The longest the pool part runs.
const LIMIT: Duration = Duration::from_secs(15);
/// Once everything is in, how long to wait for anything more (a duplicate would show).
const QUIET: Duration = Duration::from_millis(700);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Honest,
    Hostile,
    Silent,
    Flapper,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Honest => "honest",
            Role::Hostile => "hostile",
            Role::Silent => "never answers",
            Role::Flapper => "flaps",
        }
    }
}

struct Member {
    role: Role,
    relay: TestRelay,
    id: RelayId,
    /// Events this relay delivered first.
    first: u64,
    eose: bool,
    connects: u32,
}

fn event(n: u64) -> StoredEvent {
    StoredEvent::new(n, super::relay::epoch() + n, 1)
}

fn relay_with(ns: impl IntoIterator<Item = u64>) -> RelayModel {
    let mut model = RelayModel::default();
    model.events = ns.into_iter().map(event).collect();
    model
}

/// Run the pool part; returns whether its claims held.
///
/// # Errors
/// [`Failure::Failed`] when a relay cannot start or the pool refuses a call.
pub(crate) async fn run(
    seed: Option<u64>,
    stop: Pin<&mut impl Future<Output = ()>>,
) -> Result<bool, Failure> {
    let display = Display::new(false, LIMIT);
    let fail = |what: &str, e: &dyn std::fmt::Display| Failure::Failed(format!("{what}: {e}"));
    let roles = [
        (Role::Honest, relay_with(1..=20)),
        (Role::Honest, relay_with(11..=30)),
        (Role::Hostile, relay_with(21..=30)),
        (Role::Silent, relay_with(1..=30)),
        (Role::Flapper, relay_with(25..=30)),
    ];
    let mut config = Config::default();
    config.seed = seed;
    // Reconnect in a quarter second rather than a second, so two flaps fit in seconds.
    config.relay.link.reconnect = BackoffPolicy {
        base: Duration::from_millis(250),
        factor: 2.0,
        cap: Duration::from_secs(2),
        max_attempts: None,
        jitter: Jitter::Proportional(0.5),
    };
    let mut pool_config = PoolConfig::default();
    pool_config.relay = config.relay.clone();
    pool_config.eose_deadline = DEADLINE;
    let pool = tether_tokio::pool(pool_config, config);
    let Some(mut relay_events) = pool.events() else {
        return Err(Failure::Failed("pool events already taken".into()));
    };
    let mut members = Vec::new();
    for (role, model) in roles {
        let relay = TestRelay::start(model)
            .await
            .map_err(|e| fail("cannot start a demo relay", &e))?;
        if role == Role::Silent {
            relay.set_silent(true);
        }
        let id = pool
            .add_relay(&relay.url())
            .await
            .map_err(|e| fail("add relay", &e))?;
        members.push(Member {
            role,
            relay,
            id,
            first: 0,
            eose: false,
            connects: 0,
        });
    }
    display.say("");
    display.say(&format!(
        "pool: one subscription over {} relays in this process, deadline {}:",
        members.len(),
        secs(DEADLINE)
    ));
    for m in &members {
        display.say(&format!("  {} {} ({})", m.id, m.relay.url(), m.role.name()));
    }
    display.say("  the hostile relay sends forged copies of events 11-20 and an EVENT for a subscription it was never sent;");
    display.say(&format!(
        "  the flapper is severed at {} and {}, and alone gets event {LATE} at {}",
        secs(FLAPS[0]),
        secs(FLAPS[1]),
        secs(LATE_AT)
    ));
    let filter = Filter::new(r#"{"kinds":[1]}"#).map_err(|e| fail("demo filter", &e.0))?;
    let sub = pool
        .subscribe(vec![filter])
        .await
        .map_err(|e| fail("subscribe", &e))?;
    let mut run = Run {
        display,
        members,
        started: Instant::now(),
        delivered: BTreeMap::new(),
        duplicates: 0,
        outcomes: Vec::new(),
        ended: false,
    };
    run.pump(sub, &mut relay_events, stop).await;
    let holds = run.summary();
    let _ = pool.close().await;
    Ok(holds)
}

struct Run {
    display: Display,
    members: Vec<Member>,
    started: Instant,
    /// Event number -> (relay that delivered it first, its bytes).
    delivered: BTreeMap<u64, (RelayId, String)>,
    duplicates: u64,
    outcomes: Vec<(Duration, Outcome)>,
    ended: bool,
}

impl Run {
    async fn pump(
        &mut self,
        mut sub: PoolSubscription,
        relay_events: &mut PoolEvents,
        mut stop: Pin<&mut impl Future<Output = ()>>,
    ) {
        let mut schedule: Vec<(Duration, Step)> = vec![
            (FORGE_AT, Step::Forge),
            (FLAPS[0], Step::Flap),
            (FLAPS[1], Step::Flap),
            (LATE_AT, Step::Late),
        ];
        schedule.sort_by_key(|(at, _)| *at);
        let mut schedule = schedule.into_iter().peekable();
        let limit = tokio::time::sleep(LIMIT);
        let mut limit = pin!(limit);
        let mut done_at: Option<Duration> = None;
        loop {
            let at = self.started.elapsed();
            let next = schedule
                .peek()
                .map(|(when, _)| *when)
                .or_else(|| done_at.map(|d| d + QUIET))
                .unwrap_or(LIMIT);
            let tick = tokio::time::sleep(next.saturating_sub(at));
            tokio::select! {
                biased;
                () = &mut limit => break,
                () = stop.as_mut() => break,
                Some(e) = relay_events.next() => self.on_relay(e.relay, &e.event),
                item = sub.next() => match item {
                    Some(item) => self.on_item(item),
                    None => break,
                },
                () = tick => {
                    if let Some((_, step)) = schedule.next() {
                        self.step(step);
                    } else if done_at.is_some() {
                        break;
                    }
                }
            }
            if done_at.is_none() && schedule.peek().is_none() && self.everything_in() {
                done_at = Some(self.started.elapsed());
            }
        }
    }

    fn everything_in(&self) -> bool {
        !self.outcomes.is_empty() && self.delivered.contains_key(&LATE)
    }

    fn member(&self, role: Role) -> Option<&Member> {
        self.members.iter().find(|m| m.role == role)
    }

    fn url(&self, relay: RelayId) -> String {
        self.members.iter().find(|m| m.id == relay).map_or_else(
            || relay.to_string(),
            |m| format!("{relay} ({})", m.role.name()),
        )
    }

    fn step(&mut self, step: Step) {
        let at = self.started.elapsed();
        match step {
            Step::Forge => {
                let Some(hostile) = self.member(Role::Hostile) else {
                    return;
                };
                for n in 11..=20 {
                    let forged = event(n).json.replace(&format!("event {n}"), "forged");
                    hostile
                        .relay
                        .broadcast(&format!(r#"["EVENT","0:1",{forged}]"#));
                }
                let stray = event(STRAY).json;
                hostile
                    .relay
                    .broadcast(&format!(r#"["EVENT","never-sent:1",{stray}]"#));
                self.display.log(
                    at,
                    "pool: hostile relay sends 10 forged copies and an EVENT for a subscription it was never sent",
                );
            }
            Step::Flap => {
                if let Some(flapper) = self.member(Role::Flapper) {
                    flapper.relay.sever_all();
                    self.display.log(
                        at,
                        "pool: the flapper severs its connection (no close frame)",
                    );
                }
            }
            Step::Late => {
                if let Some(flapper) = self.member(Role::Flapper) {
                    flapper.relay.store(event(LATE));
                    self.display.log(
                        at,
                        &format!("pool: event {LATE} stored on the flapper only"),
                    );
                }
            }
        }
    }

    fn on_relay(&mut self, relay: RelayId, event: &SessionEvent) {
        if let SessionEvent::Connected = event {
            if let Some(m) = self.members.iter_mut().find(|m| m.id == relay) {
                m.connects += 1;
                if m.connects > 1 {
                    let line = format!("pool: {} reconnected (socket #{})", relay, m.connects);
                    self.display.log(self.started.elapsed(), &line);
                }
            }
        }
    }

    fn on_item(&mut self, item: PoolItem) {
        let at = self.started.elapsed();
        match item {
            PoolItem::Event { relay, id, raw } => {
                let n = u64::from_be_bytes(id.0[24..].try_into().unwrap_or([0; 8]));
                if self.delivered.insert(n, (relay, raw)).is_some() {
                    self.duplicates += 1;
                }
                if let Some(m) = self.members.iter_mut().find(|m| m.id == relay) {
                    m.first += 1;
                }
                if n == LATE {
                    let line = format!("pool: event {LATE} arrived from {}", self.url(relay));
                    self.display.log(at, &line);
                }
            }
            PoolItem::Eose { relay } => {
                if let Some(m) = self.members.iter_mut().find(|m| m.id == relay) {
                    m.eose = true;
                }
            }
            PoolItem::Complete(outcome) => {
                let line = match &outcome {
                    Outcome::Complete => "pool: complete".to_owned(),
                    Outcome::Partial { missing } => format!(
                        "pool: partial, missing {}",
                        missing
                            .iter()
                            .map(|(r, why)| format!("{} ({why})", self.url(*r)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    other => format!("pool: {other:?}"),
                };
                self.display.log(at, &line);
                self.outcomes.push((at, outcome));
            }
            PoolItem::Ended { reasons } => {
                self.ended = true;
                self.display.log(at, &format!("pool: ended {reasons:?}"));
            }
            _ => {}
        }
    }

    /// Print the pool's summary; returns whether its claims held.
    fn summary(&self) -> bool {
        let say = |line: &str| self.display.say(line);
        say("");
        say("pool summary:");
        say(&format!(
            "  {:<4} {:<14} {:>15} {:>5} {:>8}",
            "", "relay", "first delivered", "EOSE", "sockets"
        ));
        for m in &self.members {
            say(&format!(
                "  {:<4} {:<14} {:>15} {:>5} {:>8}",
                m.id.to_string(),
                m.role.name(),
                m.first,
                if m.eose { "yes" } else { "no" },
                m.connects
            ));
        }
        let checks = self.checks();
        let holds = checks.iter().all(|c| c.holds);
        say("");
        say(if holds {
            "pool claim holds:"
        } else {
            "pool claim does NOT hold:"
        });
        for check in &checks {
            let mark = if check.holds { "ok  " } else { "FAIL" };
            let detail = if check.holds {
                String::new()
            } else {
                format!(" ({})", check.detail)
            };
            say(&format!("  [{mark}] {}{detail}", check.claim));
        }
        holds
    }

    fn checks(&self) -> Vec<Check> {
        let check = |claim: &str, holds: bool, detail: String| Check {
            claim: claim.to_owned(),
            holds,
            detail,
        };
        let mut expected: Vec<u64> = (1..=30).collect();
        expected.push(LATE);
        let got: Vec<u64> = self.delivered.keys().copied().collect();
        let forged: Vec<u64> = self
            .delivered
            .iter()
            .filter(|(n, (_, raw))| **n != STRAY && *raw != event(**n).json)
            .map(|(n, _)| *n)
            .collect();
        let silent = self.member(Role::Silent).map(|m| m.id);
        let flapper = self.member(Role::Flapper);
        let missing: Option<Vec<(RelayId, Missing)>> = match self.outcomes.first() {
            Some((_, Outcome::Partial { missing })) => Some(missing.clone()),
            _ => None,
        };
        let late_from = self.delivered.get(&LATE).map(|(r, _)| *r);
        vec![
            check(
                "each event id was delivered once, whichever relays sent it",
                self.duplicates == 0,
                format!("{} duplicates", self.duplicates),
            ),
            check(
                "every stored event arrived (1-30 and the late one)",
                got == expected,
                format!("got {got:?}"),
            ),
            check(
                "forged copies and the EVENT for a never-sent subscription were dropped",
                forged.is_empty() && !self.delivered.contains_key(&STRAY),
                format!("forged delivered: {forged:?}"),
            ),
            check(
                "one outcome, Partial, naming exactly the silent relay (no EOSE by the deadline)",
                self.outcomes.len() == 1
                    && silent.is_some_and(|s| missing == Some(vec![(s, Missing::NoEose)])),
                format!("{:?}", self.outcomes),
            ),
            check(
                "the subscription survived the flapper: still live, the late event from it",
                !self.ended && flapper.is_some_and(|f| f.connects >= 3 && late_from == Some(f.id)),
                format!(
                    "ended {}, flapper sockets {:?}, late event from {late_from:?}",
                    self.ended,
                    flapper.map(|f| f.connects)
                ),
            ),
        ]
    }
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Forge,
    Flap,
    Late,
}
