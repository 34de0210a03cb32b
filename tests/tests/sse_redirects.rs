//! Redirects and content codings, decided by the core (issue 30): the HTTP clients follow
//! nothing, so every 3xx reaches the session. Transcripts against the simulator.

use std::time::Duration;

use tether_core::sse::redirect::CREDENTIALS;
use tether_core::sse::{Event, FailReason, RedirectRefusal, Request, SseConfig, Transmit};
use tether_testkit::sse_sim::{Reply, ServerConfig, SseSim};

const SEED: u64 = 0x5EED;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A chat-completion style POST that must not be sent twice.
fn generation() -> Request {
    Request::post(r#"{"model":"m","stream":true}"#)
        .header("content-type", "application/json")
        .end_on_data("[DONE]")
}

fn sim(request: Request, config: SseConfig, replies: Vec<Reply>) -> SseSim {
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

fn last(s: &SseSim) -> Option<Event> {
    s.heard(|e| Some(e.clone())).pop()
}

/// `(method, body length, redirect target)` of every request the server saw.
fn seen(s: &SseSim) -> Vec<(String, usize, Option<String>)> {
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
    let s = sim(generation(), SseConfig::default(), vec![redirect]);
    let body = generation().body.len();
    assert_eq!(
        seen(&s),
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
    let s = sim(generation(), SseConfig::default(), vec![redirect]);
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
    let s = sim(generation(), config, replies);
    assert_eq!(
        seen(&s),
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
    let s = sim(generation(), SseConfig::default(), vec![hop; 10]);
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
    let s = sim(Request::get(), SseConfig::default(), replies);
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
    let s = sim(Request::get(), SseConfig::default(), vec![redirect]);
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
    let s = sim(
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
    let s = sim(
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
    let mut s = sim(request, SseConfig::default(), replies);
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
