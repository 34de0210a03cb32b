//! What a refusal of a subscription means, decided apart from carrying it out: the refusal
//! classes, the bounded re-REQ behind the rate-limit gate (delay = max(gate remaining, own
//! full-jitter backoff)), the one retry after authentication, the re-queue after a cap
//! refusal, and the retry state that a clean EOSE clears only once the subscription has
//! stayed up.
//!
//! [`Refusals`] keeps that retry state for the subscriptions that have any (most never do, so
//! a subscription carries none of it) and answers each refusal with a [`Verdict`]; the
//! session carries the verdict out (state, timer, queue, the events).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::backoff::Backoff;
use crate::gate::RateLimitGate;
use crate::nostr::config::RelayConfig;
use crate::nostr::output::Event;
use crate::nostr::reason::{Class, Terminal};
use crate::nostr::subscription::SubscriptionId;
use crate::rng::Rng;
use crate::time::Instant;

/// The parts of the session a refusal's verdict depends on, borrowed side by side.
pub(crate) struct Env<'a> {
    pub(crate) config: &'a RelayConfig,
    pub(crate) gate: &'a mut RateLimitGate,
    pub(crate) rng: &'a mut Rng,
    pub(crate) events: &'a mut VecDeque<Event>,
}

/// The retry state of a session's subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    /// Only subscriptions with retry state to keep; an entry that clears is removed.
    state: BTreeMap<SubscriptionId, Retries>,
}

/// One subscription's retry state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Retries {
    /// Re-REQs after refusals since the state last cleared.
    count: u32,
    /// Whether the one retry after re-authentication has been used.
    auth_retried: bool,
    /// What the last EOSE cleared, until the subscription proves stable.
    forgiven: Option<Forgiven>,
}

/// Retry state cleared by an EOSE, kept until the subscription has stayed up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Forgiven {
    at: Instant,
    count: u32,
    auth_retried: bool,
}

/// What the session does with a refused subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Give it up: the application hears `Closed` once.
    Surface,
    /// Send it again at `at`, as retry number `attempt`.
    Retry { at: Instant, attempt: u32 },
    /// Wait for authentication until `until`, then give it up.
    AwaitAuth { until: Instant },
    /// Wait in the send queue for a slot.
    Requeue,
}

impl Refusals {
    /// `id`'s re-REQs after refusals since its retry state last cleared.
    pub(crate) fn retries(&self, id: SubscriptionId) -> u32 {
        self.state.get(&id).map_or(0, |r| r.count)
    }

    /// The relay refused `id`'s REQ as `class`; `ahead` of our REQs were open ahead of it
    /// (what a cap refusal is judged by).
    ///
    /// A cap refusal re-queues the subscription for a slot (the session learned the cap
    /// from `ahead`, so it is sent again only below it), unless none of ours was open ahead
    /// of it: then there is no slot of ours to wait for (the relay counts other
    /// connections, or allows none) and it is given up, as the rule book has `too many
    /// subscriptions`. A re-queue counts as a re-REQ under the same bound as the other
    /// retries (`closed_retry.max_attempts`): a NOTICE-only refusal pinned on the wrong
    /// subscription could otherwise re-queue one the relay never refused, forever.
    pub(crate) fn refuse(
        &mut self,
        now: Instant,
        id: SubscriptionId,
        class: Class,
        ahead: usize,
        env: &mut Env<'_>,
    ) -> Verdict {
        self.recall(now, id, env.config.link.stable_after);
        match class {
            Class::Terminal(Terminal::TooManySubscriptions) => self.requeue(id, ahead, env),
            Class::Terminal(_) => Verdict::Surface,
            Class::AuthRequired => self.await_auth(now, id, env),
            Class::RateLimited { retry_after } => {
                let until = env.gate.refuse(now, retry_after);
                env.events.push_back(Event::RateLimited { until });
                self.retry(now, id, env)
            }
            Class::Retryable => self.retry(now, id, env),
        }
    }

