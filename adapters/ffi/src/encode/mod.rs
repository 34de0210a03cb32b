//! The JSON object each transmit and event is polled as. Public so a Rust test can encode
//! what the Rust API returns and compare it with what the ABI hands a host.
//!
//! Every object has a `"type"`; ids, epochs and counts are numbers; times are `*_ms` numbers
//! on the host's `now_ms` scale, rounded up; an absent value is `null`. A relay event's JSON
//! is copied verbatim as the value of `"event"` (the core checked it is a JSON object).
//! A variant this library does not know yet (the core's enums grow) is `{"type":"unknown"}`.

use std::fmt::Display;

use tether_core::nostr::{Carries, Disconnect, Event, Rejection, Transmit};
use tether_core::sse::session::{DropReason, EndReason, FailReason};
use tether_core::sse::{self, parser::ParseError, Progress};
use tether_core::SocketLoss;

use crate::{duration_ms_ceil, millis_ceil};

mod pool;
pub use pool::{
    encode_applied, encode_pool_event, encode_pool_stats, encode_pool_transmit,
    encode_verify_request,
};

/// Append the JSON object for a relay transmit:
///
/// - `{"type":"open","epoch":N}`: open a WebSocket; tag its inputs with `epoch`.
/// - `{"type":"send","text":"...","carries":C}`, `C` one of `{"req":SUB}`, `{"close":SUB}`,
///   `{"negentropy":SUB}` (a NIP-77 frame of that subscription's catch-up),
///   `{"event":"hex"}`, `{"auth":"hex"}`
/// - `{"type":"ping"}`
/// - `{"type":"close","epoch":N}`
/// - `{"type":"fetch_info"}`: fetch the relay's NIP-11 document (only asked when the
///   session's `info_refresh` is set, which the C ABI does not do yet)
pub fn encode_relay_transmit(transmit: &Transmit, out: &mut Vec<u8>) {
    let mut o = Obj::new(out);
    match transmit {
        Transmit::Open { epoch } => o.kind("open").num("epoch", epoch.0),
        Transmit::Send { text, carries } => {
            o.kind("send").str("text", text).key("carries");
            let mut inner = Obj::new(&mut *o.out);
            // The key is the core's name for what the frame carries.
            let name = carries.as_str();
            match carries {
                Carries::Req(sub) | Carries::Close(sub) | Carries::Negentropy(sub) => {
                    inner.num(name, sub.0)
                }
                Carries::Event(id) | Carries::Auth(id) => inner.hex(name, &id.0),
                _ => inner.null(name),
            };
            inner.end();
            &mut o
        }
        Transmit::Ping => o.kind("ping"),
        Transmit::Close { epoch } => o.kind("close").num("epoch", epoch.0),
        Transmit::FetchInfo => o.kind("fetch_info"),
    };
    o.end();
}

