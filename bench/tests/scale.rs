//! The scale benchmark's harness, small: 20 relays x 3 subscriptions; both contenders reach
//! every EOSE, stay quiet while idle and receive each trickle event once per subscription.

use std::time::Duration;

use tether_bench::e2e::Contender;
use tether_bench::scale::{self, Phases};
use tether_testserver::server::TestRelay;
use tether_testserver::{RelayModel, StoredEvent};

struct Trickle<'a> {
    relay: &'a TestRelay,
    runtime: &'a tokio::runtime::Runtime,
    events: Vec<nostr::Event>,
    ready: bool,
}

impl Phases for Trickle<'_> {
    fn ready(&mut self) {
        self.ready = true;
    }

    fn idle_done(&mut self) {
        let _guard = self.runtime.enter();
        for (n, event) in self.events.iter().enumerate() {
            self.relay.store(StoredEvent {
                n: n as u64,
                created_at: event.created_at.as_secs(),
                kind: u64::from(event.kind.as_u16()),
                json: nostr::JsonUtil::as_json(event),
            });
        }
    }
}

#[test]
fn every_client_reaches_eose_everywhere_and_gets_each_trickle_event_once() {
    let runtime = relay_runtime();
    let relay = runtime
        .block_on(TestRelay::start(RelayModel::default()))
        .unwrap();
    for contender in [Contender::TetherPoolVerifying, Contender::NostrSdk] {
        let m = trickle_run(&relay, &runtime, contender, None);
        assert_eq!(m.trickle_received, 3, "{}", contender.name());
        assert!(m.connect_and_eose > Duration::ZERO);
    }
}

/// The same over wss://, the relay's certificate issued by a CA the test made and tether
/// trusts through `Config::roots` (one TLS configuration shared by every socket).
#[test]
fn tether_reaches_every_wss_relay_through_a_private_root() {
    let openssl = std::path::Path::new("openssl");
    let ca = tether_testserver::files::TestCa::new(openssl).expect("openssl makes the test CA");
    let runtime = relay_runtime();
    let cert = std::fs::read(ca.leaf_cert()).unwrap();
    let key = std::fs::read(ca.leaf_key()).unwrap();
    let relay = runtime
        .block_on(TestRelay::start_tls(RelayModel::default(), &cert, &key))
        .unwrap();
    assert!(relay.url().starts_with("wss://localhost:"));
    let root = ca.root_pem().unwrap();
    let m = trickle_run(&relay, &runtime, Contender::TetherPoolVerifying, Some(root));
    assert_eq!(m.trickle_received, 3);
    assert_eq!(
        relay.take_peak_handshakes().min(1),
        1,
        "the relay saw the handshakes"
    );
}

/// The relay's runtime: one worker, beside the client's own.
fn relay_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// One client against 20 relay URLs x 3 subscriptions, idle 300 ms, then the trickle; it
/// must have said it was ready.
fn trickle_run(
    relay: &TestRelay,
    runtime: &tokio::runtime::Runtime,
    contender: Contender,
    root_pem: Option<Vec<u8>>,
) -> tether_bench::scale::ScaleMeasurement {
    let mut phases = Trickle {
        relay,
        runtime,
        events: scale::trickle(3),
        ready: false,
    };
    let m = scale::run_client(
        contender,
        &relay.url(),
        20,
        3,
        Duration::from_millis(300),
        root_pem,
        &mut phases,
    );
    assert!(phases.ready, "{}", contender.name());
    m
}
