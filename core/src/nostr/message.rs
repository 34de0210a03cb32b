//! NIP-01 frames, both directions, with event payloads kept as raw JSON.
//!
//! Decoding borrows from the frame text: an event's bytes are handed on exactly as the relay
//! sent them, and only what the session needs (subscription id, event id, `created_at`) is
//! extracted, in the same single pass that validates the frame. Malformed input of any kind
//! returns a [`FrameError`] naming what was wrong; nothing here panics on peer input.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

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
    json: &'a str,
    id: EventId,
    created_at: u64,
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

/// A frame from relay to client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelayMessage<'a> {
    /// `["EVENT", sub, event]`
    Event {
        /// Subscription id.
        sub: Cow<'a, str>,
        /// The event.
        event: RawEvent<'a>,
    },
    /// `["EOSE", sub]`: stored events are done; what follows is live.
    Eose {
        /// Subscription id.
        sub: Cow<'a, str>,
    },
    /// `["CLOSED", sub, message]`: the relay ended or refused a subscription.
    Closed {
        /// Subscription id.
        sub: Cow<'a, str>,
        /// Machine-readable prefix and human text.
        message: Cow<'a, str>,
    },
    /// `["OK", event_id, accepted, message]`: the answer to a published EVENT (or AUTH).
    Ok {
        /// The event answered.
        event_id: EventId,
        /// Whether the relay accepted it.
        accepted: bool,
        /// Machine-readable prefix and human text.
        message: Cow<'a, str>,
    },
    /// `["NOTICE", message]`: human-readable, not tied to a subscription.
    Notice {
        /// The text.
        message: Cow<'a, str>,
    },
    /// `["AUTH", challenge]` (NIP-42).
    Auth {
        /// The challenge string to sign.
        challenge: Cow<'a, str>,
    },
    /// `["COUNT", sub, {"count": n}]` (NIP-45).
    Count {
        /// Subscription id.
        sub: Cow<'a, str>,
        /// The count.
        count: u64,
    },
}

impl<'a> RelayMessage<'a> {
    /// Decode one text frame, refusing frames larger than `max_frame` bytes unparsed.
    ///
    /// # Errors
    /// A [`FrameError`] naming what was wrong.
    pub fn decode(text: &'a str, max_frame: usize) -> Result<RelayMessage<'a>, FrameError> {
        if text.len() > max_frame {
            return Err(FrameError::TooLarge {
                len: text.len(),
                max: max_frame,
            });
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let frame = de
            .deserialize_any(RelayFrameVisitor { text })
            .map_err(json_error)??;
        de.end().map_err(json_error)?;
        Ok(frame)
    }

    /// Encode as a JSON text frame (the testkit relay speaks through this).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(64);
        match self {
            RelayMessage::Event { sub, event } => {
                out.push_str("[\"EVENT\",");
                push_str(&mut out, sub);
                out.push(',');
                out.push_str(event.json);
            }
            RelayMessage::Eose { sub } => {
                out.push_str("[\"EOSE\",");
                push_str(&mut out, sub);
            }
            RelayMessage::Closed { sub, message } => {
                out.push_str("[\"CLOSED\",");
                push_str(&mut out, sub);
                out.push(',');
                push_str(&mut out, message);
            }
            RelayMessage::Ok {
                event_id,
                accepted,
                message,
            } => {
                out.push_str(&format!("[\"OK\",\"{event_id}\",{accepted},"));
                push_str(&mut out, message);
            }
            RelayMessage::Notice { message } => {
                out.push_str("[\"NOTICE\",");
                push_str(&mut out, message);
            }
            RelayMessage::Auth { challenge } => {
                out.push_str("[\"AUTH\",");
                push_str(&mut out, challenge);
            }
            RelayMessage::Count { sub, count } => {
                out.push_str("[\"COUNT\",");
                push_str(&mut out, sub);
                out.push_str(&format!(",{{\"count\":{count}}}"));
            }
        }
        out.push(']');
        out
    }
}

/// A frame from client to relay. Filters and events are raw JSON objects.
///
/// Compare two frames by their [`ClientMessage::encode`] output: raw JSON has no equality.
#[derive(Clone, Debug)]
pub enum ClientMessage<'a> {
    /// `["REQ", sub, filter, ...]`
    Req {
        /// Subscription id.
        sub: Cow<'a, str>,
        /// One or more filter objects.
        filters: Vec<&'a RawValue>,
    },
    /// `["CLOSE", sub]`
    Close {
        /// Subscription id.
        sub: Cow<'a, str>,
    },
    /// `["EVENT", event]`: publish.
    Event {
        /// The signed event.
        event: &'a RawValue,
    },
    /// `["AUTH", event]`: a signed NIP-42 kind 22242 event.
    Auth {
        /// The signed event.
        event: &'a RawValue,
    },
    /// `["COUNT", sub, filter, ...]` (NIP-45).
    Count {
        /// Subscription id.
        sub: Cow<'a, str>,
        /// One or more filter objects.
        filters: Vec<&'a RawValue>,
    },
}

