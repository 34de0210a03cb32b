//! The session's invariants, checked after every step of the [`Sim`](crate::sim::Sim): one
//! definition shared by property tests, transcripts, soak runs and fuzz targets.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tether_core::nostr::{Carries, Event, RelayConfig, RelaySession, SubscriptionId};
use tether_core::Instant;

/// What the invariant checker remembers between steps.
#[derive(Debug)]
pub struct Invariants {
    max_retries: u32,
    batch: usize,
    pause: Duration,
    foreground: bool,
    disconnected: bool,
    /// The application said the device has no network: no socket may be opened.
    offline: bool,
    last_gate: Option<Instant>,
    seen_events: usize,
    steps: u64,
    /// `Stats::reqs` after the last step: whether this step sent a REQ.
    reqs: u64,
    subscribed: BTreeSet<SubscriptionId>,
    unsubscribed: BTreeSet<SubscriptionId>,
    closed: BTreeMap<SubscriptionId, usize>,
    /// REQs per subscription since its retry state last cleared (EOSE or a new socket).
    reqs_since_clear: BTreeMap<SubscriptionId, u32>,
    /// The wire id of each subscription's last REQ: one re-sent under the same id is a
    /// catch-up step, not a retry.
    last_wire: BTreeMap<SubscriptionId, String>,
    /// Background sends (REQs, `NEG-OPEN`s) of the last `replay_pause` on this socket.
    window: std::collections::VecDeque<Instant>,
    /// Background sends observed, grouped by instant (count per instant), for tests to
    /// inspect.
    pub batches: Vec<(Instant, usize)>,
}

impl Invariants {
    /// A checker for a session running `config`.
    pub fn new(config: &RelayConfig) -> Self {
        Invariants {
            max_retries: config.closed_retry.max_attempts.unwrap_or(u32::MAX),
            batch: config.replay_batch,
            pause: config.replay_pause,
            foreground: false,
            disconnected: true,
            offline: false,
            last_gate: None,
            seen_events: 0,
            steps: 0,
            reqs: 0,
            subscribed: BTreeSet::new(),
            unsubscribed: BTreeSet::new(),
            closed: BTreeMap::new(),
            reqs_since_clear: BTreeMap::new(),
            last_wire: BTreeMap::new(),
            window: std::collections::VecDeque::new(),
            batches: Vec::new(),
        }
    }

