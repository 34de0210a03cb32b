//! SseSession rules: statuses (WPT `request-status-error` and friends), content types,
//! backoff, `retry:`, `Retry-After`, `Last-Event-ID`, watchdog, epochs, misuse, bounds, and the
//! driving-contract properties.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::link::{Epoch, SocketError};
use tether_core::sse::{
    is_event_stream, parse_retry_after, CloseReason, DropReason, Event, FailReason, Message,
    SseConfig, SseSession, Transmit,
};
use tether_core::Instant;

const ES: Option<&str> = Some("text/event-stream");

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn drain(s: &mut SseSession) -> (Vec<Transmit>, Vec<Event>) {
    let t = std::iter::from_fn(|| s.poll_transmit()).collect();
    let e = std::iter::from_fn(|| s.poll_event()).collect();
    (t, e)
}

/// A session that connected at 0 and whose first request got `200 text/event-stream`.
fn opened(seed: u64) -> SseSession {
    let mut s = SseSession::new(SseConfig::default(), seed);
    s.connect(ms(0));
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    drain(&mut s);
    s
}

fn reconnect_delay(events: &[Event]) -> Duration {
    match events {
        [Event::Reconnecting { delay, .. }] => *delay,
        other => panic!("expected one Reconnecting, got {other:?}"),
    }
}

#[test]
fn connect_asks_for_a_request_without_last_event_id() {
    let mut s = SseSession::new(SseConfig::default(), 1);
    s.connect(ms(5));
    assert_eq!(s.poll_timeout(), Some(ms(5)), "queued output means now");
    let (t, e) = drain(&mut s);
    assert_eq!(
        t,
        [Transmit::Open {
            epoch: Epoch(1),
            last_event_id: None
        }]
    );
    assert!(e.is_empty());
    assert_eq!(s.poll_timeout(), Some(ms(30_005)), "connect timeout");
    s.connect(ms(6));
    assert_eq!(drain(&mut s), (vec![], vec![]), "second connect is a no-op");
}

#[test]
fn ok_with_event_stream_opens_and_parameters_are_allowed() {
    for ct in [
        "text/event-stream",
        "text/event-stream;charset=utf-8",
        "TEXT/Event-Stream ; charset=windows-1252",
        " text/event-stream;bogus",
    ] {
        let mut s = SseSession::new(SseConfig::default(), 1);
        s.connect(ms(0));
        drain(&mut s);
        s.handle_response(ms(10), Epoch(1), 200, Some(ct), None)
            .unwrap();
        assert_eq!(drain(&mut s), (vec![], vec![Event::Open]), "{ct}");
        assert_eq!(s.poll_timeout(), Some(ms(90_010)), "idle watchdog for {ct}");
    }
}

#[test]
fn ok_with_another_content_type_fails_without_reconnect() {
    for ct in [
        Some("text/plain"),
        Some("text/event-streams"),
        Some("application/json"),
        Some(""),
        None,
    ] {
        let mut s = SseSession::new(SseConfig::default(), 1);
        s.connect(ms(0));
        drain(&mut s);
        s.handle_response(ms(10), Epoch(1), 200, ct, None).unwrap();
        let (t, e) = drain(&mut s);
        assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }]);
        assert_eq!(
            e,
            [Event::Failed {
                why: FailReason::ContentType(ct.map(str::to_owned))
            }]
        );
        assert_eq!(s.poll_timeout(), None, "{ct:?}: nothing scheduled");
    }
}

#[test]
fn status_204_closes_for_good() {
    let mut s = SseSession::new(SseConfig::default(), 1);
    s.connect(ms(0));
    drain(&mut s);
    s.handle_response(ms(10), Epoch(1), 204, None, None)
        .unwrap();
    assert_eq!(
        drain(&mut s),
        (
            vec![Transmit::Close { epoch: Epoch(1) }],
            vec![Event::Closed {
                why: CloseReason::NoContent
            }]
        )
    );
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(ms(10_000_000));
    assert_eq!(drain(&mut s), (vec![], vec![]));
}

