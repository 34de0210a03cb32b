//! The `router` target: relay lists (well-formed, hostile and junk), deliveries, EOSEs,
//! failures, refusals and liveness hints, decoded from the bytes and fed to a
//! [`Router`] with small bounds; after every input its routes stay within the budget, name
//! each relay once, ask only followed authors, and the coverage names every followed author
//! exactly once. At the end the checkpoint's JSON restores to the same checkpoint.

use std::collections::BTreeSet;
use std::time::Duration;

use arbitrary::{Result, Unstructured};
use tether_core::router::{Refusal, Router, RouterCheckpoint, RouterConfig};
use tether_core::Instant;

/// The `router` fuzz target's body.
pub fn router(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let _ = run(&mut u);
}

const AUTHORS: u32 = 8;
const RELAYS: u8 = 24;

fn key(i: u32) -> String {
    format!("{i:064x}")
}

fn url(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=9u8)? {
        0 => {
            let len = u.int_in_range(0..=40)?;
            String::from_utf8_lossy(u.bytes(len)?).into_owned()
        }
        1 => format!("ws://127.0.0.{}", u.int_in_range(0..=3u8)?),
        2 => format!("wss://R{}.EXAMPLE:443/", u.int_in_range(0..=RELAYS - 1)?),
        _ => format!("wss://r{}.example", u.int_in_range(0..=RELAYS - 1)?),
    })
}

fn list(u: &mut Unstructured<'_>) -> Result<String> {
    let author = u.int_in_range(0..=AUTHORS + 2)?;
    let created_at: u64 = u.int_in_range(0..=20)?;
    let kind = if u.ratio(1, 4)? { 10_050 } else { 10_002 };
    let name = if kind == 10_050 { "relay" } else { "r" };
    let n = if u.ratio(1, 16)? {
        2_000
    } else {
        u.int_in_range(0..=12)?
    };
    let mut tags = Vec::new();
    for _ in 0..n {
        let marker = match u.int_in_range(0..=3u8)? {
            0 => r#","read""#,
            1 => r#","write""#,
            2 => r#","junk""#,
            _ => "",
        };
        let url = url(u)?.replace(['"', '\\'], "");
        tags.push(format!(r#"["{name}","{url}"{marker}]"#));
    }
    let id: u64 = u.arbitrary()?;
    Ok(format!(
        r#"{{"id":"{id:064x}","pubkey":"{}","created_at":{created_at},"kind":{kind},"tags":[{}]}}"#,
        key(author),
        tags.join(",")
    ))
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let mut config = RouterConfig::default();
    config.max_relays = u.int_in_range(1..=8)?;
    config.probe_slots = u.int_in_range(0..=3)?;
    config.max_probes = u.int_in_range(0..=10)?;
    config.max_list_relays = u.int_in_range(0..=6)?;
    config.max_known_relays = u.int_in_range(1..=32)?;
    config.max_pairs_per_author = u.int_in_range(1..=6)?;
    config.indexers = vec!["wss://index.example".into()];
    let budget = config.max_relays;
    let mut router = Router::new(config.clone());
    router.set_wall_clock(Instant::ZERO, u.int_in_range(0..=2_000_000_000)?);
    let keys: Vec<String> = (0..AUTHORS).map(key).collect();
    router
        .follow(keys.iter().map(String::as_str))
        .expect("hex keys");
    let mut now = 0u64;
    for _ in 0..u.int_in_range(0..=64)? {
        now += u64::from(u.int_in_range(0..=5_000u16)?);
        let t = Instant::from_millis(now);
        let relay = format!("wss://r{}.example", u.int_in_range(0..=RELAYS - 1)?);
        let author = key(u.int_in_range(0..=AUTHORS)?);
        match u.int_in_range(0..=8u8)? {
            0 => {
                let _ = router.handle_list(t, &list(u)?);
            }
            1 => {
                let len = u.int_in_range(0..=64)?;
                let junk = String::from_utf8_lossy(u.bytes(len)?).into_owned();
                let _ = router.handle_list(t, &junk);
            }
            2 => router.handle_event(t, &relay, &author),
            3 => router.handle_eose(t, &relay, keys.iter().map(String::as_str)),
            4 => router.handle_failed(t, &relay),
            5 => router.handle_opened(t, &relay),
            6 => {
                let why = match u.int_in_range(0..=2u8)? {
                    0 => Refusal::AuthRequired,
                    1 => Refusal::Blocked,
                    _ => Refusal::RateLimited(Duration::from_secs(u.int_in_range(0..=120)?)),
                };
                router.handle_refused(t, &relay, why);
            }
            7 => router.hint_live(&url(u)?, u.arbitrary()?),
            _ => {
                router.handle_closed(t, &relay);
            }
        }
        check(&mut router, t, budget, &keys);
    }
    let saved = router.checkpoint();
    let json = saved.to_json();
    let read = RouterCheckpoint::from_json(&json).expect("its own checkpoint reads");
    let restored = Router::restore(config, &read).expect("its own checkpoint restores");
    assert_eq!(restored.checkpoint(), saved);
    Ok(())
}

fn check(router: &mut Router, now: Instant, budget: usize, keys: &[String]) {
    let routes = router.route(now);
    assert!(
        routes.relays.len() <= budget,
        "{} > {budget}",
        routes.relays.len()
    );
    let distinct: BTreeSet<&str> = routes.relays.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(distinct.len(), routes.relays.len(), "a relay twice");
    for route in &routes.relays {
        assert!(
            route.authors.iter().all(|a| keys.contains(a)),
            "an unfollowed author asked"
        );
    }
    let c = &routes.coverage;
    let mut named: Vec<&str> = c
        .covered
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(c.fallback_only.iter().map(String::as_str))
        .chain(c.uncovered.iter().map(String::as_str))
        .collect();
    named.sort_unstable();
    let mut want: Vec<&str> = keys.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(named, want, "coverage names each follow once");
}
