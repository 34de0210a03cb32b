//! SSE over POST against real servers (issue 18), in real time: the official MCP Python SDK
//! serving Streamable HTTP with an event store (`tests/peers/mcp_server.py`, revision
//! 2025-11-25), the same SDK at revision 2026-07-28 (`tests/peers/mcp2026_server.py`: no
//! session, listen streams, re-issue instead of resume), and an
//! OpenAI-style generation endpoint on sse-starlette (`tests/peers/llm_server.py`), each a
//! child process on 127.0.0.1. tether-tokio's `EventSource::connect_request` reaches them
//! through the testkit's `FaultProxy`, which cuts the stream mid-way.
//!
//! Reported as ignored, with the reason (the testkit's `trials` harness), when python3 (or
//! `$TETHER_PYTHON`) lacks the packages of `tests/peers/requirements.txt` or nginx is
//! missing; failed instead when `TETHER_REQUIRE_PEERS=1` (`.ci/run` installs them and sets
//! it).
//!
//! Each cut comes while the server is paused mid-generation (the servers take a pause as a
//! parameter), so the client has read everything sent before it and the counts asserted are
//! exact, not "at least".

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tether_testkit::peers::{peer, python, Missing, Nginx, PythonServer};
use tether_testkit::proxy::FaultProxy;
use tether_tokio::sse::{
    DropReason, EndReason, Event, FailReason, Message, Progress, Request, Resume,
};
use tether_tokio::tether_core::SocketLoss;
use tether_tokio::{AttemptParts, EventSource, EventSourceConfig, PerAttempt};

/// What `mcp_server.py` imports.
const MCP_MODULES: &[&str] = &["mcp", "sse_starlette", "starlette", "uvicorn"];
/// What `llm_server.py` imports.
const LLM_MODULES: &[&str] = &["sse_starlette", "starlette", "uvicorn"];

/// The newest MCP revision with the initialize handshake and sessions; from it on the SDK
/// primes each stream with an id-only event, so even a stream cut before its first message
/// could be resumed.
const MCP_VERSION: &str = "2025-11-25";

/// Longest wait for any one event; every step of these scenarios takes well under a second
/// plus the pauses the servers are asked for.
const STEP: Duration = Duration::from_secs(10);

