//! [`Seen`]: the ids a logical subscription has delivered, across relays, bounded.
//!
//! Each id is kept with a hash of the bytes first delivered and the relays that sent it
//! (`seen_on`, at most `seen_on_max`). At `capacity` the oldest id is forgotten: a relay
//! that re-sends it afterwards (a reconnect's `since` overlap, a hostile flood) delivers it
//! again. A map ordered by key rather than a hash map: ids come from the peer, and a
//! balanced tree cannot be driven into its worst case by chosen keys.

use std::collections::{BTreeMap, VecDeque};

use super::RelayId;
use crate::nostr::message::EventId;

/// Whether a delivery is new to the subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// First time: deliver it.
    New,
    /// Seen before, same bytes: drop.
    Duplicate,
    /// Seen before with other bytes: drop, the first copy wins; count it.
    Conflict,
}

#[derive(Debug)]
pub(crate) struct Seen {
    entries: BTreeMap<EventId, Entry>,
    order: VecDeque<EventId>,
    capacity: usize,
    seen_on_max: usize,
    /// `seen_on` entries over all ids (each at most `seen_on_max`).
    relay_entries: usize,
    /// Ids forgotten at the bound, oldest first.
    forgotten: u64,
}

#[derive(Debug)]
struct Entry {
    bytes: u64,
    relays: Vec<RelayId>,
}

impl Seen {
    pub(crate) fn new(capacity: usize, seen_on_max: usize) -> Self {
        Seen {
            entries: BTreeMap::new(),
            order: VecDeque::new(),
            capacity,
            seen_on_max,
            relay_entries: 0,
            forgotten: 0,
        }
    }

    pub(crate) fn admit(&mut self, id: EventId, raw: &str, relay: RelayId) -> Admit {
        let bytes = fnv1a(raw.as_bytes());
        if let Some(entry) = self.entries.get_mut(&id) {
            if !entry.relays.contains(&relay) && entry.relays.len() < self.seen_on_max {
                entry.relays.push(relay);
                self.relay_entries += 1;
            }
            return if entry.bytes == bytes {
                Admit::Duplicate
            } else {
                Admit::Conflict
            };
        }
        if self.capacity == 0 {
            return Admit::New;
        }
        if self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                if let Some(entry) = self.entries.remove(&oldest) {
                    self.relay_entries -= entry.relays.len();
                }
                self.forgotten += 1;
            }
        }
        let mut relays = Vec::with_capacity(1);
        if self.seen_on_max > 0 {
            relays.push(relay);
            self.relay_entries += 1;
        }
        self.entries.insert(id, Entry { bytes, relays });
        self.order.push_back(id);
        Admit::New
    }

    /// Forget `id` (its copy failed verification): the next copy is new. The id was
    /// admitted moments ago, so its place in the eviction order is found from the back.
    pub(crate) fn forget(&mut self, id: EventId) {
        let Some(entry) = self.entries.remove(&id) else {
            return;
        };
        self.relay_entries -= entry.relays.len();
        if let Some(at) = self.order.iter().rposition(|&x| x == id) {
            self.order.remove(at);
        }
    }

    pub(crate) fn relays(&self, id: EventId) -> Option<&[RelayId]> {
        self.entries.get(&id).map(|e| e.relays.as_slice())
    }

    pub(crate) fn stats(&self) -> DedupStats {
        DedupStats {
            ids: self.entries.len(),
            capacity: self.capacity,
            seen_on: self.relay_entries,
            seen_on_max: self.seen_on_max,
            forgotten: self.forgotten,
        }
    }

    /// Its bookkeeping agrees with itself: the order and the map hold the same ids, and the
    /// counters match what is stored.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn check_consistency(&self) -> Result<(), String> {
        if self.entries.len() != self.order.len() {
            return Err(format!(
                "dedup holds {} ids but orders {}",
                self.entries.len(),
                self.order.len()
            ));
        }
        if self.entries.len() > self.capacity {
            return Err(format!("dedup over its bound: {}", self.entries.len()));
        }
        let entries: usize = self.entries.values().map(|e| e.relays.len()).sum();
        if entries != self.relay_entries {
            return Err(format!(
                "dedup counts {} seen_on entries, holds {entries}",
                self.relay_entries
            ));
        }
        Ok(())
    }
}

/// How much a subscription's dedup memory holds ([`RelayPool::dedup`](super::RelayPool::dedup)).
///
/// Its memory is bounded by `capacity` ids and `capacity * seen_on_max` `seen_on` entries:
/// per id about 100 bytes (the 32-byte id twice, in the map and in the age order, a
/// content hash, a `Vec` header) plus 4 bytes per `seen_on` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DedupStats {
    /// Ids remembered now (at most `capacity`).
    pub ids: usize,
    /// The bound ([`PoolConfig::dedup_capacity`](super::PoolConfig::dedup_capacity)).
    pub capacity: usize,
    /// `seen_on` entries over every remembered id (at most `ids * seen_on_max`).
    pub seen_on: usize,
    /// The per-id bound of `seen_on`.
    pub seen_on_max: usize,
    /// Ids forgotten at the bound so far, oldest first: a relay re-sending one of them
    /// delivers it again.
    pub forgotten: u64,
}

/// FNV-1a over the bytes: enough to tell a re-serialised or forged copy from the first one
/// (the first copy wins either way; this only decides what is counted).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_copy_wins_conflicts_are_told_apart_and_the_oldest_id_goes_first() {
        let id = |n: u8| EventId([n; 32]);
        let mut seen = Seen::new(2, 2);
        assert_eq!(seen.admit(id(1), "a", RelayId(0)), Admit::New);
        assert_eq!(seen.admit(id(1), "a", RelayId(1)), Admit::Duplicate);
        assert_eq!(seen.admit(id(1), "b", RelayId(2)), Admit::Conflict);
        assert_eq!(seen.relays(id(1)), Some(&[RelayId(0), RelayId(1)][..]));
        assert_eq!(seen.admit(id(2), "x", RelayId(0)), Admit::New);
        assert_eq!(seen.admit(id(3), "y", RelayId(0)), Admit::New);
        assert_eq!(seen.relays(id(1)), None, "the oldest went at the bound");
        assert_eq!(seen.admit(id(1), "a", RelayId(0)), Admit::New);
    }
}