/// Append the JSON object for a relay event:
///
/// - `{"type":"connected"}`
/// - `{"type":"disconnected","reconnect_at_ms":N|null,"why":W,"close_code":N|null}`, `W`
///   `requested` or a socket loss (`connection_refused`, `tls_rejected`, `handshake_failed`,
///   `connect_timeout`, `closed_by_peer`, `frame_too_large`, `pong_timeout`, `idle_timeout`,
///   `network_error`)
/// - `{"type":"received","sub":N,"id":"hex","event":{...the relay's bytes...}}`
/// - `{"type":"eose","sub":N}`, `{"type":"queued","sub":N}`, `{"type":"eose_timeout","sub":N}`
/// - `{"type":"caught_up","sub":N,"method":"negentropy"|"since","exact_since":N,"recovered":N}`
/// - `{"type":"closed","sub":N,"reason":"...","attempts":N}`
/// - `{"type":"retrying","sub":N,"at_ms":N,"attempt":N}`
/// - `{"type":"rate_limited","until_ms":N}`, `{"type":"subscription_limit","max":N}`
/// - `{"type":"notice","message":"..."}`
/// - `{"type":"auth_challenge","challenge":"...","id":N}` (pass `id` to `authenticate`)
/// - `{"type":"authenticated"}`, `{"type":"auth_failed","reason":"..."}`
/// - `{"type":"published","id":"hex"}`
/// - `{"type":"rejected","id":"hex","why":"refused"|"timed_out"|"too_large","message":"..."|null}`
///   (`message` is the relay's, for `refused`); `too_large` adds `"len":N,"max":N`: the
///   EVENT frame's bytes and the relay's declared maximum
/// - `{"type":"peer_error","kind":K,"error":"..."}`, `K` what was wrong with the frame
///   (`json`, `arity`, `unknown_verb`, `too_large`, ...: `FrameError::kind`)
pub fn encode_relay_event(event: &Event, out: &mut Vec<u8>) {
    let mut o = Obj::new(out);
    match event {
        Event::Connected => o.kind("connected"),
        Event::Disconnected { reconnect_at, why } => {
            o.kind("disconnected")
                .opt_num("reconnect_at_ms", reconnect_at.map(millis_ceil));
            let code = match why {
                Disconnect::Lost(SocketLoss::ClosedByPeer { code }) => code.map(u64::from),
                _ => None,
            };
            o.str("why", why.as_str()).opt_num("close_code", code)
        }
        Event::Received { sub, id, raw } => o
            .kind("received")
            .num("sub", sub.0)
            .hex("id", &id.0)
            .raw("event", raw),
        Event::Eose { sub } => o.kind("eose").num("sub", sub.0),
        Event::CaughtUp {
            sub,
            method,
            exact_since,
            recovered,
        } => o
            .kind("caught_up")
            .num("sub", sub.0)
            .str("method", method.as_str())
            .num("exact_since", *exact_since)
            .num("recovered", *recovered),
        Event::Closed {
            sub,
            reason,
            attempts,
        } => o
            .kind("closed")
            .num("sub", sub.0)
            .str("reason", reason)
            .num("attempts", u64::from(*attempts)),
        Event::Retrying { sub, at, attempt } => o
            .kind("retrying")
            .num("sub", sub.0)
            .num("at_ms", millis_ceil(*at))
            .num("attempt", u64::from(*attempt)),
        Event::Queued { sub } => o.kind("queued").num("sub", sub.0),
        Event::EoseTimeout { sub } => o.kind("eose_timeout").num("sub", sub.0),
        Event::RateLimited { until } => o.kind("rate_limited").num("until_ms", millis_ceil(*until)),
        Event::SubscriptionLimit { max } => o.kind("subscription_limit").num("max", *max as u64),
        Event::Notice { message } => o.kind("notice").str("message", message),
        Event::AuthChallenge { challenge, id } => o
            .kind("auth_challenge")
            .str("challenge", challenge)
            .num("id", id.0),
        Event::Authenticated => o.kind("authenticated"),
        Event::AuthFailed { reason } => o.kind("auth_failed").str("reason", reason),
        Event::Published { id } => o.kind("published").hex("id", &id.0),
        Event::Rejected { id, reason } => {
            o.kind("rejected")
                .hex("id", &id.0)
                .str("why", reason.as_str());
            match reason {
                Rejection::Refused { message } => o.str("message", message),
                Rejection::TooLarge { len, max } => o
                    .null("message")
                    .num("len", *len as u64)
                    .num("max", *max as u64),
                _ => o.null("message"),
            }
        }
        Event::PeerError { error } => o
            .kind("peer_error")
            .str("kind", error.kind())
            .display("error", error),
        _ => o.kind("unknown"),
    };
    o.end();
}

