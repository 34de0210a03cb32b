//! `RelayModel`: a sans-IO Nostr relay with the behaviours real relays show — REQ budgets
//! refused with `rate-limited: ... retry in Ns`, subscription caps (CLOSED or NOTICE-only),
//! NIP-42, scripted refusals, silence — driven by tether-testkit's deterministic `Sim` or served
//! over a real socket by `server::TestRelay` (feature `server`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde_json::{Map, Value};
use tether_core::nostr::message::{
    ClientMessage, EventId, RawEvent, RelayMessage, DEFAULT_MAX_FRAME,
};
use tether_core::Instant;

/// One stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Sequence number; the id is this number in 64 hex digits.
    pub n: u64,
    /// `created_at`.
    pub created_at: u64,
    /// `kind`.
    pub kind: u64,
    /// The event JSON.
    pub json: String,
}

impl StoredEvent {
    /// A plausible (unsigned) kind-`kind` event numbered `n`.
    pub fn new(n: u64, created_at: u64, kind: u64) -> Self {
        let json = format!(
            r#"{{"id":"{n:064x}","pubkey":"{:064x}","created_at":{created_at},"kind":{kind},"tags":[],"content":"event {n}","sig":"{:0128x}"}}"#,
            n % 7,
            n
        );
        StoredEvent {
            n,
            created_at,
            kind,
            json,
        }
    }

    /// The event id.
    pub fn id(&self) -> EventId {
        EventId::from_hex(&format!("{:064x}", self.n)).unwrap_or(EventId([0; 32]))
    }
}

/// How a subscription cap is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitStyle {
    /// `CLOSED` with `error: too many subscriptions`.
    Closed,
    /// nostr-rs-relay's NOTICE, without a subscription id.
    Notice,
}

/// A REQ budget: at most `max` REQs per `window`, refused with an honest hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqBudget {
    /// REQs allowed per window.
    pub max: usize,
    /// The sliding window.
    pub window: Duration,
    /// Whether refusals carry `retry in Ns`.
    pub hint: bool,
}

/// The relay's behaviour; every field is public so tests and scripts can change it.
#[derive(Clone, Debug, Default)]
pub struct RelayModel {
    /// Stored events, oldest first.
    pub events: Vec<StoredEvent>,
    /// REQ rate limit.
    pub budget: Option<ReqBudget>,
    /// Subscription cap per connection.
    pub max_subs: Option<(usize, LimitStyle)>,
    /// The text the cap is refused with, in the frame of its [`LimitStyle`], instead of
    /// that style's default (another relay's dialect).
    pub cap_text: Option<String>,
    /// The NIP-11 document this relay serves (its JSON), if any; the Sim does not fetch
    /// it, `TestRelay` serves it to a GET with `Accept: application/nostr+json`.
    pub info_document: Option<String>,
    /// Whether REQs and EVENTs need NIP-42 auth first.
    pub auth_required: bool,
    /// The next REQs are answered with these CLOSED messages, one each, before anything else.
    pub scripted_closed: VecDeque<String>,
    /// Refuse every REQ with this CLOSED message (after the scripted ones).
    pub refuse_all: Option<String>,
    /// The next EVENTs are answered with these `(accepted, message)` OKs.
    pub scripted_ok: VecDeque<(bool, String)>,
    /// After every EOSE, close the subscription with this message (a hostile relay that
    /// keeps resetting a naive client's retry count).
    pub close_after_eose: Option<String>,
    /// Never answer REQs (no events, EOSE or CLOSED): the stalled relay.
    pub silent_reqs: bool,
    /// Whether pings are answered.
    pub ignore_pings: bool,
    /// Accepting connections.
    pub down: bool,
    /// Close every connection this long after accepting it (accept-then-drop).
    pub drop_after: Option<Duration>,
    conns: BTreeMap<u64, Conn>,
    req_times: VecDeque<Instant>,
    challenges: u64,
    /// Every REQ received: (time, connection, wire id).
    pub reqs: Vec<(Instant, u64, String)>,
}

#[derive(Clone, Debug, Default)]
struct Conn {
    subs: BTreeMap<String, Vec<Map<String, Value>>>,
    challenge: String,
    authed: bool,
}

