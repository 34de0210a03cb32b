//! One scripted relay conversation whose transcript must not depend on the runtime.
//!
//! The core decides everything from its inputs and its seed, so for the same seed and the
//! same relay the frames it sends and the events the application sees are the same on every
//! adapter. The script waits for an application-visible outcome before each step, so the
//! transcript does not depend on how fast the machine is; durations are left out because the
//! real-time runtimes measure them with their jitter.

use std::time::Duration;

use futures_util::StreamExt;
use tether_core::nostr::{Filter, RelayCheckpoint};
use tether_driver::{Config, SessionEvent, SessionEvents, Subscription, SubscriptionEvent};
use tether_testkit::server::TestRelay;
use tether_testkit::{RelayModel, ReqBudget, StoredEvent};

use crate::{within, Harness};

/// The transcript of the scripted conversation on harness `H`: every text frame the relay
/// received (with its connection number), then every item each subscription yielded, the
/// publish outcome, and every session event.
///
/// The script: connect; subscribe three times to a relay that allows two REQs per second
/// (the third is refused with a hint and retried); publish; let the window pass; sever the
/// connection; the reconnect replays all three and each catches up (NIP-77 is tried and
/// refused as nostr-rs-relay refuses it, then the `since` window; REQs over the budget are
/// refused and retried); once all three report, disconnect.
pub async fn transcript<H: Harness>(seed: u64) -> Vec<String> {
    let mut model = RelayModel::with_events(3);
    model.budget = Some(ReqBudget {
        max: 2,
        window: Duration::from_secs(1),
        hint: true,
    });
    let relay = H::on_server(TestRelay::start(model)).await.unwrap();
    let mut config = Config::default();
    config.seed = Some(seed);
    config.relay.link.reconnect.base = Duration::from_millis(100);
    // The NIP-11 fetch runs beside the socket: when it ends depends on the runtime.
    config.relay_info.fetch = false;
    let client = H::relay(&relay.url(), config);
    let mut session = client.events().unwrap();
    let mut app = Vec::new();
    until_connected::<H>(&mut session, &mut app).await;

    let mut subs = Vec::new();
    for name in ["a", "b", "c"] {
        let filter = Filter::new(r#"{"kinds":[1]}"#).unwrap();
        let mut sub = client.subscribe(vec![filter]).await.unwrap();
        until_eose::<H>(name, &mut sub, &mut app).await;
        subs.push((name, sub));
    }
    let published = client.publish(StoredEvent::new(9, 1_000_009, 1).json).await;
    app.push(format!("publish: {published:?}"));

    // Let the relay's REQ window pass, then cut the connection under the subscriptions.
    H::sleep(Duration::from_millis(1_200)).await;
    relay.sever_all();
    until_connected::<H>(&mut session, &mut app).await;
    for (name, sub) in &mut subs {
        until_item::<H>(name, sub, &mut app, |item| {
            matches!(item, SubscriptionEvent::CaughtUp(_))
        })
        .await;
    }
    client.disconnect().await.unwrap();
    drop(subs);
    drop(client);
    let rest = within::<H, _>(Duration::from_secs(10), session.collect::<Vec<_>>())
        .await
        .expect("the driver ends once every handle is gone");
    app.extend(rest.iter().map(session_line));

    let mut transcript: Vec<String> = relay
        .log()
        .received
        .into_iter()
        .map(|(_, conn, text)| format!("relay got on {conn}: {}", without_wall_clock(&text)))
        .collect();
    transcript.extend(app);
    transcript
}

async fn until_connected<H: Harness>(session: &mut SessionEvents, app: &mut Vec<String>) {
    let found = within::<H, _>(Duration::from_secs(10), async {
        while let Some(event) = session.next().await {
            app.push(session_line(&event));
            if event == SessionEvent::Connected {
                return;
            }
        }
        panic!("session events ended");
    })
    .await;
    assert!(found.is_some(), "not connected in time: {app:#?}");
}

async fn until_eose<H: Harness>(name: &str, sub: &mut Subscription, app: &mut Vec<String>) {
    until_item::<H>(name, sub, app, |item| *item == SubscriptionEvent::Eose).await;
}

/// Record `sub`'s items until one that `last` picks.
async fn until_item<H: Harness>(
    name: &str,
    sub: &mut Subscription,
    app: &mut Vec<String>,
    last: impl Fn(&SubscriptionEvent) -> bool,
) {
    let found = within::<H, _>(Duration::from_secs(10), async {
        while let Some(item) = sub.next().await {
            let done = last(&item);
            app.push(format!("{name}: {}", sub_line(&item)));
            if done {
                return;
            }
        }
        panic!("subscription {name} ended");
    })
    .await;
    assert!(found.is_some(), "{name} not there in time: {app:#?}");
}

/// A subscription item without its measured durations.
fn sub_line(item: &SubscriptionEvent) -> String {
    match item {
        SubscriptionEvent::Event(event) => format!("event {}", event.id),
        SubscriptionEvent::Retrying { attempt, .. } => format!("retrying, attempt {attempt}"),
        // `exact_since` follows the wall clock.
        SubscriptionEvent::CaughtUp(c) => {
            format!("caught up by {:?}, {} recovered", c.method, c.recovered)
        }
        other => format!("{other:?}"),
    }
}

/// A session event without its measured durations.
fn session_line(event: &SessionEvent) -> String {
    match event {
        SessionEvent::Disconnected { reconnect_in, .. } => format!(
            "session: disconnected, reconnecting: {}",
            reconnect_in.is_some()
        ),
        SessionEvent::RateLimited { .. } => "session: rate limited".to_owned(),
        other => format!("session: {other:?}"),
    }
}

/// `text` with every `"since":N` as `"since":_`: a catch-up's window is anchored in the wall
/// clock, which differs between runs; everything else must match byte for byte.
fn without_wall_clock(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\"since\":") {
        let (head, tail) = rest.split_at(at + "\"since\":".len());
        out.push_str(head);
        out.push('_');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// A checkpoint to restore on every runtime: three subscriptions that each had their
/// stored events and EOSE from a relay of three events, taken under harness `H`, as JSON.
pub async fn checkpoint_after_a_conversation<H: Harness>(seed: u64) -> Vec<u8> {
    let relay = H::on_server(TestRelay::start(RelayModel::with_events(3)))
        .await
        .unwrap();
    let client = H::relay(&relay.url(), restore_config(seed));
    let mut app = Vec::new();
    let mut subs = Vec::new();
    for name in ["a", "b", "c"] {
        let filter = Filter::new(r#"{"kinds":[1]}"#).unwrap();
        let mut sub = client.subscribe(vec![filter]).await.unwrap();
        until_eose::<H>(name, &mut sub, &mut app).await;
        subs.push(sub);
    }
    let bytes = client.checkpoint().await.unwrap().to_json();
    client.disconnect().await.unwrap();
    bytes
}

/// The transcript of restoring `checkpoint` under harness `H` against a relay that holds
/// the three old events and two that reached it while no process ran: every frame the
/// relay received, and every item each restored subscription yielded until its catch-up.
pub async fn restored_transcript<H: Harness>(seed: u64, checkpoint: &[u8]) -> Vec<String> {
    let mut model = RelayModel::with_events(3);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    model.events.push(StoredEvent::new(10, now - 1, 1));
    model.events.push(StoredEvent::new(11, now - 30, 1));
    let relay = H::on_server(TestRelay::start(model)).await.unwrap();
    let checkpoint = RelayCheckpoint::from_json(checkpoint).unwrap();
    let (client, mut subs) = H::restore_relay(&relay.url(), restore_config(seed), &checkpoint);
    let mut app = Vec::new();
    // The subscriptions are kept until after the disconnect: a dropped one would send a
    // CLOSE whose arrival, racing the disconnect, depends on the runtime.
    for (name, sub) in ["a", "b", "c"].into_iter().zip(subs.iter_mut()) {
        until_item::<H>(name, sub, &mut app, |item| {
            matches!(item, SubscriptionEvent::CaughtUp(_))
        })
        .await;
    }
    client.disconnect().await.unwrap();
    drop(subs);
    let mut transcript: Vec<String> = relay
        .log()
        .received
        .into_iter()
        .map(|(_, conn, text)| format!("relay got on {conn}: {}", without_wall_clock(&text)))
        .collect();
    transcript.extend(app);
    transcript
}

/// The configuration of the restore scripts: seeded, no NIP-11 fetch (it races the socket).
fn restore_config(seed: u64) -> Config {
    let mut config = Config::default();
    config.seed = Some(seed);
    config.relay_info.fetch = false;
    config
}
