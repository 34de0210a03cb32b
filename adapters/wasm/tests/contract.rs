//! The wasm classes driven natively (wasm-bindgen compiles them for the host too): the
//! outputs are the core's JSON lines, misuse is a typed error and the machine is unchanged by
//! it. bindings/js/test runs the same classes through the real wasm in Node.

use tether_wasm::pool::Pool;
use tether_wasm::sse::Sse;
use tether_wasm::ErrorKind;

fn drain(pool: &mut Pool) -> (Vec<String>, Vec<String>) {
    let transmits = std::iter::from_fn(|| pool.poll_transmit()).collect();
    (transmits, pool.poll_events())
}

#[test]
fn a_pool_of_one_opens_subscribes_and_delivers_an_event_as_a_line() {
    let mut pool = Pool::new(Some(r#"{"seed":3}"#.into())).unwrap();
    let relay = pool
        .add_relay(0.0, Some("ws://127.0.0.1:7777".into()))
        .unwrap();
    let sub = pool.subscribe(0.0, r#"[{"kinds":[1]}]"#).unwrap();
    let (transmits, events) = drain(&mut pool);
    assert_eq!(
        transmits,
        [r#"{"type":"open","relay":0,"epoch":1,"url":"ws://127.0.0.1:7777"}"#]
    );
    assert!(events.is_empty(), "{events:?}");
    pool.handle_open(10.0, relay, 1.0).unwrap();
    let (transmits, events) = drain(&mut pool);
    assert_eq!(transmits.len(), 1, "{transmits:?}");
    let send: serde_json::Value = serde_json::from_str(&transmits[0]).unwrap();
    assert_eq!(send["type"], "send");
    let req: serde_json::Value = serde_json::from_str(send["text"].as_str().unwrap()).unwrap();
    assert_eq!(req[0], "REQ");
    assert_eq!(req[2], serde_json::json!({"kinds":[1]}));
    assert_eq!(events, [r#"{"type":"connected","relay":0}"#]);

    let label = req[1].as_str().unwrap();
    let event = format!(
        r#"{{"id":"{}","pubkey":"{}","created_at":1700000000,"kind":1,"tags":[],"content":"hi","sig":"{}"}}"#,
        "1".repeat(64),
        "2".repeat(64),
        "3".repeat(128)
    );
    pool.handle_frame(20.0, relay, 1.0, &format!(r#"["EVENT","{label}",{event}]"#))
        .unwrap();
    pool.handle_frame(21.0, relay, 1.0, &format!(r#"["EOSE","{label}"]"#))
        .unwrap();
    let (_, events) = drain(&mut pool);
    assert_eq!(
        events[0],
        format!(
            r#"{{"type":"event","sub":{sub},"relay":0,"id":"{}","event":{event}}}"#,
            "1".repeat(64)
        )
    );
    assert_eq!(
        events[1],
        format!(r#"{{"type":"eose","sub":{sub},"relay":0}}"#)
    );
}

#[test]
fn misuse_is_a_typed_error_and_changes_nothing() {
    let mut pool = Pool::new(None).unwrap();
    let error = pool.subscribe(0.0, r#"{"kinds":[1]}"#).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(
        error.message().starts_with("filters are not a JSON array"),
        "{error}"
    );
    assert_eq!(
        pool.unsubscribe(0.0, 9.0).unwrap_err().kind(),
        ErrorKind::UnknownId
    );
    assert_eq!(
        pool.handle_open(0.0, 4, 1.0).unwrap_err().kind(),
        ErrorKind::UnknownId
    );
    assert_eq!(
        pool.subscribe(0.5, "[]").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        Pool::new(Some(r#"{"verifyy":true}"#.into()))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(pool.poll_transmit(), None);
    assert_eq!(pool.poll_timeout(), None);
}

#[test]
fn a_checkpoint_restores_and_foreign_text_is_refused_by_kind() {
    let mut pool = Pool::new(None).unwrap();
    pool.add_relay(0.0, Some("ws://127.0.0.1:7777".into()))
        .unwrap();
    pool.subscribe(0.0, r#"[{"kinds":[1]}]"#).unwrap();
    let saved = pool.checkpoint();
    let mut restored = Pool::restore(None, &saved, 5_000.0, 1_700_000_000.0).unwrap();
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
    // The wall clock of the restore is new; what was subscribed is the same.
    assert_eq!(
        json(&restored.checkpoint())["subscriptions"],
        json(&saved)["subscriptions"]
    );
    assert_eq!(
        json(&saved)["subscriptions"][0]["everywhere"],
        serde_json::json!([{"kinds":[1]}])
    );
    let open: serde_json::Value =
        serde_json::from_str(&restored.poll_transmit().expect("the restored relay dials")).unwrap();
    assert_eq!(open["type"], "open");
    // The application's URL was not saved; named again, it is the one relay at that URL.
    assert!(!saved.contains("7777"), "{saved}");
    restored.name_relay(0, "ws://127.0.0.1:7777/").unwrap();
    assert_eq!(
        restored.add_relay(5_000.0, Some("ws://127.0.0.1:7777".into())),
        Ok(0)
    );
    let taken = restored.name_relay(0, "ws://127.0.0.1:7778").unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::InvalidArgument);
    let unknown = restored.name_relay(9, "ws://127.0.0.1:7778").unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::UnknownId);
    let error = Pool::restore(None, "{}", 0.0, 0.0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Checkpoint);
}

#[test]
fn an_sse_session_asks_for_its_request_and_reads_a_message() {
    let request = r#"{"method":"POST","headers":[["Accept","text/event-stream"]],"body":"{}","endOnJsonrpcResponse":true}"#;
    let mut sse = Sse::new(None, Some(request.into())).unwrap();
    sse.connect(0.0).unwrap();
    let open: serde_json::Value = serde_json::from_str(&sse.poll_transmit().unwrap()).unwrap();
    assert_eq!(open["type"], "open");
    assert_eq!(open["method"], "POST");
    assert_eq!(open["body"], "{}");
    let epoch = open["epoch"].as_f64().unwrap();
    sse.handle_head(
        1.0,
        epoch,
        200,
        Some("text/event-stream".into()),
        None,
        None,
        None,
        None,
    )
    .unwrap();
    let bytes = b"id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    assert_eq!(
        sse.handle_bytes(2.0, epoch, bytes).unwrap() as usize,
        bytes.len()
    );
    let events: Vec<serde_json::Value> = std::iter::from_fn(|| sse.poll_event())
        .map(|e| serde_json::from_str(&e).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["open", "message", "ended"], "{events:?}");
    assert_eq!(sse.last_event_id(), "7");
    assert_eq!(
        Sse::new(None, Some(r#"{"resume":"sometimes"}"#.into()))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn a_relay_sessions_checkpoint_reads_as_a_pool_of_one() {
    use tether_wasm::relay::Relay;
    use tether_wasm::saved::SavedPool;
    let mut relay = Relay::new(None).unwrap();
    let sub = relay.subscribe(0.0, r#"[{"kinds":[1]}]"#, 0).unwrap();
    let text = relay.checkpoint();
    assert_eq!(
        SavedPool::new(&text, false).unwrap_err().kind(),
        ErrorKind::Checkpoint
    );
    let saved = SavedPool::new(&text, true).unwrap();
    assert_eq!(saved.subscriptions(), [sub]);
    assert_eq!(
        saved.filters(sub).unwrap().as_deref(),
        Some(r#"[{"kinds":[1]}]"#)
    );
    assert!(
        !saved.catches_up(sub, 0).unwrap(),
        "never live: nothing to catch up"
    );
    let pool = Pool::restore(None, &saved.to_json(), 0.0, 1_700_000_000.0).unwrap();
    assert_eq!(
        SavedPool::new(&pool.checkpoint(), false)
            .unwrap()
            .subscriptions(),
        [sub]
    );
}

#[test]
fn a_frame_as_bytes_is_the_same_input_and_bytes_that_are_not_utf8_are_a_peer_error() {
    let mut pool = Pool::new(Some(r#"{"seed":3}"#.into())).unwrap();
    let relay = pool.add_relay(0.0, None).unwrap();
    let sub = pool.subscribe(0.0, r#"[{"kinds":[1]}]"#).unwrap();
    drain(&mut pool);
    pool.handle_open(10.0, relay, 1.0).unwrap();
    let (transmits, _) = drain(&mut pool);
    let send: serde_json::Value = serde_json::from_str(&transmits[0]).unwrap();
    let req: serde_json::Value = serde_json::from_str(send["text"].as_str().unwrap()).unwrap();
    let label = req[1].as_str().unwrap().to_owned();
    let event = format!(
        r#"{{"id":"{}","pubkey":"{}","created_at":1700000000,"kind":1,"tags":[],"content":"hé","sig":"{}"}}"#,
        "1".repeat(64),
        "2".repeat(64),
        "3".repeat(128)
    );
    let frame = format!(r#"["EVENT","{label}",{event}]"#);
    pool.handle_frame_bytes(20.0, relay, 1.0, frame.as_bytes())
        .unwrap();
    let (_, events) = drain(&mut pool);
    assert_eq!(
        events,
        [format!(
            r#"{{"type":"event","sub":{sub},"relay":0,"id":"{}","event":{event}}}"#,
            "1".repeat(64)
        )]
    );

    // A byte that is no UTF-8 inside the id: the id is no longer hex.
    let mut broken = frame.replace(&"1".repeat(64), &"4".repeat(64)).into_bytes();
    let at = frame.find(&"1".repeat(64)).unwrap() + 10;
    broken[at] = 0xff;
    pool.handle_frame_bytes(21.0, relay, 1.0, &broken).unwrap();
    let (transmits, events) = drain(&mut pool);
    assert!(transmits.is_empty(), "{transmits:?}");
    assert_eq!(
        events,
        [
            r#"{"type":"peer_error","relay":0,"kind":"event","excerpt":"event id is not 64 lowercase hex characters"}"#
        ]
    );
}