#[test]
fn other_statuses_fail_without_reconnect() {
    for status in [205, 210, 299, 301, 400, 401, 403, 404, 410, 418] {
        let mut s = SseSession::new(SseConfig::default(), 1);
        s.connect(ms(0));
        drain(&mut s);
        s.handle_response(ms(10), Epoch(1), status, ES, Some(Duration::from_secs(5)))
            .unwrap();
        let (t, e) = drain(&mut s);
        assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }], "{status}");
        assert_eq!(
            e,
            [Event::Failed {
                why: FailReason::Status(status)
            }],
            "{status}"
        );
        assert_eq!(s.poll_timeout(), None, "{status}");
    }
}

#[test]
fn retryable_statuses_reconnect_with_jittered_backoff() {
    // WPT's request-status-error expects 503 to fail; tether retries 5xx, 408 and 429 on
    // purpose (a restarting pod answers 503 through its ingress).
    for status in [500, 502, 503, 504, 599, 408, 429] {
        let mut s = SseSession::new(SseConfig::default(), 3);
        s.connect(ms(0));
        drain(&mut s);
        s.handle_response(ms(10), Epoch(1), status, None, None)
            .unwrap();
        let (t, e) = drain(&mut s);
        assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }]);
        let Event::Reconnecting {
            why,
            attempt,
            delay,
        } = e[0]
        else {
            panic!("{e:?}")
        };
        assert_eq!((why, attempt, e.len()), (DropReason::Status(status), 1, 1));
        assert!(
            (800..=1200).contains(&delay.as_millis()),
            "{status}: {delay:?}"
        );
        assert_eq!(s.poll_timeout(), Some(ms(10) + delay));
        s.handle_timeout(ms(10) + delay);
        assert_eq!(
            drain(&mut s).0,
            [Transmit::Open {
                epoch: Epoch(2),
                last_event_id: None
            }]
        );
    }
}

