//! Cross-checks of the session's redundant bookkeeping (the `fuzzing` feature): every index
//! the session keeps for speed must agree with the subscriptions themselves, or a later
//! input acts on a stale view. Invariants outside the core only see the public surface; these
//! see the private one.

use std::collections::{BTreeMap, BTreeSet};

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
        let mut open = 0;
        let mut queued = 0;
        let mut pending = BTreeMap::new();
        let mut timers = BTreeSet::new();
        for sub in self.subs.iter() {
            let id = sub.id;
            if sub.state.is_open() {
                open += 1;
            }
            if sub.state == SubState::Pending && pending.insert(sub.sent_seq, id).is_some() {
                return Err(format!("two pending REQs share sequence {}", sub.sent_seq));
            }
            if let Some(at) = sub.timer {
                timers.insert((at, id));
            }
            let in_queue = self.send_queue.contains(&sub.queue_key());
            if in_queue != (sub.state == SubState::Queued) {
                return Err(format!("{id} is {:?} but in_queue={in_queue}", sub.state));
            }
            queued += usize::from(in_queue);
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
        if queued != self.send_queue.len() {
            return Err(format!(
                "send queue holds {} entries for {queued} queued subscriptions",
                self.send_queue.len()
            ));
        }
        if let Some(id) = self
            .told_queued
            .iter()
            .find(|id| !self.send_queue.iter().any(|(_, _, q)| q == *id))
        {
            return Err(format!(
                "{id} was told it is queued but is not in the queue"
            ));
        }
        if open != self.open_reqs {
            return Err(format!("open_reqs {} but {open} open", self.open_reqs));
        }
        if pending != self.pending_by_seq {
            return Err(format!(
                "pending_by_seq {:?} but pending {pending:?}",
                self.pending_by_seq
            ));
        }
        if timers != self.timers {
            return Err(format!(
                "timers {:?} but subscriptions {timers:?}",
                self.timers
            ));
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
