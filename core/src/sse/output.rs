//! What an [`SseSession`](crate::sse::SseSession) asks of its driver ([`Transmit`]) and tells
//! its application ([`Event`]), with the reasons it gives and its counters.

use std::sync::Arc;
use std::time::Duration;

use crate::link::{Epoch, SocketLoss};
use crate::sse::parser::Unsendable;
use crate::sse::parser::{Message, ParseError};
use crate::sse::redirect::RedirectRefusal;
use crate::sse::request::{Attempt, Progress, Request};
use crate::time::Instant;

/// What the driver must do on the wire.
///
/// Deliberately exhaustive, as the relay session's: a driver that ignored an instruction it
/// did not know would break the session, so a new one must fail to compile instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Send `request` (with `Accept: text/event-stream` unless it sets its own), tagged
    /// `epoch`.
    Open {
        /// Tag every input about this request with it.
        epoch: Epoch,
        /// Send as the `Last-Event-ID` header; `None` when the ID is empty. Always a valid
        /// header value (see [`resume`](super::resume)).
        last_event_id: Option<String>,
        /// What to send: the application's request, or the resume request derived from it.
        request: Arc<Request>,
        /// Which of the two `request` is.
        attempt: Attempt,
        /// `Some` for a redirect the session follows ([`redirect`](super::redirect)): send
        /// `request` to this absolute URL instead of the stream's. It is a hop of the same
        /// attempt: a driver that builds each attempt's parts sends the ones it built for it.
        redirect: Option<Arc<str>>,
        /// Headers not to send on this request, whatever the request or the application's
        /// per-attempt builder says (names in lower case, compared ignoring case): the
        /// credentials, on a redirect to another origin
        /// ([`CREDENTIALS`](super::redirect::CREDENTIALS)). Empty otherwise.
        withhold: &'static [&'static str],
    },
    /// Abort the request or response of `epoch`.
    Close {
        /// The request to abort.
        epoch: Epoch,
    },
    /// The stream is over: no request follows (until the application calls `connect`
    /// again). Drop any request or body still held, deliver the events still queued (the
    /// last of them says why it ended), then end.
    End,
}

/// What the application hears.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The stream is open (the first time since [`SseSession::connect`](crate::sse::SseSession::connect)).
    Open,
    /// A message arrived.
    Message(Message),
    /// The stream (or an attempt) was lost; the next attempt starts at `at`.
    Reconnecting {
        /// What happened.
        why: DropReason,
        /// Attempts since the last stable stream, this one included.
        attempt: u32,
        /// When the next request starts.
        at: Instant,
    },
    /// The stream is open again after a drop; `gap` is how long it was down. Events in the gap
    /// the server could not replay from `Last-Event-ID` are lost: run one catch-up fetch.
    Reconnected {
        /// From losing the previous stream to opening this one. A stream the client gave up
        /// on itself (an idle timeout, a network path gone) is lost from when the server was
        /// last heard: it may have died any time after.
        gap: Duration,
    },
    /// A stream cut under [`Resume::Reissue`](crate::sse::Resume::Reissue) is open again as a
    /// new request (MCP 2026-07-28: the in-flight request was lost). Whatever the server sent
    /// in `gap` is gone: a listen stream should list again.
    Reissued {
        /// From losing the previous stream to opening this one.
        gap: Duration,
        /// Requests sent since the cut, this one included.
        attempts: u32,
    },
    /// Part of the stream was too large and dropped; the stream carries on.
    ParseError(ParseError),
    /// The server sent an id that cannot be sent back as `Last-Event-ID`. Messages carry it
    /// unchanged; a reconnect resumes from [`SseSession::last_event_id`](crate::sse::SseSession::last_event_id), the previous
    /// sendable id, so the server may replay events the application already has. Once per
    /// such `id` field.
    UnsendableId {
        /// The id as the server sent it (and messages carry it).
        id: String,
        /// Why it cannot be sent.
        why: Unsendable,
    },
    /// The server refused in a way retrying will not fix. Nothing follows until `connect`.
    Failed {
        /// Why.
        why: FailReason,
    },
    /// The session stopped for good. Nothing follows until `connect`.
    Closed {
        /// Why.
        why: CloseReason,
    },
    /// The stream ended the way the application's protocol defines (or, with
    /// [`Resume::Never`](crate::sse::Resume::Never) and no end rule, the body ended). Nothing reconnects; nothing follows
    /// until `connect`.
    Ended {
        /// What ended it.
        why: EndReason,
        /// How far the stream got.
        progress: Progress,
    },
}

