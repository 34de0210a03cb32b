//! `RelayModel`: a sans-IO Nostr relay with the behaviours real relays show — stored answers
//! newest first and capped per filter, REQ budgets refused with `rate-limited: ... retry in
//! Ns`, subscription caps (CLOSED or NOTICE-only), a REQ on an open id replacing it, NIP-42,
//! NIP-77 negentropy (or its absence), scripted refusals, silence — driven by
//! tether-testkit's deterministic `Sim` or served over a real socket by `server::TestRelay`
//! (feature `server`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
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

    // Tests also store genuinely signed events whose id is not `n`; filters and negentropy
    // must see the id a client sees on the wire, so it is read from the JSON.
    fn wire_id(&self) -> EventId {
        RawEvent::parse(&self.json).map_or_else(|_| self.id(), |e| e.id())
    }
}

/// The order a REQ's stored events are sent in.
///
/// Both orders break `created_at` ties by id ascending (bytes, i.e. hex order), so the
/// answer is deterministic whatever order the events were stored in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AnswerOrder {
    /// `created_at` descending, as strfry, nostr-rs-relay and nostr-relay-builder answer.
    #[default]
    NewestFirst,
    /// `created_at` ascending, the storage order the model used to answer in: a client must
    /// not depend on the order, which a property test over both orders can check.
    OldestFirst,
}

/// Whether and how the relay speaks NIP-77 negentropy (`NEG-OPEN`, `NEG-MSG`, `NEG-CLOSE`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Nip77 {
    /// Reconciles with the `negentropy` crate as nostr-relay-builder 0.44 does (frame limit
    /// 60 000, one session per connection and id, a NEG-OPEN on an open id replacing it,
    /// no NIP-42 or subscription cap on NEG frames). Its item set is every stored event the
    /// NEG-OPEN filter matches on `ids`, `kinds`, `since` and `until`, with neither the
    /// filter's `limit` nor [`RelayModel::max_limit`] applied: a set reconciliation over a
    /// truncated set would report the cut events as missing from the relay.
    Supported,
    /// Does not know NEG frames, like nostr-rs-relay 0.8.12: every `NEG-*` frame is
    /// answered `["NOTICE","could not parse command"]`. `NEG-OPEN` and `NEG-MSG` fit none
    /// of its message types and hit the parse-error arm (src/server.rs:1399); `NEG-CLOSE`
    /// has a CLOSE's shape, parses as a `CloseCmd`, is refused by `From<CloseCmd>`
    /// (src/close.rs:26) and gets the same NOTICE (src/server.rs:1386).
    #[default]
    Unsupported,
    /// Answers every `NEG-OPEN` with `["NEG-ERR", sub, <this text>]`.
    Refuse(String),
    /// Never answers NEG frames: a client must time the reconciliation out.
    Silent,
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
    /// Stored events, in the order they were stored; a REQ's answer is sorted per
    /// [`RelayModel::order`] whatever this order is.
    pub events: Vec<StoredEvent>,
    /// The order stored answers are sent in.
    pub order: AnswerOrder,
    /// The most stored events one filter is answered with (the newest kept), whether or not
    /// the filter has a `limit`: deployed relays cap silently (strfry at 500).
    pub max_limit: Option<usize>,
    /// Whether and how NIP-77 negentropy is spoken.
    pub nip77: Nip77,
    /// The most events one NIP-77 session may hold: a `NEG-OPEN` whose filter matches more
    /// is refused as strfry refuses it past `relay.negentropy.maxSyncEvents`
    /// (`["NEG-ERR", sub, "blocked: too many query results", max]`, RelayNegentropy.cpp):
    /// about that filter, not the relay's NIP-77.
    pub neg_max_items: Option<usize>,
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
    /// With `down`: a connection is reset (a TCP RST from a dead host behind a balancer)
    /// rather than refused.
    pub resets: bool,
    /// Close every connection this long after accepting it (accept-then-drop).
    pub drop_after: Option<Duration>,
    /// Ignore tag filters (`#p`, `#e`, ...): answer as if the filter had none, as some
    /// deployed relays do with tags they do not index.
    pub ignores_tags: bool,
    conns: BTreeMap<u64, Conn>,
    req_times: VecDeque<Instant>,
    challenges: u64,
    /// Every REQ received: (time, connection, wire id).
    pub reqs: Vec<(Instant, u64, String)>,
    /// Every well-formed NEG-OPEN received, whatever [`RelayModel::nip77`] answers it with:
    /// (time, connection, wire id).
    pub neg_opens: Vec<(Instant, u64, String)>,
}

