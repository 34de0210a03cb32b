//! The publish outbox: events waiting for their OK, matched by event id (relays answer out
//! of order), re-sent under a bound, held for authentication, kept across reconnects.

use std::collections::BTreeMap;

use crate::backoff::Backoff;
use crate::gate::RateLimitGate;
use crate::nostr::config::RelayConfig;
use crate::nostr::message::EventId;
use crate::nostr::output::{Carries, Event, Rejection, Transmit};
use crate::nostr::reason::{classify, Class, Terminal};
use crate::rng::Rng;
use crate::time::Instant;
use crate::timers::Timers;

/// The parts of the session the outbox acts through.
pub(crate) struct Env<'a> {
    pub(crate) config: &'a RelayConfig,
    pub(crate) gate: &'a mut RateLimitGate,
    pub(crate) rng: &'a mut Rng,
    pub(crate) transmits: &'a mut std::collections::VecDeque<Transmit>,
    pub(crate) events: &'a mut std::collections::VecDeque<Event>,
    pub(crate) open: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not on the wire (no socket yet).
    Queued,
    /// EVENT sent; waiting for its OK.
    Sent,
    /// Refused or timed out; re-sent when its timer fires.
    Retrying,
    /// Refused with `auth-required:`; held for `authenticate`.
    AwaitingAuth,
}

#[derive(Debug)]
struct Outgoing {
    json: Box<str>,
    state: State,
    retries: u32,
    auth_retried: bool,
    timer: Option<Instant>,
    last_failure: Rejection,
}

#[derive(Debug, Default)]
pub(crate) struct Outbox {
    entries: BTreeMap<EventId, Outgoing>,
    timers: Timers<EventId>,
}

impl Outbox {
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The relay's last refusal of `id`, while it waits for a retry or for AUTH: what a
    /// publish deadline reports instead of "no answer".
    pub(crate) fn refusal(&self, id: &EventId) -> Option<&Rejection> {
        let entry = self.entries.get(id)?;
        matches!(entry.state, State::Retrying | State::AwaitingAuth)
            .then_some(&entry.last_failure)
            .filter(|r| matches!(r, Rejection::Refused { .. }))
    }

    /// Every event waiting for its OK, by id.
    pub(crate) fn events(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.values().map(|e| &*e.json)
    }

    pub(crate) fn contains(&self, id: EventId) -> bool {
        self.entries.contains_key(&id)
    }

    pub(crate) fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Every deadline moves `by` later: the application was suspended that long, and no
    /// clock ran against the relay meanwhile.
    pub(crate) fn postpone(&mut self, by: std::time::Duration) {
        for (&id, entry) in &mut self.entries {
            if let Some(at) = entry.timer {
                self.timers
                    .set(id, &mut entry.timer, Some(at.saturating_add(by)));
            }
        }
    }

    /// Reject every event whose EVENT frame would be larger than `max` bytes.
    pub(crate) fn reject_larger(&mut self, max: usize, env: &mut Env<'_>) {
        let larger: Vec<(EventId, usize)> = self
            .entries
            .iter()
            .map(|(id, e)| (*id, event_frame_len(&e.json)))
            .filter(|&(_, len)| len > max)
            .collect();
        for (id, len) in larger {
            self.reject(id, Rejection::TooLarge { len, max }, env);
        }
    }

    /// Add an event; it goes on the wire at once when a socket is open.
    pub(crate) fn push(&mut self, now: Instant, id: EventId, json: &str, env: &mut Env<'_>) {
        let entry = Outgoing {
            json: json.into(),
            state: State::Queued,
            retries: 0,
            auth_retried: false,
            timer: None,
            last_failure: Rejection::TimedOut,
        };
        self.entries.insert(id, entry);
        if env.open {
            self.send(now, id, env);
        }
    }

    /// An OK for `id`. Returns `false` if the outbox was not waiting for one.
    pub(crate) fn on_ok(
        &mut self,
        now: Instant,
        id: EventId,
        accepted: bool,
        message: &str,
        env: &mut Env<'_>,
    ) -> bool {
        let Some(entry) = self.entries.get(&id) else {
            return false;
        };
        if entry.state != State::Sent {
            return false;
        }
        let class = classify(message);
        if accepted || class == Class::Terminal(Terminal::Duplicate) {
            self.remove(id);
            env.events.push_back(Event::Published { id });
            return true;
        }
        let refused = Rejection::Refused {
            message: message.to_owned(),
        };
        match class {
            Class::RateLimited { retry_after } => {
                let until = env.gate.refuse(now, retry_after);
                env.events.push_back(Event::RateLimited { until });
                self.retry(now, id, refused, env);
            }
            Class::AuthRequired => self.hold_for_auth(now, id, refused, env),
            Class::Retryable => self.retry(now, id, refused, env),
            Class::Terminal(_) => self.reject(id, refused, env),
        }
        true
    }