/// What ended a stream cleanly.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndReason {
    /// A message whose data was the configured end data (e.g. `[DONE]`).
    Data,
    /// A message of the configured end event type.
    Event(String),
    /// The body ended; with [`Resume::Never`](crate::sse::Resume::Never) and no end rule that is the end.
    Eof,
    /// The JSON-RPC response arrived (and was delivered as the message before this event;
    /// see [`EndRules::jsonrpc_response`](crate::sse::EndRules::jsonrpc_response)).
    Response,
}

impl EndReason {
    /// A stable snake_case name, for logs, JSON lines and the C ABI: `data`, `event`, `eof`
    /// or `response` (the event type is the variant's data).
    pub fn as_str(&self) -> &'static str {
        match self {
            EndReason::Data => "data",
            EndReason::Event(_) => "event",
            EndReason::Eof => "eof",
            EndReason::Response => "response",
        }
    }
}

/// Why a stream or an attempt was lost (and will be retried).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// A retryable status: 5xx, 408 or 429.
    Status(u16),
    /// The driver reported a network error, and what kind.
    NetworkError(SocketLoss),
    /// The response body ended.
    Eof,
    /// No response head within `connect_timeout`.
    ConnectTimeout,
    /// No bytes for `idle_timeout` on an open stream.
    IdleTimeout,
    /// The process stopped while the request was out: a session restored from a checkpoint
    /// ([`SseSession::restore`](crate::sse::SseSession::restore)) lost its stream then.
    Restarted,
}

impl DropReason {
    /// A stable snake_case name of the kind, for logs, JSON lines and the C ABI: `status`,
    /// `network_error`, `eof`, `connect_timeout`, `idle_timeout` or `restarted` (the status code and the
    /// socket loss are the variant's data).
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Status(_) => "status",
            DropReason::NetworkError(_) => "network_error",
            DropReason::Eof => "eof",
            DropReason::ConnectTimeout => "connect_timeout",
            DropReason::IdleTimeout => "idle_timeout",
            DropReason::Restarted => "restarted",
        }
    }
}

