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
//! Transcript lines are `+<ms since start>ms  <arrow> <what>`: `app` for application calls,
//! `->` for the session's transmits, `<-` for what the network delivered to it, `..` for a
//! timeout the session asked for, `=>` for what the application heard.
//!
//! Every input is followed by [`SseInvariants::drain`]: a contract violation panics with the
//! transcript so far.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::link::Epoch;
use tether_core::sse::{Event, SseConfig, SseSession, Transmit};
use tether_core::Instant;

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
    /// The request fails with a network error.
    Refused,
}

/// The session, the server model, the clock and the transcript.
#[derive(Debug)]
pub struct SseSim {
    session: SseSession,
    server: Server,
    start: Instant,
    now: Instant,
    transcript: String,
    requests: Vec<Duration>,
    invariants: SseInvariants,
}

impl SseSim {
    /// A simulator whose session uses `config` and `seed`, against `server`.
    pub fn new(config: SseConfig, seed: u64, server: ServerConfig) -> Self {
        let start = Instant::from_millis(1_000_000);
        SseSim {
            invariants: SseInvariants::new(&config),
            session: SseSession::new(config, seed),
            server: Server::new(server, start),
            start,
            now: start,
            transcript: String::new(),
            requests: Vec::new(),
        }
    }

    /// Use `replies`, in order, for the next requests.
    pub fn script(&mut self, replies: impl IntoIterator<Item = Reply>) {
        self.server.script.extend(replies);
    }

    /// The application calls `connect`.
    pub fn connect(&mut self) {
        self.log("app", "connect");
        self.session.connect(self.now);
        self.drain(SseInput::Connect);
    }

    /// The application calls `disconnect`.
    pub fn disconnect(&mut self) {
        self.log("app", "disconnect");
        self.session.disconnect(self.now);
        self.drain(SseInput::Disconnect);
    }

    /// Advance simulated time by `d`, handling every deadline of either side on the way.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = [self.session.poll_timeout(), self.server.next_deadline()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = next.filter(|t| *t <= end) else {
                break;
            };
            self.now = self.now.max(next);
            if let Some(delivery) = self.server.poll(self.now) {
                self.deliver(delivery);
            } else if self.session.poll_timeout().is_some_and(|t| t <= self.now) {
                self.log("..", "timeout");
                self.session.handle_timeout(self.now);
                self.drain(SseInput::Timeout);
            }
        }
        self.now = end;
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

    /// Time since the start of the run.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Drain the session after `input`, checking its contract, and hand the transmits to the
    /// server (which only queues work, so draining everything first changes nothing).
    fn drain(&mut self, input: SseInput) {
        let out = match self.invariants.drain(self.now, input, &mut self.session) {
            Ok(out) => out,
            Err(what) => panic!(
                "SSE invariant violated: {what}\n--- transcript ---\n{}",
                self.transcript
            ),
        };
        for t in out.transmits {
            self.log("->", &show_transmit(&t));
            if let Transmit::Open { .. } = t {
                self.requests.push(self.now - self.start);
            }
            self.server.on_transmit(self.now, t);
        }
        for e in out.events {
            self.log("=>", &show_event(&e));
        }
    }

    fn deliver(&mut self, delivery: Delivery) {
        let now = self.now;
        let result = match delivery {
            Delivery::Response {
                epoch,
                status,
                content_type,
                retry_after,
            } => {
                let mut what = format!("{status}");
                if let Some(ct) = content_type {
                    let _ = write!(what, " {ct}");
                }
                if let Some(ra) = retry_after {
                    let _ = write!(what, " retry-after={}s", ra.as_secs());
                }
                self.log("<-", &format!("{what} #{}", epoch.0));
                self.session
                    .handle_response(now, epoch, status, content_type, retry_after)
                    .map(drop)
            }
            Delivery::Bytes { epoch, bytes } => {
                let text = String::from_utf8_lossy(&bytes).escape_debug().to_string();
                self.log("<-", &format!("\"{text}\" #{}", epoch.0));
                self.feed(epoch, &bytes)
            }
            Delivery::Eof { epoch } => {
                self.log("<-", &format!("eof #{}", epoch.0));
                self.session.handle_eof(now, epoch)
            }
            Delivery::Error { epoch } => {
                self.log("<-", &format!("error #{}", epoch.0));
                self.session.handle_error(now, epoch)
            }
        };
        match result {
            Ok(()) => self.drain(SseInput::Peer),
            Err(e) => {
                self.log("!!", &format!("driver misuse: {e}"));
                self.drain(SseInput::Misuse);
            }
        }
    }

    fn feed(
        &mut self,
        epoch: Epoch,
        mut bytes: &[u8],
    ) -> Result<(), tether_core::link::SocketError> {
        while !bytes.is_empty() {
            let n = self.session.handle_bytes(self.now, epoch, bytes)?;
            bytes = &bytes[n..];
            self.drain(SseInput::Peer);
        }
        Ok(())
    }

    fn log(&mut self, arrow: &str, what: &str) {
        let ms = (self.now - self.start).as_millis();
        let _ = writeln!(self.transcript, "+{ms:>8}ms  {arrow} {what}");
    }
}

fn show_transmit(t: &Transmit) -> String {
    match t {
        Transmit::Open {
            epoch,
            last_event_id,
        } => format!("Open #{} {{last_event_id: {last_event_id:?}}}", epoch.0),
        Transmit::Close { epoch } => format!("Close #{}", epoch.0),
    }
}

