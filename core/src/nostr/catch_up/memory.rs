//! [`Memory`]: the ids a subscription delivered, exact above a floor. It drops whatever a
//! catch-up delivers again (a `since` overlap, a refusal retry, a NIP-77 fetch) in any order
//! the relay answers, and it is the "have" set a NIP-77 reconciliation starts from.

use std::collections::VecDeque;

use crate::nostr::message::EventId;

/// Future-dated ids remembered per subscription, apart from the window.
pub(crate) const FUTURE_IDS: usize = 16;

/// One remembered event: `(created_at, id)`, the order NIP-77 sorts items in.
pub(crate) type Item = (u64, EventId);

/// Every event delivered to one subscription with `created_at >= floor` (the window), kept
/// sorted by `(created_at, id)`.
///
/// The bound is what makes the floor move: when the subscription's share is full, the oldest
/// second goes and the floor rises past it. A catch-up never asks below the floor, so what it
/// re-delivers is always remembered: dedup is exact inside the window, and the window is
/// what the session reports as exact.
///
/// Keyed by `(created_at, id)`, not by id alone: a lookup is a binary search from the
/// `created_at` the event carries, and live events (in order) append. An id always comes with
/// the same `created_at` (the id hashes it), so a relay that sends one id with two dates sent
/// two different (at least one invalid) events; the pool's verification catches that.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    items: VecDeque<Item>,
    floor: u64,
    /// Boxed: one pointer for the many subscriptions that never see a future date.
    future: Option<Box<FutureItems>>,
}

/// A ring of the last [`FUTURE_IDS`] future-dated items: re-delivered by every catch-up whose
/// window reaches them, never allowed to take the window's room or move the floor.
#[derive(Debug, Default)]
struct FutureItems {
    items: [Option<Item>; FUTURE_IDS],
    next: usize,
}

/// Why [`Memory::insert`] forgot something, for the session's total bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// Items added (0 or 1).
    pub(crate) added: usize,
    /// Items evicted to make room.
    pub(crate) evicted: usize,
}

impl Memory {
    /// Whether this event was delivered (and remembered).
    pub(crate) fn contains(&self, created_at: u64, id: EventId) -> bool {
        self.items.binary_search(&(created_at, id)).is_ok()
            || self
                .future
                .as_ref()
                .is_some_and(|f| f.items.contains(&Some((created_at, id))))
    }

    /// Below this `created_at` nothing is remembered; at and above it, everything delivered is.
    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    /// How many items are remembered in the window.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// The newest `created_at` remembered, if any.
    pub(crate) fn newest(&self) -> Option<u64> {
        self.items.back().map(|&(t, _)| t)
    }

    /// Remember a delivered event. `room` is how many items this subscription may still add
    /// without evicting (its share, within the session's total); with none left, the oldest
    /// second goes first, and with nothing to evict the floor rises past the event instead.
    pub(crate) fn insert(&mut self, created_at: u64, id: EventId, room: usize) -> Stored {
        let mut stored = Stored {
            added: 0,
            evicted: 0,
        };
        if created_at < self.floor {
            return stored;
        }
        if room == 0 {
            let Some(&(oldest, _)) = self.items.front() else {
                // Nothing of ours to give up: this event cannot be remembered, so the window
                // must start after it.
                self.floor = created_at.saturating_add(1);
                return stored;
            };
            stored.evicted = self.forget_through(oldest);
            if created_at < self.floor {
                return stored;
            }
        }
        // Live events arrive in order (an append); a catch-up answers newest first, which
        // lands near the back too.
        let at = match self.items.binary_search(&(created_at, id)) {
            Ok(_) => return stored,
            Err(at) => at,
        };
        self.items.insert(at, (created_at, id));
        stored.added = 1;
        stored
    }

    /// Remember a future-dated event apart (see [`FUTURE_IDS`]).
    pub(crate) fn insert_future(&mut self, created_at: u64, id: EventId) {
        let ring = self.future.get_or_insert_with(Box::default);
        ring.items[ring.next] = Some((created_at, id));
        ring.next = (ring.next + 1) % FUTURE_IDS;
    }

