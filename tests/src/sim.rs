//! `Sim`: a [`RelaySession`] and a [`RelayModel`] joined by the simulated network
//! (`net.rs`), always advanced to the earliest deadline of either side (quinn's `Pair`,
//! str0m's `progress`). No sleeps, no real time: ten simulated minutes take milliseconds, and
//! the same seed gives the same transcript.

use std::time::Duration;

use tether_core::link::{Epoch, LinkState, Liveness, SocketLoss};
use tether_core::nostr::message::{ClientMessage, RawEvent, RelayMessage, DEFAULT_MAX_FRAME};
use tether_core::nostr::{
    Carries, CatchUpMethod, Event, Filter, Priority, RelayCheckpoint, RelayConfig, RelayInfo,
    RelaySession, SubState, SubscriptionId, Transmit,
};
use tether_core::Instant;

use crate::invariants::{Invariants, Step};
use crate::net::{self, Machine, Net};
use crate::relay_model::{auth_event, RelayModel, StoredEvent};

/// The wall clock at the Sim's time zero (2025-06-15): late enough that the RelayModel's
/// stored events (1970) are all in the past, so only a test's deliberately future-dated
/// events are judged.
pub const UNIX_START: u64 = 1_750_000_000;

/// Something the test script makes happen at a given time.
#[derive(Clone, Debug)]
pub enum Action {
    /// `session.connect`.
    Connect,
    /// `session.disconnect`.
    Disconnect,
    /// `session.subscribe` with these filter JSON objects.
    Subscribe(Vec<String>, Priority),
    /// `session.unsubscribe`.
    Unsubscribe(SubscriptionId),
    /// `session.publish`.
    Publish(String),
    /// The network drops the socket (the session sees a close).
    DropSocket,
    /// The relay stops accepting connections (and drops the current one).
    RelayDown,
    /// The relay accepts connections again.
    RelayUp,
    /// The relay stores an event and delivers it to matching live subscriptions.
    Store(StoredEvent),
    /// The relay sends this raw frame on the current connection.
    RelayFrame(String),
    /// Change the relay's behaviour.
    Relay(fn(&mut RelayModel)),
    /// The driver fetched the relay's NIP-11 document (these bytes): parse it and, if it
    /// parses, `session.apply_relay_info`. The transcript shows what was applied.
    RelayInfo(String),
    /// The connection dies without a close reaching the session (a NAT forgot it while the
    /// app slept, the Wi-Fi went away): the relay forgets it, nothing sent on it arrives,
    /// pings go unanswered. The session holds a zombie socket.
    Vanish,
    /// `session.suspend`: the app goes to the background.
    Suspend,
    /// `session.resume`: the app comes back.
    Resume,
    /// `session.network_changed(old_path_gone)`.
    NetworkChanged(bool),
    /// `session.set_online`.
    Online(bool),
    /// The process dies: the session's checkpoint is taken (as JSON bytes) and the session
    /// is gone; the relay sees the connection drop, nothing in flight arrives anywhere, and
    /// nothing reaches the session until [`Action::Restore`].
    Kill,
    /// A new process restores the session from the checkpoint [`Action::Kill`] took, at this
    /// time and wall clock, and connects.
    Restore,
}

/// What the Sim's network carries.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Script(Action),
    /// The relay accepts connection `conn` (or refuses it if down).
    Accept(u64),
    ToSession(u64, Input),
    ToRelay(u64, String),
}

/// What a socket hands the session (the PoolSim's too).
#[derive(Clone, Debug)]
pub(crate) enum Input {
    Open,
    Close(SocketLoss),
    Frame(String),
    Pong,
}

/// The simulator. See the module docs.
pub struct Sim {
    /// The session under test.
    pub session: RelaySession,
    /// Its peer.
    pub relay: RelayModel,
    /// Answer every AUTH challenge automatically (the app's signer).
    pub auto_auth: bool,
    /// Check invariants after every step (panics with the transcript on a violation).
    pub check: bool,
    /// Keep the whole transcript (default); when `false` only a tail is kept, for long soaks.
    pub keep_transcript: bool,
    /// Keep no transcript and no [`Sim::sent`] log at all: the fuzz target, which replays a
    /// failing input with the transcript on to show it (a run is deterministic).
    pub quiet: bool,
    net: Net<Item>,
    /// The connection the relay and session share: the session's socket epoch.
    conn: Option<u64>,
    /// The connection the relay accepted last: it can only send on that one.
    accepted: Option<u64>,
    /// A connection that vanished: the session still holds it, nothing crosses it.
    vanished: Option<u64>,
    transcript: String,
    /// Every event the application heard, with its time.
    pub events: Vec<(Instant, Event)>,
    /// Every frame the session sent, with its time and what the session said it carries
    /// (empty when [`Sim::quiet`]).
    pub sent: Vec<(Instant, Carries, String)>,
    /// The invariant checker's state.
    pub invariants: Invariants,
    auths: u64,
    config: RelayConfig,
    seed: u64,
    /// The checkpoint of a killed session, until it is restored.
    saved: Option<Vec<u8>>,
}