#[test]
fn retry_after_is_a_minimum_and_is_capped() {
    let mut s = SseSession::new(SseConfig::default(), 1);
    s.connect(ms(0));
    drain(&mut s);
    s.handle_response(ms(0), Epoch(1), 503, None, Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(reconnect_delay(&drain(&mut s).1), Duration::from_secs(20));

    s.handle_timeout(ms(20_000));
    drain(&mut s);
    s.handle_response(
        ms(20_000),
        Epoch(2),
        429,
        None,
        Some(Duration::from_secs(86_400)),
    )
    .unwrap();
    assert_eq!(
        reconnect_delay(&drain(&mut s).1),
        Duration::from_secs(600),
        "capped at 10 min"
    );
}

#[test]
fn parse_retry_after_takes_delta_seconds_only() {
    assert_eq!(parse_retry_after("20"), Some(Duration::from_secs(20)));
    assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
    assert_eq!(parse_retry_after("-1"), None);
    assert_eq!(parse_retry_after("1.5"), None);
    assert_eq!(parse_retry_after(""), None);
    assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    assert_eq!(
        parse_retry_after("99999999999999999999999"),
        Some(Duration::from_secs(u64::MAX))
    );
    assert!(is_event_stream("text/event-stream; charset=utf-8"));
    assert!(!is_event_stream("text/event"));
}

#[test]
fn eof_reconnects_and_carries_last_event_id() {
    let mut s = opened(1);
    let n = s
        .handle_bytes(ms(100), Epoch(1), b"id: 7\ndata: hi\n\n")
        .unwrap();
    assert_eq!(n, 16);
    assert_eq!(
        drain(&mut s).1,
        [Event::Message(Message {
            event: "message".into(),
            data: "hi".into(),
            id: "7".into()
        })]
    );
    s.handle_eof(ms(5_000), Epoch(1)).unwrap();
    let (t, e) = drain(&mut s);
    assert!(t.is_empty(), "the socket is already gone: no Close");
    let delay = reconnect_delay(&e);
    s.handle_timeout(ms(5_000) + delay);
    assert_eq!(
        drain(&mut s).0,
        [Transmit::Open {
            epoch: Epoch(2),
            last_event_id: Some("7".into())
        }]
    );
    s.handle_response(ms(6_500), Epoch(2), 200, ES, None)
        .unwrap();
    assert_eq!(
        drain(&mut s).1,
        [Event::Reconnected {
            gap: Duration::from_millis(1_500)
        }]
    );
}

#[test]
fn gap_counts_from_the_first_loss_across_failed_attempts() {
    let mut s = opened(2);
    s.handle_error(ms(10_000), Epoch(1)).unwrap();
    let d1 = reconnect_delay(&drain(&mut s).1);
    s.handle_timeout(ms(10_000) + d1);
    drain(&mut s);
    s.handle_response(ms(10_000) + d1, Epoch(2), 502, None, None)
        .unwrap();
    let d2 = reconnect_delay(&drain(&mut s).1);
    let t = ms(10_000) + d1 + d2;
    s.handle_timeout(t);
    drain(&mut s);
    s.handle_response(t, Epoch(3), 200, ES, None).unwrap();
    assert_eq!(drain(&mut s).1, [Event::Reconnected { gap: d1 + d2 }]);
}

#[test]
fn retry_field_replaces_the_base_and_is_floored() {
    let mut s = opened(4);
    s.handle_bytes(ms(0), Epoch(1), b"retry: 5000\n\n").unwrap();
    assert_eq!(s.retry_base(), Duration::from_secs(5));
    s.handle_eof(ms(100), Epoch(1)).unwrap();
    let d = reconnect_delay(&drain(&mut s).1);
    assert!((2_500..=7_500).contains(&d.as_millis()), "5 s +-50%: {d:?}");

    let mut s = opened(4);
    s.handle_bytes(ms(0), Epoch(1), b"retry: 0\n\n").unwrap();
    assert_eq!(
        s.retry_base(),
        Duration::from_millis(500),
        "floor, not a tight loop"
    );
    s.handle_eof(ms(100), Epoch(1)).unwrap();
    let d = reconnect_delay(&drain(&mut s).1);
    assert!((250..=750).contains(&d.as_millis()), "500 ms +-50%: {d:?}");

    let mut s = opened(4);
    s.handle_bytes(ms(0), Epoch(1), b"retry: 3600000\n\n")
        .unwrap();
    assert_eq!(s.retry_base(), Duration::from_secs(30), "at most the cap");
}

#[test]
fn accept_then_drop_keeps_growing_and_a_stable_stream_resets() {
    let mut s = SseSession::new(SseConfig::default(), 5);
    s.connect(ms(0));
    drain(&mut s);
    let mut now = ms(0);
    let mut attempts = Vec::new();
    for epoch in 1..=7u64 {
        s.handle_response(now, Epoch(epoch), 200, ES, None).unwrap();
        s.handle_eof(now, Epoch(epoch)).unwrap();
        let (_, e) = drain(&mut s);
        let Some(Event::Reconnecting { attempt, delay, .. }) = e.last() else {
            panic!("{e:?}")
        };
        attempts.push(*attempt);
        now = now + *delay;
        s.handle_timeout(now);
        drain(&mut s);
    }
    assert_eq!(attempts, [1, 2, 3, 4, 5, 6, 7]);
    // Now a stream that stays up for 30 s resets the counter.
    s.handle_response(now, Epoch(8), 200, ES, None).unwrap();
    s.handle_bytes(now + Duration::from_secs(29), Epoch(8), b":\n")
        .unwrap();
    s.handle_eof(now + Duration::from_secs(30), Epoch(8))
        .unwrap();
    let (_, e) = drain(&mut s);
    assert!(
        matches!(e.last(), Some(Event::Reconnecting { attempt: 1, .. })),
        "{e:?}"
    );
}

#[test]
fn idle_watchdog_counts_any_bytes_and_fires_after_silence() {
    let mut s = opened(6);
    s.handle_bytes(ms(60_000), Epoch(1), b": heartbeat\n\n")
        .unwrap();
    assert_eq!(s.stats().heartbeats, 1);
    assert_eq!(s.poll_timeout(), Some(ms(150_000)));
    s.handle_timeout(ms(149_999));
    assert_eq!(drain(&mut s), (vec![], vec![]));
    s.handle_timeout(ms(150_000));
    let (t, e) = drain(&mut s);
    assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }]);
    assert!(
        matches!(
            e[..],
            [Event::Reconnecting {
                why: DropReason::IdleTimeout,
                attempt: 1,
                ..
            }]
        ),
        "{e:?}"
    );
    // Bytes still in flight for the closed socket are stale.
    assert_eq!(
        s.handle_bytes(ms(150_001), Epoch(1), b"data: late\n\n"),
        Ok(12)
    );
    assert_eq!(drain(&mut s), (vec![], vec![]));
}

