//! SseSession rules, driven through the testkit's `SseSim` in manual mode (the test plays the
//! network; the simulator checks the driving contract after every input): statuses (WPT `request-status-error` and friends), content types,
//! backoff, `retry:`, `Retry-After`, `Last-Event-ID`, watchdog, epochs, misuse, bounds, and the
//! driving-contract properties.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tether_core::link::{Epoch, SocketError, SocketLoss};
use tether_core::sse::{
    is_event_stream, parse_retry_after, Attempt, CloseReason, DropReason, Event, FailReason,
    Message, Request, SseConfig, Transmit, Unsendable,
};
use tether_core::Instant;
use tether_testkit::sse_sim::SseSim;

const ES: Option<&str> = Some("text/event-stream");

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// The plain GET a session without a request of its own sends.
fn get_open(epoch: u64, last_event_id: Option<String>) -> Transmit {
    Transmit::Open {
        epoch: Epoch(epoch),
        last_event_id,
        request: Arc::new(Request::get()),
        attempt: Attempt::Original,
        redirect: None,
        withhold: &[],
    }
}

/// A session that connected at 0 and whose first request got `200 text/event-stream`.
fn opened(seed: u64) -> SseSim {
    let mut s = SseSim::manual(SseConfig::default(), seed);
    s.connect_at(ms(0));
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    s.take();
    s
}

/// The wait of the one `Reconnecting` in `events`, from the latest input (the loss).
fn delay_of(s: &SseSim, events: &[Event]) -> Duration {
    match events {
        [Event::Reconnecting { at, .. }] => *at - s.now(),
        other => panic!("expected one Reconnecting, got {other:?}"),
    }
}

/// [`delay_of`] the events since the last take.
fn take_delay(s: &mut SseSim) -> Duration {
    let (_, e) = s.take();
    delay_of(s, &e)
}

#[test]
fn connect_asks_for_a_request_without_last_event_id() {
    let mut s = SseSim::manual(SseConfig::default(), 1);
    s.connect_at(ms(5));
    // (Queued output reporting `now` is the simulator's invariant, checked on every input.)
    let (t, e) = s.take();
    assert_eq!(t, [get_open(1, None)]);
    assert!(e.is_empty());
    assert_eq!(s.poll_timeout(), Some(ms(30_005)), "connect timeout");
    s.connect_at(ms(6));
    assert_eq!(s.take(), (vec![], vec![]), "second connect is a no-op");
}

#[test]
fn ok_with_event_stream_opens_and_parameters_are_allowed() {
    for ct in [
        "text/event-stream",
        "text/event-stream;charset=utf-8",
        "TEXT/Event-Stream ; charset=windows-1252",
        " text/event-stream;bogus",
    ] {
        let mut s = SseSim::manual(SseConfig::default(), 1);
        s.connect_at(ms(0));
        s.take();
        s.handle_response(ms(10), Epoch(1), 200, Some(ct), None)
            .unwrap();
        assert_eq!(s.take(), (vec![], vec![Event::Open]), "{ct}");
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
        let mut s = SseSim::manual(SseConfig::default(), 1);
        s.connect_at(ms(0));
        s.take();
        s.handle_response(ms(10), Epoch(1), 200, ct, None).unwrap();
        let (t, e) = s.take();
        assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }, Transmit::End]);
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
    let mut s = SseSim::manual(SseConfig::default(), 1);
    s.connect_at(ms(0));
    s.take();
    s.handle_response(ms(10), Epoch(1), 204, None, None)
        .unwrap();
    assert_eq!(
        s.take(),
        (
            vec![Transmit::Close { epoch: Epoch(1) }, Transmit::End],
            vec![Event::Closed {
                why: CloseReason::NoContent
            }]
        )
    );
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(ms(10_000_000));
    assert_eq!(s.take(), (vec![], vec![]));
}

