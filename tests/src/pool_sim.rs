//! `PoolSim`: a [`RelayPool`] and one [`RelayModel`] per relay, joined by a simulated
//! network and always advanced to the earliest deadline of any of them — the relay `Sim`'s
//! shape, with the relay named. The same seed gives the same transcript.
//!
//! After every step it checks the pool's promises: an event id reaches a logical
//! subscription at most once while the pool remembers it (a mirror of the documented
//! dedup rule: the `dedup_capacity` newest delivered ids are remembered, the oldest is
//! forgotten first); `Complete` at most once per subscription; `Ended` at most
//! once, only for a subscription no relay serves, and nothing for it afterwards; every relay
//! session's own bookkeeping agrees with itself; `poll_timeout` tells the truth.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::link::{Epoch, LinkState, SocketLoss};
use tether_core::nostr::message::EventId;
use tether_core::nostr::{Carries, Event, Filter, RelayInfo, Transmit};
use tether_core::pool::{
    PoolCheckpoint, PoolConfig, PoolEvent, RelayId, RelayPool, SubId, VerifyRequest, VerifyTicket,
};
use tether_core::Instant;

use crate::net::{self, Machine, Net};
use crate::relay_model::{auth_event, RelayModel, StoredEvent};
use crate::sim::{session_settled, Input, UNIX_START};

/// Something the script makes happen.
#[derive(Clone, Debug)]
pub enum PoolAction {
    /// Add a relay played by this model (ids are handed out in order: r0, r1, ...).
    AddRelay(Box<RelayModel>),
    /// Add a relay that accepts connections but never answers (as [`PoolAction::Mute`]
    /// from the start).
    AddMutedRelay(Box<RelayModel>),
    /// Remove a relay.
    RemoveRelay(RelayId),
    /// Subscribe on every relay with these filters.
    Subscribe(Vec<String>),
    /// Subscribe on these relays, each with its own filters.
    SubscribeRouted(Vec<(RelayId, Vec<String>)>),
    /// Drop a subscription.
    Unsubscribe(SubId),
    /// Publish to every relay.
    Publish(String),
    /// Publish by outbox (`pool.publish_outbox`): to the author's and the tagged people's
    /// relays.
    PublishOutbox(String),
    /// The network drops this relay's socket.
    DropSocket(RelayId),
    /// The relay stops accepting (and drops its connection).
    Down(RelayId),
    /// The relay accepts again.
    Up(RelayId),
    /// The relay stores an event and delivers it to matching live subscriptions.
    Store(RelayId, StoredEvent),
    /// The relay sends this raw frame on its current connection.
    RelayFrame(RelayId, String),
    /// The relay accepts connections but never answers anything (`true`), or answers again.
    Mute(RelayId, bool),
    /// The relay's handshakes never complete (`true`): a connection it is asked for neither
    /// opens nor fails (a black-holed address, a TLS peer that stalls), until the client
    /// gives it up. `false` answers again.
    Hang(RelayId, bool),
    /// Change a relay's behaviour.
    Relay(RelayId, fn(&mut RelayModel)),
    /// A hostile relay sends `count` EVENTs for its subscription `wire` on its current
    /// connection, numbered from `first` (unique ids, kind 1), `per_ms` of them every
    /// millisecond. Each batch is one transcript line.
    Flood {
        /// The flooding relay.
        relay: RelayId,
        /// The wire subscription id the EVENTs name.
        wire: String,
        /// The first event number.
        first: u64,
        /// How many.
        count: u64,
        /// Frames per simulated millisecond.
        per_ms: u64,
    },
    /// This relay's connection dies without a close reaching the pool (a NAT forgot it
    /// while the app slept, the Wi-Fi went away): the relay forgets it, nothing sent on it
    /// arrives, pings go unanswered. The pool holds a zombie socket.
    Vanish(RelayId),
    /// `pool.suspend`: the app goes to the background.
    Suspend,
    /// `pool.resume`: the app comes back.
    Resume,
    /// `pool.network_changed(old_path_gone)`.
    NetworkChanged(bool),
    /// `pool.set_online`.
    Online(bool),
    /// The process dies: the pool's checkpoint is taken (as JSON bytes) and the pool is
    /// gone; every relay sees its connection drop, nothing in flight arrives anywhere, and
    /// nothing reaches a pool until [`PoolAction::Restore`]. The relays go on.
    Kill,
    /// A new process restores the pool from the checkpoint [`PoolAction::Kill`] took, at this
    /// time and wall clock; every relay connects.
    Restore,
    /// Subscribe to people with this filter (`pool.subscribe_outbox`): the pool opens the
    /// relays of [`PoolSim::world`] it routes to.
    SubscribeOutbox(String),
    /// The relay at this URL stores an event (whether or not the pool is connected to it).
    StoreAt(String, StoredEvent),
    /// The relay at this URL goes down (`true`: refuses connections, drops its connection)
    /// or comes back up.
    DownAt(String, bool),
    /// The driver fetched the NIP-11 document (these bytes) of the relay routing holds at
    /// this URL: parse it and, if it parses, `pool.apply_relay_info`. The transcript shows
    /// what was applied. (The relay models serve no document on `FetchInfo`: this is the
    /// fetch's answer, when the script says.) A URL routing does not hold changes nothing.
    RelayInfoAt(String, String),
}

/// What the PoolSim's network carries.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Script(PoolAction),
    Accept(RelayId, u64),
    ToPool(RelayId, u64, Input),
    ToRelay(RelayId, u64, String),
    Verdict(VerifyTicket, Result<(), String>),
    /// The relay's `drop_after`: it closes this connection.
    Cut(RelayId, u64),
    Flood {
        relay: RelayId,
        conn: u64,
        wire: String,
        next: u64,
        end: u64,
        per_ms: u64,
    },
}

/// The application's verifier, when the pool's `verify` is on: what it says of a copy, and
/// how long it takes (verdicts may come back out of order).
#[derive(Clone, Copy, Debug)]
pub struct SimVerifier {
    /// The verdict on one copy.
    pub check: fn(&str) -> Result<(), String>,
    /// How long the verdict takes.
    pub delay: fn(&VerifyRequest) -> Duration,
}

