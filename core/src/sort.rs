//! One small in-place sort for the core's own slices.
//!
//! The standard library's sorts are fast and large: each element type and comparison
//! instantiates its own pattern-defeating quicksort with its small-sort networks, 5 to 8 KB
//! of wasm apiece, and the core sorts a dozen kinds of slices (52 KiB of tether-wasm's code,
//! 13 KiB of its gzipped download). None of these sorts is on a per-frame path: each runs
//! once per plan, catch-up round or outcome, over at most a bound's worth of elements. A
//! heapsort is a few hundred bytes per instantiation, O(n log n) in the worst case and
//! allocates nothing; a slice already in order costs one pass. It is slower: 10 000
//! shuffled `(u32, f64)` pairs took 0.7 to 1.4 ms natively where `sort_unstable_by_key`
//! took 0.11 to 0.15 ms (a one-off timing), at most once per plan and routed relay, for a
//! relay asked about ten thousand authors. Like `sort_unstable`, it does not keep the order of
//! equal elements: the core sorts only by keys that tell its elements apart, so the result
//! is the standard library's.

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
    }
}
