//! [`TestRelay`]: the sans-IO [`RelayModel`] served over a real WebSocket on 127.0.0.1, with
//! scriptable faults: drop each socket after N frames, go silent without closing, refuse
//! new connections for a while, sever every connection, send raw text or binary frames (a
//! hostile relay, for bad-input tests). The model's own behaviours (REQ budgets with
//! `retry in Ns` hints, NOTICE-only refusals, subscription caps, NIP-42, scripted CLOSED/OK
//! answers, accept-then-drop) work as they do in tether-testkit's `Sim`.
//!
//! Time: the model is fed `tokio::time::Instant` since the server started, so under a
//! paused tokio clock its rate-limit windows and the log's timestamps are deterministic.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tether_core::Instant;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::relay_model::{RelayModel, StoredEvent};

/// A relay on 127.0.0.1 (random port) serving a [`RelayModel`]. Stops when dropped.
pub struct TestRelay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    secure: bool,
}

/// Everything a test can script or inspect, behind [`TestRelay::with`].
#[derive(Debug, Default)]
pub struct State {
    /// The relay's behaviour and its log of REQs.
    pub model: RelayModel,
    /// Faults of the transport around the model.
    pub faults: Faults,
    /// What happened on the wire.
    pub log: Log,
    conns: BTreeMap<u64, mpsc::UnboundedSender<Control>>,
    next_conn: u64,
    /// Whether connections are silent; one accepted after `set_silent` starts silent too.
    silent: bool,
    /// Connections accepted and not upgraded yet (NIP-11 GETs leave once identified).
    handshaking: usize,
    /// The most of them at once since the last [`TestRelay::take_peak_handshakes`].
    peak_handshaking: usize,
}

/// Transport faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Drop each connection (no close frame) after the server sent this many frames on it.
    pub drop_after_frames: Option<u64>,
    /// Refuse (accept and drop at once) new connections until this long after the start.
    pub refuse_until: Option<Duration>,
    /// Answer the NIP-11 GET with a head and then nothing, forever (the stalled document).
    pub info_stall: bool,
    /// Answer the NIP-11 GET with a 200 and a body of this many bytes of one JSON string
    /// that never closes (the huge document); bytes written before the client hung up are
    /// counted in [`Log::info_bytes_sent`].
    pub info_huge: Option<usize>,
}

/// What happened on the wire, with times since the server started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log {
    /// When each WebSocket connection was accepted.
    pub accepted: Vec<Duration>,
    /// When each refused connection attempt arrived.
    pub refused: Vec<Duration>,
    /// Every text frame received: (time, connection, text).
    pub received: Vec<(Duration, u64, String)>,
    /// Frames the server finished writing, over all connections.
    pub frames_sent: u64,
    /// Connections that ended, and when.
    pub closed: Vec<(Duration, u64)>,
    /// When each plain HTTP GET (the NIP-11 document) arrived.
    pub info_requests: Vec<Duration>,
    /// Body bytes of NIP-11 answers the client took before it hung up (or all of them).
    pub info_bytes_sent: u64,
}

impl Log {
    /// The received frames of one type (`"REQ"`, `"CLOSE"`, `"EVENT"`, `"AUTH"`, ...), in
    /// order: (time, connection, text).
    pub fn frames<'a>(
        &'a self,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a (Duration, u64, String)> + 'a {
        self.received
            .iter()
            .filter(move |(_, _, text)| frame_kind(text) == Some(kind))
    }
}

/// The type of a NIP-01 frame: its first element when that is a string without escapes
/// (`["REQ",...]` -> `REQ`); `None` for anything else.
pub fn frame_kind(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('[')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    let kind = &rest[..end];
    (!kind.contains('\\')).then_some(kind)
}

#[derive(Debug)]
enum Control {
    Send(String),
    Binary(Vec<u8>),
    Silent(bool),
    Drop,
}

struct Shared {
    state: Mutex<State>,
    origin: tokio::time::Instant,
}