impl RelayModel {
    /// A relay with `n` stored kind-1 events, one per second from `created_at` 1_000_000.
    pub fn with_events(n: u64) -> Self {
        RelayModel {
            events: (1..=n)
                .map(|i| StoredEvent::new(i, 1_000_000 + i, 1))
                .collect(),
            ..RelayModel::default()
        }
    }

    /// A connection was accepted; returns the greeting frames.
    pub fn accept(&mut self, conn: u64) -> Vec<String> {
        self.challenges += 1;
        let challenge = format!("challenge-{}", self.challenges);
        let greeting = if self.auth_required {
            vec![RelayMessage::Auth {
                challenge: challenge.clone().into(),
            }
            .encode()]
        } else {
            Vec::new()
        };
        self.conns.insert(
            conn,
            Conn {
                challenge,
                ..Conn::default()
            },
        );
        greeting
    }

    /// A connection went away.
    pub fn drop_conn(&mut self, conn: u64) {
        self.conns.remove(&conn);
    }

    /// Subscriptions open on `conn`.
    pub fn open_subs(&self, conn: u64) -> usize {
        self.conns.get(&conn).map_or(0, |c| c.subs.len())
    }

    /// The current challenge on `conn`.
    pub fn challenge(&self, conn: u64) -> Option<&str> {
        self.conns.get(&conn).map(|c| c.challenge.as_str())
    }