impl Default for SimVerifier {
    /// Refuses copies that contain `forged`; a verdict takes 1-4 ms by the id's last byte,
    /// so verdicts overtake each other.
    fn default() -> Self {
        SimVerifier {
            check: |raw| {
                if raw.contains("forged") {
                    Err("bad signature".to_owned())
                } else {
                    Ok(())
                }
            },
            delay: |req| Duration::from_millis(1 + u64::from(req.id.0[31] % 4)),
        }
    }
}

/// One simulated relay.
#[derive(Debug)]
pub struct Peer {
    /// Its behaviour.
    pub model: RelayModel,
    /// Accepts connections but never answers.
    pub mute: bool,
    /// Its handshakes never complete.
    pub hangs: bool,
    /// The URL of a relay the pool opened for routing.
    pub url: Option<String>,
    conn: Option<u64>,
    accepted: Option<u64>,
}

/// The pool simulator. See the module docs.
pub struct PoolSim {
    /// The pool under test.
    pub pool: RelayPool,
    /// Its relays.
    pub peers: BTreeMap<RelayId, Peer>,
    /// Relays by URL that routing may open: a relay's model moves into `peers` while the pool
    /// holds it and back when the pool lets it go. A URL not here is a relay that does not
    /// exist (every connection refused).
    pub world: BTreeMap<String, RelayModel>,
    /// Keep the whole transcript (default); when `false` only a tail is kept.
    pub keep_transcript: bool,
    /// Write no transcript at all (a fuzz run: formatting every line was a third of its
    /// time). The checks are the same; a failure's message then has no transcript tail, and
    /// the same run with `quiet` off shows it.
    pub quiet: bool,
    /// Verifies copies when the pool's config has `verify`.
    pub verifier: SimVerifier,
    net: Net<Item>,
    transcript: String,
    /// Every event the application heard, with its time.
    pub events: Vec<(Instant, PoolEvent)>,
    /// Every frame sent: time, relay, what it carries, text.
    pub sent: Vec<(Instant, RelayId, Carries, String)>,
    /// Every relay routing opened: when, its id, its URL (ids are reused after a relay is
    /// let go, so a relay's URL at a time is its latest entry before it).
    pub routed_opens: Vec<(Instant, RelayId, String)>,
    /// Every subscription the pool accepted, and those the script dropped again.
    pub subscribed: Vec<SubId>,
    /// Subscriptions the script unsubscribed.
    pub unsubscribed: Vec<SubId>,
    /// `Received` events from these relays are counted in `received_from` but neither kept
    /// in `events` nor written to the transcript (a million-event flood).
    pub forget_received_from: BTreeSet<RelayId>,
    /// `Received` events per relay that delivered them first (all of them, kept or not).
    pub received_from: BTreeMap<RelayId, u64>,
    auths: u64,
    checks: Checks,
    /// Whether the current step called into the pool: a step that did not (a relay answering,
    /// a connection accepted, an input for a connection that is gone) leaves it as the last
    /// check saw it, so its outputs and checks are skipped.
    touched: bool,
    config: PoolConfig,
    seed: u64,
    /// The checkpoint of a killed pool, until it is restored.
    saved: Option<Vec<u8>>,
    /// Relays asked to open a socket that has neither opened nor failed nor been given up
    /// yet: the handshakes in flight, as the network sees them.
    connecting: BTreeSet<RelayId>,
    /// The most of them at once.
    peak_connecting: usize,
    /// Every socket the pool asked for: when, and for which relay.
    opened: Vec<(Instant, RelayId)>,
    /// Relays waiting for a handshake slot when the transcript last said so.
    waiting_shown: usize,
    /// The application's state, as the script set it.
    suspended: bool,
    offline: bool,
    /// When the pool was suspended or offline: no connect timeout frees a slot while
    /// suspended, and no handshake starts offline, so that time is not a relay's wait.
    paused: Vec<(Instant, Option<Instant>)>,
}

#[derive(Debug, Default)]
struct Checks {
    /// Per subscription, the ids the pool must still remember, oldest first.
    delivered: BTreeMap<SubId, Remembered>,
    complete: BTreeSet<SubId>,
    ended: BTreeSet<SubId>,
    /// Subscriptions routed by people: a restore owes each its outcome again.
    routed: BTreeSet<SubId>,
    /// Publishes accepted and not yet `PublishDone`.
    publishing: BTreeSet<EventId>,
}

/// The dedup rule, modelled: the `capacity` newest delivered ids, the oldest forgotten
/// first. A delivery of an id still in here is a violation.
#[derive(Debug, Default)]
struct Remembered {
    ids: BTreeSet<EventId>,
    order: VecDeque<EventId>,
}

impl PoolSim {
    /// A simulator at time zero with 10 ms latency and no relays.
    pub fn new(config: PoolConfig, seed: u64) -> Self {
        let mut pool = RelayPool::new(config.clone(), seed);
        pool.set_wall_clock(Instant::ZERO, UNIX_START);
        PoolSim {
            pool,
            peers: BTreeMap::new(),
            world: BTreeMap::new(),
            keep_transcript: true,
            quiet: false,
            verifier: SimVerifier::default(),
            net: Net::new(Instant::ZERO, Duration::from_millis(10)),
            transcript: String::new(),
            events: Vec::new(),
            sent: Vec::new(),
            routed_opens: Vec::new(),
            subscribed: Vec::new(),
            unsubscribed: Vec::new(),
            forget_received_from: BTreeSet::new(),
            received_from: BTreeMap::new(),
            auths: 0,
            checks: Checks::default(),
            touched: false,
            config,
            seed,
            saved: None,
            connecting: BTreeSet::new(),
            peak_connecting: 0,
            waiting_shown: 0,
            opened: Vec::new(),
            suspended: false,
            offline: false,
            paused: Vec::new(),
        }
    }