impl TestRelay {
    /// Serve `model` on 127.0.0.1 at a random port.
    ///
    /// # Errors
    /// When the listener cannot be bound.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub async fn start(model: RelayModel) -> io::Result<TestRelay> {
        Self::serve(model, None).await
    }

    /// [`TestRelay::start`] over TLS (wss://) with the certificate chain `cert_pem` and its
    /// private key `key_pem` (no NIP-11 document is served over TLS).
    ///
    /// # Errors
    /// When the listener cannot be bound or the certificate or key does not load.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    #[cfg(feature = "tls")]
    pub async fn start_tls(
        model: RelayModel,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> io::Result<TestRelay> {
        Self::serve(model, Some(crate::tls::acceptor(cert_pem, key_pem)?)).await
    }

    async fn serve(model: RelayModel, tls: Option<Acceptor>) -> io::Result<TestRelay> {
        let secure = tls.is_some();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                model,
                ..State::default()
            }),
            origin: tokio::time::Instant::now(),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared), tls));
        Ok(TestRelay {
            addr,
            shared,
            accept,
            secure,
        })
    }

    /// `ws://127.0.0.1:port`, or `wss://localhost:port` over TLS (the name a test
    /// certificate is issued for).
    pub fn url(&self) -> String {
        if self.secure {
            format!("wss://localhost:{}", self.addr.port())
        } else {
            format!("ws://{}", self.addr)
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Time since the server started.
    pub fn elapsed(&self) -> Duration {
        self.shared.origin.elapsed()
    }

    /// Run `f` on the state (model, faults, log) under its lock.
    pub fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.shared.lock())
    }

    /// A copy of the wire log.
    pub fn log(&self) -> Log {
        self.shared.lock().log.clone()
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// The most WebSocket handshakes in flight at once since the last call (connections
    /// accepted and not upgraded yet; a NIP-11 GET leaves the count once its head is read):
    /// the client's connection storm as this server saw it (connections still in the
    /// kernel's accept queue are not counted). Starts the count again.
    pub fn take_peak_handshakes(&self) -> usize {
        let mut state = self.shared.lock();
        let peak = state.peak_handshaking;
        state.peak_handshaking = state.handshaking;
        peak
    }

    /// Store an event and push it to every live subscription it matches.
    pub fn store(&self, event: StoredEvent) {
        let mut state = self.shared.lock();
        for (conn, frame) in state.model.store(event) {
            if let Some(tx) = state.conns.get(&conn) {
                let _ = tx.send(Control::Send(frame));
            }
        }
    }

    /// Send a raw frame on every open connection.
    pub fn broadcast(&self, frame: &str) {
        for tx in self.shared.lock().conns.values() {
            let _ = tx.send(Control::Send(frame.to_owned()));
        }
    }

    /// Send a binary frame on every open connection (NIP-01 is text only: a hostile or
    /// confused relay's input for bad-input tests).
    pub fn broadcast_binary(&self, bytes: &[u8]) {
        for tx in self.shared.lock().conns.values() {
            let _ = tx.send(Control::Binary(bytes.to_vec()));
        }
    }

    /// Stop (or resume) answering without closing: no frames read, none written, no pongs,
    /// on every open connection and on those accepted later. (A client can see its socket
    /// open before the server has registered it; a per-connection switch would miss it.)
    pub fn set_silent(&self, silent: bool) {
        let mut state = self.shared.lock();
        state.silent = silent;
        for tx in state.conns.values() {
            let _ = tx.send(Control::Silent(silent));
        }
    }

    /// Drop every open connection abruptly (no close frame).
    pub fn sever_all(&self) {
        for tx in self.shared.lock().conns.values() {
            let _ = tx.send(Control::Drop);
        }
    }

    /// Refuse new connections for `d` from now.
    pub fn refuse_for(&self, d: Duration) {
        let until = self.elapsed() + d;
        self.with(|s| s.faults.refuse_until = Some(until));
    }
}

impl Drop for TestRelay {
    fn drop(&mut self) {
        self.accept.abort();
        self.sever_all();
    }
}

impl std::fmt::Debug for TestRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRelay")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock already failed; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// The TLS acceptor of a wss:// relay (nothing without the `tls` feature).
#[cfg(feature = "tls")]
type Acceptor = tokio_rustls::TlsAcceptor;
#[cfg(not(feature = "tls"))]
type Acceptor = std::convert::Infallible;

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tls: Option<Acceptor>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let now = shared.now();
        let refused = {
            let mut state = shared.lock();
            let refused =
                state.model.down || state.faults.refuse_until.is_some_and(|until| now < until);
            if refused {
                state.log.refused.push(now);
            }
            refused
        };
        if refused {
            drop(stream);
            continue;
        }
        let handshake = Handshake::start(&shared);
        let shared = Arc::clone(&shared);
        match &tls {
            None => tokio::spawn(serve(stream, shared, handshake)),
            #[cfg(feature = "tls")]
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let _ = stream.set_nodelay(true);
                    if let Ok(stream) = acceptor.accept(stream).await {
                        serve_ws(stream, shared, Some(handshake)).await;
                    }
                })
            }
            #[cfg(not(feature = "tls"))]
            Some(never) => match *never {},
        };
    }
}