impl<'a> ClientMessage<'a> {
    /// Decode one client frame (what a relay, such as the testkit's, receives).
    ///
    /// # Errors
    /// A [`FrameError`] naming what was wrong.
    pub fn decode(text: &'a str, max_frame: usize) -> Result<ClientMessage<'a>, FrameError> {
        if text.len() > max_frame {
            return Err(FrameError::TooLarge {
                len: text.len(),
                max: max_frame,
            });
        }
        let items: Vec<&'a RawValue> = match serde_json::from_str(text) {
            Ok(items) => items,
            Err(e) if e.is_data() => return Err(FrameError::NotArray),
            Err(e) => return Err(json_error(e)),
        };
        let Some((verb, rest)) = items.split_first() else {
            return Err(FrameError::MissingVerb);
        };
        let verb: Cow<'a, str> = parse_str(verb).ok_or(FrameError::MissingVerb)?;
        match &*verb {
            "REQ" => Self::decode_filters("REQ", rest)
                .map(|(sub, filters)| ClientMessage::Req { sub, filters }),
            "COUNT" => Self::decode_filters("COUNT", rest)
                .map(|(sub, filters)| ClientMessage::Count { sub, filters }),
            "CLOSE" => {
                let [sub] = rest else {
                    return Err(FrameError::Arity {
                        verb: "CLOSE",
                        expected: 2,
                        got: items.len(),
                    });
                };
                Ok(ClientMessage::Close {
                    sub: client_sub("CLOSE", sub)?,
                })
            }
            "EVENT" | "AUTH" => {
                let verb = if &*verb == "EVENT" { "EVENT" } else { "AUTH" };
                let [event] = rest else {
                    return Err(FrameError::Arity {
                        verb,
                        expected: 2,
                        got: items.len(),
                    });
                };
                if !event.get().starts_with('{') {
                    return Err(FrameError::WrongType {
                        verb,
                        index: 1,
                        expected: "an object",
                    });
                }
                Ok(if verb == "EVENT" {
                    ClientMessage::Event { event }
                } else {
                    ClientMessage::Auth { event }
                })
            }
            other => Err(FrameError::UnknownVerb(truncate(other))),
        }
    }

