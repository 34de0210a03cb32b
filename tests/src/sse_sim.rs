//! A deterministic SSE simulator: an [`SseSession`] paired with a sans-IO model of an SSE
//! server behind an ingress, advanced to the earliest deadline of either side.
//!
//! The server publishes events with increasing ids, replays those after a request's
//! `Last-Event-ID`, sends `: heartbeat` comments after a quiet interval, can be down for
//! periods (answering 503 through its ingress and resetting live streams), and can follow a
//! script of replies for the next requests. The ingress closes a stream that carried no bytes
//! for its idle timeout, as nginx's `proxy_read_timeout` does. Nothing sleeps and nothing reads
//! a clock; a scenario of hours runs in milliseconds and gives the same transcript for the
//! same seed.
//!
//! Transcript lines have the relay [`Sim`](crate::sim::Sim)'s format,
//! `<ms since start>ms <who> <what>`: `app` for application calls, `tx` for the session's
//! transmits, `io` for request lifecycle (response heads, ends, errors, a request the driver
//! could not build, driver misuse), `rx` for body bytes, `ev` for what the application
//! heard. Instants in events are shown as `t+<ms since start>ms`. Timeouts are not lines of
//! their own: what they caused is.
//!
//! The simulator also plays the driver: like reqwest and hyper it refuses to build a request
//! whose `Last-Event-ID` is not a valid header value (its own check, written independently of
//! the core's rule) and reports that with `handle_request_invalid`.
//!
//! [`SseSim::manual`] gives a simulator whose server never answers: the test plays the
//! network itself through the `handle_*` methods (the session's own signatures) and reads
//! what came out with [`SseSim::take`]. Property tests, transcripts and the `sse_session`
//! fuzz target all drive the session through this one type.
//!
//! Every input is followed by [`SseInvariants::drain`]: a contract violation panics with the
//! transcript so far.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::link::{Epoch, SocketError, SocketLoss};
use tether_core::sse::{
    Attempt, Event, Request, ResponseHead, SseCheckpoint, SseConfig, SseSession, SseStats, Transmit,
};
use tether_core::{Instant, Lifecycle};

use crate::net::{self, Machine, Net};
use crate::sse_invariants::{SseInput, SseInvariants};

/// The modelled server and its ingress.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// Delay from a request to its response head.
    pub latency: Duration,
    /// A `: heartbeat` comment after this much quiet on a stream (the analysis's 30 s).
    pub heartbeat_every: Option<Duration>,
    /// The ingress closes a stream that carried no bytes for this long.
    pub ingress_idle_timeout: Option<Duration>,
    /// Periods `[start, end)` (from the start of the run) when the server is down: requests
    /// get `down_status` from the ingress and live streams are reset when a period starts.
    pub down: Vec<(Duration, Duration)>,
    /// What the ingress answers while the server is down.
    pub down_status: u16,
    /// When the server publishes an event (from the start of the run); ids count from 1.
    pub publish_at: Vec<Duration>,
    /// Whether the server answers requests at all (`false`: the test plays the network).
    pub answers: bool,
    /// After publishing the event with this id the server sends `data: [DONE]` (OpenAI's end
    /// of a generation) on the live stream.
    pub done_after: Option<u64>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            latency: Duration::from_millis(20),
            heartbeat_every: Some(Duration::from_secs(30)),
            ingress_idle_timeout: Some(Duration::from_secs(60)),
            down: Vec::new(),
            down_status: 503,
            publish_at: Vec::new(),
            answers: true,
            done_after: None,
        }
    }
}

/// A scripted reply to one request, used before the server's normal behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Answer with this status and no body.
    Status {
        /// The status code.
        status: u16,
        /// The `Content-Type` header.
        content_type: Option<&'static str>,
        /// The `Retry-After` header, already parsed.
        retry_after: Option<Duration>,
    },
    /// Answer 200 `text/event-stream`, send these bytes, then end the body.
    Body(Vec<u8>),
    /// Answer 200 `text/event-stream` and end the body at once.
    AcceptThenDrop,
    /// The request fails with a network error: the connection was refused.
    Refused,
    /// Answer with this status and content type, send `body`, then end it.
    StatusBody {
        /// The status code.
        status: u16,
        /// The `Content-Type` header.
        content_type: Option<&'static str>,
        /// The body.
        body: Vec<u8>,
    },
    /// Answer 200 `text/event-stream`, send these bytes, then reset the connection.
    BodyThenReset(Vec<u8>),
    /// Answer with a redirect status and this `Location` (relative to [`STREAM_URL`] or to the
    /// redirect the request followed).
    Redirect {
        /// The status code.
        status: u16,
        /// The `Location` header.
        location: &'static str,
    },
    /// Answer 200 `text/event-stream` with this `Content-Encoding`, and no body.
    Encoded(&'static str),
}

