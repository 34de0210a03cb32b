//! JSON lines on stdout: one object per line, written and flushed as it happens, and the
//! field values every command's lines share.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::value::RawValue;
use tether_tokio::tether_core::link::SocketLoss;
use tether_tokio::tether_core::nostr::Disconnect;

/// Writes one JSON object per line to stdout.
#[derive(Debug)]
pub(crate) struct JsonLines {
    out: io::Stdout,
}

impl JsonLines {
    pub(crate) fn new() -> Self {
        JsonLines { out: io::stdout() }
    }

    /// Write `line` and flush, so a reader sees each line as soon as it happened.
    ///
    /// # Errors
    /// When stdout cannot be written (a closed pipe included).
    pub(crate) fn write<T: Serialize>(&mut self, line: &T) -> io::Result<()> {
        let mut out = self.out.lock();
        serde_json::to_writer(&mut out, line)?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// An event's JSON as the relay sent it, embedded as JSON (not as a string).
///
/// A relay may pretty-print; whitespace between tokens can hold line breaks, which would
/// split a JSON line, so such an event is re-serialised compactly. Anything that is not
/// valid JSON is embedded as a string rather than dropped.
pub(crate) fn raw_json(raw: &str) -> Cow<'_, RawValue> {
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

/// Milliseconds, for the `*_ms` fields.
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// For `#[serde(skip_serializing_if = "is_zero")]`: a count of nothing is left out.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The `why` (the core's name for it) and `close_code` of a `disconnected` line, with one
/// relay or several.
pub(crate) fn disconnect_why(why: Disconnect) -> (&'static str, Option<u16>) {
    let code = match why {
        Disconnect::Lost(SocketLoss::ClosedByPeer { code }) => code,
        _ => None,
    };
    (why.as_str(), code)
}
