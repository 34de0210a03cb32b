//! `Link`: one logical connection's lifecycle, shared by the relay and SSE sessions.
//!
//! It owns the intent (should we be connected?), the epoch of the current socket, reconnect
//! scheduling with [`Backoff`] and its stable reset, and the liveness watchdog. It knows
//! nothing about the protocol spoken over the socket.

use std::time::Duration;

use crate::backoff::{Backoff, BackoffPolicy};
use crate::rng::Rng;
use crate::time::Instant;
use crate::wake::Wake;

/// Identifies one socket; anything tagged with an older epoch is stale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub u64);

/// Local misuse of a socket input: the driver's mistake, never the peer's. Both sessions
/// apply one rule to every input tagged with an [`Epoch`]:
///
/// - an epoch never handed out (in a `Transmit::Open`) is [`SocketError::UnknownEpoch`];
/// - an epoch the session already let go (closed, timed out, superseded) is stale: the input
///   is ignored and counted, and the call returns `Ok`;
/// - input that needs an open socket (frames, bytes, pongs) for the live epoch before its
///   open was reported is [`SocketError::NotOpen`]; a second open is
///   [`SocketError::AlreadyOpen`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketError {
    /// The epoch was never handed out in a `Transmit::Open`.
    UnknownEpoch(Epoch),
    /// Input for an epoch whose open (response head) was not reported yet.
    NotOpen(Epoch),
    /// A second open (response head) was reported for the same epoch.
    AlreadyOpen(Epoch),
}

impl std::fmt::Display for SocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketError::UnknownEpoch(e) => write!(f, "epoch {} was never opened", e.0),
            SocketError::NotOpen(e) => write!(f, "input for epoch {} before its open", e.0),
            SocketError::AlreadyOpen(e) => write!(f, "second open for epoch {}", e.0),
        }
    }
}

impl std::error::Error for SocketError {}

/// Why a socket (or an SSE request) was lost, as the driver saw it or the session decided.
/// Carried to the application so a script can tell a refused port from a rejected
/// certificate; it never changes what the session does next (every loss reconnects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketLoss {
    /// The connection was refused, the host unreachable or its name unresolved.
    ConnectionRefused,
    /// The TLS handshake failed, e.g. the certificate was rejected. Retried like any loss:
    /// a certificate can be mid-rotation, and the application hears why every time.
    TlsRejected,
    /// The WebSocket or HTTP handshake failed (the server refused the upgrade).
    HandshakeFailed,
    /// The socket did not open within the connect timeout (decided by the session).
    ConnectTimeout,
    /// The peer closed the socket, with its close code when it sent one.
    ClosedByPeer {
        /// The WebSocket close code.
        code: Option<u16>,
    },
    /// The peer sent a frame over the size limit.
    FrameTooLarge,
    /// No answer to a ping within the pong timeout (decided by the session).
    PongTimeout,
    /// Silence past the idle timeout (decided by the session).
    IdleTimeout,
    /// A reset, broken pipe or other network error.
    NetworkError,
    /// No sign of life within the probe after the application resumed or the network
    /// changed: a socket that died while the application was away (decided by the session).
    ResumeProbe,
    /// The application said the network path the socket used is gone.
    NetworkChanged,
    /// This process (or the system) has no file descriptor left for a socket (`EMFILE`,
    /// `ENFILE`): a local failure, not the relay's. Retried with backoff like any loss, never
    /// at once, so a process at its limit does not spin.
    OutOfFiles,
}

impl SocketLoss {
    /// A stable snake_case name, for logs and JSON lines.
    pub fn as_str(self) -> &'static str {
        match self {
            SocketLoss::ConnectionRefused => "connection_refused",
            SocketLoss::TlsRejected => "tls_rejected",
            SocketLoss::HandshakeFailed => "handshake_failed",
            SocketLoss::ConnectTimeout => "connect_timeout",
            SocketLoss::ClosedByPeer { .. } => "closed_by_peer",
            SocketLoss::FrameTooLarge => "frame_too_large",
            SocketLoss::PongTimeout => "pong_timeout",
            SocketLoss::IdleTimeout => "idle_timeout",
            SocketLoss::NetworkError => "network_error",
            SocketLoss::ResumeProbe => "resume_probe",
            SocketLoss::NetworkChanged => "network_changed",
            SocketLoss::OutOfFiles => "out_of_files",
        }
    }
}

