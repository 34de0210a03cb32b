//! Cross-checks of the session's redundant bookkeeping (the `fuzzing` feature): every index
//! the session keeps for speed must agree with the subscriptions themselves, or a later
//! input acts on a stale view. Invariants outside the core only see the public surface; these
//! see the private one.

use super::RelaySession;
use crate::nostr::subscription::SubState;

impl RelaySession {
    /// Check that the session's indexes agree with its subscriptions and outbox.
    ///
    /// For the testkit's invariants and the fuzz targets; not a stable API.
    ///
    /// # Errors
    /// A description of the first disagreement found.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<(), String> {
        let link_open = self.link.is_open();
        // Runs after every fuzz step, so it allocates nothing: counts plus lookups instead of
        // building sets to compare.
        let mut with_timer = 0;
        for sub in self.subs.iter() {
            let id = sub.id;
            with_timer += usize::from(sub.timer.is_some());
            if !link_open && sub.state != SubState::Idle {
                return Err(format!("{id} is {:?} without an open socket", sub.state));
            }
            let wants_timer = match sub.state {
                SubState::Idle | SubState::Queued => false,
                // A NIP-77 session waits for the relay under its deadline.
                SubState::Live => sub.catch_up.negotiating(),
                SubState::Pending => !sub.responded,
                SubState::Retrying | SubState::AwaitingAuth => true,
            };
            if sub.timer.is_some() != wants_timer {
                return Err(format!(
                    "{id} is {:?} (responded={}) with timer {:?}",
                    sub.state, sub.responded, sub.timer
                ));
            }
        }
        self.scheduler.check_consistency(&self.subs)?;
        // Every index entry is its subscription's own deadline, and there are as many as
        // subscriptions with a deadline: the two sets are equal.
        let mut indexed = 0;
        for (at, id) in self.timers.iter() {
            indexed += 1;
            let own = self.subs.get(id).and_then(|sub| sub.timer);
            if own != Some(at) {
                return Err(format!(
                    "timer index holds ({at:?}, {id}) but {id} has {own:?}"
                ));
            }
        }
        if indexed != with_timer {
            return Err(format!(
                "{indexed} timers indexed for {with_timer} subscriptions with a deadline"
            ));
        }
        // Retry state exists only for registered subscriptions, and only on a socket.
        for id in self.refusals.ids() {
            if self.subs.get(id).is_none() {
                return Err(format!("retry state kept for {id}, which is gone"));
            }
            if !link_open {
                return Err(format!("retry state kept for {id} without an open socket"));
            }
        }
        if self.subs.len() > self.config.max_registered {
            return Err(format!("{} subscriptions registered", self.subs.len()));
        }
        if self.outbox.len() > self.config.max_outbox {
            return Err(format!("{} events in the outbox", self.outbox.len()));
        }
        self.outbox.check_consistency(link_open)
    }
}
