//! [`SseCheckpoint`]: what an [`SseSession`] keeps across a restart, and restoring from it.
//!
//! A restored session is one whose stream was lost when the checkpoint was taken: on
//! [`SseSession::connect`] a request that was out then goes through the resume policy
//! exactly as after a dropped connection
//! ([`DropReason::Restarted`](super::DropReason::Restarted)): a GET resumes with
//! `Last-Event-ID`, an MCP stream with its resume request, and a POST the server had (or may
//! have had) is never sent again unless its policy says so.

use serde::{Deserialize, Serialize};

use super::parser::check_sendable;
use super::request::{EndRules, Request, Resume};
use super::session::{Restored, SseSession};
use crate::checkpoint::{self, CheckpointError};

/// The kind an SSE session's checkpoint says it is.
const KIND: &str = "sse";

/// Header names never kept: credentials a restored process must supply afresh.
const SECRET_MARKERS: [&str; 7] = [
    "authorization",
    "cookie",
    "api-key",
    "apikey",
    "token",
    "secret",
    "password",
];

/// An [`SseSession`]'s durable state: plain, versioned data (see
/// [`checkpoint`](mod@crate::checkpoint) for the format's rules).
///
/// # What it holds
/// - the last event ID and the newest sendable one (what a resume carries), the server's
///   `retry:` delay, and how many messages were delivered since `connect` (the
///   [`Progress`](super::Progress) a final event reports);
/// - whether the request was out when the checkpoint was taken, and whether the server had
///   accepted it: what decides if it may be sent again;
/// - the request's method, resume policy, end rules and headers, for an application that
///   rebuilds its request from the checkpoint ([`SseCheckpoint::request`]).
///
/// # What it never holds
/// - credentials: no header whose name contains `authorization`, `cookie`, `api-key`,
///   `apikey`, `token`, `secret` or `password` (an MCP `Mcp-Session-Id` is kept: a resume
///   needs it);
/// - the request body, unless the application asks for it
///   ([`SseSession::checkpoint_with_body`]) and it is UTF-8;
/// - what belonged to the connection: backoff, timers, the parser's partial event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseCheckpoint {
    tether: String,
    version: u32,
    request: SavedRequest,
    stream: Stream,
    last_event_id: String,
    resume_id: String,
    /// The server's `retry:` delay in milliseconds, if it sent one.
    retry_ms: Option<u64>,
    delivered: u64,
}

/// Where the request stood when the checkpoint was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Stream {
    /// Not out: never connected, ended, or closed by the application.
    Idle,
    /// Out (or about to go out again) and never accepted since `connect`: the server may or
    /// may not have it.
    Sent,
    /// The server accepted it since `connect` (a stream opened).
    Accepted,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct SavedRequest {
    method: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
    repeatable: bool,
    resume: SavedResume,
    end_data: Option<String>,
    end_event: Option<String>,
    error_event: Option<String>,
    /// Left out when false, so checkpoints of requests without the rule keep their bytes.
    #[serde(default, skip_serializing_if = "is_false")]
    end_jsonrpc_response: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SavedResume {
    Never,
    SameRequest,
    LastEventId(String),
    Reissue(u32),
}

impl SseCheckpoint {
    /// The checkpoint as JSON (the same bytes for the same state).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        checkpoint::to_json(self)
    }

    /// Read a checkpoint written by [`SseCheckpoint::to_json`].
    ///
    /// # Errors
    /// [`CheckpointError`] when it is not an SSE checkpoint or comes from a newer format.
    pub fn from_json(json: &[u8]) -> Result<SseCheckpoint, CheckpointError> {
        checkpoint::from_json(json, KIND)
    }

    /// The last event ID a resume will carry (empty: none): the newest sendable one.
    pub fn resume_id(&self) -> &str {
        &self.resume_id
    }

    /// Messages delivered since `connect`, up to the checkpoint.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The request as kept: without credentials, and without its body unless it was kept.
    /// Add what was left out and pass it to [`SseSession::restore`].
    #[must_use]
    pub fn request(&self) -> Request {
        let saved = &self.request;
        let mut request = Request::new(&saved.method)
            .repeatable(saved.repeatable)
            .resume(match &saved.resume {
                SavedResume::Never => Resume::Never,
                SavedResume::SameRequest => Resume::SameRequest,
                SavedResume::LastEventId(method) => Resume::LastEventId {
                    method: method.clone(),
                },
                SavedResume::Reissue(max_failures) => Resume::Reissue {
                    max_failures: *max_failures,
                },
            });
        request.headers.clone_from(&saved.headers);
        request.body = saved.body.clone().unwrap_or_default().into_bytes();
        request.end = EndRules {
            data: saved.end_data.clone(),
            event: saved.end_event.clone(),
            error_event: saved.error_event.clone(),
            jsonrpc_response: saved.end_jsonrpc_response,
        };
        request
    }
}

