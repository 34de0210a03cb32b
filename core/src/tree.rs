//! Building a B-tree map or set by inserting, where `collect` would sort first.
//!
//! `FromIterator` for `BTreeMap` and `BTreeSet` gathers a `Vec`, sorts it with the standard
//! library's stable sort and bulk-builds the tree. That sort is compiled once per element
//! type, a few kilobytes of WebAssembly each, and collecting into trees of ~25 element types
//! put about 30 copies into tether-wasm. Inserting one at a time reuses the tree's insert,
//! compiled anyway, and builds the same tree: the sizes these trees have (a plan's relays, a
//! subscription's people, a checkpoint's tables) make the difference in time immaterial.

use std::collections::{BTreeMap, BTreeSet};

/// [`Iterator::collect`] into a B-tree, without the sort.
pub(crate) trait IntoTree: Iterator + Sized {
    /// The pairs as a map; a key given twice keeps its last value, as `collect` does.
    fn into_map<K: Ord, V>(self) -> BTreeMap<K, V>
    where
        Self: Iterator<Item = (K, V)>,
    {
        let mut map = BTreeMap::new();
        map.extend(self);
        map
    }

    /// The items as a set.
    fn into_set<T: Ord>(self) -> BTreeSet<T>
    where
        Self: Iterator<Item = T>,
    {
        let mut set = BTreeSet::new();
        set.extend(self);
        set
    }
}

impl<I: Iterator> IntoTree for I {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trees_are_the_ones_collect_builds() {
        let pairs = [(3, "c"), (1, "a"), (3, "z"), (2, "b")];
        let map: BTreeMap<i32, &str> = pairs.iter().copied().collect();
        assert_eq!(pairs.iter().copied().into_map(), map);
        assert_eq!(map[&3], "z");
        let set: BTreeSet<i32> = [5, 1, 5, 3].into_iter().collect();
        assert_eq!([5, 1, 5, 3].into_iter().into_set(), set);
    }
}
