//! The `tether` binary, run as a child process against tether-testserver's relay and its
//! scripted SSE server on 127.0.0.1: the JSON lines contract, exits, signals and usage errors.
//!
//! Real time: each test takes a few seconds at most (the demo test about 15 s).
//!
//! `TETHER_CLI_UNDER_TEST=/path/to/tether-py cargo test -p tether-cli --test cli` runs the
//! same tests against another implementation of the contract.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use nostr::{Event, JsonUtil};
use serde_json::Value;
use tether_testserver::server::TestRelay;
use tether_testserver::sse::{Message, Reply, ScriptedSse};
use tether_testserver::{RelayModel, StoredEvent};

/// Every `type` `tether req` may write.
const REQ_TYPES: &[&str] = &[
    "connected",
    "disconnected",
    "event",
    "eose",
    "caught_up",
    "closed",
    "notice",
    "auth",
    "retrying",
    "queued",
    "eose_timeout",
    "rate_limited",
    "subscription_limit",
    "authenticated",
    "auth_failed",
    "signer_failed",
    "peer_error",
    "complete",
    "ended",
    "invalid",
    "routed",
];

/// Every `type` `tether sse` may write.
const SSE_TYPES: &[&str] = &[
    "open",
    "message",
    "reconnecting",
    "reconnected",
    "reissued",
    "peer_error",
    "failed",
    "ended",
    "closed",
];

/// No test child may run longer than this.
const CHILD_LIMIT: Duration = Duration::from_secs(40);

/// The binary under test: `tether`, or the one `TETHER_CLI_UNDER_TEST` names (e.g.
/// `tether-py`, which follows the same contract for `req` and `sse`).
fn binary() -> String {
    std::env::var("TETHER_CLI_UNDER_TEST").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tether").into())
}

/// Whether the binary under test is another implementation of the contract (no `demo`).
fn other_binary() -> bool {
    std::env::var_os("TETHER_CLI_UNDER_TEST").is_some()
}

