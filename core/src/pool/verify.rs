//! Delivery after verification ([`PoolConfig::verify`](super::PoolConfig::verify)): the core
//! decides *what* is verified and *when* an event may be delivered; the driver only checks
//! signatures, off the socket task, and answers with a verdict.
//!
//! - Only the first copy of an id in a logical subscription is verified (after dedup): a copy
//!   byte-identical to one under verification is a duplicate and costs a map lookup.
//! - A copy with *other* bytes that arrives while the first is being verified is kept as the
//!   one alternate: if the first copy fails, the alternate is verified in its place, so a
//!   hostile relay that races a forgery ahead of an honest relay cannot censor the event.
//!   Further different copies are conflicts. Once a copy is verified, every copy with other
//!   bytes is a conflict and dropped: a verified id never vouches for different bytes.
//! - A copy that fails is never delivered; the id is forgotten so that a later copy from any
//!   relay is verified afresh.
//! - Order within a subscription is kept: while anything of a subscription waits for a
//!   verdict, everything the pool says about it (events, EOSE, relay closures, the outcome,
//!   the end) waits behind it in a queue of its own.
//!
//! The number of copies under verification is bounded
//! ([`PoolConfig::max_unverified`](super::PoolConfig::max_unverified)).

use std::collections::{BTreeMap, VecDeque};

use super::{PoolEvent, RelayId, SubId};
use crate::nostr::message::EventId;

/// A copy that passed: its subscription, its id, and the relay of the alternate copy it
/// makes a conflict, if one was kept.
pub(crate) type Passed = (SubId, EventId, Option<RelayId>);

/// One event copy the driver must verify before the pool delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyRequest {
    /// Answer with [`RelayPool::handle_verified`](super::RelayPool::handle_verified).
    pub ticket: VerifyTicket,
    /// The relay that sent this copy.
    pub relay: RelayId,
    /// The id the copy claims.
    pub id: EventId,
    /// The event's JSON, byte for byte as the relay sent it.
    pub raw: String,
}

/// Names one verification; never reused within a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VerifyTicket(pub u64);

/// A copy with different bytes met an id under verification.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OtherCopy {
    /// Byte-identical to the copy under verification: its verdict is this copy's too.
    Same,
    /// Kept as the alternate, verified if the first copy fails.
    Kept,
    /// The alternate slot is taken: a conflict.
    Refused,
}

/// What a failed verdict leaves to do.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) sub: SubId,
    pub(crate) relay: RelayId,
    pub(crate) id: EventId,
    /// The alternate copy to verify in its place, if one arrived.
    pub(crate) alternate: Option<(RelayId, String)>,
}

#[derive(Debug, Default)]
pub(crate) struct Held {
    queues: BTreeMap<SubId, Queue>,
    tickets: BTreeMap<VerifyTicket, (SubId, u64)>,
    requests: VecDeque<VerifyRequest>,
    next_ticket: u64,
    waiting: usize,
}

/// One subscription's events in delivery order; slot `i` has position `front + i`.
#[derive(Debug, Default)]
struct Queue {
    slots: VecDeque<Slot>,
    front: u64,
    by_id: BTreeMap<EventId, u64>,
}

#[derive(Debug)]
enum Slot {
    Ready(PoolEvent),
    Waiting(Waiting),
    /// A copy that failed with no alternate: nothing to deliver.
    Gone,
}

#[derive(Debug)]
struct Waiting {
    relay: RelayId,
    id: EventId,
    raw: String,
    alternate: Option<(RelayId, String)>,
    verified: bool,
}

impl Held {
    /// Whether `sub` has anything queued: then its next events queue behind it.
    pub(crate) fn holds(&self, sub: SubId) -> bool {
        self.queues.contains_key(&sub)
    }

    /// Every event held and not yet delivered, per subscription in delivery order: a copy
    /// awaiting its verdict, or a verified one queued behind such a copy. What a checkpoint
    /// keeps, to verify again after a restore.
    pub(crate) fn undelivered(&self) -> Vec<(SubId, RelayId, EventId, &str)> {
        let mut out = Vec::new();
        for (&sub, queue) in &self.queues {
            for slot in &queue.slots {
                match slot {
                    Slot::Waiting(w) => out.push((sub, w.relay, w.id, w.raw.as_str())),
                    Slot::Ready(PoolEvent::Received { relay, id, raw, .. }) => {
                        out.push((sub, *relay, *id, raw.as_str()));
                    }
                    Slot::Ready(_) | Slot::Gone => {}
                }
            }
        }
        out
    }

    /// Copies under verification, pool-wide.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Queue a ready event of `sub` behind what it waits for.
    pub(crate) fn push(&mut self, sub: SubId, event: PoolEvent) {
        self.queues
            .entry(sub)
            .or_default()
            .slots
            .push_back(Slot::Ready(event));
    }

    /// A copy of `id` whose FNV summary matched or differed from the first: compare with
    /// the copy under verification, if `id` is under verification in `sub`.
    pub(crate) fn other_copy(
        &mut self,
        sub: SubId,
        id: EventId,
        relay: RelayId,
        raw: &str,
    ) -> Option<OtherCopy> {
        let queue = self.queues.get_mut(&sub)?;
        let &pos = queue.by_id.get(&id)?;
        let Some(Slot::Waiting(w)) = queue.slot_mut(pos) else {
            return None;
        };
        if w.verified {
            return None;
        }
        if w.raw == raw {
            return Some(OtherCopy::Same);
        }
        if w.alternate.is_some() {
            return Some(OtherCopy::Refused);
        }
        w.alternate = Some((relay, raw.to_owned()));
        Some(OtherCopy::Kept)
    }