    /// The bounded re-REQ: delay = max(gate remaining, own full-jitter backoff); once the
    /// retries are spent, the subscription is given up.
    pub(crate) fn retry(&mut self, now: Instant, id: SubscriptionId, env: &mut Env<'_>) -> Verdict {
        let mut backoff = Backoff::with_attempts(env.config.closed_retry, self.retries(id));
        let Some(delay) = backoff.next_delay(env.rng) else {
            return Verdict::Surface;
        };
        let attempt = backoff.attempts();
        self.state.entry(id).or_default().count = attempt;
        let at = now.saturating_add(delay.max(env.gate.remaining(now)));
        Verdict::Retry { at, attempt }
    }

    /// A clean EOSE for `id`: its retry state clears, provisionally (see
    /// [`Refusals::refuse`]: a refusal soon after brings it back).
    pub(crate) fn eose(&mut self, now: Instant, id: SubscriptionId) {
        let Some(retries) = self.state.remove(&id) else {
            return;
        };
        if retries.count == 0 && !retries.auth_retried {
            return;
        }
        let forgiven = Forgiven {
            at: now,
            count: retries.count,
            auth_retried: retries.auth_retried,
        };
        self.state.insert(
            id,
            Retries {
                forgiven: Some(forgiven),
                ..Retries::default()
            },
        );
    }

    /// `id` left the session.
    pub(crate) fn forget(&mut self, id: SubscriptionId) {
        self.state.remove(&id);
    }

    /// A new socket, or none: refusal history belongs to the old connection.
    pub(crate) fn reset(&mut self) {
        self.state.clear();
    }

