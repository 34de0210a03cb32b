//! Server-Sent Events: a WHATWG event-stream [`parser`] and an [`SseSession`] that keeps one
//! stream alive (reconnects with jittered backoff, `Last-Event-ID`, idle watchdog, catch-up
//! signal) for the application's [`Request`]: a GET, or a POST that must not be sent twice.
//!
//! The session never touches HTTP: the driver performs the request a [`Transmit::Open`] asks
//! for, reports the response head with [`SseSession::handle_response`], the body with
//! [`SseSession::handle_bytes`] and its end with [`SseSession::handle_eof`] or
//! [`SseSession::handle_error`] (or, when the request could not even be built,
//! [`SseSession::handle_request_invalid`]).

pub mod checkpoint;
pub mod config;
pub mod output;
pub mod parser;
pub mod redirect;
pub mod request;
pub mod resume;
pub mod session;
pub mod status;

pub use checkpoint::SseCheckpoint;
pub use config::SseConfig;
pub use parser::{check_sendable, Unsendable};
pub use parser::{Item, Message, ParseError, Parser, ParserConfig};
pub use redirect::{RedirectPolicy, RedirectRefusal};
pub use request::{
    request_headers, Attempt, EndRules, ParseResumeError, Progress, Request, RequestSpec, Resume,
    DEFAULT_REISSUE_FAILURES,
};
pub use session::{
    is_event_stream, parse_retry_after, AttemptInfo, CloseReason, DropReason, EndReason, Event,
    FailReason, ResponseHead, SseSession, SseStats, Transmit, MAX_DETAIL_LEN,
};