async fn an_mcp_tool_call_cut_mid_stream_resumes_with_get_and_last_event_id() -> Result<(), Missing>
{
    let python = python(MCP_MODULES)?;
    let server = PythonServer::start(&python, "mcp_server.py").await.unwrap();
    let http = reqwest::Client::new();
    let session = mcp_initialize(&http, &server.url("/mcp")).await;

    // The tool reports 1..10. It pauses 1.5 s after 3 (the cut comes here) and again after
    // 7. The resume GET goes out 2-3 s after the cut, so 4..7 were produced while the client
    // was away and come from the event store, and 8..10 and the result arrive live on the
    // resumed stream. A machine slow enough to shift that only moves events from one group
    // to the other: what is asserted holds either way. (Landing the GET in a pause also keeps
    // clear of a gap the SDK has between the end of a replay and the live tail, where an
    // event produced at that instant is stored but not sent.)
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    let call = count_call(&session, r#"{"to":10,"pause_after":[3,7],"pause":1.5}"#);
    let mut config = EventSourceConfig::default();
    config.seed = Some(18);
    config.sse.reconnect = common::quick_reconnect(2_500, 5_000);
    let url = format!("http://{}/mcp", proxy.addr());
    let mut events = EventSource::connect_request(&url, call, config).unwrap();

    let started = tokio::time::Instant::now();
    let mut heard = Vec::new();
    while progress_values(&heard).len() < 3 {
        heard.push(next(&mut events, &server).await);
    }
    proxy.sever_all();
    while !heard.iter().any(|e| rpc(e).is_some_and(|v| v["id"] == 2)) {
        heard.push(next(&mut events, &server).await);
    }
    eprintln!("tools/call answered after {:?}", started.elapsed());

    // Every notification once, in order, then the result: nothing lost in the cut, nothing
    // replayed twice. Ids are the event store's `{stream}:{n}` (stream = request id 2).
    let ids: Vec<&str> = messages(&heard)
        .filter(|m| !m.data.is_empty())
        .map(|m| m.id.as_str())
        .collect();
    let expected: Vec<String> = (1..=11).map(|n| format!("2:{n}")).collect();
    assert_eq!(ids, expected, "{heard:#?}");
    assert_eq!(progress_values(&heard), (1..=10).collect::<Vec<_>>());
    let result = heard.iter().filter_map(rpc).find(|v| v["id"] == 2);
    assert_eq!(
        result.as_ref().map(|v| &v["result"]["content"][0]["text"]),
        Some(&Value::from("counted to 10")),
        "{result:?}"
    );
    // The SDK's priming events (id, empty data) open the POST stream and the resumed one; a
    // client dispatches them as empty messages and skips them.
    let primings: Vec<&str> = messages(&heard)
        .filter(|m| m.data.is_empty())
        .map(|m| m.id.as_str())
        .collect();
    assert_eq!(primings.len(), 2, "{primings:?}");
    assert_eq!(primings[0], "2:0:p2");
    // The resumed stream replays what was stored, primes itself after the last of that
    // (`2:{n}:p3`), then carries the rest live: its priming event follows message n.
    let all: Vec<&Message> = messages(&heard).collect();
    let at = all.iter().position(|m| m.id.ends_with(":p3")).unwrap();
    let replayed_up_to = &all[at - 1].id;
    assert_eq!(all[at].id, format!("{replayed_up_to}:p3"), "{primings:?}");
    eprintln!("replayed 2:4..={replayed_up_to}, the rest live");

    // One drop (the proxy closed the connection mid-body), one resume, no failure.
    let others: Vec<&Event> = heard
        .iter()
        .filter(|e| !matches!(e, Event::Message(_)))
        .collect();
    assert_eq!(others.len(), 3, "{others:?}");
    assert_eq!(others[0], &Event::Open);
    assert!(
        matches!(
            others[1],
            Event::Reconnecting {
                why: DropReason::NetworkError(SocketLoss::NetworkError),
                attempt: 1,
                ..
            }
        ),
        "{others:?}"
    );
    assert!(matches!(others[2], Event::Reconnected { .. }), "{others:?}");

    // What the server saw: initialize (no session yet), the initialized notification, the
    // call, then one GET carrying the session and the id of the last event before the cut.
    // The POST was never sent again.
    let requests: Value = get_json(&http, &server.url("/requests")).await;
    let seen: Vec<(&str, bool, Option<&str>)> = requests
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap(),
                r["session"].as_bool().unwrap(),
                r["last_event_id"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", false, None),
            ("POST", true, None),
            ("POST", true, None),
            ("GET", true, Some("2:3")),
        ],
        "{}",
        server.log()
    );
    assert_eq!(proxy.connections(), 2);
    assert_eq!(events.stats().requests, 2);
    Ok(())
}

