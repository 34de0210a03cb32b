//! SSE scenarios against tether-testserver's [`ScriptedSse`] on 127.0.0.1.

use std::time::Duration;

use futures_util::StreamExt;
use tether_core::link::SocketLoss;
use tether_core::sse::{
    CloseReason, DropReason, EndReason, Event, FailReason, Progress, RedirectRefusal, Request,
    Resume, Unsendable,
};
use tether_driver::{EventSourceConfig, ProxyConfig};
use tether_testkit::peers::{peer, Missing, Nginx, TestCa, Tinyproxy};
use tether_testserver::sse::{Message, Reply, ScriptedSse};

use crate::{within, Harness};

/// Reconnect base delay of [`config`] (the core's default is 1 s).
pub const RECONNECT_BASE: Duration = Duration::from_millis(100);
/// Idle watchdog of [`config`] (default 90 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_millis(300);

/// The scenarios' stream configuration: seed 3 and the core's defaults with short delays.
pub fn config() -> EventSourceConfig {
    let mut config = EventSourceConfig::default();
    config.seed = Some(3);
    config.sse.reconnect.base = RECONNECT_BASE;
    config.sse.idle_timeout = Some(IDLE_TIMEOUT);
    config
}

/// Start `script` on the harness's server runtime; the server stops when dropped.
async fn start<H: Harness>(script: Vec<Reply>) -> (String, ScriptedSse) {
    let server = H::on_server(ScriptedSse::start(script))
        .await
        .expect("an SSE server on 127.0.0.1");
    (server.url().to_owned(), server)
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
        Reply::events(&[("1", "a"), ("2", "b")], true),
        Reply::events(&[("3", "c")], false),
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

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("accept"), Some("text/event-stream"));
    assert_eq!(requests[0].header("last-event-id"), None);
    assert_eq!(requests[1].header("last-event-id"), Some("2"));
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
    assert_eq!(server.requests().len(), 1);
}

/// 503 with `Retry-After: 1` waits at least a second before the next request.
pub async fn unavailable_with_retry_after_waits_at_least_that_long<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::Status(503, Some("1")),
        Reply::events(&[("1", "x")], false),
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
    let requests = server.requests();
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
    assert_eq!(server.requests().len(), 1);
}

/// Comment heartbeats keep a stream with no events alive past the idle timeout.
pub async fn heartbeats_keep_a_quiet_stream_alive<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Events {
        messages: vec![Message::new("1", "x")],
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
    assert_eq!(server.requests().len(), 1);
    assert_eq!(H::last_event_id(&events), "1");
}

/// A server that sends nothing at all is dropped after the idle timeout and re-requested.
pub async fn a_silent_server_trips_the_idle_watchdog<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::events(&[("1", "x")], false)]).await;
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
    let requests = server.requests();
    assert_eq!(requests[1].header("last-event-id"), Some("1"));
}

/// An application that does not read for longer than the idle timeout does not make the
/// server look silent.
pub async fn an_application_pause_is_not_server_silence<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::events(&[("1", "x"), ("2", "y")], false)]).await;
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
    assert_eq!(server.requests().len(), 1);
}

/// An `id:` holding a control character (which no HTTP client puts in a header) is delivered
/// as sent, announced once, and the reconnect still reaches the server, resuming from the
/// last id a header can carry.
pub async fn an_id_a_header_cannot_carry_does_not_stop_reconnects<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::events(&[("1", "a"), ("2\u{1}x", "b")], true),
        Reply::events(&[("3", "c")], false),
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
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the second request reached the server");
    assert_eq!(requests[1].header("last-event-id"), Some("1"));
    assert_eq!(requests[1].header("accept"), Some("text/event-stream"));
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

/// An MCP-style POST: cut after two events, resumed as a GET with `Last-Event-ID` and the
/// session header, ended by `[DONE]`; the server sees one POST.
pub async fn a_post_resumes_as_a_get_and_ends_on_done<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::events(&[("1", "a"), ("2", "b")], true),
        Reply::events(&[("3", "c"), ("4", "[DONE]")], false),
    ])
    .await;
    let request = Request::post(r#"{"jsonrpc":"2.0"}"#)
        .header("content-type", "application/json")
        .header("mcp-session-id", "s1")
        .resume(Resume::LastEventId {
            method: "GET".to_owned(),
        })
        .end_on_data("[DONE]");
    let mut events = H::event_source_request(&url, request, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    assert_eq!(data(&next::<H>(&mut events).await), ("2", "b"));
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnecting {
            why: DropReason::Eof,
            ..
        }
    ));
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnected { .. }
    ));
    assert_eq!(data(&next::<H>(&mut events).await), ("3", "c"));
    assert_eq!(
        next::<H>(&mut events).await,
        Event::Ended {
            why: EndReason::Data,
            progress: Progress::new(3, "4"),
        }
    );
    assert_eq!(events.next().await, None, "the stream ends after Ended");
    let log = server.requests();
    let seen: Vec<_> = log
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.body.len(),
                r.header("mcp-session-id"),
                r.header("last-event-id"),
                r.header("content-type"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", 17, Some("s1"), None, Some("application/json")),
            ("GET", 0, Some("s1"), Some("2"), None),
        ]
    );
}