    /// Start verifying the first copy of `id` in `sub`.
    pub(crate) fn start(&mut self, sub: SubId, relay: RelayId, id: EventId, raw: String) {
        let queue = self.queues.entry(sub).or_default();
        let pos = queue.front + queue.slots.len() as u64;
        queue.by_id.insert(id, pos);
        let ticket = issue(&mut self.next_ticket, &mut self.tickets, sub, pos);
        self.requests.push_back(VerifyRequest {
            ticket,
            relay,
            id,
            raw: raw.clone(),
        });
        queue.slots.push_back(Slot::Waiting(Waiting {
            relay,
            id,
            raw,
            alternate: None,
            verified: false,
        }));
        self.waiting += 1;
    }

    /// Verify `raw` (the alternate of a failed copy) in the failed copy's place.
    pub(crate) fn restart(&mut self, sub: SubId, relay: RelayId, id: EventId, raw: String) {
        let Some(queue) = self.queues.get_mut(&sub) else {
            return;
        };
        let Some(&pos) = queue.by_id.get(&id) else {
            return;
        };
        let Some(slot) = queue.slot_mut(pos) else {
            return;
        };
        *slot = Slot::Waiting(Waiting {
            relay,
            id,
            raw: raw.clone(),
            alternate: None,
            verified: false,
        });
        self.waiting += 1;
        let ticket = issue(&mut self.next_ticket, &mut self.tickets, sub, pos);
        self.requests.push_back(VerifyRequest {
            ticket,
            relay,
            id,
            raw,
        });
    }

    pub(crate) fn poll_request(&mut self) -> Option<VerifyRequest> {
        self.requests.pop_front()
    }

    pub(crate) fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The driver's verdict on `ticket`: `None` for a ticket that is not awaited (its
    /// subscription was dropped, or the driver answered twice). A pass names the relay of
    /// the copy's id and the alternate copy it makes a conflict, if one was kept.
    pub(crate) fn verdict(
        &mut self,
        ticket: VerifyTicket,
        ok: bool,
    ) -> Option<Result<Passed, Failed>> {
        let (sub, pos) = self.tickets.remove(&ticket)?;
        let queue = self.queues.get_mut(&sub)?;
        let slot = queue.slot_mut(pos)?;
        let Slot::Waiting(w) = slot else {
            return None;
        };
        self.waiting -= 1;
        if ok {
            w.verified = true;
            let conflict = w.alternate.take().map(|(relay, _)| relay);
            return Some(Ok((sub, w.id, conflict)));
        }
        let failed = Failed {
            sub,
            relay: w.relay,
            id: w.id,
            alternate: w.alternate.take(),
        };
        if failed.alternate.is_none() {
            *slot = Slot::Gone;
            queue.by_id.remove(&failed.id);
        }
        Some(Err(failed))
    }

    /// Move `sub`'s deliverable head to `out`, in order, until something waits.
    pub(crate) fn release(&mut self, sub: SubId, out: &mut VecDeque<PoolEvent>) {
        let Some(queue) = self.queues.get_mut(&sub) else {
            return;
        };
        while let Some(slot) = queue.slots.front() {
            if matches!(slot, Slot::Waiting(w) if !w.verified) {
                return;
            }
            let Some(slot) = queue.slots.pop_front() else {
                break;
            };
            queue.front += 1;
            match slot {
                Slot::Ready(event) => out.push_back(event),
                Slot::Waiting(w) => {
                    queue.by_id.remove(&w.id);
                    out.push_back(PoolEvent::Received {
                        sub,
                        relay: w.relay,
                        id: w.id,
                        raw: w.raw,
                    });
                }
                Slot::Gone => {}
            }
        }
        self.queues.remove(&sub);
    }

    /// The application dropped `sub`: nothing of it is delivered, its verdicts are ignored.
    pub(crate) fn drop_sub(&mut self, sub: SubId) {
        let Some(queue) = self.queues.remove(&sub) else {
            return;
        };
        let unverified = queue
            .slots
            .iter()
            .filter(|s| matches!(s, Slot::Waiting(w) if !w.verified))
            .count();
        self.waiting -= unverified;
        self.tickets.retain(|_, (s, _)| *s != sub);
        self.requests
            .retain(|r| self.tickets.contains_key(&r.ticket));
    }
}

fn issue(
    next: &mut u64,
    tickets: &mut BTreeMap<VerifyTicket, (SubId, u64)>,
    sub: SubId,
    pos: u64,
) -> VerifyTicket {
    *next += 1;
    let ticket = VerifyTicket(*next);
    tickets.insert(ticket, (sub, pos));
    ticket
}

impl Queue {
    fn slot_mut(&mut self, pos: u64) -> Option<&mut Slot> {
        let index = usize::try_from(pos.checked_sub(self.front)?).ok()?;
        self.slots.get_mut(index)
    }
}