async fn an_mcp_tool_call_checkpointed_mid_stream_resumes_in_a_new_process() -> Result<(), Missing>
{
    let python = python(MCP_MODULES)?;
    let server = PythonServer::start(&python, "mcp_server.py").await.unwrap();
    let http = reqwest::Client::new();
    let url = server.url("/mcp");
    let session = mcp_initialize(&http, &url).await;
    // The tool pauses 2 s after 3: the first process stops there, with its checkpoint, and
    // the second one resumes while the server is still paused or just after.
    let arguments = r#"{"to":6,"pause_after":[3],"pause":2.0}"#;
    let mut events =
        EventSource::connect_request(&url, count_call(&session, arguments), quick_config(27))
            .unwrap();
    let mut heard = Vec::new();
    while progress_values(&heard).len() < 3 {
        heard.push(next(&mut events, &server).await);
    }
    let bytes = events.checkpoint().to_json();
    let saved = String::from_utf8_lossy(&bytes).into_owned();
    assert!(
        !saved.contains("tools/call"),
        "no body in a checkpoint: {saved}"
    );
    drop(events);

    let checkpoint = tether_tokio::sse::SseCheckpoint::from_json(&bytes).unwrap();
    assert_eq!(checkpoint.resume_id(), "2:3");
    let mut events = EventSource::restore(
        &url,
        count_call(&session, arguments),
        quick_config(28),
        &checkpoint,
    )
    .unwrap();
    let mut resumed = Vec::new();
    while !resumed.iter().any(|e| rpc(e).is_some_and(|v| v["id"] == 2)) {
        resumed.push(next(&mut events, &server).await);
    }
    assert!(
        matches!(
            resumed.first(),
            Some(Event::Reconnecting {
                why: DropReason::Restarted,
                ..
            })
        ),
        "{resumed:?}"
    );
    heard.extend(resumed);
    assert_eq!(
        progress_values(&heard),
        (1..=6).collect::<Vec<_>>(),
        "each once"
    );
    let requests: Value = get_json(&http, &server.url("/requests")).await;
    let seen: Vec<(&str, Option<&str>)> = requests
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["method"].as_str().unwrap(), r["last_event_id"].as_str()))
        .collect();
    // initialize, initialized, the call; then resumes only. (A server that has not yet
    // noticed the first process's connection close may turn the first resume away; the
    // next carries the same id.)
    let posts = seen.iter().filter(|(m, _)| *m == "POST").count();
    assert_eq!(
        posts,
        3,
        "the call was not posted again: {seen:?}\n{}",
        server.log()
    );
    assert!(
        seen[3..].iter().all(|r| *r == ("GET", Some("2:3"))) && seen.len() > 3,
        "{seen:?}\n{}",
        server.log()
    );
    Ok(())
}

async fn an_mcp_resume_after_the_session_was_deleted_fails_as_session_gone() -> Result<(), Missing>
{
    let python = python(MCP_MODULES)?;
    let server = PythonServer::start(&python, "mcp_server.py").await.unwrap();
    let http = reqwest::Client::new();
    let session = mcp_initialize(&http, &server.url("/mcp")).await;
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    let call = count_call(&session, r#"{"to":5,"pause_after":[2],"pause":30}"#);
    let url = format!("http://{}/mcp", proxy.addr());
    let mut events = EventSource::connect_request(&url, call, quick_config(4)).unwrap();

    let mut heard = Vec::new();
    while progress_values(&heard).len() < 2 {
        heard.push(next(&mut events, &server).await);
    }
    proxy.sever_all();
    // The session ends while the client is away (as when a server restarts and forgets its
    // sessions): the resume GET is answered 404, which MCP says means "initialize again".
    let deleted = http
        .delete(server.url("/mcp"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", MCP_VERSION)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert!(matches!(
        next(&mut events, &server).await,
        Event::Reconnecting { attempt: 1, .. }
    ));
    // The priming event and two notifications got through.
    assert_eq!(
        next(&mut events, &server).await,
        Event::Failed {
            why: FailReason::SessionGone {
                progress: Progress::new(3, "2:2"),
            }
        }
    );
    assert_eq!(tokio::time::timeout(STEP, events.next()).await, Ok(None));
    let requests = get_json(&http, &server.url("/requests")).await;
    let last = requests.as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["method"], &last["last_event_id"]),
        (&Value::from("GET"), &Value::from("2:2")),
        "{requests}"
    );
    assert_eq!(proxy.connections(), 2);
    Ok(())
}