/// A generation POST whose body ends before `[DONE]` with `Resume::Never`: one terminal event
/// saying how far it got, and one POST.
pub async fn a_cut_post_with_never_is_not_sent_again<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::events(&[("1", "a")], true)]).await;
    let request = Request::post("{}").end_on_data("[DONE]");
    let mut events = H::event_source_request(&url, request, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    assert_eq!(
        next::<H>(&mut events).await,
        Event::Failed {
            why: FailReason::Interrupted {
                why: DropReason::Eof,
                progress: Progress::new(1, "1"),
            }
        }
    );
    assert_eq!(events.next().await, None);
    assert_eq!(server.requests().len(), 1);
}

/// A stream whose token expires between attempts: the application's per-attempt builder
/// gives each request the token of its time, so the reconnect after a cut carries the new
/// one and the expired one is never sent again (Azure/fetch-event-source#67).
pub async fn each_attempt_carries_the_token_of_its_time<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::events(&[("1", "a")], true),
        Reply::events(&[("2", "b")], false),
    ])
    .await;
    let mut config = config();
    config.per_attempt = Some(tether_driver::PerAttempt::new(|info| {
        tether_driver::AttemptParts::headers(vec![(
            "authorization".to_owned(),
            format!("Bearer token-{}", info.number),
        )])
    }));
    let request = Request::get().header("authorization", "Bearer stale");
    let mut events = H::event_source_request(&url, request, config);
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnecting { .. }
    ));
    assert!(matches!(
        next::<H>(&mut events).await,
        Event::Reconnected { .. }
    ));
    assert_eq!(data(&next::<H>(&mut events).await), ("2", "b"));
    let log = server.requests();
    let tokens: Vec<Option<&str>> = log.iter().map(|r| r.header("authorization")).collect();
    assert_eq!(tokens, [Some("Bearer token-1"), Some("Bearer token-2")]);
}

/// A POST with no body says `Content-Length: 0` (servers answer 411 to one that says
/// nothing), once.
pub async fn an_empty_post_says_its_length<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::events(&[("1", "a")], false)]).await;
    let mut events = H::event_source_request(&url, Request::new("POST"), config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    let log = server.requests();
    let lengths: Vec<Vec<&str>> = log
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                .map(|(_, v)| v.as_str())
                .collect()
        })
        .collect();
    assert_eq!(lengths, [vec!["0"]]);
}

/// A POST answered 307: sent once more to the new place, with its body, and the stream opens
/// there. The HTTP client followed nothing by itself.
pub async fn a_307_sends_the_post_again_with_its_body<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::Redirect(307, "/moved"),
        Reply::events(&[("1", "a")], false),
    ])
    .await;
    let request = Request::post(r#"{"q":1}"#).header("content-type", "application/json");
    let mut events = H::event_source_request(&url, request, config());
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    let log = server.requests();
    let sent: Vec<(&str, &str, &[u8])> = log
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), r.body.as_slice()))
        .collect();
    assert_eq!(
        sent,
        [
            ("POST", "/events", br#"{"q":1}"#.as_slice()),
            ("POST", "/moved", br#"{"q":1}"#.as_slice())
        ]
    );
}

/// A POST answered 302 (a GET elsewhere, by `fetch`'s rules): a typed failure, one request.
pub async fn a_302_on_a_post_is_refused<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Redirect(302, "/elsewhere")]).await;
    let mut events = H::event_source_request(&url, Request::post("{}"), config());
    assert_eq!(
        next::<H>(&mut events).await,
        Event::Failed {
            why: FailReason::Redirect {
                status: 302,
                location: "/elsewhere".to_owned(),
                why: RedirectRefusal::MethodChange,
            }
        }
    );
    assert_eq!(events.next().await, None);
    assert_eq!(server.requests().len(), 1);
}

/// A 307 loop ends at the hop limit: the request and five hops, then a typed failure.
pub async fn a_redirect_loop_stops_at_the_limit<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Redirect(307, "/loop")]).await;
    let mut events = H::event_source_request(&url, Request::post("{}"), config());
    assert_eq!(
        next::<H>(&mut events).await,
        Event::Failed {
            why: FailReason::Redirect {
                status: 307,
                location: "/loop".to_owned(),
                why: RedirectRefusal::TooMany,
            }
        }
    );
    assert_eq!(server.requests().len(), 6);
}

/// A stream compressed although the request asked for `identity` is a typed failure, not
/// silence and not a reconnect loop.
pub async fn a_compressed_stream_is_a_typed_failure<H: Harness>() {
    let (url, server) = start::<H>(vec![Reply::Gzip]).await;
    let mut events = H::event_source(&url, config());
    assert_eq!(
        next::<H>(&mut events).await,
        Event::Failed {
            why: FailReason::ContentEncoding("gzip".to_owned())
        }
    );
    let log = server.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].header("accept-encoding"), Some("identity"));
}

