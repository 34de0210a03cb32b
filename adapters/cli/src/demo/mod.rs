//! `tether demo`: ~60 subscriptions against a hostile relay in this process, shown live,
//! then a summary that checks the claim: every subscription live (or queued for a slot) or
//! surfaced exactly once, no event delivered twice or missed, retries bounded. Then the
//! pool part (`pool.rs`): one subscription over five relays, one hostile, one silent, one
//! flapping, and a summary that checks the pool's claims.
//!
//! Everything in the summary about subscriptions comes from what the application saw on
//! the subscription streams and session events; the relay's wire log adds what reached it.

mod display;
mod pool;
mod relay;
mod tally;

use std::future::Future;
use std::io::IsTerminal;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{select_all, BoxStream, SelectAll, StreamExt};
use tether_tokio::{Config, Filter, RelayClient, SessionEvent, SessionEvents, SubscriptionEvent};
use tokio::time::{Instant, MissedTickBehavior};

use crate::signer::KeySigner;
use crate::{parse_secs, stop_requested, Failure};
use display::Display;
use relay::{HostileRelay, BUDGET, DROP_EVERY, EVENT_EVERY, FIRST_DROP, KINDS, MAX_SUBS};
use tally::{secs, SubState, Tally};

/// How often the relay's schedule advances and the display refreshes.
const TICK: Duration = Duration::from_millis(100);
/// The longest the demo waits, after the hostile phase, for subscriptions still being
/// retried: the core's last retry of a streak can be ~16 s out, behind a gate.
const SETTLE_LIMIT: Duration = Duration::from_secs(45);
/// Once settled, how long events already on the wire get to arrive before counting.
const QUIET: Duration = Duration::from_millis(500);

/// `tether demo`
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How long the relay stays hostile, in seconds; the summary follows once every
    /// subscription has settled.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs)]
    duration: Duration,
    /// Subscriptions to open.
    #[arg(long, value_name = "N", default_value_t = 60,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    subscriptions: u16,
    /// Seed for the session's jitter, for a reproducible run (default: from the OS).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
}

/// What the relay is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Its schedule runs: new events, severed connections.
    Hostile,
    /// It is calm; the session finishes what it is retrying.
    Settle,
    /// Everything settled; last events arrive.
    Quiet,
}