impl SseSession {
    /// Its durable state now, without the request body (see [`SseCheckpoint`]). Taking one
    /// changes nothing.
    #[must_use]
    pub fn checkpoint(&self) -> SseCheckpoint {
        self.checkpoint_as(false)
    }

    /// [`SseSession::checkpoint`] keeping the request body too, when it is UTF-8: for an
    /// application whose body holds no secret and that rebuilds its request from the
    /// checkpoint.
    #[must_use]
    pub fn checkpoint_with_body(&self) -> SseCheckpoint {
        self.checkpoint_as(true)
    }

    fn checkpoint_as(&self, body: bool) -> SseCheckpoint {
        let request = self.request();
        let (out, accepted) = self.stream_state();
        SseCheckpoint {
            tether: KIND.into(),
            version: checkpoint::VERSION,
            request: SavedRequest {
                method: request.method.clone(),
                headers: request
                    .headers
                    .iter()
                    .filter(|(name, _)| !is_secret(name))
                    .cloned()
                    .collect(),
                body: body
                    .then(|| String::from_utf8(request.body.clone()).ok())
                    .flatten(),
                repeatable: request.repeatable,
                resume: match &request.resume {
                    Resume::Never => SavedResume::Never,
                    Resume::SameRequest => SavedResume::SameRequest,
                    Resume::LastEventId { method } => SavedResume::LastEventId(method.clone()),
                    Resume::Reissue { max_failures } => SavedResume::Reissue(*max_failures),
                },
                end_data: request.end.data.clone(),
                end_event: request.end.event.clone(),
                error_event: request.end.error_event.clone(),
                end_jsonrpc_response: request.end.jsonrpc_response,
            },
            stream: match (out, accepted) {
                (false, _) => Stream::Idle,
                (true, false) => Stream::Sent,
                (true, true) => Stream::Accepted,
            },
            last_event_id: self.parser_ids().0.to_owned(),
            resume_id: self.parser_ids().1.to_owned(),
            retry_ms: self
                .server_retry()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            delivered: self.progress().events,
        }
    }

    /// An idle session for `request` from `checkpoint`; `seed` drives its jitter. Call
    /// [`SseSession::connect`] to go on: a request that was out at the checkpoint is treated
    /// as lost then ([`DropReason::Restarted`](super::DropReason::Restarted)) and resumed, sent again or ended as its
    /// policy says; one that was not starts afresh, still resuming from the last event ID.
    ///
    /// `request` is the application's, credentials included; it must have the checkpoint's
    /// method (the checkpoint's stream state is about that request).
    ///
    /// # Errors
    /// [`CheckpointError`] when it is of another kind, from a newer format, for a request of
    /// another method, or carries an id that cannot be sent as a header.
    pub fn restore(
        config: super::SseConfig,
        request: Request,
        checkpoint: &SseCheckpoint,
        seed: u64,
    ) -> Result<SseSession, CheckpointError> {
        checkpoint::check_header(&checkpoint.tether, checkpoint.version, KIND)?;
        if !request
            .method
            .eq_ignore_ascii_case(&checkpoint.request.method)
        {
            return Err(CheckpointError::Invalid(format!(
                "the checkpoint is of a {} request, not {}",
                checkpoint.request.method, request.method
            )));
        }
        let max = config.parser.max_sendable_id_len;
        if let Err(e) = check_sendable(&checkpoint.resume_id, max) {
            return Err(CheckpointError::Invalid(format!("its resume id: {e}")));
        }
        if checkpoint.last_event_id.contains('\0')
            || checkpoint.last_event_id.len() > config.parser.max_line_len
        {
            return Err(CheckpointError::Invalid(
                "its last event id is not one a stream can carry".into(),
            ));
        }
        let mut session = SseSession::with_request(config, request, seed);
        session.restore_state(
            &checkpoint.last_event_id,
            &checkpoint.resume_id,
            checkpoint.retry_ms.map(std::time::Duration::from_millis),
            checkpoint.delivered,
            checkpoint.stream == Stream::Accepted,
            Restored {
                was_out: checkpoint.stream != Stream::Idle,
            },
        );
        Ok(session)
    }
}

fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_MARKERS.iter().any(|m| name.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_kept() {
        for name in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "x-api-key",
            "X-Auth-Token",
            "Client-Secret",
        ] {
            assert!(is_secret(name), "{name}");
        }
        for name in [
            "Mcp-Session-Id",
            "Accept",
            "MCP-Protocol-Version",
            "Content-Type",
        ] {
            assert!(!is_secret(name), "{name}");
        }
    }

    #[test]
    fn a_drop_reason_names_the_restart() {
        assert_eq!(crate::sse::DropReason::Restarted.as_str(), "restarted");
    }
}