/// What the application's platform says about its lifecycle, for a host that forwards its
/// signals as one value: scene phase or `NSWorkspace` sleep on Apple platforms,
/// `ConnectivityManager` on Android, `NWPathMonitor` for the network. Each session takes it
/// with `handle_lifecycle`, the same as calling `suspend`, `resume`, `network_changed` or
/// `set_online`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lifecycle {
    /// The application went to the background or the machine to sleep.
    Suspended,
    /// The application is in the foreground again.
    Resumed,
    /// The network path changed; `old_path_gone` when the interface the sockets used is
    /// gone (they are given up at once rather than probed).
    NetworkChanged {
        /// The old interface no longer exists.
        old_path_gone: bool,
    },
    /// The device has (`true`) or has lost (`false`) the network.
    Online(bool),
}

impl Lifecycle {
    /// A stable snake_case name, for logs and JSON lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Suspended => "suspended",
            Lifecycle::Resumed => "resumed",
            Lifecycle::NetworkChanged { .. } => "network_changed",
            Lifecycle::Online(true) => "online",
            Lifecycle::Online(false) => "offline",
        }
    }
}

/// How a silent connection is detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Never time out for silence.
    Off,
    /// After `ping_after` without inbound traffic, ping; if still nothing for
    /// `pong_timeout`, declare the socket dead (WebSocket).
    Ping {
        /// Silence before a ping.
        ping_after: Duration,
        /// Further silence before giving up on the socket.
        pong_timeout: Duration,
    },
    /// After `timeout` without any inbound bytes, declare the stream dead (SSE, where the
    /// client cannot ping and heartbeat comments are the only sign of life).
    Idle {
        /// Silence tolerated.
        timeout: Duration,
    },
}

/// Configuration of a [`Link`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// Delays between reconnect attempts.
    pub reconnect: BackoffPolicy,
    /// The reconnect counter resets only once a socket stayed up this long.
    pub stable_after: Duration,
    /// A socket that is not open after this long counts as a failed attempt.
    pub connect_timeout: Duration,
    /// The silence watchdog.
    pub liveness: Liveness,
    /// How long a socket has to show it is alive after the application resumes or the
    /// network changes (5 s): a WebSocket is pinged at once and declared dead without an
    /// answer by then. Zombie sockets after a suspension are found in this, not in
    /// `ping_after + pong_timeout`.
    pub probe_timeout: Duration,
    /// The most a reconnect waits after the network changes or comes back (1 s, uniform):
    /// enough to spread a fleet that got its network back at the same instant.
    pub network_jitter: Duration,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            reconnect: BackoffPolicy::reconnect(),
            stable_after: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            liveness: Liveness::Ping {
                ping_after: Duration::from_secs(30),
                pong_timeout: Duration::from_secs(20),
            },
            probe_timeout: Duration::from_secs(5),
            network_jitter: Duration::from_secs(1),
        }
    }
}

/// Where the link stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected and not trying to be (never connected, disconnected, or gave up).
    Idle,
    /// An attempt is due and waits for a connect permit: a pool paces how many handshakes
    /// run at once ([`Link::set_paced`]). Reported as connecting; no socket exists yet, so
    /// no connect timeout runs and no attempt is charged while it waits.
    Queued {
        /// Since when it waits.
        since: Instant,
    },
    /// A socket was requested and has not opened yet.
    Connecting {
        /// The socket's epoch.
        epoch: Epoch,
        /// When it was requested.
        since: Instant,
    },
    /// The socket is open.
    Open {
        /// The socket's epoch.
        epoch: Epoch,
        /// When it opened.
        opened_at: Instant,
    },
    /// Waiting to reconnect.
    Waiting {
        /// When the next attempt starts.
        until: Instant,
    },
}

