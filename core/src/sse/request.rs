//! What an SSE stream asks for and how far it may be repeated: the [`Request`] (method,
//! headers, body), its [`Resume`] policy and the [`EndRules`] of the application's protocol.
//!
//! Most SSE traffic is not a GET: LLM streaming APIs and MCP's Streamable HTTP answer a POST
//! with an event stream. Re-sending such a POST starts a second generation (and bills it), so
//! whether a request may go out again is decided here, in the core, from the request and from
//! how far its response got, never by a driver's loop:
//!
//! | the original request | before its response opened | after it opened (the server accepted it) |
//! | --- | --- | --- |
//! | repeatable (GET, or marked) | retried as today | as the [`Resume`] policy says |
//! | not repeatable (POST, or marked) | retried only after a refused connection or a 408 / 429 / 5xx, at most [`SseConfig::max_unsent_retries`](crate::sse::SseConfig::max_unsent_retries) times | as the [`Resume`] policy says |
//!
//! "Opened" is the 200 `text/event-stream` head, not the first event: from then on the server
//! has the request and may be generating, so a re-send would repeat the work even if no byte
//! of the body arrived yet. A connection that broke after the request may have left (a reset,
//! a connect timeout) is treated the same way for a request that is not repeatable: it is not
//! known whether the server has it.

use std::sync::Arc;

/// One HTTP request whose response is an event stream, as the application describes it.
///
/// The adapters send `method`, `headers` and `body` as given, adding only
/// `Accept: text/event-stream` and `Cache-Control: no-cache` when the application did not set
/// those headers itself, and `Last-Event-ID` when the session resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The HTTP method, e.g. `GET` or `POST`.
    pub method: String,
    /// Headers in order, as `(name, value)`; sent as given.
    pub headers: Vec<(String, String)>,
    /// The request body (empty: none).
    pub body: Vec<u8>,
    /// Whether the same request may be sent again once the server has accepted it once. By
    /// default true for the methods RFC 9110 calls idempotent (GET, HEAD, OPTIONS, TRACE, PUT,
    /// DELETE) and false otherwise.
    pub repeatable: bool,
    /// What to do when an accepted stream is lost.
    pub resume: Resume,
    /// The application protocol's own end of stream and error events.
    pub end: EndRules,
}

/// How a stream the server accepted is picked up again after it was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resume {
    /// Never: the loss is the end, reported once ([`Event::Ended`](crate::sse::Event::Ended)
    /// when the body simply ended and no end rule was configured, else
    /// [`FailReason::Interrupted`](crate::sse::FailReason::Interrupted)).
    Never,
    /// Send the same request again, with `Last-Event-ID` (the EventSource behaviour, and the
    /// default for a GET). For a request that is not repeatable this is the application
    /// saying that repeating it is safe after all.
    SameRequest,
    /// Send `method` to the same URL with the same headers, no body and `Last-Event-ID`: what
    /// MCP's Streamable HTTP specifies (a GET; the `Mcp-Session-Id` header the application
    /// configured goes along). A stream lost before it carried any id cannot be resumed and
    /// fails. The same id failing again and again backs off and gives up after
    /// [`SseConfig::max_same_id_resumes`](crate::sse::SseConfig::max_same_id_resumes).
    LastEventId {
        /// The resume request's method, normally `GET`.
        method: String,
    },
    /// Send the application's request again as a new request, without `Last-Event-ID`: what
    /// MCP 2026-07-28 requires for a lost stream ("clients MUST re-issue it as a new request
    /// with a new request ID"; the driver's per-attempt builder gives the new id). For
    /// requests safe to send again: `subscriptions/listen`, a tool the application marks
    /// idempotent. Re-issues follow the reconnect backoff; after `max_failures` in a row that
    /// do not open a stream, whatever refused them, the session fails with
    /// [`FailReason::ReissueExhausted`](crate::sse::FailReason::ReissueExhausted). Each that
    /// opens is announced with [`Event::Reissued`](crate::sse::Event::Reissued).
    Reissue {
        /// Consecutive re-issues that may fail before the session gives up.
        max_failures: u32,
    },
}

