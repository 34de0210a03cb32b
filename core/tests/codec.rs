//! NIP-01 codec: round trips, byte-exact event pass-through, typed errors, no panics, and a
//! reviewed snapshot of a corpus of real-looking frames.

use proptest::prelude::*;
use serde_json::value::RawValue;
use tether_core::nostr::message::{
    ClientMessage, EventId, FrameError, RelayMessage, DEFAULT_MAX_FRAME,
};

const ID: &str = "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36";
const EVENT: &str = r#"{"id":"5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36","pubkey":"f7234bd4c1394dda46d09f35bd384dd30cc552ad5541990f98844fb06676e9ca","created_at":1710000000,"kind":1,"tags":[["e","b3e392b11f5d4f28321cedd09303a748acfd0487aea5a7450b3481c60b6e4f87","wss://relay.example.com"],["p","97c70a44366a6535c145b333f973ea86dfdc2d7a99da618c40c64705ad98e322"]],"content":"gm ☀️ — \"quoted\" \\ back\nslash","sig":"908a15e46fb4d8675bab026fc230a0e3542bfade63da02d542fb78b2a8513fcd0092619a2c8c1221e581946e0191f2af505dfdf8657a414dbca329186f009262"}"#;

fn decode(text: &str) -> Result<RelayMessage<'_>, FrameError> {
    RelayMessage::decode(text, DEFAULT_MAX_FRAME)
}

