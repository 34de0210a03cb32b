//! Publish fan-out: one event to many relays, one outcome per relay as it answers, and one
//! aggregate ([`PoolEvent::PublishDone`]) when all have or the deadline passed.

use std::collections::BTreeSet;

use super::{Deadline, PoolError, PoolEvent, PublishOutcome, RelayId, RelayPool};
use crate::nostr::message::EventId;
use crate::nostr::Error;
use crate::time::Instant;

/// A publish waiting for every relay's answer.
#[derive(Debug)]
pub(super) struct Fanout {
    /// Relays yet to answer: a set, so each answer is O(log n) in the relays.
    pub(super) pending: BTreeSet<RelayId>,
    pub(super) outcome: PublishOutcome,
    pub(super) deadline: Option<Instant>,
}

impl RelayPool {
    /// Publish a signed event to `relays` (`None`: every relay). Each relay's answer is a
    /// [`PoolEvent::Published`] or [`PoolEvent::Rejected`]; when all are in (or the
    /// publish deadline passed) one [`PoolEvent::PublishDone`] sums them up.
    ///
    /// # Errors
    /// [`PoolError::UnknownRelay`], [`PoolError::AlreadyPublishing`], or the first relay's
    /// [`PoolError::Session`] error (then nothing was sent anywhere).
    pub fn publish(
        &mut self,
        now: Instant,
        event_json: &str,
        relays: Option<&[RelayId]>,
    ) -> Result<EventId, PoolError> {
        let now = self.clock.observe(now);
        let targets: Vec<RelayId> = match relays {
            Some(list) => {
                if let Some(r) = list.iter().find(|r| self.member(**r).is_none()) {
                    return Err(PoolError::UnknownRelay(*r));
                }
                list.to_vec()
            }
            None => self.relay_ids().collect(),
        };
        let id = crate::nostr::message::RawEvent::parse(event_json)
            .map_err(|e| {
                PoolError::Session(Error::InvalidEvent {
                    detail: e.to_string(),
                })
            })?
            .id();
        if self.publishes.contains_key(&id) {
            return Err(PoolError::AlreadyPublishing(id));
        }
        let mut pending = BTreeSet::new();
        let mut outcome = PublishOutcome::default();
        for relay in targets {
            let Some(member) = self.member_mut(relay) else {
                continue;
            };
            match member.session.publish(now, event_json) {
                Ok(_) => {
                    pending.insert(relay);
                }
                Err(e) => outcome.rejected.push((relay, e.to_string())),
            }
            self.settle(now, relay);
        }
        let mut fanout = Fanout {
            pending,
            outcome,
            deadline: None,
        };
        let at = now.saturating_add(self.config.publish_deadline);
        self.timers
            .set(Deadline::Publish(id), &mut fanout.deadline, Some(at));
        self.publishes.insert(id, fanout);
        self.finish_publish(id);
        Ok(id)
    }

    pub(super) fn publish_answer(&mut self, id: EventId, relay: RelayId, rejected: Option<String>) {
        let Some(fanout) = self.publishes.get_mut(&id) else {
            return;
        };
        if !fanout.pending.remove(&relay) {
            return;
        }
        match &rejected {
            None => fanout.outcome.accepted.push(relay),
            Some(reason) => fanout.outcome.rejected.push((relay, reason.clone())),
        }
        self.events.push_back(match rejected {
            None => PoolEvent::Published { id, relay },
            Some(reason) => PoolEvent::Rejected { id, relay, reason },
        });
        self.finish_publish(id);
    }

    pub(super) fn publish_gone(&mut self, relay: RelayId, why: &str) {
        let ids: Vec<EventId> = self
            .publishes
            .iter()
            .filter(|(_, f)| f.pending.contains(&relay))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.publish_answer(id, relay, Some(why.to_owned()));
        }
    }

    pub(super) fn finish_publish(&mut self, id: EventId) {
        if !self
            .publishes
            .get(&id)
            .is_some_and(|f| f.pending.is_empty())
        {
            return;
        }
        let Some(mut fanout) = self.publishes.remove(&id) else {
            return;
        };
        self.timers
            .set(Deadline::Publish(id), &mut fanout.deadline, None);
        sort_outcome(&mut fanout.outcome);
        fanout.outcome.urls = self.people_urls(&fanout.outcome);
        self.events.push_back(PoolEvent::PublishDone {
            id,
            outcome: fanout.outcome,
        });
        self.routing_publish_done(id);
    }

    pub(super) fn expire_publish(&mut self, id: EventId) {
        let Some(mut fanout) = self.publishes.remove(&id) else {
            return;
        };
        // A relay that refused and is held for a retry or for AUTH has answered: its words
        // are the outcome, not "pending".
        for relay in std::mem::take(&mut fanout.pending) {
            let refusal = self
                .member(relay)
                .and_then(|m| m.session.publish_refusal(&id))
                .map(super::rejection_text);
            match refusal {
                Some(why) => fanout.outcome.rejected.push((relay, why)),
                None => fanout.outcome.pending.push(relay),
            }
        }
        sort_outcome(&mut fanout.outcome);
        fanout.outcome.urls = self.people_urls(&fanout.outcome);
        self.events.push_back(PoolEvent::PublishDone {
            id,
            outcome: fanout.outcome,
        });
        self.routing_publish_done(id);
    }
}

fn sort_outcome(outcome: &mut PublishOutcome) {
    crate::sort::sort(&mut outcome.accepted);
    // By relay, then reason: a relay rejected twice (a target named twice) has one order.
    crate::sort::sort(&mut outcome.rejected);
    crate::sort::sort(&mut outcome.pending);
}
