//! NIP-11: what a relay declares about itself in its information document, read as the
//! starting values of a session ([`RelayInfo`]), and what the session makes of them
//! ([`Applied`]).
//!
//! The core never fetches the document: an adapter GETs it (bounded in size and time) and
//! passes its bytes to [`RelayInfo::parse`], then the result to
//! [`RelaySession::apply_relay_info`](super::RelaySession::apply_relay_info).
//!
//! # Tolerance
//!
//! The document is the peer's: a document that is not a JSON object, or larger than
//! [`MAX_DOCUMENT`], is an [`InfoError`] and changes nothing. Inside an object every field
//! is read on its own: a field that is missing, of the wrong type, negative, zero or
//! implausibly small (see each field) counts as not declared, and the others still count.
//! Unknown fields are ignored.
//!
//! # What is applied
//!
//! | field | rule |
//! | --- | --- |
//! | `limitation.max_subscriptions` | the starting subscription cap; what the relay does wins, in either direction (see [`RelaySession::subscription_limit`](super::RelaySession::subscription_limit)) |
//! | `limitation.max_message_length` | no frame larger is sent: a larger publish or subscription is refused locally ([`Error::MessageTooLarge`](super::Error::MessageTooLarge)) |
//! | `limitation.max_subid_length` | wire subscription ids are kept that short (the attempt counter wraps in fewer hex digits) |
//! | `limitation.auth_required` | with [`RelayConfig::authenticates`](super::RelayConfig::authenticates), REQs wait for NIP-42 on each new socket |
//! | `limitation.max_filters` | routing by people puts at most this many filters in one REQ (an application's own REQ is sent as it wrote it) |
//! | `limitation.max_limit` | reported, not applied: the relay clamps larger filter `limit`s itself (NIP-11), and rewriting the application's filters would hide from it that the answer is capped |

use serde_json::{Map, Value};

/// Largest information document read (64 KiB): real ones are a few hundred bytes.
pub const MAX_DOCUMENT: usize = 64 * 1024;

/// Smallest `max_message_length` taken seriously (1 KiB): below it no REQ with a filter or
/// signed event fits, so such a value is a mistake, not a limit.
pub const MIN_MESSAGE_LENGTH: usize = 1024;

/// Smallest `max_subid_length` taken seriously: `0:1`, the shortest wire id.
pub const MIN_SUBID_LENGTH: usize = 3;

/// The limits a relay declares in its NIP-11 document; `None` (or `false`) where it
/// declares nothing usable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayInfo {
    /// `limitation.max_subscriptions`: open REQs per connection (at least 1).
    pub max_subscriptions: Option<usize>,
    /// `limitation.max_message_length`: bytes of the largest frame the relay accepts (at
    /// least [`MIN_MESSAGE_LENGTH`]).
    pub max_message_length: Option<usize>,
    /// `limitation.max_subid_length`: characters of a subscription id (at least
    /// [`MIN_SUBID_LENGTH`]).
    pub max_subid_length: Option<usize>,
    /// `limitation.max_limit`: the relay clamps a filter's `limit` to this (at least 1).
    pub max_limit: Option<usize>,
    /// `limitation.max_filters`: filters one REQ may carry (at least 1; an older NIP-11
    /// field some relays still declare).
    pub max_filters: Option<usize>,
    /// `limitation.auth_required`: NIP-42 authentication before anything else.
    pub auth_required: bool,
    /// Whether `supported_nips` lists 77 (negentropy); `None` without a `supported_nips`
    /// list. Only a hint: relays list NIP-77 and then refuse it, and the session learns
    /// from what the relay does.
    pub negentropy: Option<bool>,
}

/// Why a document was not read; the session is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InfoError {
    /// Larger than [`MAX_DOCUMENT`].
    TooLarge {
        /// Its length in bytes.
        len: usize,
    },
    /// Not JSON (or not UTF-8).
    NotJson(String),
    /// JSON, but not an object.
    NotAnObject,
}

