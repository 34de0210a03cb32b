//! JSON lines on stdout: one object per line, written and flushed as it happens, and the
//! field values every command's lines share.

use std::io::{self, Write};

use serde::Serialize;

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

/// The time on one monotonic clock for the whole run, in the core's terms: what a
/// [`Limiter`](tether_tokio::tether_core::line::Limiter) admits lines by.
pub(crate) fn monotonic() -> tether_tokio::tether_core::Instant {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    tether_tokio::tether_core::Instant::from_origin(start.elapsed())
}
