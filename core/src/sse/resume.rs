//! Which last event IDs can be sent back as a `Last-Event-ID` header: one rule for every
//! driver.
//!
//! WHATWG accepts any `id` without NUL as the last event ID, but an HTTP header value cannot
//! carry every byte. Both HTTP clients the adapters use (reqwest, and hyper through the
//! `http` crate's `HeaderValue`) refuse a value holding a control character other than TAB,
//! or DEL, and the request then fails before a byte reaches the server. Left to the driver,
//! such an id made every reconnect fail as if the network had, forever.
//!
//! An id is *sendable* when every byte of its UTF-8 encoding is HTAB, a visible ASCII
//! character or SP (0x20–0x7E), or at least 0x80 (RFC 9110's obs-text, which `HeaderValue`
//! accepts and hyper writes as it is, so non-ASCII ids survive), and it is at most
//! [`ParserConfig::max_sendable_id_len`](crate::sse::ParserConfig::max_sendable_id_len)
//! bytes long (servers and proxies refuse oversized header lines: nginx's default limit is
//! 8 KiB per line, and a refusal would end the stream with a 4xx).
//!
//! The parser keeps WHATWG's last event ID (messages carry it unchanged) and, beside it, the
//! newest *sendable* one, which is what a reconnect resumes from: the server replays from an
//! older point rather than from nothing, so delivery stays at-least-once instead of losing
//! the events in the gap.

use std::fmt;

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
mod tests {
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