    /// What `pick` takes from each event the application heard, in order.
    pub fn heard<T>(&self, pick: impl FnMut(&PoolEvent) -> Option<T>) -> Vec<T> {
        self.events
            .iter()
            .map(|(_, e)| e)
            .filter_map(pick)
            .collect()
    }

    /// The REQ frames sent to `relay`, with when.
    pub fn reqs(&self, relay: RelayId) -> Vec<(Instant, &str)> {
        self.sent
            .iter()
            .filter(|(_, r, c, _)| *r == relay && matches!(c, Carries::Req(_)))
            .map(|(at, _, _, text)| (*at, text.as_str()))
            .collect()
    }

    /// Every socket the pool asked for, in order: when (ms since the start) and for which
    /// relay (its number).
    pub fn opens(&self) -> Vec<(u64, u32)> {
        self.opened
            .iter()
            .map(|(at, relay)| {
                let ms = u64::try_from(at.since_origin().as_millis()).unwrap_or(u64::MAX);
                (ms, relay.0)
            })
            .collect()
    }

    /// Whether nothing is pending but the sockets' keepalive: nothing in flight (a pong at
    /// most), no output queued, no copy awaiting a verdict, every subscription the pool holds
    /// has had its outcome, every publish its `PublishDone`, and every relay's session is
    /// either idle with no deadline or on an open socket whose pings its relay answers, with
    /// nothing queued to send and no subscription on a timer. From such a state only ping,
    /// pong, ping, ... follow: what the checks look at does not change again.
    pub fn is_settled(&self) -> bool {
        if self.pool.unverified() > 0
            || !self.checks.publishing.is_empty()
            || self
                .pool
                .poll_timeout()
                .is_some_and(|t| t <= self.net.now())
            || !self
                .net
                .in_flight()
                .all(|item| matches!(item, Item::ToPool(_, _, Input::Pong)))
        {
            return false;
        }
        let outcomes_in = self
            .subscribed
            .iter()
            .all(|sub| self.checks.complete.contains(sub) || self.pool.serving(*sub).is_none());
        outcomes_in
            && self.pool.relay_ids().all(|relay| {
                match (self.pool.session(relay), self.peers.get(&relay)) {
                    (Some(session), Some(peer)) => session_settled(
                        session,
                        peer.conn,
                        self.net.latency * 2,
                        !peer.mute && !peer.model.ignore_pings && peer.model.drop_after.is_none(),
                    ),
                    _ => false,
                }
            })
    }

    /// Whether `sub` has had its `Complete` (PoolSim fails a run on a second one).
    pub fn has_outcome(&self, sub: SubId) -> bool {
        self.checks.complete.contains(&sub)
    }

    /// Publishes the pool accepted that have not had their `PublishDone` yet.
    pub fn publishes_pending(&self) -> usize {
        self.checks.publishing.len()
    }

    /// The wire id of the latest REQ sent to `relay`, if any.
    pub fn last_wire_id(&self, relay: RelayId) -> Option<&str> {
        self.sent
            .iter()
            .rev()
            .find(|(_, r, c, _)| *r == relay && matches!(c, Carries::Req(_)))
            .and_then(|(_, _, _, text)| text.split('"').nth(3))
    }

    /// The process ends here and a new one restores its checkpoint at `at` (not before now):
    /// a fresh PoolSim whose clock starts at `at` on this one's timeline, so the wall clock
    /// goes on (`UNIX_START` plus the seconds since this run's time zero) and events dated
    /// while the app was away are in the past. Its relays are this run's as it leaves them,
    /// connections dropped: the relays routing held go back to [`PoolSim::world`] by URL,
    /// the others keep their ids (the checkpoint restores them). The pool is restored from
    /// the checkpoint's JSON at `at`, as [`PoolAction::Restore`] restores one; the checks
    /// carry over, since the restored pool remembers what this one delivered. Store what
    /// the relays received meanwhile in the new PoolSim's `world` before running it.
    ///
    /// Unlike [`PoolAction::Kill`] and [`PoolAction::Restore`] in one run, the new run's
    /// `events`, `sent` and `routed_opens` hold only what happened after the restart.
    #[must_use]
    pub fn restart(mut self, at: Instant) -> PoolSim {
        let checkpoint = self.pool.checkpoint().to_json();
        let at = at.max(self.net.now());
        let mut next = PoolSim::new(self.config.clone(), self.seed);
        next.net = Net::new(at, self.net.latency);
        next.keep_transcript = self.keep_transcript;
        next.quiet = self.quiet;
        next.verifier = self.verifier;
        next.forget_received_from = std::mem::take(&mut self.forget_received_from);
        next.world = std::mem::take(&mut self.world);
        for (relay, mut peer) in std::mem::take(&mut self.peers) {
            if let Some(conn) = peer.conn.take() {
                peer.model.drop_conn(conn);
            }
            peer.accepted = None;
            match peer.url.take() {
                Some(url) => {
                    next.world.insert(url, peer.model);
                }
                None => {
                    next.peers.insert(relay, peer);
                }
            }
        }
        next.subscribed = std::mem::take(&mut self.subscribed);
        next.unsubscribed = std::mem::take(&mut self.unsubscribed);
        next.auths = self.auths;
        next.checks = std::mem::take(&mut self.checks);
        next.saved = Some(checkpoint);
        next.net.push(at, Item::Script(PoolAction::Restore));
        next
    }

    /// The process dies with its checkpoint taken.
    fn kill(&mut self) {
        let checkpoint = self.pool.checkpoint();
        self.saved = Some(checkpoint.to_json());
        for peer in self.peers.values_mut() {
            if let Some(conn) = peer.conn.take() {
                peer.model.drop_conn(conn);
            }
            peer.accepted = None;
        }
        self.connecting.clear();
        // A new process numbers every relay's sockets from the start again.
        self.net.retain(|item| matches!(item, Item::Script(_)));
        self.touched = false;
        self.line(
            "io",
            &format!(
                "killed (checkpoint: {} relays, {} subscriptions)",
                checkpoint.relays().count(),
                checkpoint.subscriptions().count()
            ),
        );
    }