#[test]
fn every_relay_frame_round_trips() {
    let id = EventId::from_hex(ID).unwrap();
    let frames = [
        format!(r#"["EVENT","sub-1",{EVENT}]"#),
        r#"["EOSE","sub-1"]"#.to_owned(),
        r#"["CLOSED","sub-1","rate-limited: retry in 3s"]"#.to_owned(),
        format!(r#"["OK","{ID}",true,""]"#),
        format!(r#"["OK","{ID}",false,"duplicate: have it"]"#),
        r#"["NOTICE","hello \"friend\""]"#.to_owned(),
        r#"["AUTH","challenge-éé"]"#.to_owned(),
        r#"["COUNT","c",{"count":42}]"#.to_owned(),
    ];
    for frame in &frames {
        let msg = decode(frame).unwrap_or_else(|e| panic!("{frame}: {e}"));
        assert_eq!(&msg.encode(), frame);
        assert_eq!(decode(&msg.encode()).unwrap(), msg);
    }
    let RelayMessage::Ok { event_id, .. } = decode(&frames[3]).unwrap() else {
        panic!()
    };
    assert_eq!(event_id, id);
    assert_eq!(event_id.to_string(), ID);
}

#[test]
fn event_bytes_pass_through_unchanged_whatever_the_spacing() {
    for frame in [
        format!(r#"["EVENT","s",{EVENT}]"#),
        format!("[ \"EVENT\" ,\n \"s\" ,\t{EVENT}\r\n ]  "),
        format!(r#"["EVENT","s,]\"x",{EVENT}]"#),
    ] {
        let RelayMessage::Event { event, .. } = decode(&frame).unwrap() else {
            panic!("{frame}")
        };
        assert_eq!(event.json(), EVENT);
        assert_eq!(event.id().to_string(), ID);
        assert_eq!(event.created_at(), 1_710_000_000);
    }
}

#[test]
fn escaped_sub_id_is_unescaped() {
    let frame = format!(r#"["EVENT","a\"b\u00e9",{EVENT}]"#);
    let RelayMessage::Event { sub, .. } = decode(&frame).unwrap() else {
        panic!()
    };
    assert_eq!(sub, "a\"bé");
}

#[test]
fn every_client_frame_round_trips() {
    let f1 = RawValue::from_string(r#"{"kinds":[1],"limit":10}"#.into()).unwrap();
    let f2 = RawValue::from_string(r#"{"authors":["abc"]}"#.into()).unwrap();
    let ev = RawValue::from_string(EVENT.into()).unwrap();
    let msgs = [
        ClientMessage::Req {
            sub: "q1".into(),
            filters: vec![&f1, &f2],
        },
        ClientMessage::Count {
            sub: "c1".into(),
            filters: vec![&f1],
        },
        ClientMessage::Close { sub: "q1".into() },
        ClientMessage::Event { event: &ev },
        ClientMessage::Auth { event: &ev },
    ];
    let expected = [
        r#"["REQ","q1",{"kinds":[1],"limit":10},{"authors":["abc"]}]"#.to_owned(),
        r#"["COUNT","c1",{"kinds":[1],"limit":10}]"#.to_owned(),
        r#"["CLOSE","q1"]"#.to_owned(),
        format!(r#"["EVENT",{EVENT}]"#),
        format!(r#"["AUTH",{EVENT}]"#),
    ];
    for (msg, want) in msgs.iter().zip(&expected) {
        let text = msg.encode();
        assert_eq!(&text, want);
        assert_eq!(
            ClientMessage::decode(&text, DEFAULT_MAX_FRAME)
                .unwrap()
                .encode(),
            text
        );
    }
}

#[test]
fn malformed_relay_frames_name_what_is_wrong() {
    use FrameError::*;
    let long_sub = "x".repeat(65);
    let cases: Vec<(String, FrameError)> = vec![
        (r#"{"EVENT":1}"#.into(), NotArray),
        ("\"EOSE\"".into(), NotArray),
        ("[]".into(), MissingVerb),
        ("[1,2]".into(), MissingVerb),
        (r#"["HELLO","x"]"#.into(), UnknownVerb("HELLO".into())),
        (
            r#"["EOSE"]"#.into(),
            Arity {
                verb: "EOSE",
                expected: 2,
                got: 1,
            },
        ),
        (
            r#"["EOSE","a","b"]"#.into(),
            Arity {
                verb: "EOSE",
                expected: 2,
                got: 3,
            },
        ),
        (
            r#"["CLOSED","a"]"#.into(),
            Arity {
                verb: "CLOSED",
                expected: 3,
                got: 2,
            },
        ),
        (
            r#"["EVENT","a"]"#.into(),
            Arity {
                verb: "EVENT",
                expected: 3,
                got: 2,
            },
        ),
        (
            format!(r#"["EVENT","a",{EVENT},1]"#),
            Arity {
                verb: "EVENT",
                expected: 3,
                got: 4,
            },
        ),
        (
            r#"["EOSE",7]"#.into(),
            WrongType {
                verb: "EOSE",
                index: 1,
                expected: "a subscription id string",
            },
        ),
        (
            r#"["CLOSED","a",null]"#.into(),
            WrongType {
                verb: "CLOSED",
                index: 2,
                expected: "a string",
            },
        ),
        (
            r#"["EVENT","a","not an object"]"#.into(),
            WrongType {
                verb: "EVENT",
                index: 2,
                expected: "an event object",
            },
        ),
        (
            format!(r#"["OK","{ID}","true",""]"#),
            WrongType {
                verb: "OK",
                index: 2,
                expected: "a boolean",
            },
        ),
        (
            r#"["OK","abc",true,""]"#.into(),
            WrongType {
                verb: "OK",
                index: 1,
                expected: "a 64-char hex event id",
            },
        ),
        (format!(r#"["EOSE","{long_sub}"]"#), SubId { chars: 65 }),
        (r#"["EOSE",""]"#.into(), SubId { chars: 0 }),
        (
            r#"["EVENT","a",{"created_at":1}]"#.into(),
            Event("has no id"),
        ),
        (
            format!(
                r#"["EVENT","a",{{"id":"{}","created_at":1}}]"#,
                ID.to_uppercase()
            ),
            Event("id is not 64 lowercase hex characters"),
        ),
        (
            format!(r#"["EVENT","a",{{"id":"{ID}"}}]"#),
            Event("has no created_at"),
        ),
        (
            format!(r#"["EVENT","a",{{"id":"{ID}","created_at":-5}}]"#),
            Event("created_at is not a non-negative integer"),
        ),
        (
            r#"["COUNT","a",{"n":1}]"#.into(),
            WrongType {
                verb: "COUNT",
                index: 2,
                expected: "an object with a count",
            },
        ),
    ];
    for (frame, want) in cases {
        assert_eq!(decode(&frame), Err(want), "{frame}");
    }
}

#[test]
fn syntax_errors_and_oversize_frames() {
    assert!(matches!(decode("not json"), Err(FrameError::Json(_))));
    assert!(matches!(decode(r#"["EOSE","a""#), Err(FrameError::Json(_))));
    assert!(matches!(
        decode(r#"["EOSE","a"] trailing"#),
        Err(FrameError::Json(_))
    ));
    let big = format!(r#"["NOTICE","{}"]"#, "a".repeat(100));
    assert_eq!(
        RelayMessage::decode(&big, 50),
        Err(FrameError::TooLarge {
            len: big.len(),
            max: 50
        })
    );
    let verb = "V".repeat(10_000);
    let Err(FrameError::UnknownVerb(v)) = decode(&format!(r#"["{verb}"]"#)) else {
        panic!()
    };
    assert_eq!(v.len(), 32, "echoed verbs are truncated");
}

#[test]
fn malformed_client_frames() {
    let d = |t: &str| ClientMessage::decode(t, DEFAULT_MAX_FRAME).map(|m| m.encode());
    assert_eq!(
        d(r#"["REQ","a"]"#),
        Err(FrameError::Arity {
            verb: "REQ",
            expected: 3,
            got: 2
        })
    );
    assert_eq!(
        d(r#"["REQ","a",1]"#),
        Err(FrameError::WrongType {
            verb: "REQ",
            index: 2,
            expected: "a filter object"
        })
    );
    assert_eq!(
        d(r#"["CLOSE"]"#),
        Err(FrameError::Arity {
            verb: "CLOSE",
            expected: 2,
            got: 1
        })
    );
    assert_eq!(
        d(r#"["EVENT",[]]"#),
        Err(FrameError::WrongType {
            verb: "EVENT",
            index: 1,
            expected: "an object"
        })
    );
    assert_eq!(d(r#"{"a":1}"#), Err(FrameError::NotArray));
    assert_eq!(
        d(r#"["NOPE"]"#),
        Err(FrameError::UnknownVerb("NOPE".into()))
    );
}

proptest! {
    #[test]
    fn arbitrary_strings_never_panic(s in ".{0,300}") {
        let _ = decode(&s);
        let _ = ClientMessage::decode(&s, DEFAULT_MAX_FRAME);
    }

    #[test]
    fn event_ids_are_exactly_64_lowercase_hex_digits(
        s in prop_oneof!["[0-9a-f]{64}", "[0-9a-f]{60}[0-9a-fA-Fg/:`@ ]{2,6}", "[0-9a-fA-Fg/:`@ ]{62,66}"],
    ) {
        let expected = (s.len() == 64
            && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| {
            let mut id = [0u8; 32];
            for (i, byte) in id.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
            }
            EventId(id)
        });
        prop_assert_eq!(EventId::from_hex(&s), expected);
        if let Some(id) = expected {
            prop_assert_eq!(id.to_string(), s);
        }
    }

    #[test]
    fn frame_shaped_strings_never_panic(
        verb in prop_oneof![Just("EVENT"), Just("EOSE"), Just("CLOSED"), Just("OK"), Just("NOTICE"), Just("AUTH"), Just("COUNT"), Just("REQ")],
        parts in proptest::collection::vec(prop_oneof![Just("\"x\"".to_owned()), Just("1".to_owned()), Just("{}".to_owned()), Just("[]".to_owned()), Just("true".to_owned()), Just(EVENT.to_owned()), Just(format!("\"{ID}\"")), "[a-z\\\\\"{}\\[\\],: ]{0,12}"], 0..5),
    ) {
        let frame = format!("[\"{verb}\",{}]", parts.join(","));
        let _ = decode(&frame);
        let _ = ClientMessage::decode(&frame, DEFAULT_MAX_FRAME);
    }
}

#[test]
fn corpus_snapshot() {
    let corpus = [
        format!(r#"["EVENT","feed",{EVENT}]"#),
        r#"["EVENT","dm",{"id":"0000000000000000000000000000000000000000000000000000000000000001","pubkey":"aa","created_at":0,"kind":4,"tags":[],"content":"","sig":"bb"}]"#.to_owned(),
        r#"["EOSE","feed"]"#.to_owned(),
        r#"["CLOSED","feed","rate-limited: too many REQs, retry in 3s"]"#.to_owned(),
        r#"["CLOSED","dm","auth-required: we only serve DMs to their recipients"]"#.to_owned(),
        format!(r#"["OK","{ID}",false,"pow: difficulty 20 required"]"#),
        r#"["NOTICE","Subscription error: Maximum concurrent subscription count reached"]"#.to_owned(),
        r#"["AUTH","5bc8b2e1-2a3f-4a1b-9c4e-0d1f2e3a4b5c"]"#.to_owned(),
        r#"["COUNT","n",{"count":238}]"#.to_owned(),
        r#"["EVENT","feed",{"id":"5C83","created_at":1}]"#.to_owned(),
        r#"["EOSE"]"#.to_owned(),
        "garbage".to_owned(),
    ];
    let out: Vec<String> = corpus.iter().map(|f| format!("{:#?}", decode(f))).collect();
    insta::assert_snapshot!(out.join("\n"));
}
