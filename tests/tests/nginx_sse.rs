//! The SSE analysis's ingress scenario for real: tether-tokio's `EventSource` → nginx
//! (`proxy_buffering off`, a chosen `proxy_read_timeout`) → an axum SSE server on 127.0.0.1,
//! in real time with short timeouts. Reported as ignored, with the reason, when nginx is
//! missing (the testkit's `trials` harness), failed when `TETHER_REQUIRE_PEERS=1`.
//!
//! The server numbers every event it creates (`id: n`) and keeps them all, so a reconnect
//! with `Last-Event-ID: n` is answered with everything after `n`: a client that resumes
//! correctly receives every id exactly once.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{stream, StreamExt};
use tether_testkit::peers::{peer, Missing, Nginx};
use tether_tokio::sse::{DropReason, Event};
use tether_tokio::tether_core::SocketLoss;
use tether_tokio::{EventSource, EventSourceConfig};
use tokio::sync::watch;

/// The SSE server: a log of numbered events, a heartbeat interval, the requests it saw.
struct Server {
    /// Event `n` (1-based) is `log[n - 1]`.
    log: Mutex<Vec<String>>,
    /// The newest id, for streams waiting on new events.
    newest: watch::Sender<u64>,
    /// `Last-Event-ID` of every request (`None` when absent).
    requests: Mutex<Vec<Option<u64>>>,
    heartbeat: Option<Duration>,
}

impl Server {
    fn create(&self, n: usize) {
        let mut log = self.log.lock().unwrap();
        for _ in 0..n {
            let id = log.len() + 1;
            log.push(format!("event {id}"));
        }
        self.newest.send_replace(log.len() as u64);
    }

    fn requests(&self) -> Vec<Option<u64>> {
        self.requests.lock().unwrap().clone()
    }
}