    /// A new process restores the killed pool; every relay connects.
    fn restore(&mut self, now: Instant) {
        let Some(bytes) = self.saved.take() else {
            return;
        };
        // A new process is in the foreground, on the network.
        self.pause(now, false, false);
        let unix = UNIX_START + now.since_origin().as_secs();
        let restored = PoolCheckpoint::from_json(&bytes)
            .and_then(|c| RelayPool::restore(self.config.clone(), self.seed, &c, now, unix));
        match restored {
            Ok(pool) => self.pool = pool,
            Err(e) => self.fail(&format!("restoring the Sim's own checkpoint: {e}")),
        }
        // A routed subscription is placed afresh by the restored pool: its outcome is this
        // run's, owed once more.
        let Checks {
            complete, routed, ..
        } = &mut self.checks;
        complete.retain(|sub| !routed.contains(sub));
    }

    fn process(&mut self, item: Item) {
        // Only these reach the pool (a delivery to a live connection marks itself).
        self.touched |= matches!(
            item,
            Item::Script(_) | Item::Verdict(..) | Item::Cut(..) | Item::Flood { .. }
        );
        match item {
            Item::Script(action) => self.script(action),
            Item::Accept(relay, conn) => {
                let latency = self.net.latency;
                let now = self.net.now();
                let Some(peer) = self.peers.get_mut(&relay) else {
                    return;
                };
                if peer.hangs && peer.conn == Some(conn) {
                    self.relay_line(relay, "io", "handshake hangs");
                    return;
                }
                if peer.model.down || peer.conn != Some(conn) {
                    let (what, loss) = if peer.model.resets {
                        ("reset", SocketLoss::NetworkError)
                    } else {
                        ("refused", SocketLoss::ConnectionRefused)
                    };
                    self.relay_line(relay, "io", what);
                    self.net.send(Item::ToPool(relay, conn, Input::Close(loss)));
                    return;
                }
                peer.accepted = Some(conn);
                let greeting = if peer.mute {
                    Vec::new()
                } else {
                    peer.model.accept(conn)
                };
                let drop_after = peer.model.drop_after;
                self.net.send(Item::ToPool(relay, conn, Input::Open));
                for frame in greeting {
                    self.net
                        .send(Item::ToPool(relay, conn, Input::Frame(frame)));
                }
                // Accept-then-drop: the relay closes this connection after a while.
                if let Some(d) = drop_after {
                    self.net.push(now + latency + d, Item::Cut(relay, conn));
                }
            }
            Item::Cut(relay, conn) => {
                if self.peers.get(&relay).and_then(|p| p.conn) == Some(conn) {
                    self.drop_conn(relay);
                }
            }
            Item::ToRelay(relay, conn, text) => {
                let now = self.net.now();
                let Some(peer) = self.peers.get_mut(&relay) else {
                    return;
                };
                if peer.conn != Some(conn) || peer.mute {
                    return;
                }
                for frame in peer.model.handle(now, conn, &text) {
                    self.net
                        .send(Item::ToPool(relay, conn, Input::Frame(frame)));
                }
            }
            Item::Verdict(ticket, verdict) => {
                if !self.quiet {
                    let shown = format!("Verdict {} {verdict:?}", ticket.0).replace('"', "'");
                    self.line("vf", &shown);
                }
                // A ticket of a subscription dropped meanwhile is not awaited any more.
                let _ = self.pool.handle_verified(self.net.now(), ticket, verdict);
            }
            Item::ToPool(relay, conn, input) => {
                if self.peers.get(&relay).and_then(|p| p.conn) != Some(conn) {
                    return;
                }
                self.deliver(relay, Epoch(conn), input);
            }
            Item::Flood {
                relay,
                conn,
                wire,
                next,
                end,
                per_ms,
            } => {
                if self.peers.get(&relay).and_then(|p| p.conn) != Some(conn) {
                    self.relay_line(relay, "io", "flood cut short: connection gone");
                    return;
                }
                let last = end.min(next.saturating_add(per_ms.max(1)));
                if !self.quiet {
                    self.relay_line(relay, "rx", &format!("flood ev#{next}..ev#{last}"));
                }
                for n in next..last {
                    let frame = flood_frame(&wire, n);
                    if let Err(e) =
                        self.pool
                            .handle_frame(self.net.now(), relay, Epoch(conn), &frame)
                    {
                        self.fail(&format!("socket misuse by the PoolSim: {e}"));
                    }
                    // Drained as it goes, as a driver would: output never piles up.
                    self.drain_events();
                }
                if last < end {
                    let at = self.net.now() + Duration::from_millis(1);
                    self.net.push(
                        at,
                        Item::Flood {
                            relay,
                            conn,
                            wire,
                            next: last,
                            end,
                            per_ms,
                        },
                    );
                }
            }
        }
    }

    fn deliver(&mut self, relay: RelayId, epoch: Epoch, input: Input) {
        self.touched = true;
        let now = self.net.now();
        let result = match input {
            Input::Open => {
                self.connecting.remove(&relay);
                self.relay_line(relay, "io", "open");
                self.pool.handle_open(now, relay, epoch)
            }
            Input::Close(why) => {
                self.connecting.remove(&relay);
                self.relay_line(relay, "io", "closed");
                if let Some(peer) = self.peers.get_mut(&relay) {
                    peer.conn = None;
                }
                self.pool.handle_close(now, relay, epoch, why)
            }
            Input::Pong => self.pool.handle_pong(now, relay, epoch),
            Input::Frame(text) => {
                if !self.quiet {
                    let shown = crate::sim::abbreviate(&text);
                    self.relay_line(relay, "rx", &shown);
                }
                self.pool.handle_frame(now, relay, epoch, &text)
            }
        };
        if let Err(e) = result {
            self.fail(&format!("socket misuse by the PoolSim: {e}"));
        }
    }

