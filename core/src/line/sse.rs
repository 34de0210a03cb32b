//! Lines of SSE sessions: [`Line`] for what the application hears, [`TransmitLine`] for
//! what a host must do.

use std::borrow::Cow;

use serde::Serialize;

use super::{is_zero, millis, millis_until};
use crate::sse::session::{AttemptInfo, CloseReason, DropReason, EndReason, FailReason};
use crate::sse::{request_headers, Event, Progress, Transmit};
use crate::time::Instant;

/// One line about an SSE stream.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
#[allow(missing_docs)] // The fields are the wire contract, documented on each variant.
pub enum Line<'a> {
    /// The stream is open.
    Open,
    /// A message.
    Message {
        event: &'a str,
        data: &'a str,
        id: &'a str,
    },
    /// The stream was lost; the next request goes out in `in_ms`, resuming from
    /// `last_event_id`. `why` is the core's name of the loss, `status` the HTTP status
    /// behind it, `reason` a sentence.
    Reconnecting {
        in_ms: u64,
        last_event_id: &'a str,
        attempt: u32,
        why: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        reason: String,
    },
    /// The stream resumed after `gap_ms`.
    Reconnected { gap_ms: u64 },
    /// The request was issued again after `gap_ms` and `attempts` tries.
    Reissued { gap_ms: u64, attempts: u32 },
    /// The server sent something wrong (see the nostr `peer_error`).
    PeerError {
        kind: &'static str,
        excerpt: String,
        #[serde(skip_serializing_if = "is_zero")]
        suppressed: u64,
    },
    /// The stream failed for good: `kind` the core's name of why, `status` the HTTP
    /// status behind it (200 for a wrong content type), `reason` a sentence, and how far
    /// it got and the server's own words where the failure carries them.
    Failed {
        status: Option<u16>,
        reason: String,
        kind: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        events: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        last_event_id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<&'a str>,
    },
    /// The stream ended as the request said it would (`why`; `event` the end event's type).
    Ended {
        why: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        event: Option<&'a str>,
        events: u64,
        last_event_id: &'a str,
    },
    /// The stream was closed: by the server (204) or locally.
    Closed { reason: &'static str },
}

impl<'a> Line<'a> {
    /// The line for `event` at `now`, `last_event_id` being the session's (what a
    /// reconnect resumes from). Every event has one.
    pub fn new(event: &'a Event, now: Instant, last_event_id: &'a str) -> Line<'a> {
        match event {
            Event::Open => Line::Open,
            Event::Message(m) => Line::Message {
                event: &m.event,
                data: &m.data,
                id: &m.id,
            },
            Event::Reconnecting { why, attempt, at } => Line::Reconnecting {
                in_ms: millis_until(now, *at),
                last_event_id,
                attempt: *attempt,
                why: drop_kind(*why),
                status: match why {
                    DropReason::Status(status) => Some(*status),
                    _ => None,
                },
                reason: drop_reason(*why),
            },
            Event::Reconnected { gap } => Line::Reconnected {
                gap_ms: millis(*gap),
            },
            Event::Reissued { gap, attempts } => Line::Reissued {
                gap_ms: millis(*gap),
                attempts: *attempts,
            },
            Event::ParseError(error) => Line::PeerError {
                kind: error.as_str(),
                excerpt: super::excerpt(&error.to_string()),
                suppressed: 0,
            },
            Event::UnsendableId { id, .. } => Line::PeerError {
                kind: "unsendable_id",
                excerpt: super::excerpt(id),
                suppressed: 0,
            },
            Event::Failed { why } => failed(why),
            Event::Ended { why, progress } => Line::Ended {
                why: why.as_str(),
                event: match why {
                    EndReason::Event(name) => Some(name.as_str()),
                    _ => None,
                },
                events: progress.events,
                last_event_id: &progress.last_event_id,
            },
            Event::Closed { why } => Line::Closed {
                reason: closed_reason(*why),
            },
        }
    }

    /// The line if `limiter` admits it at `now`; only `peer_error` lines are limited.
    pub fn admit(mut self, limiter: &mut super::Limiter, now: Instant) -> Option<Line<'a>> {
        if let Line::PeerError { suppressed, .. } = &mut self {
            *suppressed = limiter.admit(now)?;
        }
        Some(self)
    }
}

