//! What the relay's frames do, one handler per verb: EVENT, EOSE, CLOSED, OK, NOTICE, AUTH
//! (NIP-77's NEG-MSG and NEG-ERR are the catch-up's, in `session/catch_up.rs`). Decoding,
//! routing to a subscription's current attempt and counting what is dropped come first, in
//! `nostr/inbound.rs`; the state each verb changes is the owned types' (`Subscription`,
//! `Scheduler`, `Refusals`, `Auth`, `Outbox`, the catch-up).

use super::{catch_up_ctx, RelaySession};
use crate::nostr::inbound::{self, Frame};
use crate::nostr::message::{EventId, RawEvent};
use crate::nostr::output::Event;
use crate::nostr::reason::{classify, classify_notice, Class, Terminal};
use crate::nostr::subscription::{Admit, SubState, SubscriptionId};
use crate::time::Instant;

impl RelaySession {
    pub(super) fn on_frame(&mut self, now: Instant, text: &str) {
        self.link.on_inbound(now);
        let read = inbound::read(text, self.config.max_frame, &self.subs, &mut self.stats);
        let frame = match read {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(error) => {
                self.events.push_back(Event::PeerError { error });
                return;
            }
        };
        match frame {
            Frame::Event { sub, event } => self.on_event(sub, event),
            Frame::Eose { sub } => self.on_eose(now, sub),
            Frame::Closed { sub, message } => self.on_closed(now, sub, &message),
            Frame::Ok {
                event,
                accepted,
                message,
            } => self.on_ok(now, event, accepted, &message),
            Frame::Notice { message } => self.on_notice(now, &message),
            Frame::Auth { challenge } => {
                let challenge = challenge.into_owned();
                let id = self
                    .auth
                    .challenged(now, challenge.clone(), self.config.auth_timeout);
                self.events
                    .push_back(Event::AuthChallenge { challenge, id });
            }
            Frame::NegMsg { sub, message } => self.on_neg_msg(now, sub, &message),
            Frame::NegErr { sub, message } => self.on_neg_err(now, sub, &message),
        }
    }

    /// An event for `id`'s open REQ.
    fn on_event(&mut self, id: SubscriptionId, event: RawEvent<'_>) {
        let latest = self.latest_plausible();
        let (per_sub, total) = self.memory_bounds();
        let ctx = catch_up_ctx(
            &self.config,
            self.wall.map(|w| w.unix_secs(self.clock.now())),
            false,
            &self.declared,
        );
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        let pending = sub.state == SubState::Pending;
        let first_response = pending && !sub.responded;
        sub.responded = true;
        let room = per_sub
            .saturating_sub(sub.memory.len())
            .min(total.saturating_sub(self.remembered));
        let (admitted, stored) = sub.admit(event.id(), event.created_at(), latest, room);
        self.remembered = (self.remembered + stored.added).saturating_sub(stored.evicted);
        if let Some(ctx) = &ctx {
            let fresh = matches!(admitted, Admit::Fresh | Admit::FutureDated);
            let filters = sub.filter_count;
            sub.catch_up
                .on_event(event.created_at(), fresh, pending, filters, ctx);
        }
        if first_response {
            // A REQ that streams is slow, not stalled: no EOSE timeout for it.
            self.set_timer(id, None);
        }
        match admitted {
            Admit::Fresh => {}
            Admit::FutureDated => self.stats.future_dated += 1,
            Admit::Duplicate => {
                self.stats.duplicates += 1;
                return;
            }
            Admit::BelowWindow => {
                self.stats.below_window += 1;
                return;
            }
        }
        self.events.push_back(Event::Received {
            sub: id,
            id: event.id(),
            raw: event.json().to_owned(),
        });
    }

    /// `id`'s stored events are done: live, and its catch-up's next step.
    fn on_eose(&mut self, now: Instant, id: SubscriptionId) {
        let Some(sub) = self.subs.get_mut(id) else {
            return;
        };
        if sub.state != SubState::Pending {
            return;
        }
        sub.state = SubState::Live;
        let (seq, reissued) = (sub.sent_seq, sub.reissued);
        self.refusals.eose(now, id);
        self.scheduler.answered(seq);
        self.set_timer(id, None);
        if !reissued {
            self.events.push_back(Event::Eose { sub: id });
        }
        if let Some(max) = self.scheduler.accepted(id) {
            self.events.push_back(Event::SubscriptionLimit { max });
        }
        self.catch_up_eose(now, id);
        self.pump(now);
    }

    /// The relay ended or refused `id`'s open REQ.
    fn on_closed(&mut self, now: Instant, id: SubscriptionId, message: &str) {
        self.leave_open(id);
        self.refuse(now, id, classify(message), message);
        self.pump(now);
    }

    /// The answer to a publish or to our AUTH.
    fn on_ok(&mut self, now: Instant, id: EventId, accepted: bool, message: &str) {
        if self.auth.is_answer(id) {
            self.on_auth_ok(now, accepted, message);
            return;
        }
        let (outbox, mut env) = self.outbox();
        if !outbox.on_ok(now, id, accepted, message, &mut env) {
            self.stats.unknown_ok += 1;
        }
    }

    /// A notice: a cap or rate-limit refusal in some dialects, or a relay without NIP-77.
    fn on_notice(&mut self, now: Instant, message: &str) {
        self.events.push_back(Event::Notice {
            message: message.to_owned(),
        });
        match classify_notice(message) {
            Some(Class::Terminal(Terminal::TooManySubscriptions)) => {
                // The relay did not say which REQ it refused: the newest still waiting is the
                // only one it can have been.
                let Some(id) = self.scheduler.newest_pending() else {
                    return;
                };
                self.leave_open(id);
                self.refuse(
                    now,
                    id,
                    Class::Terminal(Terminal::TooManySubscriptions),
                    message,
                );
                self.pump(now);
            }
            Some(Class::RateLimited { retry_after }) => {
                let until = self.gate.refuse(now, retry_after);
                self.events.push_back(Event::RateLimited { until });
            }
            // Relays without NIP-77 answer NEG-OPEN with a NOTICE (nostr-rs-relay "could not
            // parse command", strfry "ERROR: bad msg: ...", rnostr "Unsupported message").
            _ => self.negentropy_noticed(now, message),
        }
    }

    /// The answer to our AUTH: held subscriptions and publishes go out, or give up.
    fn on_auth_ok(&mut self, now: Instant, accepted: bool, message: &str) {
        let held: Vec<SubscriptionId> = self
            .subscriptions()
            .into_iter()
            .filter(|v| v.state == SubState::AwaitingAuth)
            .map(|v| v.id)
            .collect();
        if accepted {
            self.auth.accepted();
            self.events.push_back(Event::Authenticated);
            let (outbox, mut env) = self.outbox();
            outbox.on_authenticated(now, &mut env);
            for id in held {
                self.set_timer(id, None);
                self.enqueue(id);
            }
            self.pump(now);
        } else {
            self.events.push_back(Event::AuthFailed {
                reason: message.to_owned(),
            });
            let (outbox, mut env) = self.outbox();
            outbox.on_auth_failed(&mut env);
            for id in held {
                self.surface(id, message.to_owned());
            }
            if self.auth.release() {
                self.pump(now);
            }
        }
    }
}