/// The URL the simulated stream lives at, which a relative `Location` resolves against.
pub const STREAM_URL: &str = "https://sim.example/stream";

/// One request as the modelled server received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRequest {
    /// When, from the start of the run.
    pub at: Duration,
    /// The `Last-Event-ID` header it carried.
    pub last_event_id: Option<String>,
    /// Its method.
    pub method: String,
    /// Its body's length.
    pub body_len: usize,
    /// The redirect target it was sent to; `None`: the stream's own URL.
    pub redirect: Option<String>,
}

/// The session, the server model, the clock and the transcript.
#[derive(Debug)]
pub struct SseSim {
    session: SseSession,
    server: Server,
    /// Requests on their way to the server and what it sent on their way back.
    net: Net<Job>,
    transcript: String,
    keep_transcript: bool,
    requests: Vec<Duration>,
    invariants: SseInvariants,
    /// Output since the last [`SseSim::take`].
    taken: (Vec<Transmit>, Vec<Event>),
    /// Everything the application heard, with when.
    heard: Vec<(Instant, Event)>,
    /// The checkpoint of a killed session, until it is restored.
    saved: Option<Vec<u8>>,
}

impl SseSim {
    /// A simulator whose session uses `config` and `seed`, against `server`.
    pub fn new(config: SseConfig, seed: u64, server: ServerConfig) -> Self {
        Self::with_request(config, Request::get(), seed, server)
    }

    /// A simulator whose session sends `request`, against `server`.
    pub fn with_request(
        config: SseConfig,
        request: Request,
        seed: u64,
        server: ServerConfig,
    ) -> Self {
        let session = SseSession::with_request(config, request, seed);
        Self::starting_at(session, server, Instant::from_millis(1_000_000))
    }

    /// [`SseSim::manual`] for a session that sends `request`.
    pub fn manual_request(config: SseConfig, request: Request, seed: u64) -> Self {
        let server = ServerConfig {
            heartbeat_every: None,
            ingress_idle_timeout: None,
            answers: false,
            ..ServerConfig::default()
        };
        Self::starting_at(
            SseSession::with_request(config, request, seed),
            server,
            Instant::ZERO,
        )
    }

    /// A simulator whose server never answers, starting at [`Instant::ZERO`]: the test gives
    /// every input itself with the `handle_*` methods and reads the output with
    /// [`SseSim::take`]. Invariants are still checked after every input.
    pub fn manual(config: SseConfig, seed: u64) -> Self {
        Self::manual_request(config, Request::get(), seed)
    }

    fn starting_at(session: SseSession, server: ServerConfig, start: Instant) -> Self {
        SseSim {
            invariants: SseInvariants::new(session.config()),
            session,
            net: Net::new(start, server.latency),
            server: Server::new(server, start),
            transcript: String::new(),
            keep_transcript: true,
            requests: Vec::new(),
            taken: (Vec::new(), Vec::new()),
            heard: Vec::new(),
            saved: None,
        }
    }

    /// Keep the whole transcript (default); when `false` only a tail is kept, for fuzzing and
    /// long runs.
    pub fn keep_transcript(&mut self, keep: bool) -> &mut Self {
        self.keep_transcript = keep;
        self
    }

    /// Use `replies`, in order, for the next requests.
    pub fn script(&mut self, replies: impl IntoIterator<Item = Reply>) {
        self.server.script.extend(replies);
    }

    /// The process dies now: the session's checkpoint is taken (as JSON bytes), nothing in
    /// flight arrives anywhere, and the server sees its stream's connection drop. The server
    /// goes on publishing; nothing reaches a session until [`SseSim::restore`].
    pub fn kill(&mut self) {
        let checkpoint = self.session.checkpoint();
        self.saved = Some(checkpoint.to_json());
        self.net.retain(|_| false);
        self.server.stream = None;
        self.line(
            "io",
            &format!(
                "killed (checkpoint: last event id {:?}, {} delivered)",
                checkpoint.resume_id(),
                checkpoint.delivered()
            ),
        );
    }

