//! What the demo observed, from the application's side only: the subscription streams and
//! the session events. The summary and the claim are computed from this.

use std::collections::HashSet;
use std::time::Duration;

use tether_tokio::tether_core::nostr::message::EventId;
use tether_tokio::{SessionEvent, SubscriptionEvent};

/// Where one subscription stands, as its stream told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubState {
    /// Nothing decisive yet (its REQ is out, or waits for its replay batch).
    Pending,
    /// Had EOSE on connection number `conn` (1-based).
    Live { conn: u32 },
    /// Refused; a re-REQ is scheduled (or its REQ went unanswered and is retried).
    Retrying,
    /// Waiting for a free slot under the relay's subscription limit.
    Queued,
    /// Closed for good; the application was told.
    Surfaced,
}

/// One subscription's record.
#[derive(Debug)]
pub(crate) struct SubTally {
    /// The event kinds its filter asks for.
    pub(crate) kinds: Vec<u64>,
    pub(crate) state: SubState,
    /// It had been live: an EOSE after that starts a catch-up, and it is live again only
    /// once the catch-up reports.
    was_live: bool,
    ids: HashSet<EventId>,
    /// Events received.
    pub(crate) events: u64,
    /// Events received that this subscription had already received.
    pub(crate) duplicates: u64,
    /// `Retrying` items received.
    pub(crate) retries: u32,
    /// Highest retry attempt number seen (the longest refusal streak).
    pub(crate) longest_streak: u32,
    /// `Closed` items received.
    pub(crate) closed: u32,
    /// Items received after `Closed` (there must be none).
    pub(crate) after_closed: u32,
    /// The reason and attempts of its `Closed`.
    pub(crate) surfaced: Option<(String, u32)>,
}

/// Everything the demo observed.
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) subs: Vec<SubTally>,
    /// Sockets opened so far (`Connected` events).
    pub(crate) connections: u32,
    pub(crate) connected: bool,
    /// Reconnect delays the session announced.
    pub(crate) reconnect_delays: Vec<Duration>,
    /// Rate-limit refusals announced (each may extend the gate window).
    pub(crate) refusals: u32,
    /// Times the gate opened after being closed, and the longest window announced.
    pub(crate) gate_windows: u32,
    pub(crate) longest_gate: Duration,
    /// When the latest window ends (demo time).
    pub(crate) gate_until: Duration,
    pub(crate) challenges: u32,
    pub(crate) authenticated: u32,
    pub(crate) auth_failed: u32,
    pub(crate) subscription_limit: Option<usize>,
    pub(crate) notices: u32,
    /// Refusals since the last [`Tally::notes`].
    refusals_unreported: u32,
    /// Whether the subscription limit changed since the last [`Tally::notes`].
    limit_unreported: bool,
}

/// Subscriptions per state, for the live display.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) live: usize,
    /// Live on an older connection: waiting for their replay's EOSE.
    pub(crate) replaying: usize,
    pub(crate) pending: usize,
    pub(crate) retrying: usize,
    pub(crate) queued: usize,
    pub(crate) surfaced: usize,
}

/// One line of the claim and whether it held.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) claim: String,
    pub(crate) holds: bool,
    /// What broke it, when it did not hold.
    pub(crate) detail: String,
}

impl Tally {
    /// A tally for subscriptions asking for these kinds, in order.
    pub(crate) fn new(kinds: Vec<Vec<u64>>) -> Self {
        Tally {
            subs: kinds
                .into_iter()
                .map(|kinds| SubTally {
                    kinds,
                    state: SubState::Pending,
                    was_live: false,
                    ids: HashSet::new(),
                    events: 0,
                    duplicates: 0,
                    retries: 0,
                    longest_streak: 0,
                    closed: 0,
                    after_closed: 0,
                    surfaced: None,
                })
                .collect(),
            connections: 0,
            connected: false,
            reconnect_delays: Vec::new(),
            refusals: 0,
            gate_windows: 0,
            longest_gate: Duration::ZERO,
            gate_until: Duration::ZERO,
            challenges: 0,
            authenticated: 0,
            auth_failed: 0,
            subscription_limit: None,
            notices: 0,
            refusals_unreported: 0,
            limit_unreported: false,
        }
    }