/// Append, inside an `open` transmit's object, what the attempt is, for a host that builds
/// each request itself (a fresh token, a new JSON-RPC id): `"attempt":"original"|"resume"|
/// "reissue","number":N` (requests sent so far, this one included) and `"after":DROP|null`
/// (why the previous attempt ended: `DropReason::as_str`).
pub fn encode_sse_attempt(info: &sse::AttemptInfo, out: &mut Vec<u8>) {
    // The object encoder writes whole objects; the open transmit's closing brace is
    // replaced by these fields and a new one.
    if out.last() == Some(&b'}') {
        out.pop();
        let after = match info.after {
            Some(why) => format!("\"{}\"", why.as_str()),
            None => "null".to_owned(),
        };
        out.extend_from_slice(
            format!(
                ",\"attempt\":\"{}\",\"number\":{},\"after\":{}}}",
                info.attempt.as_str(),
                info.number,
                after
            )
            .as_bytes(),
        );
    }
}

/// Append the JSON object for an SSE transmit:
///
/// - `{"type":"open","epoch":N,"last_event_id":"..."|null,"redirect":"..."|null,
///   "method":"GET","headers":[["name","value"],...],"body":"...",
///   "withhold":["authorization",...]}`: send `method` with `headers`, `body` (none when
///   empty) and `Accept: text/event-stream` (and `Last-Event-ID` when not null) to the
///   stream's URL, or to `redirect` when not null (a redirect the core follows: the same
///   attempt, and the same epoch), without any header `withhold` names (credentials, on a
///   redirect to another origin); the handle's poll adds what the attempt is (see
///   [`encode_sse_attempt`])
/// - `{"type":"close","epoch":N}`: abort that request
/// - `{"type":"end"}`: the stream is over; no request follows (deliver the queued events,
///   the last of which says why)
pub fn encode_sse_transmit(transmit: &sse::session::Transmit, out: &mut Vec<u8>) {
    use sse::session::Transmit;
    let mut o = Obj::new(out);
    match transmit {
        Transmit::Open {
            epoch,
            last_event_id,
            redirect,
            withhold,
            request,
            ..
        } => {
            o.kind("open")
                .num("epoch", epoch.0)
                .opt_str("last_event_id", last_event_id.as_deref())
                .opt_str("redirect", redirect.as_deref())
                .str("method", &request.method)
                .key("headers");
            let headers: Vec<[&str; 2]> = request
                .headers
                .iter()
                .map(|(n, v)| [n.as_str(), v.as_str()])
                .collect();
            let _ = serde_json::to_writer(&mut *o.out, &headers);
            o.str("body", &String::from_utf8_lossy(&request.body))
                .key("withhold");
            o.out.push(b'[');
            for (i, name) in withhold.iter().enumerate() {
                if i > 0 {
                    o.out.push(b',');
                }
                o.out.extend_from_slice(format!("\"{name}\"").as_bytes());
            }
            o.out.push(b']');
            &mut o
        }
        Transmit::Close { epoch } => o.kind("close").num("epoch", epoch.0),
        Transmit::End => o.kind("end"),
    };
    o.end();
}