    /// A new process restores the killed session for `request` with `seed` and connects.
    ///
    /// # Panics
    /// When the checkpoint does not restore: the Sim's own checkpoints always must.
    pub fn restore(&mut self, request: Request, seed: u64) {
        let Some(bytes) = self.saved.take() else {
            return;
        };
        let config = *self.session.config();
        let checkpoint = match SseCheckpoint::from_json(&bytes) {
            Ok(c) => c,
            Err(e) => panic!("the Sim's own checkpoint: {e}\n{}", self.transcript),
        };
        self.session = match SseSession::restore(config, request, &checkpoint, seed) {
            Ok(s) => s,
            Err(e) => panic!(
                "restoring the Sim's own checkpoint: {e}\n{}",
                self.transcript
            ),
        };
        self.invariants = SseInvariants::new(&config);
        self.invariants.restored(checkpoint_accepted(&bytes));
        self.line("app", "restore");
        self.connect();
    }

    /// The application calls `connect`.
    pub fn connect(&mut self) {
        self.connect_at(self.net.now());
    }

    /// The application calls `disconnect`.
    pub fn disconnect(&mut self) {
        self.disconnect_at(self.net.now());
    }

    /// The application calls `connect` at `now`.
    pub fn connect_at(&mut self, now: Instant) {
        self.observe(now);
        self.line("app", "connect");
        self.session.connect(now);
        self.drain(SseInput::Connect);
    }

    /// The application calls `disconnect` at `now`.
    pub fn disconnect_at(&mut self, now: Instant) {
        self.observe(now);
        self.line("app", "disconnect");
        self.session.disconnect(now);
        self.drain(SseInput::Disconnect);
    }

    /// The application is suspended ([`SseSession::suspend`]).
    pub fn suspend(&mut self) {
        self.lifecycle_at(self.net.now(), Lifecycle::Suspended);
    }

    /// The application is back ([`SseSession::resume`]).
    pub fn resume(&mut self) {
        self.lifecycle_at(self.net.now(), Lifecycle::Resumed);
    }

    /// The network path changed ([`SseSession::network_changed`]).
    pub fn network_changed(&mut self, old_path_gone: bool) {
        self.lifecycle_at(self.net.now(), Lifecycle::NetworkChanged { old_path_gone });
    }

    /// The device has or has lost the network ([`SseSession::set_online`]).
    pub fn set_online(&mut self, online: bool) {
        self.lifecycle_at(self.net.now(), Lifecycle::Online(online));
    }

    /// One lifecycle signal at `now` ([`SseSession::handle_lifecycle`]).
    pub fn lifecycle_at(&mut self, now: Instant, signal: Lifecycle) {
        self.observe(now);
        self.line("app", &format!("{signal:?}"));
        self.session.handle_lifecycle(now, signal);
        self.drain(SseInput::Lifecycle);
    }

    /// The open stream dies without its end reaching the client (a NAT forgot it while the
    /// app slept): the server forgets it, and nothing in flight on it arrives. The client
    /// holds a zombie stream.
    pub fn vanish(&mut self) {
        let Some(stream) = self.server.stream.take() else {
            return;
        };
        let epoch = stream.epoch;
        self.net.retain(|job| job_epoch(job) != epoch);
        self.line("io", &format!("stream #{} vanished", epoch.0));
    }

    /// The driver reports a response head with its `Location` and the URL it came from
    /// ([`SseSession::handle_head`]).
    ///
    /// # Errors
    /// The session's [`SocketError`] for driver misuse.
    pub fn handle_head(
        &mut self,
        now: Instant,
        epoch: Epoch,
        head: &ResponseHead<'_>,
    ) -> Result<(), SocketError> {
        self.observe(now);
        let mut line = show_head(epoch, head.status, head.content_type, head.retry_after);
        if let Some(location) = head.location {
            let _ = write!(line, " location={location}");
        }
        if let Some(encoding) = head.content_encoding {
            let _ = write!(line, " content-encoding={encoding}");
        }
        self.line("io", &line);
        let result = self.session.handle_head(now, epoch, head);
        self.after(result)
    }