    /// Fire every timer due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant, env: &mut Env<'_>) {
        while let Some(id) = self.timers.due(now) {
            self.set_timer(id, None);
            let Some(state) = self.entries.get(&id).map(|e| e.state) else {
                continue;
            };
            match state {
                State::Sent => self.retry(now, id, Rejection::TimedOut, env),
                State::Retrying => self.resend(now, id, env),
                State::AwaitingAuth => {
                    let failure = self.entries[&id].last_failure.clone();
                    self.reject(id, failure, env);
                }
                State::Queued => {}
            }
        }
    }

    /// A socket opened: send everything that waited for one.
    pub(crate) fn on_open(&mut self, now: Instant, env: &mut Env<'_>) {
        let waiting: Vec<EventId> = self.ids_in(State::Queued);
        for id in waiting {
            self.send(now, id, env);
        }
    }

    /// The socket is gone: everything waits for the next one, with fresh retry state (the
    /// relay answers duplicates of what it did get with `duplicate:`, which counts as success).
    pub(crate) fn on_socket_lost(&mut self) {
        self.timers.clear();
        for entry in self.entries.values_mut() {
            entry.state = State::Queued;
            entry.timer = None;
            entry.retries = 0;
            entry.auth_retried = false;
        }
    }

    /// AUTH accepted: held events get their one retry.
    pub(crate) fn on_authenticated(&mut self, now: Instant, env: &mut Env<'_>) {
        for id in self.ids_in(State::AwaitingAuth) {
            self.send(now, id, env);
        }
    }

    /// AUTH refused: held events are rejected with their own refusal.
    pub(crate) fn on_auth_failed(&mut self, env: &mut Env<'_>) {
        for id in self.ids_in(State::AwaitingAuth) {
            let failure = self.entries[&id].last_failure.clone();
            self.reject(id, failure, env);
        }
    }

    fn send(&mut self, now: Instant, id: EventId, env: &mut Env<'_>) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        entry.state = State::Sent;
        let mut text = String::with_capacity(entry.json.len() + 12);
        text.push_str("[\"EVENT\",");
        text.push_str(&entry.json);
        text.push(']');
        env.transmits.push_back(Transmit::Send {
            text,
            carries: Carries::Event(id),
        });
        self.set_timer(id, Some(now.saturating_add(env.config.publish_timeout)));
    }

    fn resend(&mut self, now: Instant, id: EventId, env: &mut Env<'_>) {
        if env.gate.is_open(now) {
            let until = env.gate.remaining(now);
            self.set_timer(id, Some(now.saturating_add(until)));
        } else if env.open {
            self.send(now, id, env);
        } else if let Some(entry) = self.entries.get_mut(&id) {
            entry.state = State::Queued;
        }
    }

    fn retry(&mut self, now: Instant, id: EventId, failure: Rejection, env: &mut Env<'_>) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        let mut backoff = Backoff::with_attempts(env.config.closed_retry, entry.retries);
        let Some(delay) = backoff.next_delay(env.rng) else {
            self.reject(id, failure, env);
            return;
        };
        entry.retries = backoff.attempts();
        entry.state = State::Retrying;
        entry.last_failure = failure;
        let at = now.saturating_add(delay.max(env.gate.remaining(now)));
        self.set_timer(id, Some(at));
    }

    fn hold_for_auth(&mut self, now: Instant, id: EventId, failure: Rejection, env: &mut Env<'_>) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        // Without a signer no AUTH will come: the refusal is the answer, now (held, it was
        // lost to the publish deadline).
        if entry.auth_retried || !env.config.authenticates {
            self.reject(id, failure, env);
            return;
        }
        entry.auth_retried = true;
        entry.state = State::AwaitingAuth;
        entry.last_failure = failure;
        self.set_timer(id, Some(now.saturating_add(env.config.auth_timeout)));
    }

    fn reject(&mut self, id: EventId, reason: Rejection, env: &mut Env<'_>) {
        self.remove(id);
        env.events.push_back(Event::Rejected { id, reason });
    }

    fn remove(&mut self, id: EventId) {
        self.set_timer(id, None);
        self.entries.remove(&id);
    }

    fn set_timer(&mut self, id: EventId, at: Option<Instant>) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        self.timers.set(id, &mut entry.timer, at);
    }

    fn ids_in(&self, state: State) -> Vec<EventId> {
        self.entries
            .iter()
            .filter(|(_, e)| e.state == state)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// Bytes of `["EVENT",<json>]`.
pub(crate) fn event_frame_len(json: &str) -> usize {
    json.len() + r#"["EVENT",]"#.len()
}

#[cfg(feature = "fuzzing")]
impl Outbox {
    /// Timers agree with entries, each state has the timer it needs, and nothing is on the
    /// wire without a socket.
    pub(crate) fn check_consistency(&self, link_open: bool) -> Result<(), String> {
        let mut with_timer = 0;
        for (id, e) in &self.entries {
            with_timer += usize::from(e.timer.is_some());
            let wants_timer = e.state != State::Queued;
            if e.timer.is_some() != wants_timer {
                return Err(format!(
                    "publish {id} is {:?} with timer {:?}",
                    e.state, e.timer
                ));
            }
            if !link_open && e.state != State::Queued {
                return Err(format!("publish {id} is {:?} without a socket", e.state));
            }
        }
        // Without allocating: every index entry is its entry's own deadline, and there are
        // as many as entries with a deadline.
        let mut indexed = 0;
        for (at, id) in self.timers.iter() {
            indexed += 1;
            let own = self.entries.get(&id).and_then(|e| e.timer);
            if own != Some(at) {
                return Err(format!(
                    "outbox timer ({at:?}, {id}) but the entry has {own:?}"
                ));
            }
        }
        if indexed != with_timer {
            return Err(format!(
                "{indexed} outbox timers for {with_timer} entries with a deadline"
            ));
        }
        Ok(())
    }
}