/// A request as a host that speaks JSON describes it (the C ABI's `tether_sse_new_request`,
/// the wasm's `Sse`): every field optional, unknown ones refused. Names are snake_case, and
/// the camelCase a JavaScript object serializes to is read too (`end_data` or `endData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequestSpec {
    /// The method (default `GET`).
    pub method: Option<String>,
    /// Headers, in order, as `[name, value]` pairs.
    pub headers: Vec<(String, String)>,
    /// The body (default none).
    pub body: Option<String>,
    /// The resume policy, as [`Resume::from_str`](std::str::FromStr) reads it.
    pub resume: Option<String>,
    /// End cleanly on a message whose data is this ([`Request::end_on_data`]).
    #[serde(alias = "endData")]
    pub end_data: Option<String>,
    /// End cleanly on a message of this event type ([`Request::end_on_event`]).
    #[serde(alias = "endEvent")]
    pub end_event: Option<String>,
    /// Fail on a message of this event type ([`Request::fail_on_event`]).
    #[serde(alias = "failEvent")]
    pub fail_event: Option<String>,
    /// End after a JSON-RPC response ([`Request::end_on_jsonrpc_response`]).
    #[serde(alias = "endOnJsonrpcResponse")]
    pub end_on_jsonrpc_response: bool,
}

impl RequestSpec {
    /// The request it describes.
    ///
    /// # Errors
    /// [`ParseResumeError`] for a resume policy that does not parse.
    pub fn into_request(self) -> Result<Request, ParseResumeError> {
        let mut request = Request::new(self.method.as_deref().unwrap_or("GET"));
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(body) = self.body {
            request = request.body(body);
        }
        if let Some(resume) = self.resume {
            request = request.resume(resume.parse::<Resume>()?);
        }
        if let Some(data) = &self.end_data {
            request = request.end_on_data(data);
        }
        if let Some(event) = &self.end_event {
            request = request.end_on_event(event);
        }
        if let Some(event) = &self.fail_event {
            request = request.fail_on_event(event);
        }
        if self.end_on_jsonrpc_response {
            request = request.end_on_jsonrpc_response();
        }
        Ok(request)
    }
}

/// Consecutive failed re-issues `reissue` without a number allows.
pub const DEFAULT_REISSUE_FAILURES: u32 = 5;

/// A [`Resume`] policy as text that [`Resume::from_str`](std::str::FromStr) refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseResumeError(String);

impl std::fmt::Display for ParseResumeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}: expected never, same, last-event-id, last-event-id:METHOD, reissue or \
             reissue:N",
            self.0
        )
    }
}

impl std::error::Error for ParseResumeError {}

/// The policy as the CLIs and the C ABI write it: `never`, `same`, `last-event-id` (a GET),
/// `last-event-id:METHOD` (an RFC 9110 token), `reissue` (at most
/// [`DEFAULT_REISSUE_FAILURES`] failures in a row) or `reissue:N`.
impl std::str::FromStr for Resume {
    type Err = ParseResumeError;

    fn from_str(text: &str) -> Result<Resume, ParseResumeError> {
        let refused = || ParseResumeError(text.to_owned());
        Ok(match text {
            "never" => Resume::Never,
            "same" => Resume::SameRequest,
            "last-event-id" => Resume::LastEventId {
                method: "GET".to_owned(),
            },
            "reissue" => Resume::Reissue {
                max_failures: DEFAULT_REISSUE_FAILURES,
            },
            _ => {
                if let Some(n) = text.strip_prefix("reissue:") {
                    let max_failures = n.parse().map_err(|_| refused())?;
                    return Ok(Resume::Reissue { max_failures });
                }
                let method = text.strip_prefix("last-event-id:").ok_or_else(refused)?;
                if !is_token(method) {
                    return Err(refused());
                }
                Resume::LastEventId {
                    method: method.to_owned(),
                }
            }
        })
    }
}