    /// The driver reports a response head ([`SseSession::handle_response`]).
    ///
    /// # Errors
    /// The session's [`SocketError`] for driver misuse.
    pub fn handle_response(
        &mut self,
        now: Instant,
        epoch: Epoch,
        status: u16,
        content_type: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Result<(), SocketError> {
        self.observe(now);
        self.line("io", &show_head(epoch, status, content_type, retry_after));
        let result = self
            .session
            .handle_response(now, epoch, status, content_type, retry_after);
        self.after(result)
    }

    /// The driver offers body bytes once ([`SseSession::handle_bytes`]); returns how many
    /// were taken.
    ///
    /// # Errors
    /// The session's [`SocketError`] for driver misuse.
    pub fn handle_bytes(
        &mut self,
        now: Instant,
        epoch: Epoch,
        bytes: &[u8],
    ) -> Result<usize, SocketError> {
        self.observe(now);
        self.line("rx", &show_bytes(epoch, bytes));
        let result = self.session.handle_bytes(now, epoch, bytes);
        self.after(result.map(drop))?;
        result
    }

    /// The driver reports the end of a body ([`SseSession::handle_eof`]).
    ///
    /// # Errors
    /// The session's [`SocketError`] for driver misuse.
    pub fn handle_eof(&mut self, now: Instant, epoch: Epoch) -> Result<(), SocketError> {
        self.observe(now);
        self.line("io", &format!("eof #{}", epoch.0));
        let result = self.session.handle_eof(now, epoch);
        self.after(result)
    }

    /// The driver reports a network failure ([`SseSession::handle_error`]).
    ///
    /// # Errors
    /// The session's [`SocketError`] for driver misuse.
    pub fn handle_error(
        &mut self,
        now: Instant,
        epoch: Epoch,
        loss: SocketLoss,
    ) -> Result<(), SocketError> {
        self.observe(now);
        self.line("io", &format!("error {} #{}", loss.as_str(), epoch.0));
        let result = self.session.handle_error(now, epoch, loss);
        self.after(result)
    }

    /// The driver could not build a request ([`SseSession::handle_request_invalid`]).
    ///
    /// # Errors
    /// The session's [`SocketError`] for driver misuse.
    pub fn handle_request_invalid(
        &mut self,
        now: Instant,
        epoch: Epoch,
        detail: &str,
    ) -> Result<(), SocketError> {
        self.observe(now);
        self.line("io", &format!("request invalid #{}: {detail}", epoch.0));
        let result = self.session.handle_request_invalid(now, epoch, detail);
        self.after(result)
    }

    /// The driver wakes at `now` ([`SseSession::handle_timeout`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.observe(now);
        if let Some((_, why)) = self.session.poll_wake() {
            self.line("due", why.as_str());
        }
        self.session.handle_timeout(now);
        self.drain(SseInput::Timeout);
    }

    /// The driver stops or resumes reading ([`SseSession::handle_read_paused`]).
    pub fn handle_read_paused(&mut self, now: Instant, paused: bool) {
        self.observe(now);
        self.line(
            "app",
            if paused {
                "read paused"
            } else {
                "read resumed"
            },
        );
        self.session.handle_read_paused(now, paused);
        self.drain(SseInput::Timeout);
    }

    /// Every transmit and event since the last call, in order.
    pub fn take(&mut self) -> (Vec<Transmit>, Vec<Event>) {
        std::mem::take(&mut self.taken)
    }

    /// What `pick` takes from each event the application heard, in order.
    pub fn heard<T>(&self, pick: impl FnMut(&Event) -> Option<T>) -> Vec<T> {
        self.heard.iter().map(|(_, e)| e).filter_map(pick).collect()
    }

    /// The requests the modelled server received, in order.
    pub fn seen(&self) -> &[SeenRequest] {
        &self.server.seen
    }

    /// The session's counters.
    pub fn stats(&self) -> &SseStats {
        self.session.stats()
    }

    /// The session's next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// Advance simulated time by `d`, handling every deadline of either side on the way.
    pub fn run_for(&mut self, d: Duration) {
        net::run_for(self, d);
    }

    /// Everything that happened so far.
    pub fn transcript(&self) -> &str {
        &self.transcript
    }

    /// When each request was sent, from the start of the run.
    pub fn requests(&self) -> &[Duration] {
        &self.requests
    }

    /// The session under test.
    pub fn session(&self) -> &SseSession {
        &self.session
    }

    /// The current simulated time.
    pub fn now(&self) -> Instant {
        self.net.now()
    }

    /// Time since the start of the run.
    pub fn elapsed(&self) -> Duration {
        self.net.elapsed()
    }

    /// Time as the session sees it never goes backwards; the transcript follows the newest.
    fn observe(&mut self, now: Instant) {
        self.net.advance_to(now);
    }