    /// The subscriptions with retry state, in id order (for the consistency checks).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn ids(&self) -> impl Iterator<Item = SubscriptionId> + '_ {
        self.state.keys().copied()
    }

    /// A refusal within `stable_after` of the EOSE that cleared `id`'s retry state: that
    /// EOSE was not clean, and the count it cleared comes back. Otherwise a relay answering
    /// every REQ with EOSE then CLOSED would reset the bound each time and keep the client
    /// re-requesting forever.
    fn recall(&mut self, now: Instant, id: SubscriptionId, stable_after: Duration) {
        let Some(retries) = self.state.get_mut(&id) else {
            return;
        };
        let Some(forgiven) = retries.forgiven.take() else {
            return;
        };
        if now.saturating_duration_since(forgiven.at) < stable_after {
            retries.count = retries.count.max(forgiven.count);
            retries.auth_retried |= forgiven.auth_retried;
        }
        if *retries == Retries::default() {
            self.state.remove(&id);
        }
    }

    fn requeue(&mut self, id: SubscriptionId, ahead: usize, env: &Env<'_>) -> Verdict {
        let max_attempts = env.config.closed_retry.max_attempts.unwrap_or(u32::MAX);
        if ahead == 0 || self.retries(id) >= max_attempts {
            return Verdict::Surface;
        }
        self.state.entry(id).or_default().count += 1;
        Verdict::Requeue
    }

    fn await_auth(&mut self, now: Instant, id: SubscriptionId, env: &Env<'_>) -> Verdict {
        let retries = self.state.entry(id).or_default();
        if retries.auth_retried {
            return Verdict::Surface;
        }
        retries.auth_retried = true;
        Verdict::AwaitAuth {
            until: now.saturating_add(env.config.auth_timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nostr::reason::classify;

    fn at(secs: u64) -> Instant {
        Instant::from_origin(Duration::from_secs(secs))
    }

    struct World {
        config: RelayConfig,
        gate: RateLimitGate,
        rng: Rng,
        events: VecDeque<Event>,
    }

    impl World {
        fn new() -> Self {
            let config = RelayConfig::default();
            World {
                gate: RateLimitGate::new(config.gate_default_window, config.gate_max_window),
                config,
                rng: Rng::new(7),
                events: VecDeque::new(),
            }
        }

        fn env(&mut self) -> Env<'_> {
            Env {
                config: &self.config,
                gate: &mut self.gate,
                rng: &mut self.rng,
                events: &mut self.events,
            }
        }
    }

    const SUB: SubscriptionId = SubscriptionId(3);

    #[test]
    fn terminal_refusals_give_up_and_leave_no_state() {
        let (mut world, mut refusals) = (World::new(), Refusals::default());
        let class = classify("blocked: not on the list");
        assert_eq!(
            refusals.refuse(at(0), SUB, class, 2, &mut world.env()),
            Verdict::Surface
        );
        assert_eq!(refusals.state.len(), 0);
    }

    #[test]
    fn retries_are_bounded_and_wait_out_the_gate() {
        let (mut world, mut refusals) = (World::new(), Refusals::default());
        let limited = classify("rate-limited: slow down, retry in 20s");
        let Verdict::Retry { at: when, attempt } =
            refusals.refuse(at(0), SUB, limited, 0, &mut world.env())
        else {
            panic!("a rate-limited REQ is retried");
        };
        assert_eq!(attempt, 1);
        assert!(when >= at(20), "not before the gate's hint: {when:?}");
        assert!(matches!(
            world.events.pop_front(),
            Some(Event::RateLimited { until }) if until == at(20)
        ));
        let max = world.config.closed_retry.max_attempts.expect("bounded");
        for n in 2..=max {
            let verdict = refusals.refuse(at(100), SUB, Class::Retryable, 0, &mut world.env());
            assert!(matches!(verdict, Verdict::Retry { attempt, .. } if attempt == n));
        }
        assert_eq!(refusals.retries(SUB), max);
        assert_eq!(
            refusals.refuse(at(100), SUB, Class::Retryable, 0, &mut world.env()),
            Verdict::Surface
        );
    }

    #[test]
    fn authentication_is_awaited_once() {
        let (mut world, mut refusals) = (World::new(), Refusals::default());
        let until = at(0).saturating_add(world.config.auth_timeout);
        let auth = Class::AuthRequired;
        assert_eq!(
            refusals.refuse(at(0), SUB, auth, 0, &mut world.env()),
            Verdict::AwaitAuth { until }
        );
        assert_eq!(
            refusals.refuse(at(1), SUB, auth, 0, &mut world.env()),
            Verdict::Surface
        );
    }

    #[test]
    fn a_cap_refusal_requeues_only_behind_our_own_reqs_and_under_the_bound() {
        let (mut world, mut refusals) = (World::new(), Refusals::default());
        let cap = Class::Terminal(Terminal::TooManySubscriptions);
        assert_eq!(
            refusals.refuse(at(0), SUB, cap, 0, &mut world.env()),
            Verdict::Surface,
            "no REQ of ours ahead: no slot to wait for"
        );
        let max = world.config.closed_retry.max_attempts.expect("bounded");
        for _ in 0..max {
            assert_eq!(
                refusals.refuse(at(0), SUB, cap, 4, &mut world.env()),
                Verdict::Requeue
            );
        }
        assert_eq!(
            refusals.refuse(at(0), SUB, cap, 4, &mut world.env()),
            Verdict::Surface
        );
    }

    #[test]
    fn an_eose_clears_the_count_only_once_the_subscription_stayed_up() {
        let (mut world, mut refusals) = (World::new(), Refusals::default());
        let stable = world.config.link.stable_after;
        for _ in 0..3 {
            let _ = refusals.refuse(at(0), SUB, Class::Retryable, 0, &mut world.env());
        }
        refusals.eose(at(10), SUB);
        assert_eq!(refusals.retries(SUB), 0);
        // Refused again soon after: the EOSE was not clean, the count comes back.
        let soon = at(10).saturating_add(stable / 2);
        let verdict = refusals.refuse(soon, SUB, Class::Retryable, 0, &mut world.env());
        assert!(matches!(verdict, Verdict::Retry { attempt: 4, .. }));
        refusals.eose(at(20), SUB);
        // Refused after staying up: a fresh count.
        let later = at(20).saturating_add(stable);
        let verdict = refusals.refuse(later, SUB, Class::Retryable, 0, &mut world.env());
        assert!(matches!(verdict, Verdict::Retry { attempt: 1, .. }));
        refusals.reset();
        assert_eq!(refusals.state.len(), 0);
    }
}