#[test]
fn other_statuses_fail_without_reconnect() {
    for status in [205, 210, 299, 300, 304, 400, 401, 403, 404, 410, 418] {
        let mut s = SseSim::manual(SseConfig::default(), 1);
        s.connect_at(ms(0));
        s.take();
        s.handle_response(ms(10), Epoch(1), status, ES, Some(Duration::from_secs(5)))
            .unwrap();
        let (t, e) = s.take();
        assert_eq!(
            t,
            [Transmit::Close { epoch: Epoch(1) }, Transmit::End],
            "{status}"
        );
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
        let mut s = SseSim::manual(SseConfig::default(), 3);
        s.connect_at(ms(0));
        s.take();
        s.handle_response(ms(10), Epoch(1), status, None, None)
            .unwrap();
        let (t, e) = s.take();
        assert_eq!(t, [Transmit::Close { epoch: Epoch(1) }]);
        let Event::Reconnecting { why, attempt, at } = e[0] else {
            panic!("{e:?}")
        };
        let delay = at - ms(10);
        assert_eq!((why, attempt, e.len()), (DropReason::Status(status), 1, 1));
        assert!(
            (800..=1200).contains(&delay.as_millis()),
            "{status}: {delay:?}"
        );
        assert_eq!(s.poll_timeout(), Some(ms(10) + delay));
        s.handle_timeout(ms(10) + delay);
        assert_eq!(s.take().0, [get_open(2, None)]);
    }
}

