//! `Sim`: a [`RelaySession`] and a [`RelayModel`] joined by a simulated network, always
//! advanced to the earliest deadline of either side (quinn's `Pair`, str0m's `progress`).
//! No sleeps, no real time: ten simulated minutes take milliseconds, and the same seed gives
//! the same transcript.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::link::{Epoch, LinkState, Liveness, SocketLoss};
use tether_core::nostr::message::{ClientMessage, RawEvent, RelayMessage, DEFAULT_MAX_FRAME};
use tether_core::nostr::{
    Carries, Event, Filter, Priority, RelayConfig, RelayInfo, RelaySession, SubState,
    SubscriptionId, Transmit,
};
use tether_core::Instant;

use crate::invariants::Invariants;
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
}

#[derive(Clone, Debug)]
enum Item {
    Script(Action),
    /// The relay accepts connection `conn` (or refuses it if down).
    Accept(u64),
    ToSession(u64, Input),
    ToRelay(u64, String),
}

#[derive(Clone, Debug)]
enum Input {
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
    /// One-way network latency.
    pub latency: Duration,
    /// Answer every AUTH challenge automatically (the app's signer).
    pub auto_auth: bool,
    /// Check invariants after every step (panics with the transcript on a violation).
    pub check: bool,
    /// Keep the whole transcript (default); when `false` only a tail is kept, for long soaks.
    pub keep_transcript: bool,
    /// Keep no transcript and no [`Sim::sent`] log at all: the fuzz target, which replays a
    /// failing input with the transcript on to show it (a run is deterministic).
    pub quiet: bool,
    start: Instant,
    now: Instant,
    seq: u64,
    queue: BTreeMap<(Instant, u64), Item>,
    /// The connection the relay and session share: the session's socket epoch.
    conn: Option<u64>,
    /// The connection the relay accepted last: it can only send on that one.
    accepted: Option<u64>,
    transcript: String,
    /// Every event the application heard, with its time.
    pub events: Vec<(Instant, Event)>,
    /// Every frame the session sent, with its time and what the session said it carries
    /// (empty when [`Sim::quiet`]).
    pub sent: Vec<(Instant, Carries, String)>,
    /// The invariant checker's state.
    pub invariants: Invariants,
    auths: u64,
}

impl Sim {
    /// A simulator at time zero with 10 ms latency.
    pub fn new(config: RelayConfig, seed: u64, relay: RelayModel) -> Self {
        let invariants = Invariants::new(&config);
        let mut session = RelaySession::new(config, seed);
        session.set_wall_clock(Instant::ZERO, UNIX_START);
        Sim {
            session,
            relay,
            latency: Duration::from_millis(10),
            auto_auth: true,
            check: true,
            keep_transcript: true,
            quiet: false,
            start: Instant::ZERO,
            now: Instant::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            conn: None,
            accepted: None,
            transcript: String::new(),
            events: Vec::new(),
            sent: Vec::new(),
            invariants,
            auths: 0,
        }
    }

    /// Schedule `action` at `at` after the start.
    pub fn at(&mut self, at: Duration, action: Action) -> &mut Self {
        self.push(self.start + at, Item::Script(action));
        self
    }

    /// Schedule `action` now.
    pub fn act(&mut self, action: Action) -> &mut Self {
        self.push(self.now, Item::Script(action));
        self.run_for(Duration::ZERO);
        self
    }

    /// The current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// The transcript so far.
    pub fn transcript(&self) -> &str {
        &self.transcript
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

    /// The connection the relay and session share, if any.
    pub fn conn(&self) -> Option<u64> {
        self.conn
    }

    /// Run until `d` after the current time, processing everything due on the way.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.step(end) {}
        self.now = self.now.max(end);
    }

    /// Run until `d` after the current time, or until the run has settled
    /// ([`Sim::is_settled`]): from then on only pings and pongs would happen, which change
    /// nothing the invariants look at. Returns whether it settled before `d` ran out.
    pub fn run_until_settled(&mut self, d: Duration) -> bool {
        let end = self.now + d;
        loop {
            if self.is_settled() {
                return true;
            }
            if !self.step(end) {
                break;
            }
        }
        self.now = self.now.max(end);
        false
    }

    /// Whether nothing is pending but the socket's keepalive: no script item, frame or
    /// socket event in flight (a pong at most), no output queued, no subscription or
    /// publish waiting on a timer, nothing the send queue could send; and either no socket
    /// and nothing scheduled at all, or an open socket whose pings the relay answers. From
    /// such a state the only future is ping, pong, ping, ...: the state the invariants see
    /// does not change again.
    pub fn is_settled(&self) -> bool {
        let s = &self.session;
        if s.has_output()
            || !self
                .queue
                .values()
                .all(|item| matches!(item, Item::ToSession(_, Input::Pong)))
        {
            return false;
        }
        match s.link().state() {
            LinkState::Idle => s.poll_timeout().is_none(),
            LinkState::Open { epoch, .. } => {
                let slot = s
                    .subscription_limit()
                    .is_none_or(|max| s.open_subscriptions() < max);
                let answered = match s.link().config().liveness {
                    Liveness::Ping { pong_timeout, .. } => self.latency * 2 < pong_timeout,
                    Liveness::Off => true,
                    Liveness::Idle { .. } => false,
                };
                self.conn == Some(epoch.0)
                    && answered
                    && !self.relay.ignore_pings
                    && s.outbox_len() == 0
                    && s.subscriptions()
                        .iter()
                        .all(|v| v.timer.is_none() && !(slot && v.state == SubState::Queued))
            }
            LinkState::Connecting { .. } | LinkState::Waiting { .. } => false,
        }
    }

