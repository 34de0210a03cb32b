//! What the session does with a subscription's catch-up: the step after an EOSE, the NIP-77
//! frames (`NEG-MSG`, `NEG-ERR`) and their failures, which all end in the `since` fallback,
//! and what the relay taught about NIP-77.

use super::{catch_up_ctx, RelaySession};
use crate::nostr::catch_up::{CaughtUp, Next, Support};
use crate::nostr::message::ClientMessage;
use crate::nostr::output::{Carries, Event};
use crate::nostr::reason::{classify, Class};
use crate::nostr::subscription::{neg_wire_id, split_filters, SubState, SubscriptionId};
use crate::time::Instant;

/// How strfry refuses a NIP-77 session whose filter matches more than it reconciles.
const TOO_MANY_RESULTS: &str = "too many query results";

/// The memory's bounds when catch-up is off: dedup still needs them.
const DEFAULT_MEMORY: (usize, usize) = (1_024, 65_536);

impl RelaySession {
    /// `(per subscription, total)` events remembered at most.
    pub(in crate::nostr) fn memory_bounds(&self) -> (usize, usize) {
        self.config
            .catch_up
            .as_ref()
            .map_or(DEFAULT_MEMORY, |c| (c.memory, c.memory_total))
    }

    /// `id` got its EOSE: its catch-up's next step.
    pub(super) fn catch_up_eose(&mut self, now: Instant, id: SubscriptionId) {
        let usable = self.negentropy.usable(now);
        let ctx = catch_up_ctx(&self.config, self.unix_now(), usable, &self.declared);
        let Some(ctx) = ctx else {
            return;
        };
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        let user = split_filters(&sub.filters);
        let next = sub.catch_up.on_eose(&ctx, &sub.memory, &user);
        self.follow(now, id, next);
    }

    /// A `NEG-MSG` from the relay.
    pub(super) fn on_neg_msg(&mut self, now: Instant, id: SubscriptionId, message: &str) {
        let ctx = catch_up_ctx(&self.config, self.unix_now(), true, &self.declared);
        let (Some(ctx), Some(sub)) = (ctx, self.subs.get_mut(id)) else {
            return;
        };
        let filter = sub.catch_up.reconciling().unwrap_or(0);
        match sub
            .catch_up
            .on_negentropy(message, &ctx, &sub.memory, sub.filter_count)
        {
            Ok(next) => {
                self.negentropy = Support::Works;
                if !matches!(next, Next::NegMsg(_)) {
                    self.close_negentropy(id, filter);
                }
                self.follow(now, id, next);
            }
            Err(failure) => {
                self.close_negentropy(id, filter);
                self.negentropy_failed(now, id, &failure.to_string(), true);
            }
        }
        self.pump(now);
    }

    /// A `NEG-ERR`: the relay ended the session. Rate-limited, it is a refusal like any REQ's
    /// (the gate holds the fallback back); a set too large is about this filter alone
    /// (strfry's `blocked: too many query results`, past its `maxSyncEvents`), so only it
    /// falls back; anything else means this relay does not do NIP-77 for us now.
    pub(super) fn on_neg_err(&mut self, now: Instant, id: SubscriptionId, message: &str) {
        let learned = match classify(message) {
            Class::RateLimited { retry_after } => {
                let until = self.gate.refuse(now, retry_after);
                self.events.push_back(Event::RateLimited { until });
                false
            }
            _ => !message.contains(TOO_MANY_RESULTS),
        };
        self.negentropy_failed(now, id, message, learned);
        self.pump(now);
    }

    /// A NOTICE no other rule claims, while NIP-77 sessions are open: the relay did not
    /// understand `NEG-OPEN` (the NOTICE names no subscription, so every open session falls
    /// back).
    pub(super) fn negentropy_noticed(&mut self, now: Instant, message: &str) {
        let negotiating: Vec<SubscriptionId> = self
            .subs
            .iter()
            .filter(|s| s.state == SubState::Live && s.catch_up.negotiating())
            .map(|s| s.id)
            .collect();
        for id in &negotiating {
            self.negentropy_failed(now, *id, message, true);
        }
        if !negotiating.is_empty() {
            self.pump(now);
        }
    }

    /// `id`'s NIP-77 session had no answer within `negentropy_timeout`.
    pub(super) fn negentropy_timed_out(&mut self, now: Instant, id: SubscriptionId) {
        let filter = self.subs.get(id).and_then(|s| s.catch_up.reconciling());
        self.close_negentropy(id, filter.unwrap_or(0));
        self.negentropy_failed(now, id, "negentropy: no answer", true);
        self.pump(now);
    }

    /// NIP-77 did not work for `id`'s filter being reconciled: that filter catches up by
    /// `since`. With `learned`, the relay is not asked for NIP-77 again for
    /// `negentropy_retry_after`, so no filter of `id` left to reconcile is either.
    fn negentropy_failed(&mut self, now: Instant, id: SubscriptionId, _why: &str, learned: bool) {
        let retry_after = self
            .config
            .catch_up
            .as_ref()
            .map(|c| c.negentropy_retry_after);
        if learned {
            if let Some(after) = retry_after {
                self.negentropy = Support::Failed(now.saturating_add(after));
            }
        }
        self.stats.negentropy_failed += 1;
        let ctx = catch_up_ctx(&self.config, self.unix_now(), false, &self.declared);
        let Some(ctx) = ctx else {
            return;
        };
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        let next = sub
            .catch_up
            .fall_back(&ctx, &sub.memory, sub.filter_count, learned);
        self.set_timer(id, None);
        self.follow(now, id, next);
    }

    /// Do what a catch-up asked.
    fn follow(&mut self, now: Instant, id: SubscriptionId, next: Next) {
        // Whatever the step, a NIP-77 session may have ended: one waiting may open.
        self.scheduler.negentropy_ended();
        match next {
            Next::Wait => {}
            Next::Reissue | Next::Reconcile => {
                self.set_timer(id, None);
                let (scheduler, mut env) = self.scheduler();
                scheduler.schedule_step(id, &mut env);
            }
            Next::NegMsg(message) => {
                let Some(sub) = self.subs.get(id) else {
                    return;
                };
                let filter = sub.catch_up.reconciling().unwrap_or(0);
                let text = ClientMessage::NegMsg {
                    sub: neg_wire_id(id, sub.attempt, filter).into(),
                    message: message.into(),
                }
                .encode();
                self.send(text, Carries::Negentropy(id));
                let timeout = self
                    .config
                    .catch_up
                    .as_ref()
                    .map(|c| c.negentropy_timeout)
                    .unwrap_or_default();
                self.set_timer(id, Some(now.saturating_add(timeout)));
            }
            Next::Done(CaughtUp {
                method,
                exact_since,
                recovered,
            }) => {
                self.set_timer(id, None);
                self.events.push_back(Event::CaughtUp {
                    sub: id,
                    method,
                    exact_since,
                    recovered,
                });
            }
        }
    }

    /// Tell the relay the NIP-77 session of `id`'s `filter` is over (NIP-77: the client
    /// closes it).
    fn close_negentropy(&mut self, id: SubscriptionId, filter: usize) {
        let Some(attempt) = self.subs.get(id).map(|s| s.attempt) else {
            return;
        };
        let text = ClientMessage::NegClose {
            sub: neg_wire_id(id, attempt, filter).into(),
        }
        .encode();
        self.send(text, Carries::Negentropy(id));
    }
}