#[test]
fn retry_after_is_a_minimum_and_is_capped() {
    let mut s = SseSim::manual(SseConfig::default(), 1);
    s.connect_at(ms(0));
    s.take();
    s.handle_response(ms(0), Epoch(1), 503, None, Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(take_delay(&mut s), Duration::from_secs(20));

    s.handle_timeout(ms(20_000));
    s.take();
    s.handle_response(
        ms(20_000),
        Epoch(2),
        429,
        None,
        Some(Duration::from_secs(86_400)),
    )
    .unwrap();
    assert_eq!(
        take_delay(&mut s),
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
        s.take().1,
        [Event::Message(Message {
            event: "message".into(),
            data: "hi".into(),
            id: "7".into()
        })]
    );
    s.handle_eof(ms(5_000), Epoch(1)).unwrap();
    let (t, e) = s.take();
    assert!(t.is_empty(), "the socket is already gone: no Close");
    let delay = delay_of(&s, &e);
    s.handle_timeout(ms(5_000) + delay);
    assert_eq!(s.take().0, [get_open(2, Some("7".into()))]);
    s.handle_response(ms(6_500), Epoch(2), 200, ES, None)
        .unwrap();
    assert_eq!(
        s.take().1,
        [Event::Reconnected {
            gap: Duration::from_millis(1_500)
        }]
    );
}

#[test]
fn gap_counts_from_the_first_loss_across_failed_attempts() {
    let mut s = opened(2);
    s.handle_error(ms(10_000), Epoch(1), SocketLoss::NetworkError)
        .unwrap();
    let d1 = take_delay(&mut s);
    s.handle_timeout(ms(10_000) + d1);
    s.take();
    s.handle_response(ms(10_000) + d1, Epoch(2), 502, None, None)
        .unwrap();
    let d2 = take_delay(&mut s);
    let t = ms(10_000) + d1 + d2;
    s.handle_timeout(t);
    s.take();
    s.handle_response(t, Epoch(3), 200, ES, None).unwrap();
    assert_eq!(s.take().1, [Event::Reconnected { gap: d1 + d2 }]);
}

#[test]
fn retry_field_replaces_the_base_and_is_floored() {
    let mut s = opened(4);
    s.handle_bytes(ms(0), Epoch(1), b"retry: 5000\n\n").unwrap();
    assert_eq!(s.session().retry_base(), Duration::from_secs(5));
    s.handle_eof(ms(100), Epoch(1)).unwrap();
    let d = take_delay(&mut s);
    assert!((2_500..=7_500).contains(&d.as_millis()), "5 s +-50%: {d:?}");

    let mut s = opened(4);
    s.handle_bytes(ms(0), Epoch(1), b"retry: 0\n\n").unwrap();
    assert_eq!(
        s.session().retry_base(),
        Duration::from_millis(500),
        "floor, not a tight loop"
    );
    s.handle_eof(ms(100), Epoch(1)).unwrap();
    let d = take_delay(&mut s);
    assert!((250..=750).contains(&d.as_millis()), "500 ms +-50%: {d:?}");

    let mut s = opened(4);
    s.handle_bytes(ms(0), Epoch(1), b"retry: 3600000\n\n")
        .unwrap();
    assert_eq!(
        s.session().retry_base(),
        Duration::from_secs(30),
        "at most the cap"
    );
}

#[test]
fn accept_then_drop_keeps_growing_and_a_stable_stream_resets() {
    let mut s = SseSim::manual(SseConfig::default(), 5);
    s.connect_at(ms(0));
    s.take();
    let mut now = ms(0);
    let mut attempts = Vec::new();
    for epoch in 1..=7u64 {
        s.handle_response(now, Epoch(epoch), 200, ES, None).unwrap();
        s.handle_eof(now, Epoch(epoch)).unwrap();
        let (_, e) = s.take();
        let Some(Event::Reconnecting { attempt, at, .. }) = e.last() else {
            panic!("{e:?}")
        };
        attempts.push(*attempt);
        now = *at;
        s.handle_timeout(now);
        s.take();
    }
    assert_eq!(attempts, [1, 2, 3, 4, 5, 6, 7]);
    // Now a stream that stays up for 30 s resets the counter.
    s.handle_response(now, Epoch(8), 200, ES, None).unwrap();
    s.handle_bytes(now + Duration::from_secs(29), Epoch(8), b":\n")
        .unwrap();
    s.handle_eof(now + Duration::from_secs(30), Epoch(8))
        .unwrap();
    let (_, e) = s.take();
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
    assert_eq!(s.take(), (vec![], vec![]));
    s.handle_timeout(ms(150_000));
    let (t, e) = s.take();
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
    assert_eq!(s.take(), (vec![], vec![]));
}

#[test]
fn connect_timeout_retries() {
    let mut s = SseSim::manual(SseConfig::default(), 7);
    s.connect_at(ms(0));
    s.take();
    s.handle_timeout(ms(30_000));
    let (t, e) = s.take();
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
    let mut s = SseSim::manual(SseConfig::default(), 8);
    s.connect_at(ms(0));
    s.take();
    s.handle_response(ms(0), Epoch(1), 503, None, None).unwrap();
    s.take();
    s.disconnect_at(ms(300));
    assert_eq!(
        s.take(),
        (
            vec![Transmit::End],
            vec![Event::Closed {
                why: CloseReason::Local
            }]
        )
    );
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(ms(3_600_000));
    assert_eq!(s.handle_eof(ms(3_600_000), Epoch(1)), Ok(()));
    s.disconnect_at(ms(3_600_001));
    assert_eq!(s.take(), (vec![], vec![]), "nothing after disconnect");
}

#[test]
fn disconnect_with_an_open_stream_closes_it() {
    let mut s = opened(9);
    s.disconnect_at(ms(10));
    assert_eq!(
        s.take(),
        (
            vec![Transmit::Close { epoch: Epoch(1) }, Transmit::End],
            vec![Event::Closed {
                why: CloseReason::Local
            }]
        )
    );
    assert_eq!(s.handle_bytes(ms(11), Epoch(1), b"data: x\n\n"), Ok(9));
    assert_eq!(s.take(), (vec![], vec![]));
}

#[test]
fn local_misuse_is_an_error_and_changes_nothing() {
    let mut s = SseSim::manual(SseConfig::default(), 1);
    assert_eq!(
        s.handle_bytes(ms(0), Epoch(1), b"x"),
        Err(SocketError::UnknownEpoch(Epoch(1)))
    );
    s.connect_at(ms(0));
    s.take();
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
    assert_eq!(s.take(), (vec![], vec![Event::Open]));
}

#[test]
fn a_full_event_queue_pushes_back_on_the_driver() {
    let mut config = SseConfig::default();
    config.max_queued_events = 2;
    let mut s = SseSim::manual(config, 1);
    s.connect_at(ms(0));
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    s.take();
    let body = b"data: 1\n\ndata: 2\n\ndata: 3\n\n";
    let n = s.handle_bytes(ms(1), Epoch(1), body).unwrap();
    assert_eq!(n, 18, "stops after two events");
    assert_eq!(s.take().1.len(), 2);
    assert_eq!(s.handle_bytes(ms(1), Epoch(1), &body[n..]), Ok(9));
    assert_eq!(s.take().1.len(), 1);
}

#[test]
fn an_oversized_event_is_reported_and_the_stream_continues() {
    let mut config = SseConfig::default();
    config.parser.max_line_len = 8;
    let mut s = SseSim::manual(config, 1);
    s.connect_at(ms(0));
    s.handle_response(ms(0), Epoch(1), 200, ES, None).unwrap();
    s.take();
    s.handle_bytes(ms(1), Epoch(1), b"data: far too long\n\ndata: ok\n\n")
        .unwrap();
    let (_, e) = s.take();
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

#[test]
fn an_unsendable_id_is_delivered_counted_and_skipped_when_resuming() {
    let mut s = opened(1);
    s.handle_bytes(ms(1), Epoch(1), b"id: 1\ndata: a\n\nid: 2\x7f\ndata: b\n\n")
        .unwrap();
    let (_, e) = s.take();
    assert_eq!(
        e,
        [
            Event::Message(Message {
                event: "message".into(),
                data: "a".into(),
                id: "1".into()
            }),
            Event::Message(Message {
                event: "message".into(),
                data: "b".into(),
                id: "2\u{7f}".into()
            }),
            Event::UnsendableId {
                id: "2\u{7f}".into(),
                why: Unsendable::Byte { at: 1, byte: 0x7F }
            },
        ]
    );
    assert_eq!(s.stats().unsendable_ids, 1);
    assert_eq!(s.session().last_event_id(), "1");
    s.handle_eof(ms(2), Epoch(1)).unwrap();
    let d = take_delay(&mut s);
    s.handle_timeout(ms(2) + d);
    assert_eq!(s.take().0, [get_open(2, Some("1".into()))]);
}

#[test]
fn a_request_that_cannot_be_built_fails_once_and_is_not_retried() {
    let mut s = SseSim::manual(SseConfig::default(), 1);
    s.connect_at(ms(0));
    s.take();
    let long = "x".repeat(1000);
    s.handle_request_invalid(ms(1), Epoch(1), &long).unwrap();
    assert_eq!(
        s.take(),
        (
            vec![Transmit::Close { epoch: Epoch(1) }, Transmit::End],
            vec![Event::Failed {
                why: FailReason::InvalidRequest("x".repeat(256))
            }]
        )
    );
    assert_eq!(s.poll_timeout(), None, "no retry scheduled");
    // Late input for that request is stale: ignored and counted.
    assert_eq!(s.handle_request_invalid(ms(2), Epoch(1), "again"), Ok(()));
    assert_eq!(
        s.handle_error(ms(2), Epoch(1), SocketLoss::NetworkError),
        Ok(())
    );
    assert_eq!(s.take(), (vec![], vec![]));
    assert_eq!(s.stats().stale_inputs, 2);
    // Once open, the request was evidently built: that report is misuse.
    let mut s = opened(1);
    assert_eq!(
        s.handle_request_invalid(ms(1), Epoch(1), "late"),
        Err(SocketError::AlreadyOpen(Epoch(1)))
    );
}

#[test]
fn a_network_error_carries_its_kind() {
    let mut s = SseSim::manual(SseConfig::default(), 1);
    s.connect_at(ms(0));
    s.take();
    s.handle_error(ms(1), Epoch(1), SocketLoss::TlsRejected)
        .unwrap();
    let (_, e) = s.take();
    assert!(
        matches!(
            e[..],
            [Event::Reconnecting {
                why: DropReason::NetworkError(SocketLoss::TlsRejected),
                attempt: 1,
                ..
            }]
        ),
        "{e:?}"
    );
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

/// Drive `inputs` through the simulator (which checks the contract after each) and return
/// every output with its time.
fn run(seed: u64, inputs: &[Input]) -> Result<Vec<String>, TestCaseError> {
    let mut s = SseSim::manual(SseConfig::default(), seed);
    let mut now = ms(0);
    let mut log = Vec::new();
    for inp in inputs {
        let epoch = s.session().link().epoch();
        match inp {
            Input::Connect => s.connect_at(now),
            Input::Disconnect => s.disconnect_at(now),
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
                let _ = s.handle_error(now, epoch, SocketLoss::NetworkError);
            }
            Input::Timeout(extra) => {
                let extra = Duration::from_millis((*extra).into());
                now = s.poll_timeout().unwrap_or(now).max(now) + extra;
                s.handle_timeout(now);
            }
        }
        // The simulator's invariants already held the session to STYLE 4 after this input
        // (queued output reports `now`; after a timeout the next deadline is later).
        let (t, e) = s.take();
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