/// A plain GET (no WebSocket upgrade) asks for the NIP-11 document: the model's
/// `info_document`, or 404. Returns whether the connection was that.
async fn serve_info(
    stream: &mut TcpStream,
    shared: &Shared,
    handshake: &mut Option<Handshake>,
) -> bool {
    use tokio::io::AsyncWriteExt;
    let mut head = [0u8; 4096];
    let mut len = 0;
    // Peek (the WebSocket handshake reads the head again) until the head is complete.
    for _ in 0..200 {
        len = stream.peek(&mut head).await.unwrap_or(0);
        if len == 0 || len == head.len() || head[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let text = String::from_utf8_lossy(&head[..len]).to_ascii_lowercase();
    if len == 0 || text.contains("upgrade: websocket") {
        return false;
    }
    // Not a WebSocket handshake: the peak counts those only.
    handshake.take();
    let (document, faults) = {
        let mut state = shared.lock();
        state.log.info_requests.push(shared.now());
        (state.model.info_document.clone(), state.faults)
    };
    if faults.info_stall {
        let _ = stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/nostr+json\r\ncontent-length: 100\r\n\r\n{")
            .await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        return true;
    }
    if let Some(total) = faults.info_huge {
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/nostr+json\r\ncontent-length: {total}\r\n\r\n"
        );
        if stream.write_all(head.as_bytes()).await.is_err() {
            return true;
        }
        let mut chunk = vec![b'a'; 16 * 1024];
        chunk[0] = b'"';
        let mut sent = 0;
        while sent < total {
            let n = chunk.len().min(total - sent);
            if stream.write_all(&chunk[..n]).await.is_err() {
                break;
            }
            chunk[0] = b'a';
            sent += n;
            shared.lock().log.info_bytes_sent += n as u64;
        }
        return true;
    }
    let response = match document {
        Some(body) => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/nostr+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
        None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            .to_owned(),
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    true
}

/// A connection's handshake in progress, counted until dropped.
struct Handshake(Arc<Shared>);

impl Handshake {
    fn start(shared: &Arc<Shared>) -> Self {
        let mut state = shared.lock();
        state.handshaking += 1;
        state.peak_handshaking = state.peak_handshaking.max(state.handshaking);
        Handshake(Arc::clone(shared))
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.0.lock().handshaking -= 1;
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>, handshake: Handshake) {
    let _ = stream.set_nodelay(true);
    let mut handshake = Some(handshake);
    if serve_info(&mut stream, &shared, &mut handshake).await {
        return;
    }
    serve_ws(stream, shared, handshake.take()).await;
}

/// Upgrade `stream` and serve the model on it; the handshake leaves the count once upgraded.
async fn serve_ws<S>(stream: S, shared: Arc<Shared>, handshake: Option<Handshake>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let upgraded = tokio_tungstenite::accept_async(stream).await;
    drop(handshake);
    let Ok(mut ws) = upgraded else {
        return;
    };
    let (tx, mut control) = mpsc::unbounded_channel();
    let (conn, greeting, drop_after, silent) = {
        let mut state = shared.lock();
        let conn = state.next_conn;
        state.next_conn += 1;
        state.conns.insert(conn, tx);
        state.log.accepted.push(shared.now());
        let greeting = state.model.accept(conn);
        (conn, greeting, state.model.drop_after, state.silent)
    };
    let mut conn_state = Conn { sent: 0, silent };
    let drop_timer = tokio::time::sleep(drop_after.unwrap_or(Duration::from_secs(86_400 * 365)));
    tokio::pin!(drop_timer);
    let mut alive = silent || conn_state.send_all(&mut ws, &shared, greeting).await;
    while alive {
        tokio::select! {
            biased;
            command = control.recv() => {
                alive = match command {
                    Some(Control::Send(frame)) if !conn_state.silent => {
                        conn_state.send_all(&mut ws, &shared, vec![frame]).await
                    }
                    Some(Control::Binary(bytes)) if !conn_state.silent => {
                        conn_state.send_binary(&mut ws, &shared, bytes).await
                    }
                    Some(Control::Send(_) | Control::Binary(_)) => true,
                    Some(Control::Silent(silent)) => {
                        conn_state.silent = silent;
                        true
                    }
                    Some(Control::Drop) | None => false,
                };
            }
            () = &mut drop_timer, if drop_after.is_some() => alive = false,
            message = ws.next(), if !conn_state.silent => {
                alive = match message {
                    Some(Ok(Message::Text(text))) => {
                        let replies = {
                            let mut state = shared.lock();
                            let now = shared.now();
                            state.log.received.push((now, conn, text.to_string()));
                            state.model.handle(Instant::from_origin(now), conn, text.as_str())
                        };
                        conn_state.send_all(&mut ws, &shared, replies).await
                    }
                    Some(Ok(Message::Close(_)) | Err(_)) | None => false,
                    Some(Ok(_)) => true,
                };
            }
        }
    }
    let mut state = shared.lock();
    state.conns.remove(&conn);
    state.model.drop_conn(conn);
    state.log.closed.push((shared.now(), conn));
}

struct Conn {
    sent: u64,
    silent: bool,
}

impl Conn {
    /// Send one binary frame; `false` when the connection should end.
    async fn send_binary<S>(&mut self, ws: &mut S, shared: &Shared, bytes: Vec<u8>) -> bool
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        if ws.send(Message::binary(bytes)).await.is_err() {
            return false;
        }
        self.sent += 1;
        shared.lock().log.frames_sent += 1;
        true
    }

    /// Send `frames` in order; `false` when the connection should end.
    async fn send_all<S>(&mut self, ws: &mut S, shared: &Shared, frames: Vec<String>) -> bool
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        for frame in frames {
            let limit = shared.lock().faults.drop_after_frames;
            if limit.is_some_and(|n| self.sent >= n) {
                return false;
            }
            if ws.send(Message::text(frame)).await.is_err() {
                return false;
            }
            self.sent += 1;
            shared.lock().log.frames_sent += 1;
        }
        let limit = shared.lock().faults.drop_after_frames;
        limit.is_none_or(|n| self.sent < n)
    }
}
