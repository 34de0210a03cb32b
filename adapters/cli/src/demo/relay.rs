//! The demo's hostile relay: tether-testserver's [`TestRelay`] with a REQ budget, a
//! subscription cap, NIP-42 on every connection, a steady trickle of new events and every
//! connection severed on a schedule.

use std::io;
use std::time::Duration;

use tether_testserver::server::{frame_kind, TestRelay};
use tether_testserver::{LimitStyle, RelayModel, ReqBudget, StoredEvent};
use tether_tokio::tether_core::nostr::message::EventId;

/// REQs the relay accepts per window; more are refused with `retry in Ns`.
pub(crate) const BUDGET: ReqBudget = ReqBudget {
    max: 24,
    window: Duration::from_secs(2),
    hint: true,
};
/// Subscriptions the relay keeps open per connection; one more is refused as
/// `error: too many subscriptions`.
pub(crate) const MAX_SUBS: usize = 50;
/// Time between severing every connection.
pub(crate) const DROP_EVERY: Duration = Duration::from_secs(10);
/// The first sever comes early so even a 10 s run shows a reconnect and a replay.
pub(crate) const FIRST_DROP: Duration = Duration::from_secs(5);
/// Time between new events.
pub(crate) const EVENT_EVERY: Duration = Duration::from_millis(250);
/// Events stored before the first REQ.
const INITIAL_EVENTS: u64 = 30;
/// `created_at` of the relay's clock at its start: the wall clock, as a real relay's new
/// events are dated (a catch-up's lookback is anchored in wall-clock time).
pub(crate) fn epoch() -> u64 {
    static EPOCH: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1_700_000_000, |d| d.as_secs())
    })
}
/// The event kinds the relay stores, in turn; subscriptions ask for one or both.
pub(crate) const KINDS: [u64; 2] = [1, 7];

/// Something the relay did to its clients.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Severed {
    /// Connections dropped.
    pub(crate) connections: usize,
}

/// What the relay saw on the wire.
#[derive(Clone, Debug, Default)]
pub(crate) struct Wire {
    /// Connections accepted.
    pub(crate) connections: usize,
    /// REQ frames received.
    pub(crate) reqs: usize,
    /// CLOSE frames received.
    pub(crate) closes: usize,
    /// AUTH frames received.
    pub(crate) auths: usize,
    /// Per connection: REQs received, grouped into bursts (REQs closer than
    /// [`BURST_GAP`] to the previous one).
    pub(crate) bursts: Vec<Vec<usize>>,
}

/// REQs closer together than this count as one burst: a replay batch is sent in one go,
/// and batches are 50 ms apart.
const BURST_GAP: Duration = Duration::from_millis(20);

/// The relay and its schedule.
pub(crate) struct HostileRelay {
    relay: TestRelay,
    stored: u64,
    next_event: Duration,
    next_drop: Duration,
    drops: u32,
}

impl HostileRelay {
    /// Start it on 127.0.0.1.
    ///
    /// # Errors
    /// When no port can be bound.
    pub(crate) async fn start() -> io::Result<Self> {
        let mut model = RelayModel::default();
        model.events = (1..=INITIAL_EVENTS)
            .map(|n| event(n, epoch() - INITIAL_EVENTS + n))
            .collect();
        model.budget = Some(BUDGET);
        model.max_subs = Some((MAX_SUBS, LimitStyle::Closed));
        model.auth_required = true;
        Ok(HostileRelay {
            relay: TestRelay::start(model).await?,
            stored: INITIAL_EVENTS,
            next_event: EVENT_EVERY,
            next_drop: FIRST_DROP,
            drops: 0,
        })
    }

    /// `ws://127.0.0.1:port`.
    pub(crate) fn url(&self) -> String {
        self.relay.url()
    }

    /// Play the schedule up to `elapsed` (time since the demo started): store the events
    /// that are due, and sever every connection when a drop is due.
    pub(crate) fn advance(&mut self, elapsed: Duration) -> Option<Severed> {
        while self.next_event <= elapsed {
            self.stored += 1;
            self.relay
                .store(event(self.stored, epoch() + self.next_event.as_secs()));
            self.next_event += EVENT_EVERY;
        }
        if elapsed < self.next_drop {
            return None;
        }
        self.next_drop += DROP_EVERY;
        self.drops += 1;
        let connections = self.relay.open_connections();
        self.relay.sever_all();
        Some(Severed { connections })
    }

    /// Times every connection was severed.
    pub(crate) fn drops(&self) -> u32 {
        self.drops
    }

    /// Events stored so far.
    pub(crate) fn stored(&self) -> u64 {
        self.stored
    }

    /// Ids of every stored event of one of `kinds`.
    pub(crate) fn stored_ids(&self, kinds: &[u64]) -> Vec<EventId> {
        self.relay.with(|state| {
            state
                .model
                .events
                .iter()
                .filter(|e| kinds.contains(&e.kind))
                .map(StoredEvent::id)
                .collect()
        })
    }

    /// What the relay saw on the wire so far.
    pub(crate) fn wire(&self) -> Wire {
        self.relay.with(|state| {
            let log = &state.log;
            let mut wire = Wire {
                connections: log.accepted.len(),
                bursts: vec![Vec::new(); log.accepted.len()],
                ..Wire::default()
            };
            let mut last_req: Vec<Option<Duration>> = vec![None; log.accepted.len()];
            for (at, conn, text) in &log.received {
                match frame_kind(text) {
                    Some("REQ") => {}
                    Some("CLOSE") => {
                        wire.closes += 1;
                        continue;
                    }
                    Some("AUTH") => {
                        wire.auths += 1;
                        continue;
                    }
                    _ => continue,
                }
                wire.reqs += 1;
                let Ok(conn) = usize::try_from(*conn) else {
                    continue;
                };
                let (Some(bursts), Some(last)) =
                    (wire.bursts.get_mut(conn), last_req.get_mut(conn))
                else {
                    continue;
                };
                match (bursts.last_mut(), *last) {
                    (Some(size), Some(prev)) if at.saturating_sub(prev) < BURST_GAP => *size += 1,
                    _ => bursts.push(1),
                }
                *last = Some(*at);
            }
            wire
        })
    }
}

/// Event `n`: kinds alternate so subscriptions for one kind see half of them.
fn event(n: u64, created_at: u64) -> StoredEvent {
    StoredEvent::new(n, created_at, KINDS[usize::from(n % 2 == 0)])
}
