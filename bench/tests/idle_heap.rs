//! The scale bench, small enough for `cargo test`: 200 relay connections from one pool, 10
//! subscriptions on each, and the heap each idle connection holds after EOSE, counted
//! exactly by the counting allocator (the relay runs in a child process, this test binary
//! re-executed, so its allocations are not counted); over ws:// and over wss:// (a CA the
//! test makes with openssl, trusted through `Config::roots`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use tether_bench::{live_bytes, Counting};

#[global_allocator]
static HEAP: Counting = Counting;

const RELAYS: usize = 200;
const SUBS: usize = 10;

/// Heap bytes an idle connection may hold: its relay session and its share of the pool, the
/// WebSocket codec (2 KiB of read buffer; the burst buffer is freed once idle), the socket's
/// registration with the runtime.
const BOUND_PER_CONNECTION: usize = 16 * 1024;

/// The same over TLS: rustls's connection state besides (the TLS configuration and its roots
/// are shared by every socket).
const BOUND_PER_TLS_CONNECTION: usize = 48 * 1024;

/// Run as the relay when re-executed with `TETHER_IDLE_HEAP_RELAY` set: print the URL, serve
/// until stdin closes.
#[test]
fn relay_for_the_idle_heap_test() {
    if std::env::var_os("TETHER_IDLE_HEAP_RELAY").is_none() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use tether_testserver::server::TestRelay;
        let model = tether_testserver::RelayModel::default();
        let relay = match std::env::var_os("TETHER_IDLE_HEAP_CERT") {
            Some(cert) => {
                let cert = std::fs::read(cert).unwrap();
                let key = std::fs::read(std::env::var_os("TETHER_IDLE_HEAP_KEY").unwrap()).unwrap();
                TestRelay::start_tls(model, &cert, &key).await
            }
            None => TestRelay::start(model).await,
        }
        .unwrap();
        println!("RELAY {}", relay.url());
        std::io::stdout().flush().unwrap();
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            let _ = std::io::stdin().read_line(&mut sink);
        })
        .await;
    });
}

/// One test for both: the counting allocator counts the whole process, so the two
/// measurements must not overlap.
#[test]
fn an_idle_connection_holds_at_most_its_bound_of_heap_over_ws_and_wss() {
    let per_connection = heap_per_idle_connection(None);
    assert!(
        per_connection <= BOUND_PER_CONNECTION,
        "{per_connection} bytes per idle connection, bound {BOUND_PER_CONNECTION}"
    );
    let ca = tether_testserver::files::TestCa::new(std::path::Path::new("openssl"))
        .expect("openssl makes the test CA");
    let per_connection = heap_per_idle_connection(Some(&ca));
    assert!(
        per_connection <= BOUND_PER_TLS_CONNECTION,
        "{per_connection} bytes per idle wss:// connection, bound {BOUND_PER_TLS_CONNECTION}"
    );
    // What sharing saves: tokio-tungstenite, handed no TLS configuration, builds one like
    // this (the webpki roots, here with the test's root too) for each socket, which keeps it.
    let mut roots = tether_tokio::Roots::default();
    roots.extra_pem.push(ca.root_pem().unwrap());
    let before = live_bytes();
    let config = tether_tokio::tether_driver::tls::client_config(&roots).unwrap();
    let one_config = live_bytes().saturating_sub(before);
    drop(config);
    eprintln!("one TLS configuration with the webpki roots: {one_config} bytes");
    assert!(
        one_config > BOUND_PER_TLS_CONNECTION - per_connection,
        "one per socket would break the bound"
    );
}

/// The heap each of `RELAYS` idle connections holds, over TLS with a certificate from `ca`.
fn heap_per_idle_connection(ca: Option<&tether_testserver::files::TestCa>) -> usize {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "relay_for_the_idle_heap_test", "--nocapture"])
        .env("TETHER_IDLE_HEAP_RELAY", "1");
    if let Some(ca) = ca {
        command
            .env("TETHER_IDLE_HEAP_CERT", ca.leaf_cert())
            .env("TETHER_IDLE_HEAP_KEY", ca.leaf_key());
    }
    let mut relay = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the relay child starts");
    let mut lines = BufReader::new(relay.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the relay's URL").unwrap();
        if let Some(url) = line.strip_prefix("RELAY ") {
            break url.to_owned();
        }
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let per_connection = runtime.block_on(async {
        use tether_tokio::{Config, Filter, Outcome, PoolConfig, PoolItem};
        let mut pool_config = PoolConfig::default();
        pool_config.eose_deadline = Duration::from_secs(120);
        let mut config = Config::default();
        config
            .roots
            .extra_pem
            .extend(ca.map(|ca| ca.root_pem().unwrap()));
        // Warm-up: the runtime, the pool driver and their first allocations are not a
        // connection's (nor the TLS configuration every socket shares).
        let pool = tether_tokio::pool(pool_config, config);
        let before = live_bytes();
        for i in 0..RELAYS {
            pool.add_relay(&format!("{url}/r{i}")).await.unwrap();
        }
        let mut items = futures_util::stream::SelectAll::new();
        for k in 0..SUBS {
            let filter = Filter::new(&format!(r#"{{"kinds":[{}]}}"#, 10_000 + k)).unwrap();
            items.push(pool.subscribe(vec![filter]).await.unwrap());
        }
        let mut complete = 0;
        while complete < SUBS {
            match items.next().await.expect("subscriptions live") {
                PoolItem::Complete(Outcome::Complete) => complete += 1,
                PoolItem::Complete(partial) => panic!("{partial:?}"),
                _ => {}
            }
        }
        // The driver task reads each socket until it is empty (which frees a burst's
        // buffer) before it hands over the last outcome; a few turns let it finish that pass.
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        let held = live_bytes().saturating_sub(before);
        drop(items);
        drop(pool);
        held / RELAYS
    });
    drop(relay.stdin.take());
    let _ = relay.wait();
    let scheme = if ca.is_some() { "wss" } else { "ws" };
    eprintln!(
        "heap per idle {scheme}:// connection: {per_connection} bytes ({RELAYS} relays x {SUBS} \
         subscriptions)"
    );
    per_connection
}
