//! What the session does about a refused subscription: the refusal classes, the bounded
//! retry behind the gate, the hold for authentication, and the subscription timers.

use super::RelaySession;
use crate::backoff::Backoff;
use crate::nostr::output::Event;
use crate::nostr::reason::{Class, Terminal};
use crate::nostr::subscription::{SubState, SubscriptionId};
use crate::time::Instant;

impl RelaySession {
    /// What a refusal of `id` means, per its class. `id` has already left the open set.
    pub(super) fn refuse(&mut self, now: Instant, id: SubscriptionId, class: Class, message: &str) {
        let stable_after = self.config.link.stable_after;
        if let Some(sub) = self.subs.get_mut(id) {
            sub.refused(now, stable_after);
        }
        match class {
            Class::Terminal(Terminal::TooManySubscriptions) => self.refuse_for_cap(id, message),
            Class::Terminal(_) => self.surface(id, message.to_owned()),
            Class::AuthRequired => self.hold_for_auth(now, id, message),
            Class::RateLimited { retry_after } => {
                let until = self.gate.refuse(now, retry_after);
                self.events.push_back(Event::RateLimited { until });
                self.schedule_retry(now, id, message);
            }
            Class::Retryable => self.schedule_retry(now, id, message),
        }
    }

    /// A cap refusal, in any dialect: learn the cap from the REQs that were open ahead of
    /// the refused one, and queue it for a slot (not surfaced, not retried on a timer into
    /// the same wall). Only when none of ours was open ahead of it is there no slot of ours
    /// to wait for (the relay counts other connections, or allows none): then it is
    /// terminal and surfaced, as the rule book has `too many subscriptions`.
    ///
    /// A queued subscription is sent only below the cap, so its next cap refusal lowers
    /// the learned cap, which never rises again, and at zero ahead it is surfaced. That
    /// bound leans on the relay naming the refused REQ; a NOTICE-only refusal pinned on the
    /// wrong one can re-queue a subscription the relay never refused. So each re-queue also
    /// counts as a re-REQ after a refusal, under the same bound as the other retries
    /// (`closed_retry.max_attempts`, 5, cleared by a clean EOSE or a new socket): past it
    /// the subscription is surfaced.
    fn refuse_for_cap(&mut self, id: SubscriptionId, message: &str) {
        let max_attempts = self.config.closed_retry.max_attempts.unwrap_or(u32::MAX);
        let Some((seq, retries)) = self.subs.get(id).map(|s| (s.sent_seq, s.retries)) else {
            return;
        };
        let before = self
            .subs
            .iter()
            .filter(|s| s.state.is_open() && s.sent_seq < seq)
            .count();
        if let Some(max) = self.scheduler.learn_limit(before) {
            self.events.push_back(Event::SubscriptionLimit { max });
        }
        if before == 0 || retries >= max_attempts {
            self.surface(id, message.to_owned());
            return;
        }
        if let Some(sub) = self.subs.get_mut(id) {
            sub.retries += 1;
        }
        self.enqueue(id);
        self.tell_queued(id);
    }

    /// Bounded re-REQ: delay = max(gate remaining, own full-jitter backoff); when the retries
    /// are spent the application hears `Closed` once and the subscription is gone.
    pub(super) fn schedule_retry(&mut self, now: Instant, id: SubscriptionId, message: &str) {
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        let mut backoff = Backoff::with_attempts(self.config.closed_retry, sub.retries);
        let Some(delay) = backoff.next_delay(&mut self.rng) else {
            self.surface(id, message.to_owned());
            return;
        };
        sub.retries = backoff.attempts();
        let at = now.saturating_add(delay.max(self.gate.remaining(now)));
        sub.state = SubState::Retrying;
        let attempt = sub.retries;
        self.set_timer(id, Some(at));
        self.events.push_back(Event::Retrying {
            sub: id,
            at,
            attempt,
        });
    }

    pub(super) fn hold_for_auth(&mut self, now: Instant, id: SubscriptionId, message: &str) {
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        if sub.auth_retried {
            self.surface(id, message.to_owned());
            return;
        }
        sub.auth_retried = true;
        sub.state = SubState::AwaitingAuth;
        self.set_timer(id, Some(now.saturating_add(self.config.auth_timeout)));
    }

    pub(super) fn fire_sub_timer(&mut self, now: Instant, id: SubscriptionId) {
        let Some(sub) = self.subs.get(id) else {
            return;
        };
        match sub.state {
            SubState::Retrying if self.gate.is_open(now) => {
                // The gate was extended after this retry was scheduled: wait it out too.
                let at = now.saturating_add(self.gate.remaining(now));
                self.set_timer(id, Some(at));
            }
            SubState::Retrying => self.enqueue(id),
            SubState::Pending if !sub.responded => {
                self.events.push_back(Event::EoseTimeout { sub: id });
                self.send_close(id);
                self.leave_open(id);
                let secs = self.config.eose_timeout.as_secs();
                self.schedule_retry(
                    now,
                    id,
                    &format!("eose-timeout: no answer to REQ within {secs}s"),
                );
            }
            SubState::Live if sub.catch_up.negotiating() => self.negentropy_timed_out(now, id),
            SubState::AwaitingAuth => {
                let secs = self.config.auth_timeout.as_secs();
                self.surface(
                    id,
                    format!("auth-required: not authenticated within {secs}s"),
                );
            }
            _ => {}
        }
    }
}
