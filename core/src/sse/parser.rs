//! Incremental WHATWG `text/event-stream` parser: bytes in, [`Item`]s out.
//!
//! It follows the HTML Living Standard's "interpreting an event stream" rules: one leading
//! UTF-8 BOM is stripped; lines end in CRLF, LF or a lone CR (also when the CR ends one chunk
//! and the LF starts the next); `:` lines are comments; a field without a colon has an empty
//! value; one space after the colon is stripped; `data` lines are joined with LF and one
//! trailing LF is removed; an empty data buffer dispatches nothing; the event type defaults to
//! `message`; an `id` containing NULL is ignored; `retry` must be ASCII digits; unknown fields
//! are ignored; invalid UTF-8 becomes U+FFFD.
//!
//! # Linear time, however the input is chunked
//!
//! Each input byte is scanned once. Only the unterminated tail of a chunk is kept, and later
//! chunks append to it instead of re-scanning it, so an 8 MB line fed in 1024 pieces costs about
//! the same as one piece (eventsource-stream re-scanned its whole buffer on every chunk, which
//! made that case quadratic).
//!
//! # Bounds
//!
//! - A line longer than [`ParserConfig::max_line_len`] or an event whose data passes
//!   [`ParserConfig::max_event_len`] yields [`Item::Error`]; the parser then skips to the next
//!   blank line (the next event boundary) and carries on, so one hostile event costs at most
//!   the limit in memory.
//! - An id that cannot be sent back as `Last-Event-ID` (see [`resume`](super::resume)) is
//!   still the last event ID, but [`Parser::resume_id`] keeps the previous sendable one and
//!   the parser queues [`Item::UnsendableId`] once per such `id` field.
//! - At most [`ParserConfig::max_queued`] items wait to be drained, plus one: the blank line
//!   that fills the queue can queue a message and its [`Item::UnsendableId`] together. When
//!   the queue is full, [`Parser::feed`] stops at a line boundary and returns how many bytes it consumed; the
//!   caller drains with [`Parser::next_item`] and feeds the rest again.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// Limits of a [`Parser`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParserConfig {
    /// Longest line accepted, in bytes, without its line ending. Default 1 MiB.
    pub max_line_len: usize,
    /// Largest data buffer of one event, in bytes (the joined `data` lines). Default 1 MiB.
    pub max_event_len: usize,
    /// Most items held before [`Parser::feed`] stops consuming. Default 64; at least 1.
    pub max_queued: usize,
    /// Longest id, in bytes, that can become [`Parser::resume_id`]. Default 4096: well
    /// inside the 8 KiB per header line that nginx and most servers accept.
    pub max_sendable_id_len: usize,
}

impl Default for ParserConfig {
    fn default() -> Self {
        ParserConfig {
            max_line_len: 1 << 20,
            max_event_len: 1 << 20,
            max_queued: 64,
            max_sendable_id_len: 4096,
        }
    }
}

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The event type: the last `event` field, or `message` when there was none.
    pub event: String,
    /// The `data` lines joined with LF.
    pub data: String,
    /// The last event ID in force when the event was dispatched (may be empty).
    pub id: String,
}

/// Something the stream said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A complete event.
    Message(Message),
    /// A comment line (`:` ...): servers send these as heartbeats.
    Heartbeat,
    /// A valid `retry` field: the server's reconnection delay.
    Retry(Duration),
    /// An oversized line or event was dropped; parsing resumed at the next blank line.
    Error(ParseError),
    /// An `id` field became the last event ID but cannot be sent as `Last-Event-ID`;
    /// [`Parser::resume_id`] stays at the previous sendable id. Queued after the message
    /// that carries the id, if any.
    UnsendableId {
        /// The id, as messages carry it.
        id: String,
        /// Why it cannot be sent.
        why: Unsendable,
    },
}

/// Why part of the stream was dropped. The peer's fault; the parser carries on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// A line was longer than this many bytes.
    LineTooLong {
        /// The configured limit.
        limit: usize,
    },
    /// An event's data grew past this many bytes.
    EventTooLarge {
        /// The configured limit.
        limit: usize,
    },
}

