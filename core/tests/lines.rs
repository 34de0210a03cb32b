//! The output vocabulary's review surface: one line per variant, as the CLI prints it (a
//! subscription by its argument index, a relay by its URL, or no relay field for one relay)
//! and as the C ABI hands it (ids, with handles). A change here is a change to what users'
//! scripts read.

use std::borrow::Cow;
use std::time::Duration;

use tether_core::line::nostr::{Line, TransmitLine};
use tether_core::line::sse::Line as SseLine;
use tether_core::line::{Ids, Label, Labels};
use tether_core::nostr::message::{EventId, FrameError};
use tether_core::nostr::{
    Carries, CatchUpMethod, ChallengeId, Disconnect, Event, Rejection, SubscriptionId, Transmit,
};
use tether_core::pool::{Missing, Outcome, PoolEvent, PublishOutcome, RelayId, SubId};
use tether_core::sse::session::{CloseReason, DropReason, EndReason, FailReason};
use tether_core::sse::{Event as SseEvent, Message, ParseError, Progress};
use tether_core::{Epoch, Instant, SocketLoss};

/// The CLI's labels: subscription `n` is `"n"`; relay `r` is its URL, or absent (one relay).
struct Cli {
    relays: bool,
}

impl Labels for Cli {
    fn sub(&self, sub: u64) -> Label<'_> {
        Label::Name(Cow::Owned(sub.to_string()))
    }

    fn relay(&self, relay: u32) -> Option<Label<'_>> {
        self.relays
            .then(|| Label::Name(Cow::Owned(format!("wss://relay{relay}.example"))))
    }
}

const NOW: Instant = Instant::from_millis(10_000);

fn at(ms: u64) -> Instant {
    NOW.saturating_add(Duration::from_millis(ms))
}

fn relay_events() -> Vec<Event> {
    let sub = SubscriptionId(0);
    let id = EventId([0xab; 32]);
    vec![
        Event::Connected,
        Event::Disconnected {
            reconnect_at: Some(at(1_500)),
            why: Disconnect::Lost(SocketLoss::ClosedByPeer { code: Some(1006) }),
        },
        Event::Disconnected {
            reconnect_at: None,
            why: Disconnect::Requested,
        },
        Event::Received {
            sub,
            id,
            raw: "{\"id\": \"ab\",\n \"kind\": 1}".into(),
        },
        Event::CaughtUp {
            sub,
            method: CatchUpMethod::Negentropy,
            exact_since: 1_700_000_000,
            recovered: 3,
        },
        Event::Eose { sub },
        Event::Closed {
            sub,
            reason: "blocked: \"no\"".into(),
            attempts: 2,
        },
        Event::Retrying {
            sub,
            at: at(3_200),
            attempt: 1,
        },
        Event::Queued { sub },
        Event::EoseTimeout { sub },
        Event::RateLimited { until: at(30_000) },
        Event::SubscriptionLimit { max: 20 },
        Event::Notice {
            message: "slow down".into(),
        },
        Event::AuthChallenge {
            challenge: "c1".into(),
            id: ChallengeId(7),
        },
        Event::Authenticated,
        Event::AuthFailed {
            reason: "auth-required: bad".into(),
        },
        Event::Published { id },
        Event::Rejected {
            id,
            reason: Rejection::Refused {
                message: "blocked".into(),
            },
        },
        Event::Rejected {
            id,
            reason: Rejection::TooLarge {
                len: 70_000,
                max: 65_536,
            },
        },
        Event::Rejected {
            id,
            reason: Rejection::TimedOut,
        },
        Event::PeerError {
            error: FrameError::UnknownVerb("HELLO".into()),
        },
    ]
}

fn pool_events() -> Vec<PoolEvent> {
    let sub = SubId(1);
    let relay = RelayId(2);
    let id = EventId([0xcd; 32]);
    vec![
        PoolEvent::Received {
            sub,
            relay,
            id,
            raw: "{\"id\":\"cd\"}".into(),
        },
        PoolEvent::CaughtUp {
            sub,
            relay,
            method: CatchUpMethod::Since,
            exact_since: 5,
            recovered: 0,
        },
        PoolEvent::Eose { sub, relay },
        PoolEvent::RelayClosed {
            sub,
            relay,
            reason: "error: shutting down".into(),
            attempts: 0,
        },
        PoolEvent::Complete {
            sub,
            outcome: Outcome::Complete,
        },
        PoolEvent::Complete {
            sub,
            outcome: Outcome::Partial {
                missing: vec![(RelayId(3), Missing::NoEose)],
            },
        },
        PoolEvent::Ended {
            sub,
            reasons: vec![(relay, "gone".into())],
        },
        PoolEvent::Invalid {
            sub,
            relay,
            id,
            reason: "bad signature".into(),
        },
        PoolEvent::Published { id, relay },
        PoolEvent::Rejected {
            id,
            relay,
            reason: "pow: 20 bits needed".into(),
        },
        PoolEvent::PublishDone {
            id,
            outcome: PublishOutcome {
                accepted: vec![RelayId(0)],
                rejected: vec![(RelayId(1), "blocked".into())],
                pending: vec![RelayId(2)],
                urls: vec![(RelayId(2), "wss://routed.example".into())],
            },
        },
        PoolEvent::Relay {
            relay,
            sub: Some(sub),
            event: Event::Retrying {
                sub: SubscriptionId(9),
                at: at(800),
                attempt: 2,
            },
        },
    ]
}

