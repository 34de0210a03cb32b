//! [`Seen`]: the ids a logical subscription has delivered, across relays, bounded.
//!
//! Each id is kept with a hash of the bytes first delivered and the relays that sent it
//! (`seen_on`, at most `seen_on_max`). At `capacity` delivered ids the oldest is forgotten:
//! a relay that re-sends it afterwards (a reconnect's `since` overlap, a hostile flood)
//! delivers it again. Under verification an id is held *tentatively* from its arrival (so
//! that its other copies are recognised) until its verdict: a tentative id evicts nothing,
//! and one that is never delivered (it failed, or was dropped at `max_unverified`) leaves
//! the memory as it found it. Only a delivery counts towards `capacity`. A map ordered by key rather than a hash map: ids come from the peer, and a
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
    entries: BTreeMap<Key, Entry>,
    order: VecDeque<EventId>,
    capacity: usize,
    seen_on_max: usize,
    /// `seen_on` entries over all ids (each at most `seen_on_max`).
    relay_entries: usize,
    /// Ids held tentatively, awaiting a verdict (not counted towards `capacity`).
    tentative: usize,
    /// Ids forgotten at the bound, oldest first.
    forgotten: u64,
}

/// An id as four big-endian words: ordered as its bytes are, and compared a word at a time.
/// Every EVENT frame's id is searched for here, and on wasm32 comparing two byte arrays is a
/// byte-at-a-time `memcmp`, which a profile of the wasm put first in a frame's cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key([u64; 4]);

impl Key {
    fn of(id: &EventId) -> Key {
        let mut words = [0u64; 4];
        for (word, bytes) in words.iter_mut().zip(id.0.chunks_exact(8)) {
            *word = bytes.iter().fold(0, |w, &b| (w << 8) | u64::from(b));
        }
        Key(words)
    }
}

#[derive(Debug)]
struct Entry {
    bytes: u64,
    relays: Vec<RelayId>,
    /// Awaiting a verdict: not delivered yet.
    tentative: bool,
}

impl Seen {
    pub(crate) fn new(capacity: usize, seen_on_max: usize) -> Self {
        Seen {
            entries: BTreeMap::new(),
            order: VecDeque::new(),
            capacity,
            seen_on_max,
            relay_entries: 0,
            tentative: 0,
            forgotten: 0,
        }
    }