    /// Log a refusal as misuse, then drain with the matching input kind.
    fn after(&mut self, result: Result<(), SocketError>) -> Result<(), SocketError> {
        match result {
            Ok(()) => self.drain(SseInput::Peer),
            Err(e) => {
                self.line("io", &format!("!! driver misuse: {e}"));
                self.drain(SseInput::Misuse);
            }
        }
        result
    }

    /// Drain the session after `input`, checking its contract, and act on the transmits as a
    /// driver would: a request whose header cannot be built is reported at once, the rest go
    /// to the server (which only queues work, so draining everything first changes nothing).
    fn drain(&mut self, input: SseInput) {
        let now = self.net.now();
        let out = match self.invariants.drain(now, input, &mut self.session) {
            Ok(out) => out,
            Err(what) => panic!(
                "SSE invariant violated: {what}\n--- transcript ---\n{}",
                self.transcript
            ),
        };
        let mut unbuildable = None;
        for t in out.transmits {
            self.line("tx", &show_transmit(&t));
            self.taken.0.push(t.clone());
            if let Transmit::Open {
                epoch,
                last_event_id,
                ..
            } = &t
            {
                if last_event_id.as_deref().is_some_and(|id| !header_value(id)) {
                    unbuildable = Some(*epoch);
                    continue;
                }
                self.requests.push(self.net.elapsed());
            }
            self.server.on_transmit(&mut self.net, t);
        }
        for e in out.events {
            self.line("ev", &self.show_event(&e));
            self.taken.1.push(e.clone());
            self.heard.push((now, e));
        }
        if let Some(epoch) = unbuildable {
            // What reqwest's "builder error" would have been.
            let _ = self.handle_request_invalid(now, epoch, "invalid Last-Event-ID header");
        }
    }

    fn deliver(&mut self, delivery: Delivery) {
        let now = self.net.now();
        let _ = match delivery {
            Delivery::Response {
                epoch,
                status,
                content_type,
                retry_after,
                location: None,
                content_encoding: None,
                ..
            } => self.handle_response(now, epoch, status, content_type, retry_after),
            Delivery::Response {
                epoch,
                status,
                content_type,
                retry_after,
                location,
                content_encoding,
                url,
            } => {
                let head = ResponseHead::new(status)
                    .content_type(content_type)
                    .retry_after(retry_after)
                    .location(location)
                    .content_encoding(content_encoding)
                    .url(Some(&url));
                self.handle_head(now, epoch, &head)
            }
            Delivery::Bytes { epoch, bytes } => self.feed(epoch, &bytes),
            Delivery::Eof { epoch } => self.handle_eof(now, epoch),
            Delivery::Error { epoch, loss } => self.handle_error(now, epoch, loss),
        };
    }

    /// Offer `bytes` the way a driver must: until all are taken, draining in between.
    fn feed(&mut self, epoch: Epoch, mut bytes: &[u8]) -> Result<(), SocketError> {
        while !bytes.is_empty() {
            let queued = self.taken.1.len();
            let n = self.handle_bytes(self.net.now(), epoch, bytes)?;
            // Progress is bytes taken or events queued (see the parser's `feed_limited`).
            assert!(
                n > 0 || self.taken.1.len() > queued,
                "handle_bytes made no progress\n--- transcript ---\n{}",
                self.transcript
            );
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// What the session's deadline is for, as the transcript's `due` line.
    /// An instant as the transcript shows it: relative to the start, like the relay `Sim`.
    fn show_at(&self, at: Instant) -> String {
        format!("t+{}ms", (at - self.net.start()).as_millis())
    }

    fn show_event(&self, e: &Event) -> String {
        match e {
            Event::Message(m) => format!(
                "Message {{ event: {:?}, id: {:?}, data: {:?} }}",
                m.event, m.id, m.data
            ),
            Event::Reconnecting { why, attempt, at } => format!(
                "Reconnecting {{ why: {why:?}, attempt: {attempt}, at: {} }}",
                self.show_at(*at)
            ),
            Event::Reconnected { gap } => format!("Reconnected {{ gap: {}ms }}", gap.as_millis()),
            Event::Reissued { gap, attempts } => format!(
                "Reissued {{ gap: {}ms, attempts: {attempts} }}",
                gap.as_millis()
            ),
            other => format!("{other:?}"),
        }
    }
}

impl Machine for SseSim {
    type Item = Job;

    net::machine_fields!(session: SseSession);

    fn model_deadline(&self) -> Option<Instant> {
        self.server.next_deadline()
    }

    fn on_model_timeout(&mut self) -> bool {
        let Some(delivery) = self.server.poll(self.net.now()) else {
            return false;
        };
        self.deliver(delivery);
        true
    }

    fn on_item(&mut self, job: Job) {
        match job {
            Job::Deliver(delivery) => self.deliver(delivery),
            Job::Accept {
                epoch,
                last_event_id,
            } => {
                let now = self.net.now();
                let (head, replay) = self.server.accept(now, epoch, last_event_id);
                self.deliver(head);
                // Catch-up rides right behind the head, unless the head made the session
                // close the stream.
                if let Some(bytes) = replay.filter(|_| self.server.streaming(epoch)) {
                    self.deliver(Delivery::Bytes { epoch, bytes });
                }
            }
        }
    }

    fn after_timeout(&mut self) {
        self.drain(SseInput::Timeout);
    }
}

/// Whether `value` is a header value reqwest and hyper would accept (`http::HeaderValue`:
/// no control character but TAB, no DEL). The driver's view, kept apart from the core's rule
/// on purpose so a drift between them shows up as a failed request.
fn header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7F))
}

