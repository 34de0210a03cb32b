//! SSE scenarios against an axum SSE server on 127.0.0.1 that follows a script.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{stream, StreamExt};
use tether_core::link::SocketLoss;
use tether_core::sse::{CloseReason, DropReason, Event, FailReason, Unsendable};
use tether_driver::EventSourceConfig;

use crate::{within, Harness};

/// Reconnect base delay of [`config`] (the core's default is 1 s).
pub const RECONNECT_BASE: Duration = Duration::from_millis(100);
/// Idle watchdog of [`config`] (default 90 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_millis(300);

/// The scenarios' stream configuration: seed 3 and the core's defaults with short delays.
pub fn config() -> EventSourceConfig {
    let mut config = EventSourceConfig {
        seed: Some(3),
        ..EventSourceConfig::default()
    };
    config.sse.reconnect.base = RECONNECT_BASE;
    config.sse.idle_timeout = Some(IDLE_TIMEOUT);
    config
}

/// What the server does for one request.
#[derive(Clone)]
enum Reply {
    /// 200 with these `(id, data)` events, then end the body or keep it open.
    Events {
        events: Vec<(&'static str, &'static str)>,
        end: bool,
        keep_alive: Option<Duration>,
    },
    /// This status, with an optional `Retry-After`.
    Status(u16, Option<&'static str>),
    /// 200 with the wrong content type.
    Plain,
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Request {
    at: std::time::Instant,
    accept: Option<String>,
    last_event_id: Option<String>,
}

#[derive(Default)]
struct Server {
    script: Vec<Reply>,
    requests: Vec<Request>,
}

type Shared = Arc<Mutex<Server>>;

async fn start<H: Harness>(script: Vec<Reply>) -> (String, Shared) {
    let shared: Shared = Arc::new(Mutex::new(Server {
        script,
        ..Server::default()
    }));
    let app = Router::new()
        .route("/events", get(handler))
        .with_state(Arc::clone(&shared));
    let url = H::on_server(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/events", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    })
    .await;
    (url, shared)
}

async fn handler(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let reply = {
        let mut server = shared.lock().unwrap();
        let n = server.requests.len();
        server.requests.push(Request {
            at: tokio::time::Instant::now().into_std(),
            accept: header("accept"),
            last_event_id: header("last-event-id"),
        });
        server.script[n.min(server.script.len() - 1)].clone()
    };
    match reply {
        Reply::Events {
            events,
            end,
            keep_alive,
        } => {
            let items = stream::iter(
                events
                    .into_iter()
                    .map(|(id, data)| Ok::<_, Infallible>(SseEvent::default().id(id).data(data))),
            );
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
            let status = StatusCode::from_u16(code).unwrap();
            match retry_after {
                Some(value) => (status, [("retry-after", value)]).into_response(),
                None => status.into_response(),
            }
        }
        Reply::Plain => "not a stream".into_response(),
    }
}

fn requests(server: &Shared) -> Vec<Request> {
    server.lock().unwrap().requests.clone()
}

async fn next<H: Harness>(stream: &mut H::Sse) -> Event {
    within::<H, _>(Duration::from_secs(20), stream.next())
        .await
        .expect("an event within 20 s")
        .expect("the stream goes on")
}

fn data(event: &Event) -> (&str, &str) {
    match event {
        Event::Message(m) => (m.id.as_str(), m.data.as_str()),
        other => panic!("not a message: {other:?}"),
    }
}

/// Messages, an ended body, a reconnect that carries `Last-Event-ID`, more messages.
pub async fn messages_then_reconnect_with_last_event_id<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::Events {
            events: vec![("1", "a"), ("2", "b")],
            end: true,
            keep_alive: None,
        },
        Reply::Events {
            events: vec![("3", "c")],
            end: false,
            keep_alive: None,
        },
    ])
    .await;
    let mut events = H::event_source(&url, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    assert_eq!(data(&next::<H>(&mut events).await), ("2", "b"));
    // The drop happens between these two readings of the clock.
    let before = H::sse_now(&events);
    let Event::Reconnecting { why, attempt, at } = next::<H>(&mut events).await else {
        panic!()
    };
    let after = H::sse_now(&events);
    assert_eq!((why, attempt), (DropReason::Eof, 1));
    assert!(at - before >= RECONNECT_BASE / 2, "{:?}", at - before);
    assert!(at.saturating_duration_since(after) <= RECONNECT_BASE * 3 / 2);
    let delay = at.saturating_duration_since(after);
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnected { .. }
    ));
    assert_eq!(data(&next::<H>(&mut events).await), ("3", "c"));

    let requests = requests(&server);
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].accept.as_deref(), Some("text/event-stream"));
    assert_eq!(requests[0].last_event_id, None);
    assert_eq!(requests[1].last_event_id.as_deref(), Some("2"));
    assert!(requests[1].at - requests[0].at >= delay);
}

/// 204 No Content ends the stream for good.
pub async fn no_content_stops_for_good<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Status(204, None)]).await;
    let mut events = H::event_source(&url, config());
    assert_eq!(
        next::<H>(&mut events).await,
        Event::Closed {
            why: CloseReason::NoContent
        }
    );
    assert_eq!(events.next().await, None);
    // Many reconnect delays later: no second request.
    H::sleep(RECONNECT_BASE * 20).await;
    assert_eq!(requests(&server).len(), 1);
}