/// What a timer or a close made the link do; the session turns it into transmits and events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkAction {
    /// Open a new socket with this epoch.
    Open(Epoch),
    /// Send a ping on the open socket.
    Ping,
    /// The socket is dead (silent, never opened, unproven after a resume, or on a network
    /// path that is gone): close it. A reconnect is scheduled at `reconnect_at`, or none if
    /// attempts are exhausted.
    Dead {
        /// When the next attempt starts.
        reconnect_at: Option<Instant>,
        /// Why the link gave it up.
        why: SocketLoss,
    },
}

/// One connection's lifecycle.
#[derive(Clone, Debug)]
pub struct Link {
    config: LinkConfig,
    state: LinkState,
    epoch: Epoch,
    backoff: Backoff,
    last_inbound: Instant,
    /// When the peer was last heard from (or the socket opened), unlike `last_inbound` never
    /// moved by a pause or a resume: the last instant the connection is known to have worked.
    heard_at: Instant,
    ping_sent_at: Option<Instant>,
    /// The driver is not reading the socket (backpressure): silence is not the peer's.
    reading_paused: bool,
    /// The application is suspended (since then): no deadline runs.
    suspended: Option<Instant>,
    /// The device has no network: no attempt is made, none is charged.
    offline: bool,
    /// A probe is out (after a resume or a network change): the socket must show life by
    /// then.
    probe_deadline: Option<Instant>,
    /// Every attempt waits in [`LinkState::Queued`] for [`Link::admit`].
    paced: bool,
}

impl Link {
    /// An idle link.
    #[must_use]
    pub fn new(config: LinkConfig) -> Self {
        Link {
            config,
            state: LinkState::Idle,
            epoch: Epoch(0),
            backoff: Backoff::new(config.reconnect),
            last_inbound: Instant::ZERO,
            heard_at: Instant::ZERO,
            ping_sent_at: None,
            reading_paused: false,
            suspended: None,
            offline: false,
            probe_deadline: None,
            paced: false,
        }
    }

    /// Make every attempt wait for a permit ([`Link::admit`]) in [`LinkState::Queued`]
    /// instead of opening a socket at once: the owner (a pool) paces its handshakes.
    pub fn set_paced(&mut self, paced: bool) {
        self.paced = paced;
    }

    /// Whether an attempt waits for [`Link::admit`].
    pub(crate) fn is_queued(&self) -> bool {
        matches!(self.state, LinkState::Queued { .. })
    }

    /// Whether a socket was requested and has not opened yet (a handshake in flight).
    pub(crate) fn is_connecting(&self) -> bool {
        matches!(self.state, LinkState::Connecting { .. })
    }