impl Sim {
    /// A simulator at time zero with 10 ms latency.
    pub fn new(config: RelayConfig, seed: u64, relay: RelayModel) -> Self {
        let invariants = Invariants::new(&config);
        let mut session = RelaySession::new(config.clone(), seed);
        session.set_wall_clock(Instant::ZERO, UNIX_START);
        Sim {
            session,
            relay,
            auto_auth: true,
            check: true,
            keep_transcript: true,
            quiet: false,
            net: Net::new(Instant::ZERO, Duration::from_millis(10)),
            conn: None,
            accepted: None,
            vanished: None,
            transcript: String::new(),
            events: Vec::new(),
            sent: Vec::new(),
            invariants,
            auths: 0,
            config,
            seed,
            saved: None,
        }
    }

    /// Schedule `action` now.
    pub fn act(&mut self, action: Action) -> &mut Self {
        self.net.push(self.net.now(), Item::Script(action));
        self.run_for(Duration::ZERO);
        self
    }

    /// The REQ frames the session sent, with when.
    pub fn reqs(&self) -> impl Iterator<Item = (Instant, &str)> + '_ {
        self.sent
            .iter()
            .filter(|(_, carries, _)| matches!(carries, Carries::Req(_)))
            .map(|(at, _, frame)| (*at, frame.as_str()))
    }

    /// What `pick` takes from each event the application heard, in order.
    pub fn heard<T>(&self, pick: impl FnMut(&Event) -> Option<T>) -> Vec<T> {
        self.events
            .iter()
            .map(|(_, e)| e)
            .filter_map(pick)
            .collect()
    }

    /// `(method, exact_since, recovered)` of every catch-up the application heard.
    pub fn caught_up(&self) -> Vec<(CatchUpMethod, u64, u64)> {
        self.heard(|e| match e {
            Event::CaughtUp {
                method,
                exact_since,
                recovered,
                ..
            } => Some((*method, *exact_since, *recovered)),
            _ => None,
        })
    }

    /// The connection the relay and session share, if any.
    pub fn conn(&self) -> Option<u64> {
        self.conn
    }

    /// Whether nothing is pending but the socket's keepalive: no script item, frame or
    /// socket event in flight (a pong at most), no output queued, no subscription or
    /// publish waiting on a timer, nothing the send queue could send; and either no socket
    /// and nothing scheduled at all, or an open socket whose pings the relay answers. From
    /// such a state the only future is ping, pong, ping, ...: the state the invariants see
    /// does not change again.
    pub fn is_settled(&self) -> bool {
        self.net
            .in_flight()
            .all(|item| matches!(item, Item::ToSession(_, Input::Pong)))
            && session_settled(
                &self.session,
                self.conn,
                self.net.latency * 2,
                !self.relay.ignore_pings,
            )
    }

    /// Run the invariants' whole sweep now, whatever [`Sim::check`] says: the end of a fuzz
    /// input or test.
    ///
    /// # Panics
    /// On a violation, with the transcript's tail.
    pub fn check_all(&mut self) {
        self.invariants.sweep(&self.session, &self.transcript);
    }

    /// Process one queued item; whether it reached the session.
    fn process(&mut self, item: Item) -> bool {
        match item {
            Item::Script(action) => self.script(action),
            Item::Accept(conn) => {
                if self.relay.down || self.conn != Some(conn) {
                    self.line("io", "refused");
                    self.net.send(Item::ToSession(
                        conn,
                        Input::Close(SocketLoss::ConnectionRefused),
                    ));
                    return false;
                }
                self.accepted = Some(conn);
                let greeting = self.relay.accept(conn);
                self.net.send(Item::ToSession(conn, Input::Open));
                for frame in greeting {
                    self.net.send(Item::ToSession(conn, Input::Frame(frame)));
                }
                if let Some(d) = self.relay.drop_after {
                    self.net.push(
                        self.net.now() + self.net.latency + d,
                        Item::Script(Action::DropSocket),
                    );
                }
                false
            }
            Item::ToRelay(conn, text) => {
                if self.conn != Some(conn) || self.vanished == Some(conn) {
                    return false;
                }
                for frame in self.relay.handle(self.net.now(), conn, &text) {
                    self.net.send(Item::ToSession(conn, Input::Frame(frame)));
                }
                false
            }
            Item::ToSession(conn, input) => {
                if self.conn != Some(conn) || self.vanished == Some(conn) {
                    return false;
                }
                self.deliver(Epoch(conn), input);
                true
            }
        }
    }

    fn deliver(&mut self, epoch: Epoch, input: Input) {
        let now = self.net.now();
        let result = match input {
            Input::Open => {
                self.line("io", "open");
                self.invariants.opened();
                self.session.handle_open(now, epoch)
            }
            Input::Close(why) => {
                self.line("io", "closed");
                self.conn = None;
                self.session.handle_close(now, epoch, why)
            }
            Input::Pong => self.session.handle_pong(now, epoch),
            Input::Frame(text) => {
                if !self.quiet {
                    let shown = self.show(&text);
                    self.line("rx", &shown);
                }
                self.session.handle_frame(now, epoch, &text)
            }
        };
        // The Sim tags input only with epochs the session handed out, in order.
        if let Err(e) = result {
            panic!("socket misuse by the Sim: {e}\n{}", self.transcript);
        }
    }

    /// The process dies with its checkpoint taken.
    fn kill(&mut self) {
        if self.saved.is_some() {
            return;
        }
        let checkpoint = self.session.checkpoint();
        self.saved = Some(checkpoint.to_json());
        if let Some(conn) = self.conn.take() {
            self.relay.drop_conn(conn);
        }
        self.accepted = None;
        self.vanished = None;
        // A new process numbers its sockets from the start again: nothing of the old one's
        // may reach it.
        self.net.retain(|item| matches!(item, Item::Script(_)));
        self.invariants.killed();
        self.line(
            "io",
            &format!(
                "killed (checkpoint: {} subscriptions, {} remembered, {} publishes)",
                checkpoint.subscriptions().count(),
                checkpoint.remembered(),
                checkpoint.publishes()
            ),
        );
    }

    /// A new process restores the killed session and connects.
    fn restore(&mut self, now: Instant) {
        let Some(bytes) = self.saved.take() else {
            return;
        };
        let unix = UNIX_START + now.since_origin().as_secs();
        let restored = RelayCheckpoint::from_json(&bytes)
            .and_then(|c| RelaySession::restore(self.config.clone(), self.seed, &c, now, unix));
        match restored {
            Ok(session) => self.session = session,
            Err(e) => panic!(
                "restoring the Sim's own checkpoint: {e}\n{}",
                self.transcript
            ),
        }
        self.invariants.restored();
        self.session.connect(now);
    }

    /// The network or the relay dropped the shared connection.
    fn drop_conn(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        self.relay.drop_conn(conn);
        self.line("io", "dropped");
        let result =
            self.session
                .handle_close(self.net.now(), Epoch(conn), SocketLoss::NetworkError);
        if let Err(e) = result {
            panic!("socket misuse by the Sim: {e}\n{}", self.transcript);
        }
    }

    /// Run one script action; whether it reached the session.
    fn script(&mut self, action: Action) -> bool {
        let now = self.net.now();
        if !self.quiet {
            let shown = match &action {
                // A large event would drown the transcript: its size and id's tail say enough.
                Action::Publish(json) if json.len() > 512 => {
                    let tail = RawEvent::parse(json)
                        .map(|e| e.id().to_string()[56..].to_owned())
                        .unwrap_or_default();
                    format!("Publish(<{} bytes, id ..{tail}>)", json.len())
                }
                action => format!("{action:?}").replace("\"", "'"),
            };
            self.line("app", &shown);
        }
        let step = match &action {
            Action::Subscribe(..) => Some(Step::Subscribe),
            Action::Disconnect => Some(Step::Disconnect),
            Action::Connect => Some(Step::Connect),
            Action::Online(online) => Some(Step::Online(*online)),
            _ => None,
        };
        if let Some(step) = step {
            self.invariants.before(step);
        }
        if self.saved.is_some() && !matches!(action, Action::Restore) && !is_relay_side(&action) {
            // The process is dead: nothing the application does reaches a session.
            return false;
        }
        let reaches = match &action {
            Action::RelayUp
            | Action::Store(_)
            | Action::RelayFrame(_)
            | Action::Relay(_)
            | Action::Vanish => false,
            Action::DropSocket | Action::RelayDown => self.conn.is_some(),
            _ => true,
        };
        match action {
            Action::Connect => self.session.connect(now),
            Action::Disconnect => self.session.disconnect(now),
            Action::Subscribe(filters, priority) => {
                let filters = filters
                    .iter()
                    .map(|f| Filter::new(f).expect("test filter"))
                    .collect();
                match self.session.subscribe(now, filters, priority) {
                    Ok(id) => {
                        self.invariants.subscribed(id);
                        if !self.quiet {
                            self.line("app", &format!("  -> {id}"));
                        }
                    }
                    Err(e) if !self.quiet => self.line("app", &format!("  -> error {e}")),
                    Err(_) => {}
                }
            }
            Action::Unsubscribe(id) => {
                if self.session.unsubscribe(now, id).is_ok() {
                    self.invariants.unsubscribed(id);
                }
            }
            Action::Publish(json) => {
                if let (Err(e), false) = (self.session.publish(now, &json), self.quiet) {
                    self.line("app", &format!("  -> error {e}"));
                }
            }
            Action::DropSocket => self.drop_conn(),
            Action::RelayDown => {
                self.relay.down = true;
                self.drop_conn();
            }
            Action::RelayUp => self.relay.down = false,
            Action::Store(event) => {
                for (conn, frame) in self.relay.store(event) {
                    self.net.send(Item::ToSession(conn, Input::Frame(frame)));
                }
            }
            Action::RelayFrame(frame) => {
                // A relay can only write on a connection it accepted.
                if let Some(conn) = self.conn.filter(|&c| self.accepted == Some(c)) {
                    self.net.send(Item::ToSession(conn, Input::Frame(frame)));
                }
            }
            Action::Relay(change) => change(&mut self.relay),
            Action::Vanish => {
                if let Some(conn) = self.conn {
                    self.relay.drop_conn(conn);
                    self.vanished = Some(conn);
                    self.line("io", "vanished");
                }
            }
            Action::Kill => self.kill(),
            Action::Restore => self.restore(now),
            Action::Suspend => self.session.suspend(now),
            Action::Resume => self.session.resume(now),
            Action::NetworkChanged(old_path_gone) => {
                self.session.network_changed(now, old_path_gone);
            }
            Action::Online(online) => self.session.set_online(now, online),
            Action::RelayInfo(document) => match RelayInfo::parse(document.as_bytes()) {
                Ok(info) => {
                    let applied = self.session.apply_relay_info(now, &info);
                    if !self.quiet {
                        self.line("app", &format!("  -> {applied:?}"));
                    }
                }
                Err(e) if !self.quiet => self.line("app", &format!("  -> error {e}")),
                Err(_) => {}
            },
        }
        reaches
    }

    /// Drain the session's outputs until both queues are empty (str0m's rule).
    fn drain(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(t) = self.session.poll_transmit() {
                progressed = true;
                self.transmit(t);
            }
            while let Some(e) = self.session.poll_event() {
                progressed = true;
                self.event(e);
            }
            if !progressed {
                break;
            }
        }
        if self.check {
            self.invariants.after_step(
                self.net.now(),
                &self.session,
                &self.events,
                &self.transcript,
            );
        }
        // What an application call caused is foreground until it has been drained.
        self.invariants.after_action();
    }

    fn transmit(&mut self, t: Transmit) {
        let now = self.net.now();
        match t {
            Transmit::Open { epoch, .. } => {
                self.line("tx", "Open");
                self.invariants.transmitted("Open", &self.transcript);
                if let Some(old) = self.conn.take() {
                    self.relay.drop_conn(old);
                }
                let conn = epoch.0;
                self.conn = Some(conn);
                self.net.send(Item::Accept(conn));
            }
            Transmit::Close { .. } => {
                self.line("tx", "Close");
                self.invariants.transmitted("Close", &self.transcript);
                if let Some(conn) = self.conn.take() {
                    self.relay.drop_conn(conn);
                }
            }
            Transmit::Ping => {
                self.line("tx", "Ping");
                self.invariants.transmitted("Ping", &self.transcript);
                let vanished = self.conn.is_some() && self.conn == self.vanished;
                if let (Some(conn), false, false) = (self.conn, self.relay.ignore_pings, vanished) {
                    let round_trip = self.net.latency * 2;
                    self.net
                        .push(now + round_trip, Item::ToSession(conn, Input::Pong));
                }
            }
            Transmit::FetchInfo => {
                // The relay model serves no NIP-11 document: the ask is only recorded.
                self.line("tx", "FetchInfo");
            }
            Transmit::Send { text, carries } => {
                if !self.quiet {
                    let shown = self.show(&text);
                    self.line("tx", &shown);
                }
                self.invariants
                    .sent(now, &text, carries, &self.session, &self.transcript);
                if !self.quiet {
                    self.sent.push((now, carries, text.clone()));
                }
                if let Some(conn) = self.conn {
                    self.net.send(Item::ToRelay(conn, text));
                }
            }
        }
    }

    fn event(&mut self, e: Event) {
        let now = self.net.now();
        if !self.quiet {
            let shown = match &e {
                Event::Received { sub, id, .. } => {
                    format!("Event {sub} {}", short_id(&id.to_string()))
                }
                other => format!("{other:?}").replace("\"", "'"),
            };
            self.line("ev", &shown);
        }
        if let Event::AuthChallenge { challenge, id } = &e {
            if self.auto_auth {
                self.auths += 1;
                let signed = auth_event(self.auths, challenge);
                let _ = self.session.authenticate(now, *id, &signed);
            }
        }
        self.events.push((now, e));
    }

    /// A frame as the transcript shows it; long soaks skip the decoding that makes it pretty.
    fn show(&self, frame: &str) -> String {
        if self.keep_transcript {
            return abbreviate(frame);
        }
        frame.chars().take(60).collect()
    }
}