    /// Subscriptions surfaced as `Closed`.
    pub fn closed(&self) -> impl Iterator<Item = SubscriptionId> + '_ {
        self.closed.keys().copied()
    }

    /// What the script is about to do, as far as the invariants care: the application
    /// subscribed (foreground work may be sent), asked to disconnect or connect, or the
    /// network went off or on. The sim says it in these terms, so the invariants do not
    /// depend on its script.
    pub(crate) fn before(&mut self, step: Step) {
        match step {
            Step::Subscribe => self.foreground = true,
            Step::Disconnect => self.disconnected = true,
            Step::Connect => self.disconnected = false,
            Step::Online(online) => self.offline = !online,
        }
    }

    /// The process died: nothing may be transmitted until it is restored.
    pub(crate) fn killed(&mut self) {
        self.disconnected = true;
    }

    /// A new process restored the session and connects: its gate, counters and socket
    /// pacing start afresh.
    pub(crate) fn restored(&mut self) {
        self.disconnected = false;
        self.last_gate = None;
        self.reqs = 0;
        self.reqs_since_clear.clear();
        self.last_wire.clear();
        self.window.clear();
    }

    pub(crate) fn after_action(&mut self) {
        self.foreground = false;
    }

    pub(crate) fn subscribed(&mut self, id: SubscriptionId) {
        self.subscribed.insert(id);
    }

    pub(crate) fn unsubscribed(&mut self, id: SubscriptionId) {
        self.unsubscribed.insert(id);
    }

    /// The Sim delivered a socket's open: pacing restarts, since a new socket's replay may
    /// start at once (`Scheduler::on_open`); sends are paced within one socket.
    pub(crate) fn opened(&mut self) {
        self.window.clear();
    }

    /// A transmit other than a frame: after `disconnect` only the socket's close may follow.
    pub(crate) fn transmitted(&mut self, what: &str, transcript: &str) {
        if self.disconnected && what != "Close" {
            fail(transcript, &format!("{what} after disconnect"));
        }
        if self.offline && what == "Open" {
            fail(transcript, "a connection attempt while offline");
        }
    }

    /// A frame the session transmitted at `now`.
    pub(crate) fn sent(
        &mut self,
        now: Instant,
        text: &str,
        carries: Carries,
        session: &RelaySession,
        transcript: &str,
    ) {
        if self.disconnected {
            fail(transcript, &format!("sent {text} after disconnect"));
        }
        let id = match carries {
            Carries::Req(id) => id,
            Carries::Negentropy(_) if text.starts_with("[\"NEG-OPEN\"") => {
                self.paced(now, text, session, transcript);
                return;
            }
            _ => return,
        };
        if self.closed.contains_key(&id) {
            fail(
                transcript,
                &format!("re-REQ of {id} after it was surfaced as Closed"),
            );
        }
        // The first REQ, at most `max_retries` re-REQs, and the one retry after auth; a
        // catch-up's re-sends under the same wire id (pages, fetches) are not retries.
        let wire = wire_of(text);
        let resend = self.last_wire.get(&id).is_some_and(|w| *w == wire);
        self.last_wire.insert(id, wire);
        if !resend {
            let n = self.reqs_since_clear.entry(id).or_default();
            *n += 1;
            if *n > self.max_retries.saturating_add(2) {
                fail(
                    transcript,
                    &format!("{id} sent {n} REQs without a clean EOSE or new socket"),
                );
            }
        }
        if self.foreground {
            return;
        }
        self.paced(now, text, session, transcript);
    }

    /// A background send: never inside the gate window, at most `replay_batch` in any
    /// `replay_pause`.
    fn paced(&mut self, now: Instant, text: &str, session: &RelaySession, transcript: &str) {
        if session.gate().is_open(now) {
            fail(
                transcript,
                &format!("background send {text} inside the gate window"),
            );
        }
        while self.window.front().is_some_and(|&t| now - t >= self.pause) {
            self.window.pop_front();
        }
        if self.window.len() >= self.batch {
            fail(
                transcript,
                &format!(
                    "{} background sends within {:?}",
                    self.window.len() + 1,
                    self.pause
                ),
            );
        }
        self.window.push_back(now);
        match self.batches.last_mut() {
            Some((at, count)) if *at == now => *count += 1,
            _ => self.batches.push((now, 1)),
        }
    }

    /// `poll_timeout` after `handle_timeout(now)` is later than `now` or output is queued.
    pub(crate) fn after_timeout(&mut self, now: Instant, session: &RelaySession, transcript: &str) {
        if session.has_output() {
            return;
        }
        if session.poll_timeout().is_some_and(|t| t <= now) {
            fail(
                transcript,
                &format!(
                    "poll_timeout {:?} <= now {now:?} with no output queued",
                    session.poll_timeout()
                ),
            );
        }
    }

    /// After every step: bounded retries, limits, exactly-once surfacing, a monotone gate.
    pub(crate) fn after_step(
        &mut self,
        _now: Instant,
        session: &RelaySession,
        events: &[(Instant, Event)],
        transcript: &str,
    ) {
        let mut gate_reset = false;
        // The O(subscriptions) sweep runs when state changed shape (a subscription surfaced,
        // retried, queued, or the socket came or went) and every 256th step regardless; steps
        // that only delivered events cannot break what it checks.
        self.steps += 1;
        let mut sweep = self.steps % 256 == 0 || session.subscription_count() <= 64;
        for (_, e) in &events[self.seen_events..] {
            sweep |= !matches!(e, Event::Received { .. } | Event::Eose { .. });
            match e {
                Event::Closed { sub, .. } => {
                    let n = self.closed.entry(*sub).or_default();
                    *n += 1;
                    if *n > 1 {
                        fail(transcript, &format!("{sub} surfaced twice"));
                    }
                }
                Event::Disconnected { .. } => {
                    gate_reset = true;
                    self.reqs_since_clear.clear();
                }
                Event::Connected => self.reqs_since_clear.clear(),
                Event::Eose { sub } => {
                    self.reqs_since_clear.remove(sub);
                }
                _ => {}
            }
        }
        self.seen_events = events.len();
        let gate = session.gate().ready_at();
        if let (Some(last), Some(now_until), false) = (self.last_gate, gate, gate_reset) {
            if now_until < last {
                fail(transcript, "gate window shrank without a reset");
            }
        }
        self.last_gate = gate;
        // A REQ goes out only below the limit, or as the one probe past a declared cap (a
        // lowered cap can leave more open than it allows until they are refused or closed).
        let sent = session.stats().reqs > self.reqs;
        self.reqs = session.stats().reqs;
        if let (Some(limit), true) = (session.subscription_limit(), sent) {
            let probe = usize::from(session.applied().limit_is_declared);
            if session.open_subscriptions() > limit + probe {
                fail(
                    transcript,
                    &format!(
                        "a REQ sent with {} open > limit {limit} (+{probe} probe)",
                        session.open_subscriptions()
                    ),
                );
            }
        }
        if sweep {
            self.sweep(session, transcript);
        }
    }

    /// The O(subscriptions) checks: the core's own bookkeeping, retries bounded, and every
    /// subscription the app made accounted for exactly once (registered, or surfaced as
    /// `Closed`, or unsubscribed).
    pub(crate) fn sweep(&self, session: &RelaySession, transcript: &str) {
        if let Err(e) = session.check_consistency() {
            fail(transcript, &format!("session bookkeeping: {e}"));
        }
        let views = session.subscriptions();
        for v in &views {
            if v.retries > self.max_retries {
                fail(transcript, &format!("{} retried {} times", v.id, v.retries));
            }
            if self.closed.contains_key(&v.id) {
                fail(
                    transcript,
                    &format!("{} surfaced but still registered", v.id),
                );
            }
        }
        for id in self.subscribed.difference(&self.unsubscribed) {
            // `subscriptions()` is in id order.
            let live = views.binary_search_by_key(id, |v| v.id).is_ok();
            let surfaced = self.closed.contains_key(id);
            if live == surfaced {
                fail(
                    transcript,
                    &format!("{id} is registered={live} and surfaced={surfaced}"),
                );
            }
        }
    }
}

fn fail(transcript: &str, what: &str) -> ! {
    if transcript.is_empty() {
        panic!(
            "invariant violated: {what}\n(no transcript: the Sim ran quiet, as the relay_session \
             fuzz target does; `tether_testkit::fuzz::relay_session_transcript` replays the input \
             with it, and so does `cargo test -p tether-testkit --test fuzz_corpus` for a corpus file)"
        );
    }
    let tail: Vec<&str> = transcript.lines().rev().take(60).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    panic!(
        "invariant violated: {what}\n--- last transcript lines ---\n{}",
        tail.join("\n")
    );
}

/// The wire id of a `["REQ","<id>",...]` frame.
fn wire_of(text: &str) -> String {
    text.strip_prefix("[\"REQ\",\"")
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_owned()
}

/// What the invariants are told before a scripted step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    Subscribe,
    Disconnect,
    Connect,
    Online(bool),
}