/// Whether `text` is an RFC 9110 token (what an HTTP method is).
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Messages the application's protocol gives a meaning beyond "an event".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndRules {
    /// A message whose data is exactly this (OpenAI's `[DONE]`) ends the stream cleanly: the
    /// application hears [`Event::Ended`](crate::sse::Event::Ended), not the message, and
    /// nothing reconnects.
    pub data: Option<String>,
    /// A message of this event type ends the stream cleanly, like [`EndRules::data`].
    pub event: Option<String>,
    /// A message of this event type (e.g. `error`) ends the stream as
    /// [`FailReason::ErrorEvent`](crate::sse::FailReason::ErrorEvent), carrying its data.
    pub error_event: Option<String>,
    /// A message whose data is a JSON-RPC response (an object with an `id` and a `result` or
    /// an `error`, and no `method`) is delivered and then ends the stream cleanly
    /// ([`EndReason::Response`](crate::sse::EndReason::Response)): an MCP request's response
    /// stream carries its one response last, and the server closes it after that.
    /// Notifications and server requests (which carry a `method`) do not end it.
    pub jsonrpc_response: bool,
}

impl EndRules {
    /// Whether any clean end is defined: then a body that simply ends is a cut, not an end.
    pub(crate) fn defines_end(&self) -> bool {
        self.data.is_some() || self.event.is_some() || self.jsonrpc_response
    }

    /// Whether `data` ends the stream after it is delivered ([`EndRules::jsonrpc_response`]).
    pub(crate) fn ends_after(&self, data: &str) -> bool {
        self.jsonrpc_response && is_jsonrpc_response(data)
    }
}

/// Whether `data` is one JSON-RPC response object. Only the members' presence is read, so a
/// large result costs one pass of the JSON scanner and no allocation for its contents.
fn is_jsonrpc_response(data: &str) -> bool {
    use serde::de::IgnoredAny;
    #[derive(serde::Deserialize)]
    struct Probe {
        id: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
        method: Option<IgnoredAny>,
    }
    let Ok(probe) = serde_json::from_str::<Probe>(data) else {
        return false;
    };
    probe.id.is_some()
        && (probe.result.is_some() || probe.error.is_some())
        && probe.method.is_none()
}

impl Default for Request {
    fn default() -> Self {
        Request::get()
    }
}

impl Request {
    /// A GET with no extra headers: the classic EventSource request (repeatable, resumed with
    /// the same request).
    #[must_use]
    pub fn get() -> Self {
        Request::new("GET")
    }

    /// A POST carrying `body` (not repeatable, never resumed unless the policy is changed).
    #[must_use]
    pub fn post(body: impl Into<Vec<u8>>) -> Self {
        Request::new("POST").body(body)
    }

    /// A request with `method`, no headers and no body. Repeatable when the method is
    /// idempotent; resumed with the same request when repeatable, never otherwise.
    #[must_use]
    pub fn new(method: &str) -> Self {
        let repeatable = is_idempotent(method);
        Request {
            method: method.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            repeatable,
            resume: if repeatable {
                Resume::SameRequest
            } else {
                Resume::Never
            },
            end: EndRules::default(),
        }
    }

    /// Add a header (sent in the order added).
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Replace the body.
    #[must_use]
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Mark whether the request may be sent again once accepted (see [`Request::repeatable`]).
    #[must_use]
    pub fn repeatable(mut self, repeatable: bool) -> Self {
        self.repeatable = repeatable;
        self
    }

    /// Set the resume policy.
    #[must_use]
    pub fn resume(mut self, resume: Resume) -> Self {
        self.resume = resume;
        self
    }

    /// End cleanly on a message whose data is exactly `data` (e.g. `[DONE]`).
    #[must_use]
    pub fn end_on_data(mut self, data: &str) -> Self {
        self.end.data = Some(data.to_owned());
        self
    }