/// Append the JSON object for an SSE event:
///
/// - `{"type":"open"}`
/// - `{"type":"message","event":"...","data":"...","id":"..."}`
/// - `{"type":"reconnecting",DROP,"attempt":N,"at_ms":N}`
/// - `{"type":"reconnected","gap_ms":N}`
/// - `{"type":"parse_error","kind":"line_too_long"|"event_too_large","limit":N,"message":"..."}`
/// - `{"type":"unsendable_id","id":"...","message":"..."}`
/// - `{"type":"failed","why":"status","status":N}`,
///   `{"type":"failed","why":"content_type","content_type":"..."|null}`,
///   `{"type":"failed","why":"exhausted",DROP}`,
///   `{"type":"failed","why":"invalid_request","detail":"..."}`,
///   `{"type":"failed","why":"rejected","status":N,"body":"...",PROGRESS}`,
///   `{"type":"failed","why":"interrupted"|"resume_exhausted",DROP,PROGRESS}`,
///   `{"type":"failed","why":"session_gone",PROGRESS}`,
///   `{"type":"failed","why":"error_event","data":"...",PROGRESS}`
/// - `{"type":"closed","why":"no_content"|"local"}`
/// - `{"type":"ended","why":"data"|"event"|"eof","event":"..."|null,PROGRESS}` (`event`: the
///   end event's type, for `event`)
///
/// where `DROP` is `"drop":"status"|"network_error"|"eof"|"connect_timeout"|"idle_timeout",
/// "status":N|null,"loss":"..."|null` (`loss` names the network error) and `PROGRESS` is
/// `"events":N,"last_event_id":"..."` (messages delivered since `connect`, and the last
/// event ID in force then, `""` for none). Every `why` and `kind` is the core's `as_str` name
/// of its reason.
pub fn encode_sse_event(event: &sse::Event, out: &mut Vec<u8>) {
    use sse::Event;
    let mut o = Obj::new(out);
    match event {
        Event::Open => o.kind("open"),
        Event::Message(m) => o
            .kind("message")
            .str("event", &m.event)
            .str("data", &m.data)
            .str("id", &m.id),
        Event::Reconnecting { why, attempt, at } => {
            o.kind("reconnecting");
            drop_fields(&mut o, *why);
            o.num("attempt", u64::from(*attempt))
                .num("at_ms", millis_ceil(*at))
        }
        Event::Reconnected { gap } => o.kind("reconnected").num("gap_ms", duration_ms_ceil(*gap)),
        Event::Reissued { gap, attempts } => o
            .kind("reissued")
            .num("gap_ms", duration_ms_ceil(*gap))
            .num("attempts", u64::from(*attempts)),
        Event::ParseError(error) => {
            let limit = match error {
                ParseError::LineTooLong { limit } | ParseError::EventTooLarge { limit } => *limit,
                _ => 0,
            };
            o.kind("parse_error")
                .str("kind", error.as_str())
                .num("limit", limit as u64)
                .display("message", error)
        }
        Event::UnsendableId { id, why } => o
            .kind("unsendable_id")
            .str("id", id)
            .display("message", why),
        Event::Failed { why } => {
            o.kind("failed").str("why", why.as_str());
            match why {
                FailReason::Status(status) => o.num("status", u64::from(*status)),
                FailReason::ContentType(kind) => o.opt_str("content_type", kind.as_deref()),
                FailReason::ContentEncoding(encoding) => o.str("content_encoding", encoding),
                FailReason::Redirect {
                    status,
                    location,
                    why,
                } => o
                    .num("status", u64::from(*status))
                    .str("location", location)
                    .str("refusal", why.as_str()),
                FailReason::Exhausted(last) => {
                    drop_fields(&mut o, *last);
                    &mut o
                }
                FailReason::InvalidRequest(detail) => o.str("detail", detail),
                FailReason::Rejected {
                    status,
                    body,
                    progress,
                } => {
                    o.num("status", u64::from(*status)).str("body", body);
                    progress_fields(&mut o, progress)
                }
                FailReason::Interrupted { why, progress }
                | FailReason::ResumeExhausted { why, progress }
                | FailReason::ReissueExhausted { why, progress } => {
                    drop_fields(&mut o, *why);
                    progress_fields(&mut o, progress)
                }
                FailReason::SessionGone { progress } => progress_fields(&mut o, progress),
                FailReason::ErrorEvent { data, progress } => {
                    o.str("data", data);
                    progress_fields(&mut o, progress)
                }
                _ => &mut o,
            }
        }
        Event::Closed { why } => o.kind("closed").str("why", why.as_str()),
        Event::Ended { why, progress } => {
            let event = match why {
                EndReason::Event(name) => Some(name.as_str()),
                _ => None,
            };
            o.kind("ended")
                .str("why", why.as_str())
                .opt_str("event", event);
            progress_fields(&mut o, progress)
        }
        _ => o.kind("unknown"),
    };
    o.end();
}

