//! The bodies of the cargo-fuzz targets in `fuzz/`, as ordinary functions over `&[u8]` so the
//! committed corpora are replayed on stable Rust by `tests/fuzz_corpus.rs` through exactly the
//! code the fuzzer runs. Every check panics on failure: a panic is the fuzzer's crash signal.
//!
//! - [`relay_frame`]: arbitrary bytes into the NIP-01 decoders (both directions).
//! - [`sse_parser`]: arbitrary bytes in arbitrary chunkings into the SSE parser.
//! - [`relay_session`]: a [`Sim`] script decoded from the bytes, with the property tests'
//!   invariants checked after every step.
//! - [`pool`]: a [`PoolSim`] world and script decoded from the bytes, the pool's promises
//!   checked after every step and its outcomes at the end.
//! - [`negentropy`]: a session catching up by NIP-77 against a relay that speaks it, with
//!   arbitrary `NEG-MSG` (any bytes), `NEG-ERR` and NOTICE frames injected: the invariants
//!   hold after every step, and the catch-up always ends (exact or by the fallback).
//! - [`sse_session`]: an [`SseSim`] (the SSE simulator the transcripts use) driven input by
//!   input, with its [`SseInvariants`](crate::sse_invariants::SseInvariants) checked after
//!   every input.
//! - [`checkpoint`]: arbitrary bytes restored as a relay, pool and SSE checkpoint (small
//!   bounds, so trimming is reached): never a panic, and whatever restores passes the
//!   consistency checks, before and after it connects and runs.

use std::borrow::Cow;
use std::time::Duration;

use arbitrary::{Result, Unstructured};
use tether_core::backoff::BackoffPolicy;
use tether_core::gate::GateScope;
use tether_core::link::{Epoch, SocketLoss};
use tether_core::nostr::message::{
    ClientMessage, FrameError, RawEvent, RelayMessage, DEFAULT_MAX_FRAME, MAX_SUB_ID_CHARS,
};
use tether_core::nostr::{CatchUpConfig, Priority, RelayConfig, SubscriptionId};
use tether_core::pool::{PoolConfig, RelayId, SubId};
use tether_core::sse::{
    Item, Message, Parser, ParserConfig, Request, Resume, SseConfig, Unsendable,
};
use tether_core::{Instant, Lifecycle};

use crate::pool_sim::{PoolAction, PoolSim};
use crate::relay_model::{LimitStyle, Nip77, RelayModel, ReqBudget, StoredEvent};
use crate::sim::{Action, Sim};
use crate::sse_sim::{Reply, ServerConfig, SseSim};

/// Most operations decoded from one input: enough for interesting interleavings, few enough
/// that one input runs in milliseconds.
pub const MAX_OPS: usize = 64;

// ---- relay_frame ------------------------------------------------------------------------------

/// Decode `data` (lossily made UTF-8) as a relay frame, a client frame and an event object.
/// Whatever decodes must re-encode to something that decodes to the same thing, and the size
/// limit must refuse larger frames unparsed.
///
/// # Panics
/// When a decoder panics or one of those properties fails.
pub fn relay_frame(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let limit = data.len() / 2;
    if text.len() > limit {
        assert!(
            matches!(
                RelayMessage::decode(&text, limit),
                Err(FrameError::TooLarge { .. })
            ),
            "a frame over the limit must be refused unparsed"
        );
    }
    match RelayMessage::decode(&text, DEFAULT_MAX_FRAME) {
        Ok(msg) => check_relay_message(&text, &msg),
        Err(FrameError::UnknownVerb(v)) => assert!(v.chars().count() <= 32, "echoed verb {v:?}"),
        Err(e) => drop(e.to_string()),
    }
    if let Ok(msg) = ClientMessage::decode(&text, DEFAULT_MAX_FRAME) {
        let once = msg.encode();
        let again = ClientMessage::decode(&once, DEFAULT_MAX_FRAME)
            .unwrap_or_else(|e| panic!("re-encoded client frame {once:?} fails: {e}"));
        assert_eq!(again.encode(), once, "client frame round trip");
    }
    if let Ok(event) = RawEvent::parse(&text) {
        let again = RawEvent::parse(event.json()).expect("an event's own json parses");
        assert_eq!(
            (again.id(), again.created_at()),
            (event.id(), event.created_at())
        );
    }
}

fn check_relay_message(text: &str, msg: &RelayMessage<'_>) {
    let sub = match msg {
        RelayMessage::Event { sub, event } => {
            let json = event.json();
            assert!(
                json.starts_with('{') && json.ends_with('}'),
                "event bytes {json:?} from {text:?}"
            );
            assert!(
                text.contains(json),
                "event bytes are not a slice of the frame"
            );
            let again = RawEvent::parse(json).expect("the event slice parses on its own");
            assert_eq!(
                (again.id(), again.created_at()),
                (event.id(), event.created_at())
            );
            Some(sub)
        }
        RelayMessage::Eose { sub }
        | RelayMessage::Closed { sub, .. }
        | RelayMessage::Count { sub, .. }
        | RelayMessage::NegMsg { sub, .. }
        | RelayMessage::NegErr { sub, .. } => Some(sub),
        _ => None,
    };
    if let Some(sub) = sub {
        let chars = sub.chars().count();
        assert!((1..=MAX_SUB_ID_CHARS).contains(&chars), "sub id {sub:?}");
    }
    let encoded = msg.encode();
    let back = RelayMessage::decode(&encoded, DEFAULT_MAX_FRAME)
        .unwrap_or_else(|e| panic!("re-encoded {encoded:?} (from {text:?}) fails: {e}"));
    assert_eq!(&back, msg, "relay frame round trip via {encoded:?}");
}

// ---- negentropy -------------------------------------------------------------------------------

