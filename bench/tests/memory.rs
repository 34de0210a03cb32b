//! Heap bytes per live subscription, counted exactly: the session's own cost beyond the
//! filter JSON it must keep must stay within 480 bytes. It was 300 before exact catch-up:
//! each subscription now carries its catch-up state (when it went live, the gap it is
//! catching up, the phase) and a dedup memory exact above a floor; the remembered events
//! themselves (40 bytes each, at most `CatchUpConfig::memory`) come on top once delivered.

use tether_bench::{filter, live_bytes, live_session, Counting};

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn a_live_subscription_costs_at_most_480_bytes_beyond_its_filter_json() {
    const N: usize = 10_000;
    let json: usize = (0..N).map(|i| filter(i).json().len() + 2).sum();
    let before = live_bytes();
    let session = live_session(N);
    let after = live_bytes();
    assert_eq!(session.open_subscriptions(), N);
    let per_sub = (after - before) / N;
    let beyond = per_sub.saturating_sub(json / N);
    println!(
        "{per_sub} B per live subscription, {} B of it filter JSON, {beyond} B beyond",
        json / N
    );
    assert!(beyond <= 480, "{beyond} B beyond the filter JSON");
    drop(session);
}
