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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let relay = runtime
        .block_on(TestRelay::start(RelayModel::default()))
        .unwrap();
    for contender in [Contender::TetherPoolVerifying, Contender::NostrSdk] {
        let mut phases = Trickle {
            relay: &relay,
            runtime: &runtime,
            events: scale::trickle(3),
            ready: false,
        };
        let m = scale::run_client(
            contender,
            &relay.url(),
            20,
            3,
            Duration::from_millis(500),
            &mut phases,
        );
        assert!(phases.ready, "{}", contender.name());
        assert_eq!(m.trickle_received, 3, "{}", contender.name());
        assert!(m.connect_and_eose > Duration::ZERO);
    }
}
