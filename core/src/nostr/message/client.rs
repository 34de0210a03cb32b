//! The client-to-relay direction: [`ClientMessage`], encoded by the session and decoded by
//! relays (the testkit's model among them).

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::{check_sub, json_error, parse_str, push_str, truncate, FrameError};

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
    /// `["NEG-OPEN", sub, filter, hex]` (NIP-77): start a negentropy reconciliation.
    NegOpen {
        /// The negentropy subscription id.
        sub: Cow<'a, str>,
        /// The one filter whose events are reconciled.
        filter: &'a RawValue,
        /// The initial message, hex-encoded.
        message: Cow<'a, str>,
    },
    /// `["NEG-MSG", sub, hex]` (NIP-77): the client's next negentropy message.
    NegMsg {
        /// The negentropy subscription id.
        sub: Cow<'a, str>,
        /// The message, hex-encoded.
        message: Cow<'a, str>,
    },
    /// `["NEG-CLOSE", sub]` (NIP-77): end a negentropy session.
    NegClose {
        /// The negentropy subscription id.
        sub: Cow<'a, str>,
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
            "NEG-OPEN" => {
                let [sub, filter, message] = rest else {
                    return Err(FrameError::Arity {
                        verb: "NEG-OPEN",
                        expected: 4,
                        got: items.len(),
                    });
                };
                if !filter.get().starts_with('{') {
                    return Err(FrameError::WrongType {
                        verb: "NEG-OPEN",
                        index: 2,
                        expected: "a filter object",
                    });
                }
                Ok(ClientMessage::NegOpen {
                    sub: client_sub("NEG-OPEN", sub)?,
                    filter,
                    message: client_text("NEG-OPEN", 3, message)?,
                })
            }
            "NEG-MSG" => {
                let [sub, message] = rest else {
                    return Err(FrameError::Arity {
                        verb: "NEG-MSG",
                        expected: 3,
                        got: items.len(),
                    });
                };
                Ok(ClientMessage::NegMsg {
                    sub: client_sub("NEG-MSG", sub)?,
                    message: client_text("NEG-MSG", 2, message)?,
                })
            }
            "NEG-CLOSE" => {
                let [sub] = rest else {
                    return Err(FrameError::Arity {
                        verb: "NEG-CLOSE",
                        expected: 2,
                        got: items.len(),
                    });
                };
                Ok(ClientMessage::NegClose {
                    sub: client_sub("NEG-CLOSE", sub)?,
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
            ClientMessage::NegOpen {
                sub,
                filter,
                message,
            } => {
                out.push_str("[\"NEG-OPEN\",");
                push_str(&mut out, sub);
                out.push(',');
                out.push_str(filter.get());
                out.push(',');
                push_str(&mut out, message);
            }
            ClientMessage::NegMsg { sub, message } => {
                out.push_str("[\"NEG-MSG\",");
                push_str(&mut out, sub);
                out.push(',');
                push_str(&mut out, message);
            }
            ClientMessage::NegClose { sub } => {
                out.push_str("[\"NEG-CLOSE\",");
                push_str(&mut out, sub);
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

fn client_sub<'a>(verb: &'static str, raw: &'a RawValue) -> Result<Cow<'a, str>, FrameError> {
    let sub = parse_str(raw).ok_or(FrameError::WrongType {
        verb,
        index: 1,
        expected: "a subscription id string",
    })?;
    check_sub(sub)
}

fn client_text<'a>(
    verb: &'static str,
    index: usize,
    raw: &'a RawValue,
) -> Result<Cow<'a, str>, FrameError> {
    parse_str(raw).ok_or(FrameError::WrongType {
        verb,
        index,
        expected: "a string",
    })
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
