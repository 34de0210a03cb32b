//! Nostr event verification: the id is the sha256 of the event's NIP-01 serialization, and
//! the signature is a valid BIP-340 Schnorr signature of that id by the event's pubkey. And
//! the inverse, signing: [`Keys`] computes the id the same way and signs it (libsecp256k1).
//!
//! One [`Verifier`] per thread (it holds a verification-only libsecp256k1 context); each
//! check parses the event once, borrowing every field it can, and streams the serialization
//! into the hash without building it.
//!
//! ```
//! use tether_verify::{Invalid, Verifier};
//!
//! let verifier = Verifier::new();
//! let raw = r#"{"id":"00","pubkey":"00","created_at":1,"kind":1,"tags":[],"content":"","sig":"00"}"#;
//! assert_eq!(verifier.verify(raw), Err(Invalid::BadId));
//! ```

use std::borrow::Cow;
use std::fmt;
use std::io::Write;

use secp256k1::schnorr::Signature;
use secp256k1::{Message, Secp256k1, VerifyOnly, XOnlyPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod sign;

pub use sign::{InvalidSecretKey, Keys, AUTH_KIND};

/// Why an event is not genuine.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Invalid {
    /// Not an event object with the NIP-01 fields and types.
    Malformed(String),
    /// The id is not the sha256 of the event's serialization.
    BadId,
    /// The pubkey is not 32 bytes of hex naming a point on the curve.
    MalformedPubkey,
    /// The signature is not 64 bytes of hex.
    MalformedSignature,
    /// The signature does not verify for this id and pubkey.
    BadSignature,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Malformed(why) => write!(f, "malformed event: {why}"),
            Invalid::BadId => f.write_str("id is not the hash of the event"),
            Invalid::MalformedPubkey => f.write_str("malformed pubkey"),
            Invalid::MalformedSignature => f.write_str("malformed signature"),
            Invalid::BadSignature => f.write_str("bad signature"),
        }
    }
}

impl std::error::Error for Invalid {}

/// Checks events; cheap to keep, one per thread.
pub struct Verifier {
    secp: Secp256k1<VerifyOnly>,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier::new()
    }
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier").finish_non_exhaustive()
    }
}

/// The fields NIP-01 signs, borrowed from the frame where no unescaping is needed.
#[derive(Deserialize)]
struct Signed<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    pubkey: Cow<'a, str>,
    created_at: u64,
    kind: u64,
    #[serde(borrow)]
    tags: Vec<Vec<Cow<'a, str>>>,
    #[serde(borrow)]
    content: Cow<'a, str>,
    #[serde(borrow)]
    sig: Cow<'a, str>,
}

impl Verifier {
    /// A verifier with its own verification context.
    #[must_use]
    pub fn new() -> Self {
        Verifier {
            secp: Secp256k1::verification_only(),
        }
    }

    /// Check one event's JSON (the object, as a relay sends it inside `["EVENT", sub, ...]`).
    ///
    /// # Errors
    /// [`Invalid`]: which check failed, the cheap ones first.
    pub fn verify(&self, raw: &str) -> Result<(), Invalid> {
        let event: Signed<'_> =
            serde_json::from_str(raw).map_err(|e| Invalid::Malformed(e.to_string()))?;
        let id = hex32(&event.id).ok_or(Invalid::BadId)?;
        let hash = event_hash(
            &event.pubkey,
            event.created_at,
            event.kind,
            &event.tags,
            &event.content,
        );
        if hash != id {
            return Err(Invalid::BadId);
        }
        let pubkey = hex32(&event.pubkey)
            .and_then(|bytes| XOnlyPublicKey::from_slice(&bytes).ok())
            .ok_or(Invalid::MalformedPubkey)?;
        let sig = hex64(&event.sig)
            .and_then(|bytes| Signature::from_slice(&bytes).ok())
            .ok_or(Invalid::MalformedSignature)?;
        self.secp
            .verify_schnorr(&sig, &Message::from_digest(id), &pubkey)
            .map_err(|_| Invalid::BadSignature)
    }
}

/// sha256 of `[0, pubkey, created_at, kind, tags, content]`, serialized as NIP-01 says
/// (serde_json's escaping is NIP-01's), streamed into the hash. The one serialization both
/// [`Verifier::verify`] and [`Keys::sign_event`] hash.
fn event_hash<P, T, C>(pubkey: &P, created_at: u64, kind: u64, tags: &T, content: &C) -> [u8; 32]
where
    P: Serialize + ?Sized,
    T: Serialize + ?Sized,
    C: Serialize + ?Sized,
{
    let mut hasher = HashWriter(Sha256::new());
    let preimage = (0u8, pubkey, created_at, kind, tags, content);
    // Writing into a hasher cannot fail, and these values always serialize.
    let _ = serde_json::to_writer(&mut hasher, &preimage);
    hasher.0.finalize().into()
}

struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hex32(text: &str) -> Option<[u8; 32]> {
    let mut out = [0; 32];
    decode_hex(text, &mut out).then_some(out)
}

fn hex64(text: &str) -> Option<[u8; 64]> {
    let mut out = [0; 64];
    decode_hex(text, &mut out).then_some(out)
}

/// `bytes` in lowercase hex, as NIP-01 writes ids, pubkeys and signatures.
fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

/// Lowercase hex only: NIP-01 ids, pubkeys and signatures are lowercase.
fn decode_hex(text: &str, out: &mut [u8]) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != out.len() * 2 {
        return false;
    }
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let (Some(hi), Some(lo)) = (nibble(pair[0]), nibble(pair[1])) else {
            return false;
        };
        *byte = hi << 4 | lo;
    }
    true
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}