fn drop_fields(o: &mut Obj<'_>, why: DropReason) {
    let (status, loss) = match why {
        DropReason::Status(status) => (Some(u64::from(status)), None),
        DropReason::NetworkError(loss) => (None, Some(loss.as_str())),
        _ => (None, None),
    };
    o.str("drop", why.as_str())
        .opt_num("status", status)
        .opt_str("loss", loss);
}

fn progress_fields<'o, 'a>(o: &'o mut Obj<'a>, progress: &Progress) -> &'o mut Obj<'a> {
    o.num("events", progress.events)
        .str("last_event_id", &progress.last_event_id)
}

/// A JSON object being appended to a buffer.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    fn key(&mut self, key: &str) -> &mut Self {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        // Keys are this module's own literals: plain ASCII, nothing to escape.
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self
    }

    fn kind(&mut self, kind: &str) -> &mut Self {
        self.str("type", kind)
    }

    fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        string(self.out, value);
        self
    }

    fn opt_str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.str(key, value),
            None => self.null(key),
        }
    }

    fn display(&mut self, key: &str, value: &impl Display) -> &mut Self {
        self.str(key, &value.to_string())
    }

    fn num(&mut self, key: &str, value: u64) -> &mut Self {
        self.key(key);
        // By hand rather than through `fmt`: every event carries a few numbers.
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = value;
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        self.out.extend_from_slice(&digits[at..]);
        self
    }

    fn opt_num(&mut self, key: &str, value: Option<u64>) -> &mut Self {
        match value {
            Some(value) => self.num(key, value),
            None => self.null(key),
        }
    }

    fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key);
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    fn null(&mut self, key: &str) -> &mut Self {
        self.key(key);
        self.out.extend_from_slice(b"null");
        self
    }

    fn hex(&mut self, key: &str, bytes: &[u8; 32]) -> &mut Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        self.key(key);
        // Into a stack buffer, then one copy: a push per digit costs a capacity check each.
        let mut text = [b'"'; 66];
        for (pair, b) in text[1..65].chunks_exact_mut(2).zip(bytes) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 0xf)];
        }
        self.out.extend_from_slice(&text);
        self
    }

    /// `value` is JSON already (the relay's event, checked by the core): copied verbatim.
    fn raw(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        self.out.extend_from_slice(value.as_bytes());
        self
    }

    fn end(&mut self) {
        self.out.push(b'}');
    }
}