    /// A client frame on `conn` at `now`; returns the relay's answers in order.
    pub fn handle(&mut self, now: Instant, conn: u64, text: &str) -> Vec<String> {
        let Ok(msg) = ClientMessage::decode(text, DEFAULT_MAX_FRAME) else {
            return vec![RelayMessage::Notice {
                message: "error: could not parse".into(),
            }
            .encode()];
        };
        match msg {
            ClientMessage::Req { sub, filters } => {
                let filters = filters
                    .iter()
                    .filter_map(|f| serde_json::from_str(f.get()).ok())
                    .collect();
                self.req(now, conn, &sub, filters)
            }
            ClientMessage::Close { sub } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.subs.remove(&*sub);
                }
                Vec::new()
            }
            ClientMessage::Event { event } => self.publish(conn, event.get()),
            ClientMessage::Auth { event } => self.auth(conn, event.get()),
            ClientMessage::NegOpen { .. }
            | ClientMessage::NegMsg { .. }
            | ClientMessage::NegClose { .. } => vec![RelayMessage::Notice {
                message: "could not parse command".into(),
            }
            .encode()],
            ClientMessage::Count { sub, .. } => {
                vec![RelayMessage::Closed {
                    sub,
                    message: "unsupported: COUNT".into(),
                }
                .encode()]
            }
        }
    }

    /// Store an event and deliver it to every matching live subscription; returns
    /// `(connection, frame)` pairs to send.
    pub fn store(&mut self, event: StoredEvent) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        for (&conn, c) in &self.conns {
            for (sub, filters) in &c.subs {
                if filters.iter().any(|f| matches(f, &event)) {
                    out.push((conn, event_frame(sub, &event)));
                }
            }
        }
        self.events.push(event);
        out
    }

    fn req(
        &mut self,
        now: Instant,
        conn: u64,
        sub: &str,
        filters: Vec<Map<String, Value>>,
    ) -> Vec<String> {
        self.reqs.push((now, conn, sub.to_owned()));
        let closed = |message: String| {
            vec![RelayMessage::Closed {
                sub: sub.into(),
                message: message.into(),
            }
            .encode()]
        };
        if let Some(message) = self
            .scripted_closed
            .pop_front()
            .or_else(|| self.refuse_all.clone())
        {
            return closed(message);
        }
        let Some(authed) = self.conns.get(&conn).map(|c| c.authed) else {
            return Vec::new();
        };
        if self.auth_required && !authed {
            return closed("auth-required: this relay only serves authenticated users".into());
        }
        if let Some(refusal) = self.spend_budget(now) {
            return closed(refusal);
        }
        let Some(c) = self.conns.get(&conn) else {
            return Vec::new();
        };
        if let Some((max, style)) = self.max_subs {
            if c.subs.len() >= max && !c.subs.contains_key(sub) {
                let text = self.cap_text.clone();
                return match style {
                    LimitStyle::Closed => {
                        closed(text.unwrap_or_else(|| "error: too many subscriptions".into()))
                    }
                    LimitStyle::Notice => vec![RelayMessage::Notice {
                        message: text
                            .unwrap_or_else(|| {
                                "Subscription error: Maximum concurrent subscription count \
                                 reached"
                                    .into()
                            })
                            .into(),
                    }
                    .encode()],
                };
            }
        }
        if self.silent_reqs {
            return Vec::new();
        }
        let mut out: Vec<String> = self
            .events
            .iter()
            .filter(|e| filters.iter().any(|f| matches(f, e)))
            .map(|e| event_frame(sub, e))
            .collect();
        out.push(RelayMessage::Eose { sub: sub.into() }.encode());
        if let Some(message) = &self.close_after_eose {
            out.push(
                RelayMessage::Closed {
                    sub: sub.into(),
                    message: message.clone().into(),
                }
                .encode(),
            );
            return out;
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.subs.insert(sub.to_owned(), filters);
        }
        out
    }

    fn spend_budget(&mut self, now: Instant) -> Option<String> {
        let budget = self.budget?;
        while self
            .req_times
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= budget.window)
        {
            self.req_times.pop_front();
        }
        if self.req_times.len() < budget.max {
            self.req_times.push_back(now);
            return None;
        }
        let oldest = self.req_times.front().copied().unwrap_or(now);
        let wait = budget
            .window
            .saturating_sub(now.saturating_duration_since(oldest));
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Some(if budget.hint {
            format!("rate-limited: too many REQs, retry in {secs}s")
        } else {
            "rate-limited: slow down".to_owned()
        })
    }

    fn publish(&mut self, conn: u64, json: &str) -> Vec<String> {
        let Ok(event) = RawEvent::parse(json) else {
            return vec![RelayMessage::Notice {
                message: "invalid: not an event".into(),
            }
            .encode()];
        };
        let ok = |accepted: bool, message: String| {
            vec![RelayMessage::Ok {
                event_id: event.id(),
                accepted,
                message: message.into(),
            }
            .encode()]
        };
        if let Some((accepted, message)) = self.scripted_ok.pop_front() {
            return ok(accepted, message);
        }
        if self.auth_required && !self.conns.get(&conn).is_some_and(|c| c.authed) {
            return ok(false, "auth-required: publishing needs auth".into());
        }
        ok(true, String::new())
    }

    fn auth(&mut self, conn: u64, json: &str) -> Vec<String> {
        let Ok(event) = RawEvent::parse(json) else {
            return Vec::new();
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return Vec::new();
        };
        let answers_challenge = json.contains(&format!("[\"challenge\",\"{}\"]", c.challenge));
        c.authed = answers_challenge;
        let message = if answers_challenge {
            ""
        } else {
            "auth-required: wrong challenge"
        };
        vec![RelayMessage::Ok {
            event_id: event.id(),
            accepted: answers_challenge,
            message: message.into(),
        }
        .encode()]
    }
}

/// A fake signed NIP-42 AUTH event (kind 22242) for `challenge`, numbered `n`.
pub fn auth_event(n: u64, challenge: &str) -> String {
    format!(
        r#"{{"id":"{:064x}","pubkey":"{:064x}","created_at":1700000000,"kind":22242,"tags":[["relay","ws://sim"],["challenge","{challenge}"]],"content":"","sig":"{:0128x}"}}"#,
        0xa000_0000 + n,
        1,
        n
    )
}

fn event_frame(sub: &str, e: &StoredEvent) -> String {
    format!(
        r#"["EVENT",{},{}]"#,
        serde_json::to_string(sub).unwrap_or_default(),
        e.json
    )
}

fn matches(filter: &Map<String, Value>, e: &StoredEvent) -> bool {
    let since_ok = filter
        .get("since")
        .and_then(Value::as_u64)
        .is_none_or(|s| e.created_at >= s);
    let kinds_ok = filter
        .get("kinds")
        .and_then(Value::as_array)
        .is_none_or(|ks| ks.iter().any(|k| k.as_u64() == Some(e.kind)));
    since_ok && kinds_ok
}