/// Run `tether demo`.
///
/// # Errors
/// [`Failure::Failed`] when the claim does not hold or the relay cannot start.
pub(crate) async fn run(args: Args) -> Result<(), Failure> {
    let stop = stop_requested()?;
    let relay = HostileRelay::start()
        .await
        .map_err(|e| Failure::Failed(format!("cannot start the demo relay: {e}")))?;
    let mut config = Config::default();
    config.seed = args.seed;
    config.signer = Some(Arc::new(KeySigner::generate()));
    let bound = config.relay.closed_retry.max_attempts.unwrap_or(u32::MAX);
    let client = RelayClient::connect(&relay.url(), config)
        .map_err(|e| Failure::Failed(format!("demo relay URL: {e}")))?;
    let Some(session) = client.events() else {
        return Err(Failure::Failed("session events already taken".into()));
    };
    let kinds: Vec<Vec<u64>> = (0..usize::from(args.subscriptions))
        .map(filter_kinds)
        .collect();
    let mut streams = Vec::with_capacity(kinds.len());
    for (index, kinds) in kinds.iter().enumerate() {
        let filter = Filter::new(&format!(r#"{{"kinds":{kinds:?}}}"#))
            .map_err(|e| Failure::Failed(format!("demo filter: {}", e.0)))?;
        let sub = client
            .subscribe(vec![filter])
            .await
            .map_err(|e| Failure::Failed(format!("subscribe: {e}")))?;
        streams.push(sub.map(move |item| (index, item)).boxed());
    }
    let mut demo = Demo {
        display: Display::new(std::io::stdout().is_terminal(), args.duration),
        relay,
        session,
        items: select_all(streams),
        tally: Tally::new(kinds),
        started: Instant::now(),
        stopped: false,
    };
    demo.intro(&args);
    let mut stop = pin!(stop);
    demo.pump(Phase::Hostile, args.duration, stop.as_mut())
        .await;
    let hostile = demo.started.elapsed();
    demo.pump(Phase::Settle, SETTLE_LIMIT, stop.as_mut()).await;
    let settle = demo.started.elapsed().saturating_sub(hostile);
    demo.pump(Phase::Quiet, QUIET, stop.as_mut()).await;
    demo.display.finish();
    let holds = demo.summary(hostile, settle, bound);
    let _ = client.disconnect().await;
    let pool_holds = if demo.stopped {
        demo.display.say("pool part skipped (interrupted)");
        true
    } else {
        pool::run(args.seed, stop.as_mut()).await?
    };
    if holds && pool_holds {
        Ok(())
    } else {
        Err(Failure::Failed(
            "the claim did not hold (see the summary)".into(),
        ))
    }
}

/// The kinds subscription `index` asks for: one kind, the other, or both, in turn.
fn filter_kinds(index: usize) -> Vec<u64> {
    match index % 3 {
        0 => vec![KINDS[0]],
        1 => vec![KINDS[1]],
        _ => KINDS.to_vec(),
    }
}

struct Demo {
    display: Display,
    relay: HostileRelay,
    session: SessionEvents,
    items: SelectAll<BoxStream<'static, (usize, SubscriptionEvent)>>,
    tally: Tally,
    started: Instant,
    /// Ctrl-C: skip to the summary.
    stopped: bool,
}

impl Demo {
    fn intro(&self, args: &Args) {
        let say = |line: &str| self.display.say(line);
        say(&format!(
            "tether demo: {} subscriptions against a hostile relay at {} (in this process), {} of hostility",
            args.subscriptions,
            self.relay.url(),
            secs(args.duration),
        ));
        say(&format!(
            "  the relay: {} REQs per {}, refused with \"rate-limited: ... retry in Ns\"; at most {MAX_SUBS} subscriptions per connection;",
            BUDGET.max,
            secs(BUDGET.window),
        ));
        say(&format!(
            "             NIP-42 AUTH on every connection; every connection severed every {} (first at {}); a new event every {}",
            secs(DROP_EVERY),
            secs(FIRST_DROP),
            secs(EVENT_EVERY),
        ));
        say("");
    }

    /// Run one phase for at most `limit`: feed what the streams say into the tally and the
    /// display, and play the relay's schedule while it is hostile.
    async fn pump(
        &mut self,
        phase: Phase,
        limit: Duration,
        mut stop: Pin<&mut impl Future<Output = ()>>,
    ) {
        if self.stopped {
            return;
        }
        if phase == Phase::Settle {
            let at = self.started.elapsed();
            self.display.log(
                at,
                "the relay calms down (no more drops or new events); waiting for every subscription to settle",
            );
        }
        let end = tokio::time::sleep(limit);
        let mut end = pin!(end);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                biased;
                () = &mut end => break,
                () = stop.as_mut() => {
                    self.stopped = true;
                    self.display.log(self.started.elapsed(), "interrupted: skipping to the summary");
                    break;
                }
                // Session events first, so a reconnect is counted before the replay's EOSEs.
                Some(event) = self.session.next() => self.on_session(&event),
                Some((index, item)) = self.items.next() => {
                    if let Some(line) = self.tally.item(index, &item) {
                        self.display.log(self.started.elapsed(), &line);
                    }
                }
                _ = tick.tick() => {
                    let at = self.started.elapsed();
                    if phase == Phase::Hostile {
                        if let Some(severed) = self.relay.advance(at) {
                            self.display.log(at, &format!(
                                "relay severs every connection ({} open), no close frame",
                                severed.connections
                            ));
                        }
                    }
                    for note in self.tally.notes(at) {
                        self.display.log(at, &note);
                    }
                    self.show(phase, at);
                    if phase == Phase::Settle && self.tally.settled() {
                        break;
                    }
                }
            }
        }
    }

    fn on_session(&mut self, event: &SessionEvent) {
        let at = self.started.elapsed();
        if let Some(line) = self.tally.session(at, event) {
            self.display.log(at, &line);
        }
    }

    fn show(&mut self, phase: Phase, at: Duration) {
        let c = self.tally.counts();
        let gate = self.tally.gate_until.saturating_sub(at);
        let wire = self.relay.wire();
        let replay = wire
            .bursts
            .last()
            .map(|b| {
                format!(
                    "{} REQ bursts, largest {}",
                    b.len(),
                    b.iter().max().unwrap_or(&0)
                )
            })
            .unwrap_or_default();
        let subs = format!(
            "live {} | replaying {} | pending {} | retrying {} | queued {} | surfaced {}",
            c.live, c.replaying, c.pending, c.retrying, c.queued, c.surfaced,
        );
        let flow = format!(
            "events {} (dup {}) | retries {} | gate {} | socket #{} {} | {}",
            self.tally.events(),
            self.tally.duplicates(),
            self.tally.retries(),
            if gate.is_zero() {
                "closed".to_owned()
            } else {
                format!("open {}", secs(gate))
            },
            self.tally.connections,
            if self.tally.connected { "up" } else { "down" },
            replay,
        );
        let phase = match phase {
            Phase::Hostile => "hostile relay",
            Phase::Settle => "settling",
            Phase::Quiet => "settled",
        };
        self.display.status(at, phase, &subs, &flow);
    }

    /// Print the summary; returns whether the claim held.
    fn summary(&self, hostile: Duration, settle: Duration, bound: u32) -> bool {
        let tally = &self.tally;
        let missed: Vec<usize> = (0..tally.subs.len())
            .map(|i| {
                if !tally.is_live(i) {
                    return 0;
                }
                let stored = self.relay.stored_ids(&tally.subs[i].kinds);
                tally.missed(i, &stored)
            })
            .collect();
        let say = |line: &str| self.display.say(line);
        say("");
        say(&format!(
            "summary: {} of hostility, {} to settle",
            secs(hostile),
            secs(settle)
        ));
        say(&format!(
            "  {:<10} {:>5} {:>8} {:>11} {:>7} {:>9} {:>22}",
            "state", "subs", "events", "duplicates", "missed", "retries", "longest retry streak"
        ));
        let rows: [(&str, &dyn Fn(usize) -> bool); 4] = [
            ("live", &|i| tally.is_live(i)),
            ("queued", &|i| tally.subs[i].state == SubState::Queued),
            ("surfaced", &|i| tally.subs[i].state == SubState::Surfaced),
            ("unsettled", &|i| {
                !tally.is_live(i)
                    && !matches!(tally.subs[i].state, SubState::Queued | SubState::Surfaced)
            }),
        ];
        for (name, member) in rows {
            let subs: Vec<usize> = (0..tally.subs.len()).filter(|&i| member(i)).collect();
            if subs.is_empty() && name == "unsettled" {
                continue;
            }
            let sum = |f: &dyn Fn(usize) -> u64| subs.iter().map(|&i| f(i)).sum::<u64>();
            say(&format!(
                "  {:<10} {:>5} {:>8} {:>11} {:>7} {:>9} {:>22}",
                name,
                subs.len(),
                sum(&|i| tally.subs[i].events),
                sum(&|i| tally.subs[i].duplicates),
                sum(&|i| missed[i] as u64),
                sum(&|i| u64::from(tally.subs[i].retries)),
                subs.iter()
                    .map(|&i| tally.subs[i].longest_streak)
                    .max()
                    .unwrap_or(0),
            ));
        }
        for (i, sub) in tally.subs.iter().enumerate() {
            if let Some((reason, attempts)) = &sub.surfaced {
                say(&format!(
                    "  surfaced: subscription {i} after {attempts} retries: {reason}"
                ));
            }
        }
        let wire = self.relay.wire();
        let delays: Vec<String> = tally.reconnect_delays.iter().map(|d| secs(*d)).collect();
        say(&format!(
            "  sockets: {} opened, {} severed by the relay; reconnect delays [{}]",
            tally.connections,
            self.relay.drops(),
            delays.join(", ")
        ));
        say(&format!(
            "  gate: {} rate-limit refusals, {} windows, longest {}; limit learned: {}",
            tally.refusals,
            tally.gate_windows,
            secs(tally.longest_gate),
            tally
                .subscription_limit
                .map_or("none".to_owned(), |m| format!("{m} subscriptions")),
        ));
        say(&format!(
            "  auth: {} challenges, {} accepted, {} refused",
            tally.challenges, tally.authenticated, tally.auth_failed
        ));
        say(&format!(
            "  relay saw: {} REQs, {} CLOSEs, {} AUTHs over {} connections; {} events stored",
            wire.reqs,
            wire.closes,
            wire.auths,
            wire.connections,
            self.relay.stored()
        ));
        for (conn, bursts) in wire.bursts.iter().enumerate().skip(1) {
            say(&format!(
                "  replay on connection {}: {} REQs in {} bursts, largest {}",
                conn + 1,
                bursts.iter().sum::<usize>(),
                bursts.len(),
                bursts.iter().max().unwrap_or(&0)
            ));
        }
        let checks = tally.checks(&missed, bound);
        let holds = checks.iter().all(|c| c.holds);
        say("");
        say(if holds {
            "claim holds:"
        } else {
            "claim does NOT hold:"
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
}