    /// Record a session event at demo time `now`; returns a line worth logging.
    pub(crate) fn session(&mut self, now: Duration, event: &SessionEvent) -> Option<String> {
        match event {
            SessionEvent::Connected => {
                self.connections += 1;
                self.connected = true;
                Some(format!(
                    "connected (socket #{}); replaying subscriptions",
                    self.connections
                ))
            }
            SessionEvent::Disconnected { reconnect_in, .. } => {
                self.connected = false;
                let Some(delay) = reconnect_in else {
                    return Some("disconnected".into());
                };
                self.reconnect_delays.push(*delay);
                Some(format!(
                    "disconnected; reconnect attempt in {} (backoff with jitter)",
                    secs(*delay)
                ))
            }
            // A burst of refusals comes as a burst of events: [`Tally::notes`] sums them up.
            SessionEvent::RateLimited { window } => {
                if now >= self.gate_until {
                    self.gate_windows += 1;
                }
                self.refusals += 1;
                self.refusals_unreported += 1;
                self.longest_gate = self.longest_gate.max(*window);
                self.gate_until = self.gate_until.max(now + *window);
                None
            }
            SessionEvent::SubscriptionLimit { max } => {
                self.subscription_limit = Some(*max);
                self.limit_unreported = true;
                None
            }
            SessionEvent::AuthChallenge { .. } => {
                self.challenges += 1;
                Some("AUTH challenge; signing kind 22242".into())
            }
            SessionEvent::Authenticated => {
                self.authenticated += 1;
                Some("authenticated; held REQs go out again".into())
            }
            SessionEvent::AuthFailed { reason } => {
                self.auth_failed += 1;
                Some(format!("AUTH refused: {reason}"))
            }
            SessionEvent::Notice { message } => {
                self.notices += 1;
                Some(format!("NOTICE: {message}"))
            }
            SessionEvent::SignerFailed { error } => Some(error.to_string()),
            SessionEvent::PeerError { error } => Some(format!("malformed frame: {error:?}")),
            other => Some(format!("{other:?}")),
        }
    }

    /// Lines summing up the refusals and limits announced since the last call, at `now`.
    pub(crate) fn notes(&mut self, now: Duration) -> Vec<String> {
        let mut notes = Vec::new();
        if self.refusals_unreported > 0 {
            notes.push(format!(
                "rate-limited x{}: gate open for {}; retries and replay batches wait behind it",
                self.refusals_unreported,
                secs(self.gate_until.saturating_sub(now))
            ));
            self.refusals_unreported = 0;
        }
        if let (true, Some(max)) = (self.limit_unreported, self.subscription_limit) {
            notes.push(format!(
                "relay limit learned: at most {max} subscriptions open; the rest queue"
            ));
            self.limit_unreported = false;
        }
        notes
    }

    /// Record one item of subscription `index`; returns a line worth logging.
    pub(crate) fn item(&mut self, index: usize, item: &SubscriptionEvent) -> Option<String> {
        let connections = self.connections;
        let sub = self.subs.get_mut(index)?;
        if sub.closed > 0 {
            sub.after_closed += 1;
        }
        match item {
            SubscriptionEvent::Event(event) => {
                sub.events += 1;
                if !sub.ids.insert(event.id) {
                    sub.duplicates += 1;
                }
            }
            SubscriptionEvent::Eose if sub.was_live => sub.state = SubState::Pending,
            SubscriptionEvent::Eose | SubscriptionEvent::CaughtUp(_) => {
                sub.was_live = true;
                sub.state = SubState::Live { conn: connections };
            }
            SubscriptionEvent::Retrying { attempt, .. } => {
                sub.state = SubState::Retrying;
                sub.retries += 1;
                sub.longest_streak = sub.longest_streak.max(*attempt);
            }
            SubscriptionEvent::EoseTimeout => sub.state = SubState::Retrying,
            SubscriptionEvent::Queued => sub.state = SubState::Queued,
            SubscriptionEvent::Closed { reason, attempts } => {
                sub.state = SubState::Surfaced;
                sub.closed += 1;
                sub.surfaced = Some((reason.clone(), *attempts));
                return Some(format!(
                    "subscription {index} surfaced after {attempts} retries: {reason}"
                ));
            }
            other => return Some(format!("subscription {index}: {other:?}")),
        }
        None
    }