fn show_head(
    epoch: Epoch,
    status: u16,
    content_type: Option<&str>,
    retry_after: Option<Duration>,
) -> String {
    let mut what = format!("{status}");
    if let Some(ct) = content_type {
        let _ = write!(what, " {ct}");
    }
    if let Some(ra) = retry_after {
        let _ = write!(what, " retry-after={}s", ra.as_secs());
    }
    format!("{what} #{}", epoch.0)
}

fn show_bytes(epoch: Epoch, bytes: &[u8]) -> String {
    const SHOWN: usize = 512;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]);
    let more = if bytes.len() > SHOWN {
        format!(" (+{} bytes)", bytes.len() - SHOWN)
    } else {
        String::new()
    };
    format!("\"{}\"{more} #{}", text.escape_debug(), epoch.0)
}

fn show_transmit(t: &Transmit) -> String {
    match t {
        Transmit::Open {
            epoch,
            last_event_id,
            request,
            attempt,
            redirect,
            withhold,
        } => {
            let mut line = format!("Open #{} {{ last_event_id: {last_event_id:?} }}", epoch.0);
            if let Some(url) = redirect {
                let _ = write!(line, " to {url}");
            }
            if !withhold.is_empty() {
                let _ = write!(line, " withholding {}", withhold.join(", "));
            }
            // A plain GET shows as it did before requests existed.
            if !request.is_plain_get() || *attempt != Attempt::Original {
                let _ = write!(line, " {}", request.method);
                match attempt {
                    Attempt::Resume => line.push_str(" resume"),
                    Attempt::Reissue => line.push_str(" reissue"),
                    _ => {}
                }
                for (name, value) in &request.headers {
                    let _ = write!(line, " [{name}: {value}]");
                }
                if !request.body.is_empty() {
                    let _ = write!(line, " body={}B", request.body.len());
                }
            }
            line
        }
        Transmit::Close { epoch } => format!("Close #{}", epoch.0),
        Transmit::End => "End".to_owned(),
    }
}

/// Something the network hands the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    Response {
        epoch: Epoch,
        status: u16,
        content_type: Option<&'static str>,
        retry_after: Option<Duration>,
        location: Option<&'static str>,
        content_encoding: Option<&'static str>,
        /// The URL the request went to.
        url: String,
    },
    Bytes {
        epoch: Epoch,
        bytes: Vec<u8>,
    },
    Eof {
        epoch: Epoch,
    },
    Error {
        epoch: Epoch,
        loss: SocketLoss,
    },
}

/// What the SseSim's network carries: a request on its way to the server (which answers it
/// on arrival), or something the server sent on its way to the session.
#[derive(Clone, Debug)]
pub(crate) enum Job {
    Accept {
        epoch: Epoch,
        last_event_id: Option<String>,
    },
    Deliver(Delivery),
}

#[derive(Clone, Copy, Debug)]
struct Stream {
    epoch: Epoch,
    opened_at: Instant,
    last_sent: Instant,
}

#[derive(Debug)]
struct Server {
    config: ServerConfig,
    start: Instant,
    script: VecDeque<Reply>,
    stream: Option<Stream>,
    published: u64,
    seen: Vec<SeenRequest>,
}

const EVENT_STREAM: Option<&str> = Some("text/event-stream");

