//! The `relay_frame` target: arbitrary bytes into the NIP-01 decoders (both directions).

use tether_core::nostr::message::{
    ClientMessage, FrameError, RawEvent, RelayMessage, DEFAULT_MAX_FRAME, MAX_SUB_ID_CHARS,
};

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