    fn script(&mut self, action: PoolAction) {
        let now = self.net.now();
        if !self.quiet {
            let shown = match &action {
                PoolAction::AddRelay(_) => "AddRelay".to_owned(),
                PoolAction::AddMutedRelay(_) => "AddMutedRelay".to_owned(),
                PoolAction::Store(r, e) => format!("Store {r} ev#{} t={}", e.n, e.created_at),
                other => format!("{other:?}").replace('"', "'"),
            };
            self.line("app", &shown);
        }
        if self.saved.is_some() && !is_relay_side(&action) {
            // The process is dead: nothing the application does reaches a pool.
            self.touched = false;
            return;
        }
        match action {
            PoolAction::Kill => self.kill(),
            PoolAction::Restore => self.restore(now),
            PoolAction::AddRelay(model) => self.add_relay(*model, false),
            PoolAction::AddMutedRelay(model) => self.add_relay(*model, true),
            PoolAction::RemoveRelay(relay) => {
                if self.pool.remove_relay(now, relay).is_ok() {
                    self.connecting.remove(&relay);
                    if let Some(mut peer) = self.peers.remove(&relay) {
                        if let Some(conn) = peer.conn.take() {
                            peer.model.drop_conn(conn);
                        }
                    }
                    // Its connections are gone with it, and what they still had in flight:
                    // a relay added later may get the same id, and its session counts
                    // epochs from 1 again (a driver drops the old socket's wire likewise).
                    self.forget_io(relay);
                }
            }
            PoolAction::Subscribe(filters) => {
                let result = self.pool.subscribe(now, parse(&filters));
                self.subscribed.extend(result.as_ref().ok());
                self.reply(result.map(|s| s.to_string()));
            }
            PoolAction::SubscribeRouted(routing) => {
                let routing = routing.into_iter().map(|(r, f)| (r, parse(&f))).collect();
                let result = self.pool.subscribe_routed(now, routing);
                self.subscribed.extend(result.as_ref().ok());
                self.reply(result.map(|s| s.to_string()));
            }
            PoolAction::Unsubscribe(sub) => {
                if self.pool.unsubscribe(now, sub).is_ok() {
                    self.unsubscribed.push(sub);
                }
            }
            PoolAction::Publish(json) => {
                let result = self.pool.publish(now, &json, None);
                if let Ok(id) = &result {
                    self.checks.publishing.insert(*id);
                }
                self.reply(result.map(|id| short(&id.to_string())));
            }
            PoolAction::PublishOutbox(json) => {
                let result = self.pool.publish_outbox(now, &json);
                if let Ok(id) = &result {
                    self.checks.publishing.insert(*id);
                }
                self.reply(result.map(|id| short(&id.to_string())));
            }
            PoolAction::DropSocket(relay) => self.drop_conn(relay),
            PoolAction::Vanish(relay) => self.vanish(relay),
            PoolAction::Suspend => {
                self.pool.suspend(now);
                self.pause(now, true, self.offline);
            }
            PoolAction::Resume => {
                self.pool.resume(now);
                self.pause(now, false, self.offline);
            }
            PoolAction::NetworkChanged(old_path_gone) => {
                self.pool.network_changed(now, old_path_gone);
            }
            PoolAction::Online(online) => {
                self.pool.set_online(now, online);
                self.pause(now, self.suspended, !online);
            }
            PoolAction::Down(relay) => {
                if let Some(peer) = self.peers.get_mut(&relay) {
                    peer.model.down = true;
                }
                self.drop_conn(relay);
            }
            PoolAction::Up(relay) => {
                if let Some(peer) = self.peers.get_mut(&relay) {
                    peer.model.down = false;
                }
            }
            PoolAction::Store(relay, event) => {
                let Some(peer) = self.peers.get_mut(&relay) else {
                    return;
                };
                let frames = peer.model.store(event);
                let mute = peer.mute;
                for (conn, frame) in frames {
                    if !mute {
                        self.net
                            .send(Item::ToPool(relay, conn, Input::Frame(frame)));
                    }
                }
            }
            PoolAction::SubscribeOutbox(filter) => {
                let result = Filter::new(&filter)
                    .map_err(|e| tether_core::pool::PoolError::Session(e.into()))
                    .and_then(|f| self.pool.subscribe_outbox(now, f));
                self.subscribed.extend(result.as_ref().ok());
                self.checks.routed.extend(result.as_ref().ok());
                self.reply(result.map(|s| s.to_string()));
            }
            PoolAction::StoreAt(url, event) => match self.held_at(&url) {
                Some(relay) => self.script(PoolAction::Store(relay, event)),
                None => {
                    if let Some(model) = self.world.get_mut(&url) {
                        let _ = model.store(event);
                    }
                }
            },
            PoolAction::DownAt(url, down) => match (self.held_at(&url), down) {
                (Some(relay), true) => self.script(PoolAction::Down(relay)),
                (Some(relay), false) => self.script(PoolAction::Up(relay)),
                (None, _) => {
                    if let Some(model) = self.world.get_mut(&url) {
                        model.down = down;
                    }
                }
            },
            PoolAction::RelayInfoAt(url, document) => {
                let held = self
                    .pool
                    .relay_ids()
                    .find(|&r| self.pool.relay_url(r) == Some(url.as_str()));
                let shown = match (held, RelayInfo::parse(document.as_bytes())) {
                    (None, _) => "  -> not held".to_owned(),
                    (Some(_), Err(e)) => format!("  -> error {e}"),
                    (Some(relay), Ok(info)) => {
                        match self.pool.apply_relay_info(now, relay, &info) {
                            Ok(applied) => format!("  -> {relay} {applied:?}"),
                            Err(e) => format!("  -> error {e}"),
                        }
                    }
                };
                self.line("app", &shown);
            }
            PoolAction::RelayFrame(relay, frame) => {
                let open = self
                    .peers
                    .get(&relay)
                    .and_then(|p| p.conn.filter(|&c| p.accepted == Some(c)));
                if let Some(conn) = open {
                    self.net
                        .send(Item::ToPool(relay, conn, Input::Frame(frame)));
                }
            }
            PoolAction::Mute(relay, mute) => {
                if let Some(peer) = self.peers.get_mut(&relay) {
                    peer.mute = mute;
                }
            }
            PoolAction::Hang(relay, hangs) => {
                if let Some(peer) = self.peers.get_mut(&relay) {
                    peer.hangs = hangs;
                }
            }
            PoolAction::Relay(relay, change) => {
                if let Some(peer) = self.peers.get_mut(&relay) {
                    change(&mut peer.model);
                }
            }
            PoolAction::Flood {
                relay,
                wire,
                first,
                count,
                per_ms,
            } => {
                let open = self
                    .peers
                    .get(&relay)
                    .and_then(|p| p.conn.filter(|&c| p.accepted == Some(c)));
                if let Some(conn) = open {
                    self.net.send(Item::Flood {
                        relay,
                        conn,
                        wire,
                        next: first,
                        end: first.saturating_add(count),
                        per_ms,
                    });
                }
            }
        }
    }

