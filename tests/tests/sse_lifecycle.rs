//! The application's lifecycle as input to an SSE stream (suspend, resume, a network change,
//! no network), against the simulated server: a stream that died while the app slept is
//! found by the idle watchdog restarted at resume and resumes with `Last-Event-ID`, a live
//! one carries on untouched, a lost network path is given up at once, and nothing is
//! requested offline. `SseSim` checks the session's contract after every input.

use std::time::Duration;

use tether_core::link::SocketLoss;
use tether_core::sse::{DropReason, Event, SseConfig};
use tether_testkit::sse_sim::{ServerConfig, SseSim};

const SEED: u64 = 0x11FE;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A stream opened at 0 s from a server publishing at these times (30 s heartbeats, an
/// ingress that closes after 60 s idle).
fn stream(publish_at: &[u64]) -> SseSim {
    let server = ServerConfig {
        publish_at: publish_at.iter().copied().map(secs).collect(),
        ..ServerConfig::default()
    };
    let mut s = SseSim::new(SseConfig::default(), SEED, server);
    s.connect();
    s
}

/// The ids of the messages delivered, in order.
fn ids(s: &SseSim) -> Vec<String> {
    s.heard(|e| match e {
        Event::Message(m) => Some(m.id.clone()),
        _ => None,
    })
}

/// Why each stream was dropped, in order.
fn drops(s: &SseSim) -> Vec<DropReason> {
    s.heard(|e| match e {
        Event::Reconnecting { why, .. } => Some(*why),
        _ => None,
    })
}

/// The gaps the reconnects reported.
fn gaps(s: &SseSim) -> Vec<Duration> {
    s.heard(|e| match e {
        Event::Reconnected { gap } => Some(*gap),
        _ => None,
    })
}

/// Each request: when (whole seconds) and the `Last-Event-ID` it carried.
fn requests(s: &SseSim) -> Vec<(u64, Option<String>)> {
    s.seen()
        .iter()
        .map(|r| (r.at.as_secs(), r.last_event_id.clone()))
        .collect()
}

#[test]
fn a_stream_that_died_while_suspended_is_found_after_the_resume_and_resumes_where_it_was() {
    let mut s = stream(&[5, 100, 200]);
    s.run_for(secs(10));
    s.suspend();
    s.run_for(secs(40));
    // The NAT forgets the stream while the app sleeps: no end ever arrives.
    s.vanish();
    s.run_for(secs(560));
    // Ten minutes away: nothing was charged as the server's silence, nothing reconnected.
    assert_eq!(requests(&s).len(), 1, "{}", s.transcript());
    s.resume();
    s.run_for(secs(120));
    // The idle watchdog restarted at the resume (610 s) and found the stream dead 90 s
    // later; the next request resumes from event 1, and the server sends what it missed.
    assert_eq!(drops(&s), [DropReason::IdleTimeout], "{}", s.transcript());
    let again = requests(&s);
    assert_eq!(again.len(), 2, "{again:?}");
    assert!((700..=702).contains(&again[1].0), "{again:?}");
    assert_eq!(again[1].1.as_deref(), Some("1"));
    assert_eq!(ids(&s), ["1", "2", "3"]);
    // The gap starts when the server was last heard (a heartbeat at 35 s, read while the
    // app slept), not when the watchdog gave up: the stream may have died any time after.
    let gap_ms: Vec<u128> = gaps(&s).iter().map(Duration::as_millis).collect();
    assert_eq!(gap_ms, [700_708 - 35_000]);
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_live_stream_carries_on_after_a_resume_with_nothing_sent_again() {
    let mut s = stream(&[5, 300]);
    s.run_for(secs(10));
    s.suspend();
    s.run_for(secs(600));
    s.resume();
    s.run_for(secs(120));
    assert_eq!(requests(&s), [(0, None)], "{}", s.transcript());
    assert!(drops(&s).is_empty());
    assert_eq!(ids(&s), ["1", "2"], "event 2 arrived while the app slept");
}

#[test]
fn a_lost_network_path_gives_the_stream_up_at_once_and_resumes_within_the_jitter() {
    let mut s = stream(&[5, 30]);
    s.run_for(secs(20));
    s.network_changed(true);
    s.run_for(secs(40));
    assert_eq!(
        drops(&s),
        [DropReason::NetworkError(SocketLoss::NetworkChanged)]
    );
    let again = requests(&s);
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(
        s.seen()[1].at <= secs(21),
        "within the 1 s jitter: {again:?}"
    );
    assert_eq!(again[1].1.as_deref(), Some("1"));
    assert_eq!(ids(&s), ["1", "2"]);
    // From event 1 at 5 s, the last time the server was heard on the old path.
    let gap = gaps(&s)[0];
    assert!(gap >= secs(15) && gap <= secs(16), "{gap:?}");
}

#[test]
fn offline_no_request_is_made_and_back_online_the_stream_resumes_within_the_jitter() {
    let server = ServerConfig {
        publish_at: vec![secs(5), secs(50)],
        // The server restarts at 25 s while the device is offline: the stream is reset.
        down: vec![(secs(25), secs(26))],
        ..ServerConfig::default()
    };
    let mut s = SseSim::new(SseConfig::default(), SEED, server);
    s.connect();
    s.run_for(secs(20));
    s.set_online(false);
    s.run_for(secs(80));
    assert_eq!(requests(&s).len(), 1, "nothing offline\n{}", s.transcript());
    s.set_online(true);
    s.run_for(secs(10));
    let again = requests(&s);
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(
        s.seen()[1].at <= secs(101),
        "within the 1 s jitter of coming back: {again:?}"
    );
    assert_eq!(again[1].1.as_deref(), Some("1"));
    assert_eq!(ids(&s), ["1", "2"]);
}
