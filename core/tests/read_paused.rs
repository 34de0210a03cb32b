//! `handle_read_paused`: while the driver is not reading (backpressure), silence is the
//! driver's, so the liveness watchdogs of both sessions are suspended and restart on resume.

use std::time::Duration;

use tether_core::link::Epoch;
use tether_core::nostr::{RelayConfig, RelaySession, Transmit};
use tether_core::sse::{DropReason, Event as SseEvent, SseConfig, SseSession};
use tether_core::Instant;

fn secs(n: u64) -> Instant {
    Instant::from_origin(Duration::from_secs(n))
}

fn open_relay() -> RelaySession {
    let mut s = RelaySession::new(RelayConfig::default(), 1);
    s.connect(secs(0));
    s.handle_open(secs(0), Epoch(1)).unwrap();
    while s.poll_transmit().is_some() || s.poll_event().is_some() {}
    s
}

#[test]
fn relay_watchdog_is_suspended_while_reading_is_paused() {
    let mut s = open_relay();
    assert_eq!(
        s.poll_timeout(),
        Some(secs(30)),
        "ping after 30 s of silence"
    );
    s.handle_read_paused(secs(10), true);
    assert_eq!(s.poll_timeout(), None, "no watchdog while we do not read");
    s.handle_timeout(secs(100));
    assert_eq!(
        s.poll_transmit(),
        None,
        "no ping, no close after 90 s of our own silence"
    );
    assert!(s.link().is_open());

    s.handle_read_paused(secs(100), false);
    assert_eq!(
        s.poll_timeout(),
        Some(secs(130)),
        "silence counts from the resume"
    );
    s.handle_timeout(secs(130));
    assert_eq!(s.poll_transmit(), Some(Transmit::Ping));
}

#[test]
fn relay_resume_clears_an_outstanding_ping() {
    let mut s = open_relay();
    s.handle_timeout(secs(30));
    assert_eq!(s.poll_transmit(), Some(Transmit::Ping));
    s.handle_read_paused(secs(31), true);
    s.handle_read_paused(secs(60), false);
    // The pong may have been among the unread frames: wait a full ping interval again.
    assert_eq!(s.poll_timeout(), Some(secs(90)));
}

#[test]
fn pausing_twice_or_resuming_unpaused_changes_nothing() {
    let mut s = open_relay();
    s.handle_read_paused(secs(5), false);
    assert_eq!(s.poll_timeout(), Some(secs(30)));
    s.handle_read_paused(secs(6), true);
    s.handle_read_paused(secs(7), true);
    s.handle_read_paused(secs(8), false);
    assert_eq!(s.poll_timeout(), Some(secs(38)));
}

#[test]
fn sse_idle_watchdog_is_suspended_while_reading_is_paused() {
    let mut s = SseSession::new(SseConfig::default(), 1);
    s.connect(secs(0));
    s.handle_response(secs(0), Epoch(1), 200, Some("text/event-stream"), None)
        .unwrap();
    while s.poll_transmit().is_some() || s.poll_event().is_some() {}
    assert_eq!(s.poll_timeout(), Some(secs(90)));

    s.handle_read_paused(secs(1), true);
    s.handle_timeout(secs(500));
    assert_eq!(
        s.poll_event(),
        None,
        "no idle timeout while the application is not asking"
    );
    s.handle_read_paused(secs(500), false);
    assert_eq!(s.poll_timeout(), Some(secs(590)));
    s.handle_timeout(secs(590));
    assert!(matches!(
        s.poll_event(),
        Some(SseEvent::Reconnecting {
            why: DropReason::IdleTimeout,
            ..
        })
    ));
}
