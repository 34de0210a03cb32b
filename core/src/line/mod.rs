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

    /// Whether the lines are written one per line of text (JSON lines), so an embedded
    /// event holding a line break is re-serialised compactly. The C ABI hands out objects
    /// of known length: its events come verbatim, unscanned.
    fn lines(&self) -> bool {
        true
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

    fn lines(&self) -> bool {
        false
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
        use serde::ser::SerializeStruct;
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [b'"'; 66];
        // Indexed rather than through `chunks_exact_mut`, whose iterator the wasm build
        // (`opt-level = "s"`) left as a call per pair of digits.
        for (i, &b) in self.0.iter().enumerate() {
            text[1 + 2 * i] = DIGITS[usize::from(b >> 4)];
            text[2 + 2 * i] = DIGITS[usize::from(b & 0xf)];
        }
        // Hex digits need no escaping: written as raw JSON (a quoted string), unscanned.
        let json = std::str::from_utf8(&text).unwrap_or_default();
        let mut st = s.serialize_struct(RAW_TOKEN, 1)?;
        st.serialize_field(RAW_TOKEN, json)?;
        st.end()
    }
}

/// An event's JSON as the relay sent it, embedded as JSON (not as a string).
///
/// A relay may pretty-print: whitespace between tokens can hold line breaks, which would
/// split a JSON line, so such an event is re-serialised compactly. Anything that is not
/// valid JSON is embedded as a string rather than dropped.
pub fn embed(raw: &str) -> Cow<'_, RawValue> {
    if !has_line_break(raw) {
        if let Ok(value) = serde_json::from_str::<&RawValue>(raw) {
            return Cow::Borrowed(value);
        }
    }
    compact(raw)
}

/// The JSON of an event the core parsed, embedded verbatim: [`embed`] without parsing it
/// again. The core's codec only hands out an event whose JSON it parsed as an object, so
/// the bytes are JSON; re-checking them cost the C ABI about as much as decoding the frame.
#[derive(Clone, Debug)]
pub enum Checked<'a> {
    /// Written as it is.
    Verbatim(&'a str),
    /// It held a line break: re-serialised compactly.
    Compact(Cow<'static, RawValue>),
}

impl<'a> Checked<'a> {
    /// `raw`, parsed by the core as a JSON object, for output written as JSON lines
    /// ([`Labels::lines`]: compacted if it holds a line break) or not (verbatim).
    pub fn new(raw: &'a str, lines: bool) -> Checked<'a> {
        if lines && has_line_break(raw) {
            return Checked::Compact(compact(raw));
        }
        Checked::Verbatim(raw)
    }
}

impl Serialize for Checked<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let raw = match self {
            Checked::Verbatim(raw) => raw,
            Checked::Compact(value) => return value.serialize(s),
        };
        // serde_json writes a struct of this name as its one field's text, unescaped: how
        // its own `RawValue` is written, without the validation `RawValue` construction does.
        let mut st = s.serialize_struct(RAW_TOKEN, 1)?;
        st.serialize_field(RAW_TOKEN, raw)?;
        st.end()
    }
}

/// serde_json's name for raw JSON in its serializer (see `serde_json::value::RawValue`'s
/// `Serialize`). `core/tests/lines.rs` fails if a serde_json release stops honouring it.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

fn has_line_break(raw: &str) -> bool {
    // One pass, eight bytes at a time: every event of every subscription is scanned.
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS != 0;
    let mut words = raw.as_bytes().chunks_exact(8);
    for word in &mut words {
        let v = u64::from_le_bytes(word.try_into().unwrap_or_default());
        if zero_byte(v ^ (ONES * u64::from(b'\n'))) || zero_byte(v ^ (ONES * u64::from(b'\r'))) {
            return true;
        }
    }
    words.remainder().iter().any(|&b| b == b'\n' || b == b'\r')
}

fn compact(raw: &str) -> Cow<'static, RawValue> {
    let value = serde_json::from_str::<serde_json::Value>(raw)
        .unwrap_or_else(|_| serde_json::Value::String(raw.to_owned()));
    // Serialising a `Value` only fails for non-string map keys, which a `Value` cannot have.
    let compact = serde_json::value::to_raw_value(&value).unwrap_or_default();
    Cow::Owned(compact)
}

