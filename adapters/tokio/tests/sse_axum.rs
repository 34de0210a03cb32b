//! tether-tokio's EventSource against an axum SSE server on 127.0.0.1.
//!
//! The server runs in the test's runtime, so tokio's clock is paused: reconnect delays,
//! `Retry-After` and the idle watchdog are asserted in virtual time.

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
use tether_tokio::sse::{CloseReason, DropReason, Event, FailReason};
use tether_tokio::{EventSource, EventSourceConfig};

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

#[derive(Default)]
struct Server {
    script: Vec<Reply>,
    /// Per request: (virtual time, Accept, Last-Event-ID).
    requests: Vec<(tokio::time::Instant, Option<String>, Option<String>)>,
}

type Shared = Arc<Mutex<Server>>;

async fn start(script: Vec<Reply>) -> (String, Shared) {
    let shared: Shared = Arc::new(Mutex::new(Server {
        script,
        ..Server::default()
    }));
    let app = Router::new()
        .route("/events", get(handler))
        .with_state(Arc::clone(&shared));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
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
        server.requests.push((
            tokio::time::Instant::now(),
            header("accept"),
            header("last-event-id"),
        ));
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

fn source(url: &str) -> EventSource {
    EventSource::connect(
        url,
        EventSourceConfig {
            seed: Some(3),
            ..EventSourceConfig::default()
        },
    )
    .unwrap()
}

async fn next(stream: &mut EventSource) -> Event {
    tokio::time::timeout(Duration::from_secs(600), stream.next())
        .await
        .expect("an event within 10 minutes")
        .expect("the stream goes on")
}

fn data(event: &Event) -> (&str, &str) {
    match event {
        Event::Message(m) => (m.id.as_str(), m.data.as_str()),
        other => panic!("not a message: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn messages_then_reconnect_with_last_event_id() {
    let (url, server) = start(vec![
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
    let mut events = source(&url);
    assert_eq!(next(&mut events).await, Event::Open);
    assert_eq!(data(&next(&mut events).await), ("1", "a"));
    assert_eq!(data(&next(&mut events).await), ("2", "b"));
    let Event::Reconnecting {
        why,
        attempt,
        delay,
    } = next(&mut events).await
    else {
        panic!()
    };
    assert_eq!((why, attempt), (DropReason::Eof, 1));
    assert!(delay >= Duration::from_millis(800) && delay <= Duration::from_millis(1200));
    assert!(matches!(next(&mut events).await, Event::Reconnected { .. }));
    assert_eq!(data(&next(&mut events).await), ("3", "c"));

    let requests = server.lock().unwrap().requests.clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].1.as_deref(), Some("text/event-stream"));
    assert_eq!(requests[0].2, None);
    assert_eq!(requests[1].2.as_deref(), Some("2"));
    assert!(requests[1].0 - requests[0].0 >= delay);
}

#[tokio::test(start_paused = true)]
async fn no_content_stops_for_good() {
    let (url, server) = start(vec![Reply::Status(204, None)]).await;
    let mut events = source(&url);
    assert_eq!(
        next(&mut events).await,
        Event::Closed {
            why: CloseReason::NoContent
        }
    );
    assert_eq!(events.next().await, None);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(server.lock().unwrap().requests.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn unavailable_with_retry_after_waits_at_least_that_long() {
    let (url, server) = start(vec![
        Reply::Status(503, Some("7")),
        Reply::Events {
            events: vec![("1", "x")],
            end: false,
            keep_alive: None,
        },
    ])
    .await;
    let mut events = source(&url);
    let Event::Reconnecting { why, delay, .. } = next(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::Status(503));
    assert!(delay >= Duration::from_secs(7), "{delay:?}");
    assert_eq!(next(&mut events).await, Event::Open);
    assert_eq!(data(&next(&mut events).await), ("1", "x"));
    let requests = server.lock().unwrap().requests.clone();
    assert!(requests[1].0 - requests[0].0 >= Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn wrong_content_type_fails_without_retrying() {
    let (url, server) = start(vec![Reply::Plain]).await;
    let mut events = source(&url);
    let Event::Failed {
        why: FailReason::ContentType(Some(content_type)),
    } = next(&mut events).await
    else {
        panic!()
    };
    assert!(content_type.starts_with("text/plain"));
    assert_eq!(events.next().await, None);
    assert_eq!(server.lock().unwrap().requests.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_a_quiet_stream_alive() {
    let (url, server) = start(vec![Reply::Events {
        events: vec![("1", "x")],
        end: false,
        keep_alive: Some(Duration::from_secs(30)),
    }])
    .await;
    let mut events = source(&url);
    assert_eq!(next(&mut events).await, Event::Open);
    assert_eq!(data(&next(&mut events).await), ("1", "x"));
    // Five minutes of nothing but comments: no idle timeout (90 s), no reconnect.
    let quiet = tokio::time::timeout(Duration::from_secs(300), events.next()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    assert_eq!(server.lock().unwrap().requests.len(), 1);
    assert!(events.last_event_id() == "1");
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_trips_the_idle_watchdog() {
    let (url, server) = start(vec![Reply::Events {
        events: vec![("1", "x")],
        end: false,
        keep_alive: None,
    }])
    .await;
    let mut events = source(&url);
    assert_eq!(next(&mut events).await, Event::Open);
    assert_eq!(data(&next(&mut events).await), ("1", "x"));
    let silent_since = tokio::time::Instant::now();
    let Event::Reconnecting { why, .. } = next(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::IdleTimeout);
    let waited = silent_since.elapsed();
    assert!(
        waited >= Duration::from_secs(90) && waited < Duration::from_secs(91),
        "{waited:?}"
    );
    assert!(matches!(next(&mut events).await, Event::Reconnected { .. }));
    let requests = server.lock().unwrap().requests.clone();
    assert_eq!(requests[1].2.as_deref(), Some("1"));
}

#[tokio::test(start_paused = true)]
async fn an_application_pause_is_not_server_silence() {
    let (url, server) = start(vec![Reply::Events {
        events: vec![("1", "x"), ("2", "y")],
        end: false,
        keep_alive: None,
    }])
    .await;
    let mut events = source(&url);
    assert_eq!(next(&mut events).await, Event::Open);
    assert_eq!(data(&next(&mut events).await), ("1", "x"));
    // The application looks away for longer than the idle timeout; the next event is
    // still there and the stream was not torn down.
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert_eq!(data(&next(&mut events).await), ("2", "y"));
    let resumed = tokio::time::Instant::now();
    let Event::Reconnecting { why, .. } = next(&mut events).await else {
        panic!()
    };
    assert_eq!(why, DropReason::IdleTimeout);
    assert!(resumed.elapsed() >= Duration::from_secs(90));
    assert_eq!(server.lock().unwrap().requests.len(), 1);
}