#[derive(Clone, Debug, Default)]
struct Conn {
    subs: BTreeMap<String, Vec<Map<String, Value>>>,
    // The responder's `Negentropy` keeps nothing between messages but its storage (each
    // `reconcile` starts from scratch), and it is not `Clone` while the model is, so a
    // session is its sealed storage and each message borrows it.
    negs: BTreeMap<String, NegentropyStorageVector>,
    challenge: String,
    authed: bool,
}

/// A NIP-77 frame from a client, which the core's `ClientMessage` does not know.
enum NegFrame {
    Open {
        sub: String,
        filter: Map<String, Value>,
        hex: String,
    },
    Msg {
        sub: String,
        hex: String,
    },
    Close {
        sub: String,
    },
    /// A `NEG-*` frame of the wrong shape, with its sub id if it has one.
    Malformed(Option<String>),
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
        if let Some(frame) = parse_neg(text) {
            return self.neg(now, conn, frame);
        }
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
                self.close_sub(conn, &sub);
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
    /// `(connection, frame)` pairs to send. A subscription matches if one of its filters
    /// does on `ids`, `kinds`, `since` and `until`; `limit` only bounds the stored answer.
    pub fn store(&mut self, event: StoredEvent) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        for (&conn, c) in &self.conns {
            for (sub, filters) in &c.subs {
                if filters.iter().any(|f| self.matches(f, &event)) {
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
        // A CLOSED ends the id on the relay too, even one this REQ would have replaced, or a
        // client told "closed" would still get the old filters' live events.
        let closed = |model: &mut Self, message: String| {
            model.close_sub(conn, sub);
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
            return closed(self, message);
        }
        let Some(authed) = self.conns.get(&conn).map(|c| c.authed) else {
            return Vec::new();
        };
        if self.auth_required && !authed {
            return closed(
                self,
                "auth-required: this relay only serves authenticated users".into(),
            );
        }
        if let Some(refusal) = self.spend_budget(now) {
            return closed(self, refusal);
        }
        let Some(c) = self.conns.get(&conn) else {
            return Vec::new();
        };
        // A REQ on an open id replaces it (nostr-rs-relay's `Conn::subscribe`, strfry), so
        // it takes no second slot.
        if let Some((max, style)) = self.max_subs {
            if c.subs.len() >= max && !c.subs.contains_key(sub) {
                let text = self.cap_text.clone();
                return match style {
                    LimitStyle::Closed => closed(
                        self,
                        text.unwrap_or_else(|| "error: too many subscriptions".into()),
                    ),
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
            .stored_answer(&filters)
            .into_iter()
            .map(|e| event_frame(sub, e))
            .collect();
        out.push(RelayMessage::Eose { sub: sub.into() }.encode());
        if let Some(message) = &self.close_after_eose {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.subs.remove(sub);
            }
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

    fn close_sub(&mut self, conn: u64, sub: &str) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.subs.remove(sub);
        }
    }

    /// Each filter's newest `min(limit, max_limit)` matches, their union without
    /// duplicates, in [`RelayModel::order`].
    fn stored_answer(&self, filters: &[Map<String, Value>]) -> Vec<&StoredEvent> {
        let mut picked = BTreeSet::new();
        for filter in filters {
            let mut hits: Vec<usize> = (0..self.events.len())
                .filter(|&i| self.matches(filter, &self.events[i]))
                .collect();
            let limit = filter
                .get("limit")
                .and_then(Value::as_u64)
                .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
            let cap = match (limit, self.max_limit) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(cap) = cap {
                if hits.len() > cap {
                    hits.sort_by(|&a, &b| newest_first(&self.events[a], &self.events[b]));
                    hits.truncate(cap);
                }
            }
            picked.extend(hits);
        }
        let mut answer: Vec<&StoredEvent> = picked.into_iter().map(|i| &self.events[i]).collect();
        answer.sort_by(|a, b| match self.order {
            AnswerOrder::NewestFirst => newest_first(a, b),
            AnswerOrder::OldestFirst => a
                .created_at
                .cmp(&b.created_at)
                .then_with(|| a.wire_id().cmp(&b.wire_id())),
        });
        answer
    }

    fn neg(&mut self, now: Instant, conn: u64, frame: NegFrame) -> Vec<String> {
        if let NegFrame::Open { sub, .. } = &frame {
            self.neg_opens.push((now, conn, sub.clone()));
        }
        match &self.nip77 {
            Nip77::Supported => {}
            Nip77::Unsupported => {
                return vec![RelayMessage::Notice {
                    message: "could not parse command".into(),
                }
                .encode()]
            }
            Nip77::Silent => return Vec::new(),
            Nip77::Refuse(text) => {
                return match frame {
                    NegFrame::Open { sub, .. } => vec![neg_err(&sub, text)],
                    NegFrame::Msg { sub, .. } => vec![neg_err(&sub, UNKNOWN_NEG)],
                    NegFrame::Close { .. } | NegFrame::Malformed(_) => Vec::new(),
                };
            }
        }
        if !self.conns.contains_key(&conn) {
            return Vec::new();
        }
        match frame {
            NegFrame::Open { sub, filter, hex } => {
                let matched = self
                    .events
                    .iter()
                    .filter(|e| self.matches(&filter, e))
                    .count();
                if let Some(max) = self.neg_max_items.filter(|&max| matched > max) {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.negs.remove(&sub);
                    }
                    return vec![format!(
                        r#"["NEG-ERR",{},"blocked: too many query results",{max}]"#,
                        json_string(&sub)
                    )];
                }
                let mut storage = NegentropyStorageVector::with_capacity(self.events.len());
                for e in self.events.iter().filter(|e| self.matches(&filter, e)) {
                    // Cannot fail: the storage is not sealed yet.
                    let _ = storage.insert(e.created_at, Id::from_byte_array(e.wire_id().0));
                }
                let _ = storage.seal();
                self.neg_answer(conn, sub, storage, &hex)
            }
            NegFrame::Msg { sub, hex } => {
                let Some(storage) = self.conns.get_mut(&conn).and_then(|c| c.negs.remove(&sub))
                else {
                    return vec![neg_err(&sub, UNKNOWN_NEG)];
                };
                self.neg_answer(conn, sub, storage, &hex)
            }
            NegFrame::Close { sub } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.negs.remove(&sub);
                }
                Vec::new()
            }
            NegFrame::Malformed(Some(sub)) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.negs.remove(&sub);
                }
                vec![neg_err(&sub, "error: malformed NEG frame")]
            }
            NegFrame::Malformed(None) => vec![RelayMessage::Notice {
                message: "error: could not parse".into(),
            }
            .encode()],
        }
    }

    /// Reconciles `hex` against `storage`; the session stays open under `sub` only if that
    /// worked.
    fn neg_answer(
        &mut self,
        conn: u64,
        sub: String,
        storage: NegentropyStorageVector,
        hex: &str,
    ) -> Vec<String> {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Vec::new();
        };
        // An open with the same id replaces the old session, also when the new one fails.
        c.negs.remove(&sub);
        let Some(query) = hex_decode(hex) else {
            return vec![neg_err(&sub, "error: message is not hex")];
        };
        let reply = Negentropy::borrowed(&storage, NEG_FRAME_LIMIT)
            .and_then(|mut neg| neg.reconcile(&query));
        match reply {
            Ok(reply) => {
                let frame = format!(
                    r#"["NEG-MSG",{},"{}"]"#,
                    json_string(&sub),
                    hex_encode(&reply)
                );
                c.negs.insert(sub, storage);
                vec![frame]
            }
            Err(e) => vec![neg_err(&sub, &format!("error: {e}"))],
        }
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