    /// End cleanly on a message of event type `event`.
    #[must_use]
    pub fn end_on_event(mut self, event: &str) -> Self {
        self.end.event = Some(event.to_owned());
        self
    }

    /// Deliver a JSON-RPC response, then end cleanly (see [`EndRules::jsonrpc_response`]).
    #[must_use]
    pub fn end_on_jsonrpc_response(mut self) -> Self {
        self.end.jsonrpc_response = true;
        self
    }

    /// Fail on a message of event type `event` (e.g. `error`).
    #[must_use]
    pub fn fail_on_event(mut self, event: &str) -> Self {
        self.end.error_event = Some(event.to_owned());
        self
    }

    /// Whether this is the plain GET the session sent before requests existed (the
    /// transcripts show only what differs from it).
    pub fn is_plain_get(&self) -> bool {
        self.method == "GET" && self.headers.is_empty() && self.body.is_empty()
    }

    /// The request a [`Resume::LastEventId`] reconnect sends: `method`, the same headers but
    /// `Content-Type` and `Content-Length` (there is no body), no body, and repeatable (it
    /// only asks for events already produced).
    #[must_use]
    pub(crate) fn resumed_with(&self, method: &str) -> Self {
        Request {
            method: method.to_owned(),
            headers: self
                .headers
                .iter()
                .filter(|(name, _)| {
                    !name.eq_ignore_ascii_case("content-type")
                        && !name.eq_ignore_ascii_case("content-length")
                })
                .cloned()
                .collect(),
            body: Vec::new(),
            repeatable: true,
            resume: self.resume.clone(),
            end: self.end.clone(),
        }
    }
}

/// How far a stream got before it ended: what the application can tell the user, or resume
/// from by other means.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Messages delivered to the application since `connect`.
    pub events: u64,
    /// The last event ID in force (what the last message carried; empty: none).
    pub last_event_id: String,
}

impl Progress {
    /// Progress of `events` messages up to `last_event_id`.
    #[must_use]
    pub fn new(events: u64, last_event_id: &str) -> Self {
        Progress {
            events,
            last_event_id: last_event_id.to_owned(),
        }
    }
}

/// Which request a [`Transmit::Open`](crate::sse::Transmit::Open) sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attempt {
    /// The application's request (the first time, or again where that is allowed).
    Original,
    /// The [`Resume::LastEventId`] request.
    Resume,
    /// The application's request sent again as a new request ([`Resume::Reissue`]).
    Reissue,
}

impl Attempt {
    /// `original`, `resume` or `reissue`, for logs, JSON lines and the C ABI.
    pub fn as_str(self) -> &'static str {
        match self {
            Attempt::Original => "original",
            Attempt::Resume => "resume",
            Attempt::Reissue => "reissue",
        }
    }
}

/// RFC 9110 section 9.2.2's idempotent methods (case-sensitive, as methods are).
fn is_idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

/// The original request and, for [`Resume::LastEventId`], the resume request, built once.
#[derive(Clone, Debug)]
pub(crate) struct Requests {
    pub(crate) original: Arc<Request>,
    pub(crate) resume: Option<Arc<Request>>,
}

impl Requests {
    pub(crate) fn new(request: Request) -> Self {
        let resume = match &request.resume {
            Resume::LastEventId { method } => Some(Arc::new(request.resumed_with(method))),
            Resume::Never | Resume::SameRequest | Resume::Reissue { .. } => None,
        };
        Requests {
            original: Arc::new(request),
            resume,
        }
    }
}

