//! The router's rules through its public API: the budget, lists replaced only by newer ones,
//! learning from silence, dead relays kept out of the budget, coverage named, and what a
//! checkpoint carries across a restart.

use std::time::Duration;

use tether_core::router::{ListUpdate, Refusal, Role, Router, RouterCheckpoint, RouterConfig};
use tether_core::Instant;

fn key(i: u32) -> String {
    format!("{i:064x}")
}

fn event_id(i: u32) -> String {
    format!("{:064x}", 0xe000_0000_u64 + u64::from(i))
}

fn outbox(author: u32, created_at: u64, relays: &[&str]) -> String {
    let tags: Vec<String> = relays
        .iter()
        .map(|r| format!(r#"["r","{r}","write"]"#))
        .collect();
    format!(
        r#"{{"id":"{}","pubkey":"{}","created_at":{created_at},"kind":10002,"tags":[{}],"content":"","sig":""}}"#,
        event_id(author * 1000 + u32::try_from(created_at % 1000).unwrap()),
        key(author),
        tags.join(",")
    )
}

fn config(max_relays: usize) -> RouterConfig {
    let mut config = RouterConfig::default();
    config.indexers = vec!["wss://index.example".into()];
    config.max_relays = max_relays;
    config.probe_slots = 0;
    config
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn router_with(config: RouterConfig, lists: &[(u32, &[&str])]) -> Router {
    let mut router = Router::new(config);
    router.set_wall_clock(at(0), 1_700_000_000);
    let keys: Vec<String> = lists.iter().map(|(a, _)| key(*a)).collect();
    router.follow(keys.iter().map(String::as_str)).unwrap();
    for (a, relays) in lists {
        router.handle_list(at(0), &outbox(*a, 100, relays)).unwrap();
    }
    router
}

fn urls(routes: &tether_core::router::Routes) -> Vec<&str> {
    routes.relays.iter().map(|r| r.url.as_str()).collect()
}

#[test]
fn routes_never_exceed_the_budget_and_cover_what_they_can() {
    let relays: Vec<String> = (0..40).map(|i| format!("wss://r{i}.example")).collect();
    let lists: Vec<(u32, Vec<&str>)> = (0..100)
        .map(|a| {
            let mine = (0..3).map(|k| relays[((a * 7 + k * 13) % 40) as usize].as_str());
            (a, mine.collect())
        })
        .collect();
    let borrowed: Vec<(u32, &[&str])> = lists.iter().map(|(a, r)| (*a, r.as_slice())).collect();
    let mut router = router_with(config(8), &borrowed);
    let routes = router.route(at(0));
    assert_eq!(routes.relays.len(), 8);
    assert_eq!(routes.relays[0].role, Role::Indexer);
    assert_eq!(routes.coverage.relays, 8);
    let c = &routes.coverage;
    let covered = c.covered.len();
    assert_eq!(covered + c.fallback_only.len() + c.uncovered.len(), 100);
    // Greedy over 7 content relays, of 40 each declared by about 7 authors.
    assert_eq!(covered, 41);
}

#[test]
fn a_list_is_replaced_only_by_a_newer_one() {
    let mut router = router_with(config(20), &[(1, &["wss://a.example"])]);
    let older = outbox(1, 99, &["wss://old.example"]);
    assert_eq!(router.handle_list(at(0), &older), Ok(ListUpdate::Stale));
    assert_eq!(router.write_relays(&key(1)), ["wss://a.example"]);
    let newer = outbox(1, 200, &["wss://b.example", "wss://B.example:443/"]);
    assert!(matches!(
        router.handle_list(at(0), &newer),
        Ok(ListUpdate::Applied { relays: 1, .. })
    ));
    assert_eq!(router.write_relays(&key(1)), ["wss://b.example"]);
    let routes = router.route(at(0));
    assert_eq!(urls(&routes), ["wss://index.example", "wss://b.example"]);
}

#[test]
fn a_hostile_list_adds_at_most_its_bound() {
    let mut router = router_with(config(20), &[(1, &["wss://a.example"])]);
    let many: Vec<String> = (0..10_000)
        .map(|i| format!("wss://spam{i}.example"))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let hostile = outbox(1, 300, &many);
    assert_eq!(
        router.handle_list(at(0), &hostile),
        Ok(ListUpdate::Applied {
            author: key(1),
            kind: tether_core::router::ListKind::Outbox,
            relays: 16,
            refused: 10_000 - 16,
        })
    );
    let size = router.checkpoint().to_json().len();
    assert!(size < 8_000, "{size} bytes");
    assert!(router.route(at(0)).relays.len() <= 20);
}

#[test]
fn silence_where_an_author_is_found_elsewhere_moves_them() {
    // The author declares a, b and c; only b holds their events.
    let mut router = router_with(
        config(3),
        &[(
            1,
            &["wss://a.example", "wss://b.example", "wss://c.example"],
        )],
    );
    let first = router.route(at(0));
    assert_eq!(
        urls(&first),
        ["wss://index.example", "wss://a.example", "wss://b.example"]
    );
    let k1 = key(1);
    router.handle_eose(at(90), "wss://a.example", [k1.as_str()]);
    router.handle_event(at(100), "wss://b.example", &k1);
    router.handle_eose(at(100), "wss://b.example", [k1.as_str()]);
    // a's silence counts once b shows the author posts: c, untried, is the better bet.
    let second = router.route(at(200));
    assert_eq!(
        urls(&second),
        ["wss://index.example", "wss://b.example", "wss://c.example"]
    );
    assert_eq!(second.coverage.covered, [(k1, 2)]);
}

#[test]
fn a_dead_relay_waits_while_a_live_candidate_serves() {
    let mut router = router_with(
        config(2),
        &[(1, &["wss://dead.example", "wss://live.example"])],
    );
    let first = router.route(at(0));
    assert_eq!(urls(&first), ["wss://index.example", "wss://dead.example"]);
    router.handle_failed(at(300), "wss://dead.example");
    let second = router.route(at(301));
    assert_eq!(urls(&second), ["wss://index.example", "wss://live.example"]);
    assert_eq!(router.poll_timeout(), Some(at(2_300)));
    // Its backoff over, it is still kept out: the live relay serves the author.
    router.handle_opened(at(400), "wss://live.example");
    assert_eq!(
        urls(&router.route(at(3_000))),
        ["wss://index.example", "wss://live.example"]
    );
}

#[test]
fn a_rate_limited_relay_sits_out_its_wait() {
    let mut router = router_with(config(2), &[(1, &["wss://a.example", "wss://b.example"])]);
    assert_eq!(urls(&router.route(at(0)))[1], "wss://a.example");
    router.handle_refused(
        at(10),
        "wss://a.example",
        Refusal::RateLimited(Duration::from_secs(30)),
    );
    assert_eq!(urls(&router.route(at(11)))[1], "wss://b.example");
}

#[test]
fn an_author_with_no_usable_relay_is_named() {
    let mut router = router_with(config(20), &[(1, &["wss://a.example"]), (2, &[])]);
    let routes = router.route(at(0));
    assert_eq!(routes.coverage.covered, [(key(1), 1)]);
    assert_eq!(routes.coverage.fallback_only, [key(2)]);
    assert!(routes.coverage.uncovered.is_empty());
    let mut alone = config(20);
    alone.indexers = Vec::new();
    let mut router = router_with(alone, &[(1, &["wss://a.example"]), (2, &[])]);
    assert_eq!(router.route(at(0)).coverage.fallback_only, [key(2)]);
    router.handle_failed(at(1), "wss://a.example");
    let routes = router.route(at(2));
    assert!(routes.relays.is_empty());
    assert_eq!(routes.coverage.uncovered, [key(1), key(2)]);
}

#[test]
fn the_inbox_is_the_dm_list_or_else_the_read_relays() {
    let mut router = router_with(config(20), &[(1, &[])]);
    let me = key(1);
    let nip65 = format!(
        r#"{{"id":"{}","pubkey":"{me}","created_at":500,"kind":10002,"tags":[["r","wss://w.example","write"],["r","wss://rd.example","read"]]}}"#,
        event_id(1)
    );
    router.handle_list(at(0), &nip65).unwrap();
    assert_eq!(router.inbox_relays(&me), ["wss://rd.example"]);
    let nip17 = format!(
        r#"{{"id":"{}","pubkey":"{me}","created_at":500,"kind":10050,"tags":[["relay","wss://dm.example"]]}}"#,
        event_id(2)
    );
    router.handle_list(at(0), &nip17).unwrap();
    assert_eq!(router.inbox_relays(&me), ["wss://dm.example"]);
    assert_eq!(
        router.publish_relays(&me, 1059, &[&me]),
        ["wss://w.example", "wss://dm.example"]
    );
    assert_eq!(
        router.publish_relays(&me, 1, &[&me]),
        ["wss://w.example", "wss://rd.example"]
    );
}

#[test]
fn a_restored_router_routes_where_content_was() {
    let mut router = router_with(
        config(3),
        &[(
            1,
            &["wss://a.example", "wss://b.example", "wss://c.example"],
        )],
    );
    let k1 = key(1);
    let _ = router.route(at(0));
    router.handle_eose(at(50), "wss://a.example", [k1.as_str()]);
    router.handle_event(at(60), "wss://b.example", &k1);
    router.handle_eose(at(60), "wss://b.example", [k1.as_str()]);
    let json = router.checkpoint().to_json();
    let saved = RouterCheckpoint::from_json(&json).unwrap();
    let mut restored = Router::restore(config(3), &saved).unwrap();
    assert_eq!(restored.checkpoint(), saved);
    let routes = restored.route(at(0));
    assert_eq!(routes.relays[1].url, "wss://b.example");
    assert_eq!(routes.relays[1].authors, [k1]);
}

#[test]
fn a_checkpoint_past_the_bounds_is_refused() {
    let router = router_with(
        config(3),
        &[(1, &["wss://a.example"]), (2, &["wss://b.example"])],
    );
    let saved = router.checkpoint();
    let mut small = config(3);
    small.max_authors = 1;
    assert!(Router::restore(small, &saved).is_err());
    let json = String::from_utf8(saved.to_json()).unwrap();
    let broken = json.replace("\"write\":[1]", "\"write\":[99]");
    assert_ne!(broken, json);
    let broken = RouterCheckpoint::from_json(broken.as_bytes()).unwrap();
    assert!(Router::restore(config(3), &broken).is_err());
}

mod properties {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// One input to the router.
    #[derive(Clone, Debug)]
    enum Input {
        List {
            author: u32,
            created_at: u64,
            relays: Vec<u8>,
        },
        Event {
            relay: u8,
            author: u32,
        },
        Eose {
            relay: u8,
        },
        Failed {
            relay: u8,
        },
        Opened {
            relay: u8,
        },
        Junk(String),
        Route,
    }

    fn input() -> impl Strategy<Value = Input> {
        prop_oneof![
            (
                0..12u32,
                0..50u64,
                proptest::collection::vec(0..30u8, 0..40)
            )
                .prop_map(|(author, created_at, relays)| Input::List {
                    author,
                    created_at,
                    relays
                }),
            (0..30u8, 0..12u32).prop_map(|(relay, author)| Input::Event { relay, author }),
            (0..30u8).prop_map(|relay| Input::Eose { relay }),
            (0..30u8).prop_map(|relay| Input::Failed { relay }),
            (0..30u8).prop_map(|relay| Input::Opened { relay }),
            ".{0,40}".prop_map(Input::Junk),
            Just(Input::Route),
        ]
    }

    fn url(r: u8) -> String {
        format!("wss://r{r}.example")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Whatever the lists, deliveries and failures: the routes stay within the budget,
        /// name each relay once, ask only followed authors, and the coverage names every
        /// followed author exactly once; the checkpoint restores to the same state.
        #[test]
        fn routes_stay_within_their_bounds(inputs in proptest::collection::vec(input(), 1..60)) {
            let mut cfg = config(6);
            cfg.probe_slots = 2;
            cfg.max_list_relays = 8;
            let mut router = Router::new(cfg.clone());
            let keys: Vec<String> = (0..10).map(key).collect();
            router.follow(keys.iter().map(String::as_str)).unwrap();
            let mut now = 0;
            for input in inputs {
                now += 150;
                let t = at(now);
                match input {
                    Input::List { author, created_at, relays } => {
                        let urls: Vec<String> = relays.into_iter().map(url).collect();
                        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                        let _ = router.handle_list(t, &outbox(author, created_at, &urls));
                    }
                    Input::Event { relay, author } => router.handle_event(t, &url(relay), &key(author)),
                    Input::Eose { relay } => router.handle_eose(t, &url(relay), keys.iter().map(String::as_str)),
                    Input::Failed { relay } => router.handle_failed(t, &url(relay)),
                    Input::Opened { relay } => router.handle_opened(t, &url(relay)),
                    Input::Junk(text) => prop_assert!(router.handle_list(t, &text).is_err()),
                    Input::Route => {}
                }
                let routes = router.route(t);
                prop_assert!(routes.relays.len() <= 6);
                let distinct: BTreeSet<&str> = routes.relays.iter().map(|r| r.url.as_str()).collect();
                prop_assert_eq!(distinct.len(), routes.relays.len());
                for route in &routes.relays {
                    for author in &route.authors {
                        prop_assert!(keys.contains(author));
                    }
                }
                let c = &routes.coverage;
                let mut named: Vec<&str> = c.covered.iter().map(|(k, _)| k.as_str())
                    .chain(c.fallback_only.iter().map(String::as_str))
                    .chain(c.uncovered.iter().map(String::as_str))
                    .collect();
                named.sort_unstable();
                prop_assert_eq!(named, keys.iter().map(String::as_str).collect::<Vec<_>>());
            }
            let saved = router.checkpoint();
            let restored = Router::restore(cfg, &RouterCheckpoint::from_json(&saved.to_json()).unwrap()).unwrap();
            prop_assert_eq!(restored.checkpoint(), saved);
        }
    }
}

/// The routes as a review surface: each step, then every relay with its role and authors
/// (by number), then the coverage.
fn transcript(steps: &mut Vec<String>, what: &str, routes: &tether_core::router::Routes) {
    let name = |k: &String| {
        u32::from_str_radix(k.trim_start_matches('0'), 16)
            .unwrap_or(0)
            .to_string()
    };
    steps.push(format!("# {what}"));
    for r in &routes.relays {
        let authors: Vec<String> = r.authors.iter().map(name).collect();
        steps.push(format!(
            "{:<22} {:?} [{}]",
            r.url,
            r.role,
            authors.join(" ")
        ));
    }
    let c = &routes.coverage;
    let covered: Vec<String> = c
        .covered
        .iter()
        .map(|(k, n)| format!("{}x{n}", name(k)))
        .collect();
    let fallback: Vec<String> = c.fallback_only.iter().map(name).collect();
    let uncovered: Vec<String> = c.uncovered.iter().map(name).collect();
    steps.push(format!(
        "covered [{}] fallback_only [{}] uncovered [{}]",
        covered.join(" "),
        fallback.join(" "),
        uncovered.join(" ")
    ));
}

#[test]
fn transcript_a_list_update_moves_an_author_and_a_dead_relay_is_replaced() {
    let mut router = router_with(
        config(4),
        &[
            (1, &["wss://a.example", "wss://b.example"]),
            (2, &["wss://b.example", "wss://c.example"]),
            (3, &[]),
        ],
    );
    let mut steps = Vec::new();
    transcript(&mut steps, "first routes", &router.route(at(0)));
    let moved = outbox(1, 200, &["wss://d.example"]);
    router.handle_list(at(1_000), &moved).unwrap();
    transcript(&mut steps, "author 1 moves to d", &router.route(at(1_000)));
    router.handle_failed(at(2_000), "wss://b.example");
    transcript(&mut steps, "b fails", &router.route(at(2_000)));
    insta::assert_snapshot!(steps.join("\n"));
}

#[test]
fn a_strangers_list_takes_no_room_and_a_list_dated_ahead_is_refused_and_counted() {
    let mut router = router_with(config(4), &[(1, &["wss://a.example"])]);
    // Nobody follows or watches author 2.
    assert_eq!(
        router.handle_list(at(0), &outbox(2, 200, &["wss://evil.example"])),
        Ok(ListUpdate::NotWanted)
    );
    // Ten years ahead of the wall clock (1 700 000 000): it would pin author 1 for ever.
    let ahead = outbox(
        1,
        1_700_000_000 + 10 * 365 * 86_400,
        &["wss://evil.example"],
    );
    assert_eq!(
        router.handle_list(at(0), &ahead),
        Ok(ListUpdate::FromTheFuture)
    );
    assert_eq!(router.future_lists(), 1);
    // Within the skew it is taken (clocks drift).
    let soon = outbox(1, 1_700_000_000 + 600, &["wss://b.example"]);
    assert!(matches!(
        router.handle_list(at(0), &soon),
        Ok(ListUpdate::Applied { .. })
    ));
    assert_eq!(router.write_relays(&key(1)), ["wss://b.example"]);
    // Watched (an inbox owner, a publish's recipient): their lists are taken.
    router.watch(&key(2)).unwrap();
    assert!(matches!(
        router.handle_list(at(0), &outbox(2, 200, &["wss://c.example"])),
        Ok(ListUpdate::Applied { .. })
    ));
    let routes = router.route(at(0));
    let urls = urls(&routes);
    assert!(!urls.contains(&"wss://evil.example"), "{urls:?}");
}

#[test]
fn superseded_lists_recycle_the_relay_table_and_a_followed_authors_move_is_kept() {
    let mut cfg = config(4);
    cfg.max_known_relays = 8;
    let mut router = router_with(cfg, &[(1, &["wss://a.example"]), (2, &["wss://b.example"])]);
    // 500 versions of author 2's list, each naming 3 relays nobody else names.
    for v in 0..500u64 {
        let relays: Vec<String> = (0..3).map(|i| format!("wss://v{v}-{i}.example")).collect();
        let relays: Vec<&str> = relays.iter().map(String::as_str).collect();
        let update = router.handle_list(at(0), &outbox(2, 1_000 + v, &relays));
        assert!(
            matches!(update, Ok(ListUpdate::Applied { refused: 0, .. })),
            "{v}: {update:?}"
        );
    }
    assert_eq!(
        router.write_relays(&key(2)),
        [
            "wss://v499-0.example",
            "wss://v499-1.example",
            "wss://v499-2.example"
        ]
    );
    // Author 1 moves after all that: taken, not dropped for a full table.
    router
        .handle_list(at(0), &outbox(1, 2_000, &["wss://moved.example"]))
        .unwrap();
    assert_eq!(router.write_relays(&key(1)), ["wss://moved.example"]);
    assert!(urls(&router.route(at(0))).contains(&"wss://moved.example"));
}

#[test]
fn a_checkpoint_holds_only_people_followed_and_the_relays_they_name() {
    let mut router = router_with(config(4), &[(1, &["wss://a.example"])]);
    router.watch(&key(2)).unwrap();
    router
        .handle_list(at(0), &outbox(2, 200, &["wss://inbox-owner.example"]))
        .unwrap();
    let json = String::from_utf8(router.checkpoint().to_json()).unwrap();
    assert!(
        json.contains(&key(1)) && json.contains("wss://a.example"),
        "{json}"
    );
    assert!(!json.contains(&key(2)), "{json}");
    assert!(!json.contains("inbox-owner"), "{json}");
    let restored = Router::restore(
        config(4),
        &RouterCheckpoint::from_json(json.as_bytes()).unwrap(),
    )
    .unwrap();
    assert_eq!(restored.write_relays(&key(1)), ["wss://a.example"]);
}

#[test]
fn a_routed_relay_silent_past_the_answer_deadline_gives_up_its_slot_and_counts_as_failed() {
    // One slot beside the indexer: a (lower index) is chosen first, b waits.
    let mut router = router_with(config(2), &[(1, &["wss://a.example", "wss://b.example"])]);
    assert_eq!(
        urls(&router.route(at(0))),
        ["wss://index.example", "wss://a.example"]
    );
    // The indexer answers the lists request; a's socket opens and it never answers.
    router.handle_opened(at(50), "wss://index.example");
    router.handle_eose(at(60), "wss://index.example", []);
    router.handle_opened(at(100), "wss://a.example");
    assert_eq!(router.poll_timeout(), Some(at(4_000)));
    assert_eq!(
        urls(&router.route(at(3_999))),
        ["wss://index.example", "wss://a.example"]
    );
    assert_eq!(
        urls(&router.route(at(4_000))),
        ["wss://index.example", "wss://b.example"]
    );
    // b answers: it keeps its slot past the deadline.
    router.handle_opened(at(4_100), "wss://b.example");
    router.handle_eose(at(4_200), "wss://b.example", [key(1).as_str()]);
    assert_eq!(
        urls(&router.route(at(9_000))),
        ["wss://index.example", "wss://b.example"]
    );
}

#[test]
fn a_socket_that_closes_before_the_first_answer_is_a_failure_an_eose_clears_it() {
    let mut router = router_with(config(2), &[(1, &["wss://a.example", "wss://b.example"])]);
    router.route(at(0));
    router.handle_opened(at(10), "wss://a.example");
    assert!(
        router.handle_closed(at(20), "wss://a.example"),
        "accept-then-close"
    );
    assert_eq!(
        urls(&router.route(at(20))),
        ["wss://index.example", "wss://b.example"]
    );
    router.handle_opened(at(30), "wss://b.example");
    router.handle_eose(at(40), "wss://b.example", [key(1).as_str()]);
    assert!(
        !router.handle_closed(at(50), "wss://b.example"),
        "it had answered"
    );
}

#[test]
fn a_newer_list_places_its_author_on_its_relay_even_when_the_budget_is_full() {
    // Two slots beside the indexer, both held by relays that delivered for authors 1-2.
    let mut router = router_with(
        config(3),
        &[
            (1, &["wss://a.example"]),
            (2, &["wss://b.example"]),
            (3, &["wss://a.example"]),
        ],
    );
    assert_eq!(
        urls(&router.route(at(0))),
        ["wss://index.example", "wss://a.example", "wss://b.example"]
    );
    for (url, author) in [("wss://a.example", 1), ("wss://b.example", 2)] {
        router.handle_opened(at(10), url);
        router.handle_event(at(20), url, &key(author));
        router.handle_eose(at(30), url, [key(author).as_str()]);
    }
    // Author 3 moves to a relay nobody else names.
    router
        .handle_list(at(1_000), &outbox(3, 200, &["wss://new.example"]))
        .unwrap();
    let routes = router.route(at(1_000));
    let new = routes
        .relays
        .iter()
        .find(|r| r.url == "wss://new.example")
        .expect("placed on the new list's relay");
    assert!(new.authors.contains(&key(3)), "{:?}", new.authors);
    assert_eq!(routes.relays.len(), 3);
    // Its silence there is no miss yet: the author may not have posted there so far.
    router.handle_opened(at(1_100), "wss://new.example");
    router.handle_eose(at(1_200), "wss://new.example", [key(3).as_str()]);
    assert!(urls(&router.route(at(5_000))).contains(&"wss://new.example"));
}

#[test]
fn time_away_is_not_a_routed_relays_silence() {
    let mut router = router_with(config(2), &[(1, &["wss://a.example", "wss://b.example"])]);
    router.handle_opened(at(0), "wss://index.example");
    router.handle_eose(at(0), "wss://index.example", []);
    assert_eq!(
        urls(&router.route(at(0))),
        ["wss://index.example", "wss://a.example"]
    );
    // The app is away from 1 s to 60 s; back, a still gets its whole deadline.
    router.restart_answer_waits(at(60_000));
    assert_eq!(router.poll_timeout(), Some(at(64_000)));
    assert_eq!(
        urls(&router.route(at(60_001))),
        ["wss://index.example", "wss://a.example"]
    );
    assert_eq!(
        urls(&router.route(at(64_000))),
        ["wss://index.example", "wss://b.example"]
    );
}

#[test]
fn an_author_at_the_pair_bound_forgets_the_silence_that_tells_least() {
    // The popular relay is declared by four follows, each tail relay by one. Author 1 has
    // no list; home holds their events.
    let (popular, tail1, tail2, home) = (
        "wss://popular.example",
        "wss://tail1.example",
        "wss://tail2.example",
        "wss://home.example",
    );
    let mut config = config(10);
    config.max_pairs_per_author = 3;
    let mut router = router_with(
        config,
        &[
            (2, &[popular]),
            (3, &[popular]),
            (4, &[popular]),
            (5, &[popular]),
            (6, &[tail1]),
            (7, &[tail2]),
            (8, &[home]),
        ],
    );
    let k1 = key(1);
    router.follow([k1.as_str()]).unwrap();
    router.handle_event(at(10), home, &k1);
    for (ms, url) in [(10, home), (20, popular), (30, tail1), (40, tail2)] {
        router.handle_eose(at(ms), url, [k1.as_str()]);
    }
    // Four pairs for a bound of three: a silence on a relay few hold content beyond their
    // lists says little and goes; the popular relay's silence stays (forgotten, the relay
    // would pass for author 1's cover again), and so does where they were found.
    let remembered: Vec<&str> = [home, popular, tail1, tail2]
        .into_iter()
        .filter(|url| router.has_answered_for(&k1, url))
        .collect();
    assert_eq!(remembered, [home, popular, tail2]);
}

#[test]
fn a_probe_is_asked_about_the_authors_no_relay_has_delivered() {
    // One slot beside the indexer, and it probes. a and b are the relays most follows
    // declare (asked about everyone); c, declared by author 4 alone, is not.
    let mut config = config(2);
    config.probe_slots = 1;
    let mut router = router_with(
        config,
        &[
            (2, &["wss://a.example", "wss://b.example"]),
            (3, &["wss://a.example", "wss://b.example"]),
            (4, &["wss://a.example", "wss://c.example"]),
        ],
    );
    let k1 = key(1);
    router.follow([k1.as_str()]).unwrap();
    let probe = |routes: &tether_core::router::Routes| {
        let probe = routes
            .relays
            .iter()
            .find(|r| r.role == Role::Probe)
            .unwrap_or_else(|| panic!("a probe in {routes:?}"));
        (probe.url.clone(), probe.authors.contains(&k1))
    };
    let mut seen = Vec::new();
    for ms in [0, 100, 200] {
        let (url, asks_k1) = probe(&router.route(at(ms)));
        // Each answers with nothing of author 1: a silence about someone found nowhere.
        router.handle_opened(at(ms + 10), &url);
        router.handle_eose(at(ms + 20), &url, [k1.as_str()]);
        seen.push((url, asks_k1));
    }
    assert_eq!(
        seen,
        [
            ("wss://a.example".to_owned(), true),
            ("wss://b.example".to_owned(), true),
            ("wss://c.example".to_owned(), true),
        ]
    );
    // Once a relay delivers them, the next probe asks only for whom it may hold.
    router.handle_event(at(300), "wss://c.example", &k1);
    router.handle_eose(at(300), "wss://c.example", [k1.as_str()]);
    router.follow([key(5).as_str()]).unwrap();
    router
        .handle_list(at(300), &outbox(5, 100, &["wss://d.example"]))
        .unwrap();
    assert_eq!(
        probe(&router.route(at(400))),
        ("wss://d.example".to_owned(), false)
    );
}
