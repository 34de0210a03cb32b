//! The one serialised form of everything the state machines say: the JSON objects that
//! `tether req` and `tether sse` print as lines, that the C ABI hands its hosts and that
//! tether-py reads. Defined here, once, so the CLI, the ABI and every binding agree by
//! construction.
//!
//! Every object is tagged by `"type"`. Times are relative to a `now` the caller hands in
//! (`*_in_ms`, `window_ms`, `gap_ms`: milliseconds from `now`, rounded down), so a line
//! means the same to a reader on any clock. Which names a subscription or relay goes by is
//! the caller's choice ([`Labels`]): the CLI names a subscription by its filter argument's
//! index and a relay by its URL as given, the C ABI by their ids. A relay label of `None`
//! leaves the `relay` field out, as one relay's output does.
//!
//! - [`nostr`]: relay sessions and pools: events, outcomes and transmits.
//! - [`sse`]: SSE sessions: events and transmits.
//! - [`Limiter`]: how many peer-error lines a second reach the reader.

use std::borrow::Cow;
use std::time::Duration;

use serde::ser::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::time::Instant;

mod limit;
pub mod nostr;
pub mod sse;

pub use limit::{excerpt, Limiter, EXCERPT_CHARS, PEER_ERRORS_PER_SECOND};

/// What a subscription or relay is called in a line: a number (an id) or a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Label<'a> {
    /// An id, written as a JSON number.
    Id(u64),
    /// A name, written as a JSON string.
    Name(Cow<'a, str>),
}

impl Serialize for Label<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Label::Id(id) => s.serialize_u64(*id),
            Label::Name(name) => s.serialize_str(name),
        }
    }
}

/// How a caller names what lines refer to, and what they carry for it.
pub trait Labels {
    /// The label of subscription `sub` (its id in the machine that reported it).
    fn sub(&self, sub: u64) -> Label<'_>;
    /// The label of pool relay `relay`, or `None` to leave the `relay` field out.
    fn relay(&self, relay: u32) -> Option<Label<'_>>;
    /// Whether lines carry the handles a host needs to answer them: the event id on
    /// `event` lines, the challenge id on `auth` lines. A reader of the CLI's lines does
    /// not answer anything; an ABI host does.
    fn handles(&self) -> bool {
        false
    }
}

/// Labels by id: subscriptions and relays are numbers, and lines carry handles (the C ABI's
/// labels).
#[derive(Clone, Copy, Debug, Default)]
pub struct Ids;

impl Labels for Ids {
    fn sub(&self, sub: u64) -> Label<'_> {
        Label::Id(sub)
    }

    fn relay(&self, relay: u32) -> Option<Label<'_>> {
        Some(Label::Id(u64::from(relay)))
    }

    fn handles(&self) -> bool {
        true
    }
}

/// Milliseconds in `d`, rounded down, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds from `now` until `at` (0 when it is past).
pub(crate) fn millis_until(now: Instant, at: Instant) -> u64 {
    millis(at.saturating_duration_since(now))
}

/// 32 bytes (an event id) as 64 lowercase hex characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex<'a>(pub &'a [u8; 32]);

impl Serialize for Hex<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 64];
        for (pair, b) in text.chunks_exact_mut(2).zip(self.0) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 0xf)];
        }
        // Hex digits are ASCII.
        s.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
    }
}

/// An event's JSON as the relay sent it, embedded as JSON (not as a string).
///
/// A relay may pretty-print: whitespace between tokens can hold line breaks, which would
/// split a JSON line, so such an event is re-serialised compactly. Anything that is not
/// valid JSON is embedded as a string rather than dropped.
pub fn embed(raw: &str) -> Cow<'_, RawValue> {
    if !raw.contains(['\n', '\r']) {
        if let Ok(value) = serde_json::from_str::<&RawValue>(raw) {
            return Cow::Borrowed(value);
        }
    }
    let value = serde_json::from_str::<serde_json::Value>(raw)
        .unwrap_or_else(|_| serde_json::Value::String(raw.to_owned()));
    // Serialising a `Value` only fails for non-string map keys, which a `Value` cannot have.
    let compact = serde_json::value::to_raw_value(&value).unwrap_or_default();
    Cow::Owned(compact)
}

/// Append `line` as one JSON object (no newline) to `out`.
pub fn write_into<T: Serialize>(line: &T, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail, and every line serialises: its map keys are strings.
    let _ = serde_json::to_writer(out, line);
}

/// For `#[serde(skip_serializing_if = "is_zero")]`: a count of nothing is left out.
fn is_zero(n: &u64) -> bool {
    *n == 0
}