fn failed(why: &FailReason) -> Line<'_> {
    let (status, reason) = failure(why);
    let (progress, body): (Option<&Progress>, Option<&str>) = match why {
        FailReason::Rejected { body, progress, .. } => (Some(progress), Some(body.as_str())),
        FailReason::Interrupted { progress, .. }
        | FailReason::ResumeExhausted { progress, .. }
        | FailReason::ReissueExhausted { progress, .. }
        | FailReason::SessionGone { progress } => (Some(progress), None),
        FailReason::ErrorEvent { data, progress } => (Some(progress), Some(data.as_str())),
        _ => (None, None),
    };
    Line::Failed {
        status,
        reason,
        kind: why.as_str(),
        events: progress.map(|p| p.events),
        last_event_id: progress.map(|p| p.last_event_id.as_str()),
        body,
    }
}

/// The HTTP status behind a failure (200 for a wrong content type), and why, in a sentence.
fn failure(why: &FailReason) -> (Option<u16>, String) {
    match why {
        FailReason::Status(status) => (Some(*status), format!("HTTP status {status}")),
        FailReason::ContentType(kind) => (
            Some(200),
            format!(
                "content type {} is not text/event-stream",
                kind.as_deref().unwrap_or("(none)")
            ),
        ),
        FailReason::ContentEncoding(encoding) => (
            Some(200),
            format!("the stream is encoded with {encoding}, but identity was asked for"),
        ),
        FailReason::Redirect {
            status,
            location,
            why,
        } => (
            Some(*status),
            format!("redirect to {location:?} not followed: {why}"),
        ),
        FailReason::Exhausted(last) => {
            let status = match last {
                DropReason::Status(status) => Some(*status),
                _ => None,
            };
            (
                status,
                format!("gave up reconnecting; last: {}", drop_reason(*last)),
            )
        }
        FailReason::InvalidRequest(detail) => {
            (None, format!("the request could not be built: {detail}"))
        }
        FailReason::Rejected { status, .. } => (
            Some(*status),
            format!("HTTP status {status}; the request is not repeatable"),
        ),
        FailReason::Interrupted { why, .. } => (
            None,
            format!(
                "stream lost ({}) and the request may not be sent again",
                drop_reason(*why)
            ),
        ),
        FailReason::ResumeExhausted { why, .. } => (
            None,
            format!(
                "gave up resuming from the same event id; last: {}",
                drop_reason(*why)
            ),
        ),
        FailReason::ReissueExhausted { why, .. } => (
            None,
            format!(
                "gave up re-issuing the request; last: {}",
                drop_reason(*why)
            ),
        ),
        FailReason::SessionGone { .. } => (
            Some(404),
            "the server no longer knows the session (404 on resume)".to_owned(),
        ),
        FailReason::ErrorEvent { .. } => (None, "the server sent an error event".to_owned()),
    }
}

/// The `why` of a `reconnecting` line: a network error by its own name.
fn drop_kind(why: DropReason) -> &'static str {
    match why {
        DropReason::NetworkError(loss) => loss.as_str(),
        other => other.as_str(),
    }
}

fn drop_reason(why: DropReason) -> String {
    match why {
        DropReason::Status(status) => format!("HTTP status {status}"),
        DropReason::NetworkError(loss) => format!("network error ({})", loss.as_str()),
        DropReason::Eof => "stream ended".into(),
        DropReason::ConnectTimeout => "no response in time".into(),
        DropReason::IdleTimeout => "idle timeout".into(),
        DropReason::Restarted => "the process restarted".into(),
    }
}

