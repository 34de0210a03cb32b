//! One small in-place sort for the core's own slices.
//!
//! The standard library's sorts are fast and large: each element type and comparison
//! instantiates its own pattern-defeating quicksort with its small-sort networks, 5 to 8 KB
//! of wasm apiece, and the core sorts a dozen kinds of slices (`bench/wasm_size.mjs --code`
//! files them under "sorts"). None of these sorts is on a per-frame path: each runs
//! once per plan, catch-up round or outcome, over at most a bound's worth of elements. A
//! heapsort is a few hundred bytes per instantiation, O(n log n) in the worst case and
//! allocates nothing; a slice already in order costs one pass. It is several times slower
//! than `sort_unstable` on a shuffled slice. The lists that grow long in routing (a
//! relay's asks, ten thousand authors at most, with the authors added to them) are two
//! sorted runs, merged in linear time instead ([`merge_by_key`]). Like `sort_unstable`, the
//! heapsort does not keep the order of equal elements: the core sorts only by keys that tell
//! its elements apart, so the result is the standard library's.

use std::cmp::Ordering;

/// Sort `v` ascending (as `slice::sort_unstable`).
pub(crate) fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp);
}

/// Sort `v` ascending by `key` (as `slice::sort_unstable_by_key`).
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// Sort `v` by `compare` (as `slice::sort_unstable_by`).
pub(crate) fn sort_by<T>(v: &mut [T], mut compare: impl FnMut(&T, &T) -> Ordering) {
    let mut less = |a: &T, b: &T| compare(a, b) == Ordering::Less;
    // Lists are often in order already (a plan's asks, ids from a tree): one pass, as the
    // standard library's sort would find too.
    if v.windows(2).all(|w| !less(&w[1], &w[0])) {
        return;
    }
    let len = v.len();
    for node in (0..len / 2).rev() {
        sift_down(v, node, len, &mut less);
    }
    for end in (1..len).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &mut less);
    }
}

/// Add `extra` to `v`, both sorted by `key` first (one pass each when they already are), by
/// merging: the order sorting them together gives when no key is in both, in linear time
/// for the common case of two runs (a relay's asks and the authors added to them).
pub(crate) fn merge_by_key<T, K: Ord>(
    v: &mut Vec<T>,
    mut extra: Vec<T>,
    mut key: impl FnMut(&T) -> K,
) {
    // `v` ends sorted even when there is nothing to add, as sorting the two together would
    // leave it.
    sort_by_key(v, &mut key);
    if extra.is_empty() {
        return;
    }
    sort_by_key(&mut extra, &mut key);
    let old = std::mem::take(v);
    v.reserve(old.len() + extra.len());
    let (mut old, mut extra) = (old.into_iter().peekable(), extra.into_iter().peekable());
    loop {
        let from_old = match (old.peek(), extra.peek()) {
            (Some(a), Some(b)) => key(a) <= key(b),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return,
        };
        v.extend(if from_old { old.next() } else { extra.next() });
    }
}

/// Move `v[node]` down the max-heap `v[..end]` until neither child is greater.
fn sift_down<T>(v: &mut [T], mut node: usize, end: usize, less: &mut impl FnMut(&T, &T) -> bool) {
    loop {
        let mut child = 2 * node + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[node], &v[child]) {
            return;
        }
        v.swap(node, child);
        node = child;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_merge_with_nothing_to_add_still_sorts() {
        let mut v = vec![(1, 'b'), (0, 'a')];
        merge_by_key(&mut v, Vec::new(), |&(k, _)| k);
        assert_eq!(v, [(0, 'a'), (1, 'b')]);
    }

    proptest! {
        /// The standard library's result, duplicates included.
        #[test]
        fn sorts_as_the_standard_library(mut v in prop::collection::vec(0u16..64, 0..200)) {
            let mut expected = v.clone();
            expected.sort_unstable();
            sort(&mut v);
            prop_assert_eq!(v, expected);
        }

        /// By key and by comparison: ordered by the key, the same elements.
        #[test]
        fn sorts_by_key_and_by_comparison(v in prop::collection::vec((0u8..16, any::<u32>()), 0..200)) {
            let mut by_key = v.clone();
            sort_by_key(&mut by_key, |&(k, _)| k);
            prop_assert!(by_key.windows(2).all(|w| w[0].0 <= w[1].0));
            let mut descending = v.clone();
            sort_by(&mut descending, |a, b| b.cmp(a));
            let mut expected = v.clone();
            expected.sort_unstable_by(|a, b| b.cmp(a));
            prop_assert_eq!(&descending, &expected);
            let (mut got, mut all) = (by_key, v);
            got.sort_unstable();
            all.sort_unstable();
            prop_assert_eq!(got, all);
        }

        /// Merging two lists with distinct keys gives what sorting them together gives.
        #[test]
        fn merges_as_sorting_together(
            keys in prop::collection::btree_set(any::<u32>(), 0..200),
            split in prop::collection::vec(any::<bool>(), 200),
            presort in any::<bool>(),
        ) {
            let (mut v, mut extra) = (Vec::new(), Vec::new());
            for (i, k) in keys.iter().rev().enumerate() {
                let item = (*k, i);
                if split[i] { v.push(item) } else { extra.push(item) }
            }
            if presort {
                v.reverse();
                extra.reverse();
            }
            let mut expected: Vec<(u32, usize)> = v.iter().chain(&extra).copied().collect();
            expected.sort_unstable();
            merge_by_key(&mut v, extra, |&(k, _)| k);
            prop_assert_eq!(v, expected);
        }
    }
}