fn tether(args: &[&str]) -> Command {
    let mut command = Command::new(binary());
    command
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Run `tether args` to completion off the async runtime (the relay keeps serving).
async fn run(args: &[&str]) -> Output {
    let mut command = tether(args);
    tokio::task::spawn_blocking(move || {
        let child = command.spawn().expect("the tether binary starts");
        wait_output(child)
    })
    .await
    .expect("the child runner")
}

/// Wait for `child` with [`CHILD_LIMIT`]; kill it and fail past that.
fn wait_output(mut child: Child) -> Output {
    let deadline = Instant::now() + CHILD_LIMIT;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!(
                "tether ran past {CHILD_LIMIT:?}; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Parse every stdout line as a JSON object whose `type` is one of `types`.
fn json_lines(output: &Output, types: &[&str]) -> Vec<Value> {
    let stdout = String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8");
    stdout
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            let kind = value["type"].as_str().unwrap_or_default();
            assert!(types.contains(&kind), "unknown type {kind:?} in {line}");
            value
        })
        .collect()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

fn explain(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_usage_error(output: &Output) {
    assert_eq!(output.status.code(), Some(2), "{}", explain(output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{}", explain(output));
    assert!(stderr.starts_with("tether: "), "{}", explain(output));
    assert!(output.stdout.is_empty(), "{}", explain(output));
}

/// CLOSE frames the relay received.
fn closes(relay: &TestRelay) -> usize {
    relay.log().frames("CLOSE").count()
}

#[tokio::test]
async fn req_until_eose_writes_the_json_lines_contract() {
    let mut model = RelayModel::with_events(3);
    model.events.push(StoredEvent::new(4, 1_000_004, 7));
    let relay = TestRelay::start(model).await.unwrap();
    let url = relay.url();
    let output = run(&[
        "req",
        &url,
        r#"{"kinds":[1]}"#,
        r#"{"kinds":[7]}"#,
        "--until-eose",
        "--seed",
        "7",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    assert_eq!(lines[0]["type"], "connected", "{}", explain(&output));

    let events = of_type(&lines, "event");
    let ids_of = |sub: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["sub"] == sub)
            .map(|e| {
                assert!(e["event"].is_object(), "event embedded as JSON: {e}");
                e["event"]["id"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let id = |n: u64| format!("{n:064x}");
    // Newest first, as relays answer.
    assert_eq!(ids_of("0"), vec![id(3), id(2), id(1)]);
    assert_eq!(ids_of("1"), vec![id(4)]);
    // The raw event is embedded exactly, not re-encoded.
    assert_eq!(
        events[0]["event"],
        serde_json::from_str::<Value>(&StoredEvent::new(3, 1_000_003, 1).json).unwrap()
    );
    let mut eose: Vec<&str> = of_type(&lines, "eose")
        .iter()
        .map(|l| l["sub"].as_str().unwrap())
        .collect();
    eose.sort_unstable();
    assert_eq!(eose, ["0", "1"]);
    // Exiting closes both subscriptions on the wire.
    assert_eq!(closes(&relay), 2, "{}", explain(&output));
}

#[tokio::test]
async fn req_surfaces_a_refused_subscription_once_as_closed() {
    let mut model = RelayModel::with_events(1);
    model.refuse_all = Some("blocked: not on this relay".into());
    let relay = TestRelay::start(model).await.unwrap();
    let url = relay.url();
    let output = run(&["req", &url, "--until-eose"]).await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let closed = of_type(&lines, "closed");
    assert_eq!(closed.len(), 1, "{}", explain(&output));
    assert_eq!(closed[0]["sub"], "0");
    assert_eq!(closed[0]["reason"], "blocked: not on this relay");
    assert_eq!(closed[0]["attempts"], 0);
    assert!(of_type(&lines, "event").is_empty());
}

#[tokio::test]
async fn req_trusts_a_wss_relay_through_cacert_and_refuses_it_without() {
    let ca = tether_testserver::files::TestCa::new(std::path::Path::new("openssl")).unwrap();
    let cert = std::fs::read(ca.leaf_cert()).unwrap();
    let key = std::fs::read(ca.leaf_key()).unwrap();
    let relay = TestRelay::start_tls(RelayModel::with_events(2), &cert, &key)
        .await
        .unwrap();
    let url = relay.url();
    let root = ca.root_cert();
    let output = run(&[
        "req",
        &url,
        "--until-eose",
        "--cacert",
        root.to_str().unwrap(),
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    assert_eq!(lines[0]["type"], "connected", "{}", explain(&output));
    assert_eq!(of_type(&lines, "event").len(), 2, "{}", explain(&output));
    // Without the root the certificate is not trusted: each attempt is lost as tls_rejected.
    let output = run(&["req", &url, "--until-eose", "--duration", "1"]).await;
    let lines = json_lines(&output, REQ_TYPES);
    let why: Vec<&str> = of_type(&lines, "disconnected")
        .iter()
        .map(|l| l["why"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(why.first(), Some(&"tls_rejected"), "{}", explain(&output));
    assert_eq!(why.last(), Some(&"requested"), "--duration ends it");
    assert!(why[..why.len() - 1].iter().all(|w| *w == "tls_rejected"));
    assert!(of_type(&lines, "event").is_empty());
    // A --cacert file that is not a certificate is the caller's to fix.
    let bad = std::env::temp_dir().join(format!("tether-bad-ca-{}.pem", std::process::id()));
    std::fs::write(
        &bad,
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let output = run(&["req", &url, "--cacert", bad.to_str().unwrap()]).await;
    let _ = std::fs::remove_file(&bad);
    assert_usage_error(&output);
}

#[tokio::test]
async fn req_answers_auth_with_the_secret_key() {
    let mut model = RelayModel::with_events(2);
    model.auth_required = true;
    let relay = TestRelay::start(model).await.unwrap();
    let url = relay.url();
    let key = "6b911fd37cdf5c81d4c0adb1ab7fa822ed253ab0ad9aa18d77257c88b29b718e";
    let output = run(&[
        "req",
        &url,
        r#"{"kinds":[1]}"#,
        "--until-eose",
        "--secret-key",
        key,
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let auth = of_type(&lines, "auth");
    assert_eq!(auth.len(), 1, "{}", explain(&output));
    let challenge = auth[0]["challenge"].as_str().unwrap().to_owned();
    assert_eq!(of_type(&lines, "event").len(), 2, "{}", explain(&output));

    let log = relay.log();
    let (_, _, frame) = log.frames("AUTH").next().expect("an AUTH frame");
    let frame: Value = serde_json::from_str(frame).unwrap();
    let event = Event::from_json(frame[1].to_string()).expect("a nostr event");
    event.verify().expect("a valid signature");
    assert_eq!(event.kind.as_u16(), 22242);
    let tags = serde_json::to_value(&event.tags).unwrap();
    assert!(
        tags.as_array()
            .unwrap()
            .contains(&serde_json::json!(["challenge", challenge])),
        "{tags}"
    );
}

#[tokio::test]
async fn req_peer_errors_are_typed_lines_and_a_flood_is_rate_limited() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let url = relay.url();
    let child = tokio::task::spawn_blocking({
        let mut command = tether(&["req", &url, "--duration", "3"]);
        move || wait_output(command.spawn().expect("the tether binary starts"))
    });
    let connected = Instant::now();
    while relay.open_connections() == 0 {
        assert!(
            connected.elapsed() < Duration::from_secs(5),
            "no connection"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // 25 malformed frames at once: 10 lines this second, 15 left out ...
    for _ in 0..25 {
        relay.broadcast("not json");
    }
    // ... and said so by the next line, a second later.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    relay.broadcast(r#"["EVENT","0:1"]"#);
    let output = child.await.unwrap();
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let errors = of_type(&lines, "peer_error");
    assert_eq!(errors.len(), 11, "{}", explain(&output));
    assert_eq!(errors[0]["kind"], "json");
    assert!(errors[0]["excerpt"].as_str().unwrap().chars().count() <= 64);
    assert!(errors[..10].iter().all(|l| l.get("suppressed").is_none()));
    assert_eq!(errors[10]["kind"], "arity");
    assert_eq!(errors[10]["suppressed"], 15);
    assert_eq!(of_type(&lines, "eose").len(), 1, "the subscription is fine");
}

/// A kind-1 note signed by a fixed key, as a relay would store it.
fn signed_note(n: u64) -> StoredEvent {
    use nostr::{EventBuilder, Keys, SecretKey, Timestamp};
    let keys = Keys::new(SecretKey::from_hex(&"02".repeat(32)).unwrap());
    let created_at = 1_700_000_000 + n;
    let json = EventBuilder::text_note(format!("note {n}"))
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(&keys)
        .unwrap()
        .as_json();
    StoredEvent {
        n,
        created_at,
        kind: 1,
        json,
    }
}

fn json_field(event: &StoredEvent, name: &str) -> String {
    let value: Value = serde_json::from_str(&event.json).unwrap();
    value[name].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn req_verify_drops_forgeries_and_still_delivers_the_genuine_copy_once() {
    let genuine: Vec<StoredEvent> = (1..=4).map(signed_note).collect();
    // Relay a: notes 1 and 2, and note 3 with its content changed (the id no longer fits).
    let mut forged3 = genuine[2].clone();
    forged3.json = forged3.json.replace("note 3", "note three");
    let mut a = RelayModel::default();
    a.events = vec![genuine[0].clone(), genuine[1].clone(), forged3];
    // Relay b: the genuine note 3, and note 4 carrying note 1's signature.
    let mut bad_sig4 = genuine[3].clone();
    bad_sig4.json = bad_sig4.json.replace(
        &json_field(&genuine[3], "sig"),
        &json_field(&genuine[0], "sig"),
    );
    let mut b = RelayModel::default();
    b.events = vec![genuine[2].clone(), bad_sig4];
    let (a, b) = (
        TestRelay::start(a).await.unwrap(),
        TestRelay::start(b).await.unwrap(),
    );
    let (a_url, b_url) = (a.url(), b.url());
    let output = run(&[
        "req",
        &a_url,
        &b_url,
        r#"{"kinds":[1]}"#,
        "--verify",
        "--until-eose",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let mut delivered: Vec<String> = of_type(&lines, "event")
        .iter()
        .map(|l| l["event"]["content"].as_str().unwrap().to_owned())
        .collect();
    delivered.sort_unstable();
    assert_eq!(
        delivered,
        ["note 1", "note 2", "note 3"],
        "{}",
        explain(&output)
    );
    let invalid: Vec<(String, String, String)> = of_type(&lines, "invalid")
        .iter()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap().to_owned();
            (field("relay"), field("id"), field("reason"))
        })
        .collect();
    let bad4 = (
        b_url.clone(),
        json_field(&genuine[3], "id"),
        "bad signature".to_owned(),
    );
    let forged = (
        a_url.clone(),
        json_field(&genuine[2], "id"),
        "id is not the hash of the event".to_owned(),
    );
    // a's forgery is verified (and reported) only if it arrives before b's genuine copy;
    // after it, it is a conflict, dropped unverified.
    assert!(
        invalid == [bad4.clone()]
            || invalid.contains(&forged) && invalid.contains(&bad4) && invalid.len() == 2,
        "{invalid:?}"
    );
    assert_eq!(of_type(&lines, "complete").len(), 1);
}

#[tokio::test]
async fn req_verify_rate_limits_invalid_lines_and_says_what_it_left_out() {
    // 25 forgeries at once (the content changed under a genuine signature): 10 `invalid`
    // lines this second, 15 left out, and said so by the next one, a second later.
    let forged = |n: u64| {
        let mut event = signed_note(n);
        event.json = event
            .json
            .replace(&format!("note {n}"), &format!("forged {n}"));
        event
    };
    let mut model = RelayModel::default();
    model.events = (1..=25).map(forged).collect();
    let relay = std::sync::Arc::new(TestRelay::start(model).await.unwrap());
    let url = relay.url();
    let child = tokio::task::spawn_blocking({
        let mut command = tether(&[
            "req",
            &url,
            r#"{"kinds":[1]}"#,
            "--verify",
            "--duration",
            "3",
        ]);
        move || wait_output(command.spawn().expect("the tether binary starts"))
    });
    let connected = Instant::now();
    while relay.open_connections() == 0 {
        assert!(
            connected.elapsed() < Duration::from_secs(5),
            "no connection"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    relay.store(forged(26));
    let output = child.await.unwrap();
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let invalid = of_type(&lines, "invalid");
    assert_eq!(invalid.len(), 11, "{}", explain(&output));
    assert!(invalid[..10].iter().all(|l| l.get("suppressed").is_none()));
    assert_eq!(invalid[10]["suppressed"], 15, "{}", explain(&output));
    assert_eq!(invalid[10]["reason"], "id is not the hash of the event");
    assert!(
        output.stderr.len() < 2_000,
        "no log line per forgery: {}",
        explain(&output)
    );
}

#[tokio::test]
async fn req_with_several_relays_writes_each_event_once_and_one_honest_outcome() {
    let a = TestRelay::start(RelayModel::with_events(3)).await.unwrap();
    let mut model = RelayModel::with_events(3);
    model.events.push(StoredEvent::new(4, 1_000_004, 1));
    let b = TestRelay::start(model).await.unwrap();
    let dead = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("ws://{}", listener.local_addr().unwrap())
    };
    let (a_url, b_url) = (a.url(), b.url());
    let output = run(&[
        "req",
        &a_url,
        &b_url,
        &dead,
        r#"{"kinds":[1]}"#,
        "--until-eose",
        "--eose-timeout",
        "2",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let events = of_type(&lines, "event");
    let mut ids: Vec<&str> = events
        .iter()
        .map(|l| l["event"]["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!((events.len(), ids.len()), (4, 4), "{}", explain(&output));
    assert!(events
        .iter()
        .all(|l| l["relay"] == a_url || l["relay"] == b_url));
    let eose: Vec<&str> = of_type(&lines, "eose")
        .iter()
        .map(|l| l["relay"].as_str().unwrap())
        .collect();
    assert_eq!(eose.len(), 2, "{}", explain(&output));
    let complete = of_type(&lines, "complete");
    assert_eq!(complete.len(), 1, "{}", explain(&output));
    assert_eq!(
        *complete[0],
        serde_json::json!({"type": "complete", "sub": "0", "outcome": "partial", "missing": [dead]})
    );
    assert!(
        of_type(&lines, "connected")
            .iter()
            .all(|l| l["relay"] == a_url || l["relay"] == b_url),
        "{}",
        explain(&output)
    );
}

/// Seconds since 1970 now.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[tokio::test]
async fn req_writes_a_caught_up_line_after_a_reconnect() {
    // The relay (no NIP-77, answering NEG-OPEN as nostr-rs-relay does) holds two events; the
    // connection is cut once the subscription is live, and a note authored 60 s earlier
    // reaches the relay meanwhile: the catch-up finds it and says how.
    let mut model = RelayModel::with_events(0);
    let now = unix_now();
    model.events.push(StoredEvent::new(1, now - 20, 1));
    model.events.push(StoredEvent::new(2, now - 10, 1));
    let relay = std::sync::Arc::new(TestRelay::start(model).await.unwrap());
    let url = relay.url();
    let cutter = {
        let relay = std::sync::Arc::clone(&relay);
        tokio::spawn(async move {
            // Cut once the subscription is live (its REQ answered), not at a fixed time: a
            // command that starts slowly (Node loading the wasm on a busy machine) would be
            // cut before it had anything to catch up from.
            let started = std::time::Instant::now();
            while relay.log().frames("REQ").count() == 0
                && started.elapsed() < Duration::from_secs(4)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            relay.refuse_for(Duration::from_millis(500));
            relay.sever_all();
            relay.store(StoredEvent::new(3, unix_now() - 60, 1));
        })
    };
    let output = run(&["req", &url, r#"{"kinds":[1]}"#, "--duration", "6"]).await;
    cutter.await.unwrap();
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let caught_up = of_type(&lines, "caught_up");
    assert_eq!(caught_up.len(), 1, "{}", explain(&output));
    let line = caught_up[0];
    assert_eq!(
        (&line["sub"], &line["method"], &line["recovered"]),
        (&Value::from("0"), &Value::from("since"), &Value::from(1)),
        "{line}"
    );
    let exact_since = line["exact_since"].as_u64().unwrap();
    assert!(
        exact_since <= now - 60 && exact_since >= now - 200,
        "the window: 120 s before the cut, {exact_since} vs now {now}"
    );
    // Exactly these keys, as the contract says.
    let mut keys: Vec<&str> = line
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["exact_since", "method", "recovered", "sub", "type"]);
    let mut ids: Vec<String> = of_type(&lines, "event")
        .iter()
        .map(|e| e["event"]["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let id = |n: u64| format!("{n:064x}");
    assert_eq!(ids, [id(1), id(2), id(3)], "each event once");
}

#[tokio::test]
async fn req_duration_ends_cleanly_closing_each_subscription() {
    let relay = TestRelay::start(RelayModel::with_events(2)).await.unwrap();
    let url = relay.url();
    let started = Instant::now();
    let output = run(&["req", &url, "{}", r#"{"kinds":[1]}"#, "--duration", "1"]).await;
    assert!(output.status.success(), "{}", explain(&output));
    assert!(started.elapsed() >= Duration::from_secs(1));
    let lines = json_lines(&output, REQ_TYPES);
    assert_eq!(of_type(&lines, "eose").len(), 2, "{}", explain(&output));
    assert_eq!(closes(&relay), 2);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "disconnected", "{}", explain(&output));
    assert!(last["reconnect_in_ms"].is_null(), "no reconnect after exit");
}

#[tokio::test]
async fn req_ctrl_c_sends_close_and_exits_zero() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let url = relay.url();
    let mut command = tether(&["req", &url, r#"{"kinds":[1]}"#]);
    let (status, stdout) = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        while !seen.contains(r#""type":"eose""#) {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "stdout ended: {seen}"
            );
            seen.push_str(&line);
        }
        interrupt(child.id());
        let status = wait_status(&mut child);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        (status, seen + &rest)
    })
    .await
    .unwrap();
    assert!(status.success(), "{status:?}\n{stdout}");
    // The CLOSE left before the exit; the relay task may log it a moment after.
    let waited = Instant::now();
    while closes(&relay) == 0 && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(closes(&relay), 1, "{stdout}");
    assert!(
        stdout.ends_with(
            "{\"type\":\"disconnected\",\"reconnect_in_ms\":null,\"why\":\"requested\"}\n"
        ),
        "{stdout}"
    );
}

/// SIGINT, as Ctrl-C sends it.
fn interrupt(pid: u32) {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

fn wait_status(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + CHILD_LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tether did not exit after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn bad_urls_are_a_one_line_error_and_exit_2() {
    for args in [
        &["req", "http://127.0.0.1:1"][..],
        &["req", "not a url"],
        &["sse", "ws://127.0.0.1:1/events"],
        &["sse", "::"],
    ] {
        let output = run(args).await;
        assert_usage_error(&output);
    }
}

/// A port that is not 1-65535 used to be read as absent, and the socket dialled port 80.
#[tokio::test]
async fn bad_ports_are_a_usage_error_naming_the_port() {
    for port in ["99999", "65536", "abc"] {
        let relay = format!("ws://127.0.0.1:{port}/");
        let endpoint = format!("http://127.0.0.1:{port}/events");
        // The pool path checks a further relay as it checks the first.
        let mut runs = vec![
            vec!["req".to_owned(), relay.clone()],
            vec!["sse".to_owned(), endpoint],
            vec![
                "req".to_owned(),
                "ws://127.0.0.1:1".to_owned(),
                relay.clone(),
            ],
        ];
        if !other_binary() {
            // `tether info` is this binary's.
            runs.push(vec!["info".to_owned(), relay.clone()]);
        }
        for args in runs {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let output = run(&args).await;
            assert_usage_error(&output);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains(&format!("port {port}"))
                    || stderr.contains(&format!("port \"{port}\"")),
                "{args:?}: {}",
                explain(&output)
            );
        }
    }
}

#[tokio::test]
async fn bad_arguments_are_a_one_line_error_and_exit_2() {
    for args in [
        &["req", "ws://127.0.0.1:1", r#"{"kinds":"#][..],
        &["req", "ws://127.0.0.1:1", "{}", "[1]"],
        &["req", "ws://127.0.0.1:1", "--secret-key", "nope"],
        &["sse", "http://127.0.0.1:1/", "-H", "no colon"],
    ] {
        let output = run(args).await;
        assert_usage_error(&output);
    }
}

/// 200 with `note` events, each with `retry: 500`; `end` ends the body after them.
fn notes(messages: &[(&str, &str)], end: bool) -> Reply {
    Reply::Events {
        messages: messages
            .iter()
            .map(|(id, data)| Message {
                event: Some("note".to_owned()),
                retry: Some(Duration::from_millis(500)),
                ..Message::new(id, data)
            })
            .collect(),
        end,
        keep_alive: None,
    }
}

async fn sse_server(script: Vec<Reply>) -> (String, ScriptedSse) {
    let server = ScriptedSse::start(script).await.unwrap();
    (server.url().to_owned(), server)
}

#[tokio::test]
async fn sse_writes_open_message_and_reconnecting_lines() {
    let (url, server) = sse_server(vec![
        notes(&[("1", "one"), ("2", "two")], true),
        notes(&[("3", "three")], false),
    ])
    .await;
    let output = run(&[
        "sse",
        &url,
        "-H",
        "X-Test: yes",
        "--seed",
        "5",
        "--duration",
        "2.5",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "open",
            "message",
            "message",
            "reconnecting",
            "reconnected",
            "message"
        ],
        "{}",
        explain(&output)
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"type": "message", "event": "note", "data": "one", "id": "1"})
    );
    assert_eq!(lines[3]["last_event_id"], "2");
    assert_eq!(lines[3]["why"], "eof");
    assert_eq!(lines[3]["reason"], "stream ended");
    assert_eq!(lines[3].get("status"), None);
    // `retry: 500` is a floor: the jitter only adds, by up to 20%.
    let in_ms = lines[3]["in_ms"].as_u64().unwrap();
    assert!((490..=600).contains(&in_ms), "{}", lines[3]);
    assert_eq!(lines[5]["data"], "three");
    let log = server.requests();
    let requests: Vec<_> = log
        .iter()
        .map(|r| (r.header("x-test"), r.header("last-event-id")))
        .collect();
    assert_eq!(requests, [(Some("yes"), None), (Some("yes"), Some("2"))]);
}

#[tokio::test]
async fn sse_unsendable_id_is_a_peer_error_line_and_the_reconnect_resumes() {
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "one"), ("2\u{1}x", "two")], true),
        Reply::events(&[("3", "three")], false),
    ])
    .await;
    let output = run(&["sse", &url, "--seed", "5", "--duration", "2.5"]).await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "open",
            "message",
            "message",
            "peer_error",
            "reconnecting",
            "reconnected",
            "message"
        ],
        "{}",
        explain(&output)
    );
    assert_eq!(lines[2]["id"], "2\u{1}x", "delivered as sent");
    assert_eq!(
        lines[3],
        serde_json::json!({"type": "peer_error", "kind": "unsendable_id", "excerpt": "2\u{1}x"})
    );
    assert_eq!(
        lines[4]["last_event_id"], "1",
        "resumes from the last sendable id"
    );
    let log = server.requests();
    let requests: Vec<_> = log.iter().map(|r| r.header("last-event-id")).collect();
    assert_eq!(
        requests,
        [None, Some("1")],
        "the second request reached the server"
    );
}

#[tokio::test]
async fn sse_refusal_is_a_failed_line_and_exit_1() {
    let (url, _server) = sse_server(vec![Reply::Status(404, None)]).await;
    let output = run(&["sse", &url]).await;
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    assert_eq!(lines.len(), 1, "{}", explain(&output));
    assert_eq!(lines[0]["type"], "failed");
    assert_eq!(lines[0]["status"], 404);
}

#[tokio::test]
async fn sse_post_ends_on_done_with_an_ended_line_and_exit_0() {
    let (url, server) = sse_server(vec![Reply::events(
        &[("1", "a"), ("2", "b"), ("3", "[DONE]")],
        false,
    )])
    .await;
    let output = run(&[
        "sse",
        &url,
        "-d",
        r#"{"stream":true}"#,
        "-H",
        "Content-Type: application/json",
        "--end-data",
        "[DONE]",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["open", "message", "message", "ended"]);
    assert_eq!(
        lines[3],
        serde_json::json!({"type": "ended", "why": "data", "events": 2, "last_event_id": "3"})
    );
    let log = server.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].body, br#"{"stream":true}"#);
    assert_eq!(log[0].header("content-type"), Some("application/json"));
    assert_eq!(log[0].header("accept"), Some("text/event-stream"));
}

#[tokio::test]
async fn sse_post_cut_is_failed_interrupted_and_never_sent_twice() {
    let (url, server) = sse_server(vec![Reply::events(&[("1", "a")], true)]).await;
    let output = run(&["sse", &url, "-X", "POST", "-d", "x", "--end-data", "[DONE]"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "failed", "{}", explain(&output));
    assert_eq!(last["kind"], "interrupted");
    assert_eq!(
        (last["events"].as_u64(), last["last_event_id"].as_str()),
        (Some(1), Some("1"))
    );
    assert_eq!(server.requests().len(), 1, "one POST");
}

#[tokio::test]
async fn sse_post_refusal_carries_the_body_excerpt() {
    let (url, _server) = sse_server(vec![Reply::StatusBody(400, r#"{"error":"bad model"}"#)]).await;
    let output = run(&["sse", &url, "-d", "@/dev/null"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    assert_eq!(lines.len(), 1, "{}", explain(&output));
    assert_eq!(lines[0]["status"], 400);
    assert_eq!(lines[0]["kind"], "rejected");
    assert_eq!(lines[0]["body"], r#"{"error":"bad model"}"#);
}

#[tokio::test]
async fn sse_post_resumes_with_a_get_and_last_event_id() {
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "a"), ("2", "b")], true),
        Reply::events(&[("3", "c"), ("4", "[DONE]")], false),
    ])
    .await;
    let output = run(&[
        "sse",
        &url,
        "-d",
        "{}",
        "-H",
        "Mcp-Session-Id: s1",
        "--resume",
        "last-event-id",
        "--end-data",
        "[DONE]",
        "--seed",
        "5",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let data: Vec<&str> = of_type(&lines, "message")
        .iter()
        .map(|l| l["data"].as_str().unwrap())
        .collect();
    assert_eq!(data, ["a", "b", "c"]);
    assert_eq!(lines.last().unwrap()["type"], "ended");
    let log = server.requests();
    let seen: Vec<_> = log
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.body.len(),
                r.header("mcp-session-id"),
                r.header("last-event-id"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", 2, Some("s1"), None),
            ("GET", 0, Some("s1"), Some("2"))
        ]
    );
}

#[tokio::test]
async fn sse_bad_resume_policy_is_a_usage_error() {
    let output = run(&["sse", "http://127.0.0.1:1/", "--resume", "sometimes"]).await;
    assert_usage_error(&output);
}

#[tokio::test]
async fn demo_for_10_seconds_holds_the_claim() {
    if other_binary() {
        return; // `demo` is the Rust binary's own.
    }
    let output = run(&["demo", "--duration", "10"]).await;
    assert!(output.status.success(), "{}", explain(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("summary:"), "{stdout}");
    assert!(stdout.contains("claim holds:"), "{stdout}");
    assert!(!stdout.contains("[FAIL]"), "{stdout}");
    // The relay really was hostile: a reconnect, a rate limit, an AUTH.
    assert!(stdout.contains("connected (socket #2)"), "{stdout}");
    assert!(stdout.contains("rate-limited x"), "{stdout}");
    assert!(stdout.contains("AUTH challenge"), "{stdout}");
    // The pool part: its own summary, every claim checked, the silent relay named.
    assert!(stdout.contains("pool claim holds:"), "{stdout}");
    assert!(
        stdout.contains("pool: partial, missing r3 (never answers)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("pool: r4 reconnected (socket #3)"),
        "{stdout}"
    );
}

const INFO_TYPES: &[&str] = &["info", "unavailable", "applied"];

#[tokio::test]
async fn info_prints_the_document_and_what_tether_applies() {
    if other_binary() {
        return; // `tether info` is this binary's, not part of the shared contract.
    }
    let mut model = RelayModel::with_events(0);
    model.info_document = Some(
        r#"{"name":"test relay","supported_nips":[1,11,42],"limitation":{"max_subscriptions":20,"max_message_length":131072,"max_subid_length":32,"max_limit":500,"auth_required":true,"payment_required":false}}"#
            .to_owned(),
    );
    let relay = TestRelay::start(model).await.unwrap();
    let output = run(&["info", &relay.url()]).await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, INFO_TYPES);
    let http = relay.url().replacen("ws://", "http://", 1);
    assert_eq!(
        lines,
        [
            serde_json::json!({
                "type": "info",
                "relay": relay.url(),
                "url": http,
                "document": {
                    "name": "test relay",
                    "supported_nips": [1, 11, 42],
                    "limitation": {
                        "max_subscriptions": 20,
                        "max_message_length": 131072,
                        "max_subid_length": 32,
                        "max_limit": 500,
                        "auth_required": true,
                        "payment_required": false
                    }
                }
            }),
            serde_json::json!({
                "type": "applied",
                "relay": relay.url(),
                "max_subscriptions": 20,
                "max_message_length": 131072,
                "max_subid_length": 32,
                "auth_first": true,
                "max_limit": 500
            }),
        ],
        "{}",
        explain(&output)
    );
    assert_eq!(relay.log().info_requests.len(), 1);
    assert!(relay.log().accepted.is_empty(), "no WebSocket opened");
}

#[tokio::test]
async fn info_without_a_document_says_so_applies_nothing_and_exits_1() {
    if other_binary() {
        return;
    }
    let relay = TestRelay::start(RelayModel::with_events(0)).await.unwrap();
    let output = run(&["info", &relay.url()]).await;
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let lines = json_lines(&output, INFO_TYPES);
    assert_eq!(lines.len(), 2, "{}", explain(&output));
    assert_eq!(lines[0]["type"], "unavailable");
    assert_eq!(lines[0]["reason"], "HTTP status 404");
    assert_eq!(
        lines[1],
        serde_json::json!({
            "type": "applied",
            "relay": relay.url(),
            "max_subscriptions": null,
            "max_message_length": null,
            "max_subid_length": null,
            "auth_first": false,
            "max_limit": null
        })
    );
    // A relay URL that is not one is a usage error.
    assert_usage_error(&run(&["info", "https://example.com"]).await);
}

/// A fresh directory for one test's state file.
fn state_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tether-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

fn event_ids(lines: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = of_type(lines, "event")
        .iter()
        .map(|e| e["event"]["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn req_state_resumes_with_only_what_was_missed() {
    let now = unix_now();
    let mut model = RelayModel::with_events(0);
    model.events.push(StoredEvent::new(1, now - 20, 1));
    model.events.push(StoredEvent::new(2, now - 10, 1));
    let relay = TestRelay::start(model).await.unwrap();
    let url = relay.url();
    let dir = state_dir("req");
    let file = dir.join("state.json");
    let state = file.to_str().unwrap();
    let filter = r#"{"kinds":[1]}"#;
    let first = run(&["req", &url, filter, "--until-eose", "--state", state]).await;
    assert!(first.status.success(), "{}", explain(&first));
    let id = |n: u64| format!("{n:064x}");
    assert_eq!(event_ids(&json_lines(&first, REQ_TYPES)), [id(1), id(2)]);
    let saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        (&saved["tether"], &saved["version"], &saved["command"]),
        (&Value::from("state"), &Value::from(1), &Value::from("req"))
    );
    // While the client is away: a new note, and one authored a minute earlier.
    relay.store(StoredEvent::new(3, unix_now(), 1));
    relay.store(StoredEvent::new(4, unix_now() - 60, 1));
    // A second filter is new: it starts fresh.
    let second = run(&[
        "req",
        &url,
        filter,
        r#"{"kinds":[7]}"#,
        "--until-eose",
        "--state",
        state,
    ])
    .await;
    assert!(second.status.success(), "{}", explain(&second));
    let lines = json_lines(&second, REQ_TYPES);
    assert_eq!(event_ids(&lines), [id(3), id(4)], "{}", explain(&second));
    let caught_up = of_type(&lines, "caught_up");
    assert_eq!(caught_up.len(), 1, "{}", explain(&second));
    assert_eq!(caught_up[0]["sub"], "0");
    assert_eq!(caught_up[0]["recovered"], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A state file written before one relay ran as a pool of one holds that relay session's
/// own checkpoint: the run goes on from it, and saves a pool's.
#[tokio::test]
async fn req_state_of_a_relay_session_resumes_as_a_pool_of_one() {
    use futures_util::StreamExt as _;
    use tether_tokio::{Config, Filter, RelayClient, SubscriptionEvent};
    let now = unix_now();
    let mut model = RelayModel::with_events(0);
    model.events.push(StoredEvent::new(1, now - 20, 1));
    let relay = TestRelay::start(model).await.unwrap();
    let url = relay.url();
    let filter = r#"{"kinds":[1]}"#;
    let client = RelayClient::connect(&url, Config::default()).unwrap();
    let mut sub = client
        .subscribe(vec![Filter::new(filter).unwrap()])
        .await
        .unwrap();
    let id = sub.id().0;
    while let Some(item) = sub.next().await {
        if matches!(item, SubscriptionEvent::Eose) {
            break;
        }
    }
    let checkpoint = client.checkpoint().await.unwrap();
    let _ = client.disconnect().await;
    let dir = state_dir("session");
    let file = dir.join("state.json");
    let old = format!(
        r#"{{"tether":"state","version":1,"command":"req","targets":["{url}"],"subscriptions":[{{"filter":{filter:?},"id":{id}}}],"checkpoint":{}}}"#,
        String::from_utf8(checkpoint.to_json()).unwrap()
    );
    std::fs::write(&file, old).unwrap();
    relay.store(StoredEvent::new(2, unix_now(), 1));
    let state = file.to_str().unwrap();
    let output = run(&["req", &url, filter, "--until-eose", "--state", state]).await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    assert_eq!(
        event_ids(&lines),
        [format!("{:064x}", 2)],
        "{}",
        explain(&output)
    );
    let caught_up = of_type(&lines, "caught_up");
    assert_eq!(caught_up.len(), 1, "{}", explain(&output));
    assert_eq!(caught_up[0]["sub"], "0");
    assert!(caught_up[0].get("relay").is_none(), "{}", explain(&output));
    assert!(
        of_type(&lines, "complete").is_empty(),
        "{}",
        explain(&output)
    );
    // tether-py still runs one relay as a session, and keeps saving the session's kind.
    if !other_binary() {
        let saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(saved["checkpoint"]["tether"], "pool");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A DM inbox across a restart: a gift wrap that reaches the relay while the process is
/// stopped is dated (NIP-59) 20 h back, far past the 2-minute lookback of other kinds.
#[tokio::test]
async fn req_state_recovers_a_gift_wrap_that_arrived_while_stopped() {
    let now = unix_now();
    let mut model = RelayModel::with_events(0);
    // The model's wraps carry no `p` tag: what is tested is the window, not the tag.
    model.ignores_tags = true;
    model
        .events
        .push(StoredEvent::new(1, now - 5 * 3_600, 1059));
    model
        .events
        .push(StoredEvent::new(2, now - 9 * 3_600, 1059));
    let relay = TestRelay::start(model).await.unwrap();
    let url = relay.url();
    let dir = state_dir("inbox");
    let file = dir.join("state.json");
    let state = file.to_str().unwrap();
    let filter = r##"{"kinds":[1059],"#p":["me"]}"##;
    let first = run(&["req", &url, filter, "--until-eose", "--state", state]).await;
    assert!(first.status.success(), "{}", explain(&first));
    let id = |n: u64| format!("{n:064x}");
    assert_eq!(event_ids(&json_lines(&first, REQ_TYPES)), [id(1), id(2)]);
    relay.store(StoredEvent::new(3, unix_now() - 20 * 3_600, 1059));
    let second = run(&["req", &url, filter, "--until-eose", "--state", state]).await;
    assert!(second.status.success(), "{}", explain(&second));
    let lines = json_lines(&second, REQ_TYPES);
    assert_eq!(event_ids(&lines), [id(3)], "{}", explain(&second));
    let caught_up = of_type(&lines, "caught_up");
    assert_eq!(caught_up.len(), 1, "{}", explain(&second));
    assert_eq!(caught_up[0]["recovered"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn req_state_that_is_not_ours_is_exit_2_and_left_alone() {
    let relay = TestRelay::start(RelayModel::with_events(1)).await.unwrap();
    let url = relay.url();
    let dir = state_dir("refused");
    let file = dir.join("state.json");
    let state = file.to_str().unwrap();
    let cases: [&[u8]; 4] = [
        b"not json at all",
        br#"{"tether":"state","version":99}"#,
        br#"{"tether":"state","version":1,"command":"req","targets":["ws://elsewhere:1"],"subscriptions":[],"checkpoint":{}}"#,
        br#"{"tether":"state","version":1,"command":"req","targets":[],"subscri"#,
    ];
    for bytes in cases {
        std::fs::write(&file, bytes).unwrap();
        let output = run(&["req", &url, "--until-eose", "--state", state]).await;
        assert_usage_error(&output);
        assert_eq!(std::fs::read(&file).unwrap(), bytes, "untouched");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn req_state_with_several_relays_resumes_each_event_once() {
    let now = unix_now();
    let model = |n: &[u64]| {
        let mut m = RelayModel::with_events(0);
        for &n in n {
            m.events.push(StoredEvent::new(n, now - 30 + n, 1));
        }
        m
    };
    let a = TestRelay::start(model(&[1, 2])).await.unwrap();
    let b = TestRelay::start(model(&[2, 3])).await.unwrap();
    let (ua, ub) = (a.url(), b.url());
    let dir = state_dir("pool");
    let file = dir.join("state.json");
    let state = file.to_str().unwrap();
    let filter = r#"{"kinds":[1]}"#;
    let first = run(&["req", &ua, &ub, filter, "--until-eose", "--state", state]).await;
    assert!(first.status.success(), "{}", explain(&first));
    let id = |n: u64| format!("{n:064x}");
    assert_eq!(
        event_ids(&json_lines(&first, REQ_TYPES)),
        [id(1), id(2), id(3)]
    );
    a.store(StoredEvent::new(4, unix_now(), 1));
    b.store(StoredEvent::new(4, unix_now(), 1));
    b.store(StoredEvent::new(5, unix_now() - 50, 1));
    let second = run(&["req", &ua, &ub, filter, "--until-eose", "--state", state]).await;
    assert!(second.status.success(), "{}", explain(&second));
    let lines = json_lines(&second, REQ_TYPES);
    assert_eq!(event_ids(&lines), [id(4), id(5)], "{}", explain(&second));
    assert!(
        of_type(&lines, "complete").is_empty(),
        "reported in the first run"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sse_state_resumes_from_the_last_event_id() {
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "a"), ("2", "b")], false),
        Reply::events(&[("3", "c")], false),
    ])
    .await;
    let dir = state_dir("sse");
    let file = dir.join("state.json");
    let state = file.to_str().unwrap();
    let data = second_run_messages(&["sse", &url, "--duration", "1", "--state", state]).await;
    assert_eq!(data, ["c"]);
    let saved = String::from_utf8(std::fs::read(&file).unwrap()).unwrap();
    assert!(saved.contains(r#""resume_id":"3""#), "{saved}");
    let log = server.requests();
    let resumed: Vec<Option<&str>> = log.iter().map(|r| r.header("last-event-id")).collect();
    assert_eq!(resumed.last().copied().flatten(), Some("2"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sse_state_resumes_a_post_stream_with_a_get_and_its_last_event_id() {
    // The POST's policy resumes with a GET; the second run restores the POST (rebuilt from
    // its arguments) and resumes it, without sending the body again.
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "a"), ("2", "b")], false),
        Reply::events(&[("3", "c")], false),
    ])
    .await;
    let dir = state_dir("sse-post");
    let file = dir.join("state.json");
    let state = file.to_str().unwrap();
    let args = [
        "sse",
        &url,
        "-d",
        r#"{"ask":1}"#,
        "--resume",
        "last-event-id:GET",
        "--duration",
        "1",
        "--state",
        state,
    ];
    assert_eq!(second_run_messages(&args).await, ["c"]);
    let seen: Vec<(String, usize, Option<String>)> = server
        .requests()
        .iter()
        .map(|r| {
            let id = r.header("last-event-id").map(str::to_owned);
            (r.method.clone(), r.body.len(), id)
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("POST".to_owned(), 9, None),
            ("GET".to_owned(), 0, Some("2".to_owned()))
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run `tether args` twice, the second run resuming from the first's `--state` file; the
/// data of the messages the second run wrote.
async fn second_run_messages(args: &[&str]) -> Vec<String> {
    let first = run(args).await;
    assert!(first.status.success(), "{}", explain(&first));
    let second = run(args).await;
    assert!(second.status.success(), "{}", explain(&second));
    let lines = json_lines(&second, SSE_TYPES);
    of_type(&lines, "message")
        .iter()
        .map(|l| l["data"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Send `signal` (a `kill -NAME` name) to `pid`.
fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// The process state letter from `/proc/<pid>/stat` (`T` when stopped); `None` off Linux.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Wait (bounded) until `pid`'s state is `stopped` or not.
fn wait_stopped(pid: u32, stopped: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while process_state(pid).is_some_and(|s| (s == 'T') != stopped) {
        assert!(Instant::now() < deadline, "state {:?}", process_state(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn req_ctrl_z_stops_and_continue_resumes_on_the_same_socket() {
    let relay = std::sync::Arc::new(TestRelay::start(RelayModel::with_events(1)).await.unwrap());
    let url = relay.url();
    let mut command = tether(&["req", &url, r#"{"kinds":[1]}"#]);
    let store = std::sync::Arc::clone(&relay);
    let (status, stdout, connections) = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        let pid = child.id();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        let mut read_until = |what: &str, seen: &mut String| {
            while !seen.contains(what) {
                let mut line = String::new();
                assert!(
                    stdout.read_line(&mut line).unwrap() > 0,
                    "stdout ended: {seen}"
                );
                seen.push_str(&line);
            }
        };
        read_until(r#""type":"eose""#, &mut seen);
        // Ctrl-Z: the process tells its session and stops itself.
        signal(pid, "TSTP");
        wait_stopped(pid, true);
        std::thread::sleep(Duration::from_millis(200));
        signal(pid, "CONT");
        wait_stopped(pid, false);
        // The resume probe finds the socket alive: a new note arrives on it.
        store.store(StoredEvent::new(2, 1_700_000_002, 1));
        read_until(&format!("{:064x}", 2), &mut seen);
        let connections = store.open_connections();
        interrupt(pid);
        let status = wait_status(&mut child);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        (status, seen + &rest, connections)
    })
    .await
    .unwrap();
    assert!(status.success(), "{status:?}\n{stdout}");
    assert_eq!(connections, 1, "the live socket was kept: {stdout}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(of_type(&lines, "connected").len(), 1, "{stdout}");
    assert_eq!(of_type(&lines, "event").len(), 2, "{stdout}");
}

#[tokio::test]
async fn sse_header_cmd_gives_each_attempt_the_header_of_its_time() {
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "a")], true),
        Reply::events(&[("2", "b")], false),
    ])
    .await;
    let cmd = r#"echo "X-Token: t$TETHER_ATTEMPT"; echo "X-After: [$TETHER_AFTER]""#;
    let output = run(&[
        "sse",
        &url,
        "-H",
        "X-Token: stale",
        "--header-cmd",
        cmd,
        "--duration",
        "2",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let log = server.requests();
    let seen: Vec<(Option<&str>, Option<&str>)> = log
        .iter()
        .map(|r| (r.header("x-token"), r.header("x-after")))
        .collect();
    assert_eq!(
        seen,
        [(Some("t1"), Some("[]")), (Some("t2"), Some("[eof]"))]
    );
}

#[tokio::test]
async fn sse_header_cmd_that_fails_is_a_typed_local_failure() {
    let (url, server) = sse_server(vec![Reply::events(&[("1", "a")], false)]).await;
    let output = run(&["sse", &url, "--header-cmd", "echo nope; exit 3"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let failed = of_type(&lines, "failed");
    assert_eq!(failed.len(), 1, "{}", explain(&output));
    assert_eq!(failed[0]["kind"], "invalid_request");
    assert!(server.requests().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn sse_resume_reissue_sends_the_post_again_as_a_new_request() {
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "a")], true),
        Reply::events(&[("2", "b")], false),
    ])
    .await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}"#;
    let output = run(&[
        "sse",
        &url,
        "-d",
        body,
        "--resume",
        "reissue:2",
        "--duration",
        "2",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, SSE_TYPES);
    let reissued = of_type(&lines, "reissued");
    assert_eq!(reissued.len(), 1, "{}", explain(&output));
    assert_eq!(reissued[0]["attempts"], 1);
    let log = server.requests();
    let seen: Vec<(&str, usize, Option<&str>)> = log
        .iter()
        .map(|r| (r.method.as_str(), r.body.len(), r.header("last-event-id")))
        .collect();
    assert_eq!(
        seen,
        [("POST", body.len(), None), ("POST", body.len(), None)]
    );
}

#[tokio::test]
async fn sse_mcp_2026_07_28_re_issues_a_listen_stream_with_a_new_id_and_mirror_headers() {
    let (url, server) = sse_server(vec![
        Reply::events(&[("1", "a")], true),
        Reply::events(&[("2", "b")], false),
    ])
    .await;
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{}}"#;
    let output = run(&[
        "sse",
        &url,
        "-d",
        body,
        "--mcp",
        "2026-07-28",
        "--duration",
        "2",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let log = server.requests();
    let ids: Vec<Value> = log
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["id"].clone())
        .collect();
    assert_eq!(ids, [Value::from(7), Value::from(8)], "a new JSON-RPC id");
    for r in &log {
        assert_eq!(r.method, "POST");
        assert_eq!(r.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(r.header("mcp-method"), Some("subscriptions/listen"));
        assert_eq!(r.header("last-event-id"), None);
    }
    let lines = json_lines(&output, SSE_TYPES);
    assert_eq!(of_type(&lines, "reissued").len(), 1, "{}", explain(&output));
}

#[tokio::test]
async fn sse_mcp_revision_that_is_not_known_is_a_usage_error() {
    let output = run(&[
        "sse",
        "http://127.0.0.1:9/",
        "-d",
        r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#,
        "--mcp",
        "2024-01-01",
    ])
    .await;
    assert_usage_error(&output);
}

#[tokio::test]
async fn sse_goes_through_the_environments_proxy_unless_told_otherwise() {
    // Which proxy is chosen is what this checks: a second ScriptedSse stands where the proxy
    // would be and records the absolute-form request a client sends to a forward proxy (a
    // real one, tinyproxy, carries streams in the scenarios `peer_suite!` runs).
    let (url, target) = sse_server(vec![Reply::events(&[("1", "a")], false)]).await;
    let (proxy_url, stand_in) = sse_server(vec![Reply::events(&[("1", "a")], false)]).await;
    let proxy = proxy_url.trim_end_matches("/events").to_owned();
    let p = proxy.as_str();
    // (flags, environment, whether the request went to the proxy) of each run.
    type Run<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], bool);
    let runs: [Run; 4] = [
        (&[], &[("http_proxy", p)], true),
        (&[], &[("HTTP_PROXY", p), ("NO_PROXY", "127.0.0.1")], false),
        (&["--proxy", "none"], &[("http_proxy", p)], false),
        (&["--proxy", p], &[], true),
    ];
    for (flags, env, proxied) in runs {
        let before = (target.requests().len(), stand_in.requests().len());
        let mut command = tether(&[&["sse", &url, "--duration", "1"], flags].concat());
        command.env_remove("https_proxy").env_remove("no_proxy");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = tokio::task::spawn_blocking(move || {
            wait_output(command.spawn().expect("the tether binary starts"))
        })
        .await
        .unwrap();
        assert!(output.status.success(), "{}", explain(&output));
        let after = (target.requests().len(), stand_in.requests().len());
        let expected = if proxied {
            (before.0, before.1 + 1)
        } else {
            (before.0 + 1, before.1)
        };
        assert_eq!(after, expected, "{flags:?} {env:?}");
    }
    // What reached the stand-in was addressed to the target, in absolute form.
    let targets: Vec<String> = stand_in
        .requests()
        .iter()
        .map(|r| r.target.clone())
        .collect();
    assert_eq!(targets, [url.clone(), url.clone()]);
    let bad = run(&["sse", &url, "--proxy", "socks5://127.0.0.1:1"]).await;
    assert_eq!(bad.status.code(), Some(2), "{}", explain(&bad));
}

/// An event by `author` numbered `n`, of `kind`, with `tags` (JSON), dated `created_at`.
fn authored(n: u64, author: &str, kind: u64, created_at: u64, tags: &str) -> StoredEvent {
    StoredEvent {
        n,
        created_at,
        kind,
        json: format!(
            r#"{{"id":"{n:064x}","pubkey":"{author}","created_at":{created_at},"kind":{kind},"tags":[{tags}],"content":"","sig":"{n:0128x}"}}"#
        ),
    }
}

/// `keys`' relay list (kind 10002, signed) naming `relay`, dated `created_at`.
fn signed_list(keys: &nostr::Keys, n: u64, relay: &str, created_at: u64) -> StoredEvent {
    use nostr::{EventBuilder, Kind, Tag, Timestamp};
    let json = EventBuilder::new(Kind::RelayList, "")
        .tag(Tag::parse(["r", relay]).unwrap())
        .custom_created_at(Timestamp::from(created_at))
        .sign_with_keys(keys)
        .unwrap()
        .as_json();
    StoredEvent {
        n,
        created_at,
        kind: 10002,
        json,
    }
}

#[tokio::test]
async fn req_outbox_routes_people_to_their_relays_and_writes_routed_lines() {
    let keys = nostr::Keys::new(nostr::SecretKey::from_hex(&"04".repeat(32)).unwrap());
    let author = keys.public_key().to_hex();
    let mut model = RelayModel::default();
    model.events.push(authored(1, &author, 1, 1_000_001, ""));
    let content = TestRelay::start(model).await.unwrap();
    let mut elsewhere = RelayModel::default();
    elsewhere
        .events
        .push(authored(2, &author, 1, 1_000_002, ""));
    let undeclared = TestRelay::start(elsewhere).await.unwrap();
    let mut index = RelayModel::default();
    index
        .events
        .push(signed_list(&keys, 3, &content.url(), 1_000_000));
    let indexer = TestRelay::start(index).await.unwrap();
    let filter = format!(r#"{{"kinds":[1],"authors":["{author}"]}}"#);
    let output = run(&[
        "req",
        "--outbox",
        "--indexer",
        &indexer.url(),
        "--max-relays",
        "5",
        &filter,
        "--until-eose",
        "--eose-timeout",
        "8",
    ])
    .await;
    assert!(output.status.success(), "{}", explain(&output));
    let lines = json_lines(&output, REQ_TYPES);
    let events = of_type(&lines, "event");
    assert_eq!(events.len(), 1, "{}", explain(&output));
    assert_eq!(events[0]["relay"], content.url());
    assert_eq!(events[0]["event"]["id"], format!("{:064x}", 1));
    let routed = of_type(&lines, "routed");
    let last = routed.last().expect("a routed line");
    assert_eq!(last["sub"], "0");
    let relays: Vec<&str> = last["relays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(relays.contains(&content.url().as_str()), "{relays:?}");
    assert!(!relays.contains(&undeclared.url().as_str()), "{relays:?}");
    assert_eq!(
        last["covered"],
        serde_json::json!([{"author": author, "relays": 1}])
    );
    assert_eq!(last["uncovered"], serde_json::json!([]));
    let complete = of_type(&lines, "complete");
    assert_eq!(complete.len(), 1, "{}", explain(&output));
    assert_eq!(complete[0]["outcome"], "complete", "{}", explain(&output));
}

/// A restored routed subscription is placed afresh on this run's relays, so it is done at
/// this run's outcome: not at the first relay's answer while another still has to answer.
#[tokio::test]
async fn req_outbox_state_resumes_and_waits_for_every_routed_relay() {
    let keys = |n: &str| nostr::Keys::new(nostr::SecretKey::from_hex(&n.repeat(32)).unwrap());
    let (k1, k2) = (keys("05"), keys("06"));
    let (one, two) = (k1.public_key().to_hex(), k2.public_key().to_hex());
    let now = unix_now();
    let mut a = RelayModel::default();
    a.events.push(authored(1, &one, 1, now - 20, ""));
    let a = TestRelay::start(a).await.unwrap();
    let mut b = RelayModel::default();
    b.events.push(authored(2, &two, 1, now - 20, ""));
    let b = TestRelay::start(b).await.unwrap();
    let mut index = RelayModel::default();
    for (n, keys, relay) in [(3, &k1, &a), (4, &k2, &b)] {
        index
            .events
            .push(signed_list(keys, n, &relay.url(), now - 100));
    }
    let indexer = TestRelay::start(index).await.unwrap();
    let dir = state_dir("outbox-state");
    let file = dir.join("state.json");
    let filter = format!(r#"{{"kinds":[1],"authors":["{one}","{two}"]}}"#);
    let args = [
        "req",
        "--outbox",
        "--indexer",
        &indexer.url(),
        &filter,
        "--until-eose",
        "--eose-timeout",
        "3",
        "--state",
        file.to_str().unwrap(),
    ];
    let first = run(&args).await;
    assert!(first.status.success(), "{}", explain(&first));
    let id = |n: u64| format!("{n:064x}");
    assert_eq!(event_ids(&json_lines(&first, REQ_TYPES)), [id(1), id(2)]);
    // While the client is away: a new note on A, and B stops answering REQs.
    a.store(authored(5, &one, 1, unix_now(), ""));
    b.with(|s| s.model.silent_reqs = true);
    let second = run(&args).await;
    assert!(second.status.success(), "{}", explain(&second));
    let lines = json_lines(&second, REQ_TYPES);
    assert_eq!(event_ids(&lines), [id(5)], "{}", explain(&second));
    // Done at the outcome deadline, B named as the relay that did not answer.
    let complete = of_type(&lines, "complete");
    assert_eq!(complete.len(), 1, "{}", explain(&second));
    assert_eq!(complete[0]["outcome"], "partial", "{}", explain(&second));
    let missing = complete[0]["missing"].to_string();
    assert!(missing.contains(&b.url()), "{missing}");
    assert!(!missing.contains(&a.url()), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A relay routing let go of gives its id to the relay routing opens next: every line names
/// the relay it is about, the `disconnected` of the one let go included.
#[tokio::test]
async fn req_outbox_names_each_relay_after_its_id_is_reused() {
    let keys = nostr::Keys::new(nostr::SecretKey::from_hex(&"03".repeat(32)).unwrap());
    let author = keys.public_key().to_hex();
    let now = unix_now();
    let a = TestRelay::start(RelayModel::default()).await.unwrap();
    let b = TestRelay::start(RelayModel::default()).await.unwrap();
    let (a_url, b_url) = (a.url(), b.url());
    let list = |n: u64, relay: &str, at: u64| signed_list(&keys, n, relay, at);
    let mut index = RelayModel::default();
    index.events.push(list(1, &a_url, now - 100));
    let indexer = std::sync::Arc::new(TestRelay::start(index).await.unwrap());
    let filter = format!(r#"{{"kinds":[1],"authors":["{author}"]}}"#);
    // The indexer and one relay: the relay the new list names takes the old one's place
    // (and its id).
    let mut command = tether(&[
        "req",
        "--outbox",
        "--indexer",
        &indexer.url(),
        "--max-relays",
        "2",
        &filter,
        "--duration",
        "15",
    ]);
    let moved = list(2, &b_url, now - 10);
    let (seen, rest) = tokio::task::spawn_blocking({
        let indexer = std::sync::Arc::clone(&indexer);
        let (a_url, b_url) = (a_url.clone(), b_url.clone());
        move || {
            let mut child = command.spawn().unwrap();
            let mut stdout = BufReader::new(child.stdout.take().unwrap());
            let mut seen = String::new();
            let connected = |url: &str| format!(r#"{{"type":"connected","relay":"{url}"}}"#);
            let mut stored = false;
            loop {
                let mut line = String::new();
                if stdout.read_line(&mut line).unwrap() == 0 {
                    break;
                }
                seen.push_str(&line);
                if !stored && line.trim_end() == connected(&a_url) {
                    // The author moves to B: routing lets A go.
                    indexer.store(moved.clone());
                    stored = true;
                }
                if line.trim_end() == connected(&b_url) {
                    interrupt(child.id());
                    break;
                }
            }
            wait_status(&mut child);
            let mut rest = String::new();
            std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
            (seen, rest)
        }
    })
    .await
    .unwrap();
    let stdout = format!("{seen}{rest}");
    // Up to B's `connected` (what follows is the shutdown's): A connected, was let go under
    // its own name, and B took its place.
    let lines_of = |kind: &str| -> Vec<&str> {
        let kind = format!(r#"{{"type":"{kind}","#);
        seen.lines().filter(|l| l.starts_with(&kind)).collect()
    };
    assert_eq!(
        lines_of("connected"),
        [
            format!(r#"{{"type":"connected","relay":"{}"}}"#, indexer.url()),
            format!(r#"{{"type":"connected","relay":"{a_url}"}}"#),
            format!(r#"{{"type":"connected","relay":"{b_url}"}}"#),
        ],
        "{stdout}"
    );
    assert_eq!(
        lines_of("disconnected"),
        [format!(
            r#"{{"type":"disconnected","relay":"{a_url}","reconnect_in_ms":null,"why":"requested"}}"#
        )],
        "{stdout}"
    );
}

/// `req --help` names every line type the command writes.
#[tokio::test]
async fn req_help_names_every_line_type() {
    let output = run(&["req", "--help"]).await;
    assert!(output.status.success(), "{}", explain(&output));
    let help = String::from_utf8_lossy(&output.stdout);
    let words: std::collections::BTreeSet<&str> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let unnamed: Vec<&str> = REQ_TYPES
        .iter()
        .copied()
        .filter(|kind| !words.contains(kind))
        .collect();
    assert_eq!(unnamed, Vec::<&str>::new(), "{help}");
}

#[tokio::test]
async fn req_outbox_refuses_a_relay_argument() {
    let output = run(&[
        "req",
        "--outbox",
        "wss://relay.example",
        r#"{"authors":[]}"#,
    ])
    .await;
    assert_usage_error(&output);
    let output = run(&["req", "--indexer", "wss://i.example", r#"{"kinds":[1]}"#]).await;
    assert_usage_error(&output);
}