    /// Items with `created_at >= since`, window and future-dated ones, for a NIP-77 "have" set.
    pub(crate) fn items_since(&self, since: u64) -> impl Iterator<Item = Item> + '_ {
        let start = self.items.partition_point(|&(t, _)| t < since);
        let future = self
            .future
            .iter()
            .flat_map(|f| f.items.iter().flatten().copied());
        self.items
            .range(start..)
            .copied()
            .chain(future.filter(move |&(t, _)| t >= since))
    }

    /// The floor, the window's items and the future-dated ones, oldest first: what a
    /// checkpoint keeps.
    pub(crate) fn parts(&self) -> (u64, Vec<Item>, Vec<Item>) {
        let mut future: Vec<Item> = self
            .future
            .iter()
            .flat_map(|f| f.items.iter().flatten().copied())
            .collect();
        crate::sort::sort(&mut future);
        (self.floor, self.items.iter().copied().collect(), future)
    }

    /// A memory from a checkpoint's parts, cut to `limit` items in the window (the oldest
    /// seconds go, and the floor rises past them, as if the bound had applied all along).
    ///
    /// # Errors
    /// A description when the parts contradict each other: items out of order, repeated or
    /// below the floor, or more future-dated ones than the ring holds.
    pub(crate) fn from_parts(
        floor: u64,
        items: Vec<Item>,
        future: Vec<Item>,
        limit: usize,
    ) -> Result<Memory, String> {
        if items.windows(2).any(|w| w[0] >= w[1]) {
            return Err("remembered events out of order or repeated".into());
        }
        if items.first().is_some_and(|&(t, _)| t < floor) {
            return Err("a remembered event below the floor".into());
        }
        if future.len() > FUTURE_IDS {
            return Err(format!("more than {FUTURE_IDS} future-dated events"));
        }
        let mut memory = Memory {
            items: items.into(),
            floor,
            future: None,
        };
        while memory.items.len() > limit {
            let Some(&(oldest, _)) = memory.items.front() else {
                break;
            };
            memory.forget_through(oldest);
        }
        for (created_at, id) in future {
            memory.insert_future(created_at, id);
        }
        Ok(memory)
    }

    /// Forget every item dated `created_at` or earlier; the floor moves past it. Returns how
    /// many went.
    fn forget_through(&mut self, created_at: u64) -> usize {
        let gone = self.items.partition_point(|&(t, _)| t <= created_at);
        self.items.drain(..gone);
        self.floor = self.floor.max(created_at.saturating_add(1));
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> EventId {
        EventId([n; 32])
    }

    #[test]
    fn remembers_in_any_order_and_the_floor_rises_by_whole_seconds() {
        let mut m = Memory::default();
        // Newest first, as relays answer.
        for (n, t) in [(5, 50), (4, 40), (3, 40), (2, 20)] {
            assert_eq!(m.insert(t, id(n), 10).added, 1);
        }
        assert!(m.contains(40, id(3)) && m.contains(40, id(4)));
        assert!(!m.contains(41, id(4)), "keyed by (created_at, id)");
        assert_eq!(m.insert(40, id(4), 10).added, 0, "already there");
        // No room: the oldest second (20) goes, then the whole next one (40) when needed.
        assert_eq!(
            m.insert(60, id(6), 0),
            Stored {
                added: 1,
                evicted: 1
            }
        );
        assert_eq!(m.floor(), 21);
        assert_eq!(
            m.insert(70, id(7), 0),
            Stored {
                added: 1,
                evicted: 2
            }
        );
        assert_eq!(m.floor(), 41);
        assert_eq!(m.len(), 3);
        assert_eq!(m.insert(41, id(9), 5).added, 1);
        assert_eq!(
            m.insert(30, id(8), 5).added,
            0,
            "below the floor: not remembered"
        );
        let since_50: Vec<Item> = m.items_since(50).collect();
        assert_eq!(since_50, vec![(50, id(5)), (60, id(6)), (70, id(7))]);
    }

    #[test]
    fn with_nothing_to_give_up_the_floor_passes_the_event() {
        let mut m = Memory::default();
        assert_eq!(
            m.insert(100, id(1), 0),
            Stored {
                added: 0,
                evicted: 0
            }
        );
        assert_eq!(m.floor(), 101);
        assert!(!m.contains(100, id(1)));
    }

    #[test]
    fn future_items_live_in_their_own_ring() {
        let mut m = Memory::default();
        for n in 0..=FUTURE_IDS as u8 {
            m.insert_future(u64::MAX - u64::from(n), id(n));
        }
        assert!(!m.contains(u64::MAX, id(0)), "the oldest went");
        assert!(m.contains(u64::MAX - 1, id(1)));
        assert_eq!(m.items_since(0).count(), FUTURE_IDS);
        assert_eq!(m.len(), 0);
    }
}
