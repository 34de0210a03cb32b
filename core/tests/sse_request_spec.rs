//! A host's JSON request (`RequestSpec`): the C ABI's snake_case and a JavaScript object's
//! camelCase read alike; unknown fields and bad resume policies are refused.

use tether_core::sse::{Request, RequestSpec};

fn request(json: &str) -> Result<Request, String> {
    let spec: RequestSpec = serde_json::from_str(json).map_err(|e| e.to_string())?;
    spec.into_request().map_err(|e| e.to_string())
}

#[test]
fn both_spellings_make_the_same_request() {
    let snake = request(
        r#"{"method":"POST","headers":[["Accept","text/event-stream"]],"body":"{}",
            "resume":"reissue:3","end_data":"[DONE]","fail_event":"error",
            "end_on_jsonrpc_response":true}"#,
    )
    .unwrap();
    let camel = request(
        r#"{"method":"POST","headers":[["Accept","text/event-stream"]],"body":"{}",
            "resume":"reissue:3","endData":"[DONE]","failEvent":"error",
            "endOnJsonrpcResponse":true}"#,
    )
    .unwrap();
    assert_eq!(snake, camel);
    assert!(!snake.is_plain_get());
    assert!(request("{}").unwrap().is_plain_get());
}

#[test]
fn unknown_fields_and_bad_policies_are_refused() {
    assert!(request(r#"{"endDatum":"x"}"#)
        .unwrap_err()
        .contains("endDatum"));
    assert_eq!(
        request(r#"{"resume":"sometimes"}"#).unwrap_err(),
        r#""sometimes": expected never, same, last-event-id, last-event-id:METHOD, reissue or reissue:N"#
    );
}