impl ParseError {
    /// A stable snake_case name of the kind, for logs, JSON lines and the C ABI:
    /// `line_too_long` or `event_too_large` (the limit is the variant's data).
    pub fn as_str(self) -> &'static str {
        match self {
            ParseError::LineTooLong { .. } => "line_too_long",
            ParseError::EventTooLarge { .. } => "event_too_large",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::LineTooLong { limit } => write!(f, "line longer than {limit} bytes"),
            ParseError::EventTooLarge { limit } => write!(f, "event larger than {limit} bytes"),
        }
    }
}

impl std::error::Error for ParseError {}

/// The incremental parser for one event source.
///
/// The last event ID outlives a stream: [`Parser::finish`] ends a stream (dropping any
/// incomplete event) but keeps the ID, so the next stream's events inherit it as browsers do.
#[derive(Clone, Debug)]
pub struct Parser {
    config: ParserConfig,
    /// How much of a leading BOM has been matched (3 = decided, stripped or not).
    bom_matched: usize,
    /// The previous chunk ended in CR: a leading LF of the next one belongs to it.
    after_cr: bool,
    /// The unterminated tail of the current line.
    line: Vec<u8>,
    /// Dropping everything until a blank line (after an oversized line or event).
    skipping: bool,
    /// While skipping: the current line already has bytes, so its end is no blank line.
    skip_line_started: bool,
    data: Vec<u8>,
    event_type: Vec<u8>,
    id_buffer: String,
    /// An `id` field was read since the last blank line: the next dispatch judges it.
    id_pending: bool,
    last_event_id: String,
    /// The newest last event ID that can be sent as a header.
    resume_id: String,
    queue: VecDeque<Item>,
}

