//! The relay-to-client direction: [`RelayMessage`], decoded in one streaming pass.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::event::{EventSeed, RawEvent};
use super::{check_sub, count_rest, json_error, push_str, truncate, Atom, EventId, FrameError};

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
    /// `["NEG-MSG", sub, hex]` (NIP-77): the relay's next negentropy message.
    NegMsg {
        /// The negentropy subscription id.
        sub: Cow<'a, str>,
        /// The message, hex-encoded as on the wire (decoded by the catch-up, which bounds it).
        message: Cow<'a, str>,
    },
    /// `["NEG-ERR", sub, reason]` (NIP-77): the relay ended a negentropy session.
    NegErr {
        /// The negentropy subscription id.
        sub: Cow<'a, str>,
        /// Machine-readable prefix (`blocked:`, `closed:`, ...) and human text.
        message: Cow<'a, str>,
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
                out.push_str(event.json());
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
            RelayMessage::NegMsg { sub, message } => {
                out.push_str("[\"NEG-MSG\",");
                push_str(&mut out, sub);
                out.push(',');
                push_str(&mut out, message);
            }
            RelayMessage::NegErr { sub, message } => {
                out.push_str("[\"NEG-ERR\",");
                push_str(&mut out, sub);
                out.push(',');
                push_str(&mut out, message);
            }
        }
        out.push(']');
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding machinery. The relay direction is the hot path, so it is one streaming pass over
// the frame: the outer array is visited element by element and the event object is scanned
// once for `id` and `created_at` while every other field is skipped.

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
            "NEG-MSG" => simple(seq, "NEG-MSG", |[sub, message]: [Atom<'de>; 2]| {
                Ok(RelayMessage::NegMsg {
                    sub: relay_sub("NEG-MSG", sub)?,
                    message: text("NEG-MSG", 2, message)?,
                })
            }),
            "NEG-ERR" => neg_err(seq),
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

/// `["NEG-ERR", sub, reason, ...]`: strfry appends a fourth element (the result count it
/// refused), so anything after the reason is skipped rather than refused.
fn neg_err<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Decoded<'de>, A::Error> {
    let (Some(sub), Some(message)) = (
        seq.next_element::<Atom<'de>>()?,
        seq.next_element::<Atom<'de>>()?,
    ) else {
        return Ok(Err(FrameError::Arity {
            verb: "NEG-ERR",
            expected: 3,
            got: 2,
        }));
    };
    count_rest(&mut seq)?;
    Ok(relay_sub("NEG-ERR", sub).and_then(|sub| {
        Ok(RelayMessage::NegErr {
            sub,
            message: text("NEG-ERR", 2, message)?,
        })
    }))
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