async fn an_llm_generation_cut_mid_way_is_reported_once_and_never_posted_again(
) -> Result<(), Missing> {
    let python = python(LLM_MODULES)?;
    let server = PythonServer::start(&python, "llm_server.py").await.unwrap();
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    // Eight words; the model stalls for 30 s after the third, and the proxy cuts it there.
    let request = generation(r#","pause_after":3,"pause":30"#).resume(Resume::Never);
    let url = format!("http://{}/v1/chat/completions", proxy.addr());
    let mut events = EventSource::connect_request(&url, request, quick_config(1)).unwrap();

    let started = tokio::time::Instant::now();
    assert_eq!(next(&mut events, &server).await, Event::Open);
    let mut words = String::new();
    for _ in 0..3 {
        let Event::Message(chunk) = next(&mut events, &server).await else {
            panic!("a chunk")
        };
        words += &content(&chunk);
    }
    assert_eq!(words, "word1 word2 word3 ");
    proxy.sever_all();

    // One terminal event that says how far it got (three chunks, no ids: OpenAI sends none),
    // then the stream is over.
    assert_eq!(
        next(&mut events, &server).await,
        Event::Failed {
            why: FailReason::Interrupted {
                why: DropReason::NetworkError(SocketLoss::NetworkError),
                progress: Progress::new(3, ""),
            }
        }
    );
    assert_eq!(
        tokio::time::timeout(STEP, events.next()).await,
        Ok(None),
        "nothing after the terminal event"
    );
    eprintln!("cut reported after {:?}", started.elapsed());
    assert_eq!(posts(&server).await, 1, "{}", server.log());
    assert_eq!(proxy.connections(), 1);
    assert_eq!(events.stats().requests, 1);
    Ok(())
}

async fn an_llm_generation_ends_on_done_without_an_error_or_a_reconnect() -> Result<(), Missing> {
    let python = python(LLM_MODULES)?;
    let server = PythonServer::start(&python, "llm_server.py").await.unwrap();
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    let url = format!("http://{}/v1/chat/completions", proxy.addr());
    let mut events = EventSource::connect_request(&url, generation(""), quick_config(2)).unwrap();

    assert_eq!(next(&mut events, &server).await, Event::Open);
    let mut chunks = Vec::new();
    let end = loop {
        match next(&mut events, &server).await {
            Event::Message(chunk) => chunks.push(chunk),
            other => break other,
        }
    };
    // Eight words and the `finish_reason: "stop"` chunk; `[DONE]` is the end, not a message.
    assert_eq!(
        end,
        Event::Ended {
            why: EndReason::Data,
            progress: Progress::new(9, ""),
        }
    );
    let text: String = chunks.iter().map(content).collect();
    assert_eq!(text, "word1 word2 word3 word4 word5 word6 word7 word8 ");
    let last: Value = serde_json::from_str(&chunks[8].data).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(tokio::time::timeout(STEP, events.next()).await, Ok(None));
    assert_eq!(posts(&server).await, 1, "{}", server.log());
    assert_eq!(proxy.connections(), 1);
    Ok(())
}

async fn an_llm_request_the_server_rejects_fails_with_its_error_body() -> Result<(), Missing> {
    let python = python(LLM_MODULES)?;
    let server = PythonServer::start(&python, "llm_server.py").await.unwrap();
    let request = Request::post(r#"{"model":"tether-test","stream":true}"#)
        .header("content-type", "application/json")
        .end_on_data("[DONE]");
    let url = server.url("/v1/chat/completions");
    let mut events = EventSource::connect_request(&url, request, quick_config(3)).unwrap();

    // A 400 on a POST is terminal, and carries what the server said so the app can show it.
    assert_eq!(
        next(&mut events, &server).await,
        Event::Failed {
            why: FailReason::Rejected {
                status: 400,
                body:
                    r#"{"error":{"message":"messages is required","type":"invalid_request_error"}}"#
                        .to_owned(),
                progress: Progress::default(),
            }
        }
    );
    assert_eq!(tokio::time::timeout(STEP, events.next()).await, Ok(None));
    assert_eq!(posts(&server).await, 1, "{}", server.log());
    Ok(())
}

/// The revision without sessions: every POST says its revision, method and name in headers.
const MCP_2026: &str = "2026-07-28";

async fn an_mcp_2026_listen_stream_cut_by_a_proxy_is_re_issued_with_a_new_id() -> Result<(), Missing>
{
    let python = python(MCP_MODULES)?;
    let server = PythonServer::start(&python, "mcp2026_server.py")
        .await
        .unwrap();
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    let url = format!("http://{}/mcp", proxy.addr());
    let mut config = quick_config(26);
    // MCP 2026-07-28: a lost stream's request is re-issued as a new request, with a new id.
    config.per_attempt = Some(PerAttempt::new(|info| {
        AttemptParts::headers(Vec::new()).body(listen_body(info.number))
    }));
    let listen = mcp_2026_post(listen_body(1), "subscriptions/listen", None)
        .resume(Resume::Reissue { max_failures: 3 });
    let mut events = EventSource::connect_request(&url, listen, config).unwrap();

    // Two ticks on each stream, then the proxy cuts it; twice.
    let mut heard = Vec::new();
    for cut in 1..=3 {
        let mut ticks = 0;
        while ticks < 2 {
            let event = next(&mut events, &server).await;
            if rpc(&event).is_some_and(|v| v["method"] == "notifications/tools/list_changed") {
                ticks += 1;
            }
            heard.push(event);
        }
        if cut < 3 {
            proxy.sever_all();
        }
    }
    let reissued: Vec<u32> = heard
        .iter()
        .filter_map(|e| match e {
            Event::Reissued { attempts, .. } => Some(*attempts),
            _ => None,
        })
        .collect();
    assert_eq!(reissued, [1, 1], "{heard:#?}");
    assert!(!heard.iter().any(|e| matches!(e, Event::Reconnected { .. })));
    // Each stream starts with the acknowledgement of its own subscription.
    let acks = heard
        .iter()
        .filter_map(rpc)
        .filter(|v| v["method"] == "notifications/subscriptions/acknowledged")
        .count();
    assert_eq!(acks, 3);

    // Three POSTs, each a new request (ids L-1, L-2, L-3) with the mirror headers, no session
    // and nothing to resume from.
    let log = get_json(&reqwest::Client::new(), &server.url("/log")).await;
    let seen: Vec<(&str, &str, &str, bool, Option<&str>)> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["event"] == "request")
        .map(|l| {
            (
                l["http"].as_str().unwrap(),
                l["id"].as_str().unwrap_or_default(),
                l["mcp_method"].as_str().unwrap_or_default(),
                l["session"].as_bool().unwrap(),
                l["last_event_id"].as_str(),
            )
        })
        .collect();
    let expected: Vec<(&str, String, &str, bool, Option<&str>)> = (1..=3)
        .map(|n| {
            (
                "POST",
                format!("L-{n}"),
                "subscriptions/listen",
                false,
                None,
            )
        })
        .collect();
    let expected: Vec<(&str, &str, &str, bool, Option<&str>)> = expected
        .iter()
        .map(|(h, id, m, s, l)| (*h, id.as_str(), *m, *s, *l))
        .collect();
    assert_eq!(seen, expected, "{}", server.log());
    assert_eq!(proxy.connections(), 3);
    Ok(())
}

async fn an_mcp_2026_tool_call_ends_on_its_response_and_a_cut_one_is_not_re_sent(
) -> Result<(), Missing> {
    let python = python(MCP_MODULES)?;
    let server = PythonServer::start(&python, "mcp2026_server.py")
        .await
        .unwrap();

    // Uncut: the progress, then the result as the last message, then a clean end.
    let call = mcp_2026_post(slow_count(1, 3), "tools/call", Some("slow_count"));
    let mut events =
        EventSource::connect_request(&server.url("/mcp"), call, quick_config(27)).unwrap();
    let mut heard = Vec::new();
    loop {
        let event = next(&mut events, &server).await;
        let ended = matches!(event, Event::Ended { .. });
        heard.push(event);
        if ended {
            break;
        }
    }
    assert_eq!(progress_values(&heard), [1, 2, 3]);
    let result = heard.iter().rev().nth(1).and_then(rpc).unwrap();
    assert_eq!(result["id"], 1);
    assert_eq!(result["result"]["content"][0]["text"], "counted to 3");
    assert_eq!(
        heard.last(),
        Some(&Event::Ended {
            why: EndReason::Response,
            progress: Progress::new(4, ""),
        })
    );
    assert_eq!(events.next().await, None);

    // Cut after three notifications: reported with its progress, never sent again.
    let proxy = FaultProxy::start(server.addr()).await.unwrap();
    let url = format!("http://{}/mcp", proxy.addr());
    let call = mcp_2026_post(slow_count(2, 10), "tools/call", Some("slow_count"));
    let mut events = EventSource::connect_request(&url, call, quick_config(28)).unwrap();
    let mut heard = Vec::new();
    while progress_values(&heard).len() < 3 {
        heard.push(next(&mut events, &server).await);
    }
    proxy.sever_all();
    let last = next(&mut events, &server).await;
    assert!(
        matches!(
            &last,
            Event::Failed {
                why: FailReason::Interrupted { progress, .. }
            } if progress.events == 3
        ),
        "{last:?}"
    );
    assert_eq!(events.next().await, None);
    let log = get_json(&reqwest::Client::new(), &server.url("/log")).await;
    let calls: Vec<i64> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["event"] == "request" && l["method"] == "tools/call")
        .map(|l| l["id"].as_i64().unwrap())
        .collect();
    assert_eq!(calls, [1, 2], "{}", server.log());
    assert_eq!(proxy.connections(), 1);
    Ok(())
}