/// Append `value` as a JSON string.
fn string(out: &mut Vec<u8>, value: &str) {
    // Writing a `str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::nostr::SubscriptionId;
    use tether_core::Instant;

    fn relay_event(event: &Event) -> String {
        let mut out = Vec::new();
        encode_relay_event(event, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn objects_are_json_with_escaped_strings_and_verbatim_events() {
        let raw = "{\"id\": \"x\",\n \"content\":\"\\u00e9\"}";
        let text = relay_event(&Event::Received {
            sub: SubscriptionId(3),
            id: tether_core::nostr::message::EventId([0xab; 32]),
            raw: raw.to_owned(),
        });
        assert_eq!(
            text,
            format!(
                "{{\"type\":\"received\",\"sub\":3,\"id\":\"{}\",\"event\":{raw}}}",
                "ab".repeat(32)
            )
        );
        let text = relay_event(&Event::Closed {
            sub: SubscriptionId(1),
            reason: "say \"no\"\n".into(),
            attempts: 2,
        });
        assert_eq!(
            text,
            r#"{"type":"closed","sub":1,"reason":"say \"no\"\n","attempts":2}"#
        );
        let text = relay_event(&Event::Disconnected {
            reconnect_at: Some(Instant::from_origin(std::time::Duration::from_micros(1500))),
            why: Disconnect::Lost(tether_core::SocketLoss::ClosedByPeer { code: Some(1006) }),
        });
        assert_eq!(
            text,
            r#"{"type":"disconnected","reconnect_at_ms":2,"why":"closed_by_peer","close_code":1006}"#
        );
        let mut out = Vec::new();
        encode_relay_transmit(
            &Transmit::Send {
                text: "[\"CLOSE\",\"1:0\"]".into(),
                carries: Carries::Close(SubscriptionId(1)),
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"type":"send","text":"[\"CLOSE\",\"1:0\"]","carries":{"close":1}}"#
        );
        for n in [0, 7, 10, 1_234_567_890, u64::MAX] {
            let mut out = Vec::new();
            Obj::new(&mut out).num("n", n).end();
            assert_eq!(String::from_utf8(out).unwrap(), format!("{{\"n\":{n}}}"));
        }
    }

    fn sse_event(event: &sse::Event) -> String {
        let mut out = Vec::new();
        encode_sse_event(event, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// The variants this module wrote as `"unknown"` before the core named them.
    #[test]
    fn every_reason_the_core_has_is_named() {
        let mut out = Vec::new();
        encode_relay_transmit(
            &Transmit::Send {
                text: "[\"NEG-CLOSE\",\"2:0\"]".into(),
                carries: Carries::Negentropy(SubscriptionId(2)),
            },
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"type":"send","text":"[\"NEG-CLOSE\",\"2:0\"]","carries":{"negentropy":2}}"#
        );
        let id = tether_core::nostr::message::EventId([0x01; 32]);
        let hex = "01".repeat(32);
        assert_eq!(
            relay_event(&Event::Rejected {
                id,
                reason: Rejection::TooLarge {
                    len: 70_000,
                    max: 65_536
                },
            }),
            format!(
                r#"{{"type":"rejected","id":"{hex}","why":"too_large","message":null,"len":70000,"max":65536}}"#
            )
        );
        assert_eq!(
            relay_event(&Event::Disconnected {
                reconnect_at: None,
                why: Disconnect::Requested,
            }),
            r#"{"type":"disconnected","reconnect_at_ms":null,"why":"requested","close_code":null}"#
        );
        let progress = Progress::new(3, "e3");
        for (why, want) in [
            (
                FailReason::Rejected {
                    status: 400,
                    body: "no".into(),
                    progress: progress.clone(),
                },
                r#""why":"rejected","status":400,"body":"no","events":3,"last_event_id":"e3""#,
            ),
            (
                FailReason::Interrupted {
                    why: DropReason::Eof,
                    progress: progress.clone(),
                },
                r#""why":"interrupted","drop":"eof","status":null,"loss":null,"events":3,"last_event_id":"e3""#,
            ),
            (
                FailReason::ResumeExhausted {
                    why: DropReason::NetworkError(SocketLoss::NetworkError),
                    progress: progress.clone(),
                },
                r#""why":"resume_exhausted","drop":"network_error","status":null,"loss":"network_error","events":3,"last_event_id":"e3""#,
            ),
            (
                FailReason::SessionGone {
                    progress: progress.clone(),
                },
                r#""why":"session_gone","events":3,"last_event_id":"e3""#,
            ),
            (
                FailReason::ErrorEvent {
                    data: "boom".into(),
                    progress: progress.clone(),
                },
                r#""why":"error_event","data":"boom","events":3,"last_event_id":"e3""#,
            ),
        ] {
            assert_eq!(
                sse_event(&sse::Event::Failed { why }),
                format!(r#"{{"type":"failed",{want}}}"#)
            );
        }
        assert_eq!(
            sse_event(&sse::Event::Ended {
                why: EndReason::Event("done".into()),
                progress: progress.clone(),
            }),
            r#"{"type":"ended","why":"event","event":"done","events":3,"last_event_id":"e3"}"#
        );
        assert_eq!(
            sse_event(&sse::Event::Ended {
                why: EndReason::Eof,
                progress: Progress::new(0, ""),
            }),
            r#"{"type":"ended","why":"eof","event":null,"events":0,"last_event_id":""}"#
        );
    }
}