impl std::fmt::Display for InfoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InfoError::TooLarge { len } => write!(
                f,
                "relay information document of {len} bytes exceeds {MAX_DOCUMENT}"
            ),
            InfoError::NotJson(e) => write!(f, "relay information document is not JSON: {e}"),
            InfoError::NotAnObject => f.write_str("relay information document is not an object"),
        }
    }
}

impl std::error::Error for InfoError {}

impl RelayInfo {
    /// Read the limits from a document's bytes, by the rules in the module docs.
    ///
    /// # Errors
    /// [`InfoError`] when the document is too large, not JSON or not an object.
    pub fn parse(document: &[u8]) -> Result<RelayInfo, InfoError> {
        if document.len() > MAX_DOCUMENT {
            return Err(InfoError::TooLarge {
                len: document.len(),
            });
        }
        let value: Value =
            serde_json::from_slice(document).map_err(|e| InfoError::NotJson(e.to_string()))?;
        let Value::Object(doc) = value else {
            return Err(InfoError::NotAnObject);
        };
        let empty = Map::new();
        let limitation = match doc.get("limitation") {
            Some(Value::Object(l)) => l,
            _ => &empty,
        };
        Ok(RelayInfo {
            max_subscriptions: count(limitation, "max_subscriptions", 1),
            max_message_length: count(limitation, "max_message_length", MIN_MESSAGE_LENGTH),
            max_subid_length: count(limitation, "max_subid_length", MIN_SUBID_LENGTH),
            max_limit: count(limitation, "max_limit", 1),
            max_filters: count(limitation, "max_filters", 1),
            auth_required: limitation.get("auth_required") == Some(&Value::Bool(true)),
            negentropy: doc
                .get("supported_nips")
                .and_then(Value::as_array)
                .map(|nips| nips.iter().any(|n| n.as_u64() == Some(77))),
        })
    }

    /// Whether the document declares anything the session uses.
    pub fn is_empty(&self) -> bool {
        *self == RelayInfo::default()
    }
}

/// What a session does with a [`RelayInfo`]: the values in force once it is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Applied {
    /// The subscription limit in force (configured, declared or learned).
    pub subscription_limit: Option<usize>,
    /// Whether that limit is still the relay's declared first guess (it is probed past
    /// while subscriptions wait), rather than configured or learned.
    pub limit_is_declared: bool,
    /// No frame larger than this is sent.
    pub max_message_length: Option<usize>,
    /// Wire subscription ids are at most this long (when the id itself fits).
    pub max_subid_length: Option<usize>,
    /// REQs wait for NIP-42 authentication on each new socket.
    pub auth_first: bool,
    /// The relay's clamp on filter `limit`s, reported only.
    pub max_limit: Option<usize>,
}

/// A whole number of at least `min` under `key`; anything else is not declared.
fn count(map: &Map<String, Value>, key: &str, min: usize) -> Option<usize> {
    let n = map.get(key)?.as_u64()?;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    (n >= min).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_one_by_one() {
        let doc = br#"{"name":"r","limitation":{"max_subscriptions":20,"max_message_length":"big",
            "max_subid_length":2,"max_limit":-5,"auth_required":"yes"}}"#;
        let info = RelayInfo::parse(doc).unwrap();
        assert_eq!(
            info,
            RelayInfo {
                max_subscriptions: Some(20),
                ..RelayInfo::default()
            }
        );
    }

    #[test]
    fn a_malformed_document_is_an_error() {
        assert!(matches!(
            RelayInfo::parse(b"<html>"),
            Err(InfoError::NotJson(_))
        ));
        assert_eq!(RelayInfo::parse(b"[1]"), Err(InfoError::NotAnObject));
        let huge = vec![b' '; MAX_DOCUMENT + 1];
        assert_eq!(
            RelayInfo::parse(&huge),
            Err(InfoError::TooLarge {
                len: MAX_DOCUMENT + 1
            })
        );
        assert!(RelayInfo::parse(b"{}").unwrap().is_empty());
        assert!(RelayInfo::parse(br#"{"limitation":7}"#).unwrap().is_empty());
    }
}
