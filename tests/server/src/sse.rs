//! [`ScriptedSse`]: an SSE server on 127.0.0.1 that answers its n-th request with the n-th
//! [`Reply`] of a script (the last one repeats) and logs every request's method, headers and
//! body, so a test can drive a client through ended bodies, reconnects with `Last-Event-ID`,
//! 503 with `Retry-After`, 204, wrong content types, POSTs and refusals with a body.
//!
//! Time: requests are stamped with tokio's clock, so under a paused clock the gaps between
//! them are the client's delays exactly.

use std::convert::Infallible;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{stream, StreamExt};
use tokio::task::JoinHandle;

/// `id: 1\ndata: a\n\n` gzipped (`gzip.compress(..., mtime=0)`), the body of
/// [`Reply::Gzip`].
pub const GZIPPED_EVENT: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x4c, 0xb1, 0x52, 0x30, 0xe4,
    0x4a, 0x49, 0x2c, 0x49, 0xb4, 0x52, 0x48, 0xe4, 0xe2, 0x02, 0x00, 0x6d, 0xf2, 0xf2, 0x73, 0x0f,
    0x00, 0x00, 0x00,
];

/// One event of a [`Reply::Events`] body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// `id:`.
    pub id: String,
    /// `data:`.
    pub data: String,
    /// `event:`, when not the default `message`.
    pub event: Option<String>,
    /// `retry:`.
    pub retry: Option<Duration>,
}

impl Message {
    /// A message with this id and data.
    pub fn new(id: &str, data: &str) -> Self {
        Message {
            id: id.to_owned(),
            data: data.to_owned(),
            ..Message::default()
        }
    }
}

/// What the server does for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// 200 `text/event-stream` with these messages, then end the body (`end`) or hold it
    /// open, sending a comment every `keep_alive` when set.
    Events {
        /// The body's events, in order.
        messages: Vec<Message>,
        /// End the body after the messages instead of holding it open.
        end: bool,
        /// A heartbeat comment this often while the body is open.
        keep_alive: Option<Duration>,
    },
    /// This status with an empty body and, when set, this `Retry-After` value.
    Status(u16, Option<&'static str>),
    /// 200 `text/plain`: not a stream.
    Plain,
    /// This status with this `application/json` body (an API's error).
    StatusBody(u16, &'static str),
    /// This redirect status with this `Location`.
    Redirect(u16, &'static str),
    /// This redirect status to `http://HOST:PORT/PATH`: this server's port (from the request's
    /// `Host`) under another host name, so another origin that reaches the same server.
    RedirectHost(u16, &'static str, &'static str),
    /// 200 `text/event-stream` with `Content-Encoding: gzip` (whatever the request asked
    /// for) and a gzipped body ([`GZIPPED_EVENT`]), then the end: a misconfigured proxy.
    Gzip,
}

impl Reply {
    /// 200 with `(id, data)` messages and no heartbeat; `end` ends the body after them.
    pub fn events(messages: &[(&str, &str)], end: bool) -> Reply {
        Reply::Events {
            messages: messages
                .iter()
                .map(|(id, data)| Message::new(id, data))
                .collect(),
            end,
            keep_alive: None,
        }
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Request {
    /// When it arrived, on tokio's clock.
    pub at: std::time::Instant,
    /// Its headers, names in lower case, in the order they came.
    pub headers: Vec<(String, String)>,
    /// Its method.
    pub method: String,
    /// Its path (and query).
    pub path: String,
    /// The request target as it came: absolute (`http://host:port/path`) when a client sent
    /// it as to a forward proxy, else the path.
    pub target: String,
    /// Its body.
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An SSE server on 127.0.0.1 (random port) that follows a script. Stops when dropped.
#[derive(Debug)]
pub struct ScriptedSse {
    url: String,
    shared: Arc<Mutex<Script>>,
    serve: JoinHandle<()>,
}

#[derive(Debug)]
struct Script {
    replies: Vec<Reply>,
    requests: Vec<Request>,
}

impl ScriptedSse {
    /// Serve `replies` at `http://127.0.0.1:port/events`.
    ///
    /// # Errors
    /// When the listener cannot be bound.
    ///
    /// # Panics
    /// Outside a tokio runtime, or when `replies` is empty.
    pub async fn start(replies: Vec<Reply>) -> io::Result<ScriptedSse> {
        assert!(!replies.is_empty(), "a script needs at least one reply");
        let shared = Arc::new(Mutex::new(Script {
            replies,
            requests: Vec::new(),
        }));
        // Every path answers from the script, so a redirect can point anywhere on it.
        let app = Router::new()
            .route("/events", get(handler).post(handler))
            .fallback(handler)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/events", listener.local_addr()?);
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ScriptedSse { url, shared, serve })
    }

    /// `http://127.0.0.1:port/events`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared).requests.clone()
    }
}

impl Drop for ScriptedSse {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

fn lock(shared: &Mutex<Script>) -> MutexGuard<'_, Script> {
    // A test that panicked while holding the lock already failed; keep serving.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

async fn handler(
    State(shared): State<Arc<Mutex<Script>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = Request {
        method: method.as_str().to_owned(),
        path: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
        target: uri.to_string(),
        body: body.to_vec(),
        at: tokio::time::Instant::now().into_std(),
        headers: headers
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect(),
    };
    let reply = {
        let mut script = lock(&shared);
        let n = script.requests.len().min(script.replies.len() - 1);
        script.requests.push(request);
        script.replies[n].clone()
    };
    match reply {
        Reply::Events {
            messages,
            end,
            keep_alive,
        } => {
            let items = stream::iter(messages.into_iter().map(|m| {
                let mut event = SseEvent::default().id(m.id).data(m.data);
                if let Some(name) = m.event {
                    event = event.event(name);
                }
                if let Some(retry) = m.retry {
                    event = event.retry(retry);
                }
                Ok::<_, Infallible>(event)
            }));
            let body = if end {
                items.boxed()
            } else {
                items.chain(stream::pending()).boxed()
            };
            match keep_alive {
                Some(every) => Sse::new(body)
                    .keep_alive(KeepAlive::new().interval(every))
                    .into_response(),
                None => Sse::new(body).into_response(),
            }
        }
        Reply::Status(code, retry_after) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            match retry_after {
                Some(value) => (status, [("retry-after", value)]).into_response(),
                None => status.into_response(),
            }
        }
        Reply::Plain => "not a stream".into_response(),
        Reply::StatusBody(code, body) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, [("content-type", "application/json")], body).into_response()
        }
        Reply::Redirect(code, location) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, [("location", location)]).into_response()
        }
        Reply::RedirectHost(code, host, path) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let port = headers
                .get("host")
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.rsplit_once(':'))
                .map_or("80", |(_, port)| port)
                .to_owned();
            let location = format!("http://{host}:{port}{path}");
            (status, [("location", location)]).into_response()
        }
        Reply::Gzip => (
            [
                ("content-type", "text/event-stream"),
                ("content-encoding", "gzip"),
            ],
            GZIPPED_EVENT,
        )
            .into_response(),
    }
}
