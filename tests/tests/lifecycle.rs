//! The application's lifecycle as input (suspend, resume, a network change, no network),
//! one transcript per case: a zombie socket found within the resume probe, a live socket
//! left alone, a backoff from the old network dropped, nothing attempted while offline.

use std::time::Duration;

use tether_core::link::SocketLoss;
use tether_core::nostr::{Disconnect, Event, Priority, RelayConfig};
use tether_testkit::{Action, RelayModel, Sim, StoredEvent, UNIX_START};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn sim() -> Sim {
    let mut relay = RelayModel::with_events(0);
    relay.events.push(StoredEvent::new(1, UNIX_START - 5, 1));
    let mut s = Sim::new(RelayConfig::default(), 11, relay);
    s.at(Duration::ZERO, Action::Connect);
    s.at(
        Duration::from_millis(100),
        Action::Subscribe(vec![r#"{"kinds":[1]}"#.into()], Priority::NORMAL),
    );
    s
}

/// Socket losses the application heard, with when.
fn losses(s: &Sim) -> Vec<SocketLoss> {
    s.heard(|e| match e {
        Event::Disconnected {
            why: Disconnect::Lost(why),
            ..
        } => Some(*why),
        _ => None,
    })
}

fn opens(s: &Sim) -> usize {
    s.transcript().matches("tx  Open").count()
}

#[test]
fn a_socket_that_died_while_suspended_is_found_within_the_resume_probe() {
    let mut s = sim();
    s.at(secs(10), Action::Suspend);
    // The NAT forgets the connection while the app sleeps: no close ever arrives.
    s.at(secs(60), Action::Vanish);
    s.at(
        secs(70),
        Action::Store(StoredEvent::new(2, UNIX_START + 70, 1)),
    );
    s.at(secs(610), Action::Resume);
    s.run_for(secs(640));
    // Nothing fired during the 10 minutes away: no ping, no pong timeout.
    let pings = s.transcript().matches("tx  Ping").count();
    assert_eq!(
        pings,
        1,
        "one ping: the probe at resume\n{}",
        s.transcript()
    );
    assert_eq!(losses(&s), [SocketLoss::ResumeProbe]);
    let dead_at = s
        .transcript()
        .lines()
        .find(|l| l.contains("ResumeProbe"))
        .and_then(|l| l.trim_start().split("ms").next()?.parse::<u64>().ok())
        .expect("a loss line");
    assert_eq!(
        dead_at, 615_000,
        "the probe's 5 s after the resume at 610 s"
    );
    // Reconnected, replayed, and the event stored meanwhile caught up.
    let got = s.heard(|e| match e {
        Event::Received { id, .. } => Some(id.0[31]),
        _ => None,
    });
    assert_eq!(got, [1, 2]);
    assert_eq!(
        s.heard(|e| matches!(e, Event::CaughtUp { .. }).then_some(()))
            .len(),
        1
    );
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_live_socket_carries_on_after_a_resume_with_nothing_re_sent() {
    let mut s = sim();
    s.at(secs(10), Action::Suspend);
    s.at(secs(610), Action::Resume);
    s.run_for(secs(620));
    assert!(losses(&s).is_empty(), "{}", s.transcript());
    assert_eq!(opens(&s), 1);
    assert_eq!(s.reqs().count(), 1, "nothing re-sent");
    insta::assert_snapshot!(s.transcript());
}

#[test]
fn a_network_change_drops_the_old_networks_backoff() {
    let mut s = sim();
    // The relay refuses for a while: the backoff climbs toward its cap.
    s.at(secs(2), Action::RelayDown);
    s.at(secs(40), Action::RelayUp);
    s.at(secs(41), Action::NetworkChanged(false));
    s.run_for(secs(60));
    let transcript = s.transcript().to_owned();
    let reconnected = transcript
        .lines()
        .filter(|l| l.contains("tx  Open"))
        .filter_map(|l| l.trim_start().split("ms").next()?.parse::<u64>().ok())
        .find(|&at| at >= 41_000)
        .expect("a reconnect after the change");
    assert!(
        reconnected <= 42_000,
        "within the 1 s jitter of the change, not the old backoff: {reconnected} ms\n{transcript}"
    );
    insta::assert_snapshot!(transcript);
}

#[test]
fn offline_for_five_minutes_makes_no_attempt_and_spends_nothing() {
    let mut s = sim();
    s.at(secs(5), Action::Online(false));
    s.at(secs(6), Action::DropSocket);
    s.at(secs(306), Action::Online(true));
    s.run_for(secs(320));
    let transcript = s.transcript().to_owned();
    let opens_at: Vec<u64> = transcript
        .lines()
        .filter(|l| l.contains("tx  Open"))
        .filter_map(|l| l.trim_start().split("ms").next()?.parse::<u64>().ok())
        .collect();
    assert_eq!(opens_at.len(), 2, "{transcript}");
    assert!(
        (306_000..=307_000).contains(&opens_at[1]),
        "at once when the network is back: {opens_at:?}"
    );
    assert_eq!(s.session.link().attempts(), 0, "no attempt charged");
    insta::assert_snapshot!(transcript);
}