async fn an_mcp_2026_listen_stream_behind_nginx_lives_on_the_servers_keep_alive_comments(
) -> Result<(), Missing> {
    let python = python(MCP_MODULES)?;
    let nginx = peer("nginx")?;
    // No notification for the whole test (a tick every 60 s): only the SDK's `: ping`
    // comments cross nginx, whose `proxy_read_timeout` is 1 s.
    for (keepalive, survives) in [("0.3", true), ("5", false)] {
        let args = ["--tick", "60", "--keepalive", keepalive];
        let server = PythonServer::start_with(&python, "mcp2026_server.py", &args)
            .await
            .unwrap();
        let front = Nginx::start_sse_proxy(&nginx, server.addr(), Duration::from_secs(1))
            .await
            .unwrap();
        let listen = mcp_2026_post(listen_body(1), "subscriptions/listen", None)
            .resume(Resume::Reissue { max_failures: 3 });
        let mut config = quick_config(29);
        config.per_attempt = Some(PerAttempt::new(|info| {
            AttemptParts::headers(Vec::new()).body(listen_body(info.number))
        }));
        let mut events = EventSource::connect_request(&front.url("/mcp"), listen, config).unwrap();
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        let mut these = Vec::new();
        while let Ok(Some(event)) = tokio::time::timeout_at(until, events.next()).await {
            these.push(event);
        }
        let reissued = these.iter().any(|e| matches!(e, Event::Reissued { .. }));
        assert_eq!(
            !reissued,
            survives,
            "keep-alive {keepalive}: {these:#?}\n{}",
            front.error_log()
        );
        if survives {
            assert!(events.stats().heartbeats >= 5, "{:?}", events.stats());
            assert_eq!(events.stats().requests, 1);
        }
    }
    Ok(())
}