    /// The permit for a queued attempt: returns the epoch to open now, whose connect timeout
    /// starts now, or `None` if no attempt waits (or the device went offline meanwhile: then
    /// it waits for the network, as [`Link::connect`] does).
    pub fn admit(&mut self, now: Instant) -> Option<Epoch> {
        let LinkState::Queued { .. } = self.state else {
            return None;
        };
        if self.offline {
            self.state = LinkState::Waiting { until: now };
            return None;
        }
        Some(self.start_attempt(now))
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The current state.
    pub fn state(&self) -> LinkState {
        self.state
    }

    /// The epoch of the newest socket requested.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Hand out epochs after `past` only: a link taking over a slot whose earlier link used
    /// epochs up to `past`, so that input still in flight for those sockets is recognised
    /// as let go rather than taken for this link's own.
    pub(crate) fn start_after(&mut self, past: Epoch) {
        self.epoch = self.epoch.max(past);
    }

    /// Whether the socket is open.
    pub fn is_open(&self) -> bool {
        matches!(self.state, LinkState::Open { .. })
    }

    /// Whether the application wants to be connected (anything but `Idle`).
    pub(crate) fn wants_connection(&self) -> bool {
        self.state != LinkState::Idle
    }

    /// Reconnect attempts since the last stable connection.
    pub fn attempts(&self) -> u32 {
        self.backoff.attempts()
    }

    /// The reconnect backoff (policy in force, attempts).
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The reconnect backoff, e.g. to replace its base from an SSE `retry:` field.
    pub(crate) fn backoff_mut(&mut self) -> &mut Backoff {
        &mut self.backoff
    }

    /// Whether input tagged `epoch` concerns the live socket (`Ok(true)`) or one already let
    /// go (`Ok(false)`: ignore it). See [`SocketError`] for the rule.
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`] for an epoch never handed out.
    pub fn check_epoch(&self, epoch: Epoch) -> Result<bool, SocketError> {
        // The first socket is epoch 1: 0 is the "none yet" a fresh link starts from.
        if epoch == Epoch(0) || epoch > self.epoch {
            return Err(SocketError::UnknownEpoch(epoch));
        }
        Ok(match self.state {
            LinkState::Connecting { epoch: live, .. } | LinkState::Open { epoch: live, .. } => {
                live == epoch
            }
            LinkState::Idle | LinkState::Waiting { .. } | LinkState::Queued { .. } => false,
        })
    }

    /// [`Link::check_epoch`] for input that needs the socket open (frames, bytes, pongs).
    ///
    /// # Errors
    /// [`SocketError::UnknownEpoch`], or [`SocketError::NotOpen`] for the live epoch before
    /// its open was reported.
    pub(crate) fn check_open(&self, epoch: Epoch) -> Result<bool, SocketError> {
        if !self.check_epoch(epoch)? {
            return Ok(false);
        }
        if !self.is_open() {
            return Err(SocketError::NotOpen(epoch));
        }
        Ok(true)
    }

    /// The application wants a connection. Returns the epoch to open now, or `None` if the
    /// link is already connecting, open or waiting to reconnect, or (paced) waits for its
    /// permit.
    pub fn connect(&mut self, now: Instant) -> Option<Epoch> {
        if self.state != LinkState::Idle {
            return None;
        }
        if self.offline {
            // Wanted, but not attempted until the network is back.
            self.state = LinkState::Waiting { until: now };
            return None;
        }
        self.attempt(now)
    }

    /// The application (or a final peer answer) wants no connection. Cancels any pending
    /// reconnect and resets the backoff. Returns whether a socket must be closed.
    pub fn disconnect(&mut self) -> bool {
        let had_socket = matches!(
            self.state,
            LinkState::Connecting { .. } | LinkState::Open { .. }
        );
        self.state = LinkState::Idle;
        self.backoff.reset();
        self.ping_sent_at = None;
        had_socket
    }

    /// The socket requested last opened. Returns `false` (ignore it) if no socket was pending.
    pub fn on_open(&mut self, now: Instant) -> bool {
        let LinkState::Connecting { epoch, .. } = self.state else {
            return false;
        };
        self.state = LinkState::Open {
            epoch,
            opened_at: now,
        };
        self.last_inbound = now;
        self.heard_at = now;
        self.ping_sent_at = None;
        true
    }

    /// The socket closed or failed without the application asking. Schedules a reconnect no
    /// sooner than `min_delay` (SSE's `Retry-After`) and returns when, or `None` if the close
    /// was stale (no socket) or attempts are exhausted (the link goes idle).
    pub fn on_close(
        &mut self,
        now: Instant,
        min_delay: Duration,
        rng: &mut Rng,
    ) -> Option<Instant> {
        match self.state {
            LinkState::Open { opened_at, .. } => {
                self.backoff
                    .reset_if_stable(now, opened_at, self.config.stable_after);
            }
            LinkState::Connecting { .. } => {}
            LinkState::Idle | LinkState::Waiting { .. } | LinkState::Queued { .. } => return None,
        }
        self.ping_sent_at = None;
        self.probe_deadline = None;
        if self.offline {
            // No network: the failure is the device's, not charged, and no attempt is made
            // until it is back (`set_online`, which reconnects within the jitter).
            self.state = LinkState::Waiting { until: now };
            return Some(now);
        }
        let Some(delay) = self.backoff.next_delay(rng) else {
            self.state = LinkState::Idle;
            return None;
        };
        let until = now.saturating_add(delay.max(min_delay));
        self.state = LinkState::Waiting { until };
        Some(until)
    }

    /// Inbound traffic arrived: the peer is alive.
    pub(crate) fn on_inbound(&mut self, now: Instant) {
        self.last_inbound = self.last_inbound.max(now);
        self.heard_at = self.heard_at.max(now);
        self.ping_sent_at = None;
        self.probe_deadline = None;
    }

    /// The driver stopped (`paused`) or resumed reading the socket, e.g. because the
    /// application's channels are full. While paused the silence watchdog is suspended —
    /// unread frames may be waiting in the socket, and the silence would be the driver's,
    /// not the peer's. Resuming restarts the silence clock at `now`. Connect timeouts and
    /// reconnect delays are not affected.
    pub(crate) fn set_reading_paused(&mut self, now: Instant, paused: bool) {
        if self.reading_paused && !paused {
            self.last_inbound = self.last_inbound.max(now);
            self.ping_sent_at = None;
        }
        self.reading_paused = paused;
    }

    // ----- the application's lifecycle --------------------------------------------------------

    /// The application is suspended (backgrounded, the laptop asleep): from `now` no
    /// deadline runs, so nothing that passes meanwhile is charged to the peer or fires in a
    /// burst on resume. Idempotent.
    pub fn suspend(&mut self, now: Instant) {
        self.suspended.get_or_insert(now);
    }

    /// When the peer was last heard from on this link (or its socket opened): the last instant
    /// the connection is known to have worked. A socket found dead later may have died any
    /// time after it, so a catch-up anchors there.
    pub fn heard_at(&self) -> Instant {
        self.heard_at
    }

    /// Whether the application is suspended.
    pub(crate) fn is_suspended(&self) -> bool {
        self.suspended.is_some()
    }

    /// The application resumed. The time it was away is not the peer's silence: the silence
    /// clock and a pending connect restart at `now`; a reconnect that fell due meanwhile is
    /// due now (once). An open socket may have died meanwhile (a zombie): it is probed, and
    /// [`LinkAction::Ping`] is returned for a WebSocket, which is declared dead if nothing
    /// arrives within `probe_timeout`. An SSE stream (`Liveness::Idle`) keeps its idle
    /// watchdog, restarted at `now`. Returns the suspension's length with the action: the
    /// session moves its own deadlines by it. Safe without a suspend (a probe all the same).
    pub fn resume(&mut self, now: Instant) -> (Duration, Option<LinkAction>) {
        let away = self
            .suspended
            .take()
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        match &mut self.state {
            LinkState::Connecting { since, .. } => *since = now,
            LinkState::Open { .. } => self.last_inbound = self.last_inbound.max(now),
            LinkState::Idle | LinkState::Waiting { .. } | LinkState::Queued { .. } => {}
        }
        (away, self.probe(now))
    }

    /// The network path changed (Wi-Fi to cellular, a VPN). Failures so far were the old
    /// network's: the reconnect backoff is reset, and a reconnect that waits goes within
    /// `network_jitter`. An open socket is probed ([`Link::resume`]), or with `old_path_gone`
    /// declared dead at once and reconnected within the jitter; a connect in flight on the
    /// old path is abandoned for a new one. The server's own answers (gate windows, learned
    /// caps) are the session's and stay.
    pub fn network_changed(
        &mut self,
        now: Instant,
        old_path_gone: bool,
        rng: &mut Rng,
    ) -> Option<LinkAction> {
        self.backoff.reset();
        match self.state {
            // A queued attempt keeps its place: it has no socket on the old path.
            LinkState::Idle | LinkState::Queued { .. } => None,
            LinkState::Waiting { .. } => {
                self.state = LinkState::Waiting {
                    until: self.jittered(now, rng),
                };
                None
            }
            LinkState::Connecting { .. } => Some(self.restart_soon(now, rng)),
            LinkState::Open { .. } if old_path_gone => Some(self.restart_soon(now, rng)),
            LinkState::Open { .. } => self.probe(now),
        }
    }

    /// The device has (`online`) or has lost the network. Offline, no attempt is made and
    /// none is charged; an open socket is left to its watchdog (it may be local). Back
    /// online, a waiting reconnect goes within `network_jitter`, with the backoff reset.
    /// Idempotent.
    pub fn set_online(&mut self, now: Instant, online: bool, rng: &mut Rng) {
        let was_offline = self.offline;
        self.offline = !online;
        if !(was_offline && online) {
            return;
        }
        self.backoff.reset();
        if let LinkState::Waiting { .. } = self.state {
            self.state = LinkState::Waiting {
                until: self.jittered(now, rng),
            };
        }
    }

    /// Probe an open socket: a ping now (WebSocket) and a short deadline.
    fn probe(&mut self, now: Instant) -> Option<LinkAction> {
        let LinkState::Open { .. } = self.state else {
            return None;
        };
        match self.config.liveness {
            Liveness::Ping { .. } => {
                self.probe_deadline = Some(now.saturating_add(self.config.probe_timeout));
                self.ping_sent_at = Some(now);
                Some(LinkAction::Ping)
            }
            Liveness::Idle { .. } | Liveness::Off => None,
        }
    }

    /// Give up the socket or connect in flight now and reconnect within the jitter, no
    /// attempt charged.
    fn restart_soon(&mut self, now: Instant, rng: &mut Rng) -> LinkAction {
        self.ping_sent_at = None;
        self.probe_deadline = None;
        let until = self.jittered(now, rng);
        self.state = LinkState::Waiting { until };
        LinkAction::Dead {
            reconnect_at: Some(until),
            why: SocketLoss::NetworkChanged,
        }
    }

    fn jittered(&self, now: Instant, rng: &mut Rng) -> Instant {
        let jitter = self.config.network_jitter.as_secs_f64() * rng.unit();
        now.saturating_add(Duration::from_secs_f64(jitter))
    }

    /// The next instant [`Link::handle_timeout`] has work to do.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.poll_wake().map(|(at, _)| at)
    }

    /// [`Link::poll_timeout`] with what it is for.
    #[must_use]
    pub fn poll_wake(&self) -> Option<(Instant, Wake)> {
        if self.suspended.is_some() {
            return None;
        }
        match self.state {
            // A queued attempt has no deadline of its own: its permit comes from the owner.
            LinkState::Idle | LinkState::Queued { .. } => None,
            LinkState::Waiting { .. } if self.offline => None,
            LinkState::Waiting { until } => Some((until, Wake::Reconnect)),
            LinkState::Connecting { since, .. } => Some((
                since.saturating_add(self.config.connect_timeout),
                Wake::ConnectTimeout,
            )),
            LinkState::Open { .. } => self.watchdog_deadline(),
        }
    }

    /// Act on any deadline that has passed at `now`.
    pub fn handle_timeout(&mut self, now: Instant, rng: &mut Rng) -> Option<LinkAction> {
        let deadline = self.poll_timeout()?;
        if now < deadline {
            return None;
        }
        match self.state {
            LinkState::Idle | LinkState::Queued { .. } => None,
            LinkState::Waiting { .. } => self.attempt(now).map(LinkAction::Open),
            LinkState::Connecting { .. } => Some(self.die(now, rng, SocketLoss::ConnectTimeout)),
            LinkState::Open { .. } if self.probe_deadline.is_some_and(|d| now >= d) => {
                Some(self.die(now, rng, SocketLoss::ResumeProbe))
            }
            LinkState::Open { .. } => match self.config.liveness {
                Liveness::Ping { .. } if self.ping_sent_at.is_none() => {
                    self.ping_sent_at = Some(now);
                    Some(LinkAction::Ping)
                }
                Liveness::Off => None,
                Liveness::Ping { .. } => Some(self.die(now, rng, SocketLoss::PongTimeout)),
                Liveness::Idle { .. } => Some(self.die(now, rng, SocketLoss::IdleTimeout)),
            },
        }
    }

    /// Start an attempt now, or (paced) queue it for a permit.
    fn attempt(&mut self, now: Instant) -> Option<Epoch> {
        if self.paced {
            self.state = LinkState::Queued { since: now };
            return None;
        }
        Some(self.start_attempt(now))
    }

    fn start_attempt(&mut self, now: Instant) -> Epoch {
        self.epoch = Epoch(self.epoch.0.wrapping_add(1));
        self.state = LinkState::Connecting {
            epoch: self.epoch,
            since: now,
        };
        self.epoch
    }

    fn die(&mut self, now: Instant, rng: &mut Rng, why: SocketLoss) -> LinkAction {
        let reconnect_at = self.on_close(now, Duration::ZERO, rng);
        LinkAction::Dead { reconnect_at, why }
    }

    fn watchdog_deadline(&self) -> Option<(Instant, Wake)> {
        if let Some(probe) = self.probe_deadline {
            return Some((probe, Wake::Probe));
        }
        if self.reading_paused {
            return None;
        }
        match self.config.liveness {
            Liveness::Off => None,
            Liveness::Idle { timeout } => {
                Some((self.last_inbound.saturating_add(timeout), Wake::Idle))
            }
            Liveness::Ping {
                ping_after,
                pong_timeout,
            } => Some(match self.ping_sent_at {
                None => (self.last_inbound.saturating_add(ping_after), Wake::Ping),
                Some(sent) => (sent.saturating_add(pong_timeout), Wake::PongTimeout),
            }),
        }
    }
}

#[cfg(test)]
/// The link's side of paced connects (the pool's is checked by the testkit's `PoolSim`).
mod paced_tests {
    use std::time::Duration;

    use super::{Epoch, Link, LinkConfig, LinkState};
    use crate::rng::Rng;
    use crate::time::Instant;

    fn paced() -> Link {
        let mut link = Link::new(LinkConfig::default());
        link.set_paced(true);
        link
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO.saturating_add(Duration::from_millis(ms))
    }

    #[test]
    fn a_queued_attempt_has_no_deadline_and_its_connect_timeout_starts_at_admission() {
        let mut link = paced();
        assert_eq!(link.connect(at(0)), None);
        assert_eq!(link.state(), LinkState::Queued { since: at(0) });
        assert_eq!(link.poll_wake(), None, "no connect timeout while waiting");
        assert_eq!(link.epoch(), Epoch(0), "no socket asked for yet");
        let epoch = link.admit(at(60_000)).expect("admitted");
        assert_eq!(
            link.poll_timeout(),
            Some(at(60_000).saturating_add(LinkConfig::default().connect_timeout))
        );
        assert_eq!(link.admit(at(60_001)), None, "one admission per attempt");
        assert!(link.check_epoch(epoch).expect("handed out"));
    }

    #[test]
    fn offline_at_admission_waits_for_the_network_and_queues_again_once_back() {
        let mut rng = Rng::new(7);
        let mut link = paced();
        let _ = link.connect(at(0));
        link.set_online(at(10), false, &mut rng);
        assert_eq!(link.admit(at(20)), None, "no attempt offline");
        assert!(matches!(link.state(), LinkState::Waiting { .. }));
        assert_eq!(link.poll_wake(), None, "offline: nothing runs");
        link.set_online(at(30), true, &mut rng);
        let due = link.poll_timeout().expect("a reconnect within the jitter");
        assert_eq!(
            link.handle_timeout(due, &mut rng),
            None,
            "paced: queued, not opened"
        );
        assert_eq!(link.state(), LinkState::Queued { since: due });
    }

    #[test]
    fn a_network_change_or_a_resume_leaves_a_queued_attempt_in_line() {
        let mut rng = Rng::new(7);
        let mut link = paced();
        let _ = link.connect(at(0));
        assert_eq!(link.network_changed(at(5), true, &mut rng), None);
        link.suspend(at(6));
        assert_eq!(link.resume(at(9)), (Duration::from_millis(3), None));
        assert_eq!(link.state(), LinkState::Queued { since: at(0) });
        assert!(!link.disconnect(), "no socket to close");
        assert_eq!(link.state(), LinkState::Idle);
    }
}