/// Why the session gave up.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailReason {
    /// A status that is neither 200, 204 nor retryable.
    Status(u16),
    /// 200 with a content type other than `text/event-stream` (or none).
    ContentType(Option<String>),
    /// 200 with a `Content-Encoding` other than `identity` (the request asked for
    /// `identity`; see [`status`](super::status)). The encoding, at most [`MAX_DETAIL_LEN`]
    /// bytes.
    ContentEncoding(String),
    /// A redirect the session does not follow ([`redirect`](super::redirect)).
    Redirect {
        /// The status.
        status: u16,
        /// The `Location` header as sent (empty: none), at most [`MAX_DETAIL_LEN`] bytes.
        location: String,
        /// Why it was not followed.
        why: RedirectRefusal,
    },
    /// The backoff policy's `max_attempts` ran out; the last drop was this.
    Exhausted(DropReason),
    /// The driver could not build the request (a local failure: the same request would fail
    /// again, so it is not retried). The driver's description, at most
    /// [`MAX_DETAIL_LEN`] bytes.
    InvalidRequest(String),
    /// A request that is not repeatable got a status that is neither 200, 204 nor retryable.
    Rejected {
        /// The status.
        status: u16,
        /// The body's first bytes (at most [`SseConfig::max_error_body`](crate::sse::SseConfig::max_error_body), lossy UTF-8), so
        /// the application can show the server's own error.
        body: String,
        /// How far the stream got (a refused resume request can follow delivered events).
        progress: Progress,
    },
    /// The stream was lost, and the resume policy (or a request that may already have
    /// reached the server) forbids sending anything again.
    Interrupted {
        /// What happened.
        why: DropReason,
        /// How far the stream got.
        progress: Progress,
    },
    /// Resume requests with the same `Last-Event-ID` failed
    /// [`SseConfig::max_same_id_resumes`](crate::sse::SseConfig::max_same_id_resumes) times in a row; the last one like this.
    ResumeExhausted {
        /// The last failure.
        why: DropReason,
        /// How far the stream got.
        progress: Progress,
    },
    /// [`Resume::Reissue`](crate::sse::Resume::Reissue): that many re-issued requests in a
    /// row did not open a stream; the last one like this.
    ReissueExhausted {
        /// The last failure.
        why: DropReason,
        /// How far the stream got.
        progress: Progress,
    },
    /// A resume request got 404: the server no longer knows the session (MCP says: start a
    /// new one).
    SessionGone {
        /// How far the stream got.
        progress: Progress,
    },
    /// A message of the configured error event type arrived.
    ErrorEvent {
        /// Its data, at most [`SseConfig::max_error_body`](crate::sse::SseConfig::max_error_body) bytes.
        data: String,
        /// How far the stream got before it.
        progress: Progress,
    },
}

impl FailReason {
    /// A stable snake_case name of the kind, for logs, JSON lines and the C ABI: `status`,
    /// `content_type`, `content_encoding`, `redirect`, `exhausted`, `invalid_request`, `rejected`, `interrupted`,
    /// `resume_exhausted`, `reissue_exhausted`, `session_gone` or `error_event` (statuses, drops, bodies and
    /// progress are the variant's data).
    pub fn as_str(&self) -> &'static str {
        match self {
            FailReason::Status(_) => "status",
            FailReason::ContentType(_) => "content_type",
            FailReason::ContentEncoding(_) => "content_encoding",
            FailReason::Redirect { .. } => "redirect",
            FailReason::Exhausted(_) => "exhausted",
            FailReason::InvalidRequest(_) => "invalid_request",
            FailReason::Rejected { .. } => "rejected",
            FailReason::Interrupted { .. } => "interrupted",
            FailReason::ResumeExhausted { .. } => "resume_exhausted",
            FailReason::ReissueExhausted { .. } => "reissue_exhausted",
            FailReason::SessionGone { .. } => "session_gone",
            FailReason::ErrorEvent { .. } => "error_event",
        }
    }
}

/// Longest description [`FailReason::InvalidRequest`] keeps, in bytes.
pub const MAX_DETAIL_LEN: usize = 256;

/// Why the session closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server answered 204 No Content: "stop reconnecting".
    NoContent,
    /// The application called [`SseSession::disconnect`](crate::sse::SseSession::disconnect).
    Local,
}

impl CloseReason {
    /// A stable snake_case name, for logs, JSON lines and the C ABI: `no_content` or
    /// `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::NoContent => "no_content",
            CloseReason::Local => "local",
        }
    }
}

/// Counters, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SseStats {
    /// Requests asked for ([`Transmit::Open`]), redirect hops included.
    pub requests: u64,
    /// Redirects followed.
    pub redirects: u64,
    /// Streams that opened.
    pub opened: u64,
    /// Messages dispatched.
    pub messages: u64,
    /// Comment lines seen (heartbeats).
    pub heartbeats: u64,
    /// Oversized lines or events dropped.
    pub parse_errors: u64,
    /// Body bytes consumed.
    pub bytes: u64,
    /// `id` fields that cannot be sent as `Last-Event-ID` ([`Event::UnsendableId`]).
    pub unsendable_ids: u64,
    /// Inputs for an epoch the session already let go, ignored.
    pub stale_inputs: u64,
}
