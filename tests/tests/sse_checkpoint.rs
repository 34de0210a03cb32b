//! Checkpoint and restore of an SSE session: the process is killed at any moment while the
//! server goes on publishing, a new process restores the checkpoint later, and the stream
//! resumes from `Last-Event-ID`. Every event reaches the application exactly once across the
//! two processes; a POST the server had is never sent again unless its policy says so.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::sse::{
    DropReason, Event, FailReason, Request, Resume, SseCheckpoint, SseConfig, SseSession,
};
use tether_core::CheckpointError;
use tether_testkit::sse_sim::{ServerConfig, SseSim};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ids(s: &SseSim) -> Vec<u64> {
    s.heard(|e| match e {
        Event::Message(m) => m.id.parse().ok(),
        _ => None,
    })
}

fn server(publish_at: &[u64]) -> ServerConfig {
    ServerConfig {
        publish_at: publish_at
            .iter()
            .map(|&ms| Duration::from_millis(ms))
            .collect(),
        ..ServerConfig::default()
    }
}

fn kill_and_restore(s: &mut SseSim, kill_at: u64, dead_for: u64, request: Request) {
    s.run_for(Duration::from_millis(kill_at));
    s.kill();
    s.run_for(Duration::from_millis(dead_for));
    s.restore(request, 9);
    s.run_for(secs(120));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A GET stream killed at any moment after its first event and restored later: the
    /// server replays from the checkpoint's `Last-Event-ID`, and every event it published
    /// arrives exactly once. (Before a first id there is nothing to resume from: a server
    /// sends a request without `Last-Event-ID` only what is new, by SSE's design.)
    #[test]
    fn a_restored_get_delivers_every_event_once(
        mut publish_at in proptest::collection::vec(100u64..60_000, 0..30),
        kill_at in 200u64..60_000,
        dead_for in 0u64..30_000,
    ) {
        publish_at.push(50);
        publish_at.sort_unstable();
        let mut s = SseSim::new(SseConfig::default(), 1, server(&publish_at));
        s.connect();
        kill_and_restore(&mut s, kill_at, dead_for, Request::get());
        let expected: Vec<u64> = (1..=publish_at.len() as u64).collect();
        prop_assert_eq!(ids(&s), expected, "{}", s.transcript());
    }

    /// A POST whose policy is never to resume, killed once the server had it: it ends with
    /// one `Interrupted` after the restore and is never sent again.
    #[test]
    fn a_restored_post_is_never_sent_again(
        kill_at in 100u64..10_000,
        dead_for in 0u64..10_000,
    ) {
        let post = || Request::post(r#"{"prompt":"hi"}"#);
        let mut s = SseSim::with_request(SseConfig::default(), post(), 1, server(&[50]));
        s.connect();
        kill_and_restore(&mut s, kill_at, dead_for, post());
        let posts = s.seen().iter().filter(|r| r.method == "POST").count();
        prop_assert_eq!(posts, 1, "{}", s.transcript());
        let failed = s.heard(|e| match e {
            Event::Failed { why: FailReason::Interrupted { why, progress } } => {
                Some((*why, progress.events))
            }
            _ => None,
        });
        prop_assert_eq!(failed, vec![(DropReason::Restarted, 1)], "{}", s.transcript());
    }
}

#[test]
fn a_restored_get_resumes_from_its_last_event_id() {
    let mut s = SseSim::new(
        SseConfig::default(),
        1,
        server(&[1_000, 2_000, 6_000, 7_000]),
    );
    s.connect();
    kill_and_restore(&mut s, 3_000, 5_000, Request::get());
    assert_eq!(ids(&s), [1, 2, 3, 4]);
    let last_ids: Vec<Option<String>> = s.seen().iter().map(|r| r.last_event_id.clone()).collect();
    assert_eq!(last_ids, [None, Some("2".into())]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn an_mcp_stream_resumes_with_its_resume_request_and_credentials_stay_out() {
    let request = || {
        Request::post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#)
            .header("Mcp-Session-Id", "abc")
            .header("Authorization", "Bearer secret")
            .resume(Resume::LastEventId {
                method: "GET".into(),
            })
    };
    let mut s = SseSim::with_request(SseConfig::default(), request(), 1, server(&[500, 4_000]));
    s.connect();
    s.run_for(secs(1));
    let checkpoint = s.session().checkpoint();
    let json = String::from_utf8(checkpoint.to_json()).unwrap_or_default();
    assert!(!json.contains("secret"), "{json}");
    assert!(!json.contains("tools/call"), "no body unless asked: {json}");
    assert!(json.contains("Mcp-Session-Id"), "{json}");
    let with_body =
        String::from_utf8(s.session().checkpoint_with_body().to_json()).unwrap_or_default();
    assert!(with_body.contains("tools/call"), "{with_body}");
    s.kill();
    s.run_for(secs(5));
    s.restore(request(), 9);
    s.run_for(secs(30));
    assert_eq!(ids(&s), [1, 2]);
    let methods: Vec<(String, Option<String>)> = s
        .seen()
        .iter()
        .map(|r| (r.method.clone(), r.last_event_id.clone()))
        .collect();
    assert_eq!(
        methods,
        [("POST".into(), None), ("GET".into(), Some("1".into()))]
    );
}

#[test]
fn what_cannot_be_restored_is_a_typed_error() {
    let mut s = SseSession::new(SseConfig::default(), 1);
    s.connect(tether_core::Instant::ZERO);
    let checkpoint = s.checkpoint();
    let err = SseSession::restore(SseConfig::default(), Request::post("x"), &checkpoint, 1)
        .expect_err("another method");
    assert!(matches!(err, CheckpointError::Invalid(_)), "{err:?}");
    let relay = br#"{"tether":"relay","version":1}"#;
    assert!(matches!(
        SseCheckpoint::from_json(relay),
        Err(CheckpointError::WrongKind {
            expected: "sse",
            ..
        })
    ));
    let bad_id = String::from_utf8(checkpoint.to_json())
        .unwrap_or_default()
        .replace(r#""resume_id":"""#, r#""resume_id":"a\nb""#);
    let parsed = SseCheckpoint::from_json(bad_id.as_bytes()).expect("parses");
    let err = SseSession::restore(SseConfig::default(), Request::get(), &parsed, 1)
        .expect_err("an id no header can carry");
    assert!(matches!(err, CheckpointError::Invalid(_)), "{err:?}");
}

#[test]
fn the_serialized_form_is_pinned() {
    let mut s = SseSim::new(SseConfig::default(), 1, server(&[100]));
    s.connect();
    s.run_for(secs(1));
    let json = String::from_utf8(s.session().checkpoint().to_json()).unwrap_or_default();
    insta::assert_snapshot!(json);
}

/// A checkpoint written by format version 1 (the pinned form above), committed: it must keep
/// restoring.
#[test]
fn a_committed_version_1_checkpoint_keeps_restoring() {
    let v1 = r#"{"tether":"sse","version":1,"request":{"method":"GET","headers":[],"body":null,"repeatable":true,"resume":"same_request","end_data":null,"end_event":null,"error_event":null},"stream":"accepted","last_event_id":"1","resume_id":"1","retry_ms":null,"delivered":1}"#;
    let checkpoint = SseCheckpoint::from_json(v1.as_bytes()).expect("parses");
    assert_eq!((checkpoint.resume_id(), checkpoint.delivered()), ("1", 1));
    let mut session = SseSession::restore(SseConfig::default(), Request::get(), &checkpoint, 1)
        .expect("restores");
    session.connect(tether_core::Instant::ZERO);
    let Some(tether_core::sse::Transmit::Open { last_event_id, .. }) = session.poll_transmit()
    else {
        panic!("a request goes out");
    };
    assert_eq!(last_event_id.as_deref(), Some("1"));
    assert_eq!(session.checkpoint().to_json(), v1.as_bytes().to_vec());
}