    fn add_relay(&mut self, model: RelayModel, mute: bool) {
        match self.pool.add_relay(self.net.now()) {
            Ok(relay) => {
                self.peers.insert(
                    relay,
                    Peer {
                        model,
                        mute,
                        hangs: false,
                        url: None,
                        conn: None,
                        accepted: None,
                    },
                );
                self.line("app", &format!("  -> {relay}"));
            }
            Err(e) => self.line("app", &format!("  -> error {e}")),
        }
    }

    fn reply(&mut self, result: Result<String, tether_core::pool::PoolError>) {
        match result {
            Ok(what) => self.line("app", &format!("  -> {what}")),
            Err(e) => self.line("app", &format!("  -> error {e}")),
        }
    }

    /// The application is now `suspended` and `offline` (or not): open or close a pause.
    fn pause(&mut self, now: Instant, suspended: bool, offline: bool) {
        let (was, is) = (self.suspended || self.offline, suspended || offline);
        (self.suspended, self.offline) = (suspended, offline);
        if !was && is {
            self.paused.push((now, None));
        }
        if was && !is {
            if let Some((_, end)) = self.paused.last_mut() {
                *end = Some(now);
            }
        }
    }

    /// How much of `from..to` the application was suspended or offline.
    fn paused_within(&self, from: Instant, to: Instant) -> Duration {
        self.paused
            .iter()
            .map(|&(start, end)| {
                let (start, end) = (start.max(from), end.unwrap_or(to).min(to));
                end.saturating_duration_since(start)
            })
            .sum()
    }

    /// The relay forgets `relay`'s connection and the pool is not told (see
    /// [`PoolAction::Vanish`]): what is in flight on it is lost.
    fn vanish(&mut self, relay: RelayId) {
        let Some(conn) = self.take_conn(relay) else {
            return;
        };
        self.net.retain(|item| match item {
            Item::ToPool(r, c, _) | Item::ToRelay(r, c, _) => (*r, *c) != (relay, conn),
            _ => true,
        });
        self.relay_line(relay, "io", "vanished");
    }

    /// `relay`'s connection ends on the relay's side: the relay forgets it, and it is no
    /// longer a handshake in flight. Which connection it was, if there was one.
    fn take_conn(&mut self, relay: RelayId) -> Option<u64> {
        let peer = self.peers.get_mut(&relay)?;
        let conn = peer.conn.take()?;
        peer.model.drop_conn(conn);
        self.connecting.remove(&relay);
        Some(conn)
    }

    fn drop_conn(&mut self, relay: RelayId) {
        let Some(conn) = self.take_conn(relay) else {
            return;
        };
        self.relay_line(relay, "io", "dropped");
        let result =
            self.pool
                .handle_close(self.net.now(), relay, Epoch(conn), SocketLoss::NetworkError);
        if let Err(e) = result {
            self.fail(&format!("socket misuse by the PoolSim: {e}"));
        }
    }

    /// Drain the pool's outputs until only a timeout is left, checking its promises.
    fn drain(&mut self) {
        loop {
            let mut progressed = false;
            while let Some((relay, t)) = self.pool.poll_transmit() {
                progressed = true;
                self.transmit(relay, t);
            }
            progressed |= self.drain_events();
            while let Some(req) = self.pool.poll_verify() {
                progressed = true;
                let verdict = (self.verifier.check)(&req.raw);
                let at = self.net.now() + (self.verifier.delay)(&req);
                if !self.quiet {
                    self.relay_line(
                        req.relay,
                        "vf",
                        &format!("Verify {} {}", req.ticket.0, short(&req.id.to_string())),
                    );
                }
                self.net.push(at, Item::Verdict(req.ticket, verdict));
            }
            if !progressed {
                break;
            }
        }
        if let Err(e) = self.pool.check_consistency() {
            self.fail(&format!("pool bookkeeping: {e}"));
        }
        // Under verification the pool remembers ids at arrival and forgets failed copies; the
        // model follows deliveries, so it is compared only when delivery is immediate.
        let verifying = self.pool.config().verify;
        for (sub, memory) in self.checks.delivered.iter().filter(|_| !verifying) {
            let Some(held) = self.pool.dedup(*sub).map(|d| d.ids) else {
                continue;
            };
            if held != memory.ids.len() {
                self.fail(&format!(
                    "{sub}'s dedup holds {held} ids, the documented rule {}",
                    memory.ids.len()
                ));
            }
        }
        for relay in self.pool.relay_ids().collect::<Vec<_>>() {
            let Some(session) = self.pool.session(relay) else {
                continue;
            };
            if let Err(e) = session.check_consistency() {
                self.fail(&format!("{relay} session bookkeeping: {e}"));
            }
        }
        self.check_pacing();
    }

    /// The most handshakes in flight at once so far, as the network saw them.
    pub fn peak_connecting(&self) -> usize {
        self.peak_connecting
    }

