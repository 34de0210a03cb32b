//! Rules that used to be decided in the drivers and are the core's now: when to fetch a
//! relay's NIP-11 document, when an SSE stream is over, and what each deadline is for.

use std::time::Duration;

use tether_core::link::{Epoch, SocketLoss};
use tether_core::nostr::{RelayConfig, RelaySession, Transmit};
use tether_core::pool::{PoolConfig, RelayPool};
use tether_core::sse::{self, Request, SseConfig};
use tether_core::{Instant, SseSession, Wake};

/// A relay session's open of socket `epoch` (a session names no URL: its driver knows it).
fn open(epoch: u64) -> Transmit {
    Transmit::Open {
        epoch: Epoch(epoch),
        url: None,
    }
}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn transmits(s: &mut RelaySession) -> Vec<Transmit> {
    let out: Vec<_> = std::iter::from_fn(|| s.poll_transmit()).collect();
    while s.poll_event().is_some() {}
    out
}

fn session(refresh: Option<Duration>) -> RelaySession {
    let mut config = RelayConfig::default();
    config.info_refresh = refresh;
    RelaySession::new(config, 7)
}

#[test]
fn the_document_is_asked_for_once_the_first_socket_opens_and_again_only_after_the_refresh_period() {
    let mut s = session(Some(Duration::from_secs(3600)));
    s.connect(ms(0));
    // Not beside the dial: to a dead relay that would be a second connection for nothing.
    assert_eq!(transmits(&mut s), [open(1)]);
    s.handle_open(ms(10), Epoch(1)).unwrap();
    assert_eq!(transmits(&mut s), [Transmit::FetchInfo]);

    // A drop and reconnect within the hour: the socket again, the document not.
    s.handle_close(ms(1_000), Epoch(1), SocketLoss::NetworkError)
        .unwrap();
    transmits(&mut s);
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert_eq!(transmits(&mut s), [open(2)]);

    // An hour after the first ask, the next socket asks again (a failed fetch counted as
    // an ask: nothing told the core it failed).
    s.handle_open(at + Duration::from_millis(10), Epoch(2))
        .unwrap();
    assert_eq!(transmits(&mut s), []);
    let later = ms(3_600_000);
    s.handle_close(later, Epoch(2), SocketLoss::NetworkError)
        .unwrap();
    transmits(&mut s);
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert_eq!(transmits(&mut s), [open(3)]);
    s.handle_open(at + Duration::from_millis(10), Epoch(3))
        .unwrap();
    assert_eq!(transmits(&mut s), [Transmit::FetchInfo]);
}

#[test]
fn a_relay_that_never_opens_is_never_asked_for_its_document() {
    let mut s = session(Some(Duration::from_secs(3600)));
    s.connect(ms(0));
    let mut asked = Vec::new();
    while asked.len() < 5 {
        let sent = transmits(&mut s);
        asked.extend(sent.iter().cloned());
        let Some(Transmit::Open { epoch, .. }) = sent.last().cloned() else {
            let at = s.poll_timeout().unwrap();
            s.handle_timeout(at);
            continue;
        };
        s.handle_close(s.now(), epoch, SocketLoss::ConnectionRefused)
            .unwrap();
        let at = s.poll_timeout().unwrap();
        s.handle_timeout(at);
    }
    asked.extend(transmits(&mut s));
    assert_eq!(
        asked,
        (1..=5)
            .map(|e| Transmit::Open {
                epoch: Epoch(e),
                url: None,
            })
            .collect::<Vec<_>>()
    );
}

#[test]
fn asks_turned_on_while_a_socket_is_open_ask_at_once_and_follow_the_period() {
    let mut s = session(None);
    s.connect(ms(0));
    assert_eq!(transmits(&mut s), [open(1)]);
    // Turned on while the socket opens: asked when it opens.
    s.set_info_refresh(Some(Duration::from_secs(60)));
    assert_eq!(transmits(&mut s), []);
    s.handle_open(ms(2), Epoch(1)).unwrap();
    assert_eq!(transmits(&mut s), [Transmit::FetchInfo]);
    s.handle_close(ms(5), Epoch(1), SocketLoss::NetworkError)
        .unwrap();
    transmits(&mut s);
    // Turned on again while waiting to reconnect: nothing until a socket, and within the
    // period not even then.
    s.set_info_refresh(Some(Duration::from_secs(60)));
    assert_eq!(transmits(&mut s), []);
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert_eq!(transmits(&mut s), [open(2)]);
    s.handle_open(at, Epoch(2)).unwrap();
    assert_eq!(transmits(&mut s), []);
    s.set_info_refresh(None);
    assert_eq!(transmits(&mut s), []);
    // Turned on while open (a driver given its HTTP client late): asked at once.
    s.set_info_refresh(Some(Duration::from_secs(1)));
    assert_eq!(transmits(&mut s), [Transmit::FetchInfo]);
}