/// A forward proxy (tinyproxy) from the configuration carries the stream: the server sees
/// the proxy's `Via`. A host `no_proxy` covers goes direct.
///
/// # Errors
/// [`Missing`] without tinyproxy.
pub async fn a_configured_proxy_carries_the_stream_and_no_proxy_is_honoured<H: Harness>(
) -> Result<(), Missing> {
    let binary = peer("tinyproxy")?;
    let proxy = H::on_server(async move { Tinyproxy::start(&binary).await })
        .await
        .expect("tinyproxy on 127.0.0.1");
    let (url, server) = start::<H>(vec![Reply::events(&[("1", "a")], false)]).await;
    for no_proxy in [None, Some("localhost, 127.0.0.0/8")] {
        let mut config = config();
        config.http.proxy = ProxyConfig::Url {
            url: proxy.url(),
            no_proxy: no_proxy.map(str::to_owned),
        };
        let mut events = H::event_source_request(&url, Request::get(), config);
        assert_eq!(next::<H>(&mut events).await, Event::Open, "{}", proxy.log());
        assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    }
    let log = server.requests();
    let via: Vec<bool> = log
        .iter()
        .map(|r| r.header("via").is_some_and(|v| v.contains("tinyproxy")))
        .collect();
    assert_eq!(via, [true, false], "{log:?}");
    Ok(())
}

/// An https:// stream through the proxy's `CONNECT` tunnel: refused as a TLS failure until
/// the test's CA is among the configured roots, then open end to end.
///
/// # Errors
/// [`Missing`] without tinyproxy, nginx or openssl.
pub async fn https_through_a_tunnel_trusts_the_configured_root<H: Harness>() -> Result<(), Missing>
{
    let (tinyproxy, nginx, openssl) = (peer("tinyproxy")?, peer("nginx")?, peer("openssl")?);
    let ca = std::sync::Arc::new(TestCa::new(&openssl).expect("a test CA"));
    let (url, server) = start::<H>(vec![Reply::events(&[("1", "a")], false)]).await;
    let upstream = url
        .trim_start_matches("http://")
        .trim_end_matches("/events")
        .parse()
        .expect("the server's address");
    let front_ca = std::sync::Arc::clone(&ca);
    let front = H::on_server(async move {
        let read_timeout = Duration::from_secs(60);
        Nginx::start_tls_sse_proxy(&nginx, upstream, read_timeout, &front_ca).await
    })
    .await
    .expect("nginx with TLS");
    let proxy = H::on_server(async move { Tinyproxy::start(&tinyproxy).await })
        .await
        .expect("tinyproxy");
    let https = front.https_url("/events");
    let mut config = config();
    config.http.proxy = ProxyConfig::Url {
        url: proxy.url(),
        no_proxy: None,
    };
    let mut untrusted = H::event_source_request(&https, Request::get(), config.clone());
    assert!(
        matches!(
            next::<H>(&mut untrusted).await,
            Event::Reconnecting {
                why: DropReason::NetworkError(SocketLoss::TlsRejected),
                ..
            }
        ),
        "{}",
        proxy.log()
    );
    drop(untrusted);
    config.http.roots.extra_pem = vec![ca.root_pem().expect("the CA's PEM")];
    let mut events = H::event_source_request(&https, Request::get(), config);
    assert_eq!(next::<H>(&mut events).await, Event::Open, "{}", proxy.log());
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    assert!(proxy.log().contains("CONNECT"), "{}", proxy.log());
    assert_eq!(
        server.requests().len(),
        1,
        "the untrusted attempt never got through"
    );
    Ok(())
}

/// A redirect to another origin (127.0.0.1 to localhost) carries no credentials: neither the
/// request's `Authorization` nor the `Cookie` the per-attempt builder adds; other headers go
/// on.
pub async fn a_redirect_to_another_origin_carries_no_credentials<H: Harness>() {
    let (url, server) = start::<H>(vec![
        Reply::RedirectHost(307, "localhost", "/moved"),
        Reply::events(&[("1", "a")], false),
    ])
    .await;
    let mut config = config();
    config.per_attempt = Some(tether_driver::PerAttempt::new(|_| {
        tether_driver::AttemptParts::headers(vec![("cookie".to_owned(), "s=1".to_owned())])
    }));
    let request = Request::get()
        .header("authorization", "Bearer secret")
        .header("x-app", "yes");
    let mut events = H::event_source_request(&url, request, config);
    assert_eq!(next::<H>(&mut events).await, Event::Open);
    assert_eq!(data(&next::<H>(&mut events).await), ("1", "a"));
    let log = server.requests();
    // (path, authorization, cookie, x-app) of each request.
    type Seen<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let seen: Vec<Seen> = log
        .iter()
        .map(|r| {
            (
                r.path.as_str(),
                r.header("authorization"),
                r.header("cookie"),
                r.header("x-app"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("/events", Some("Bearer secret"), Some("s=1"), Some("yes")),
            ("/moved", None, None, Some("yes")),
        ]
    );
}
