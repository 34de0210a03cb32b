//! Events signed by the `nostr` crate verify; every kind of tampering is caught and named.

use nostr::{EventBuilder, JsonUtil, Keys, SecretKey, Tag};
use sha2::{Digest, Sha256};
use tether_verify::{Invalid, Verifier};

fn keys() -> Keys {
    let secret = SecretKey::from_hex(&"01".repeat(32)).expect("a valid secret key");
    Keys::new(secret)
}

/// A note whose content needs every escape NIP-01 names, plus non-ASCII and a tag.
fn signed() -> String {
    EventBuilder::text_note("line\nquote\" backslash\\ tab\t cr\r bs\u{8} ff\u{c} ü 😀")
        .tag(Tag::parse(["t", "tether"]).expect("a tag"))
        .sign_with_keys(&keys())
        .expect("signed")
        .as_json()
}

fn field(raw: &str, name: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(raw).expect("json");
    value[name].as_str().expect("a string field").to_owned()
}

#[test]
fn an_event_signed_by_the_nostr_crate_verifies() {
    assert_eq!(Verifier::new().verify(&signed()), Ok(()));
}

#[test]
fn other_content_under_the_same_id_and_signature_is_a_bad_id() {
    let raw = signed().replace("backslash", "BACKSLASH");
    assert_eq!(Verifier::new().verify(&raw), Err(Invalid::BadId));
}

#[test]
fn a_signature_of_another_event_is_a_bad_signature() {
    let raw = signed();
    let other = EventBuilder::text_note("another")
        .sign_with_keys(&keys())
        .expect("signed")
        .as_json();
    let forged = raw.replace(&field(&raw, "sig"), &field(&other, "sig"));
    assert_eq!(Verifier::new().verify(&forged), Err(Invalid::BadSignature));
}

#[test]
fn a_pubkey_off_the_curve_is_malformed_and_so_is_short_hex() {
    let raw = signed();
    let pubkey = field(&raw, "pubkey");
    // The id commits to the pubkey, so a changed pubkey also needs a matching id: build the
    // event by hand around a pubkey whose x coordinate is not on the curve (x = 5).
    let off_curve = format!("{}05", "00".repeat(31));
    let tampered = raw.replace(&pubkey, &off_curve);
    let fixed_id = tampered.replace(&field(&raw, "id"), &id_of(&tampered));
    assert_eq!(
        Verifier::new().verify(&fixed_id),
        Err(Invalid::MalformedPubkey)
    );
    let short = raw.replace(&field(&raw, "sig"), "abcd");
    assert_eq!(
        Verifier::new().verify(&short),
        Err(Invalid::MalformedSignature)
    );
}

#[test]
fn not_an_event_is_malformed_and_uppercase_hex_is_not_the_id() {
    let verifier = Verifier::new();
    assert!(matches!(
        verifier.verify("[1,2]"),
        Err(Invalid::Malformed(_))
    ));
    assert!(matches!(
        verifier.verify(r#"{"id":"00","kind":1}"#),
        Err(Invalid::Malformed(_))
    ));
    let raw = signed();
    let id = field(&raw, "id");
    assert_eq!(
        verifier.verify(&raw.replace(&id, &id.to_uppercase())),
        Err(Invalid::BadId)
    );
}

/// The NIP-01 id of an event JSON, built as a JSON value and hashed whole: a second
/// way to the same rule than the verifier's streamed one.
fn id_of(raw: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(raw).expect("json");
    let preimage = serde_json::json!([
        0,
        value["pubkey"],
        value["created_at"],
        value["kind"],
        value["tags"],
        value["content"]
    ]);
    let digest = Sha256::digest(serde_json::to_string(&preimage).expect("json").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