#[test]
fn connect_timeout_retries() {
    let mut s = SseSession::new(SseConfig::default(), 7);
    s.connect(ms(0));
    drain(&mut s);
    s.handle_timeout(ms(30_000));
    let (t, e) = drain(&mut s);
    assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }]);
    assert!(matches!(
        e[..],
        [Event::Reconnecting {
            why: DropReason::ConnectTimeout,
            ..
        }]
    ));
}

#[test]
fn disconnect_during_backoff_cancels_everything() {
    let mut s = SseSession::new(SseConfig::default(), 8);
    s.connect(ms(0));
    drain(&mut s);
    s.handle_response(ms(0), Epoch(1), 503, None, None).unwrap();
    drain(&mut s);
    s.disconnect(ms(300));
    assert_eq!(
        drain(&mut s),
        (
            vec![],
            vec![Event::Closed {
                why: CloseReason::Local
            }]
        )
    );
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(ms(3_600_000));
    assert_eq!(s.handle_eof(ms(3_600_000), Epoch(1)), Ok(()));
    s.disconnect(ms(3_600_001));
    assert_eq!(drain(&mut s), (vec![], vec![]), "nothing after disconnect");
}

#[test]
fn disconnect_with_an_open_stream_closes_it() {
    let mut s = opened(9);
    s.disconnect(ms(10));
    assert_eq!(
        drain(&mut s),
        (
            vec![Transmit::Close { epoch: Epoch(1) }],
            vec![Event::Closed {
                why: CloseReason::Local
            }]
        )
    );
    assert_eq!(s.handle_bytes(ms(11), Epoch(1), b"data: x\n\n"), Ok(9));
    assert_eq!(drain(&mut s), (vec![], vec![]));
}

#[test]
fn local_misuse_is_an_error_and_changes_nothing() {
    let mut s = SseSession::new(SseConfig::default(), 1);
    assert_eq!(
        s.handle_bytes(ms(0), Epoch(1), b"x"),
        Err(SocketError::UnknownEpoch(Epoch(1)))
    );
    s.connect(ms(0));
    drain(&mut s);
    assert_eq!(
        s.handle_bytes(ms(0), Epoch(1), b"data: x\n\n"),
        Err(SocketError::NotOpen(Epoch(1)))
    );
    assert_eq!(
        s.handle_response(ms(0), Epoch(2), 200, ES, None),
        Err(SocketError::UnknownEpoch(Epoch(2)))
    );
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    assert_eq!(
        s.handle_response(ms(0), Epoch(1), 200, ES, None),
        Err(SocketError::AlreadyOpen(Epoch(1)))
    );
    assert_eq!(drain(&mut s), (vec![], vec![Event::Open]));
}

#[test]
fn a_full_event_queue_pushes_back_on_the_driver() {
    let config = SseConfig {
        max_queued_events: 2,
        ..SseConfig::default()
    };
    let mut s = SseSession::new(config, 1);
    s.connect(ms(0));
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    drain(&mut s);
    let body = b"data: 1\n\ndata: 2\n\ndata: 3\n\n";
    let n = s.handle_bytes(ms(1), Epoch(1), body).unwrap();
    assert_eq!(n, 18, "stops after two events");
    assert_eq!(s.handle_bytes(ms(1), Epoch(1), &body[n..]), Ok(0));
    assert_eq!(drain(&mut s).1.len(), 2);
    assert_eq!(s.handle_bytes(ms(1), Epoch(1), &body[n..]), Ok(9));
    assert_eq!(drain(&mut s).1.len(), 1);
}

#[test]
fn an_oversized_event_is_reported_and_the_stream_continues() {
    let mut config = SseConfig::default();
    config.parser.max_line_len = 8;
    let mut s = SseSession::new(config, 1);
    s.connect(ms(0));
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    drain(&mut s);
    s.handle_bytes(ms(1), Epoch(1), b"data: far too long\n\ndata: ok\n\n")
        .unwrap();
    let (_, e) = drain(&mut s);
    assert_eq!(e.len(), 2);
    assert!(matches!(e[0], Event::ParseError(_)));
    assert!(matches!(&e[1], Event::Message(m) if m.data == "ok"));
    assert_eq!(s.stats().parse_errors, 1);
}

