//! The relay session owns the whole socket contract: epochs on every socket input (the same
//! rule as the SSE session), stale AUTH answers refused, binary frames and REQs counted.

use std::time::Duration;

use tether_core::link::{Epoch, SocketError, SocketLoss};
use tether_core::nostr::{
    Carries, ChallengeId, Disconnect, Error, Event, Filter, Priority, RelayConfig, RelaySession,
    Transmit,
};
use tether_core::Instant;

/// A relay session's open of socket `epoch` (a session names no URL: its driver knows it).
fn open_of(epoch: u64) -> Transmit {
    Transmit::Open {
        epoch: Epoch(epoch),
        url: None,
    }
}

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn drain(s: &mut RelaySession) -> (Vec<Transmit>, Vec<Event>) {
    let (mut tx, mut ev) = (Vec::new(), Vec::new());
    loop {
        match (s.poll_transmit(), s.poll_event()) {
            (None, None) => return (tx, ev),
            (t, e) => {
                tx.extend(t);
                ev.extend(e);
            }
        }
    }
}

/// A session with socket 1 open.
fn open() -> RelaySession {
    let mut s = RelaySession::new(RelayConfig::default(), 7);
    s.connect(ms(0));
    assert_eq!(s.poll_transmit(), Some(open_of(1)));
    s.handle_open(ms(10), Epoch(1)).unwrap();
    drain(&mut s);
    s
}

const AUTH: &str = r#"{"id":"00000000000000000000000000000000000000000000000000000000000000aa","pubkey":"p","created_at":1,"kind":22242,"tags":[],"content":"","sig":"s"}"#;