    /// A copy of `id` from `relay`. A new id is remembered at once (`tentative: false`, the
    /// copy is delivered now) or until its verdict (`tentative: true`: see
    /// [`Seen::confirm`] and [`Seen::forget`]).
    pub(crate) fn admit(
        &mut self,
        id: EventId,
        raw: &str,
        relay: RelayId,
        tentative: bool,
    ) -> Admit {
        let bytes = summary(raw.as_bytes());
        if let Some(entry) = self.entries.get_mut(&Key::of(&id)) {
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
        if !tentative {
            self.evict(self.capacity - 1);
        }
        let mut relays = Vec::with_capacity(1);
        if self.seen_on_max > 0 {
            relays.push(relay);
            self.relay_entries += 1;
        }
        self.entries.insert(
            Key::of(&id),
            Entry {
                bytes,
                relays,
                tentative,
            },
        );
        self.tentative += usize::from(tentative);
        self.order.push_back(id);
        Admit::New
    }

    /// `id`'s copy passed verification and is delivered: it counts towards `capacity` now,
    /// and the oldest delivered id goes if that is over the bound.
    pub(crate) fn confirm(&mut self, id: EventId) {
        let Some(entry) = self.entries.get_mut(&Key::of(&id)) else {
            return;
        };
        if !std::mem::replace(&mut entry.tentative, false) {
            return;
        }
        self.tentative -= 1;
        self.evict(self.capacity);
    }

    /// Forget the oldest delivered ids until at most `keep` are left. Tentative ids stay:
    /// they are newer than every delivered one but those whose verdicts overtook theirs,
    /// so the scan passes at most the copies under verification.
    fn evict(&mut self, keep: usize) {
        while self.entries.len() - self.tentative > keep {
            let Some(at) = self
                .order
                .iter()
                .position(|x| self.entries.get(&Key::of(x)).is_some_and(|e| !e.tentative))
            else {
                return;
            };
            let Some(oldest) = self.order.remove(at) else {
                return;
            };
            if let Some(entry) = self.entries.remove(&Key::of(&oldest)) {
                self.relay_entries -= entry.relays.len();
            }
            self.forgotten += 1;
        }
    }

    /// `id`'s copy failed verification and `relay`'s alternate copy `raw` is verified in its
    /// place: the id keeps its place in the age order (its delivery, if it passes, takes the
    /// failed copy's place in the subscription's order too), now with the alternate's bytes
    /// and only `relay` in `seen_on`.
    pub(crate) fn replace_copy(&mut self, id: EventId, raw: &str, relay: RelayId) {
        let Some(entry) = self.entries.get_mut(&Key::of(&id)) else {
            return;
        };
        entry.bytes = summary(raw.as_bytes());
        self.relay_entries -= entry.relays.len();
        entry.relays.clear();
        if self.seen_on_max > 0 {
            entry.relays.push(relay);
            self.relay_entries += 1;
        }
    }

    /// Forget `id` (its copy failed verification): the next copy is new. The id was
    /// admitted moments ago, so its place in the eviction order is found from the back.
    pub(crate) fn forget(&mut self, id: EventId) {
        let Some(entry) = self.entries.remove(&Key::of(&id)) else {
            return;
        };
        self.relay_entries -= entry.relays.len();
        self.tentative -= usize::from(entry.tentative);
        if let Some(at) = self.order.iter().rposition(|&x| x == id) {
            self.order.remove(at);
        }
    }

    /// Delivered ids, oldest first, with their bytes' summary and `seen_on`: what a
    /// checkpoint keeps (ids under verification are not delivered yet, so not kept).
    pub(crate) fn delivered(&self) -> impl Iterator<Item = (EventId, u64, &[RelayId])> + '_ {
        self.order.iter().filter_map(|id| {
            let entry = self.entries.get(&Key::of(id))?;
            (!entry.tentative).then_some((*id, entry.bytes, entry.relays.as_slice()))
        })
    }

    /// Remember a delivered id from a checkpoint, as the newest; the oldest goes past
    /// `capacity`. An id already remembered is left as it is.
    pub(crate) fn restore_delivered(&mut self, id: EventId, bytes: u64, mut relays: Vec<RelayId>) {
        if self.capacity == 0 || self.entries.contains_key(&Key::of(&id)) {
            return;
        }
        relays.truncate(self.seen_on_max);
        self.relay_entries += relays.len();
        self.entries.insert(
            Key::of(&id),
            Entry {
                bytes,
                relays,
                tentative: false,
            },
        );
        self.order.push_back(id);
        self.evict(self.capacity);
    }

    pub(crate) fn relays(&self, id: EventId) -> Option<&[RelayId]> {
        self.entries.get(&Key::of(&id)).map(|e| e.relays.as_slice())
    }