/// A 2026-07-28 POST of `body`: the revision, method and (where there is one) name mirrored
/// in headers, and the call's JSON-RPC response ends the stream.
fn mcp_2026_post(body: String, method: &str, name: Option<&str>) -> Request {
    let mut request = Request::post(body)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MCP_2026)
        .header("mcp-method", method)
        .end_on_jsonrpc_response();
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    request
}

/// What every 2026-07-28 request carries in `params._meta` in place of a handshake.
const META_2026: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28",
    "io.modelcontextprotocol/clientCapabilities":{}"#;

/// `subscriptions/listen` for tool-list changes, sent for the `n`-th time (id `L-n`).
fn listen_body(n: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":"L-{n}","method":"subscriptions/listen","params":{{
            "notifications":{{"toolsListChanged":true}},"_meta":{{{META_2026}}}}}}}"#
    )
}

/// `tools/call` of `slow_count` to `n`, 200 ms apart, with progress, as request `id`.
fn slow_count(id: u64, n: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow_count",
            "arguments":{{"n":{n},"interval":0.2}},
            "_meta":{{{META_2026},"progressToken":"p{id}"}}}}}}"#
    )
}

/// MCP's handshake over plain HTTP: `initialize` (answered as an SSE stream), then
/// `notifications/initialized` (202). Returns the session id the server assigned.
async fn mcp_initialize(http: &reqwest::Client, url: &str) -> String {
    let initialize = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{
            "protocolVersion":"{MCP_VERSION}","capabilities":{{}},
            "clientInfo":{{"name":"tether-test","version":"0"}}}}}}"#
    );
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body = response.text().await.unwrap();
    assert!(
        body.contains(&format!(r#""protocolVersion":"{MCP_VERSION}""#)),
        "{body}"
    );
    let initialized = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", MCP_VERSION)
        .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(initialized.status(), 202);
    session
}

/// MCP's `tools/call` of the server's `count` tool with `arguments`, asking for progress,
/// in `session`; a lost stream is resumed with a GET and `Last-Event-ID`, as Streamable HTTP
/// specifies.
fn count_call(session: &str, arguments: &str) -> Request {
    Request::post(format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"count",
            "arguments":{arguments},"_meta":{{"progressToken":"count-1"}}}}}}"#
    ))
    .header("content-type", "application/json")
    .header("accept", "application/json, text/event-stream")
    .header("mcp-session-id", session)
    .header("mcp-protocol-version", MCP_VERSION)
    .resume(Resume::LastEventId {
        method: "GET".to_owned(),
    })
}

