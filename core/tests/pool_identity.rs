//! One relay per URL in a pool: the application's relays and routing's share one identity,
//! so a URL added both ways is one socket, and routing never closes the application's.

use tether_core::link::Epoch;
use tether_core::nostr::{Filter, Transmit};
use tether_core::pool::{PoolConfig, PoolError, RelayId, RelayPool, SubId};
use tether_core::router::RouterConfig;
use tether_core::Instant;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn pool() -> RelayPool {
    let mut router = RouterConfig::default();
    router.indexers = vec!["wss://index.example".into()];
    let mut config = PoolConfig::default();
    config.router = router;
    RelayPool::new(config, 5)
}

fn opens(pool: &mut RelayPool) -> Vec<RelayId> {
    std::iter::from_fn(|| pool.poll_transmit())
        .filter(|(_, t)| matches!(t, Transmit::Open { .. }))
        .map(|(r, _)| r)
        .collect()
}

/// Follow one author whose relay list names `url`, by outbox, and let the pool route (its
/// reroute delay is 1 s): the author's key and the subscription.
fn follow_one_listing(pool: &mut RelayPool, url: &str) -> (String, SubId) {
    let author = "ab".repeat(32);
    let list = format!(
        r#"{{"id":"{}","pubkey":"{author}","created_at":1,"kind":10002,"tags":[["r","{url}"]],"content":"","sig":""}}"#,
        "cd".repeat(32)
    );
    let filter = Filter::new(&format!(r#"{{"kinds":[1],"authors":["{author}"]}}"#)).unwrap();
    let sub = pool.subscribe_outbox(ms(20), filter).unwrap();
    pool.handle_relay_list(ms(20), &list).unwrap();
    pool.handle_timeout(ms(1_100));
    (author, sub)
}

#[test]
fn a_url_added_twice_by_the_application_is_one_relay() {
    let mut pool = pool();
    let a = pool.add_relay_url(ms(0), "wss://A.example/").unwrap();
    let again = pool.add_relay_url(ms(0), "wss://a.example").unwrap();
    assert_eq!(a, again);
    assert_eq!(pool.relay_count(), 1);
    assert_eq!(pool.relay_url(a), Some("wss://a.example"));
    assert_eq!(
        pool.add_relay_url(ms(0), "https://a.example"),
        Err(PoolError::InvalidUrl("https://a.example".into()))
    );
}

/// An application's own relay may carry a long token in its query: longer than any list
/// may name, still one relay by its URL.
#[test]
fn an_applications_long_url_is_one_relay_too() {
    let mut pool = pool();
    let url = format!("wss://a.example?token={}", "t".repeat(2_000));
    let relay = pool.add_relay_url(ms(0), &url).unwrap();
    let spelled = format!("WSS://A.example:443/?token={}", "t".repeat(2_000));
    assert_eq!(pool.add_relay_url(ms(0), &spelled), Ok(relay));
    assert_eq!(pool.relay_url(relay), Some(url.as_str()));
    let past = format!("wss://a.example/?token={}", "t".repeat(9_000));
    assert_eq!(
        pool.add_relay_url(ms(0), &past),
        Err(PoolError::InvalidUrl(past.clone()))
    );
}

#[test]
fn routing_asks_the_applications_relay_at_a_listed_url_on_its_socket_and_never_closes_it() {
    let mut pool = pool();
    let app = pool.add_relay_url(ms(0), "wss://a.example").unwrap();
    // The application's relay is dialed as the application named it: its open names none.
    let first: Vec<(RelayId, Transmit)> = std::iter::from_fn(|| pool.poll_transmit()).collect();
    assert_eq!(
        first,
        [(
            app,
            Transmit::Open {
                epoch: Epoch(1),
                url: None
            }
        )]
    );
    pool.handle_open(ms(10), app, Epoch(1)).unwrap();
    let (author, sub) = follow_one_listing(&mut pool, "wss://a.example");
    let sent: Vec<(RelayId, Transmit)> = std::iter::from_fn(|| pool.poll_transmit()).collect();
    // The indexer is opened; the listed URL is the application's relay, asked on its socket.
    let opened: Vec<(RelayId, Option<&str>)> = sent
        .iter()
        .filter_map(|(r, t)| match t {
            Transmit::Open { url, .. } => Some((*r, url.as_deref())),
            _ => None,
        })
        .collect();
    // The pool's open names the URL of a relay it chose itself: no driver asks back.
    assert_eq!(opened.len(), 1, "{sent:?}");
    assert_ne!(opened[0].0, app);
    assert_eq!(opened[0].1, Some("wss://index.example"));
    assert!(
        sent.iter().any(|(r, t)| *r == app
            && matches!(t, Transmit::Send { text, .. } if text.contains(&author))),
        "{sent:?}"
    );
    assert_eq!(pool.relay_count(), 2);
    // The subscription goes; routing lets its relays go, but not the application's.
    pool.unsubscribe(ms(1_200), sub).unwrap();
    pool.handle_timeout(ms(2_300));
    while pool.poll_transmit().is_some() {}
    assert_eq!(pool.relay_url(app), Some("wss://a.example"));
}

#[test]
fn the_application_removing_a_relay_routing_shares_leaves_routing_consistent() {
    let mut pool = pool();
    let app = pool.add_relay_url(ms(0), "wss://a.example").unwrap();
    let _ = opens(&mut pool);
    pool.handle_open(ms(10), app, Epoch(1)).unwrap();
    let _ = follow_one_listing(&mut pool, "wss://a.example");
    while pool.poll_transmit().is_some() {}
    pool.remove_relay(ms(1_200), app).unwrap();
    assert_eq!(pool.relay_url(app), None);
    // Routing runs again and asks for the URL anew, as a relay of its own.
    pool.handle_timeout(ms(2_300));
    let reopened: Vec<RelayId> = opens(&mut pool);
    assert_eq!(reopened.len(), 1, "{reopened:?}");
    assert_eq!(pool.relay_url(reopened[0]), Some("wss://a.example"));
}

#[test]
fn only_relays_from_strangers_lists_are_dialed_at_public_addresses_only() {
    let mut pool = pool();
    let app = pool.add_relay_url(ms(0), "wss://a.example").unwrap();
    let _ = follow_one_listing(&mut pool, "wss://b.example");
    let opened = opens(&mut pool);
    let url = |r: &RelayId| pool.relay_url(*r).unwrap().to_owned();
    let indexer = opened
        .iter()
        .find(|r| url(r) == "wss://index.example")
        .unwrap();
    let listed = opened.iter().find(|r| url(r) == "wss://b.example").unwrap();
    assert!(
        pool.dials_public_only(*listed),
        "a stranger's list named it"
    );
    assert!(
        !pool.dials_public_only(*indexer),
        "the application chose its indexers"
    );
    assert!(!pool.dials_public_only(app), "the application named it");
    assert!(!pool.dials_public_only(RelayId(999)), "no such relay");
}

/// An application's URL may carry credentials: the checkpoint keeps the relay, not its URL.
#[test]
fn a_checkpoint_does_not_carry_an_applications_url() {
    let mut pool = pool();
    let relay = pool
        .add_relay_url(ms(0), "wss://alice:s3cret@relay.example/?token=t0ken")
        .expect("a URL");
    let json = String::from_utf8(pool.checkpoint().to_json()).expect("utf-8");
    assert!(
        !json.contains("s3cret") && !json.contains("t0ken"),
        "{json}"
    );
    assert_eq!(pool.checkpoint().relays().collect::<Vec<_>>(), [relay]);
}

/// After a restore the driver names each application relay's URL again, and the pool holds
/// one relay per URL as before: routing that wants the URL asks on the restored relay's
/// socket, with no second open.
#[test]
fn a_restored_applications_relay_named_again_is_the_one_relay_at_its_url() {
    let mut first = pool();
    let app = first.add_relay_url(ms(0), "wss://a.example").unwrap();
    let checkpoint = first.checkpoint();
    let mut pool =
        RelayPool::restore(PoolConfig::default(), 5, &checkpoint, ms(0), 1_000).expect("restores");
    assert_eq!(
        pool.relay_url(app),
        None,
        "the checkpoint holds no URL of it"
    );
    pool.name_relay(app, "WSS://a.example/").unwrap();
    pool.name_relay(app, "wss://a.example").unwrap();
    assert_eq!(pool.relay_url(app), Some("wss://a.example"));
    assert_eq!(pool.add_relay_url(ms(0), "wss://a.example"), Ok(app));
    assert_eq!(
        pool.name_relay(app, "wss://b.example"),
        Err(PoolError::UrlInUse {
            url: "wss://a.example".into(),
            relay: app
        })
    );
    let other = pool.add_relay(ms(0)).unwrap();
    assert_eq!(
        pool.name_relay(other, "wss://a.example"),
        Err(PoolError::UrlInUse {
            url: "wss://a.example".into(),
            relay: app
        })
    );
    assert_eq!(
        pool.name_relay(RelayId(99), "wss://c.example"),
        Err(PoolError::UnknownRelay(RelayId(99)))
    );
    assert_eq!(
        pool.name_relay(other, "https://c.example"),
        Err(PoolError::InvalidUrl("https://c.example".into()))
    );
}

#[test]
fn routing_after_a_restore_asks_the_named_applications_relay_on_its_socket() {
    let mut first = pool();
    let app = first.add_relay_url(ms(0), "wss://a.example").unwrap();
    let checkpoint = first.checkpoint();
    let mut config = PoolConfig::default();
    config.router.indexers = vec!["wss://index.example".into()];
    let mut pool = RelayPool::restore(config, 5, &checkpoint, ms(0), 1_000).expect("restores");
    pool.name_relay(app, "wss://a.example").unwrap();
    let epoch = std::iter::from_fn(|| pool.poll_transmit())
        .find_map(|(r, t)| match t {
            Transmit::Open { epoch, .. } if r == app => Some(epoch),
            _ => None,
        })
        .expect("the restored relay connects");
    pool.handle_open(ms(10), app, epoch).unwrap();
    let (author, _) = follow_one_listing(&mut pool, "wss://a.example");
    let sent: Vec<(RelayId, Transmit)> = std::iter::from_fn(|| pool.poll_transmit()).collect();
    let opened: Vec<Option<&str>> = sent
        .iter()
        .filter_map(|(_, t)| match t {
            Transmit::Open { url, .. } => Some(url.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(opened, [Some("wss://index.example")], "{sent:?}");
    assert!(
        sent.iter().any(|(r, t)| *r == app
            && matches!(t, Transmit::Send { text, .. } if text.contains(&author))),
        "{sent:?}"
    );
    assert_eq!(pool.relay_count(), 2);
}