    pub(crate) fn stats(&self) -> DedupStats {
        DedupStats {
            ids: self.entries.len(),
            verifying: self.tentative,
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
        let (tentative, entries) = self.entries.values().fold((0, 0), |(t, r), e| {
            (t + usize::from(e.tentative), r + e.relays.len())
        });
        if tentative != self.tentative {
            return Err(format!(
                "dedup counts {} tentative ids, holds {tentative}",
                self.tentative
            ));
        }
        if self.entries.len() - tentative > self.capacity {
            return Err(format!(
                "dedup over its bound: {} delivered ids",
                self.entries.len() - tentative
            ));
        }
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
/// Its memory is bounded by `capacity` delivered ids, plus the ids awaiting a verdict under
/// verification (at most [`PoolConfig::max_unverified`](super::PoolConfig::max_unverified)
/// pool-wide), each with at most `seen_on_max` `seen_on` entries: per id about 100 bytes (the 32-byte id twice, in the map and in the age order, a
/// content hash, a `Vec` header) plus 4 bytes per `seen_on` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DedupStats {
    /// Ids remembered now: at most `capacity` delivered ones, plus `verifying`.
    pub ids: usize,
    /// Of those, ids held only until their verdict ([`PoolConfig::verify`](super::PoolConfig::verify)):
    /// each evicts nothing, and leaves again if its copy is not delivered.
    pub verifying: usize,
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

/// A summary of the bytes, read eight at a time: enough to tell a re-serialised or forged
/// copy from the first one (the first copy wins either way; this only decides what is
/// counted). FNV-1a, a chain of one multiply per byte, was about a third of a native
/// frame's CPU time (13% of its instructions: the multiplies wait on each other).
fn summary(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunks = bytes.chunks_exact(8);
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or_default());
        h = (h ^ word).wrapping_mul(K).rotate_left(31);
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ordered_as_the_ids_bytes() {
        let mut ids = vec![EventId([0; 32]), EventId([0xff; 32])];
        for at in [0, 7, 8, 15, 16, 24, 31] {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut bytes = [0x55; 32];
                bytes[at] = value;
                ids.push(EventId(bytes));
            }
        }
        for a in &ids {
            for b in &ids {
                assert_eq!(Key::of(a).cmp(&Key::of(b)), a.0.cmp(&b.0), "{a:?}, {b:?}");
            }
        }
    }

    #[test]
    fn first_copy_wins_conflicts_are_told_apart_and_the_oldest_id_goes_first() {
        let id = |n: u8| EventId([n; 32]);
        let mut seen = Seen::new(2, 2);
        assert_eq!(seen.admit(id(1), "a", RelayId(0), false), Admit::New);
        assert_eq!(seen.admit(id(1), "a", RelayId(1), false), Admit::Duplicate);
        assert_eq!(seen.admit(id(1), "b", RelayId(2), false), Admit::Conflict);
        assert_eq!(seen.relays(id(1)), Some(&[RelayId(0), RelayId(1)][..]));
        assert_eq!(seen.admit(id(2), "x", RelayId(0), false), Admit::New);
        assert_eq!(seen.admit(id(3), "y", RelayId(0), false), Admit::New);
        assert_eq!(seen.relays(id(1)), None, "the oldest went at the bound");
        assert_eq!(seen.admit(id(1), "a", RelayId(0), false), Admit::New);
    }

    #[test]
    fn a_tentative_id_evicts_nothing_until_it_is_confirmed() {
        let id = |n: u8| EventId([n; 32]);
        let mut seen = Seen::new(2, 1);
        seen.admit(id(1), "a", RelayId(0), false);
        seen.admit(id(2), "b", RelayId(0), false);
        // Two copies under verification at the bound: both held, nothing evicted.
        assert_eq!(seen.admit(id(3), "c", RelayId(0), true), Admit::New);
        assert_eq!(seen.admit(id(4), "d", RelayId(0), true), Admit::New);
        assert_eq!(seen.admit(id(3), "c", RelayId(1), true), Admit::Duplicate);
        assert_eq!((seen.stats().ids, seen.stats().verifying), (4, 2));
        // 3 fails: the memory is as before it came.
        seen.forget(id(3));
        assert!(seen.relays(id(1)).is_some() && seen.relays(id(2)).is_some());
        // 4 passes: now the oldest delivered id goes.
        seen.confirm(id(4));
        assert_eq!(seen.relays(id(1)), None);
        assert!(seen.relays(id(2)).is_some() && seen.relays(id(4)).is_some());
        assert_eq!((seen.stats().ids, seen.stats().verifying), (2, 0));
        assert_eq!(seen.stats().forgotten, 1);
    }
}
