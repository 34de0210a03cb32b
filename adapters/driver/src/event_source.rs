//! Opening an [`EventStream`] from a URL, once for every runtime: the URL rule
//! ([`check_http_url`]), then the stream. A runtime crate's `EventSource` is
//! `EventStream<ItsRuntime>`; what the runtime supplies is its clock and its HTTP client
//! ([`DefaultHttp`]).

use std::sync::Arc;

use tether_core::sse::{Request, SseCheckpoint, SseSession};

use crate::config::{seed_or_random, EventSourceConfig};
use crate::http_options::HttpOptions;
use crate::runtime::{HttpConnect, Runtime};
use crate::sse::EventStream;
use crate::url::check_http_url;
use crate::ConnectError;

/// A runtime with an HTTP client of its own, so that an [`EventStream`] on it can be opened
/// from a URL alone ([`EventStream::connect`], [`EventStream::connect_request`]).
pub trait DefaultHttp: Runtime + Sized {
    /// A clock whose origin is now, and the runtime's HTTP client with `options` (a proxy,
    /// roots), following no redirect (the core decides) and with no overall request timeout
    /// (the stream is meant to stay open).
    ///
    /// # Errors
    /// [`ConnectError::Http`] when the client cannot be built: a proxy URL it cannot use, a
    /// PEM root it cannot read.
    fn default_http(options: &HttpOptions) -> Result<(Self, Arc<dyn HttpConnect>), ConnectError>;
}

impl<R: Runtime> EventStream<R> {
    /// Stream the events `request` to `url` answers with, over `http` and timed by `rt`:
    /// [`EventStream::with_request`] behind the URL rule. Returns at once; the request starts
    /// when the stream is first polled.
    ///
    /// Use it to bring your own HTTP client (a proxy, custom roots); do not give that client
    /// an overall request timeout: the core's idle watchdog judges liveness.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] when `url` is not http:// or https:// with a host and a
    /// valid port ([`check_http_url`]).
    pub fn open(
        url: &str,
        request: Request,
        config: EventSourceConfig,
        rt: R,
        http: Arc<dyn HttpConnect>,
    ) -> Result<Self, ConnectError> {
        check_http_url(url)?;
        Ok(EventStream::with_request(url, request, config, rt, http))
    }

    /// [`EventStream::open`] for a session restored from `checkpoint` (see
    /// [`SseSession::restore`]): a request that was out when the checkpoint was taken
    /// resumes (`Last-Event-ID`), is sent again or ends, as its policy says. `request` is the
    /// application's, credentials included.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] as [`EventStream::open`]; [`ConnectError::Checkpoint`]
    /// when the checkpoint does not restore.
    pub fn open_restored(
        url: &str,
        request: Request,
        config: EventSourceConfig,
        checkpoint: &SseCheckpoint,
        rt: R,
        http: Arc<dyn HttpConnect>,
    ) -> Result<Self, ConnectError> {
        check_http_url(url)?;
        let seed = seed_or_random(config.seed);
        let session = SseSession::restore(config.sse, request, checkpoint, seed)
            .map_err(ConnectError::Checkpoint)?;
        let mut stream = EventStream::from_session(url, session, rt, http);
        stream.set_per_attempt(config.per_attempt);
        Ok(stream)
    }
}

impl<R: DefaultHttp> EventStream<R> {
    /// Start streaming `url` (http:// or https://) with a GET, on the runtime's own HTTP
    /// client. Returns at once; the request starts when the stream is first polled.
    ///
    /// # Errors
    /// [`ConnectError::InvalidUrl`] as [`EventStream::open`]; [`ConnectError::Http`] when the
    /// HTTP client cannot be built.
    pub fn connect(url: &str, config: EventSourceConfig) -> Result<Self, ConnectError> {
        EventStream::connect_request(url, Request::get(), config)
    }

    /// Stream the events `request` to `url` answers with: a POST with headers and a body
    /// (an LLM generation, an MCP call), sent again only where the core's retry-safety rules
    /// allow ([`tether_core::sse::request`]), resumed as its
    /// [`Resume`](tether_core::sse::Resume) policy says, and ended by its
    /// [`EndRules`](tether_core::sse::EndRules) (`[DONE]`). Returns at once.
    ///
    /// # Errors
    /// As [`EventStream::connect`].
    pub fn connect_request(
        url: &str,
        request: Request,
        config: EventSourceConfig,
    ) -> Result<Self, ConnectError> {
        // The URL first: a bad one must not cost building a client.
        check_http_url(url)?;
        let (rt, http) = R::default_http(&config.http)?;
        EventStream::open(url, request, config, rt, http)
    }

    /// [`EventStream::connect_request`] for a session restored from `checkpoint` (see
    /// [`EventStream::open_restored`]).
    ///
    /// # Errors
    /// As [`EventStream::open_restored`], and [`ConnectError::Http`] when the HTTP client
    /// cannot be built.
    pub fn restore(
        url: &str,
        request: Request,
        config: EventSourceConfig,
        checkpoint: &SseCheckpoint,
    ) -> Result<Self, ConnectError> {
        check_http_url(url)?;
        let (rt, http) = R::default_http(&config.http)?;
        EventStream::open_restored(url, request, config, checkpoint, rt, http)
    }
}
