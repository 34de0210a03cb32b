//! Ordered maps kept as sorted vectors, for the pool's small per-relay and
//! per-subscription tables.
//!
//! A `BTreeMap` is compiled once per key and value type, several KiB of WebAssembly each
//! (search, insert with splits, remove with merges and steals; `bench/wasm_size.mjs --code`
//! files them under "B-tree maps and sets"), and the core has dozens of them. A sorted `Vec`
//! needs a binary search and a shift, a fraction of that. The price is linear inserts and
//! removes, so this type is only for tables small by construction: a subscription's REQs on
//! one relay (one, or a few groups of its people), and routing's relays (at most the
//! router's `max_relays`) with their placements and REQs. A table that can
//! reach the pool's bounds (10 000 relays or subscriptions) in any order, in one call or one
//! storm (a subscription's relays, a relay's routes, the pool's URLs, a publish's relays,
//! retry state under a rate-limit storm), that changes on every event (verification queues,
//! timers) or that a peer can grow (the dedup's ids, routing's authors) keeps its B-tree.
//! Iteration is in key order, as a `BTreeMap`'s, so a swap changes no output.

use std::borrow::Borrow;
use std::fmt;

/// A map ordered by key, as a `BTreeMap`, kept as a sorted vector of pairs.
pub(crate) struct SmallMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K: Ord, V> SmallMap<K, V> {
    /// An empty map; allocates nothing.
    pub(crate) const fn new() -> Self {
        SmallMap {
            entries: Vec::new(),
        }
    }

    /// Pairs in the map.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no pair.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value at `key`.
    pub(crate) fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        let at = self.find(key).ok()?;
        Some(&self.entries[at].1)
    }

    /// The value at `key`, to change.
    pub(crate) fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        let at = self.find(key).ok()?;
        Some(&mut self.entries[at].1)
    }

    /// Whether `key` has a value.
    pub(crate) fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    /// Set `key`'s value; the value it had, if any.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.entries[at].1, value)),
            Err(at) => {
                self.entries.insert(at, (key, value));
                None
            }
        }
    }

    /// Take `key`'s value out.
    pub(crate) fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let at = self.find(key).ok()?;
        Some(self.entries.remove(at).1)
    }

    /// `key`'s value, inserting the default first when it has none.
    pub(crate) fn get_or_default(&mut self, key: K) -> &mut V
    where
        V: Default,
    {
        let at = match self.find(&key) {
            Ok(at) => at,
            Err(at) => {
                self.entries.insert(at, (key, V::default()));
                at
            }
        };
        &mut self.entries[at].1
    }

    /// Remove every pair.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// The pairs in key order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order.
    pub(crate) fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }
}

impl<K: Ord, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap::new()
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for SmallMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

/// As `collect` into a `BTreeMap`: a key given twice keeps its last value.
impl<K: Ord, V> FromIterator<(K, V)> for SmallMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut map = SmallMap::new();
        for (k, v) in pairs {
            map.insert(k, v);
        }
        map
    }
}

impl<'a, K: Ord, V> IntoIterator for &'a SmallMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Ord, V> IntoIterator for SmallMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u16),
        Remove(u8),
        Default(u8),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => any::<u8>().prop_map(Op::Remove),
            2 => any::<u8>().prop_map(Op::Default),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Whatever is done to it, a small map answers as a `BTreeMap` given the same
        /// operations: the same returns, the same pairs in the same order.
        #[test]
        fn a_small_map_is_a_btree_map(ops in proptest::collection::vec(op(), 0..200)) {
            let mut small = SmallMap::new();
            let mut tree = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(small.insert(k, v), tree.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(small.remove(&k), tree.remove(&k)),
                    Op::Default(k) => {
                        *small.get_or_default(k) += 1;
                        *tree.entry(k).or_default() += 1;
                    }
                    Op::Clear => {
                        small.clear();
                        tree.clear();
                    }
                }
                prop_assert_eq!(small.len(), tree.len());
                prop_assert!(small.iter().eq(tree.iter()));
                prop_assert!(small.keys().eq(tree.keys()));
                prop_assert!(small.values().eq(tree.values()));
                for k in [0u8, 1, 127, 255] {
                    prop_assert_eq!(small.get(&k), tree.get(&k));
                    prop_assert_eq!(small.contains_key(&k), tree.contains_key(&k));
                }
            }
        }
    }

    #[test]
    fn collecting_keeps_a_repeated_keys_last_value_as_a_btree_map_does() {
        let pairs = [(3, "c"), (1, "a"), (3, "z"), (2, "b")];
        let small: SmallMap<i32, &str> = pairs.into_iter().collect();
        let tree: BTreeMap<i32, &str> = pairs.into_iter().collect();
        assert!(small.iter().eq(tree.iter()));
        assert_eq!(small.get(&3), Some(&"z"));
        assert_eq!(format!("{small:?}"), format!("{tree:?}"));
    }
}