impl Server {
    fn new(config: ServerConfig, start: Instant) -> Self {
        Server {
            config,
            start,
            script: VecDeque::new(),
            stream: None,
            published: 0,
            seen: Vec::new(),
        }
    }

    fn on_transmit(&mut self, net: &mut Net<Job>, t: Transmit) {
        match t {
            Transmit::Open {
                epoch,
                last_event_id,
                request,
                redirect,
                ..
            } => self.on_request(net, epoch, last_event_id, &request, redirect.as_deref()),
            Transmit::Close { epoch } => {
                net.retain(|job| job_epoch(job) != epoch);
                if self.stream.is_some_and(|s| s.epoch == epoch) {
                    self.stream = None;
                }
            }
            // The session is over; what it still had open it closed first.
            Transmit::End => {}
        }
    }

    fn on_request(
        &mut self,
        net: &mut Net<Job>,
        epoch: Epoch,
        last_event_id: Option<String>,
        request: &Request,
        redirect: Option<&str>,
    ) {
        let at = net.now() + net.latency;
        if !self.config.answers {
            return;
        }
        self.seen.push(SeenRequest {
            at: at - self.start,
            last_event_id: last_event_id.clone(),
            method: request.method.clone(),
            body_len: request.body.len(),
            redirect: redirect.map(str::to_owned),
        });
        let Some(reply) = self.script.pop_front() else {
            if self.is_down(at) {
                let status = self.config.down_status;
                net.send(Job::Deliver(response(epoch, status, None, None)));
            } else {
                net.send(Job::Accept {
                    epoch,
                    last_event_id,
                });
            }
            return;
        };
        match reply {
            Reply::Status {
                status,
                content_type,
                retry_after,
            } => net.send(Job::Deliver(response(
                epoch,
                status,
                content_type,
                retry_after,
            ))),
            Reply::Body(bytes) => {
                net.send(Job::Deliver(response(epoch, 200, EVENT_STREAM, None)));
                net.send(Job::Deliver(Delivery::Bytes { epoch, bytes }));
                net.send(Job::Deliver(Delivery::Eof { epoch }));
            }
            Reply::AcceptThenDrop => {
                net.send(Job::Deliver(response(epoch, 200, EVENT_STREAM, None)));
                net.send(Job::Deliver(Delivery::Eof { epoch }));
            }
            Reply::StatusBody {
                status,
                content_type,
                body,
            } => {
                net.send(Job::Deliver(response(epoch, status, content_type, None)));
                net.send(Job::Deliver(Delivery::Bytes { epoch, bytes: body }));
                net.send(Job::Deliver(Delivery::Eof { epoch }));
            }
            Reply::BodyThenReset(bytes) => {
                net.send(Job::Deliver(response(epoch, 200, EVENT_STREAM, None)));
                net.send(Job::Deliver(Delivery::Bytes { epoch, bytes }));
                net.send(Job::Deliver(Delivery::Error {
                    epoch,
                    loss: SocketLoss::NetworkError,
                }));
            }
            Reply::Redirect { status, location } => {
                let head = Delivery::Response {
                    epoch,
                    status,
                    content_type: None,
                    retry_after: None,
                    location: Some(location),
                    content_encoding: None,
                    url: redirect.unwrap_or(STREAM_URL).to_owned(),
                };
                net.send(Job::Deliver(head));
            }
            Reply::Encoded(encoding) => {
                let head = Delivery::Response {
                    epoch,
                    status: 200,
                    content_type: EVENT_STREAM,
                    retry_after: None,
                    location: None,
                    content_encoding: Some(encoding),
                    url: STREAM_URL.to_owned(),
                };
                net.send(Job::Deliver(head));
            }
            Reply::Refused => {
                // Refused before the server could see it.
                self.seen.pop();
                net.send(Job::Deliver(Delivery::Error {
                    epoch,
                    loss: SocketLoss::ConnectionRefused,
                }));
            }
        }
    }

    /// When the server's own next work is due (a publish, a stream's crash, idle close or
    /// heartbeat); what is in flight is the network's.
    fn next_deadline(&self) -> Option<Instant> {
        let publish = self.next_publish();
        let stream = self.stream.and_then(|s| self.stream_deadline(s));
        [publish, stream].into_iter().flatten().min()
    }

