//! NIP-01 frames, both directions, with event payloads kept as raw JSON.
//!
//! Decoding borrows from the frame text: an event's bytes are handed on exactly as the relay
//! sent them, and only what the session needs (subscription id, event id, `created_at`) is
//! extracted, in the same single pass that validates the frame. Malformed input of any kind
//! returns a [`FrameError`] naming what was wrong; nothing here panics on peer input.
//!
//! One file per direction: [`RelayMessage`] (relay to client, the hot path) in `relay`,
//! [`ClientMessage`] (client to relay: what the session sends and the testkit's relay
//! decodes) in `client`, and the event itself ([`EventId`], [`RawEvent`]) in `event`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

mod client;
mod event;
mod relay;

pub use client::ClientMessage;
pub use event::{EventId, RawEvent};
pub use relay::RelayMessage;

/// Longest subscription id NIP-01 allows, in characters.
pub const MAX_SUB_ID_CHARS: usize = 64;
/// Default largest frame accepted, in bytes.
pub const DEFAULT_MAX_FRAME: usize = 4 * 1024 * 1024;

/// What was wrong with a frame. Every variant is the peer's fault, never the caller's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The frame is larger than the configured maximum; it was not parsed.
    TooLarge {
        /// Size of the frame in bytes.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// Not valid JSON (or not a JSON array of the expected shape at the syntax level).
    Json(String),
    /// Valid JSON, but not an array.
    NotArray,
    /// An empty array, or a first element that is not a string.
    MissingVerb,
    /// A verb this direction of the protocol does not have.
    UnknownVerb(String),
    /// The right verb with the wrong number of elements.
    Arity {
        /// The verb.
        verb: &'static str,
        /// The number of elements the verb takes (at least, for REQ and COUNT).
        expected: usize,
        /// The number received.
        got: usize,
    },
    /// An element of the wrong JSON type.
    WrongType {
        /// The verb.
        verb: &'static str,
        /// Index of the element in the frame array.
        index: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// A subscription id that is empty or longer than 64 characters.
    SubId {
        /// Its length in characters.
        chars: usize,
    },
    /// An event object without a usable `id` (32 bytes of lowercase hex) or `created_at`.
    Event(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the {max}-byte limit")
            }
            FrameError::Json(e) => write!(f, "not valid JSON: {e}"),
            FrameError::NotArray => f.write_str("frame is not a JSON array"),
            FrameError::MissingVerb => f.write_str("frame has no verb"),
            FrameError::UnknownVerb(v) => write!(f, "unknown verb {v:?}"),
            FrameError::Arity {
                verb,
                expected,
                got,
            } => {
                write!(f, "{verb} takes {expected} elements, got {got}")
            }
            FrameError::WrongType {
                verb,
                index,
                expected,
            } => {
                write!(f, "{verb} element {index} should be {expected}")
            }
            FrameError::SubId { chars } => {
                write!(f, "subscription id of {chars} characters (1..=64 allowed)")
            }
            FrameError::Event(what) => write!(f, "event {what}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl FrameError {
    /// A stable snake_case name of the kind of problem, for logs and JSON lines.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            FrameError::TooLarge { .. } => "too_large",
            FrameError::Json(_) => "json",
            FrameError::NotArray => "not_array",
            FrameError::MissingVerb => "missing_verb",
            FrameError::UnknownVerb(_) => "unknown_verb",
            FrameError::Arity { .. } => "arity",
            FrameError::WrongType { .. } => "wrong_type",
            FrameError::SubId { .. } => "sub_id",
            FrameError::Event(_) => "event",
        }
    }
}

// Shared by both directions.

fn check_sub(sub: Cow<'_, str>) -> Result<Cow<'_, str>, FrameError> {
    let chars = sub.chars().count();
    if chars == 0 || chars > MAX_SUB_ID_CHARS {
        return Err(FrameError::SubId { chars });
    }
    Ok(sub)
}

fn parse_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    match serde_json::from_str::<Atom<'_>>(raw.get()) {
        Ok(Atom::Str(s)) => Some(s),
        _ => None,
    }
}

fn json_error(e: serde_json::Error) -> FrameError {
    FrameError::Json(e.to_string())
}

/// Unknown verbs are echoed in errors; a hostile relay must not make that an allocation bomb.
fn truncate(s: &str) -> String {
    s.chars().take(32).collect()
}

/// A JSON value reduced to what frame validation needs; containers are skipped, not built.
enum Atom<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    Uint(u64),
    Other,
}

impl<'de> Deserialize<'de> for Atom<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AtomVisitor)
    }
}

struct AtomVisitor;

impl<'de> Visitor<'de> for AtomVisitor {
    type Value = Atom<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Atom::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Atom::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Atom::Bool(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Atom::Uint(v))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Atom::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Atom::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Atom::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Atom::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Atom::Other)
    }
}

fn count_rest<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<usize, A::Error> {
    let mut n = 0;
    while seq.next_element::<IgnoredAny>()?.is_some() {
        n += 1;
    }
    Ok(n)
}

fn push_str(out: &mut String, s: &str) {
    // Serialising a &str into a String cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}