/// A chat-completion POST for eight words, ended by `[DONE]`; `extra` adds fields (it starts
/// with a comma).
fn generation(extra: &str) -> Request {
    Request::post(format!(
        r#"{{"model":"tether-test","stream":true,"max_tokens":8,
            "messages":[{{"role":"user","content":"count to eight"}}]{extra}}}"#
    ))
    .header("content-type", "application/json")
    .end_on_data("[DONE]")
}

/// Reconnect delays of a few hundred milliseconds, should anything reconnect (nothing here
/// may: a POST is never re-sent after its stream opened).
fn quick_config(seed: u64) -> EventSourceConfig {
    let mut config = EventSourceConfig::default();
    config.seed = Some(seed);
    config.sse.reconnect = common::quick_reconnect(200, 800);
    config
}

/// The next event within [`STEP`]; a timeout or the end of the stream fails the test with
/// the server's log.
async fn next(events: &mut EventSource, server: &PythonServer) -> Event {
    match tokio::time::timeout(STEP, events.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the stream ended\n{}", server.log()),
        Err(_) => panic!("no event within {STEP:?}\n{}", server.log()),
    }
}

fn messages(heard: &[Event]) -> impl Iterator<Item = &Message> {
    heard.iter().filter_map(|e| match e {
        Event::Message(m) => Some(m),
        _ => None,
    })
}

/// A message's JSON-RPC payload (`None` for other events and the SDK's empty priming events).
fn rpc(event: &Event) -> Option<Value> {
    match event {
        Event::Message(m) if !m.data.is_empty() => Some(serde_json::from_str(&m.data).unwrap()),
        _ => None,
    }
}

/// The `progress` of every `notifications/progress` heard, in order.
fn progress_values(heard: &[Event]) -> Vec<u64> {
    heard
        .iter()
        .filter_map(rpc)
        .filter(|v| v["method"] == "notifications/progress")
        .map(|v| v["params"]["progress"].as_u64().unwrap())
        .collect()
}

/// The text a chat-completion chunk adds (empty for the role-less final chunk).
fn content(chunk: &Message) -> String {
    let value: Value = serde_json::from_str(&chunk.data).unwrap();
    value["choices"][0]["delta"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let body = http.get(url).send().await.unwrap().text().await.unwrap();
    serde_json::from_str(&body).unwrap()
}

/// The POSTs `llm_server.py` has received.
async fn posts(server: &PythonServer) -> u64 {
    let counts = get_json(&reqwest::Client::new(), &server.url("/posts")).await;
    counts["posts"].as_u64().unwrap()
}

tether_testkit::tokio_main!(
    an_mcp_tool_call_cut_mid_stream_resumes_with_get_and_last_event_id,
    an_mcp_tool_call_checkpointed_mid_stream_resumes_in_a_new_process,
    an_mcp_resume_after_the_session_was_deleted_fails_as_session_gone,
    an_llm_generation_cut_mid_way_is_reported_once_and_never_posted_again,
    an_llm_generation_ends_on_done_without_an_error_or_a_reconnect,
    an_llm_request_the_server_rejects_fails_with_its_error_body,
    an_mcp_2026_listen_stream_cut_by_a_proxy_is_re_issued_with_a_new_id,
    an_mcp_2026_tool_call_ends_on_its_response_and_a_cut_one_is_not_re_sent,
    an_mcp_2026_listen_stream_behind_nginx_lives_on_the_servers_keep_alive_comments,
);
