//! Cross-checks of the session's redundant bookkeeping (the `fuzzing` feature): every index
//! the session keeps for speed must agree with the subscriptions themselves, or a later
//! input acts on a stale view. Invariants outside the core only see the public surface; these
//! see the private one.

use std::collections::BTreeSet;

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
        let mut timers = BTreeSet::new();
        for sub in self.subs.iter() {
            let id = sub.id;
            if let Some(at) = sub.timer {
                timers.insert((at, id));
            }
            if !link_open && sub.state != SubState::Idle {
                return Err(format!("{id} is {:?} without an open socket", sub.state));
            }
            let wants_timer = match sub.state {
                SubState::Idle | SubState::Queued | SubState::Live => false,
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
        let indexed: BTreeSet<_> = self.timers.iter().collect();
        if timers != indexed {
            return Err(format!("timers {indexed:?} but subscriptions {timers:?}"));
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