/// The headers an SSE request carries, in order: `Accept: text/event-stream`,
/// `Cache-Control: no-cache` (an intermediary must not answer from a cache) and
/// `Accept-Encoding: identity` (a compressed stream arrives only as the compressor flushes;
/// see [`status`](crate::sse::status)) unless the
/// application's request sets that header itself (MCP needs
/// `Accept: application/json, text/event-stream`), `Content-Length: 0` for a POST, PUT or
/// PATCH without a body, then the request's own headers as given,
/// then `Last-Event-ID` when the core asked for one. A `Last-Event-ID` of the application's
/// is left out: which id to resume from is the core's decision.
///
/// The core only hands out ids that are valid header values
/// ([`check_sendable`](crate::sse::check_sendable)), so a client that refuses this header anyway has a bug of
/// its own; it is reported as an invalid request by the driver, never retried. A header of the
/// application's that the client refuses is reported the same way.
pub fn request_headers<'a>(
    request: &'a Request,
    last_event_id: Option<&'a str>,
) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    let own = |name: &str| {
        request
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    // A POST, PUT or PATCH with no body still says so: servers answer 411 (Length Required)
    // to one that does not, and the HTTP clients add no length for an empty body.
    let empty_body =
        request.body.is_empty() && matches!(request.method.as_str(), "POST" | "PUT" | "PATCH");
    let defaults = [
        ("accept", "text/event-stream"),
        ("cache-control", "no-cache"),
        ("accept-encoding", "identity"),
    ]
    .into_iter()
    .chain(empty_body.then_some(("content-length", "0")))
    .filter(move |(name, _)| !own(name));
    let app = request
        .headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("last-event-id"))
        .map(|(n, v)| (n.as_str(), v.as_str()));
    defaults
        .chain(app)
        .chain(last_event_id.map(|id| ("last-event-id", id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_pick_their_defaults() {
        let get = Request::get();
        assert!(get.repeatable && get.is_plain_get());
        assert_eq!(get.resume, Resume::SameRequest);
        let post = Request::post("{}");
        assert!(!post.repeatable);
        assert_eq!(post.resume, Resume::Never);
        assert_eq!(post.body, b"{}");
        assert!(Request::new("PUT").repeatable);
        assert!(!Request::new("PATCH").repeatable);
        assert!(
            !Request::new("get").repeatable,
            "methods are case-sensitive"
        );
    }

    #[test]
    fn a_resume_request_keeps_headers_but_not_the_body() {
        let post = Request::post("{}")
            .header("Content-Type", "application/json")
            .header("Mcp-Session-Id", "abc")
            .resume(Resume::LastEventId {
                method: "GET".into(),
            });
        let resumed = post.resumed_with("GET");
        assert_eq!(resumed.method, "GET");
        assert_eq!(
            resumed.headers,
            [("Mcp-Session-Id".to_owned(), "abc".to_owned())]
        );
        assert!(resumed.body.is_empty() && resumed.repeatable);
        let both = Requests::new(post);
        assert_eq!(both.resume.as_deref(), Some(&resumed));
    }

    #[test]
    fn resume_policies_parse_as_the_clis_write_them() {
        let parse = |text: &str| text.parse::<Resume>();
        assert_eq!(parse("never"), Ok(Resume::Never));
        assert_eq!(parse("same"), Ok(Resume::SameRequest));
        let get = Resume::LastEventId {
            method: "GET".into(),
        };
        assert_eq!(parse("last-event-id"), Ok(get));
        assert_eq!(
            parse("last-event-id:POST"),
            Ok(Resume::LastEventId {
                method: "POST".into()
            })
        );
        assert_eq!(parse("reissue"), Ok(Resume::Reissue { max_failures: 5 }));
        assert_eq!(parse("reissue:2"), Ok(Resume::Reissue { max_failures: 2 }));
        for bad in [
            "sometimes",
            "",
            "reissue:x",
            "last-event-id:",
            "last-event-id:G ET",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_json_rpc_response_ends_the_stream() {
        let end = Request::post("{}").end_on_jsonrpc_response().end;
        assert!(end.ends_after(r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#));
        assert!(end.ends_after(r#"{"jsonrpc":"2.0","id":"a","error":{"code":-1}}"#));
        for not_one in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":3}"#,
            "",
            "[DONE]",
            r#"[{"id":1,"result":{}}]"#,
        ] {
            assert!(!end.ends_after(not_one), "{not_one}");
        }
        assert!(!EndRules::default().ends_after(r#"{"id":1,"result":{}}"#));
    }
}
