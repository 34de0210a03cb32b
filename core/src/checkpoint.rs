//! Checkpoints: a session's durable state as plain, versioned data, so that a process can stop
//! at any instant and a new one can go on where it stopped.
//!
//! Each machine has its own checkpoint type ([`RelayCheckpoint`](crate::nostr::RelayCheckpoint),
//! [`PoolCheckpoint`](crate::pool::PoolCheckpoint), [`SseCheckpoint`](crate::sse::SseCheckpoint)).
//! All of them:
//!
//! - are `Serialize` and `Deserialize`, with fields in a fixed order and no hash maps, so the
//!   same state gives the same bytes;
//! - start with `"tether": <kind>` and `"version": <format>`, read first by
//!   [`from_json`](crate::nostr::RelayCheckpoint::from_json): a checkpoint of another kind,
//!   of a newer format, or one that does not parse is a [`CheckpointError`], never a panic
//!   and never a silently empty session;
//! - hold no secret (no signing key, no `Authorization` or cookie header, no request body
//!   unless the application opts in) and nothing bound to a connection (gate windows,
//!   backoff, retry counts, timers: those belonged to the dead socket);
//! - hold no [`Instant`](crate::time::Instant): a new process has a new monotonic origin, so
//!   every time kept is wall-clock seconds.
//!
//! Restoring checks what it reads: a checkpoint that parses but contradicts itself (an id
//! used twice, a memory out of order) is [`CheckpointError::Invalid`], and one larger than
//! the configuration's bounds is cut to them (the oldest remembered seconds go first, as they
//! would have in the running session).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The checkpoint format this build writes and the newest it reads.
pub const VERSION: u32 = 1;

/// Why a checkpoint was not restored; nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Not a tether checkpoint: not JSON, or not the shape of one.
    NotACheckpoint(String),
    /// A checkpoint of another machine (a pool's given to a relay session, ...).
    WrongKind {
        /// The kind asked for.
        expected: &'static str,
        /// The kind the checkpoint says it is.
        found: String,
    },
    /// Written by a newer format than this build reads.
    Newer {
        /// The checkpoint's format version.
        version: u32,
        /// The newest this build reads ([`VERSION`]).
        supported: u32,
    },
    /// It parses but contradicts itself.
    Invalid(String),
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::NotACheckpoint(why) => write!(f, "not a tether checkpoint: {why}"),
            CheckpointError::WrongKind { expected, found } => {
                write!(f, "a tether {found} checkpoint, not a {expected} one")
            }
            CheckpointError::Newer { version, supported } => write!(
                f,
                "checkpoint format {version} is newer than this build reads ({supported})"
            ),
            CheckpointError::Invalid(why) => write!(f, "inconsistent checkpoint: {why}"),
        }
    }
}

impl std::error::Error for CheckpointError {}

/// What every checkpoint starts with.
#[derive(Deserialize)]
struct Envelope {
    tether: String,
    version: u32,
}

/// Check a decoded checkpoint's kind and version.
pub(crate) fn check_header(
    kind: &str,
    version: u32,
    expected: &'static str,
) -> Result<(), CheckpointError> {
    if kind != expected {
        return Err(CheckpointError::WrongKind {
            expected,
            found: kind.chars().take(32).collect(),
        });
    }
    if version > VERSION {
        return Err(CheckpointError::Newer {
            version,
            supported: VERSION,
        });
    }
    if version == 0 {
        return Err(CheckpointError::Invalid("format version 0".into()));
    }
    Ok(())
}

/// Read a checkpoint of `expected` kind: the header first, so that a newer format whose body
/// this build cannot parse is still reported as newer.
pub(crate) fn from_json<T: DeserializeOwned>(
    json: &[u8],
    expected: &'static str,
) -> Result<T, CheckpointError> {
    let envelope: Envelope =
        serde_json::from_slice(json).map_err(|e| CheckpointError::NotACheckpoint(e.to_string()))?;
    check_header(&envelope.tether, envelope.version, expected)?;
    serde_json::from_slice(json).map_err(|e| CheckpointError::NotACheckpoint(e.to_string()))
}

/// A checkpoint as JSON bytes.
pub(crate) fn to_json<T: Serialize>(checkpoint: &T) -> Vec<u8> {
    // Every checkpoint is plain data (strings, numbers, raw JSON already validated), which
    // serde_json always writes.
    serde_json::to_vec(checkpoint).unwrap_or_default()
}

/// Event ids as 64 hex characters in a checkpoint.
pub(crate) mod hex_id {
    use serde::{de, Deserialize, Deserializer, Serializer};

    use crate::nostr::message::EventId;

    pub(crate) fn serialize<S: Serializer>(id: &EventId, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(id)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EventId, D::Error> {
        let text = String::deserialize(d)?;
        EventId::from_hex(&text).ok_or_else(|| de::Error::custom("an event id is 64 hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Tiny {
        #[allow(dead_code)]
        n: u32,
    }

    #[test]
    fn the_header_is_read_before_the_body() {
        let newer = br#"{"tether":"relay","version":99,"shape":"unknown"}"#;
        assert_eq!(
            from_json::<Tiny>(newer, "relay").unwrap_err(),
            CheckpointError::Newer {
                version: 99,
                supported: VERSION
            }
        );
        let other = br#"{"tether":"sse","version":1,"n":1}"#;
        assert!(matches!(
            from_json::<Tiny>(other, "relay"),
            Err(CheckpointError::WrongKind {
                expected: "relay",
                ..
            })
        ));
        assert!(matches!(
            from_json::<Tiny>(b"{\"n\":1}", "relay"),
            Err(CheckpointError::NotACheckpoint(_))
        ));
        assert!(matches!(
            from_json::<Tiny>(b"\xff\x00", "relay"),
            Err(CheckpointError::NotACheckpoint(_))
        ));
        assert!(from_json::<Tiny>(br#"{"tether":"relay","version":1,"n":1}"#, "relay").is_ok());
    }
}