#[test]
fn an_epoch_never_handed_out_is_local_misuse() {
    let mut s = open();
    assert_eq!(
        s.handle_frame(ms(20), Epoch(2), r#"["NOTICE","x"]"#),
        Err(SocketError::UnknownEpoch(Epoch(2)))
    );
    assert_eq!(
        s.handle_open(ms(20), Epoch(9)),
        Err(SocketError::UnknownEpoch(Epoch(9)))
    );
    assert_eq!(
        s.handle_close(ms(20), Epoch(3), SocketLoss::NetworkError),
        Err(SocketError::UnknownEpoch(Epoch(3)))
    );
    assert!(s.link().is_open(), "misuse changes nothing");
    assert_eq!(s.stats().frames, 0);
}

#[test]
fn input_before_open_and_a_second_open_are_local_misuse() {
    let mut s = RelaySession::new(RelayConfig::default(), 7);
    s.connect(ms(0));
    drain(&mut s);
    assert_eq!(
        s.handle_frame(ms(5), Epoch(1), r#"["NOTICE","x"]"#),
        Err(SocketError::NotOpen(Epoch(1)))
    );
    assert_eq!(
        s.handle_pong(ms(5), Epoch(1)),
        Err(SocketError::NotOpen(Epoch(1)))
    );
    assert_eq!(
        s.handle_binary(ms(5), Epoch(1), 3),
        Err(SocketError::NotOpen(Epoch(1)))
    );
    s.handle_open(ms(10), Epoch(1)).unwrap();
    assert_eq!(
        s.handle_open(ms(11), Epoch(1)),
        Err(SocketError::AlreadyOpen(Epoch(1)))
    );
}

#[test]
fn input_for_a_socket_already_let_go_is_ignored_and_counted() {
    let mut s = open();
    s.handle_close(
        ms(20),
        Epoch(1),
        SocketLoss::ClosedByPeer { code: Some(1001) },
    )
    .unwrap();
    let (_, events) = drain(&mut s);
    let [Event::Disconnected {
        reconnect_at: Some(_),
        why,
    }] = events.as_slice()
    else {
        panic!("one Disconnected, got {events:?}");
    };
    assert_eq!(
        *why,
        Disconnect::Lost(SocketLoss::ClosedByPeer { code: Some(1001) })
    );
    // Late input for socket 1, which is gone: stale, not misuse.
    s.handle_frame(ms(21), Epoch(1), r#"["NOTICE","late"]"#)
        .unwrap();
    s.handle_close(ms(22), Epoch(1), SocketLoss::NetworkError)
        .unwrap();
    s.handle_open(ms(23), Epoch(1)).unwrap();
    assert_eq!(s.stats().stale_socket, 3);
    assert_eq!(drain(&mut s), (vec![], vec![]), "stale input has no effect");
    // The reconnect hands out socket 2; socket 1 stays stale after it opens.
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert_eq!(s.poll_transmit(), Some(open_of(2)));
    s.handle_open(at + Duration::from_millis(5), Epoch(2))
        .unwrap();
    s.handle_frame(at + Duration::from_millis(6), Epoch(1), r#"["NOTICE","x"]"#)
        .unwrap();
    assert_eq!(s.stats().stale_socket, 4);
}

#[test]
fn binary_frames_are_counted_and_show_the_relay_is_alive() {
    let mut s = open();
    // Just before the 30 s ping, a binary frame arrives: the relay is alive.
    s.handle_binary(ms(29_000), Epoch(1), 1024).unwrap();
    assert_eq!(s.stats().binary, 1);
    s.handle_timeout(ms(30_010));
    assert_eq!(s.poll_transmit(), None, "no ping: traffic 1 s ago");
    assert_eq!(s.poll_timeout(), Some(ms(59_000)));
}

#[test]
fn an_answer_to_a_superseded_challenge_is_refused() {
    let mut s = open();
    s.handle_frame(ms(20), Epoch(1), r#"["AUTH","first"]"#)
        .unwrap();
    s.handle_frame(ms(21), Epoch(1), r#"["AUTH","second"]"#)
        .unwrap();
    let (_, events) = drain(&mut s);
    let ids: Vec<ChallengeId> = events
        .iter()
        .filter_map(|e| match e {
            Event::AuthChallenge { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(ids, [ChallengeId(1), ChallengeId(2)]);
    assert_eq!(
        s.authenticate(ms(30), ChallengeId(1), AUTH),
        Err(Error::StaleChallenge(ChallengeId(1)))
    );
    assert_eq!(
        s.poll_transmit(),
        None,
        "nothing sent for a stale challenge"
    );
    assert!(s.authenticate(ms(31), ChallengeId(2), AUTH).is_ok());
    let Some(Transmit::Send { carries, .. }) = s.poll_transmit() else {
        panic!("the AUTH goes out");
    };
    assert!(matches!(carries, Carries::Auth(_)));
}

#[test]
fn a_challenge_from_an_earlier_socket_is_refused() {
    let mut s = open();
    s.handle_frame(ms(20), Epoch(1), r#"["AUTH","c"]"#).unwrap();
    drain(&mut s);
    s.handle_close(ms(30), Epoch(1), SocketLoss::NetworkError)
        .unwrap();
    drain(&mut s);
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    s.handle_open(at, Epoch(2)).unwrap();
    drain(&mut s);
    assert_eq!(
        s.authenticate(at, ChallengeId(1), AUTH),
        Err(Error::StaleChallenge(ChallengeId(1)))
    );
}

#[test]
fn every_req_sent_is_counted_and_says_what_it_carries() {
    let mut s = open();
    let filter = || vec![Filter::new(r#"{"kinds":[1]}"#).unwrap()];
    let a = s.subscribe(ms(20), filter(), Priority::default()).unwrap();
    let b = s.subscribe(ms(21), filter(), Priority::default()).unwrap();
    let (sent, _) = drain(&mut s);
    let carried: Vec<Carries> = sent
        .iter()
        .filter_map(|t| match t {
            Transmit::Send { carries, .. } => Some(*carries),
            _ => None,
        })
        .collect();
    assert_eq!(carried, [Carries::Req(a), Carries::Req(b)]);
    assert_eq!(s.stats().reqs, 2);
    s.unsubscribe(ms(22), a).unwrap();
    let (sent, _) = drain(&mut s);
    assert!(matches!(
        sent.as_slice(),
        [Transmit::Send { carries: Carries::Close(id), .. }] if *id == a
    ));
}

#[test]
fn a_dead_socket_says_why() {
    let mut s = open();
    // Silence: ping at 30 s, then no pong for 20 s.
    s.handle_timeout(ms(30_010));
    assert_eq!(s.poll_transmit(), Some(Transmit::Ping));
    s.handle_timeout(ms(50_010));
    let (sent, events) = drain(&mut s);
    assert_eq!(sent, [Transmit::Close { epoch: Epoch(1) }]);
    assert!(matches!(
        events.as_slice(),
        [Event::Disconnected {
            why: Disconnect::Lost(SocketLoss::PongTimeout),
            ..
        }]
    ));
    // The reconnect never opens: the connect timeout names itself.
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert_eq!(s.poll_transmit(), Some(open_of(2)));
    s.handle_timeout(at + Duration::from_secs(10));
    let (sent, events) = drain(&mut s);
    assert_eq!(sent, [Transmit::Close { epoch: Epoch(2) }]);
    assert!(matches!(
        events.as_slice(),
        [Event::Disconnected {
            why: Disconnect::Lost(SocketLoss::ConnectTimeout),
            ..
        }]
    ));
    s.disconnect(at + Duration::from_secs(11));
    let (_, events) = drain(&mut s);
    assert!(matches!(
        events.as_slice(),
        [Event::Disconnected {
            reconnect_at: None,
            why: Disconnect::Requested
        }]
    ));
}