/// nostr-relay-builder's frame size limit for its side of a reconciliation.
const NEG_FRAME_LIMIT: u64 = 60_000;

const UNKNOWN_NEG: &str = "closed: unknown subscription";

fn event_frame(sub: &str, e: &StoredEvent) -> String {
    format!(r#"["EVENT",{},{}]"#, json_string(sub), e.json)
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn neg_err(sub: &str, message: &str) -> String {
    format!(
        r#"["NEG-ERR",{},{}]"#,
        json_string(sub),
        json_string(message)
    )
}

fn newest_first(a: &StoredEvent, b: &StoredEvent) -> Ordering {
    b.created_at
        .cmp(&a.created_at)
        .then_with(|| a.wire_id().cmp(&b.wire_id()))
}

impl RelayModel {
    /// Whether `e` matches `filter`, as this relay applies filters.
    fn matches(&self, filter: &Map<String, Value>, e: &StoredEvent) -> bool {
        matches(filter, e) && matches_people(filter, e, self.ignores_tags)
    }
}

/// Whether `e` matches `filter`'s `authors` and single-letter tag filters (`#p`: a tag `p`
/// whose value is listed), as deployed relays apply them; with `ignore_tags`, tag filters
/// match everything. The event's JSON is read only when the filter has such a field.
fn matches_people(filter: &Map<String, Value>, e: &StoredEvent, ignore_tags: bool) -> bool {
    let people = |k: &String| k == "authors" || (k.len() == 2 && k.starts_with('#'));
    if !filter.keys().any(people) {
        return true;
    }
    let Ok(event) = serde_json::from_str::<Map<String, Value>>(&e.json) else {
        return false;
    };
    let listed = |want: &Value, have: Option<&str>| {
        want.as_array().is_some_and(|l| {
            l.iter()
                .any(|v| v.as_str().is_some_and(|v| Some(v) == have))
        })
    };
    filter.iter().all(|(key, want)| match key.as_str() {
        "authors" => listed(want, event.get("pubkey").and_then(Value::as_str)),
        tag if tag.len() == 2 && tag.starts_with('#') => {
            ignore_tags
                || event
                    .get("tags")
                    .and_then(Value::as_array)
                    .is_some_and(|tags| {
                        tags.iter().filter_map(Value::as_array).any(|t| {
                            t.first().and_then(Value::as_str) == Some(&tag[1..])
                                && listed(want, t.get(1).and_then(Value::as_str))
                        })
                    })
        }
        _ => true,
    })
}

/// Whether `e` matches `filter` on `ids`, `kinds`, `since` and `until` (inclusive bounds).
/// `limit` is not a match condition; `authors` and tags are matched by
/// [`matches_people`]. `ids` are full 64-hex ids: prefixes, which NIP-01 no longer allows,
/// match nothing.
fn matches(filter: &Map<String, Value>, e: &StoredEvent) -> bool {
    let since_ok = filter
        .get("since")
        .and_then(Value::as_u64)
        .is_none_or(|s| e.created_at >= s);
    let until_ok = filter
        .get("until")
        .and_then(Value::as_u64)
        .is_none_or(|u| e.created_at <= u);
    let kinds_ok = filter
        .get("kinds")
        .and_then(Value::as_array)
        .is_none_or(|ks| ks.iter().any(|k| k.as_u64() == Some(e.kind)));
    let ids_ok = filter
        .get("ids")
        .and_then(Value::as_array)
        .is_none_or(|ids| {
            let id = e.wire_id();
            ids.iter()
                .any(|i| i.as_str().and_then(EventId::from_hex) == Some(id))
        });
    since_ok && until_ok && kinds_ok && ids_ok
}

/// A `NEG-*` frame, or `None` for anything else (which goes to `ClientMessage::decode`).
fn parse_neg(text: &str) -> Option<NegFrame> {
    // Most frames are REQs and EVENTs: look at the command before parsing the whole frame.
    let head = text.trim_start().strip_prefix('[')?.trim_start();
    if !head.starts_with("\"NEG-") {
        return None;
    }
    let Ok(Value::Array(mut items)) = serde_json::from_str::<Value>(text) else {
        return Some(NegFrame::Malformed(None));
    };
    let sub = items.get(1).and_then(Value::as_str).map(str::to_owned);
    let (cmd, sub) = match (items.first().and_then(Value::as_str), sub) {
        (Some(cmd), Some(sub)) => (cmd.to_owned(), sub),
        (_, sub) => return Some(NegFrame::Malformed(sub)),
    };
    let hex_at =
        |items: &[Value], i: usize| items.get(i).and_then(Value::as_str).map(str::to_owned);
    Some(match (cmd.as_str(), items.len()) {
        ("NEG-OPEN", 4) => match (items[2].take(), hex_at(&items, 3)) {
            (Value::Object(filter), Some(hex)) => NegFrame::Open { sub, filter, hex },
            _ => NegFrame::Malformed(Some(sub)),
        },
        ("NEG-MSG", 3) => match hex_at(&items, 2) {
            Some(hex) => NegFrame::Msg { sub, hex },
            None => NegFrame::Malformed(Some(sub)),
        },
        ("NEG-CLOSE", 2) => NegFrame::Close { sub },
        _ => NegFrame::Malformed(Some(sub)),
    })
}

fn hex_encode(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn hex_decode(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    hex.as_bytes()
        .chunks_exact(2)
        .map(|pair| Some((nibble(pair[0])? << 4) | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Instant = Instant::ZERO;

    fn relay(model: RelayModel) -> RelayModel {
        let mut model = model;
        model.accept(1);
        model
    }

    fn hex_id(n: u64) -> String {
        format!("{n:064x}")
    }

    /// The `n` of every EVENT in `frames`, in order, and whether they end with one EOSE.
    fn answer(frames: &[String]) -> (Vec<u64>, bool) {
        let mut ns = Vec::new();
        let mut eose = false;
        for f in frames {
            let v: Value = serde_json::from_str(f).unwrap();
            match v[0].as_str().unwrap() {
                "EVENT" => {
                    assert!(!eose, "an EVENT after EOSE: {frames:?}");
                    let id = v[2]["id"].as_str().unwrap();
                    ns.push(u64::from_str_radix(id, 16).unwrap());
                }
                "EOSE" => eose = true,
                other => panic!("unexpected {other}: {frames:?}"),
            }
        }
        (ns, eose)
    }

    fn req(model: &mut RelayModel, sub: &str, filters: &str) -> (Vec<u64>, bool) {
        answer(&model.handle(T, 1, &format!(r#"["REQ","{sub}",{filters}]"#)))
    }

    #[test]
    fn stored_answers_come_newest_first_by_default() {
        let mut m = relay(RelayModel::with_events(5));
        assert_eq!(m.order, AnswerOrder::NewestFirst);
        assert_eq!(req(&mut m, "a", "{}"), (vec![5, 4, 3, 2, 1], true));
    }

    #[test]
    fn oldest_first_is_the_opposite_order() {
        let mut m = relay(RelayModel::with_events(5));
        m.order = AnswerOrder::OldestFirst;
        assert_eq!(req(&mut m, "a", "{}"), (vec![1, 2, 3, 4, 5], true));
    }

    #[test]
    fn order_does_not_depend_on_storage_order_and_ties_go_by_id_ascending() {
        let mut m = relay(RelayModel::default());
        m.events = vec![
            StoredEvent::new(3, 10, 1),
            StoredEvent::new(1, 20, 1),
            StoredEvent::new(4, 10, 1),
            StoredEvent::new(2, 10, 1),
        ];
        assert_eq!(req(&mut m, "a", "{}"), (vec![1, 2, 3, 4], true));
        m.order = AnswerOrder::OldestFirst;
        assert_eq!(req(&mut m, "b", "{}"), (vec![2, 3, 4, 1], true));
        // The newest of a tie kept by `limit` is the lowest id.
        m.order = AnswerOrder::NewestFirst;
        assert_eq!(req(&mut m, "c", r#"{"limit":2}"#), (vec![1, 2], true));
    }

    #[test]
    fn filters_match_on_ids_kinds_since_and_until() {
        let mut m = relay(RelayModel::default());
        m.events = (1..=6)
            .map(|n| StoredEvent::new(n, 100 + n, n % 2))
            .collect();
        let ids = format!(r#"{{"ids":["{}","{}"]}}"#, hex_id(2), hex_id(5));
        assert_eq!(req(&mut m, "ids", &ids), (vec![5, 2], true));
        // A prefix is not an id.
        let prefix = format!(r#"{{"ids":["{}"]}}"#, &hex_id(2)[..60]);
        assert_eq!(req(&mut m, "prefix", &prefix), (vec![], true));
        assert_eq!(
            req(&mut m, "kinds", r#"{"kinds":[0]}"#),
            (vec![6, 4, 2], true)
        );
        assert_eq!(
            req(&mut m, "since", r#"{"since":104}"#),
            (vec![6, 5, 4], true)
        );
        assert_eq!(req(&mut m, "until", r#"{"until":102}"#), (vec![2, 1], true));
        assert_eq!(
            req(&mut m, "all", r#"{"kinds":[1],"since":102,"until":105}"#),
            (vec![5, 3], true)
        );
    }

    #[test]
    fn ids_are_read_from_the_event_json() {
        let mut m = relay(RelayModel::default());
        let mut e = StoredEvent::new(1, 100, 1);
        e.json = e.json.replace(&hex_id(1), &hex_id(0xabc));
        m.events.push(e);
        let frames = m.handle(
            T,
            1,
            &format!(r#"["REQ","a",{{"ids":["{}"]}}]"#, hex_id(0xabc)),
        );
        assert_eq!(frames.len(), 2, "{frames:?}");
        let frames = m.handle(T, 1, &format!(r#"["REQ","b",{{"ids":["{}"]}}]"#, hex_id(1)));
        assert_eq!(answer(&frames), (vec![], true));
    }

    #[test]
    fn limit_keeps_the_newest_matches_per_filter_and_the_union_has_no_duplicates() {
        let mut m = relay(RelayModel::with_events(10));
        assert_eq!(req(&mut m, "a", r#"{"limit":3}"#), (vec![10, 9, 8], true));
        m.order = AnswerOrder::OldestFirst;
        assert_eq!(req(&mut m, "b", r#"{"limit":3}"#), (vec![8, 9, 10], true));
        m.order = AnswerOrder::NewestFirst;
        let two = r#"{"limit":2},{"until":1000009,"limit":3}"#;
        assert_eq!(req(&mut m, "c", two), (vec![10, 9, 8, 7], true));
        let overlap = r#"{"limit":3},{"since":1000008}"#;
        assert_eq!(req(&mut m, "d", overlap), (vec![10, 9, 8], true));
    }

    #[test]
    fn limit_zero_sends_no_stored_events_but_opens_the_subscription() {
        let mut m = relay(RelayModel::with_events(3));
        assert_eq!(req(&mut m, "a", r#"{"limit":0}"#), (vec![], true));
        assert_eq!(m.open_subs(1), 1);
        let live = m.store(StoredEvent::new(4, 1_000_004, 1));
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].0, 1);
        assert_eq!(answer(&[live[0].1.clone()]), (vec![4], false));
    }

    #[test]
    fn max_limit_caps_every_filter_with_or_without_a_limit() {
        let mut m = relay(RelayModel::with_events(10));
        m.max_limit = Some(2);
        assert_eq!(req(&mut m, "a", "{}"), (vec![10, 9], true));
        assert_eq!(req(&mut m, "b", r#"{"limit":5}"#), (vec![10, 9], true));
        assert_eq!(req(&mut m, "c", r#"{"limit":1}"#), (vec![10], true));
        let two = r#"{"kinds":[1]},{"until":1000005}"#;
        assert_eq!(req(&mut m, "d", two), (vec![10, 9, 5, 4], true));
    }

    #[test]
    fn live_events_match_on_since_and_until_but_not_limit() {
        let mut m = relay(RelayModel::default());
        req(&mut m, "window", r#"{"since":100,"until":200,"limit":1}"#);
        req(&mut m, "kind7", r#"{"kinds":[7]}"#);
        let subs = |live: Vec<(u64, String)>| -> Vec<String> {
            live.iter()
                .map(|(_, f)| {
                    let v: Value = serde_json::from_str(f).unwrap();
                    v[1].as_str().unwrap().to_owned()
                })
                .collect()
        };
        assert_eq!(
            subs(m.store(StoredEvent::new(1, 99, 1))),
            Vec::<String>::new()
        );
        assert_eq!(subs(m.store(StoredEvent::new(2, 100, 1))), ["window"]);
        assert_eq!(subs(m.store(StoredEvent::new(3, 150, 1))), ["window"]);
        assert_eq!(
            subs(m.store(StoredEvent::new(4, 201, 1))),
            Vec::<String>::new()
        );
        assert_eq!(
            subs(m.store(StoredEvent::new(5, 200, 7))),
            ["kind7", "window"]
        );
    }

    #[test]
    fn a_req_on_an_open_id_replaces_it_without_taking_a_second_slot() {
        let mut m = relay(RelayModel::default());
        m.max_subs = Some((1, LimitStyle::Closed));
        m.events = vec![StoredEvent::new(1, 10, 1), StoredEvent::new(2, 20, 2)];
        assert_eq!(req(&mut m, "a", r#"{"kinds":[1]}"#), (vec![1], true));
        assert_eq!(req(&mut m, "a", r#"{"kinds":[2]}"#), (vec![2], true));
        assert_eq!(m.open_subs(1), 1);
        assert_eq!(m.reqs.len(), 2);
        assert!(
            m.store(StoredEvent::new(3, 30, 1)).is_empty(),
            "old filters gone"
        );
        assert_eq!(m.store(StoredEvent::new(4, 40, 2)).len(), 1);
        // The cap still holds for a new id.
        let refused = m.handle(T, 1, r#"["REQ","b",{}]"#);
        assert_eq!(
            refused,
            [r#"["CLOSED","b","error: too many subscriptions"]"#]
        );
    }

    #[test]
    fn a_refused_replacement_closes_the_old_subscription() {
        let mut m = relay(RelayModel::default());
        req(&mut m, "a", "{}");
        m.scripted_closed
            .push_back("rate-limited: slow down".into());
        let refused = m.handle(T, 1, r#"["REQ","a",{}]"#);
        assert_eq!(refused, [r#"["CLOSED","a","rate-limited: slow down"]"#]);
        assert_eq!(m.open_subs(1), 0);
        assert!(m.store(StoredEvent::new(1, 1, 1)).is_empty());
    }

    fn neg_frame(frame: &str) -> (String, String, String) {
        let v: Value = serde_json::from_str(frame).unwrap();
        let s = |i: usize| v[i].as_str().unwrap_or_default().to_owned();
        (s(0), s(1), s(2))
    }

    /// A negentropy client holding `mine`, reconciling `filter` over sub `sub` until done;
    /// returns its (have, need) ids sorted and the rounds it took.
    fn reconcile(
        m: &mut RelayModel,
        sub: &str,
        filter: &str,
        mine: &[StoredEvent],
        frame_limit: u64,
    ) -> (Vec<EventId>, Vec<EventId>, usize) {
        let mut storage = NegentropyStorageVector::new();
        for e in mine {
            storage
                .insert(e.created_at, Id::from_byte_array(e.id().0))
                .unwrap();
        }
        storage.seal().unwrap();
        let mut client = Negentropy::owned(storage, frame_limit).unwrap();
        let open = hex_encode(&client.initiate().unwrap());
        let mut frames = m.handle(T, 1, &format!(r#"["NEG-OPEN","{sub}",{filter},"{open}"]"#));
        let (mut have, mut need) = (Vec::new(), Vec::new());
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert_eq!(frames.len(), 1, "{frames:?}");
            let (kind, answered, hex) = neg_frame(&frames[0]);
            assert_eq!((kind.as_str(), answered.as_str()), ("NEG-MSG", sub));
            let query = hex_decode(&hex).unwrap();
            match client
                .reconcile_with_ids(&query, &mut have, &mut need)
                .unwrap()
            {
                Some(next) => {
                    let next = hex_encode(&next);
                    frames = m.handle(T, 1, &format!(r#"["NEG-MSG","{sub}","{next}"]"#));
                }
                None => break,
            }
        }
        assert!(m
            .handle(T, 1, &format!(r#"["NEG-CLOSE","{sub}"]"#))
            .is_empty());
        let ids = |v: Vec<Id>| {
            let mut v: Vec<EventId> = v.into_iter().map(|i| EventId(i.to_bytes())).collect();
            v.sort();
            v
        };
        (ids(have), ids(need), rounds)
    }

    #[test]
    fn negentropy_finds_exactly_what_each_side_lacks() {
        let mut m = relay(RelayModel::with_events(50));
        m.nip77 = Nip77::Supported;
        let lacking = [7, 23, 41];
        let mut mine: Vec<StoredEvent> = (1..=50)
            .filter(|n| !lacking.contains(n))
            .map(|n| StoredEvent::new(n, 1_000_000 + n, 1))
            .collect();
        mine.push(StoredEvent::new(999, 1_000_025, 1));
        let (have, need, _) = reconcile(&mut m, "sync", "{}", &mine, 60_000);
        assert_eq!(have, [StoredEvent::new(999, 0, 1).id()]);
        let lacking: Vec<EventId> = lacking
            .iter()
            .map(|&n| StoredEvent::new(n, 0, 1).id())
            .collect();
        assert_eq!(need, lacking);
        assert_eq!(m.neg_opens, [(T, 1, "sync".to_owned())]);
        assert!(m.conns[&1].negs.is_empty(), "NEG-CLOSE drops the session");
    }

    #[test]
    fn negentropy_sessions_last_over_many_rounds_and_ignore_limits() {
        let mut m = relay(RelayModel::with_events(5_000));
        m.nip77 = Nip77::Supported;
        m.max_limit = Some(10);
        let mine: Vec<StoredEvent> = (1..=5_000)
            .filter(|n| n % 1_000 != 0)
            .map(|n| StoredEvent::new(n, 1_000_000 + n, 1))
            .collect();
        let (have, need, rounds) =
            reconcile(&mut m, "big", r#"{"kinds":[1],"limit":1}"#, &mine, 4_096);
        assert!(rounds > 1, "the frame limit should force several rounds");
        assert!(have.is_empty());
        let lacking: Vec<EventId> = (1..=5)
            .map(|k| StoredEvent::new(k * 1_000, 0, 1).id())
            .collect();
        assert_eq!(need, lacking);
    }

    #[test]
    fn negentropy_storage_follows_the_filter() {
        let mut m = relay(RelayModel::with_events(10));
        m.nip77 = Nip77::Supported;
        let (have, need, _) = reconcile(&mut m, "s", r#"{"since":1000006}"#, &[], 60_000);
        assert!(have.is_empty());
        let want: Vec<EventId> = (6..=10).map(|n| StoredEvent::new(n, 0, 1).id()).collect();
        assert_eq!(need, want);
    }

    #[test]
    fn negentropy_errors_end_the_session() {
        let mut m = relay(RelayModel::with_events(3));
        m.nip77 = Nip77::Supported;
        let unknown = m.handle(T, 1, r#"["NEG-MSG","nope","61"]"#);
        assert_eq!(
            unknown,
            [r#"["NEG-ERR","nope","closed: unknown subscription"]"#]
        );
        let bad_hex = m.handle(T, 1, r#"["NEG-OPEN","s",{},"6zz"]"#);
        assert_eq!(bad_hex, [r#"["NEG-ERR","s","error: message is not hex"]"#]);
        assert!(m.conns[&1].negs.is_empty());
        // A good open, then a message negentropy cannot parse.
        let open = m.handle(T, 1, r#"["NEG-OPEN","s",{},"6100"]"#);
        assert_eq!(neg_frame(&open[0]).0, "NEG-MSG");
        assert_eq!(m.conns[&1].negs.len(), 1);
        let broken = m.handle(T, 1, r#"["NEG-MSG","s","50"]"#);
        assert_eq!(neg_frame(&broken[0]).0, "NEG-ERR");
        assert!(neg_frame(&broken[0]).2.starts_with("error: "), "{broken:?}");
        assert!(m.conns[&1].negs.is_empty());
        let after = m.handle(T, 1, r#"["NEG-MSG","s","61"]"#);
        assert_eq!(after, [r#"["NEG-ERR","s","closed: unknown subscription"]"#]);
        assert_eq!(m.neg_opens.len(), 2);
    }

    #[test]
    fn a_neg_open_on_an_open_id_replaces_the_session() {
        let mut m = relay(RelayModel::with_events(3));
        m.nip77 = Nip77::Supported;
        m.handle(T, 1, r#"["NEG-OPEN","s",{},"6100"]"#);
        let (have, need, _) = reconcile(&mut m, "s", r#"{"until":1000001}"#, &[], 60_000);
        assert!(have.is_empty());
        assert_eq!(need, [StoredEvent::new(1, 0, 1).id()]);
    }

    #[test]
    fn unsupported_negentropy_gets_nostr_rs_relays_notice() {
        let mut m = relay(RelayModel::with_events(3));
        assert_eq!(m.nip77, Nip77::Unsupported);
        let notice = [r#"["NOTICE","could not parse command"]"#];
        for frame in [
            r#"["NEG-OPEN","s",{},"6100"]"#,
            r#"["NEG-MSG","s","6100"]"#,
            r#"["NEG-CLOSE","s"]"#,
        ] {
            assert_eq!(m.handle(T, 1, frame), notice, "{frame}");
        }
        assert_eq!(m.neg_opens.len(), 1);
        // Other frames still reach the NIP-01 relay.
        assert_eq!(req(&mut m, "a", "{}"), (vec![3, 2, 1], true));
    }

    #[test]
    fn refused_and_silent_negentropy() {
        let mut m = relay(RelayModel::with_events(3));
        m.nip77 = Nip77::Refuse("blocked: negentropy disabled".into());
        let open = m.handle(T, 1, r#"["NEG-OPEN","s",{},"6100"]"#);
        assert_eq!(open, [r#"["NEG-ERR","s","blocked: negentropy disabled"]"#]);
        let msg = m.handle(T, 1, r#"["NEG-MSG","s","6100"]"#);
        assert_eq!(msg, [r#"["NEG-ERR","s","closed: unknown subscription"]"#]);
        assert!(m.handle(T, 1, r#"["NEG-CLOSE","s"]"#).is_empty());

        m.nip77 = Nip77::Silent;
        for frame in [
            r#"["NEG-OPEN","t",{},"6100"]"#,
            r#"["NEG-MSG","t","6100"]"#,
            r#"["NEG-CLOSE","t"]"#,
        ] {
            assert!(m.handle(T, 1, frame).is_empty(), "{frame}");
        }
        assert_eq!(m.neg_opens.len(), 2);
    }

    #[test]
    fn malformed_neg_frames() {
        let mut m = relay(RelayModel::default());
        m.nip77 = Nip77::Supported;
        let missing_hex = m.handle(T, 1, r#"["NEG-OPEN","s",{}]"#);
        assert_eq!(
            missing_hex,
            [r#"["NEG-ERR","s","error: malformed NEG frame"]"#]
        );
        let no_sub = m.handle(T, 1, r#"["NEG-OPEN"]"#);
        assert_eq!(no_sub, [r#"["NOTICE","error: could not parse"]"#]);
        assert!(m.neg_opens.is_empty());
    }
}
