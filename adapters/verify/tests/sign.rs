//! Events signed by [`Keys`] verify with the `nostr` crate and with [`Verifier`], and match
//! events signed by an independent BIP-340 implementation (tether-py's former pure-Python
//! signer) byte for byte.

use nostr::{Event, JsonUtil};
use tether_verify::{Keys, Verifier, AUTH_KIND};

fn key(last: u8) -> Keys {
    let mut secret = [0u8; 32];
    secret[31] = last;
    Keys::from_secret_bytes(&secret).expect("a valid secret key")
}

fn tags(tags: &[&[&str]]) -> Vec<Vec<String>> {
    tags.iter()
        .map(|tag| tag.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

#[test]
fn a_signed_note_verifies_with_the_nostr_crate_and_with_the_verifier() {
    let keys = key(3);
    let content = "line\nquote\" backslash\\ tab\t cr\r bs\u{8} ff\u{c} \u{1} ü 😀 </script>";
    let aux = [7u8; 32];
    let raw = keys.sign_event(
        1_700_000_000,
        1,
        &tags(&[&["t", "tether"], &["p", keys.public_key_hex()]]),
        content,
        Some(&aux),
    );
    assert_eq!(Verifier::new().verify(&raw), Ok(()));
    let event = Event::from_json(&raw).expect("the nostr crate parses it");
    event.verify().expect("the nostr crate verifies it");
    assert_eq!(event.content, content);
    assert_eq!(event.pubkey.to_hex(), keys.public_key_hex());
    assert_eq!(event.created_at.as_secs(), 1_700_000_000);
    assert_eq!(event.kind.as_u16(), 1);
}

#[test]
fn the_auth_answer_has_nip42_shape() {
    let keys = key(5);
    let raw = keys.sign_auth("wss://relay.example.com/", "c-1", 1_700_000_001, None);
    let event = Event::from_json(&raw).expect("parses");
    event.verify().expect("verifies");
    assert_eq!(event.kind.as_u16(), AUTH_KIND);
    assert_eq!(event.content, "");
    let value: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        value["tags"],
        serde_json::json!([["relay", "wss://relay.example.com/"], ["challenge", "c-1"]])
    );
    // The fields in NIP-01's order.
    let at: Vec<usize> = [
        "id",
        "pubkey",
        "created_at",
        "kind",
        "tags",
        "content",
        "sig",
    ]
    .iter()
    .map(|name| raw.find(&format!("\"{name}\":")).expect(name))
    .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{raw}");
}

/// Computed with tether-py's former pure-Python BIP-340 signer (aux_rand all zeros), which
/// was written from the BIP-340 specification: two implementations agree on every byte.
#[test]
fn deterministic_events_match_an_independent_signer() {
    let note = key(3).sign_event(
        1_700_000_000,
        1,
        &tags(&[
            &["t", "tether"],
            &["e", &"00".repeat(32), "wss://r.example"],
        ]),
        "note \u{2615} \"q\"\n\t\\ </script> \u{1}",
        None,
    );
    assert_eq!(
        note,
        concat!(
            r#"{"id":"791a821634c9e0e4c4f387d8bb7fb7d306d570030fa98c897b8539126f5d7f6a","#,
            r#""pubkey":"f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9","#,
            r#""created_at":1700000000,"kind":1,"tags":[["t","tether"],["e","#,
            r#""0000000000000000000000000000000000000000000000000000000000000000","#,
            r#""wss://r.example"]],"content":"note ☕ \"q\"\n\t\\ </script> \u0001","#,
            r#""sig":"f1beaf9a92650b810b8d04b91cb9ef5e95dd35222a3de203f86b65dc042e8236"#,
            r#"0267a5ce943b95e5dcd27c596e9f1eaaebdd28cfa4159fbe8bc2b94858fda3e6"}"#,
        )
    );
}