    /// Paced connects: no more handshakes in flight than `max_connecting`, and no relay
    /// waits for a slot longer than one connect timeout per `max_connecting` relays of the
    /// pool (first come, first served, each slot held one connect timeout at most), not
    /// counting the time the application was suspended or offline.
    fn check_pacing(&mut self) {
        let handshakes = self.pool.handshakes();
        // Said only when relays wait or stop waiting: a pool under its limit, every
        // transcript before pacing, shows no such line.
        if handshakes.waiting != self.waiting_shown && !self.quiet {
            self.waiting_shown = handshakes.waiting;
            self.line(
                "pac",
                &format!(
                    "{} in flight, {} waiting",
                    handshakes.in_flight, handshakes.waiting
                ),
            );
        }
        let limit = self.config.max_connecting.max(1);
        if self.connecting.len() > limit {
            self.fail(&format!(
                "{} handshakes in flight ({:?}), limit {limit}",
                self.connecting.len(),
                self.connecting
            ));
        }
        let rounds = self.pool.relay_count().div_ceil(limit);
        let bound =
            self.config.relay.link.connect_timeout * u32::try_from(rounds).unwrap_or(u32::MAX);
        let now = self.net.now();
        for relay in self.pool.relay_ids().collect::<Vec<_>>() {
            let Some(session) = self.pool.session(relay) else {
                continue;
            };
            let LinkState::Queued { since } = session.link().state() else {
                continue;
            };
            let waited = now.saturating_duration_since(since) - self.paused_within(since, now);
            if waited > bound {
                self.fail(&format!(
                    "{relay} waited {waited:?} for a handshake slot, more than {bound:?}"
                ));
            }
        }
    }

    /// Before a socket opens for `relay`: if routing opened it for a URL, the peer there is
    /// the world's relay at that URL (the model of a relay the pool let go of goes back to
    /// the world, and what its connections had in flight is gone with it).
    fn bring_routed(&mut self, relay: RelayId) {
        let Some(url) = self.pool.relay_url(relay).map(str::to_owned) else {
            return;
        };
        if self.peers.get(&relay).and_then(|p| p.url.as_deref()) == Some(url.as_str()) {
            return;
        }
        if let Some(mut old) = self.peers.remove(&relay) {
            if let Some(conn) = old.conn.take() {
                old.model.drop_conn(conn);
            }
            if let Some(old_url) = old.url {
                self.world.insert(old_url, old.model);
            }
            self.forget_io(relay);
        }
        let model = self.world.remove(&url).unwrap_or_else(|| {
            let mut none = RelayModel::default();
            none.down = true;
            none
        });
        self.line("io", &format!("{relay} is {url}"));
        self.peers.insert(
            relay,
            Peer {
                model,
                mute: false,
                hangs: false,
                url: Some(url),
                conn: None,
                accepted: None,
            },
        );
    }

    /// The URL routing had opened `relay` at, at `at`.
    pub fn routed_url_at(&self, relay: RelayId, at: Instant) -> Option<&str> {
        self.routed_opens
            .iter()
            .rev()
            .find(|(t, r, _)| *r == relay && *t <= at)
            .map(|(_, _, url)| url.as_str())
    }

    /// The pool's relay at `url`, while routing holds it.
    pub fn held_at(&self, url: &str) -> Option<RelayId> {
        self.peers
            .iter()
            .find(|(_, p)| p.url.as_deref() == Some(url))
            .map(|(r, _)| *r)
    }

    /// Drop everything in flight to or from `relay`'s connections.
    fn forget_io(&mut self, relay: RelayId) {
        self.net.retain(|item| match item {
            Item::Accept(r, _)
            | Item::ToPool(r, ..)
            | Item::ToRelay(r, ..)
            | Item::Cut(r, _)
            | Item::Flood { relay: r, .. } => *r != relay,
            Item::Script(_) | Item::Verdict(..) => true,
        });
    }

    /// The pool's events so far; whether there were any.
    fn drain_events(&mut self) -> bool {
        let mut any = false;
        while let Some(e) = self.pool.poll_event() {
            any = true;
            self.event(e);
        }
        any
    }

    fn transmit(&mut self, relay: RelayId, t: Transmit) {
        let (now, latency) = (self.net.now(), self.net.latency);
        match t {
            Transmit::Open { epoch, .. } => {
                self.bring_routed(relay);
                if let Some(url) = self.pool.relay_url(relay) {
                    self.routed_opens.push((now, relay, url.to_owned()));
                }
                self.relay_line(relay, "tx", "Open");
                self.opened.push((now, relay));
                self.connecting.insert(relay);
                self.peak_connecting = self.peak_connecting.max(self.connecting.len());
                let Some(peer) = self.peers.get_mut(&relay) else {
                    return;
                };
                if let Some(old) = peer.conn.take() {
                    peer.model.drop_conn(old);
                }
                peer.conn = Some(epoch.0);
                self.net.send(Item::Accept(relay, epoch.0));
            }
            Transmit::Close { .. } => {
                self.relay_line(relay, "tx", "Close");
                self.connecting.remove(&relay);
                let Some(peer) = self.peers.get_mut(&relay) else {
                    return;
                };
                if let Some(conn) = peer.conn.take() {
                    peer.model.drop_conn(conn);
                }
            }
            Transmit::Ping => {
                self.relay_line(relay, "tx", "Ping");
                let Some(peer) = self.peers.get(&relay) else {
                    return;
                };
                if let (Some(conn), false, false) = (peer.conn, peer.model.ignore_pings, peer.mute)
                {
                    self.net
                        .push(now + latency * 2, Item::ToPool(relay, conn, Input::Pong));
                }
            }
            Transmit::FetchInfo => {
                // The relay models serve no NIP-11 document: the ask is only recorded.
                self.relay_line(relay, "tx", "FetchInfo");
            }
            Transmit::Send { text, carries } => {
                if !self.quiet {
                    let shown = crate::sim::abbreviate(&text);
                    self.relay_line(relay, "tx", &shown);
                }
                self.sent.push((now, relay, carries, text.clone()));
                if let Some(conn) = self.peers.get(&relay).and_then(|p| p.conn) {
                    self.net.send(Item::ToRelay(relay, conn, text));
                }
            }
        }
    }

