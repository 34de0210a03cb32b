//! Cross-runtime determinism: `tests/data/scenario.json` driven through the Rust API, its
//! outputs encoded as the C ABI encodes them, gives `tests/data/scenario.transcript`
//! byte for byte. `bindings/python/tests/test_determinism.py` drives the same scenario from
//! Python through the C ABI and compares with the same file: one seed, one transcript,
//! whichever runtime drives the core. `TETHER_BLESS=1` rewrites the transcript.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;
use tether_core::line::nostr::{Line, TransmitLine};
use tether_core::line::{write_into, Ids};
use tether_core::nostr::{
    ChallengeId, Filter, Priority, RelayCheckpoint, RelayConfig, RelaySession, SubscriptionId,
};
use tether_core::{Epoch, Instant, SocketLoss};

fn at(step: &[Value], i: usize) -> u64 {
    step[i].as_u64().expect("a number")
}

fn text(step: &[Value], i: usize) -> &str {
    step[i].as_str().expect("a string")
}

/// Run the scenario; the transcript the ABI's encoders make of it.
fn transcript(scenario: &Value) -> String {
    let seed = scenario["seed"].as_u64().expect("seed");
    let mut session = RelaySession::new(RelayConfig::default(), seed);
    let mut out = String::new();
    for (n, step) in scenario["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .enumerate()
    {
        let step = step.as_array().expect("a step");
        let now = Instant::from_millis(at(step, 1));
        let outcome = match text(step, 0) {
            "wall" => {
                session.set_wall_clock(now, at(step, 2));
                Ok(())
            }
            "subscribe" => {
                let filters: Vec<&serde_json::value::RawValue> =
                    serde_json::from_str(text(step, 2)).expect("filters");
                let filters = filters
                    .iter()
                    .map(|f| Filter::new(f.get()).expect("a filter"))
                    .collect();
                let priority = Priority(step[3].as_i64().expect("priority") as i32);
                session
                    .subscribe(now, filters, priority)
                    .map(|id| writeln!(out, "{n} sub {}", id.0).expect("write"))
                    .map_err(|e| e.to_string())
            }
            "unsubscribe" => session
                .unsubscribe(now, SubscriptionId(at(step, 2)))
                .map_err(|e| e.to_string()),
            "connect" => {
                session.connect(now);
                Ok(())
            }
            "disconnect" => {
                session.disconnect(now);
                Ok(())
            }
            "open" => session
                .handle_open(now, Epoch(at(step, 2)))
                .map_err(|e| e.to_string()),
            "frame" => session
                .handle_frame(now, Epoch(at(step, 2)), text(step, 3))
                .map_err(|e| e.to_string()),
            "close" => {
                assert_eq!(
                    at(step, 3),
                    4,
                    "the scenario closes with TETHER_LOSS_CLOSED_BY_PEER"
                );
                let code = u16::try_from(at(step, 4)).ok();
                session
                    .handle_close(now, Epoch(at(step, 2)), SocketLoss::ClosedByPeer { code })
                    .map_err(|e| e.to_string())
            }
            "authenticate" => session
                .authenticate(now, ChallengeId(at(step, 2)), text(step, 3))
                .map(|_| ())
                .map_err(|e| e.to_string()),
            "timeout" => {
                session.handle_timeout(now);
                Ok(())
            }
            // The process stops (its checkpoint taken) and a new one restores it and
            // connects: the checkpoint's bytes are part of the transcript.
            "restart" => {
                let bytes = session.checkpoint().to_json();
                writeln!(out, "{n} checkpoint {}", String::from_utf8_lossy(&bytes)).expect("write");
                let saved = RelayCheckpoint::from_json(&bytes).expect("our own checkpoint");
                session = RelaySession::restore(
                    RelayConfig::default(),
                    at(step, 3),
                    &saved,
                    now,
                    at(step, 2),
                )
                .expect("our own checkpoint restores");
                session.connect(now);
                Ok(())
            }
            other => panic!("unknown step {other}"),
        };
        if let Err(error) = outcome {
            writeln!(out, "{n} error {error}").expect("write");
        }
        loop {
            let mut buf = Vec::new();
            if let Some(t) = session.poll_transmit() {
                write_into(&TransmitLine::new(&t, None), &mut buf);
                writeln!(
                    out,
                    "{n} transmit {}",
                    String::from_utf8(buf).expect("UTF-8")
                )
                .expect("write");
                continue;
            }
            if let Some(e) = session.poll_event() {
                write_into(&Line::relay_event(&e, session.now(), None, &Ids), &mut buf);
                writeln!(out, "{n} event {}", String::from_utf8(buf).expect("UTF-8"))
                    .expect("write");
                continue;
            }
            break;
        }
        match session.poll_timeout() {
            Some(at) => {
                let d = at.since_origin();
                let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
                writeln!(out, "{n} timeout {ms}").expect("write");
            }
            None => writeln!(out, "{n} timeout none").expect("write"),
        }
    }
    out
}

#[test]
fn the_scenario_gives_the_committed_transcript() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let scenario: Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("scenario.json")).expect("scenario.json"),
    )
    .expect("JSON");
    let got = transcript(&scenario);
    // The same seed twice: the same bytes.
    assert_eq!(got, transcript(&scenario));
    let path = data.join("scenario.transcript");
    if std::env::var_os("TETHER_BLESS").is_some() {
        std::fs::write(&path, &got).expect("write the transcript");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(got == want, "the transcript changed:\n{got}");
}
