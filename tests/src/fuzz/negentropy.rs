//! The `negentropy` target: a session catching up by NIP-77 against a relay that speaks it,
//! with arbitrary `NEG-MSG`, `NEG-ERR` and NOTICE frames injected.

use std::time::Duration;

use tether_core::nostr::message::RelayMessage;
use tether_core::nostr::{Priority, RelayConfig};
use tether_core::Instant;

use crate::relay_model::{Nip77, RelayModel, StoredEvent};
use crate::sim::{Action, Sim};

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