/// Append `line` as one JSON object (no newline) to `out`.
pub fn write_into<T: Serialize>(line: &T, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail, and every line serialises: its map keys are strings.
    if cfg!(target_arch = "wasm32") {
        let _ = serde_json::to_writer(Appender::new(out, SHORT_PIECE), line);
    } else {
        let _ = serde_json::to_writer(out, line);
    }
}

/// The bytes of a line, appended to a `Vec`; pieces up to `short` bytes a byte at a time.
///
/// serde_json writes a line as a few dozen pieces: quotes, keys, separators, then the
/// event's bytes in one. On wasm32 every `extend_from_slice` is a `memory.copy`, which V8
/// (Node 20) runs as a call out of the compiled code, about a hundred instructions however
/// short the copy, and an event line made a few dozen of them (`bench/event_instructions.mjs`
/// counts a frame's). Pushing a short piece byte by byte stays in the compiled code.
/// Natively serde_json writes into the `Vec` itself, which `memcpy` makes the cheaper way.
struct Appender<'a> {
    out: &'a mut Vec<u8>,
    short: usize,
}

/// Longest piece pushed byte by byte: serde_json's pieces are mostly 1 to 12 bytes.
const SHORT_PIECE: usize = 16;

impl<'a> Appender<'a> {
    fn new(out: &'a mut Vec<u8>, short: usize) -> Self {
        Appender { out, short }
    }
}

impl std::io::Write for Appender<'_> {
    fn write(&mut self, piece: &[u8]) -> std::io::Result<usize> {
        self.write_all(piece)?;
        Ok(piece.len())
    }

    fn write_all(&mut self, piece: &[u8]) -> std::io::Result<()> {
        if piece.len() > self.short {
            self.out.extend_from_slice(piece);
            return Ok(());
        }
        for &byte in piece {
            self.out.push(byte);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// For `#[serde(skip_serializing_if = "is_zero")]`: a count of nothing is left out.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_are_found_anywhere() {
        assert!(!has_line_break(""));
        assert!(!has_line_break(&"x".repeat(100)));
        for at in 0..20 {
            for br in ['\n', '\r'] {
                let mut text: String = "y".repeat(20);
                text.replace_range(at..=at, &br.to_string());
                assert!(has_line_break(&text), "{at} {br:?}");
            }
        }
        // Bytes that differ from \n and \r by one bit, and UTF-8.
        assert!(!has_line_break("\u{0b}\u{0c}\u{0e}\u{8a}é✓"));
    }

    #[test]
    fn lines_are_the_bytes_serde_json_writes() {
        // Pieces shorter than, as long as and longer than 16 bytes, escapes and UTF-8.
        let value = serde_json::json!({
            "type": "event",
            "short": "ab",
            "exactly": "z".repeat(16),
            "longer": "y".repeat(17),
            "escaped": "a\"b\\c\nd\u{1}é✓",
            "nested": [{"kind": 1, "tags": [["e", "b".repeat(64)]]}, null, true, 1.5],
        });
        let mut expected = b"prefix ".to_vec();
        expected.extend(serde_json::to_vec(&value).unwrap());
        // Both ways of appending, whichever this target uses.
        for short in [0, 16] {
            let mut out = b"prefix ".to_vec();
            let _ = serde_json::to_writer(Appender::new(&mut out, short), &value);
            assert_eq!(out, expected, "pieces up to {short} bytes pushed");
        }
        let mut out = b"prefix ".to_vec();
        write_into(&value, &mut out);
        assert_eq!(out, expected);
    }

    #[test]
    fn hex_is_a_json_string() {
        let id = [0xa5; 32];
        assert_eq!(
            serde_json::to_string(&Hex(&id)).unwrap(),
            format!("\"{}\"", "a5".repeat(32))
        );
        // Every byte in its place, high digit first.
        let id: [u8; 32] = std::array::from_fn(|i| (i * 8 + 3) as u8);
        let digits: String = id.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            serde_json::to_string(&Hex(&id)).unwrap(),
            format!("\"{digits}\"")
        );
    }
}