    /// Subscriptions per state.
    pub(crate) fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for sub in &self.subs {
            match sub.state {
                SubState::Live { conn } if self.is_current(conn) => counts.live += 1,
                SubState::Live { .. } => counts.replaying += 1,
                SubState::Pending => counts.pending += 1,
                SubState::Retrying => counts.retrying += 1,
                SubState::Queued => counts.queued += 1,
                SubState::Surfaced => counts.surfaced += 1,
            }
        }
        counts
    }

    /// Whether every subscription is live on the current socket, queued for a slot, or
    /// surfaced: nothing is still in flight.
    pub(crate) fn settled(&self) -> bool {
        let counts = self.counts();
        counts.live + counts.queued + counts.surfaced == self.subs.len()
    }

    /// Events received, over all subscriptions.
    pub(crate) fn events(&self) -> u64 {
        self.subs.iter().map(|s| s.events).sum()
    }

    /// Duplicate events, over all subscriptions.
    pub(crate) fn duplicates(&self) -> u64 {
        self.subs.iter().map(|s| s.duplicates).sum()
    }

    /// Retries, over all subscriptions.
    pub(crate) fn retries(&self) -> u32 {
        self.subs.iter().map(|s| s.retries).sum()
    }

    /// Stored events a live subscription asked for and never received.
    pub(crate) fn missed(&self, index: usize, stored: &[EventId]) -> usize {
        let Some(sub) = self.subs.get(index) else {
            return 0;
        };
        stored.iter().filter(|id| !sub.ids.contains(id)).count()
    }

    /// Whether `sub` is live on the current socket.
    pub(crate) fn is_live(&self, index: usize) -> bool {
        self.subs
            .get(index)
            .is_some_and(|s| matches!(s.state, SubState::Live { conn } if self.is_current(conn)))
    }

    fn is_current(&self, conn: u32) -> bool {
        self.connected && conn == self.connections
    }

    /// The claim, line by line. `missed` is the number of stored events each live
    /// subscription lacks; `bound` the core's retry bound per refusal streak.
    pub(crate) fn checks(&self, missed: &[usize], bound: u32) -> Vec<Check> {
        let list = |pred: &dyn Fn(usize, &SubTally) -> bool| -> String {
            let ids: Vec<String> = self
                .subs
                .iter()
                .enumerate()
                .filter(|(i, s)| pred(*i, s))
                .map(|(i, _)| i.to_string())
                .take(10)
                .collect();
            format!("subscriptions {}", ids.join(", "))
        };
        let unsettled = |i: usize, s: &SubTally| {
            !self.is_live(i) && !matches!(s.state, SubState::Queued | SubState::Surfaced)
        };
        let closed_badly = |_: usize, s: &SubTally| s.closed > 1 || s.after_closed > 0;
        let duplicated = |_: usize, s: &SubTally| s.duplicates > 0;
        let missing = |i: usize, _: &SubTally| missed.get(i).is_some_and(|&m| m > 0);
        let unbounded = |_: usize, s: &SubTally| {
            s.longest_streak > bound || s.surfaced.as_ref().is_some_and(|(_, a)| *a > bound)
        };
        let check = |claim: String, pred: &dyn Fn(usize, &SubTally) -> bool| {
            let holds = !self.subs.iter().enumerate().any(|(i, s)| pred(i, s));
            Check {
                claim,
                holds,
                detail: if holds { String::new() } else { list(pred) },
            }
        };
        vec![
            check(
                "every subscription is live, queued for a slot, or surfaced".into(),
                &unsettled,
            ),
            check(
                "each surfaced subscription was closed exactly once, with nothing after".into(),
                &closed_badly,
            ),
            check(
                "no event was delivered twice to a subscription".into(),
                &duplicated,
            ),
            check(
                "every live subscription has every stored event it asked for".into(),
                &missing,
            ),
            check(
                format!("retries stayed bounded: at most {bound} per refusal streak"),
                &unbounded,
            ),
        ]
    }
}

/// `1.25s`.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}
