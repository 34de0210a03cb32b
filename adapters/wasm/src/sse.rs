//! The SSE session: one `text/event-stream` the host performs with `fetch` (GET, or POST for
//! MCP's Streamable HTTP). An `open` transmit asks for a request tagged with its `epoch`; the
//! host reports the response head with [`Sse::handle_head`], body chunks with
//! [`Sse::handle_bytes`] and the end with [`Sse::handle_eof`] or [`Sse::handle_error`].

use std::time::Duration;

use tether_core::line::sse::{Line, TransmitLine};
use tether_core::line::Limiter;
use tether_core::sse::{Request, RequestSpec, ResponseHead, SseCheckpoint, SseSession};
use tether_core::Epoch;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::config::SseOptions;
use crate::{instant, text, whole, TetherError};

/// One SSE stream driven by the host's event loop.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Sse {
    session: SseSession,
    now: u64,
    /// The wall clock (`nowMs`, `unixSecs`) a `Retry-After` date is read against.
    wall: Option<(u64, u64)>,
    peer_errors: Limiter,
}

#[wasm_bindgen]
impl Sse {
    /// A new session; `options` is a JSON object of camelCase settings and `request` one
    /// describing the request (absent: a plain GET). The request's fields: `method`,
    /// `headers` (`[[name, value], ...]`), `body`, `resume` (`last_event_id`, `reissue`,
    /// `never`), `endData`, `endEvent`, `failEvent`, `endOnJsonrpcResponse`.
    ///
    /// # Errors
    /// `InvalidArgument` for options or a request that do not parse.
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<String>, request: Option<String>) -> Result<Sse, TetherError> {
        let (config, seed) = SseOptions::parse(options)?;
        let request = request_from(request)?;
        Ok(Sse::from_session(SseSession::with_request(
            config, request, seed,
        )))
    }

    /// A session restored from [`Sse::checkpoint`] text, for the same `request`.
    ///
    /// # Errors
    /// `Checkpoint` or `CheckpointNewer` for text this library cannot restore.
    pub fn restore(
        options: Option<String>,
        request: Option<String>,
        checkpoint: &str,
    ) -> Result<Sse, TetherError> {
        let (config, seed) = SseOptions::parse(options)?;
        let request = request_from(request)?;
        let saved = SseCheckpoint::from_json(checkpoint.as_bytes())?;
        let session = SseSession::restore(config, request, &saved, seed)?;
        Ok(Sse::from_session(session))
    }

    /// The session's durable state as JSON text; `withBody` keeps a POST's body in it.
    pub fn checkpoint(&self, with_body: bool) -> String {
        let saved = if with_body {
            self.session.checkpoint_with_body()
        } else {
            self.session.checkpoint()
        };
        String::from_utf8(saved.to_json()).unwrap_or_default()
    }

    /// The id the next resumption sends as `Last-Event-ID` (empty: none).
    #[wasm_bindgen(js_name = lastEventId)]
    pub fn last_event_id(&self) -> String {
        self.session.last_event_id().to_owned()
    }

    /// Tell the session the wall clock (for `Retry-After` dates).
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = setWallClock)]
    pub fn set_wall_clock(&mut self, now_ms: f64, unix_secs: f64) -> Result<(), TetherError> {
        self.at(now_ms)?;
        self.wall = Some((whole(now_ms, "nowMs")?, whole(unix_secs, "unixSecs")?));
        Ok(())
    }

    /// Start the stream (an `open` transmit follows).
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    pub fn connect(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.connect(now);
        Ok(())
    }

    /// Stop the stream for good.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    pub fn disconnect(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.disconnect(now);
        Ok(())
    }

    /// A lifecycle signal by name (see the crate docs).
    ///
    /// # Errors
    /// `InvalidArgument` for another name.
    pub fn lifecycle(&mut self, now_ms: f64, signal: &str) -> Result<(), TetherError> {
        let signal = crate::lifecycle(signal)?;
        let now = self.at(now_ms)?;
        self.session.handle_lifecycle(now, signal);
        Ok(())
    }

    /// The response head of `epoch`'s request: its status and the headers the session
    /// reads (`Content-Type`, `Retry-After`, `Content-Encoding`, `Location`) and the URL
    /// it finally came from.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out; `WrongState` for a second head.
    #[allow(clippy::too_many_arguments)] // JavaScript's optional arguments, one per header
    #[wasm_bindgen(js_name = handleHead)]
    pub fn handle_head(
        &mut self,
        now_ms: f64,
        epoch: f64,
        status: u16,
        content_type: Option<String>,
        retry_after: Option<String>,
        content_encoding: Option<String>,
        location: Option<String>,
        url: Option<String>,
    ) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        let retry_after = retry_after.and_then(|v| self.retry_after(&v));
        let head = ResponseHead::new(status)
            .content_type(content_type.as_deref())
            .retry_after(retry_after)
            .content_encoding(content_encoding.as_deref())
            .location(location.as_deref())
            .url(url.as_deref());
        Ok(self.session.handle_head(now, Epoch(epoch.0), &head)?)
    }

    /// Body bytes of `epoch`'s stream; returns how many were taken. Fewer than given means
    /// the session's buffer is full: pause reading and hand the rest later.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out; `WrongState` before the head.
    #[wasm_bindgen(js_name = handleBytes)]
    pub fn handle_bytes(
        &mut self,
        now_ms: f64,
        epoch: f64,
        bytes: &[u8],
    ) -> Result<u32, TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        let taken = self.session.handle_bytes(now, epoch, bytes)?;
        Ok(u32::try_from(taken).unwrap_or(u32::MAX))
    }

    /// The body of `epoch` ended cleanly.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out.
    #[wasm_bindgen(js_name = handleEof)]
    pub fn handle_eof(&mut self, now_ms: f64, epoch: f64) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.session.handle_eof(now, epoch)?)
    }

    /// The request of `epoch` failed: `loss` names how (see the crate docs).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown loss; `UnknownId` for an epoch never handed out.
    #[wasm_bindgen(js_name = handleError)]
    pub fn handle_error(&mut self, now_ms: f64, epoch: f64, loss: &str) -> Result<(), TetherError> {
        let loss = crate::socket_loss(loss, None)?;
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.session.handle_error(now, epoch, loss)?)
    }

    /// The host could not build `epoch`'s request (a header that is not sendable, a
    /// builder that failed): a local failure, never retried as the server's.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out.
    #[wasm_bindgen(js_name = handleRequestInvalid)]
    pub fn handle_request_invalid(
        &mut self,
        now_ms: f64,
        epoch: f64,
        detail: &str,
    ) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.session.handle_request_invalid(now, epoch, detail)?)
    }

    /// The host stopped (or resumed) reading because the application is not pulling.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = handleReadPaused)]
    pub fn handle_read_paused(&mut self, now_ms: f64, paused: bool) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.handle_read_paused(now, paused);
        Ok(())
    }

    /// The timer armed at [`Sse::poll_timeout`] fired.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.handle_timeout(now);
        Ok(())
    }

    /// The next transmit (`open` with the request to make, `close`) as JSON, or
    /// `undefined`.
    #[wasm_bindgen(js_name = pollTransmit)]
    pub fn poll_transmit(&mut self) -> Option<String> {
        let transmit = self.session.poll_transmit()?;
        Some(text(&TransmitLine::new(
            &transmit,
            &self.session.attempt_info(),
        )))
    }

    /// The next event as JSON, or `undefined`.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> Option<String> {
        while let Some(event) = self.session.poll_event() {
            let now = self.session.now();
            let line = Line::new(&event, now, self.session.last_event_id());
            if let Some(line) = line.admit(&mut self.peer_errors, now) {
                return Some(text(&line));
            }
        }
        None
    }

    /// When to call [`Sse::handle_timeout`], or `undefined`.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        crate::poll_timeout(false, self.now, self.session.poll_timeout())
    }
}

impl Sse {
    fn from_session(session: SseSession) -> Self {
        Sse {
            session,
            now: 0,
            wall: None,
            peer_errors: Limiter::default(),
        }
    }

    fn at(&mut self, now_ms: f64) -> Result<tether_core::Instant, TetherError> {
        let now = instant(now_ms)?;
        self.now = self.now.max(whole(now_ms, "nowMs")?);
        Ok(now)
    }

    fn retry_after(&self, value: &str) -> Option<Duration> {
        let unix_now = self.wall.map(|(set_ms, set_secs)| {
            set_secs.saturating_add(self.now.saturating_sub(set_ms) / 1000)
        });
        tether_core::sse::status::retry_after(value, unix_now)
    }
}

/// The request as the host describes it (the core's `RequestSpec`, camelCase accepted).
fn request_from(json: Option<String>) -> Result<Request, TetherError> {
    let spec: RequestSpec = crate::config::parse(json, "request")?;
    spec.into_request()
        .map_err(|e| TetherError::invalid(format!("resume {e}")))
}