    /// Run the invariants' whole sweep now, whatever [`Sim::check`] says: the end of a fuzz
    /// input or test.
    ///
    /// # Panics
    /// On a violation, with the transcript's tail.
    pub fn check_all(&mut self) {
        self.invariants.sweep(&self.session, &self.transcript);
    }

    /// Process the earliest thing due at or before `end`. Returns `false` when nothing is.
    pub fn step(&mut self, end: Instant) -> bool {
        let next_item = self.queue.first_key_value().map(|(&(t, _), _)| t);
        let next_timeout = self.session.poll_timeout();
        let Some(t) = [next_item, next_timeout].into_iter().flatten().min() else {
            return false;
        };
        if t > end {
            return false;
        }
        self.now = self.now.max(t);
        if next_item.is_some_and(|i| i <= t) {
            let Some((_, item)) = self.queue.pop_first() else {
                return false;
            };
            if !self.process(item) {
                // The session saw nothing (the relay model answered, a connection was
                // accepted, an input for a socket that is gone): its outputs are still empty
                // and every invariant reads the state the last check passed.
                self.invariants.after_action();
                return true;
            }
        } else {
            self.session.handle_timeout(self.now);
            if self.check {
                self.invariants
                    .after_timeout(self.now, &self.session, &self.transcript);
            }
        }
        self.drain();
        true
    }

    /// Process one queued item; whether it reached the session.
    fn process(&mut self, item: Item) -> bool {
        match item {
            Item::Script(action) => self.script(action),
            Item::Accept(conn) => {
                if self.relay.down || self.conn != Some(conn) {
                    self.line("io", "refused");
                    self.push(
                        self.now + self.latency,
                        Item::ToSession(conn, Input::Close(SocketLoss::ConnectionRefused)),
                    );
                    return false;
                }
                self.accepted = Some(conn);
                let greeting = self.relay.accept(conn);
                self.push(self.now + self.latency, Item::ToSession(conn, Input::Open));
                for frame in greeting {
                    self.push(
                        self.now + self.latency,
                        Item::ToSession(conn, Input::Frame(frame)),
                    );
                }
                if let Some(d) = self.relay.drop_after {
                    self.push(
                        self.now + self.latency + d,
                        Item::Script(Action::DropSocket),
                    );
                }
                false
            }
            Item::ToRelay(conn, text) => {
                if self.conn != Some(conn) {
                    return false;
                }
                for frame in self.relay.handle(self.now, conn, &text) {
                    self.push(
                        self.now + self.latency,
                        Item::ToSession(conn, Input::Frame(frame)),
                    );
                }
                false
            }
            Item::ToSession(conn, input) => {
                if self.conn != Some(conn) {
                    return false;
                }
                self.deliver(Epoch(conn), input);
                true
            }
        }
    }

    fn deliver(&mut self, epoch: Epoch, input: Input) {
        let now = self.now;
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

    /// The network or the relay dropped the shared connection.
    fn drop_conn(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        self.relay.drop_conn(conn);
        self.line("io", "dropped");
        let result = self
            .session
            .handle_close(self.now, Epoch(conn), SocketLoss::NetworkError);
        if let Err(e) = result {
            panic!("socket misuse by the Sim: {e}\n{}", self.transcript);
        }
    }

    /// Run one script action; whether it reached the session.
    fn script(&mut self, action: Action) -> bool {
        let now = self.now;
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
        self.invariants.before_action(&action);
        let reaches = match &action {
            Action::RelayUp | Action::Store(_) | Action::RelayFrame(_) | Action::Relay(_) => false,
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
                    self.push(
                        now + self.latency,
                        Item::ToSession(conn, Input::Frame(frame)),
                    );
                }
            }
            Action::RelayFrame(frame) => {
                // A relay can only write on a connection it accepted.
                if let Some(conn) = self.conn.filter(|&c| self.accepted == Some(c)) {
                    self.push(
                        now + self.latency,
                        Item::ToSession(conn, Input::Frame(frame)),
                    );
                }
            }
            Action::Relay(change) => change(&mut self.relay),
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
            self.invariants
                .after_step(self.now, &self.session, &self.events, &self.transcript);
        }
        // What an application call caused is foreground until it has been drained.
        self.invariants.after_action();
    }

    fn transmit(&mut self, t: Transmit) {
        let now = self.now;
        match t {
            Transmit::Open { epoch } => {
                self.line("tx", "Open");
                self.invariants.transmitted("Open", &self.transcript);
                if let Some(old) = self.conn.take() {
                    self.relay.drop_conn(old);
                }
                let conn = epoch.0;
                self.conn = Some(conn);
                self.push(now + self.latency, Item::Accept(conn));
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
                if let (Some(conn), false) = (self.conn, self.relay.ignore_pings) {
                    self.push(now + self.latency * 2, Item::ToSession(conn, Input::Pong));
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
                    self.push(now + self.latency, Item::ToRelay(conn, text));
                }
            }
        }
    }

    fn event(&mut self, e: Event) {
        let now = self.now;
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

    fn push(&mut self, at: Instant, item: Item) {
        self.seq += 1;
        self.queue.insert((at, self.seq), item);
    }

    fn line(&mut self, who: &str, what: &str) {
        if self.quiet {
            return;
        }
        let ms = (self.now - self.start).as_millis();
        let _ = writeln!(self.transcript, "{ms:>8}ms {who:<3} {what}");
        if !self.keep_transcript && self.transcript.len() > 64 * 1024 {
            // Keep only a tail, enough for an invariant failure to show what led to it.
            let cut = self.transcript.len() - 8 * 1024;
            let cut = self.transcript[cut..]
                .find('\n')
                .map_or(cut, |i| cut + i + 1);
            self.transcript.drain(..cut);
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