/// A subscription that was live catches up by NIP-77 after a drop, while the bytes inject
/// frames on the socket: `NEG-MSG` with any bytes as its hex message, `NEG-ERR`, NOTICE, and
/// NEG frames for wire ids the session never sent, at arbitrary times. The Sim's invariants
/// hold after every step, and within a minute of calm the catch-up has ended: every failure
/// path ends in the `since` fallback, none in a hang. An input of odd length subscribes with
/// two filters (notes and reactions), one NIP-77 session each, and its frames name either
/// filter's session.
///
/// Layout: repeated `[kind, delay (10 ms units), len, bytes ...]`.
///
/// # Panics
/// On a contract violation, a panic in the session, or a catch-up that never ends.
pub fn negentropy(data: &[u8]) {
    let mut relay = RelayModel::with_events(0);
    relay.nip77 = Nip77::Supported;
    let two = data.len() % 2 == 1;
    for n in 1..=20u64 {
        let kind = if two && n % 3 == 0 { 7 } else { 1 };
        relay
            .events
            .push(StoredEvent::new(n, crate::sim::UNIX_START - 40 + n, kind));
    }
    let filters: Vec<String> = if two {
        vec![r#"{"kinds":[1]}"#.into(), r#"{"kinds":[7]}"#.into()]
    } else {
        vec![r#"{"kinds":[1]}"#.into()]
    };
    let mut s = Sim::new(RelayConfig::default(), 5, relay);
    s.keep_transcript = false;
    s.at(Duration::ZERO, Action::Connect);
    s.at(
        Duration::from_millis(100),
        Action::Subscribe(filters, Priority::NORMAL),
    );
    s.at(Duration::from_secs(1), Action::DropSocket);
    s.at(
        Duration::from_millis(1_100),
        Action::Store(StoredEvent::new(21, crate::sim::UNIX_START - 30, 1)),
    );
    if two {
        s.at(
            Duration::from_millis(1_150),
            Action::Store(StoredEvent::new(22, crate::sim::UNIX_START - 50, 7)),
        );
    }
    // The reconnect comes 0.5-1.5 s after the drop: frames from ~2.5 s on meet the session
    // catching up.
    let mut at = Duration::from_millis(2_400);
    let mut rest = data;
    while let [kind, delay, len, tail @ ..] = rest {
        let take = usize::from(*len).min(tail.len());
        let (bytes, after) = tail.split_at(take);
        rest = after;
        at += Duration::from_millis(u64::from(*delay) * 10);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let text = String::from_utf8_lossy(bytes);
        // With two filters, the second's session is `n0:2.1`.
        let wire = if two && kind / 6 % 2 == 1 {
            "n0:2.1"
        } else {
            "n0:2"
        };
        let frame = match kind % 6 {
            0 => format!(r#"["NEG-MSG","{wire}","{hex}"]"#),
            1 => format!(r#"["NEG-MSG","{wire}","61{hex}"]"#),
            2 => RelayMessage::NegErr {
                sub: wire.into(),
                message: text,
            }
            .encode(),
            3 => RelayMessage::Notice { message: text }.encode(),
            4 => format!(
                r#"["NEG-MSG","n{}:{}","{hex}"]"#,
                kind / 6 % 3,
                kind / 18 % 4
            ),
            _ => RelayMessage::NegErr {
                sub: format!("n0:{}", kind / 6 % 4).into(),
                message: "closed: gone".into(),
            }
            .encode(),
        };
        s.at(at, Action::RelayFrame(frame));
    }
    let end = at + Duration::from_secs(60);
    while s.step(Instant::ZERO + end) {
        s.check_all();
    }
    let reports = s
        .heard(|e| matches!(e, tether_core::nostr::Event::CaughtUp { .. }).then_some(()))
        .len();
    assert!(reports >= 1, "the catch-up never ended");
}

// ---- sse_parser -------------------------------------------------------------------------------

/// Parse a byte stream whole and in arbitrary chunks; both must give the same items and last
/// event ID, buffers must stay within their bounds, and with the default limits the result
/// must equal a naive reading of the WHATWG rules.
///
/// Layout: `[flags, line limit, event limit, cut count, cuts (u16 LE) ..., stream ...]`.
///
/// # Panics
/// When the parser panics or one of those properties fails.
pub fn sse_parser(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let (Ok(flags), Ok(line), Ok(event), Ok(cuts)) = (
        u.arbitrary::<u8>(),
        u.arbitrary::<u8>(),
        u.arbitrary::<u8>(),
        u.arbitrary::<u8>(),
    ) else {
        return;
    };
    let tight = flags & 4 != 0;
    let mut config = ParserConfig::default();
    config.max_queued = usize::from(flags & 3) + 1;
    if tight {
        config.max_line_len = usize::from(line) + 1;
        config.max_event_len = usize::from(event) + 1;
        config.max_sendable_id_len = usize::from(line & 15);
    }
    let cuts: Vec<usize> = (0..cuts % 16)
        .map_while(|_| u.arbitrary::<u16>().ok().map(usize::from))
        .collect();
    let stream = u.take_rest();
    let whole = parse_chunks(config, &[stream]);
    let chunks = split(stream, &cuts);
    assert_eq!(parse_chunks(config, &chunks), whole, "chunking {cuts:?}");
    if stream.len() <= 4096 {
        let singles: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse_chunks(config, &singles), whole, "byte at a time");
    }
    if !tight {
        assert_eq!(whole, reference_parse(stream), "WHATWG reference");
    }
}

/// The items, the last event ID and the resume id.
type Parsed = (Vec<Item>, String, String);

/// Feed `chunks` as one stream, draining after every feed, then end it.
fn parse_chunks(config: ParserConfig, chunks: &[&[u8]]) -> Parsed {
    let mut p = Parser::new(config);
    let mut items = Vec::new();
    for chunk in chunks {
        let mut rest = *chunk;
        loop {
            let n = p.feed(rest);
            // One over: a message and its unsendable-id notice come from one blank line.
            assert!(
                p.queued() <= config.max_queued.max(1) + 1,
                "{} items queued, limit {}",
                p.queued(),
                config.max_queued
            );
            if let Err(e) = p.check_consistency() {
                panic!("parser: {e}");
            }
            // Progress is bytes taken or items queued: a partial BOM from the previous chunk can
            // become an over-long line that fills the queue before this chunk's first byte.
            assert!(
                n > 0 || rest.is_empty() || p.queued() > 0,
                "feed made no progress"
            );
            rest = &rest[n..];
            items.extend(std::iter::from_fn(|| p.next_item()));
            if rest.is_empty() {
                break;
            }
        }
    }
    p.finish();
    items.extend(std::iter::from_fn(|| p.next_item()));
    for item in &items {
        if let Item::Message(m) = item {
            assert!(
                m.data.len() <= 3 * config.max_event_len,
                "{} bytes",
                m.data.len()
            );
        }
    }
    (
        items,
        p.last_event_id().to_owned(),
        p.resume_id().to_owned(),
    )
}

fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        out.push(&bytes[start..p]);
        start = p;
    }
    out.push(&bytes[start..]);
    out
}

/// The HTML standard's "interpreting an event stream", written as plainly as possible over the
/// whole stream: the oracle for the incremental parser.
fn reference_parse(stream: &[u8]) -> Parsed {
    let stream = stream.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(stream);
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < stream.len() {
        match stream[i] {
            b'\r' => {
                lines.push(&stream[start..i]);
                if stream.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            b'\n' => {
                lines.push(&stream[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    // What follows the last line ending is an incomplete line: dropped at the end of stream.
    let (mut items, mut data, mut event_type) = (Vec::new(), Vec::<u8>::new(), Vec::new());
    let (mut id_buffer, mut last_id) = (String::new(), String::new());
    let (mut id_seen, mut resume_id) = (false, String::new());
    let max_id = ParserConfig::default().max_sendable_id_len;
    for line in lines {
        if line.is_empty() {
            last_id.clone_from(&id_buffer);
            // A header value holds TAB, SP..'~' and obs-text (>= 0x80), and servers take 4 KiB.
            let bad_byte = id_buffer
                .bytes()
                .enumerate()
                .find(|&(_, b)| b < 0x20 && b != b'\t' || b == 0x7F);
            let notice = match (std::mem::take(&mut id_seen), bad_byte) {
                (false, _) => None,
                (true, Some((at, byte))) => Some(Unsendable::Byte { at, byte }),
                (true, None) if id_buffer.len() > max_id => Some(Unsendable::TooLong {
                    len: id_buffer.len(),
                    limit: max_id,
                }),
                (true, None) => {
                    resume_id.clone_from(&id_buffer);
                    None
                }
            };
            let notice = notice.map(|why| Item::UnsendableId {
                id: id_buffer.clone(),
                why,
            });
            if data.is_empty() {
                event_type.clear();
                items.extend(notice);
                continue;
            }
            data.pop();
            let event = if event_type.is_empty() {
                "message".to_owned()
            } else {
                String::from_utf8_lossy(&event_type).into_owned()
            };
            items.push(Item::Message(Message {
                event,
                data: String::from_utf8_lossy(&data).into_owned(),
                id: id_buffer.clone(),
            }));
            data.clear();
            event_type.clear();
            items.extend(notice);
            continue;
        }
        if line[0] == b':' {
            items.push(Item::Heartbeat);
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => (
                &line[..c],
                line[c + 1..].strip_prefix(b" ").unwrap_or(&line[c + 1..]),
            ),
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
            }
            b"event" => event_type = value.to_vec(),
            b"id" if !value.contains(&0) => {
                id_buffer = String::from_utf8_lossy(value).into_owned();
                id_seen = true;
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().fold(0u64, |n, &d| {
                    n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                items.push(Item::Retry(Duration::from_millis(ms)));
            }
            _ => {}
        }
    }
    (items, last_id, resume_id)
}

// ---- relay_session ----------------------------------------------------------------------------

/// Decode a relay's behaviour, a session configuration and up to [`MAX_OPS`] timed operations
/// from `data` ([`RelayScript::decode`]), run them in the [`Sim`] with its invariants checked
/// after every step (the same [`Invariants`](crate::invariants::Invariants) the property tests
/// use), then let retries, windows and reconnects play out for a bounded simulated time, or
/// until the run has settled ([`Sim::run_until_settled`]). The Sim runs quiet (no transcript);
/// [`relay_session_transcript`] replays an input with it.
///
/// # Panics
/// On any invariant violation or panic in the session.
pub fn relay_session(data: &[u8]) {
    relay_session_run(data, true);
}

/// [`relay_session`] with the Sim's transcript kept, returned at the end: what a failing
/// input did (the fuzz target itself runs quiet, and a run is deterministic).
///
/// # Panics
/// Like [`relay_session`], with the transcript's tail in the message.
pub fn relay_session_transcript(data: &[u8]) -> String {
    relay_session_run(data, false)
}

fn relay_session_run(data: &[u8], quiet: bool) -> String {
    let Ok(script) = RelayScript::decode(data) else {
        return String::new();
    };
    let mut sim = script.sim();
    sim.quiet = quiet;
    sim.run_for(script.end());
    // Long enough for five retries at the 30 s cap, or a 300 s gate window, to play out; a
    // run that settles earlier has nothing left to play out.
    sim.run_until_settled(Duration::from_secs(330));
    sim.check_all();
    sim.transcript().to_owned()
}

/// The scripted part of a relay_session run: simulated time is what costs (pings, reconnect
/// cycles), so it is bounded to keep one input in the milliseconds.
pub const MAX_SCRIPT: Duration = Duration::from_secs(300);

/// One generated relay scenario: the relay's behaviour, the session's configuration and the
/// application's timed operations. The one generator behind both the `relay_session` fuzz
/// target and the property tests (`tests/relay_properties.rs`), which feed it proptest's
/// bytes.
#[derive(Clone, Debug)]
pub struct RelayScript {
    /// The session's configuration.
    pub config: RelayConfig,
    /// The relay at the start.
    pub relay: RelayModel,
    /// One-way latency.
    pub latency: Duration,
    /// Whether the app answers AUTH challenges.
    pub auto_auth: bool,
    /// The session's seed.
    pub seed: u64,
    /// Operations at times after the start, in order (time only moves forward), within
    /// [`MAX_SCRIPT`].
    pub ops: Vec<(Duration, Action)>,
}

impl RelayScript {
    /// Decode a scenario from bytes: a world, then up to [`MAX_OPS`] operations until the
    /// bytes or [`MAX_SCRIPT`] run out.
    ///
    /// # Errors
    /// When the bytes do not hold a whole world.
    pub fn decode(data: &[u8]) -> Result<Self> {
        let mut u = Unstructured::new(data);
        let (config, relay, latency, auto_auth, seed) = relay_world(&mut u)?;
        let mut ops = Vec::new();
        let mut t = Duration::ZERO;
        for _ in 0..MAX_OPS {
            if u.is_empty() {
                break;
            }
            let Ok((step, action)) = relay_op(&mut u) else {
                break;
            };
            // Time only moves forward: each operation is a non-negative step after the last.
            t += step;
            if t > MAX_SCRIPT {
                break;
            }
            ops.push((t, action));
        }
        Ok(RelayScript {
            config,
            relay,
            latency,
            auto_auth,
            seed,
            ops,
        })
    }

    /// A Sim with the world set up and every operation scheduled, checking invariants.
    pub fn sim(&self) -> Sim {
        let mut sim = Sim::new(self.config.clone(), self.seed, self.relay.clone());
        sim.set_latency(self.latency);
        sim.auto_auth = self.auto_auth;
        sim.check = true;
        for (at, action) in &self.ops {
            sim.at(*at, action.clone());
        }
        sim
    }

    /// When the last operation happens.
    pub fn end(&self) -> Duration {
        self.ops.last().map_or(Duration::ZERO, |(at, _)| *at)
    }
}

type World = (RelayConfig, RelayModel, Duration, bool, u64);

fn relay_world(u: &mut Unstructured<'_>) -> Result<World> {
    let mut relay = RelayModel::with_events(u.int_in_range(0..=4)?);
    if u.arbitrary()? {
        relay.budget = Some(ReqBudget {
            max: u.int_in_range(1..=5)?,
            window: Duration::from_secs(u.int_in_range(1..=20)?),
            hint: u.arbitrary()?,
        });
    }
    if u.arbitrary()? {
        let style = if u.arbitrary()? {
            LimitStyle::Notice
        } else {
            LimitStyle::Closed
        };
        relay.max_subs = Some((u.int_in_range(1..=5)?, style));
    }
    relay.auth_required = u.ratio(1, 4)?;
    for _ in 0..u.int_in_range(0..=4)? {
        relay.scripted_closed.push_back(refusal(u)?);
    }
    if u.ratio(1, 8)? {
        relay.refuse_all = Some(refusal(u)?);
    }
    for _ in 0..u.int_in_range(0..=2)? {
        relay.scripted_ok.push_back((u.arbitrary()?, refusal(u)?));
    }
    relay.silent_reqs = u.ratio(1, 8)?;
    relay.ignore_pings = u.ratio(1, 8)?;
    if u.ratio(1, 8)? {
        relay.drop_after = Some(Duration::from_millis(u.int_in_range(0..=40_000)?));
    }
    let mut config = RelayConfig::default();
    config.gate_scope = if u.arbitrary()? {
        GateScope::Session
    } else {
        GateScope::Connection
    };
    config.max_subscriptions = if u.arbitrary()? {
        Some(u.int_in_range(1..=5)?)
    } else {
        None
    };
    config.replay_batch = u.int_in_range(1..=8)?;
    let catch_up = !u.ratio(1, 4)?;
    let mut memory = CatchUpConfig::default();
    memory.memory = u.int_in_range(0..=4)?;
    // A short lookback keeps windows (and so the bytes re-delivered) small.
    memory.lookback.default = Duration::from_secs(5);
    config.catch_up = catch_up.then_some(memory);
    config.max_registered = u.int_in_range(1..=16)?;
    config.eose_timeout = Duration::from_secs(u.int_in_range(1..=30)?);
    config.max_outbox = u.int_in_range(1..=4)?;
    // Derived, not drawn, so existing corpus inputs keep their meaning: half the runs can
    // authenticate (an `auth_required` document then holds REQs for NIP-42).
    config.authenticates = config.eose_timeout.as_secs() % 2 == 0;
    let latency = Duration::from_millis(u.int_in_range(0..=200)?);
    Ok((config, relay, latency, !u.ratio(1, 4)?, u.arbitrary()?))
}

fn relay_op(u: &mut Unstructured<'_>) -> Result<(Duration, Action)> {
    let step = match u.int_in_range(0..=3)? {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u.int_in_range(0..=100)?),
        2 => Duration::from_millis(u.int_in_range(0..=5_000)?),
        _ => Duration::from_secs(u.int_in_range(0..=60)?),
    };
    let action = match u.int_in_range(0..=13)? {
        0..=2 => Action::Subscribe(filters(u)?, Priority(u.int_in_range(-2..=2)?)),
        3 => {
            let slot: u64 = u.int_in_range(0..=9)?;
            let generation: u64 = u.int_in_range(0..=2)?;
            Action::Unsubscribe(SubscriptionId((generation << 32) | slot))
        }
        4 => Action::Publish(publish_json(u)?),
        5 => Action::Connect,
        6 => Action::Disconnect,
        7 => Action::DropSocket,
        8 => Action::RelayDown,
        9 => Action::RelayUp,
        10 | 11 => Action::RelayFrame(frame(u)?),
        12 => {
            let n = u.int_in_range(1..=12)?;
            Action::Store(StoredEvent::new(n, 1_000_000 + n, u.int_in_range(1..=2)?))
        }
        // One in eight of these is a NIP-11 document instead (drawn here so the other ops
        // keep their bytes).
        _ if u.ratio(1, 8)? => Action::RelayInfo((*u.choose(RELAY_INFOS)?).to_owned()),
        // And one in four of the rest is the application's lifecycle.
        _ if u.ratio(1, 4)? => match u.int_in_range(0..=5)? {
            0 => Action::Suspend,
            1 => Action::Resume,
            2 => Action::NetworkChanged(u.arbitrary()?),
            3 => Action::Online(u.arbitrary()?),
            4 => Action::Vanish,
            _ => Action::Online(true),
        },
        _ => Action::Relay(*u.choose(RELAY_CHANGES)?),
    };
    Ok((step, action))
}

/// NIP-11 documents the relay's driver may hand the session mid-run: caps below and above
/// the relay's, a small frame bound, short wire ids, auth first, and broken ones.
const RELAY_INFOS: &[&str] = &[
    r#"{"limitation":{"max_subscriptions":1}}"#,
    r#"{"limitation":{"max_subscriptions":3}}"#,
    r#"{"limitation":{"max_subscriptions":50,"auth_required":true}}"#,
    r#"{"limitation":{"max_message_length":1024}}"#,
    r#"{"limitation":{"max_subid_length":3,"max_limit":10}}"#,
    r#"{"limitation":{"auth_required":true}}"#,
    r#"{"limitation":{"max_subscriptions":"2","max_message_length":-1}}"#,
    "<html>",
    "{}",
];

/// Relay behaviour switched mid-run (the Sim takes plain functions, so each is a fixed change).
const RELAY_CHANGES: &[fn(&mut RelayModel)] = &[
    |r| r.silent_reqs = !r.silent_reqs,
    |r| r.ignore_pings = !r.ignore_pings,
    |r| r.auth_required = !r.auth_required,
    |r| r.refuse_all = None,
    |r| r.refuse_all = Some("error: internal".into()),
    |r| {
        r.scripted_closed
            .push_back("rate-limited: retry in 7s".into())
    },
    |r| r.scripted_closed.push_back("auth-required: sign in".into()),
    |r| {
        r.scripted_ok
            .push_back((false, "rate-limited: slow down".into()))
    },
    |r| {
        r.scripted_ok
            .push_back((false, "auth-required: who?".into()))
    },
    |r| {
        r.scripted_ok
            .push_back((false, "duplicate: have it".into()))
    },
    |r| r.max_subs = Some((1, LimitStyle::Notice)),
    |r| r.max_subs = None,
    // A stored event from the far future (`created_at` u64::MAX, issue 20), replayed to every
    // matching REQ from now on. Appended last: a choice takes one byte whatever the list's
    // length, so older corpus files still decode to the same operations.
    |r| r.events.push(StoredEvent::new(13, u64::MAX, 1)),
];

fn filters(u: &mut Unstructured<'_>) -> Result<Vec<String>> {
    let n = u.int_in_range(1..=3)?;
    (0..n)
        .map(|_| {
            Ok(match u.int_in_range(0..=3)? {
                0 => r#"{"kinds":[1]}"#.to_owned(),
                1 => format!(
                    r#"{{"kinds":[1],"since":{}}}"#,
                    u.int_in_range(0..=1_000_010)?
                ),
                2 => "{}".to_owned(),
                _ => r#"{"kinds":[2],"limit":5}"#.to_owned(),
            })
        })
        .collect()
}

fn publish_json(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=5)? {
        0..=3 => StoredEvent::new(u.int_in_range(0..=6)?, 1_700_000_000, 1).json,
        4 => r#"{"id":"nothex","created_at":1}"#.to_owned(),
        _ => short_string(u)?,
    })
}

/// A refusal text: every kind the fuzz target and the property tests ever generated (the
/// NIP-01 prefixes, a rate limit with and without a hint in s and ms, both cap dialects, the
/// empty text) and junk.
fn refusal(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=13)? {
        0 => "rate-limited: slow down".to_owned(),
        1 => format!("rate-limited: retry in {}s", u.arbitrary::<u32>()?),
        2 => format!("rate-limited: retry in {}ms", u.int_in_range(0..=5_000)?),
        3 => "error: too many subscriptions".to_owned(),
        4 => "Subscription error: Maximum concurrent subscription count reached".to_owned(),
        5 => "auth-required: sign in".to_owned(),
        6 => "error: internal".to_owned(),
        7 => "blocked: no".to_owned(),
        8 => "duplicate: already have it".to_owned(),
        9 => "restricted: members only".to_owned(),
        10 => "invalid: bad filter".to_owned(),
        11 => String::new(),
        _ => short_string(u)?,
    })
}

/// A relay frame from a grammar of realistic frames, near misses and plain junk.
fn frame(u: &mut Unstructured<'_>) -> Result<String> {
    let wire = wire_id(u)?;
    let frame = match u.int_in_range(0..=15)? {
        0 | 1 => format!(r#"["EOSE",{}]"#, json_str(&wire)),
        2 | 3 => format!(
            r#"["CLOSED",{},{}]"#,
            json_str(&wire),
            json_str(&refusal(u)?)
        ),
        4 | 5 => {
            let n = u.int_in_range(0..=12)?;
            let created_at = 1_000_000 + u.int_in_range(0..=20)?;
            let event = StoredEvent::new(n, created_at, 1).json;
            format!(r#"["EVENT",{},{event}]"#, json_str(&wire))
        }
        6 => format!(r#"["NOTICE",{}]"#, json_str(&refusal(u)?)),
        7 => format!(r#"["AUTH",{}]"#, json_str(&short_string(u)?)),
        8 => format!(
            r#"["OK","{:064x}",{},{}]"#,
            u.int_in_range(0..=6)?,
            u.arbitrary::<bool>()?,
            json_str(&refusal(u)?)
        ),
        9 => format!(
            r#"["COUNT",{},{{"count":{}}}]"#,
            json_str(&wire),
            u.arbitrary::<u64>()?
        ),
        10 => {
            // Events the decoder must refuse (bad ids, bad times, wrong shapes), and one at
            // the edge of time.
            let event = u.choose(&[
                r#"{"id":"00","created_at":1}"#,
                r#"{"created_at":1}"#,
                r#"{"id":"0000000000000000000000000000000000000000000000000000000000000001","created_at":-1}"#,
                r#"{"id":"0000000000000000000000000000000000000000000000000000000000000001","created_at":1.5}"#,
                r#"{"id":"0000000000000000000000000000000000000000000000000000000000000001","created_at":99999999999999999999}"#,
                r#"["not","an","object"]"#,
                r#""string""#,
                // Not refused: a well-formed event from the far future (issue 20), last in the
                // list so the others keep their bytes.
                r#"{"id":"000000000000000000000000000000000000000000000000000000000000000e","pubkey":"0000000000000000000000000000000000000000000000000000000000000000","created_at":18446744073709551615,"kind":1,"tags":[],"content":"far future","sig":"0"}"#,
            ])?;
            format!(r#"["EVENT",{},{event}]"#, json_str(&wire))
        }
        11 => {
            // Wrong arity and types.
            (*u.choose(&[
                r#"["EOSE"]"#,
                r#"["EOSE","0:1","extra"]"#,
                r#"["CLOSED","0:1"]"#,
                r#"["OK","00",true,""]"#,
                r#"["OK"]"#,
                r#"[1,2,3]"#,
                r#"[]"#,
                r#"{"EOSE":"0:1"}"#,
                r#"["EVENT","0:1"]"#,
                r#"["NOTICE",{"a":1}]"#,
            ])?)
            .to_owned()
        }
        12 | 13 => {
            // A realistic frame cut short or with a byte flipped.
            let full = format!(r#"["EOSE",{}]"#, json_str(&wire));
            let cut = u.int_in_range(0..=full.len())?;
            let cut = (0..=cut)
                .rev()
                .find(|&i| full.is_char_boundary(i))
                .unwrap_or(0);
            let mut s = full[..cut].to_owned();
            if u.arbitrary()? {
                s.push(u.arbitrary::<char>()?);
            }
            s
        }
        _ => short_string(u)?,
    };
    Ok(frame)
}

/// Mostly ids this session could have sent (a few slots, generations and attempts), some that
/// it could not.
fn wire_id(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=9)? {
        0..=6 => {
            let slot: u64 = u.int_in_range(0..=7)?;
            let generation: u64 = u.int_in_range(0..=1)?;
            let attempt: u32 = u.int_in_range(0..=6)?;
            format!("{:x}:{attempt:x}", (generation << 32) | slot)
        }
        7 => "x".repeat(u.int_in_range(0..=70)?),
        8 => (*u.choose(&[
            "",
            ":",
            "0:",
            "0:0:0",
            "ffffffffffffffffff:1",
            "0:ffffffffff",
        ])?)
        .to_owned(),
        _ => short_string(u)?,
    })
}

fn short_string(u: &mut Unstructured<'_>) -> Result<String> {
    let n = u.int_in_range(0..=48)?;
    (0..n).map(|_| u.arbitrary::<char>()).collect()
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

// ---- pool -------------------------------------------------------------------------------------

/// Most operations decoded from one `pool` input.
pub const POOL_MAX_OPS: usize = 48;

/// The scripted part of a `pool` run, like [`MAX_SCRIPT`] for `relay_session`.
pub const POOL_MAX_SCRIPT: Duration = Duration::from_secs(120);

/// Decode a pool world — 1 to 5 relays (honest, refusing, down, mute, flapping, silent, some
/// with auth, REQ budgets or caps), their stores, a [`PoolConfig`] with small bounds and
/// `verify` on or off, a seed — and up to [`POOL_MAX_OPS`] timed operations (the property
/// tests' subscribe, routed subscribe, unsubscribe, store, socket drop, add and remove relay,
/// publish and forged copy, plus relay down / up, frames from the relay frame grammar,
/// conflicting copies, floods of up to 201 unique ids, mute toggles and relay behaviour
/// changes), and run them in a [`PoolSim`]. The PoolSim checks the pool's promises after every
/// step (each id once while remembered, at most one outcome, `Ended` once and last, no copy
/// that fails verification delivered, pool and session bookkeeping, `poll_timeout` in the
/// future). After the script the run goes on past every outcome and publish deadline, ending
/// early once it has settled ([`PoolSim::is_settled`]), and then every subscription not
/// dropped must have had exactly one `Complete`, every publish its `PublishDone`, and no copy
/// may still await verification.
///
/// Operations that name a wire subscription mostly use the latest REQ the pool sent to that
/// relay, so the script is decoded as the run goes. The PoolSim runs quiet (no transcript);
/// [`pool_transcript`] runs an input again with it.
///
/// # Panics
/// On any violation or panic in the pool.
pub fn pool(data: &[u8]) {
    pool_run(data, true);
}

/// [`pool`] with the PoolSim's transcript on (its tail is kept and returned): what a failing
/// input did.
///
/// # Panics
/// Like [`pool`], with the transcript's tail in the message.
pub fn pool_transcript(data: &[u8]) -> String {
    pool_run(data, false)
}

fn pool_run(data: &[u8], quiet: bool) -> String {
    let mut u = Unstructured::new(data);
    let Ok((config, seed, latency, relays)) = pool_world(&mut u) else {
        return String::new();
    };
    let eose_deadline = config.eose_deadline;
    let publish_deadline = config.publish_deadline;
    let verify = config.verify;
    let mut s = PoolSim::new(config, seed);
    s.keep_transcript = false;
    s.quiet = quiet;
    s.set_latency(latency);
    // `Received` events are checked as they come but not kept: nothing reads them here.
    s.forget_received_from.extend((0..=5).map(RelayId));
    for (model, mute) in relays {
        let model = Box::new(model);
        s.at(
            Duration::ZERO,
            if mute {
                PoolAction::AddMutedRelay(model)
            } else {
                PoolAction::AddRelay(model)
            },
        );
    }
    let mut t = Duration::ZERO;
    for _ in 0..POOL_MAX_OPS {
        if u.is_empty() {
            break;
        }
        let Ok(step) = pool_step(&mut u) else {
            break;
        };
        t += step;
        if t > POOL_MAX_SCRIPT {
            break;
        }
        // Up to the operation's time, so that it can name what the pool has sent by then.
        s.run_for(t.saturating_sub(s.now().since_origin()));
        let Ok(action) = pool_op(&mut u, &s) else {
            break;
        };
        s.at(t, action);
    }
    // Past every subscription's outcome deadline and every publish's: all are due by then.
    let tail = eose_deadline.max(publish_deadline) + Duration::from_secs(1);
    let until = (Instant::ZERO + t + tail).saturating_duration_since(s.now());
    s.run_until_settled(until);
    // A run that has not settled (a flapping relay replays on every reconnect) can stop with
    // a copy under verification, and what the pool says about its subscription (the outcome
    // included) waiting behind it: let verdicts come back, a few milliseconds at a time.
    for _ in 0..2_000 {
        if s.pool.unverified() == 0 {
            break;
        }
        s.run_for(Duration::from_millis(5));
    }
    let tail = || {
        let lines: Vec<&str> = s.transcript().lines().rev().take(60).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    for sub in &s.subscribed {
        assert!(
            s.has_outcome(*sub) || s.unsubscribed.contains(sub),
            "{sub} was never dropped and has no outcome at {:?}\n{}",
            s.now(),
            tail()
        );
    }
    assert!(
        s.publishes_pending() == 0,
        "a publish without its PublishDone\n{}",
        tail()
    );
    assert!(
        !verify || s.pool.unverified() == 0,
        "copies still awaiting a verdict\n{}",
        tail()
    );
    s.transcript().to_owned()
}

type PoolWorld = (PoolConfig, u64, Duration, Vec<(RelayModel, bool)>);

fn pool_world(u: &mut Unstructured<'_>) -> Result<PoolWorld> {
    let mut config = PoolConfig::default();
    config.verify = u.arbitrary()?;
    config.dedup_capacity = u.int_in_range(0..=8)?;
    config.seen_on_max = u.int_in_range(0..=3)?;
    config.max_unverified = u.int_in_range(0..=8)?;
    config.eose_deadline = Duration::from_millis(u.int_in_range(0..=15_000)?);
    config.after_first_eose = if u.arbitrary()? {
        Some(Duration::from_millis(u.int_in_range(0..=5_000)?))
    } else {
        None
    };
    config.publish_deadline = Duration::from_millis(u.int_in_range(0..=15_000)?);
    config.max_relays = u.int_in_range(1..=6)?;
    config.max_subscriptions = u.int_in_range(1..=12)?;
    config.relay.eose_timeout = Duration::from_secs(u.int_in_range(1..=30)?);
    config.relay.publish_timeout = Duration::from_secs(u.int_in_range(1..=10)?);
    if let Some(catch_up) = config.relay.catch_up.as_mut() {
        catch_up.memory = u.int_in_range(0..=4)?;
    }
    config.relay.max_subscriptions = if u.ratio(1, 4)? {
        Some(u.int_in_range(1..=3)?)
    } else {
        None
    };
    let seed = u.arbitrary()?;
    let latency = Duration::from_millis(u.int_in_range(0..=50)?);
    let relays = (0..u.int_in_range(1..=5)?)
        .map(|_| pool_relay(u))
        .collect::<Result<_>>()?;
    // At most 4 handshakes against up to 5 relays (and more added): mostly a limit the
    // relays contend for.
    config.max_connecting = u.int_in_range(1..=4)?;
    Ok((config, seed, latency, relays))
}

/// A relay of the property tests' kinds (honest, refusing, down, mute, flapping, silent),
/// sometimes with auth, a REQ budget or a subscription cap, storing a few of events 1-10
/// (sometimes a forged copy); and whether it starts mute.
fn pool_relay(u: &mut Unstructured<'_>) -> Result<(RelayModel, bool)> {
    let mut m = RelayModel::default();
    for _ in 0..u.int_in_range(0..=5)? {
        m.events.push(pool_event(u, 10)?);
    }
    let mut mute = false;
    match u.int_in_range(0..=8)? {
        0..=2 => {}
        3 => m.refuse_all = Some(refusal(u)?),
        4 => m.down = true,
        5 => mute = true,
        6 => m.drop_after = Some(Duration::from_millis(u.int_in_range(0..=5_000)?)),
        7 => m.silent_reqs = true,
        _ => {
            m.auth_required = u.arbitrary()?;
            if u.arbitrary()? {
                m.budget = Some(ReqBudget {
                    max: u.int_in_range(1..=3)?,
                    window: Duration::from_secs(u.int_in_range(1..=10)?),
                    hint: u.arbitrary()?,
                });
            }
            if u.arbitrary()? {
                m.max_subs = Some((u.int_in_range(1..=3)?, LimitStyle::Closed));
            }
            for _ in 0..u.int_in_range(0..=2)? {
                m.scripted_closed.push_back(refusal(u)?);
            }
        }
    }
    Ok((m, mute))
}

/// A kind-1 event numbered 1..=`max`, genuine, forged (PoolSim's verifier refuses it) or a
/// conflicting copy (other bytes, same id).
fn pool_event(u: &mut Unstructured<'_>, max: u64) -> Result<StoredEvent> {
    let n = u.int_in_range(1..=max)?;
    let mut event = StoredEvent::new(n, 1_000_000 + n, 1);
    match u.int_in_range(0..=7)? {
        0 => event.json = event.json.replace("event", "forged"),
        1 => event.json = event.json.replace("event", "other"),
        _ => {}
    }
    Ok(event)
}

fn pool_step(u: &mut Unstructured<'_>) -> Result<Duration> {
    Ok(match u.int_in_range(0..=3)? {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u.int_in_range(0..=100)?),
        2 => Duration::from_millis(u.int_in_range(0..=3_000)?),
        _ => Duration::from_secs(u.int_in_range(0..=20)?),
    })
}

/// A relay id: mostly one of the first five (some may be gone), now and then one never added.
fn pool_relay_id(u: &mut Unstructured<'_>) -> Result<RelayId> {
    Ok(RelayId(u.int_in_range(0..=5)?))
}

/// The application's lifecycle, for the whole pool, or one relay's socket dying unannounced.
fn pool_lifecycle(u: &mut Unstructured<'_>) -> Result<PoolAction> {
    Ok(match u.int_in_range(0..=5)? {
        0 => PoolAction::Suspend,
        1 => PoolAction::Resume,
        2 => PoolAction::NetworkChanged(u.arbitrary()?),
        3 => PoolAction::Online(u.arbitrary()?),
        4 => PoolAction::Vanish(pool_relay_id(u)?),
        _ => PoolAction::Online(true),
    })
}

/// Mostly the latest wire id the pool sent `relay` a REQ with, else one from the grammar.
fn pool_wire(u: &mut Unstructured<'_>, s: &PoolSim, relay: RelayId) -> Result<String> {
    match s.last_wire_id(relay) {
        Some(wire) if u.ratio(3, 4)? => Ok(wire.to_owned()),
        _ => wire_id(u),
    }
}

fn pool_op(u: &mut Unstructured<'_>, s: &PoolSim) -> Result<PoolAction> {
    let subs = s.subscribed.len() as u64;
    Ok(match u.int_in_range(0..=17)? {
        0..=2 => PoolAction::Subscribe(filters(u)?),
        3 => {
            let routing = (0..u.int_in_range(1..=3)?)
                .map(|_| Ok((pool_relay_id(u)?, filters(u)?)))
                .collect::<Result<_>>()?;
            PoolAction::SubscribeRouted(routing)
        }
        4 => PoolAction::Unsubscribe(SubId(u.int_in_range(1..=subs + 1)?)),
        5 | 6 => PoolAction::Store(pool_relay_id(u)?, pool_event(u, 30)?),
        // One in three socket drops is the application's lifecycle instead (a zombie socket
        // among them), drawn here so the other ops keep their bytes.
        7 if u.ratio(1, 3)? => pool_lifecycle(u)?,
        7 => PoolAction::DropSocket(pool_relay_id(u)?),
        8 => {
            if u.arbitrary()? {
                PoolAction::Down(pool_relay_id(u)?)
            } else {
                PoolAction::Up(pool_relay_id(u)?)
            }
        }
        9 => {
            let (model, mute) = pool_relay(u)?;
            if mute {
                PoolAction::AddMutedRelay(Box::new(model))
            } else {
                PoolAction::AddRelay(Box::new(model))
            }
        }
        10 => PoolAction::RemoveRelay(pool_relay_id(u)?),
        11 => PoolAction::Publish(publish_json(u)?),
        12 | 13 => {
            // A copy on the wire: genuine, forged or conflicting, for a live REQ (mostly).
            let relay = pool_relay_id(u)?;
            let wire = pool_wire(u, s, relay)?;
            let event = pool_event(u, 30)?;
            PoolAction::RelayFrame(
                relay,
                format!(r#"["EVENT",{},{}]"#, json_str(&wire), event.json),
            )
        }
        14 => {
            // Any frame of the relay_session grammar; an EOSE or CLOSED for a live REQ.
            let relay = pool_relay_id(u)?;
            let frame = match u.int_in_range(0..=3)? {
                0 => format!(r#"["EOSE",{}]"#, json_str(&pool_wire(u, s, relay)?)),
                1 => format!(
                    r#"["CLOSED",{},{}]"#,
                    json_str(&pool_wire(u, s, relay)?),
                    json_str(&refusal(u)?)
                ),
                _ => frame(u)?,
            };
            PoolAction::RelayFrame(relay, frame)
        }
        15 => {
            // Unique ids, some overlapping the small numbers relays store.
            let relay = pool_relay_id(u)?;
            let wire = pool_wire(u, s, relay)?;
            let first = if u.arbitrary()? {
                u.int_in_range(1..=30)?
            } else {
                1 << 40
            };
            PoolAction::Flood {
                relay,
                wire,
                first,
                // Up to a couple of hundred: far past any dedup bound here (8), and the
                // frames are most of an input's work.
                count: u.int_in_range(1..=400)? / 2 + 1,
                per_ms: u.int_in_range(1..=200)?,
            }
        }
        16 if u.ratio(1, 3)? => PoolAction::Hang(pool_relay_id(u)?, u.arbitrary()?),
        16 => PoolAction::Mute(pool_relay_id(u)?, u.arbitrary()?),
        _ => PoolAction::Relay(pool_relay_id(u)?, *u.choose(RELAY_CHANGES)?),
    })
}

// ---- sse_session ------------------------------------------------------------------------------

/// Drive an [`SseSim`] with up to [`MAX_OPS`] inputs decoded from `data` — its own server
/// model answering (or not), plus raw responses, body bytes (realistic and raw, header-unsafe
/// ids included), ends, errors, unbuildable requests, stale and never-issued epochs, time
/// steps that only move forward — with the simulator's invariants checked after every input.
///
/// # Panics
/// On any contract violation or panic in the session.
pub fn sse_session(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((config, seed, server, request)) = sse_world(&mut u) else {
        return;
    };
    let mut s = SseSim::with_request(config, request, seed, server);
    s.keep_transcript(false);
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        if sse_step(&mut u, &mut s).is_err() {
            break;
        }
    }
}

fn sse_world(u: &mut Unstructured<'_>) -> Result<(SseConfig, u64, ServerConfig, Request)> {
    let mut config = SseConfig::default();
    config.reconnect = BackoffPolicy {
        max_attempts: if u.ratio(1, 3)? {
            Some(u.int_in_range(1..=4)?)
        } else {
            None
        },
        ..config.reconnect
    };
    config.stable_after = Duration::from_secs(u.int_in_range(0..=60)?);
    config.connect_timeout = Duration::from_secs(u.int_in_range(1..=60)?);
    config.idle_timeout = if u.ratio(1, 4)? {
        None
    } else {
        Some(Duration::from_secs(u.int_in_range(1..=120)?))
    };
    config.max_queued_events = u.int_in_range(1..=8)?;
    config.parser.max_line_len = u.int_in_range(1..=256)?;
    config.parser.max_event_len = u.int_in_range(1..=512)?;
    config.parser.max_queued = u.int_in_range(1..=4)?;
    config.parser.max_sendable_id_len = u.int_in_range(0..=16)?;
    let server = ServerConfig {
        latency: Duration::from_millis(u.int_in_range(0..=500)?),
        heartbeat_every: if u.arbitrary()? {
            Some(Duration::from_secs(u.int_in_range(1..=60)?))
        } else {
            None
        },
        ingress_idle_timeout: if u.arbitrary()? {
            Some(Duration::from_secs(u.int_in_range(1..=120)?))
        } else {
            None
        },
        publish_at: (0..u.int_in_range(0..=8)?)
            .map(|i| Ok(Duration::from_secs(i * 5 + u.int_in_range(0..=5)?)))
            .collect::<Result<_>>()?,
        answers: u.ratio(1, 2)?,
        ..ServerConfig::default()
    };
    let seed = u.arbitrary()?;
    // Last, so older corpus entries (which run out of bytes here) still decode to a GET.
    config.max_unsent_retries = u.int_in_range(0..=6)?;
    config.max_same_id_resumes = u.int_in_range(0..=12)?;
    config.max_error_body = u.int_in_range(0..=64)?;
    let request = sse_request(u)?;
    Ok((config, seed, server, request))
}

/// A GET (the most likely choice when the input ran out), or a POST with one of the resume
/// policies and end rules.
fn sse_request(u: &mut Unstructured<'_>) -> Result<Request> {
    let mut request = match u.int_in_range(0..=3)? {
        0 => return Ok(Request::get()),
        1 => Request::post("{}"),
        2 => Request::post("{}").resume(Resume::LastEventId {
            method: "GET".to_owned(),
        }),
        _ => Request::post("{}").resume(Resume::SameRequest),
    };
    if u.arbitrary()? {
        request = request.end_on_data("[DONE]");
    }
    if u.arbitrary()? {
        request = request.fail_on_event("error");
    }
    if u.arbitrary()? {
        request = request.repeatable(true);
    }
    Ok(request)
}

fn sse_step(u: &mut Unstructured<'_>, s: &mut SseSim) -> Result<()> {
    // Time only moves forward.
    let now = s.now() + Duration::from_millis(u.int_in_range(0..=2_000)?);
    let epoch = pick_epoch(u, s)?;
    match u.int_in_range(0..=11)? {
        0 => s.connect_at(now),
        1 => s.disconnect_at(now),
        2 | 3 => {
            let status = *u.choose(&[200, 200, 200, 204, 404, 408, 429, 500, 503, 301])?;
            let status = if u.ratio(1, 8)? {
                u.arbitrary()?
            } else {
                status
            };
            let content_type = content_type(u)?;
            let retry_after = if u.arbitrary()? {
                Some(Duration::from_secs(u.int_in_range(0..=1_000)?))
            } else {
                None
            };
            let _ = s.handle_response(now, epoch, status, content_type.as_deref(), retry_after);
        }
        4..=6 => {
            let bytes = body(u)?;
            // Offered until all are taken: each offer takes bytes or queues an event, which
            // the simulator drains, so this ends within one offer per byte and event.
            let mut rest: &[u8] = &bytes;
            let mut offers = 0;
            while let Ok(n) = s.handle_bytes(now, epoch, rest) {
                rest = &rest[n..];
                offers += 1;
                assert!(
                    offers <= 2 * bytes.len() + 2,
                    "handle_bytes made no progress"
                );
                if rest.is_empty() {
                    break;
                }
            }
        }
        7 => {
            let _ = s.handle_eof(now, epoch);
        }
        8 => {
            let loss = *u.choose(&[
                SocketLoss::ConnectionRefused,
                SocketLoss::TlsRejected,
                SocketLoss::HandshakeFailed,
                SocketLoss::NetworkError,
            ])?;
            let _ = s.handle_error(now, epoch, loss);
        }
        9 => {
            let detail = short_string(u)?;
            let _ = s.handle_request_invalid(now, epoch, &detail);
        }
        10 => {
            // The server model's own behaviour, with a scripted reply now and then.
            if u.ratio(1, 3)? {
                s.script([Reply::Body(body(u)?)]);
            }
            s.run_for(Duration::from_millis(u.int_in_range(0..=60_000)?));
        }
        // One in four timeouts is the application's lifecycle instead, or the stream
        // vanishing unannounced (drawn here so the other inputs keep their bytes).
        _ if u.ratio(1, 4)? => match u.int_in_range(0..=5)? {
            0 => s.lifecycle_at(now, Lifecycle::Suspended),
            1 => s.lifecycle_at(now, Lifecycle::Resumed),
            2 => {
                let old_path_gone = u.arbitrary()?;
                s.lifecycle_at(now, Lifecycle::NetworkChanged { old_path_gone });
            }
            3 => s.lifecycle_at(now, Lifecycle::Online(u.arbitrary()?)),
            4 => s.vanish(),
            _ => s.lifecycle_at(now, Lifecycle::Online(true)),
        },
        _ => {
            // A driver that slept to the deadline (or beyond) and passes a fresh `now`.
            let extra = Duration::from_millis(u.int_in_range(0..=3_000)?);
            s.handle_timeout(s.poll_timeout().unwrap_or(now).max(now) + extra);
        }
    }
    Ok(())
}

fn pick_epoch(u: &mut Unstructured<'_>, s: &SseSim) -> Result<Epoch> {
    let current = s.session().link().epoch().0;
    Ok(Epoch(match u.int_in_range(0..=7)? {
        0..=4 => current,
        5 => current.saturating_sub(1),
        6 => current + 1,
        _ => u.arbitrary()?,
    }))
}

fn content_type(u: &mut Unstructured<'_>) -> Result<Option<String>> {
    Ok(match u.int_in_range(0..=6)? {
        0..=2 => Some("text/event-stream".to_owned()),
        3 => Some(" Text/Event-Stream ; charset=utf-8".to_owned()),
        4 => Some("text/html".to_owned()),
        5 => None,
        _ => Some(short_string(u)?),
    })
}

fn body(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let n = u.int_in_range(1..=4)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let piece: Cow<'static, [u8]> = match u.int_in_range(0..=10)? {
            0 => b"data: hello\n\n".as_slice().into(),
            1 => b": heartbeat\n\n".as_slice().into(),
            2 => format!(
                "id: {}\nevent: change\ndata: {{}}\n\n",
                u.arbitrary::<u16>()?
            )
            .into_bytes()
            .into(),
            3 => format!("retry: {}\n", u.arbitrary::<u32>()?)
                .into_bytes()
                .into(),
            4 => b"data: "
                .iter()
                .chain([b'x'; 300].iter())
                .copied()
                .collect::<Vec<_>>()
                .into(),
            5 => b"\xEF\xBB\xBFdata: bom\r\n\r\n".as_slice().into(),
            6 => b"\r".as_slice().into(),
            7 => {
                // An id a header cannot carry (a control byte or DEL), or a long one.
                let bad = *u.choose(&[0x01u8, 0x08, 0x0B, 0x1F, 0x7F, b'x'])?;
                let len = u.int_in_range(0..=20)?;
                let mut id = b"id: a".to_vec();
                id.extend(std::iter::repeat_n(bad, len));
                id.extend_from_slice(b"\ndata: d\n\n");
                id.into()
            }
            _ => {
                let len = u.int_in_range(0..=64)?;
                u.bytes(len)?.to_vec().into()
            }
        };
        out.extend_from_slice(&piece);
    }
    Ok(out)
}

// ---- checkpoint -------------------------------------------------------------------------------

/// Restore `data` as each kind of checkpoint, under small bounds. A restore may fail (with a
/// typed error); one that succeeds gives a session whose bookkeeping is consistent, and stays
/// so once it connects, opens a socket and runs its timers.
///
/// # Panics
/// On a panic inside a restore, or an inconsistent restored session.
pub fn checkpoint(data: &[u8]) {
    use tether_core::nostr::{RelayCheckpoint, RelaySession};
    use tether_core::pool::{PoolCheckpoint, RelayPool};
    use tether_core::sse::{SseCheckpoint, SseSession};

    let now = Instant::from_millis(1_000);
    let unix = crate::sim::UNIX_START;
    let mut relay = RelayConfig::default();
    relay.max_registered = 8;
    relay.max_outbox = 4;
    if let Some(c) = relay.catch_up.as_mut() {
        c.memory = 4;
        c.memory_total = 10;
    }
    if let Ok(saved) = RelayCheckpoint::from_json(data) {
        if let Ok(mut session) = RelaySession::restore(relay.clone(), 1, &saved, now, unix) {
            check(session.check_consistency(), "restored relay session");
            session.connect(now);
            if let Some(tether_core::nostr::Transmit::Open { epoch }) = session.poll_transmit() {
                let _ = session.handle_open(now, epoch);
            }
            for step in 1..=4u64 {
                while session.poll_transmit().is_some() || session.poll_event().is_some() {}
                session.handle_timeout(now + Duration::from_secs(step * 30));
                check(
                    session.check_consistency(),
                    "a restored relay session, running",
                );
            }
        }
    }
    if let Ok(saved) = PoolCheckpoint::from_json(data) {
        let mut config = PoolConfig::default();
        config.relay = relay;
        config.max_relays = 4;
        config.max_subscriptions = 4;
        config.dedup_capacity = 4;
        if let Ok(mut pool) = RelayPool::restore(config, 1, &saved, now, unix) {
            check(pool.check_consistency(), "restored pool");
            for step in 1..=4u64 {
                while pool.poll_transmit().is_some() || pool.poll_event().is_some() {}
                pool.handle_timeout(now + Duration::from_secs(step * 30));
                check(pool.check_consistency(), "a restored pool, running");
            }
        }
    }
    if let Ok(saved) = SseCheckpoint::from_json(data) {
        let request = saved.request();
        if let Ok(mut session) = SseSession::restore(SseConfig::default(), request, &saved, 1) {
            check(session.check_consistency(), "restored SSE session");
            session.connect(now);
            while session.poll_transmit().is_some() || session.poll_event().is_some() {}
            check(
                session.check_consistency(),
                "a restored SSE session, connected",
            );
        }
    }
}

fn check(result: std::result::Result<(), String>, what: &str) {
    if let Err(e) = result {
        panic!("{what}: {e}");
    }
}