    /// Encode as a JSON text frame.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(64);
        match self {
            ClientMessage::Req { sub, filters } => push_filters(&mut out, "REQ", sub, filters),
            ClientMessage::Count { sub, filters } => push_filters(&mut out, "COUNT", sub, filters),
            ClientMessage::Close { sub } => {
                out.push_str("[\"CLOSE\",");
                push_str(&mut out, sub);
            }
            ClientMessage::Event { event } => {
                out.push_str("[\"EVENT\",");
                out.push_str(event.get());
            }
            ClientMessage::Auth { event } => {
                out.push_str("[\"AUTH\",");
                out.push_str(event.get());
            }
        }
        out.push(']');
        out
    }

    fn decode_filters(
        verb: &'static str,
        rest: &[&'a RawValue],
    ) -> Result<(Cow<'a, str>, Vec<&'a RawValue>), FrameError> {
        let Some((sub, filters)) = rest.split_first() else {
            return Err(FrameError::Arity {
                verb,
                expected: 3,
                got: 1,
            });
        };
        let sub = client_sub(verb, sub)?;
        if filters.is_empty() {
            return Err(FrameError::Arity {
                verb,
                expected: 3,
                got: 2,
            });
        }
        if let Some(i) = filters.iter().position(|f| !f.get().starts_with('{')) {
            return Err(FrameError::WrongType {
                verb,
                index: i + 2,
                expected: "a filter object",
            });
        }
        Ok((sub, filters.to_vec()))
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding machinery. The relay direction is the hot path, so it is one streaming pass over
// the frame: the outer array is visited element by element and the event object is scanned
// once for `id` and `created_at` while every other field is skipped.

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

/// Visits a relay frame. Structural problems come back as `Ok(Err(FrameError))` after the
/// rest of the array has been skipped, so serde_json still sees a complete value and the
/// caller gets a precise error instead of a stringly one.
struct RelayFrameVisitor<'a> {
    text: &'a str,
}

type Decoded<'a> = Result<RelayMessage<'a>, FrameError>;

impl<'de> Visitor<'de> for RelayFrameVisitor<'de> {
    type Value = Decoded<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a NIP-01 relay frame")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let verb = match seq.next_element::<Atom<'de>>()? {
            Some(Atom::Str(v)) => v,
            Some(_) => return finish(seq, 1, Err(FrameError::MissingVerb)),
            None => return Ok(Err(FrameError::MissingVerb)),
        };
        match &*verb {
            "EVENT" => self.event(seq),
            "EOSE" => simple(seq, "EOSE", |[sub]: [Atom<'de>; 1]| {
                Ok(RelayMessage::Eose {
                    sub: relay_sub("EOSE", sub)?,
                })
            }),
            "CLOSED" => simple(seq, "CLOSED", |[sub, message]: [Atom<'de>; 2]| {
                Ok(RelayMessage::Closed {
                    sub: relay_sub("CLOSED", sub)?,
                    message: text("CLOSED", 2, message)?,
                })
            }),
            "NOTICE" => simple(seq, "NOTICE", |[message]: [Atom<'de>; 1]| {
                Ok(RelayMessage::Notice {
                    message: text("NOTICE", 1, message)?,
                })
            }),
            "AUTH" => simple(seq, "AUTH", |[challenge]: [Atom<'de>; 1]| {
                Ok(RelayMessage::Auth {
                    challenge: text("AUTH", 1, challenge)?,
                })
            }),
            "OK" => simple(seq, "OK", |[id, accepted, message]: [Atom<'de>; 3]| {
                let Atom::Str(id) = id else {
                    return Err(FrameError::WrongType {
                        verb: "OK",
                        index: 1,
                        expected: "an event id string",
                    });
                };
                let event_id = EventId::from_hex(&id).ok_or(FrameError::WrongType {
                    verb: "OK",
                    index: 1,
                    expected: "a 64-char hex event id",
                })?;
                let Atom::Bool(accepted) = accepted else {
                    return Err(FrameError::WrongType {
                        verb: "OK",
                        index: 2,
                        expected: "a boolean",
                    });
                };
                Ok(RelayMessage::Ok {
                    event_id,
                    accepted,
                    message: text("OK", 3, message)?,
                })
            }),
            "COUNT" => self.count(seq),
            other => {
                let err = FrameError::UnknownVerb(truncate(other));
                finish(seq, 1, Err(err))
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Err(FrameError::NotArray))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err(FrameError::NotArray))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(FrameError::NotArray))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(FrameError::NotArray))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(FrameError::NotArray))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(FrameError::NotArray))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Err(FrameError::NotArray))
    }
}

impl<'de> RelayFrameVisitor<'de> {
    fn event<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Decoded<'de>, A::Error> {
        // The subscription id is taken raw so its end offset locates the event's bytes.
        let Some(sub_raw) = seq.next_element::<&'de RawValue>()? else {
            return Ok(Err(FrameError::Arity {
                verb: "EVENT",
                expected: 3,
                got: 1,
            }));
        };
        let Some(meta) = seq.next_element_seed(EventSeed)? else {
            return Ok(Err(FrameError::Arity {
                verb: "EVENT",
                expected: 3,
                got: 2,
            }));
        };
        let extra = count_rest(&mut seq)?;
        if extra > 0 {
            return Ok(Err(FrameError::Arity {
                verb: "EVENT",
                expected: 3,
                got: 3 + extra,
            }));
        }
        let sub = match serde_json::from_str::<Atom<'de>>(sub_raw.get()) {
            Ok(sub) => relay_sub("EVENT", sub),
            Err(e) => Err(json_error(e)),
        };
        Ok(sub.and_then(|sub| {
            let (id, created_at) = meta?;
            let json = event_slice(self.text, sub_raw);
            Ok(RelayMessage::Event {
                sub,
                event: RawEvent {
                    json,
                    id,
                    created_at,
                },
            })
        }))
    }

    fn count<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Decoded<'de>, A::Error> {
        #[derive(Deserialize)]
        struct Body {
            count: u64,
        }
        let Some(sub) = seq.next_element::<Atom<'de>>()? else {
            return Ok(Err(FrameError::Arity {
                verb: "COUNT",
                expected: 3,
                got: 1,
            }));
        };
        let Some(body) = seq.next_element::<&'de RawValue>()? else {
            return Ok(Err(FrameError::Arity {
                verb: "COUNT",
                expected: 3,
                got: 2,
            }));
        };
        let extra = count_rest(&mut seq)?;
        if extra > 0 {
            return Ok(Err(FrameError::Arity {
                verb: "COUNT",
                expected: 3,
                got: 3 + extra,
            }));
        }
        let count = serde_json::from_str::<Body>(body.get())
            .map(|b| b.count)
            .map_err(|_| FrameError::WrongType {
                verb: "COUNT",
                index: 2,
                expected: "an object with a count",
            });
        Ok(relay_sub("COUNT", sub).and_then(|sub| Ok(RelayMessage::Count { sub, count: count? })))
    }
}