impl Machine for Sim {
    type Item = Item;

    net::machine_fields!(session: RelaySession, quiet);

    fn on_item(&mut self, item: Item) {
        if self.process(item) {
            self.drain();
        } else {
            // The session saw nothing (the relay model answered, a connection was accepted,
            // an input for a socket that is gone): its outputs are still empty and every
            // invariant reads the state the last check passed.
            self.invariants.after_action();
        }
    }

    fn after_timeout(&mut self) {
        if self.check {
            let now = self.net.now();
            self.invariants
                .after_timeout(now, &self.session, &self.transcript);
        }
        self.drain();
    }
}

/// Whether `s` is past changing, as far as its own state goes: no output queued, and either
/// idle with no deadline, or open on `conn` with nothing queued to send, no subscription on a
/// timer or waiting for a free slot, and pings that come back (a round trip within the pong
/// timeout, from a peer that is `steady`: it answers pings and keeps the socket).
pub(crate) fn session_settled(
    s: &RelaySession,
    conn: Option<u64>,
    round_trip: Duration,
    steady: bool,
) -> bool {
    if s.has_output() {
        return false;
    }
    match s.link().state() {
        LinkState::Idle => s.poll_timeout().is_none(),
        LinkState::Open { epoch, .. } => {
            let slot = s
                .subscription_limit()
                .is_none_or(|max| s.open_subscriptions() < max);
            let answered = match s.link().config().liveness {
                Liveness::Ping { pong_timeout, .. } => round_trip < pong_timeout,
                Liveness::Off => true,
                Liveness::Idle { .. } => false,
            };
            conn == Some(epoch.0)
                && answered
                && steady
                && s.outbox_len() == 0
                && s.subscriptions()
                    .iter()
                    .all(|v| v.timer.is_none() && !(slot && v.state == SubState::Queued))
        }
        LinkState::Connecting { .. } | LinkState::Waiting { .. } | LinkState::Queued { .. } => {
            false
        }
    }
}