#[test]
fn time_never_goes_backwards() {
    let mut s = opened(1);
    s.handle_bytes(ms(50_000), Epoch(1), b":\n").unwrap();
    // An older `now` counts as the last one seen: the watchdog is not pulled earlier.
    s.handle_bytes(ms(10), Epoch(1), b":\n").unwrap();
    assert_eq!(s.poll_timeout(), Some(ms(140_000)));
}

// ---- driving-contract properties ----

#[derive(Clone, Debug)]
enum Input {
    Connect,
    Disconnect,
    Response(u16, bool, Option<u16>),
    Bytes(Vec<u8>),
    Eof,
    Error,
    /// Advance to the deadline plus this many ms (or by it, with no deadline), then time out.
    Timeout(u16),
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => Just(Input::Connect),
        1 => Just(Input::Disconnect),
        3 => (
            prop_oneof![Just(200u16), Just(204), Just(404), Just(503), Just(429), 100u16..600],
            any::<bool>(),
            proptest::option::of(0u16..120),
        )
            .prop_map(|(s, ct, ra)| Input::Response(s, ct, ra)),
        3 => prop_oneof![
            Just(b"data: x\n\n".to_vec()),
            Just(b": hb\n\n".to_vec()),
            Just(b"retry: 0\n".to_vec()),
            Just(b"id: 3\n\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..16),
        ]
        .prop_map(Input::Bytes),
        1 => Just(Input::Eof),
        1 => Just(Input::Error),
        4 => (0u16..2000).prop_map(Input::Timeout),
    ]
}

/// Drive `inputs` and return every output with its time; checks the contract on the way.
fn run(seed: u64, inputs: &[Input]) -> Result<Vec<String>, TestCaseError> {
    let mut s = SseSession::new(SseConfig::default(), seed);
    let mut now = ms(0);
    let mut log = Vec::new();
    for inp in inputs {
        let epoch = s.link().epoch();
        match inp {
            Input::Connect => s.connect(now),
            Input::Disconnect => s.disconnect(now),
            Input::Response(st, ct, ra) => {
                let ct = ct.then_some("text/event-stream");
                let ra = ra.map(|r| Duration::from_secs(r.into()));
                let _ = s.handle_response(now, epoch, *st, ct, ra);
            }
            Input::Bytes(b) => {
                let _ = s.handle_bytes(now, epoch, b);
            }
            Input::Eof => {
                let _ = s.handle_eof(now, epoch);
            }
            Input::Error => {
                let _ = s.handle_error(now, epoch);
            }
            Input::Timeout(extra) => {
                let extra = Duration::from_millis((*extra).into());
                now = s.poll_timeout().unwrap_or(now).max(now) + extra;
                s.handle_timeout(now);
                let queued = s.poll_timeout();
                let (t, e) = drain(&mut s);
                if t.is_empty() && e.is_empty() {
                    prop_assert!(
                        s.poll_timeout().is_none_or(|d| d > now),
                        "deadline {:?} not after {:?}",
                        s.poll_timeout(),
                        now
                    );
                } else {
                    prop_assert_eq!(queued, Some(now), "queued output must report now");
                }
                log.push(format!("{now:?} {t:?} {e:?}"));
                continue;
            }
        }
        let queued = s.poll_timeout();
        let (t, e) = drain(&mut s);
        if !t.is_empty() || !e.is_empty() {
            prop_assert_eq!(queued, Some(now));
        }
        log.push(format!("{now:?} {t:?} {e:?}"));
    }
    Ok(log)
}

proptest! {
    #[test]
    fn poll_timeout_tells_the_truth(
        seed in any::<u64>(),
        inputs in proptest::collection::vec(input(), 0..60),
    ) {
        run(seed, &inputs)?;
    }

    #[test]
    fn same_seed_same_outputs(
        seed in any::<u64>(),
        inputs in proptest::collection::vec(input(), 0..60),
    ) {
        prop_assert_eq!(run(seed, &inputs)?, run(seed, &inputs)?);
    }
}