    fn event(&mut self, e: PoolEvent) {
        let now = self.net.now();
        if let PoolEvent::Received { relay, .. } = &e {
            *self.received_from.entry(*relay).or_default() += 1;
            if self.forget_received_from.contains(relay) {
                self.check(&e);
                return;
            }
        }
        if !self.quiet {
            let shown = match &e {
                PoolEvent::Received { sub, relay, id, .. } => {
                    format!("Received {sub} from {relay} {}", short(&id.to_string()))
                }
                other => format!("{other:?}").replace('"', "'"),
            };
            self.line("ev", &shown);
        }
        self.check(&e);
        if let PoolEvent::Relay {
            relay,
            event: Event::AuthChallenge { challenge, id },
            ..
        } = &e
        {
            self.auths += 1;
            let signed = auth_event(self.auths, challenge);
            let _ = self.pool.authenticate(now, *relay, *id, &signed);
        }
        self.events.push((now, e));
    }

    fn check(&mut self, e: &PoolEvent) {
        let sub = match e {
            PoolEvent::Received { sub, .. }
            | PoolEvent::Eose { sub, .. }
            | PoolEvent::RelayClosed { sub, .. }
            | PoolEvent::Complete { sub, .. }
            | PoolEvent::Ended { sub, .. } => Some(*sub),
            PoolEvent::Relay { sub, .. } => *sub,
            _ => None,
        };
        if let Some(sub) = sub {
            if self.checks.ended.contains(&sub) {
                self.fail(&format!("{e:?} after {sub} ended"));
            }
        }
        let capacity = self.pool.config().dedup_capacity;
        match e {
            PoolEvent::Received { sub, id, raw, .. } => {
                if self.pool.config().verify && (self.verifier.check)(raw).is_err() {
                    self.fail(&format!("{id} delivered though it fails verification"));
                }
                let memory = self.checks.delivered.entry(*sub).or_default();
                let twice = memory.ids.contains(id);
                if !twice && capacity > 0 {
                    if memory.order.len() >= capacity {
                        if let Some(oldest) = memory.order.pop_front() {
                            memory.ids.remove(&oldest);
                        }
                    }
                    memory.ids.insert(*id);
                    memory.order.push_back(*id);
                }
                if twice {
                    self.fail(&format!(
                        "{id} delivered twice to {sub} while the pool remembers it"
                    ));
                }
            }
            PoolEvent::Complete { sub, .. } if !self.checks.complete.insert(*sub) => {
                self.fail(&format!("two outcomes for {sub}"));
            }
            PoolEvent::PublishDone { id, .. } if !self.checks.publishing.remove(id) => {
                self.fail(&format!(
                    "PublishDone for {id}, which is not being published"
                ));
            }
            PoolEvent::Ended { sub, .. } => {
                self.checks.ended.insert(*sub);
                if self.pool.serving(*sub).is_some() {
                    self.fail(&format!("{sub} ended but is still registered"));
                }
            }
            _ => {}
        }
    }

    fn relay_line(&mut self, relay: RelayId, who: &str, what: &str) {
        if !self.quiet {
            self.line(who, &format!("{relay} {what}"));
        }
    }

    fn fail(&self, what: &str) -> ! {
        let tail: Vec<&str> = self.transcript.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let tail = if self.quiet {
            "(none: the PoolSim ran quiet; run it again with `quiet` off)".to_owned()
        } else {
            tail.join("\n")
        };
        panic!("pool invariant violated: {what}\n--- last transcript lines ---\n{tail}");
    }
}

impl Machine for PoolSim {
    type Item = Item;

    net::machine_fields!(pool: RelayPool, quiet);

    fn on_item(&mut self, item: Item) {
        self.touched = false;
        self.process(item);
        if self.touched {
            self.drain();
        }
    }

    fn after_timeout(&mut self) {
        self.drain();
    }
}

fn parse(filters: &[String]) -> Vec<Filter> {
    filters
        .iter()
        .map(|f| Filter::new(f).expect("test filter"))
        .collect()
}

/// `["EVENT",<wire>,<StoredEvent::new(n, UNIX_START + n % 1_000, 1)>]`, byte for byte,
/// without the formatter's zero padding (a flood's frames are most of a fuzz input's work).
fn flood_frame(wire: &str, n: u64) -> String {
    const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000\
                         0000000000000000000000000000000000000000000000000000000000000000";
    let mut out = String::with_capacity(wire.len() + 360);
    let hex = |out: &mut String, width: usize, v: u64| {
        let digits = format!("{v:x}");
        out.push_str(&ZEROS[..width.saturating_sub(digits.len())]);
        out.push_str(&digits);
    };
    out.push_str(r#"["EVENT",""#);
    out.push_str(wire);
    out.push_str(r#"",{"id":""#);
    hex(&mut out, 64, n);
    out.push_str(r#"","pubkey":""#);
    hex(&mut out, 64, n % 7);
    let _ = write!(
        out,
        r#"","created_at":{},"kind":1,"tags":[],"content":"event {n}","sig":""#,
        UNIX_START + n % 1_000
    );
    hex(&mut out, 128, n);
    out.push_str(r#""}]"#);
    out
}

fn short(hex: &str) -> String {
    let trimmed = hex.trim_start_matches('0');
    format!("ev#{}", if trimmed.is_empty() { "0" } else { trimmed })
}

/// Whether an action is a relay's or the network's, which go on while the process is dead.
fn is_relay_side(action: &PoolAction) -> bool {
    matches!(
        action,
        PoolAction::Store(..)
            | PoolAction::Down(_)
            | PoolAction::Up(_)
            | PoolAction::Mute(..)
            | PoolAction::Hang(..)
            | PoolAction::Relay(..)
            | PoolAction::StoreAt(..)
            | PoolAction::DownAt(..)
            | PoolAction::Restore
    )
}

net::simulator_accessors!(PoolSim, PoolAction);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_frame_is_the_stored_events_frame() {
        for n in [0, 1, 6, 7, 255, 1 << 40, (1 << 40) + 999_999, u64::MAX] {
            let event = StoredEvent::new(n, UNIX_START + n % 1_000, 1);
            let frame = format!(r#"["EVENT","3:1",{}]"#, event.json);
            assert_eq!(flood_frame("3:1", n), frame);
        }
    }
}