/// Event objects shortened to their number so transcripts stay readable.
pub(crate) fn abbreviate(frame: &str) -> String {
    if let Ok(RelayMessage::Event { sub, event }) = RelayMessage::decode(frame, DEFAULT_MAX_FRAME) {
        return format!(
            "[\"EVENT\",\"{sub}\",{} t={}]",
            short_id(&event.id().to_string()),
            event.created_at()
        );
    }
    if let Ok(ClientMessage::Event { event }) = ClientMessage::decode(frame, DEFAULT_MAX_FRAME) {
        let id = serde_json::from_str::<serde_json::Value>(event.get())
            .ok()
            .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(short_id))
            .unwrap_or_default();
        return format!("[\"EVENT\",{id}]");
    }
    if let Ok(ClientMessage::Auth { .. }) = ClientMessage::decode(frame, DEFAULT_MAX_FRAME) {
        return "[\"AUTH\",<signed 22242>]".to_owned();
    }
    frame.to_owned()
}

fn short_id(hex: &str) -> String {
    let trimmed = hex.trim_start_matches('0');
    format!("ev#{}", if trimmed.is_empty() { "0" } else { trimmed })
}

/// Whether an action is the relay's or the network's, which go on while the client is dead.
fn is_relay_side(action: &Action) -> bool {
    matches!(
        action,
        Action::RelayUp
            | Action::RelayDown
            | Action::Store(_)
            | Action::RelayFrame(_)
            | Action::Relay(_)
    )
}

net::simulator_accessors!(Sim, Action);