async fn start_server(heartbeat: Option<Duration>) -> (SocketAddr, Arc<Server>) {
    let server = Arc::new(Server {
        log: Mutex::new(Vec::new()),
        newest: watch::channel(0).0,
        requests: Mutex::new(Vec::new()),
        heartbeat,
    });
    let app = Router::new()
        .route("/events", get(handler))
        .with_state(Arc::clone(&server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, server)
}

async fn handler(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    let last: Option<u64> = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    server.requests.lock().unwrap().push(last);
    let newest = server.newest.subscribe();
    let cursor = last.unwrap_or(0) + 1;
    let events = stream::unfold(
        (cursor, newest, Arc::clone(&server)),
        |(cursor, mut newest, server)| async move {
            // Everything after Last-Event-ID first, then each new event as it is created.
            while *newest.borrow_and_update() < cursor {
                newest.changed().await.ok()?;
            }
            let data = server.log.lock().unwrap()[cursor as usize - 1].clone();
            let event = SseEvent::default().id(cursor.to_string()).data(data);
            Some((Ok::<_, Infallible>(event), (cursor + 1, newest, server)))
        },
    );
    let sse = Sse::new(events);
    match server.heartbeat {
        Some(every) => sse
            .keep_alive(KeepAlive::new().interval(every))
            .into_response(),
        None => sse.into_response(),
    }
}

fn source(url: &str, idle_timeout: Duration, seed: u64) -> EventSource {
    let mut config = EventSourceConfig::default();
    config.seed = Some(seed);
    config.sse.reconnect = common::quick_reconnect(200, 800);
    // Each stream lives ~3 s here; a longer stable period lets the delays grow.
    config.sse.stable_after = Duration::from_secs(30);
    config.sse.idle_timeout = Some(idle_timeout);
    EventSource::connect(url, config).unwrap()
}

async fn next(events: &mut EventSource, within: Duration) -> Event {
    tokio::time::timeout(within, events.next())
        .await
        .unwrap_or_else(|_| panic!("no event within {within:?}"))
        .expect("the stream goes on")
}

async fn a_tight_proxy_read_timeout_cuts_the_stream_and_nothing_is_lost() -> Result<(), Missing> {
    let nginx = peer("nginx")?;
    // Heartbeats every 5 s cannot keep a 3 s proxy_read_timeout happy.
    let (upstream, server) = start_server(Some(Duration::from_secs(5))).await;
    let proxy = Nginx::start_sse_proxy(&nginx, upstream, Duration::from_secs(3))
        .await
        .unwrap();
    let mut events = source(&proxy.url("/events"), Duration::from_secs(20), 1);
    server.create(2);
    let mut received = Vec::new();
    let mut drops = Vec::new();
    // Three events every 3.5 s: the stream idles 3 s after each batch and nginx cuts it,
    // so some batches are created while the client is away. 4 cuts take ~14 s.
    let producer = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(3_500)).await;
                server.create(3);
            }
        })
    };
    let started = tokio::time::Instant::now();
    while drops.len() < 4 {
        let event = next(&mut events, Duration::from_secs(10)).await;
        match event {
            Event::Message(m) => received.push(m.id.parse::<u64>().unwrap()),
            Event::Reconnecting { why, attempt, at } => {
                drops.push((why, attempt, events.until(at)));
            }
            Event::Open | Event::Reconnected { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    producer.abort();
    // Catch up with the last events created.
    let newest = *server.newest.borrow();
    while received.last() != Some(&newest) {
        match next(&mut events, Duration::from_secs(10)).await {
            Event::Message(m) => received.push(m.id.parse().unwrap()),
            Event::Reconnecting { .. } | Event::Reconnected { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    eprintln!(
        "{} events, drops {drops:?}, {:?}",
        received.len(),
        started.elapsed()
    );
    // Every id once, in order.
    assert_eq!(received, (1..=newest).collect::<Vec<_>>());
    // At its read timeout nginx 1.22 closes the client connection without the terminating
    // zero-length chunk, so the client sees a truncated chunked body (a network error), not
    // a clean EOF. Either way it is a drop to reconnect from, with Last-Event-ID.
    for (i, &(why, attempt, delay)) in drops.iter().enumerate() {
        assert_eq!(
            why,
            DropReason::NetworkError(SocketLoss::NetworkError),
            "{drops:?}"
        );
        assert_eq!(attempt, i as u32 + 1);
        let ceiling =
            Duration::from_millis(200 * 2u64.pow(i as u32)).min(Duration::from_millis(800));
        assert!(
            delay >= ceiling.mul_f64(0.8) && delay <= ceiling.mul_f64(1.2),
            "attempt {attempt}: {delay:?} vs {ceiling:?}"
        );
    }
    // Jittered: the capped delays are not all the same number.
    assert_ne!(drops[2].2, drops[3].2);
    let requests = server.requests();
    assert_eq!(requests[0], None);
    assert!(requests[1..].iter().all(Option::is_some), "{requests:?}");
    assert!(
        proxy.error_log().contains("upstream timed out"),
        "{}",
        proxy.error_log()
    );
    Ok(())
}

async fn heartbeats_inside_the_proxy_read_timeout_keep_the_stream_up() -> Result<(), Missing> {
    let nginx = peer("nginx")?;
    let (upstream, server) = start_server(Some(Duration::from_secs(2))).await;
    let proxy = Nginx::start_sse_proxy(&nginx, upstream, Duration::from_secs(10))
        .await
        .unwrap();
    let mut events = source(&proxy.url("/events"), Duration::from_secs(6), 2);
    server.create(1);
    assert_eq!(next(&mut events, Duration::from_secs(5)).await, Event::Open);
    let Event::Message(first) = next(&mut events, Duration::from_secs(5)).await else {
        panic!()
    };
    assert_eq!(first.id, "1");
    // 12 s of heartbeats only: longer than the proxy's 10 s and the client's 6 s watchdog.
    let quiet = tokio::time::timeout(Duration::from_secs(12), events.next()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    server.create(1);
    let Event::Message(second) = next(&mut events, Duration::from_secs(5)).await else {
        panic!()
    };
    assert_eq!(second.id, "2");
    assert_eq!(server.requests(), vec![None]);
    Ok(())
}

async fn a_silent_server_behind_a_patient_proxy_trips_the_idle_watchdog() -> Result<(), Missing> {
    let nginx = peer("nginx")?;
    let (upstream, server) = start_server(None).await;
    let proxy = Nginx::start_sse_proxy(&nginx, upstream, Duration::from_secs(60))
        .await
        .unwrap();
    let mut events = source(&proxy.url("/events"), Duration::from_secs(2), 3);
    server.create(1);
    assert_eq!(next(&mut events, Duration::from_secs(5)).await, Event::Open);
    assert!(matches!(
        next(&mut events, Duration::from_secs(5)).await,
        Event::Message(_)
    ));
    let silent_since = tokio::time::Instant::now();
    let Event::Reconnecting { why, .. } = next(&mut events, Duration::from_secs(10)).await else {
        panic!()
    };
    let waited = silent_since.elapsed();
    assert_eq!(why, DropReason::IdleTimeout);
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    assert!(matches!(
        next(&mut events, Duration::from_secs(5)).await,
        Event::Reconnected { .. }
    ));
    assert_eq!(server.requests(), vec![None, Some(1)]);
    Ok(())
}

tether_testkit::tokio_main!(
    a_tight_proxy_read_timeout_cuts_the_stream_and_nothing_is_lost,
    heartbeats_inside_the_proxy_read_timeout_keep_the_stream_up,
    a_silent_server_behind_a_patient_proxy_trips_the_idle_watchdog,
);