fn closed_reason(why: CloseReason) -> &'static str {
    match why {
        CloseReason::NoContent => "204 No Content: the server asked to stop",
        CloseReason::Local => "closed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::Limiter;
    use crate::sse::{ParseError, Unsendable};

    #[test]
    fn peer_error_lines_are_typed_and_bounded() {
        let now = Instant::ZERO;
        let event = Event::UnsendableId {
            id: "\u{1}".repeat(100),
            why: Unsendable::Byte { at: 0, byte: 1 },
        };
        let Line::PeerError { kind, excerpt, .. } = Line::new(&event, now, "") else {
            panic!("a peer error")
        };
        assert_eq!((kind, excerpt.chars().count()), ("unsendable_id", 64));
        let event = Event::ParseError(ParseError::LineTooLong { limit: 8 });
        let line = Line::new(&event, now, "");
        assert_eq!(
            serde_json::to_value(&line).unwrap(),
            serde_json::json!({
                "type": "peer_error",
                "kind": "line_too_long",
                "excerpt": "line longer than 8 bytes"
            })
        );
        let mut limiter = Limiter::new(1, std::time::Duration::from_secs(1));
        assert!(line.clone().admit(&mut limiter, now).is_some());
        assert!(line.clone().admit(&mut limiter, now).is_none());
        let later = Instant::from_millis(1_000);
        let json = serde_json::to_value(line.admit(&mut limiter, later).unwrap()).unwrap();
        assert_eq!(json["suppressed"], 1);
    }
}

/// What an SSE session asks its host to do, as a line:
///
/// - `open`: send `method` with `headers` (the request's, after the rule of
///   [`request_headers`]: `Accept`, `Cache-Control`,
///   `Accept-Encoding` and an empty body's `Content-Length` unless the request sets them,
///   none that `withhold` names), `body` (none when empty) and `Last-Event-ID:
///   last_event_id` when not null, to the stream's URL or to `redirect` when not null (a
///   hop of the same attempt, with the same `epoch`). `attempt` (`original`, `resume`,
///   `reissue`), `number` (requests so far, this one included) and `after` (why the
///   previous attempt ended) are for a host that builds each attempt's parts itself.
/// - `close`: abort the request of `epoch`.
/// - `end`: the stream is over; no request follows.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(missing_docs)] // The fields are the wire contract, documented on the type.
pub enum TransmitLine<'a> {
    /// Send a request.
    Open {
        epoch: u64,
        last_event_id: Option<&'a str>,
        redirect: Option<&'a str>,
        method: &'a str,
        headers: Vec<[&'a str; 2]>,
        body: Cow<'a, str>,
        withhold: &'static [&'static str],
        attempt: &'static str,
        number: u64,
        after: Option<&'static str>,
    },
    /// Abort a request.
    Close { epoch: u64 },
    /// The stream is over.
    End,
}

impl<'a> TransmitLine<'a> {
    /// The line for `transmit`; `info` says which attempt an `open` is.
    pub fn new(transmit: &'a Transmit, info: &AttemptInfo) -> TransmitLine<'a> {
        match transmit {
            Transmit::Open {
                epoch,
                last_event_id,
                request,
                redirect,
                withhold,
                ..
            } => TransmitLine::Open {
                epoch: epoch.0,
                last_event_id: last_event_id.as_deref(),
                redirect: redirect.as_deref(),
                method: &request.method,
                headers: request_headers(request, None)
                    .filter(|(name, _)| !withhold.iter().any(|w| w.eq_ignore_ascii_case(name)))
                    .map(|(name, value)| [name, value])
                    .collect(),
                body: String::from_utf8_lossy(&request.body),
                withhold,
                attempt: info.attempt.as_str(),
                number: info.number,
                after: info.after.map(DropReason::as_str),
            },
            Transmit::Close { epoch } => TransmitLine::Close { epoch: epoch.0 },
            Transmit::End => TransmitLine::End,
        }
    }
}
