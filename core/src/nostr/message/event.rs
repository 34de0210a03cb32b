//! The event inside a frame: its id ([`EventId`]) and its bytes with the few fields the
//! session reads ([`RawEvent`]), found by one scan of the object.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{count_rest, json_error, Atom, FrameError};

/// A Nostr event id: 32 bytes, written as 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(pub [u8; 32]);

impl EventId {
    /// Parse 64 lowercase hex characters; anything else is `None`.
    pub fn from_hex(hex: &str) -> Option<EventId> {
        let bytes = hex.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        // Every EVENT frame's id passes through here; a table lookup per digit, with the
        // validity check folded into one OR over the whole id, keeps it off the profile.
        let mut invalid = 0u8;
        for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let (hi, lo) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
            invalid |= hi | lo;
            *o = (hi << 4) | (lo & 0x0f);
        }
        (invalid & NOT_HEX == 0).then_some(EventId(out))
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventId({self})")
    }
}

/// An event as the relay sent it, with the few fields the session reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub(super) json: &'a str,
    pub(super) id: EventId,
    pub(super) created_at: u64,
}

impl<'a> RawEvent<'a> {
    /// The event's JSON, byte for byte as received.
    pub fn json(&self) -> &'a str {
        self.json
    }

    /// The event id.
    pub fn id(&self) -> EventId {
        self.id
    }

    /// The event's `created_at`, in Unix seconds.
    pub fn created_at(&self) -> u64 {
        self.created_at
    }

    /// Inspect an event object the application produced (to publish it): its id and time.
    ///
    /// # Errors
    /// [`FrameError`] when `json` is not an object with a hex `id` and integer `created_at`.
    pub fn parse(json: &'a str) -> Result<RawEvent<'a>, FrameError> {
        let mut de = serde_json::Deserializer::from_str(json);
        let meta = de.deserialize_any(EventVisitor).map_err(json_error)??;
        de.end().map_err(json_error)?;
        Ok(RawEvent {
            json: json.trim(),
            id: meta.0,
            created_at: meta.1,
        })
    }
}

/// Scans an event object for `id` and `created_at`, skipping everything else.
pub(super) struct EventSeed;

type EventMeta = Result<(EventId, u64), FrameError>;

impl<'de> DeserializeSeed<'de> for EventSeed {
    type Value = EventMeta;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(EventVisitor)
    }
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = EventMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut id = None;
        let mut created_at = None;
        while let Some(key) = map.next_key::<Atom<'de>>()? {
            match key {
                Atom::Str(k) if k == "id" => id = Some(map.next_value::<Atom<'de>>()?),
                Atom::Str(k) if k == "created_at" => {
                    created_at = Some(map.next_value::<Atom<'de>>()?)
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let id = match id {
            Some(Atom::Str(id)) => EventId::from_hex(&id)
                .ok_or(FrameError::Event("id is not 64 lowercase hex characters")),
            Some(_) => Err(FrameError::Event("id is not a string")),
            None => Err(FrameError::Event("has no id")),
        };
        let created_at = match created_at {
            Some(Atom::Uint(t)) => Ok(t),
            Some(_) => Err(FrameError::Event(
                "created_at is not a non-negative integer",
            )),
            None => Err(FrameError::Event("has no created_at")),
        };
        Ok(id.and_then(|id| Ok((id, created_at?))))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        count_rest(&mut seq)?;
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }

    fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err(FrameError::WrongType {
            verb: "EVENT",
            index: 2,
            expected: "an event object",
        }))
    }
}

/// Marks a byte that is not a lowercase hex digit in [`HEX`].
const NOT_HEX: u8 = 0x80;

/// Each byte's value as a lowercase hex digit, or [`NOT_HEX`].
const HEX: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};