impl Parser {
    /// A parser at the start of a stream with an empty last event ID.
    pub fn new(config: ParserConfig) -> Self {
        Parser {
            config,
            bom_matched: 0,
            after_cr: false,
            line: Vec::new(),
            skipping: false,
            skip_line_started: false,
            data: Vec::new(),
            event_type: Vec::new(),
            id_buffer: String::new(),
            id_pending: false,
            last_event_id: String::new(),
            resume_id: String::new(),
            queue: VecDeque::new(),
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &ParserConfig {
        &self.config
    }

    /// The last event ID as WHATWG defines it: set by every blank line from the newest valid
    /// `id` field, even when no event is dispatched. Messages carry it.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The newest last event ID that can be sent as `Last-Event-ID` (see
    /// [`resume`](super::resume)): what a reconnect resumes from. Equal to
    /// [`Parser::last_event_id`] unless the server sent an unsendable id since.
    pub fn resume_id(&self) -> &str {
        &self.resume_id
    }

    /// Start from a checkpoint's ids (the caller checked that `resume_id` is sendable).
    pub(crate) fn restore_ids(&mut self, last_event_id: &str, resume_id: &str) {
        last_event_id.clone_into(&mut self.last_event_id);
        resume_id.clone_into(&mut self.resume_id);
    }

    /// Items waiting to be drained.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Parse `bytes`; returns how many were consumed.
    ///
    /// Everything is consumed unless the item queue fills up, in which case parsing stops
    /// after the line that filled it: drain [`Parser::next_item`] and feed the rest again.
    /// Each call takes bytes or queues an item; it can return 0 with an item queued when a
    /// partial BOM left by the previous chunk turns out to be an over-long first line.
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        self.feed_limited(bytes, usize::MAX)
    }

    /// [`Parser::feed`], but stop once `limit` items are queued (or `max_queued`, whichever is
    /// smaller; at least 1), so a caller with its own bounded queue can pass its free room.
    pub fn feed_limited(&mut self, bytes: &[u8], limit: usize) -> usize {
        let limit = limit.min(self.config.max_queued).max(1);
        let mut rest = self.strip_bom(bytes);
        while !rest.is_empty() && self.queue.len() < limit {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            let Some(end) = find_line_end(rest) else {
                self.partial_line(rest);
                rest = &[];
                break;
            };
            self.after_cr = rest[end] == b'\r';
            let (line, tail) = rest.split_at(end);
            rest = &tail[1..];
            self.end_line(line);
        }
        bytes.len() - rest.len()
    }

    /// The next parsed item, oldest first.
    pub fn next_item(&mut self) -> Option<Item> {
        self.queue.pop_front()
    }

    /// The stream ended: drop any incomplete line and event, and get ready for a new stream
    /// (a BOM may lead again). Queued items and the last event ID are kept.
    pub fn finish(&mut self) {
        self.bom_matched = 0;
        self.after_cr = false;
        self.line.clear();
        self.skipping = false;
        self.skip_line_started = false;
        self.data.clear();
        self.event_type.clear();
        self.id_buffer.clone_from(&self.last_event_id);
        self.id_pending = false;
    }
}

#[cfg(feature = "fuzzing")]
impl Parser {
    /// Check that every buffer is within its configured bound.
    ///
    /// For the testkit's invariants and the fuzz targets; not a stable API.
    ///
    /// # Errors
    /// A description of the first buffer past its bound.
    #[doc(hidden)]
    pub fn check_consistency(&self) -> Result<(), String> {
        let c = &self.config;
        if self.line.len() > c.max_line_len {
            return Err(format!(
                "line buffer {} > {}",
                self.line.len(),
                c.max_line_len
            ));
        }
        if self.data.len() > c.max_event_len {
            return Err(format!(
                "data buffer {} > {}",
                self.data.len(),
                c.max_event_len
            ));
        }
        // Field values come from one line each.
        for (what, len) in [
            ("event type", self.event_type.len()),
            ("id buffer", self.id_buffer.len()),
            ("last event id", self.last_event_id.len()),
            ("resume id", self.resume_id.len()),
        ] {
            // Lossy UTF-8 decoding can triple a line's length (one byte -> U+FFFD).
            if len > c.max_line_len.saturating_mul(3) {
                return Err(format!("{what} {len} > 3 x {}", c.max_line_len));
            }
        }
        if check_sendable(&self.resume_id, c.max_sendable_id_len).is_err() {
            return Err(format!("unsendable resume id {:?}", self.resume_id));
        }
        if self.bom_matched > BOM.len() {
            return Err(format!("bom_matched {}", self.bom_matched));
        }
        Ok(())
    }
}

impl Default for Parser {
    fn default() -> Self {
        Self::new(ParserConfig::default())
    }
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl Parser {
    /// Consume a leading BOM, possibly split across chunks. A partial match that fails
    /// becomes the start of the first line.
    fn strip_bom<'a>(&mut self, mut bytes: &'a [u8]) -> &'a [u8] {
        while self.bom_matched < BOM.len() {
            let Some(&b) = bytes.first() else {
                return bytes;
            };
            if b != BOM[self.bom_matched] {
                let matched = self.bom_matched;
                self.bom_matched = BOM.len();
                self.partial_line(&BOM[..matched]);
                return bytes;
            }
            self.bom_matched += 1;
            bytes = &bytes[1..];
        }
        bytes
    }

    fn partial_line(&mut self, piece: &[u8]) {
        if piece.is_empty() {
            return;
        }
        if self.skipping {
            self.skip_line_started = true;
            return;
        }
        if self.line.len() + piece.len() > self.config.max_line_len {
            self.line.clear();
            self.start_skipping(ParseError::LineTooLong {
                limit: self.config.max_line_len,
            });
            self.skip_line_started = true;
            return;
        }
        self.line.extend_from_slice(piece);
    }

    fn end_line(&mut self, tail: &[u8]) {
        if self.skipping {
            let blank = !self.skip_line_started && tail.is_empty();
            self.skip_line_started = false;
            self.skipping = !blank;
            return;
        }
        if self.line.len() + tail.len() > self.config.max_line_len {
            self.line.clear();
            self.start_skipping(ParseError::LineTooLong {
                limit: self.config.max_line_len,
            });
            return;
        }
        if self.line.is_empty() {
            self.process_line(tail);
            return;
        }
        let mut line = std::mem::take(&mut self.line);
        line.extend_from_slice(tail);
        let Some(mut line) = self.adopt_data_line(line) else {
            return;
        };
        self.process_line(&line);
        line.clear();
        // Keep a modest buffer for the next long line, but do not pin a huge one forever.
        if line.capacity() <= 64 * 1024 {
            self.line = line;
        }
    }