#[test]
fn every_relay_of_a_pool_asks_for_its_own_document() {
    let mut pool = RelayPool::new(PoolConfig::default(), 3);
    pool.set_info_refresh(Some(Duration::from_secs(3600)));
    let a = pool.add_relay(ms(0)).unwrap();
    let b = pool.add_relay(ms(0)).unwrap();
    let opens: Vec<_> = std::iter::from_fn(|| pool.poll_transmit()).collect();
    for (relay, t) in opens {
        if let Transmit::Open { epoch, .. } = t {
            pool.handle_open(ms(1), relay, epoch).unwrap();
        }
    }
    let asked: Vec<_> = std::iter::from_fn(|| pool.poll_transmit())
        .filter(|(_, t)| *t == Transmit::FetchInfo)
        .map(|(relay, _)| relay)
        .collect();
    assert_eq!(asked, [a, b]);
}

#[test]
fn wake_reasons_name_the_deadline_poll_timeout_gives() {
    let mut s = session(None);
    assert_eq!(s.poll_wake(), None);
    s.connect(ms(0));
    assert_eq!(s.poll_wake(), Some((ms(0), Wake::Output)));
    transmits(&mut s);
    // Connecting: the connect timeout (10 s).
    assert_eq!(s.poll_wake(), Some((ms(10_000), Wake::ConnectTimeout)));
    s.handle_open(ms(10), Epoch(1)).unwrap();
    transmits(&mut s);
    // Open and quiet: a ping after 30 s of silence.
    assert_eq!(s.poll_wake(), Some((ms(30_010), Wake::Ping)));
    s.handle_timeout(ms(30_010));
    assert_eq!(transmits(&mut s), [Transmit::Ping]);
    assert_eq!(s.poll_wake(), Some((ms(50_010), Wake::PongTimeout)));
    s.handle_close(ms(40_000), Epoch(1), SocketLoss::NetworkError)
        .unwrap();
    transmits(&mut s);
    let (at, why) = s.poll_wake().unwrap();
    assert_eq!(why, Wake::Reconnect);
    assert_eq!(Some(at), s.poll_timeout());
    assert_eq!(Wake::PongTimeout.to_string(), "pong-timeout");
}

fn sse_transmits(s: &mut SseSession) -> Vec<sse::Transmit> {
    std::iter::from_fn(|| s.poll_transmit()).collect()
}

fn sse_events(s: &mut SseSession) -> Vec<sse::Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn an_sse_stream_is_over_when_the_core_says_so() {
    let mut s = SseSession::with_request(SseConfig::default(), Request::get(), 5);
    s.connect(ms(0));
    let opened = sse_transmits(&mut s);
    assert!(matches!(
        opened[..],
        [sse::Transmit::Open {
            epoch: Epoch(1),
            ..
        }]
    ));
    // A 500 is retried: no end.
    s.handle_response(ms(5), Epoch(1), 500, None, None).unwrap();
    assert!(!sse_transmits(&mut s).contains(&sse::Transmit::End));
    sse_events(&mut s);
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    sse_transmits(&mut s);
    // A 404 is final: the end comes with the failure, which is the last event.
    s.handle_response(at, Epoch(2), 404, None, None).unwrap();
    assert_eq!(sse_transmits(&mut s).last(), Some(&sse::Transmit::End));
    let events = sse_events(&mut s);
    assert!(
        matches!(events.last(), Some(sse::Event::Failed { .. })),
        "{events:?}"
    );
    assert_eq!(s.poll_wake(), None, "nothing is left to wake for");
}

#[test]
fn closing_an_sse_stream_ends_it() {
    let mut s = SseSession::with_request(SseConfig::default(), Request::get(), 5);
    s.connect(ms(0));
    sse_transmits(&mut s);
    s.disconnect(ms(1));
    assert_eq!(
        sse_transmits(&mut s),
        [sse::Transmit::Close { epoch: Epoch(1) }, sse::Transmit::End]
    );
    assert!(matches!(
        sse_events(&mut s)[..],
        [sse::Event::Closed { .. }]
    ));
}
