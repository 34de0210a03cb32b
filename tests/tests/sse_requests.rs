//! SSE beyond GET (issue 18): a POST that must not be sent twice, resumed streams, clean ends,
//! re-issues, and redirects and content codings (issue 30). Transcripts against the simulator
//! (simulated time only) and the retry-safety property.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::link::{Epoch, SocketLoss};
use tether_core::sse::redirect::CREDENTIALS;
use tether_core::sse::{
    Attempt, DropReason, EndReason, Event, FailReason, Progress, RedirectRefusal, Request, Resume,
    SseConfig, Transmit,
};
use tether_testkit::sse_sim::{Reply, ServerConfig, SseSim};

const SEED: u64 = 0x5EED;
const ES: Option<&str> = Some("text/event-stream");

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A chat-completion style POST: JSON body, `[DONE]` at the end.
fn generation() -> Request {
    Request::post(r#"{"model":"m","stream":true}"#)
        .header("content-type", "application/json")
        .end_on_data("[DONE]")
}

/// An MCP Streamable HTTP call: resumed as a GET with the session header and Last-Event-ID.
fn mcp_call() -> Request {
    Request::post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#)
        .header("content-type", "application/json")
        .header("mcp-session-id", "s-1")
        .resume(Resume::LastEventId {
            method: "GET".to_owned(),
        })
        .end_on_data("[DONE]")
}

/// Six events a second apart from 1 s, `[DONE]` after the sixth, and a reset at 3.5 s (the
/// server is down for 100 ms): the stream is cut after three events.
fn cut_after_three() -> ServerConfig {
    ServerConfig {
        publish_at: [1, 2, 3, 5, 6, 7].map(secs).to_vec(),
        down: vec![(Duration::from_millis(3_500), Duration::from_millis(3_600))],
        done_after: Some(6),
        ..ServerConfig::default()
    }
}

fn ids(s: &SseSim) -> Vec<String> {
    s.heard(|e| match e {
        Event::Message(m) => Some(m.id.clone()),
        _ => None,
    })
}

fn last(s: &SseSim) -> Option<Event> {
    s.heard(|e| Some(e.clone())).pop()
}

fn methods(s: &SseSim) -> Vec<&str> {
    s.seen().iter().map(|r| r.method.as_str()).collect()
}

fn event_bytes(ids: std::ops::RangeInclusive<u64>) -> Vec<u8> {
    ids.flat_map(|n| format!("id: {n}\ndata: token {n}\n\n").into_bytes())
        .collect()
}

#[test]
fn s12_a_post_cut_after_three_events_with_never_ends_once_and_is_not_sent_again() {
    let mut s = SseSim::with_request(SseConfig::default(), generation(), SEED, cut_after_three());
    s.connect();
    s.run_for(secs(120));
    assert_eq!(methods(&s), ["POST"], "one request, never a second POST");
    assert_eq!(ids(&s), ["1", "2", "3"]);
    assert_eq!(
        last(&s),
        Some(Event::Failed {
            why: FailReason::Interrupted {
                why: DropReason::NetworkError(SocketLoss::NetworkError),
                progress: Progress::new(3, "3"),
            }
        })
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s13_the_same_cut_with_last_event_id_resumes_as_a_get_and_delivers_the_rest_once() {
    let mut s = SseSim::with_request(SseConfig::default(), mcp_call(), SEED, cut_after_three());
    s.connect();
    s.run_for(secs(120));
    assert_eq!(methods(&s), ["POST", "GET"]);
    let seen = s.seen();
    assert_eq!(seen[1].last_event_id.as_deref(), Some("3"));
    assert_eq!(seen[1].body_len, 0, "the resume carries no body");
    assert_eq!(ids(&s), ["1", "2", "3", "4", "5", "6"], "each event once");
    assert_eq!(
        last(&s),
        Some(Event::Ended {
            why: EndReason::Data,
            progress: Progress::new(6, "6"),
        })
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s14_429_with_retry_after_before_the_first_byte_is_retried_after_the_hint() {
    let server = ServerConfig {
        publish_at: [30, 31].map(secs).to_vec(),
        done_after: Some(2),
        ..ServerConfig::default()
    };
    let mut s = SseSim::with_request(SseConfig::default(), generation(), SEED, server);
    s.script([Reply::Status {
        status: 429,
        content_type: Some("application/json"),
        retry_after: Some(secs(20)),
    }]);
    s.connect();
    s.run_for(secs(60));
    // Nothing of the body had reached the application: the POST may go again, after 20 s.
    assert_eq!(methods(&s), ["POST", "POST"]);
    assert_eq!(
        s.requests(),
        [Duration::ZERO, Duration::from_millis(20_020)]
    );
    assert_eq!(ids(&s), ["1", "2"]);
    assert!(matches!(
        last(&s),
        Some(Event::Ended {
            why: EndReason::Data,
            ..
        })
    ));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s15_400_on_a_post_is_terminal_with_the_body_excerpt() {
    let mut s = SseSim::with_request(
        SseConfig::default(),
        generation(),
        SEED,
        ServerConfig::default(),
    );
    let body =
        br#"{"error":{"message":"model 'm' does not exist","type":"invalid_request_error"}}"#;
    s.script([Reply::StatusBody {
        status: 400,
        content_type: Some("application/json"),
        body: body.to_vec(),
    }]);
    s.connect();
    s.run_for(secs(600));
    assert_eq!(methods(&s), ["POST"]);
    assert_eq!(
        last(&s),
        Some(Event::Failed {
            why: FailReason::Rejected {
                status: 400,
                body: String::from_utf8_lossy(body).into_owned(),
                progress: Progress::default(),
            }
        })
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s16_done_ends_the_stream_and_nothing_reconnects() {
    let server = ServerConfig {
        publish_at: [1, 2].map(secs).to_vec(),
        done_after: Some(2),
        ..ServerConfig::default()
    };
    let mut s = SseSim::with_request(SseConfig::default(), generation(), SEED, server);
    s.connect();
    s.run_for(secs(600));
    assert_eq!(s.requests().len(), 1);
    assert_eq!(ids(&s), ["1", "2"], "[DONE] itself is not a message");
    assert_eq!(
        last(&s),
        Some(Event::Ended {
            why: EndReason::Data,
            progress: Progress::new(2, "2"),
        })
    );
    assert_eq!(s.poll_timeout(), None);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s17_a_resume_failing_with_the_same_id_ten_times_backs_off_then_gives_up() {
    let mut s = SseSim::with_request(
        SseConfig::default(),
        mcp_call(),
        SEED,
        ServerConfig::default(),
    );
    s.script(
        std::iter::once(Reply::BodyThenReset(event_bytes(1..=3)))
            .chain(std::iter::repeat_n(Reply::AcceptThenDrop, 10)),
    );
    s.connect();
    s.run_for(secs(3600));
    assert_eq!(methods(&s)[0], "POST");
    assert_eq!(s.seen().len(), 11, "the POST and ten resumes");
    assert!(s.seen()[1..]
        .iter()
        .all(|r| r.method == "GET" && r.last_event_id.as_deref() == Some("3")));
    // Each wait is at least the floor for its place in the streak: never a fixed-rate loop.
    let requests = s.requests();
    let waits: Vec<Duration> = requests.windows(2).map(|w| w[1] - w[0]).collect();
    for (n, wait) in waits.iter().enumerate().skip(1) {
        let floor = SseConfig::default().reconnect.min_delay(n as u32 + 1);
        assert!(*wait >= floor, "wait {n} was {wait:?}, floor {floor:?}");
    }
    assert!(waits[9] >= secs(15), "the tenth wait is near the cap");
    assert_eq!(
        last(&s),
        Some(Event::Failed {
            why: FailReason::ResumeExhausted {
                why: DropReason::Eof,
                progress: Progress::new(3, "3"),
            }
        })
    );
    let mut summary = String::from("waits between requests (ms):");
    for w in &waits {
        summary.push_str(&format!(" {}", w.as_millis()));
    }
    summary.push('\n');
    summary.push_str(s.transcript());
    insta::assert_snapshot!(summary);
}

#[test]
fn s18_a_resume_answered_404_says_the_session_is_gone() {
    let mut s = SseSim::with_request(
        SseConfig::default(),
        mcp_call(),
        SEED,
        ServerConfig::default(),
    );
    s.script([
        Reply::BodyThenReset(event_bytes(1..=2)),
        Reply::Status {
            status: 404,
            content_type: None,
            retry_after: None,
        },
    ]);
    s.connect();
    s.run_for(secs(60));
    assert_eq!(methods(&s), ["POST", "GET"]);
    assert_eq!(
        last(&s),
        Some(Event::Failed {
            why: FailReason::SessionGone {
                progress: Progress::new(2, "2"),
            }
        })
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn an_error_event_can_be_terminal() {
    let request = generation().fail_on_event("error");
    let mut s = SseSim::manual_request(SseConfig::default(), request, SEED);
    s.connect();
    s.handle_response(s.now(), Epoch(1), 200, ES, None).unwrap();
    s.handle_bytes(
        s.now(),
        Epoch(1),
        b"id: 1\ndata: a\n\nevent: error\ndata: overloaded\n\ndata: after\n\n",
    )
    .unwrap();
    let (t, e) = s.take();
    assert_eq!(
        t[t.len().saturating_sub(2)..],
        [Transmit::Close { epoch: Epoch(1) }, Transmit::End]
    );
    assert_eq!(
        e.last(),
        Some(&Event::Failed {
            why: FailReason::ErrorEvent {
                data: "overloaded".into(),
                progress: Progress::new(1, "1"),
            }
        })
    );
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_post_whose_body_never_ended_in_done_is_a_cut_not_an_end() {
    let mut s = SseSim::manual_request(SseConfig::default(), generation(), SEED);
    s.connect();
    s.handle_response(s.now(), Epoch(1), 200, ES, None).unwrap();
    s.handle_bytes(s.now(), Epoch(1), b"data: a\n\n").unwrap();
    s.handle_eof(s.now(), Epoch(1)).unwrap();
    let (_, e) = s.take();
    assert_eq!(
        e.last(),
        Some(&Event::Failed {
            why: FailReason::Interrupted {
                why: DropReason::Eof,
                progress: Progress::new(1, ""),
            }
        })
    );
    // Without an end rule the end of the body is the end.
    let mut s = SseSim::manual_request(SseConfig::default(), Request::post("x"), SEED);
    s.connect();
    s.handle_response(s.now(), Epoch(1), 200, ES, None).unwrap();
    s.handle_eof(s.now(), Epoch(1)).unwrap();
    assert_eq!(
        s.take().1.last(),
        Some(&Event::Ended {
            why: EndReason::Eof,
            progress: Progress::default(),
        })
    );
}

#[test]
fn a_post_lost_before_its_head_without_proof_it_never_arrived_is_not_sent_again() {
    let mut s = SseSim::manual_request(SseConfig::default(), generation(), SEED);
    s.connect();
    // Refused: the request never left, so it may go again.
    s.handle_error(s.now(), Epoch(1), SocketLoss::ConnectionRefused)
        .unwrap();
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert!(matches!(
        s.take().0.last(),
        Some(Transmit::Open {
            epoch: Epoch(2),
            attempt: Attempt::Original,
            ..
        })
    ));
    // Reset after it may have been sent: the server may be generating.
    s.handle_error(s.now(), Epoch(2), SocketLoss::NetworkError)
        .unwrap();
    assert_eq!(
        s.take().1.last(),
        Some(&Event::Failed {
            why: FailReason::Interrupted {
                why: DropReason::NetworkError(SocketLoss::NetworkError),
                progress: Progress::default(),
            }
        })
    );
}

#[test]
fn retries_before_the_first_byte_are_bounded() {
    let mut config = SseConfig::default();
    config.max_unsent_retries = 2;
    let mut s = SseSim::with_request(config, generation(), SEED, ServerConfig::default());
    s.script(std::iter::repeat_n(
        Reply::Status {
            status: 503,
            content_type: None,
            retry_after: None,
        },
        5,
    ));
    s.connect();
    s.run_for(secs(600));
    assert_eq!(methods(&s), ["POST", "POST", "POST"]);
    assert_eq!(
        last(&s),
        Some(Event::Failed {
            why: FailReason::Exhausted(DropReason::Status(503)),
        })
    );
}

/// What the network does to one attempt, for the property below.
#[derive(Clone, Debug)]
enum Fate {
    Refused,
    Status(u16),
    /// Opens, sends `events` events (with ids when `ids`), then ends this way.
    Open {
        events: u8,
        ids: bool,
        end: End,
    },
}

#[derive(Clone, Copy, Debug)]
enum End {
    Eof,
    Reset,
    Idle,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        Just(Fate::Refused),
        prop::sample::select(vec![400u16, 404, 408, 429, 500, 503]).prop_map(Fate::Status),
        (
            0u8..4,
            any::<bool>(),
            prop::sample::select(vec![End::Eof, End::Reset, End::Idle])
        )
            .prop_map(|(events, ids, end)| Fate::Open { events, ids, end }),
    ]
}

fn policy() -> impl Strategy<Value = Resume> {
    prop_oneof![
        Just(Resume::Never),
        Just(Resume::SameRequest),
        Just(Resume::LastEventId {
            method: "GET".to_owned()
        }),
        (0u32..3).prop_map(|max_failures| Resume::Reissue { max_failures }),
    ]
}

proptest! {
    /// A request that is not repeatable is sent again after the application received any of
    /// its body only when the policy is `SameRequest`; with `LastEventId` only the resume
    /// request follows, and only when there is an id to resume from. (The simulator's
    /// invariants check the same rule on every input; this drives it through many fates.)
    #[test]
    fn a_post_is_never_sent_again_after_its_body_reached_the_app(
        resume in policy(),
        fates in prop::collection::vec(fate(), 1..12),
        seed in any::<u64>(),
    ) {
        let request = Request::post("{}").resume(resume.clone());
        let mut s = SseSim::manual_request(SseConfig::default(), request, seed);
        s.connect();
        let mut body_reached_app = false;
        let mut next_id = 1;
        for fate in fates {
            let sent = s.take().0;
            let open = sent.iter().find_map(|t| match t {
                Transmit::Open { epoch, attempt, request, .. } => Some((*epoch, *attempt, request.clone())),
                _ => None,
            });
            let Some((e, attempt, sent_request)) = open else {
                // Waiting: let the reconnect come, or the session has stopped.
                match s.poll_timeout() {
                    Some(at) => { s.handle_timeout(at); continue; }
                    None => break,
                }
            };
            let epoch = e.0;
            if body_reached_app && attempt == Attempt::Original {
                prop_assert_eq!(&resume, &Resume::SameRequest, "POST re-sent after its body reached the app");
            }
            if attempt == Attempt::Resume {
                prop_assert_eq!(sent_request.method.as_str(), "GET");
                prop_assert!(sent_request.body.is_empty());
            }
            let now = s.now() + Duration::from_millis(10);
            match fate {
                Fate::Refused => { s.handle_error(now, Epoch(epoch), SocketLoss::ConnectionRefused).unwrap(); }
                Fate::Status(status) => {
                    s.handle_response(now, Epoch(epoch), status, None, None).unwrap();
                    // A refusal's body, read for its excerpt.
                    let _ = s.handle_eof(now, Epoch(epoch));
                }
                Fate::Open { events, ids, end } => {
                    s.handle_response(now, Epoch(epoch), 200, ES, None).unwrap();
                    for _ in 0..events {
                        let bytes = if ids {
                            next_id += 1;
                            format!("id: {next_id}\ndata: x\n\n")
                        } else {
                            "data: x\n\n".to_owned()
                        };
                        s.handle_bytes(now, Epoch(epoch), bytes.as_bytes()).unwrap();
                        body_reached_app = true;
                    }
                    match end {
                        End::Eof => { s.handle_eof(now, Epoch(epoch)).unwrap(); }
                        End::Reset => { s.handle_error(now, Epoch(epoch), SocketLoss::NetworkError).unwrap(); }
                        End::Idle => {
                            if let Some(at) = s.poll_timeout() { s.handle_timeout(at); }
                        }
                    }
                }
            }
            // Take what the loss produced without discarding the next request.
            let (t, events) = s.take();
            let stopped = events.iter().any(|e| matches!(e, Event::Failed { .. } | Event::Ended { .. }));
            let reopened = t.iter().any(|t| matches!(t, Transmit::Open { .. }));
            prop_assert!(!(stopped && reopened), "a request in the same step as the end");
            if stopped {
                prop_assert_eq!(s.poll_timeout(), None);
                break;
            }
            if let Some(at) = s.poll_timeout() {
                s.handle_timeout(at);
            }
        }
    }
}

/// An MCP 2026-07-28 `subscriptions/listen` POST: no session, no ids to resume from; a lost
/// stream is re-issued as a new request.
fn listen(max_failures: u32) -> Request {
    Request::post(r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}"#)
        .header("content-type", "application/json")
        .resume(Resume::Reissue { max_failures })
}

#[test]
fn s19_a_listen_stream_cut_three_times_is_re_issued_three_times_with_its_gaps() {
    let server = ServerConfig {
        publish_at: [1, 6, 11, 16].map(secs).to_vec(),
        down: [3, 8, 13]
            .map(|s| (secs(s), secs(s) + Duration::from_millis(100)))
            .to_vec(),
        ..ServerConfig::default()
    };
    let mut s = SseSim::with_request(SseConfig::default(), listen(3), SEED, server);
    s.connect();
    s.run_for(secs(30));
    let reissued: Vec<u32> = s.heard(|e| match e {
        Event::Reissued { attempts, .. } => Some(*attempts),
        _ => None,
    });
    assert_eq!(
        reissued,
        [1, 1, 1],
        "three cuts, each re-issued at the first try"
    );
    assert_eq!(
        methods(&s),
        ["POST", "POST", "POST", "POST"],
        "a new POST each time"
    );
    let resumed_from = s
        .seen()
        .iter()
        .filter(|r| r.last_event_id.is_some())
        .count();
    assert_eq!(resumed_from, 0, "a re-issue resumes nothing");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s20_re_issues_that_keep_failing_give_up_after_the_cap() {
    let server = ServerConfig {
        publish_at: vec![secs(1)],
        down: vec![(secs(2), secs(3_600))],
        ..ServerConfig::default()
    };
    let mut s = SseSim::with_request(SseConfig::default(), listen(2), SEED, server);
    s.connect();
    s.run_for(secs(600));
    match last(&s) {
        Some(Event::Failed {
            why: FailReason::ReissueExhausted { why, progress },
        }) => {
            assert_eq!(why, DropReason::Status(503));
            assert_eq!(progress.events, 1);
        }
        other => panic!("{other:?}\n{}", s.transcript()),
    }
    // The original, then the re-issue after the cut and two more: three failed in a row.
    assert_eq!(methods(&s), ["POST", "POST", "POST", "POST"]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn s21_a_tool_call_cut_under_never_is_reported_with_its_progress_and_not_re_sent() {
    let call = Request::post(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#)
        .header("content-type", "application/json");
    let mut s = SseSim::with_request(SseConfig::default(), call, SEED, cut_after_three());
    s.connect();
    s.run_for(secs(30));
    match last(&s) {
        Some(Event::Failed {
            why: FailReason::Interrupted { progress, .. },
        }) => assert_eq!(progress.events, 3),
        other => panic!("{other:?}\n{}", s.transcript()),
    }
    assert_eq!(methods(&s), ["POST"]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_post_answered_500_is_not_sent_again_and_a_gateways_502_is() {
    // A 500 is the application's own: it may have acted on the request.
    let mut s = SseSim::with_request(
        SseConfig::default(),
        generation(),
        SEED,
        ServerConfig::default(),
    );
    s.script([Reply::StatusBody {
        status: 500,
        content_type: Some("application/json"),
        body: br#"{"error":"boom"}"#.to_vec(),
    }]);
    s.connect();
    s.run_for(secs(60));
    match last(&s) {
        Some(Event::Failed {
            why: FailReason::Rejected { status, body, .. },
        }) => assert_eq!((status, body.as_str()), (500, r#"{"error":"boom"}"#)),
        other => panic!("{other:?}\n{}", s.transcript()),
    }
    assert_eq!(methods(&s), ["POST"]);
    // A 502 comes from a gateway: the application never saw the request.
    let mut s = SseSim::with_request(
        SseConfig::default(),
        generation(),
        SEED,
        ServerConfig::default(),
    );
    s.script([Reply::Status {
        status: 502,
        content_type: None,
        retry_after: None,
    }]);
    s.connect();
    s.run_for(secs(60));
    assert_eq!(methods(&s), ["POST", "POST"], "{}", s.transcript());
}

// ----- Redirects and content codings, decided by the core (issue 30): the HTTP clients
// follow nothing, so every 3xx reaches the session.

/// `request` against a server answering `replies` first, run for a minute.
fn redirected(request: Request, config: SseConfig, replies: Vec<Reply>) -> SseSim {
    let server = ServerConfig {
        publish_at: vec![secs(1)],
        ..ServerConfig::default()
    };
    let mut s = SseSim::with_request(config, request, SEED, server);
    s.keep_transcript(true);
    s.script(replies);
    s.connect();
    s.run_for(secs(60));
    s
}

/// `(method, body length, redirect target)` of every request the server saw.
fn hops(s: &SseSim) -> Vec<(String, usize, Option<String>)> {
    s.seen()
        .iter()
        .map(|r| (r.method.clone(), r.body_len, r.redirect.clone()))
        .collect()
}

fn failed(s: &SseSim) -> FailReason {
    match last(s) {
        Some(Event::Failed { why }) => why,
        other => panic!("{other:?}\n{}", s.transcript()),
    }
}

#[test]
fn a_307_on_a_post_is_followed_once_with_its_body() {
    let redirect = Reply::Redirect {
        status: 307,
        location: "/v2/stream",
    };
    let s = redirected(generation(), SseConfig::default(), vec![redirect]);
    let body = generation().body.len();
    assert_eq!(
        hops(&s),
        [
            ("POST".to_owned(), body, None),
            (
                "POST".to_owned(),
                body,
                Some("https://sim.example/v2/stream".to_owned())
            ),
        ],
        "{}",
        s.transcript()
    );
    assert!(matches!(s.heard(|e| Some(e.clone()))[0], Event::Open));
    assert_eq!((s.stats().requests, s.stats().redirects), (2, 1));
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_302_on_a_post_is_a_typed_failure_and_nothing_is_sent_again() {
    let redirect = Reply::Redirect {
        status: 302,
        location: "https://other.example/x",
    };
    let s = redirected(generation(), SseConfig::default(), vec![redirect]);
    assert_eq!(
        failed(&s),
        FailReason::Redirect {
            status: 302,
            location: "https://other.example/x".to_owned(),
            why: RedirectRefusal::MethodChange,
        }
    );
    assert_eq!(s.seen().len(), 1);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_303_after_a_post_allowed_is_a_get_and_the_post_never_goes_again() {
    let mut config = SseConfig::default();
    config.redirects.allow_method_change = true;
    // The GET the 303 points to fails with a 503: the POST, which the server took, is not
    // repeated.
    let replies = vec![
        Reply::Redirect {
            status: 303,
            location: "/result/1",
        },
        Reply::Status {
            status: 503,
            content_type: None,
            retry_after: None,
        },
    ];
    let s = redirected(generation(), config, replies);
    assert_eq!(
        hops(&s),
        [
            ("POST".to_owned(), generation().body.len(), None),
            (
                "GET".to_owned(),
                0,
                Some("https://sim.example/result/1".to_owned())
            ),
        ],
        "{}",
        s.transcript()
    );
    assert!(
        matches!(failed(&s), FailReason::Interrupted { .. }),
        "{}",
        s.transcript()
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_redirect_loop_stops_at_the_limit() {
    let hop = Reply::Redirect {
        status: 307,
        location: "/loop",
    };
    let s = redirected(generation(), SseConfig::default(), vec![hop; 10]);
    assert_eq!(
        failed(&s),
        FailReason::Redirect {
            status: 307,
            location: "/loop".to_owned(),
            why: RedirectRefusal::TooMany,
        }
    );
    // The request and five hops, then the sixth redirect is refused.
    assert_eq!(s.seen().len(), 6, "{}", s.transcript());
    assert_eq!(s.stats().redirects, 5);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_get_follows_a_302_and_the_next_attempt_starts_at_the_stream_url() {
    let replies = vec![
        Reply::Redirect {
            status: 302,
            location: "https://mirror.example/stream",
        },
        Reply::AcceptThenDrop,
    ];
    let s = redirected(Request::get(), SseConfig::default(), replies);
    let targets: Vec<Option<String>> = s.seen().iter().map(|r| r.redirect.clone()).collect();
    assert_eq!(
        targets,
        [None, Some("https://mirror.example/stream".to_owned()), None],
        "{}",
        s.transcript()
    );
}

#[test]
fn https_to_http_is_refused() {
    let redirect = Reply::Redirect {
        status: 307,
        location: "http://sim.example/stream",
    };
    let s = redirected(Request::get(), SseConfig::default(), vec![redirect]);
    assert!(matches!(
        failed(&s),
        FailReason::Redirect {
            why: RedirectRefusal::Downgrade,
            ..
        }
    ));
}

#[test]
fn a_compressed_stream_the_client_did_not_ask_for_is_a_typed_failure() {
    let s = redirected(
        Request::get(),
        SseConfig::default(),
        vec![Reply::Encoded("gzip")],
    );
    assert_eq!(failed(&s), FailReason::ContentEncoding("gzip".to_owned()));
    assert_eq!(
        s.seen().len(),
        1,
        "not retried: the server would compress again"
    );
    // `identity` is what was asked for.
    let s = redirected(
        Request::get(),
        SseConfig::default(),
        vec![Reply::Encoded("identity")],
    );
    assert!(matches!(s.heard(|e| Some(e.clone()))[0], Event::Open));
}

#[test]
fn a_hop_to_another_origin_withholds_the_credentials_for_the_rest_of_the_attempt() {
    let replies = vec![
        Reply::Redirect {
            status: 307,
            location: "/same-origin",
        },
        Reply::Redirect {
            status: 307,
            location: "https://other.example/s",
        },
        Reply::Redirect {
            status: 308,
            location: "https://sim.example/back",
        },
    ];
    let request = Request::get().header("authorization", "Bearer secret");
    let mut s = redirected(request, SseConfig::default(), replies);
    let withheld: Vec<&[&str]> = s
        .take()
        .0
        .iter()
        .filter_map(|t| match t {
            Transmit::Open { withhold, .. } => Some(*withhold),
            _ => None,
        })
        .collect();
    assert_eq!(
        withheld,
        [&[][..], &[], CREDENTIALS, CREDENTIALS],
        "{}",
        s.transcript()
    );
    insta::assert_snapshot!(s.transcript());
}
