//! Heap bytes per followed author in the router, counted exactly, at 10 000 authors: each
//! with a relay list of 4 write relays over 2 000 relays, and 4 learned (author, relay)
//! pairs. What an outbox subscription costs beyond the pool's own.

use tether_bench::{live_bytes, Counting};
use tether_core::router::{Router, RouterConfig};
use tether_core::Instant;

#[global_allocator]
static ALLOC: Counting = Counting;

const AUTHORS: u32 = 10_000;
const RELAYS: u32 = 2_000;

fn key(i: u32) -> String {
    format!("{i:064x}")
}

fn list(i: u32) -> String {
    let tags: Vec<String> = (0..4)
        .map(|k| format!(r#"["r","wss://r{}.example"]"#, (i * 7 + k * 331) % RELAYS))
        .collect();
    format!(
        r#"{{"id":"{:064x}","pubkey":"{}","created_at":1,"kind":10002,"tags":[{}]}}"#,
        u64::from(i) + (1 << 40),
        key(i),
        tags.join(",")
    )
}

#[test]
fn a_followed_author_costs_at_most_1280_bytes_in_the_router() {
    let before = live_bytes();
    let mut config = RouterConfig::default();
    config.indexers = Vec::new();
    let mut router = Router::new(config);
    router.set_wall_clock(Instant::ZERO, 1_700_000_000);
    let keys: Vec<String> = (0..AUTHORS).map(key).collect();
    router.follow(keys.iter().map(String::as_str)).unwrap();
    for i in 0..AUTHORS {
        router.handle_list(Instant::ZERO, &list(i)).unwrap();
    }
    for i in 0..AUTHORS {
        for k in 0..4 {
            let url = format!("wss://r{}.example", (i * 7 + k * 331) % RELAYS);
            if k % 2 == 0 {
                router.handle_event(Instant::ZERO, &url, &keys[i as usize]);
            }
            router.handle_eose(Instant::ZERO, &url, [keys[i as usize].as_str()]);
        }
    }
    let routes = router.route(Instant::from_millis(1));
    drop(routes);
    let after = live_bytes();
    let per_author = (after - before) / AUTHORS as usize;
    println!("{per_author} B per followed author (10 000 authors, 4 relays and 4 pairs each)");
    assert!(per_author <= 1280, "{per_author} B per author");
    drop(router);
}