    /// A long `data` line that starts an event becomes the data buffer itself instead of
    /// being copied into it: the buffered path then costs no more than the one-chunk path.
    /// Returns the line when it is anything else.
    fn adopt_data_line(&mut self, mut line: Vec<u8>) -> Option<Vec<u8>> {
        if !self.data.is_empty() || !line.starts_with(b"data:") {
            return Some(line);
        }
        let start = if line.get(5) == Some(&b' ') { 6 } else { 5 };
        if line.len() - start + 1 > self.config.max_event_len {
            return Some(line);
        }
        line.drain(..start);
        line.push(b'\n');
        self.data = line;
        None
    }

    fn process_line(&mut self, line: &[u8]) {
        if line.is_empty() {
            self.dispatch();
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => {
                self.queue.push_back(Item::Heartbeat);
                return;
            }
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => self.append_data(value),
            b"event" => {
                self.event_type.clear();
                self.event_type.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => {
                self.id_buffer = decode(value.to_vec());
                self.id_pending = true;
            }
            b"retry" => {
                if let Some(ms) = parse_digits(value) {
                    self.queue.push_back(Item::Retry(Duration::from_millis(ms)));
                }
            }
            _ => {}
        }
    }

    fn append_data(&mut self, value: &[u8]) {
        if self.data.len() + value.len() + 1 > self.config.max_event_len {
            self.start_skipping(ParseError::EventTooLarge {
                limit: self.config.max_event_len,
            });
            return;
        }
        self.data.extend_from_slice(value);
        self.data.push(b'\n');
    }

    fn dispatch(&mut self) {
        self.last_event_id.clone_from(&self.id_buffer);
        // Judged once per `id` field, not per event that inherits it.
        let unsendable = if std::mem::take(&mut self.id_pending) {
            match check_sendable(&self.id_buffer, self.config.max_sendable_id_len) {
                Ok(()) => {
                    self.resume_id.clone_from(&self.id_buffer);
                    None
                }
                Err(why) => Some(why),
            }
        } else {
            None
        };
        if !self.data.is_empty() {
            self.dispatch_message();
        } else {
            self.event_type.clear();
        }
        if let Some(why) = unsendable {
            self.queue.push_back(Item::UnsendableId {
                id: self.id_buffer.clone(),
                why,
            });
        }
    }

    fn dispatch_message(&mut self) {
        self.data.pop();
        let data = decode(std::mem::take(&mut self.data));
        let event = if self.event_type.is_empty() {
            String::from("message")
        } else {
            decode(std::mem::take(&mut self.event_type))
        };
        self.queue.push_back(Item::Message(Message {
            event,
            data,
            id: self.id_buffer.clone(),
        }));
    }

    /// Drop the event being built and ignore lines until the next blank one.
    fn start_skipping(&mut self, error: ParseError) {
        self.data.clear();
        self.event_type.clear();
        self.skipping = true;
        self.skip_line_started = false;
        self.queue.push_back(Item::Error(error));
    }
}

/// UTF-8 with U+FFFD for invalid sequences; reuses the allocation when the bytes are valid.
fn decode(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// A non-empty run of ASCII digits as a number, saturating on overflow.
fn parse_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Index of the first CR or LF, eight bytes at a time.
fn find_line_end(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const LF: u64 = ONES * b'\n' as u64;
    const CR: u64 = ONES * b'\r' as u64;
    let mut words = s.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(word);
        let w = u64::from_le_bytes(buf);
        let (x, y) = (w ^ LF, w ^ CR);
        // Classic "has a zero byte": the lowest flagged byte is always a true match.
        let hits = ((x.wrapping_sub(ONES) & !x) | (y.wrapping_sub(ONES) & !y)) & HIGHS;
        if hits != 0 {
            return Some(offset + (hits.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    let tail = words.remainder();
    tail.iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|i| offset + i)
}

/// Why an id cannot be sent as `Last-Event-ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unsendable {
    /// The byte at `at` (of the id's UTF-8 encoding) is a control character other than TAB,
    /// or DEL.
    Byte {
        /// Offset of the first such byte.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// The id is longer than the configured limit.
    TooLong {
        /// The id's length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for Unsendable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsendable::Byte { at, byte } => {
                write!(f, "byte 0x{byte:02x} at {at} is not allowed in a header")
            }
            Unsendable::TooLong { len, limit } => {
                write!(f, "{len} bytes, longer than the {limit}-byte limit")
            }
        }
    }
}

impl std::error::Error for Unsendable {}

/// Whether `id` can be sent as a `Last-Event-ID` header value of at most `max_len` bytes; see
/// the [module docs](self) for the rule.
///
/// # Errors
/// Why it cannot: the first byte a header value cannot carry, else its length.
pub fn check_sendable(id: &str, max_len: usize) -> Result<(), Unsendable> {
    if let Some(at) = id.bytes().position(|b| !header_byte(b)) {
        return Err(Unsendable::Byte {
            at,
            byte: id.as_bytes()[at],
        });
    }
    if id.len() > max_len {
        return Err(Unsendable::TooLong {
            len: id.len(),
            limit: max_len,
        });
    }
    Ok(())
}

/// The bytes `http::HeaderValue` accepts (HTAB, SP..=`~`, obs-text).
fn header_byte(b: u8) -> bool {
    b == b'\t' || (0x20..0x7F).contains(&b) || b >= 0x80
}

#[cfg(test)]
mod sendable_tests {
    use super::*;

    #[test]
    fn every_byte_is_classified_like_header_value() {
        // The exact set http's `HeaderValue::from_bytes` accepts, written out independently.
        for b in 0..=255u8 {
            let accepted = b == 9 || (32..=126).contains(&b) || b >= 128;
            assert_eq!(header_byte(b), accepted, "byte {b:#04x}");
        }
    }

    #[test]
    fn ids_are_judged_by_bytes_then_length() {
        assert_eq!(check_sendable("", 4), Ok(()));
        assert_eq!(check_sendable("a\tb c~", 8), Ok(()));
        assert_eq!(check_sendable("é✓", 8), Ok(()), "non-ASCII is obs-text");
        assert_eq!(
            check_sendable("a\u{1}b", 8),
            Err(Unsendable::Byte { at: 1, byte: 1 })
        );
        assert_eq!(
            check_sendable("ab\u{7f}", 8),
            Err(Unsendable::Byte { at: 2, byte: 0x7F })
        );
        assert_eq!(
            check_sendable("x\r", 8),
            Err(Unsendable::Byte { at: 1, byte: b'\r' })
        );
        assert_eq!(
            check_sendable("abcde", 4),
            Err(Unsendable::TooLong { len: 5, limit: 4 })
        );
        assert_eq!(check_sendable("abcd", 4), Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_line_end_matches_naive_scan() {
        let mut s = vec![b'a'; 40];
        assert_eq!(find_line_end(&s), None);
        for i in 0..40 {
            for eol in [b'\n', b'\r'] {
                s[i] = eol;
                assert_eq!(find_line_end(&s), Some(i));
                // A later terminator must not hide behind an earlier one.
                if i + 3 < 40 {
                    s[i + 3] = b'\n';
                    assert_eq!(find_line_end(&s), Some(i));
                    s[i + 3] = b'a';
                }
                s[i] = b'a';
            }
        }
        // Bytes one above and below the terminators must not match (borrow false positives).
        let near = [0x0B, 0x0C, 0x0E, 0x09, 0x8A, 0x8D, 0x00, 0xFF, 0x0B];
        assert_eq!(find_line_end(&near), None);
    }

    #[test]
    fn digits_saturate() {
        assert_eq!(parse_digits(b"5000"), Some(5000));
        assert_eq!(parse_digits(b"99999999999999999999999"), Some(u64::MAX));
        assert_eq!(parse_digits(b""), None);
        assert_eq!(parse_digits(b"1 "), None);
        assert_eq!(parse_digits(b"-1"), None);
    }
}