/// 503 with `Retry-After: 1` waits at least a second before the next request.
pub async fn unavailable_with_retry_after_waits_at_least_that_long<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::Status(503, Some("1")),
        Reply::Events {
            events: vec![("1", "x")],
            end: false,
            keep_alive: None,
        },
    ])
    .await;
    let mut events = H::event_source(&url, config());
    // Before the first request: the 503 comes later, and the wait counts from it.
    let before = H::sse_now(&events);
    let Event::Reconnecting { why, at, .. } = next::<H>(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::Status(503));
    assert!(at - before >= Duration::from_secs(1), "{:?}", at - before);
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "x"));
    let requests = requests(&server);
    assert!(requests[1].at - requests[0].at >= Duration::from_secs(1));
}

/// A 200 that is not `text/event-stream` fails without a retry.
pub async fn wrong_content_type_fails_without_retrying<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Plain]).await;
    let mut events = H::event_source(&url, config());
    let Event::Failed {
        why: FailReason::ContentType(Some(content_type)),
    } = next::<H>(&mut events).await
    else {
        panic!()
    };
    assert!(content_type.starts_with("text/plain"));
    assert_eq!(events.next().await, None);
    assert_eq!(requests(&server).len(), 1);
}

/// Comment heartbeats keep a stream with no events alive past the idle timeout.
pub async fn heartbeats_keep_a_quiet_stream_alive<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Events {
        events: vec![("1", "x")],
        end: false,
        keep_alive: Some(IDLE_TIMEOUT / 3),
    }])
    .await;
    let mut events = H::event_source(&url, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "x"));
    // Several idle timeouts of nothing but comments: no timeout, no reconnect.
    let quiet = within::<H, _>(IDLE_TIMEOUT * 4, events.next()).await;
    assert!(quiet.is_none(), "{quiet:?}");
    assert_eq!(requests(&server).len(), 1);
    assert_eq!(H::last_event_id(&events), "1");
}

/// A server that sends nothing at all is dropped after the idle timeout and re-requested.
pub async fn a_silent_server_trips_the_idle_watchdog<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Events {
        events: vec![("1", "x")],
        end: false,
        keep_alive: None,
    }])
    .await;
    let mut events = H::event_source(&url, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "x"));
    let silent_since = H::now();
    let Event::Reconnecting { why, .. } = next::<H>(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::IdleTimeout);
    // The silence began at the last bytes, a moment before the watch started.
    let waited = H::now() - silent_since;
    assert!(
        waited >= IDLE_TIMEOUT * 9 / 10 && waited < IDLE_TIMEOUT * 2,
        "{waited:?}"
    );
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnected { .. }
    ));
    let requests = requests(&server);
    assert_eq!(requests[1].last_event_id.as_deref(), Some("1"));
}

/// An application that does not read for longer than the idle timeout does not make the
/// server look silent.
pub async fn an_application_pause_is_not_server_silence<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Events {
        events: vec![("1", "x"), ("2", "y")],
        end: false,
        keep_alive: None,
    }])
    .await;
    let mut events = H::event_source(&url, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "x"));
    // The application looks away for longer than the idle timeout; the next event is
    // still there and the stream was not torn down.
    H::sleep(IDLE_TIMEOUT * 3).await;
    assert_eq!(data(&next::<H>(&mut events).await), ("2", "y"));
    let resumed = H::now();
    let Event::Reconnecting { why, .. } = next::<H>(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::IdleTimeout);
    assert!(H::now() - resumed >= IDLE_TIMEOUT * 9 / 10);
    assert_eq!(requests(&server).len(), 1);
}

/// An `id:` holding a control character (which no HTTP client puts in a header) is delivered
/// as sent, announced once, and the reconnect still reaches the server, resuming from the
/// last id a header can carry.
pub async fn an_id_a_header_cannot_carry_does_not_stop_reconnects<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::Events {
            events: vec![("1", "a"), ("2\u{1}x", "b")],
            end: true,
            keep_alive: None,
        },
        Reply::Events {
            events: vec![("3", "c")],
            end: false,
            keep_alive: None,
        },
    ])
    .await;
    let mut events = H::event_source(&url, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    assert_eq!(data(&next::<H>(&mut events).await), ("2\u{1}x", "b"));
    assert_eq!(
        next::<H>(&mut events).await,
        Event::UnsendableId {
            id: "2\u{1}x".into(),
            why: Unsendable::Byte { at: 1, byte: 1 }
        }
    );
    let Event::Reconnecting { why, .. } = next::<H>(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::Eof);
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnected { .. }
    ));
    assert_eq!(data(&next::<H>(&mut events).await), ("3", "c"));
    let requests = requests(&server);
    assert_eq!(requests.len(), 2, "the second request reached the server");
    assert_eq!(requests[1].last_event_id.as_deref(), Some("1"));
    assert_eq!(requests[1].accept.as_deref(), Some("text/event-stream"));
    assert_eq!(H::last_event_id(&events), "3");
}

/// A port nobody listens on: every attempt is reported as a refused connection and retried.
pub async fn a_refused_port_is_reported_as_connection_refused<H: Harness>() {
    let url = H::on_server(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/events", listener.local_addr().unwrap());
        drop(listener);
        url
    })
    .await;
    let mut events = H::event_source(&url, config());
    for expected in 1..=2 {
        let Event::Reconnecting { why, attempt, at } = next::<H>(&mut events).await else {
            panic!()
        };
        assert_eq!(
            (why, attempt),
            (
                DropReason::NetworkError(SocketLoss::ConnectionRefused),
                expected
            )
        );
        assert!(at.saturating_duration_since(H::sse_now(&events)) <= RECONNECT_BASE * 3 * expected);
    }
}