fn transmits() -> Vec<Transmit> {
    vec![
        Transmit::Open {
            epoch: Epoch(1),
            url: None,
        },
        Transmit::Send {
            text: "[\"REQ\",\"0:1\",{}]".into(),
            carries: Carries::Req(SubscriptionId(0)),
        },
        Transmit::Send {
            text: "[\"AUTH\",{}]".into(),
            carries: Carries::Auth(EventId([0x01; 32])),
        },
        Transmit::Ping,
        Transmit::Close { epoch: Epoch(1) },
        Transmit::FetchInfo,
    ]
}

fn sse_events() -> Vec<SseEvent> {
    let progress = Progress::new(3, "e3");
    vec![
        SseEvent::Open,
        SseEvent::Message(Message {
            event: "message".into(),
            data: "hi\nthere".into(),
            id: "e3".into(),
        }),
        SseEvent::Reconnecting {
            why: DropReason::Status(503),
            attempt: 2,
            at: at(2_000),
        },
        SseEvent::Reconnecting {
            why: DropReason::NetworkError(SocketLoss::NetworkError),
            attempt: 1,
            at: at(250),
        },
        SseEvent::Reconnected {
            gap: Duration::from_millis(1_234),
        },
        SseEvent::Reissued {
            gap: Duration::from_millis(50),
            attempts: 2,
        },
        SseEvent::ParseError(ParseError::LineTooLong { limit: 8 }),
        SseEvent::Failed {
            why: FailReason::Status(401),
        },
        SseEvent::Failed {
            why: FailReason::Rejected {
                status: 400,
                body: "no".into(),
                progress: progress.clone(),
            },
        },
        SseEvent::Failed {
            why: FailReason::Interrupted {
                why: DropReason::Eof,
                progress: progress.clone(),
            },
        },
        SseEvent::Ended {
            why: EndReason::Event("done".into()),
            progress,
        },
        SseEvent::Closed {
            why: CloseReason::NoContent,
        },
    ]
}

fn json<T: serde::Serialize>(line: &T) -> String {
    serde_json::to_string(line).expect("a line serialises")
}

#[test]
fn one_line_per_variant() {
    let mut out = String::new();
    let one = Cli { relays: false };
    let many = Cli { relays: true };
    out.push_str("# relay session, as `tether req` with one relay prints it\n");
    for event in &relay_events() {
        out.push_str(&json(&Line::relay_event(event, NOW, None, &one)));
        out.push('\n');
    }
    out.push_str("\n# relay session, as the C ABI hands it (ids, handles)\n");
    for event in &relay_events() {
        out.push_str(&json(&Line::relay_event(event, NOW, None, &Ids)));
        out.push('\n');
    }
    out.push_str("\n# pool, as `tether req` with several relays prints it\n");
    for event in &pool_events() {
        out.push_str(&json(&Line::pool_event(event, NOW, &many)));
        out.push('\n');
    }
    out.push_str("\n# pool, as the C ABI hands it\n");
    for event in &pool_events() {
        out.push_str(&json(&Line::pool_event(event, NOW, &Ids)));
        out.push('\n');
    }
    out.push_str("\n# relay transmits (C ABI; a pool's carry their relay)\n");
    for transmit in &transmits() {
        out.push_str(&json(&TransmitLine::new(transmit, None)));
        out.push('\n');
    }
    out.push_str(&json(&TransmitLine::new(
        &Transmit::Ping,
        Some(Label::Id(2)),
    )));
    out.push_str("\n\n# SSE, as `tether sse` prints it\n");
    for event in &sse_events() {
        out.push_str(&json(&SseLine::new(event, NOW, "e2")));
        out.push('\n');
    }
    insta::assert_snapshot!(out);
}