/// Decode a fixed number of atoms, then hand them to `build`; wrong arity is reported with
/// the true element count.
fn simple<'de, A, const N: usize>(
    mut seq: A,
    verb: &'static str,
    build: impl FnOnce([Atom<'de>; N]) -> Decoded<'de>,
) -> Result<Decoded<'de>, A::Error>
where
    A: SeqAccess<'de>,
{
    let mut atoms: Vec<Atom<'de>> = Vec::with_capacity(N);
    while atoms.len() < N {
        let Some(atom) = seq.next_element::<Atom<'de>>()? else {
            return Ok(Err(FrameError::Arity {
                verb,
                expected: N + 1,
                got: atoms.len() + 1,
            }));
        };
        atoms.push(atom);
    }
    let extra = count_rest(&mut seq)?;
    if extra > 0 {
        return Ok(Err(FrameError::Arity {
            verb,
            expected: N + 1,
            got: N + 1 + extra,
        }));
    }
    let Ok(atoms) = <[Atom<'de>; N]>::try_from(atoms) else {
        return Ok(Err(FrameError::Arity {
            verb,
            expected: N + 1,
            got: 0,
        }));
    };
    Ok(build(atoms))
}

/// Skip what is left of the array and return `result`, so the JSON stays fully validated.
fn finish<'de, A: SeqAccess<'de>>(
    mut seq: A,
    _seen: usize,
    result: Decoded<'de>,
) -> Result<Decoded<'de>, A::Error> {
    count_rest(&mut seq)?;
    Ok(result)
}

fn count_rest<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<usize, A::Error> {
    let mut n = 0;
    while seq.next_element::<IgnoredAny>()?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// Scans an event object for `id` and `created_at`, skipping everything else.
struct EventSeed;

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

/// The event's bytes: after the subscription id and its comma, up to the closing bracket.
///
/// Only called on a frame already validated as `[verb, sub, object]`, so after the sub id
/// there is whitespace, one comma, the object, whitespace and `]`.
fn event_slice<'a>(text: &'a str, sub_raw: &'a RawValue) -> &'a str {
    let sub = sub_raw.get();
    let start = (sub.as_ptr() as usize - text.as_ptr() as usize) + sub.len();
    let after_sub = &text[start..];
    let after_comma = after_sub
        .trim_start()
        .strip_prefix(',')
        .unwrap_or(after_sub);
    let body = after_comma.trim_start();
    let body = body.trim_end();
    body.strip_suffix(']').unwrap_or(body).trim_end()
}

fn relay_sub<'a>(verb: &'static str, atom: Atom<'a>) -> Result<Cow<'a, str>, FrameError> {
    let Atom::Str(sub) = atom else {
        return Err(FrameError::WrongType {
            verb,
            index: 1,
            expected: "a subscription id string",
        });
    };
    check_sub(sub)
}

fn client_sub<'a>(verb: &'static str, raw: &'a RawValue) -> Result<Cow<'a, str>, FrameError> {
    let sub = parse_str(raw).ok_or(FrameError::WrongType {
        verb,
        index: 1,
        expected: "a subscription id string",
    })?;
    check_sub(sub)
}

fn check_sub(sub: Cow<'_, str>) -> Result<Cow<'_, str>, FrameError> {
    let chars = sub.chars().count();
    if chars == 0 || chars > MAX_SUB_ID_CHARS {
        return Err(FrameError::SubId { chars });
    }
    Ok(sub)
}

fn text<'a>(verb: &'static str, index: usize, atom: Atom<'a>) -> Result<Cow<'a, str>, FrameError> {
    match atom {
        Atom::Str(s) => Ok(s),
        _ => Err(FrameError::WrongType {
            verb,
            index,
            expected: "a string",
        }),
    }
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

fn push_str(out: &mut String, s: &str) {
    // Serialising a &str into a String cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

fn push_filters(out: &mut String, verb: &str, sub: &str, filters: &[&RawValue]) {
    out.push_str("[\"");
    out.push_str(verb);
    out.push_str("\",");
    push_str(out, sub);
    for f in filters {
        out.push(',');
        out.push_str(f.get());
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