    /// The next delivery due at `now` from the server's own work, after doing any of it.
    fn poll(&mut self, now: Instant) -> Option<Delivery> {
        if let Some(s) = self.stream {
            if let Some(d) = self.stream_due(now, s) {
                return Some(d);
            }
        }
        if self.next_publish().is_some_and(|t| t <= now) {
            self.published += 1;
            let Some(s) = self.stream.as_mut() else {
                return self.poll(now);
            };
            s.last_sent = now;
            let mut bytes = event_bytes(self.published);
            if self.config.done_after == Some(self.published) {
                bytes.extend_from_slice(b"data: [DONE]\n\n");
            }
            return Some(Delivery::Bytes {
                epoch: s.epoch,
                bytes,
            });
        }
        None
    }

    /// Open the stream for `epoch`: its response head, and the events a `Last-Event-ID`
    /// says the client missed, to send right behind it.
    fn accept(
        &mut self,
        now: Instant,
        epoch: Epoch,
        last_event_id: Option<String>,
    ) -> (Delivery, Option<Vec<u8>>) {
        self.stream = Some(Stream {
            epoch,
            opened_at: now,
            last_sent: now,
        });
        let replay: Vec<u8> = match last_event_id.and_then(|id| id.parse::<u64>().ok()) {
            Some(from) => (from + 1..=self.published).flat_map(event_bytes).collect(),
            None => Vec::new(),
        };
        let head = response(epoch, 200, EVENT_STREAM, None);
        (head, Some(replay).filter(|r| !r.is_empty()))
    }

    /// Whether the stream of `epoch` is still open.
    fn streaming(&self, epoch: Epoch) -> bool {
        self.stream.is_some_and(|s| s.epoch == epoch)
    }

    fn stream_deadline(&self, s: Stream) -> Option<Instant> {
        let crash = self.next_down_start(s.opened_at);
        let idle = self.config.ingress_idle_timeout.map(|d| s.last_sent + d);
        let beat = self.config.heartbeat_every.map(|d| s.last_sent + d);
        [crash, idle, beat].into_iter().flatten().min()
    }

    /// Crash, ingress idle close, heartbeat: in that order when due at the same time.
    fn stream_due(&mut self, now: Instant, s: Stream) -> Option<Delivery> {
        let epoch = s.epoch;
        if self.next_down_start(s.opened_at).is_some_and(|t| t <= now) {
            self.stream = None;
            return Some(Delivery::Error {
                epoch,
                loss: SocketLoss::NetworkError,
            });
        }
        let idle = self.config.ingress_idle_timeout;
        if idle.is_some_and(|d| s.last_sent + d <= now) {
            self.stream = None;
            return Some(Delivery::Eof { epoch });
        }
        let beat = self.config.heartbeat_every;
        if beat.is_some_and(|d| s.last_sent + d <= now) {
            self.stream = Some(Stream {
                last_sent: now,
                ..s
            });
            return Some(Delivery::Bytes {
                epoch,
                bytes: b": heartbeat\n\n".to_vec(),
            });
        }
        None
    }

    fn next_publish(&self) -> Option<Instant> {
        let n = usize::try_from(self.published).ok()?;
        self.config.publish_at.get(n).map(|d| self.start + *d)
    }

    fn next_down_start(&self, after: Instant) -> Option<Instant> {
        self.config
            .down
            .iter()
            .map(|(s, _)| self.start + *s)
            .filter(|s| *s > after)
            .min()
    }

    fn is_down(&self, at: Instant) -> bool {
        self.config
            .down
            .iter()
            .any(|(s, e)| self.start + *s <= at && at < self.start + *e)
    }
}

fn response(
    epoch: Epoch,
    status: u16,
    content_type: Option<&'static str>,
    retry_after: Option<Duration>,
) -> Delivery {
    Delivery::Response {
        epoch,
        status,
        content_type,
        retry_after,
        location: None,
        content_encoding: None,
        url: STREAM_URL.to_owned(),
    }
}

fn job_epoch(job: &Job) -> Epoch {
    match job {
        Job::Accept { epoch, .. } => *epoch,
        Job::Deliver(
            Delivery::Response { epoch, .. }
            | Delivery::Bytes { epoch, .. }
            | Delivery::Eof { epoch }
            | Delivery::Error { epoch, .. },
        ) => *epoch,
    }
}

fn event_bytes(id: u64) -> Vec<u8> {
    format!("id: {id}\nevent: change\ndata: {{\"n\":{id}}}\n\n").into_bytes()
}

/// Whether a checkpoint's JSON says the server had accepted the request.
fn checkpoint_accepted(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes).is_ok_and(|v| v["stream"] == "accepted")
}