fn show_event(e: &Event) -> String {
    match e {
        Event::Message(m) => format!(
            "Message{{event: {:?}, id: {:?}, data: {:?}}}",
            m.event, m.id, m.data
        ),
        Event::Reconnecting {
            why,
            attempt,
            delay,
        } => format!(
            "Reconnecting{{why: {why:?}, attempt: {attempt}, delay: {}ms}}",
            delay.as_millis()
        ),
        Event::Reconnected { gap } => format!("Reconnected{{gap: {}ms}}", gap.as_millis()),
        other => format!("{other:?}"),
    }
}

/// Something the network hands the session.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Delivery {
    Response {
        epoch: Epoch,
        status: u16,
        content_type: Option<&'static str>,
        retry_after: Option<Duration>,
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
    },
}

/// Work the server will do at a time: answer a request, or hand over a delivery.
#[derive(Clone, Debug)]
enum Job {
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
    jobs: VecDeque<(Instant, Job)>,
    stream: Option<Stream>,
    published: u64,
}

const EVENT_STREAM: Option<&str> = Some("text/event-stream");

impl Server {
    fn new(config: ServerConfig, start: Instant) -> Self {
        Server {
            config,
            start,
            script: VecDeque::new(),
            jobs: VecDeque::new(),
            stream: None,
            published: 0,
        }
    }

    fn on_transmit(&mut self, now: Instant, t: Transmit) {
        match t {
            Transmit::Open {
                epoch,
                last_event_id,
            } => self.on_request(now, epoch, last_event_id),
            Transmit::Close { epoch } => {
                self.jobs.retain(|(_, job)| job_epoch(job) != epoch);
                if self.stream.is_some_and(|s| s.epoch == epoch) {
                    self.stream = None;
                }
            }
        }
    }

    fn on_request(&mut self, now: Instant, epoch: Epoch, last_event_id: Option<String>) {
        let at = now + self.config.latency;
        let Some(reply) = self.script.pop_front() else {
            if self.is_down(at) {
                let status = self.config.down_status;
                self.push(at, Job::Deliver(response(epoch, status, None, None)));
            } else {
                self.push(
                    at,
                    Job::Accept {
                        epoch,
                        last_event_id,
                    },
                );
            }
            return;
        };
        match reply {
            Reply::Status {
                status,
                content_type,
                retry_after,
            } => self.push(
                at,
                Job::Deliver(response(epoch, status, content_type, retry_after)),
            ),
            Reply::Body(bytes) => {
                self.push(at, Job::Deliver(response(epoch, 200, EVENT_STREAM, None)));
                self.push(at, Job::Deliver(Delivery::Bytes { epoch, bytes }));
                self.push(at, Job::Deliver(Delivery::Eof { epoch }));
            }
            Reply::AcceptThenDrop => {
                self.push(at, Job::Deliver(response(epoch, 200, EVENT_STREAM, None)));
                self.push(at, Job::Deliver(Delivery::Eof { epoch }));
            }
            Reply::Refused => self.push(at, Job::Deliver(Delivery::Error { epoch })),
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let job = self.jobs.front().map(|(at, _)| *at);
        let publish = self.next_publish();
        let stream = self.stream.and_then(|s| self.stream_deadline(s));
        [job, publish, stream].into_iter().flatten().min()
    }

    /// The next delivery due at `now`, after doing any of the server's own due work.
    fn poll(&mut self, now: Instant) -> Option<Delivery> {
        if self.jobs.front().is_some_and(|(at, _)| *at <= now) {
            let (_, job) = self.jobs.pop_front()?;
            return match job {
                Job::Deliver(d) => Some(d),
                Job::Accept {
                    epoch,
                    last_event_id,
                } => Some(self.accept(now, epoch, last_event_id)),
            };
        }
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
            let bytes = event_bytes(self.published);
            return Some(Delivery::Bytes {
                epoch: s.epoch,
                bytes,
            });
        }
        None
    }

    fn accept(&mut self, now: Instant, epoch: Epoch, last_event_id: Option<String>) -> Delivery {
        self.stream = Some(Stream {
            epoch,
            opened_at: now,
            last_sent: now,
        });
        // Catch-up: replay what the client missed, right behind the response head.
        let from = last_event_id.and_then(|id| id.parse::<u64>().ok());
        if let Some(from) = from {
            let replay: Vec<u8> = (from + 1..=self.published).flat_map(event_bytes).collect();
            if !replay.is_empty() {
                self.jobs.push_front((
                    now,
                    Job::Deliver(Delivery::Bytes {
                        epoch,
                        bytes: replay,
                    }),
                ));
            }
        }
        response(epoch, 200, EVENT_STREAM, None)
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
            return Some(Delivery::Error { epoch });
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

    fn push(&mut self, at: Instant, job: Job) {
        // Stable: jobs at the same time keep their order.
        let i = self.jobs.partition_point(|(t, _)| *t <= at);
        self.jobs.insert(i, (at, job));
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
    }
}

fn job_epoch(job: &Job) -> Epoch {
    match job {
        Job::Accept { epoch, .. } => *epoch,
        Job::Deliver(
            Delivery::Response { epoch, .. }
            | Delivery::Bytes { epoch, .. }
            | Delivery::Eof { epoch }
            | Delivery::Error { epoch },
        ) => *epoch,
    }
}

fn event_bytes(id: u64) -> Vec<u8> {
    format!("id: {id}\nevent: change\ndata: {{\"n\":{id}}}\n\n").into_bytes()
}
