//! [`Timers`]: one deadline per key, ordered by time, so the earliest is found without a
//! scan. The relay session keeps one for its subscriptions and its outbox one for its
//! publishes; each owner also keeps its own deadline beside the key (`slot`), which is
//! what lets a timer be moved or cancelled in O(log n).

use std::collections::BTreeSet;

use crate::time::Instant;

/// Deadlines by time, each tagged with its key; at most one per key.
#[derive(Clone, Debug)]
pub(crate) struct Timers<K> {
    by_time: BTreeSet<(Instant, K)>,
}

impl<K: Ord + Copy> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            by_time: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Copy> Timers<K> {
    /// Move `key`'s deadline, kept in its owner's `slot`, to `at` (`None` cancels it).
    pub(crate) fn set(&mut self, key: K, slot: &mut Option<Instant>, at: Option<Instant>) {
        if *slot == at {
            // Unchanged (the common case: a frame that moves no deadline).
            return;
        }
        if let Some(old) = slot.take() {
            self.by_time.remove(&(old, key));
        }
        if let Some(at) = at {
            *slot = Some(at);
            self.by_time.insert((at, key));
        }
    }

    /// The earliest deadline.
    #[must_use]
    pub(crate) fn next(&self) -> Option<Instant> {
        self.by_time.first().map(|&(at, _)| at)
    }

    /// The earliest deadline and its key.
    #[must_use]
    pub(crate) fn first(&self) -> Option<(Instant, K)> {
        self.by_time.first().copied()
    }

    /// The key of the earliest deadline due at `now`, if any. The caller clears it from its
    /// owner with [`Timers::set`] (to `None` or a new deadline) before asking again.
    #[must_use]
    pub(crate) fn due(&self, now: Instant) -> Option<K> {
        self.by_time
            .first()
            .filter(|&&(at, _)| at <= now)
            .map(|&(_, key)| key)
    }

    /// Forget every deadline (the owners clear their slots themselves).
    pub(crate) fn clear(&mut self) {
        self.by_time.clear();
    }

    /// Every deadline, earliest first.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Instant, K)> + '_ {
        self.by_time.iter().copied()
    }
}
