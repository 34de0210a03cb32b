//! `tether sse --mcp REVISION`: a JSON-RPC body (`-d`) sent as MCP's Streamable HTTP
//! transport of that revision expects, so a tool call or a listen stream works from the shell.
//!
//! | | 2025-11-25 | 2026-07-28 |
//! | --- | --- | --- |
//! | headers | `MCP-Protocol-Version`, `Accept`, `Content-Type` (the session's `Mcp-Session-Id` is the caller's `-H`) | the same, and `Mcp-Method` / `Mcp-Name` mirroring the body |
//! | a cut stream | resumed with a GET and `Last-Event-ID` | `subscriptions/listen` re-issued as a new request (a new JSON-RPC id each time); anything else ends |
//!
//! Under 2026-07-28 the body's `params._meta` gains the protocol version and (empty) client
//! capabilities the revision requires of every request, where it has none. Under both, the
//! stream ends cleanly once the call's JSON-RPC response arrived. An explicit `-H` or
//! `--resume` wins over what this adds.

use serde_json::Value;
use tether_tokio::sse::{Attempt, AttemptInfo, Request, Resume};

/// The MCP revisions `--mcp` knows.
pub(crate) const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// Re-issues in a row that may fail for a listen stream.
const LISTEN_REISSUES: u32 = 5;

/// What `--mcp` makes of a request.
#[derive(Clone, Debug)]
pub(crate) struct Mcp {
    revision: &'static str,
    /// The body's JSON-RPC id, when it has one: re-issues number it anew.
    id: Option<Value>,
    body: Value,
}

impl Mcp {
    /// `revision` for `body`.
    ///
    /// # Errors
    /// A one-line reason: an unknown revision, or a body that is not a JSON-RPC request.
    pub(crate) fn new(revision: &str, body: &[u8]) -> Result<Mcp, String> {
        let revision = REVISIONS
            .into_iter()
            .find(|r| *r == revision)
            .ok_or_else(|| format!("{revision:?}: expected one of {}", REVISIONS.join(", ")))?;
        let body: Value =
            serde_json::from_slice(body).map_err(|e| format!("the body (-d) is not JSON: {e}"))?;
        if !body.get("method").is_some_and(Value::is_string) {
            return Err("the body (-d) is not a JSON-RPC request: no \"method\"".to_owned());
        }
        let mut body = body;
        if revision == "2026-07-28" {
            add_meta(&mut body);
        }
        Ok(Mcp {
            revision,
            id: body.get("id").cloned(),
            body,
        })
    }

    /// The body as sent: under 2026-07-28 with the `_meta` every request carries.
    pub(crate) fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.body).unwrap_or_default()
    }

    fn method(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }

    /// The headers this revision adds to `request` (where the caller set none) and its
    /// default resume policy (where the caller gave no `--resume`).
    pub(crate) fn apply(&self, mut request: Request, resume_given: bool) -> Request {
        let mut add = vec![
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
            ("mcp-protocol-version", self.revision.to_owned()),
        ];
        if self.revision == "2026-07-28" {
            add.push(("mcp-method", self.method().to_owned()));
            let params = &self.body["params"];
            if let Some(name) = params["name"].as_str().or(params["uri"].as_str()) {
                add.push(("mcp-name", name.to_owned()));
            }
        }
        for (name, value) in add {
            if !request
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
            {
                request = request.header(name, &value);
            }
        }
        if !resume_given {
            request = request.resume(self.default_resume());
        }
        request.body = self.body();
        // The response to the call is the last message of its stream: the stream ends there
        // (`ended` with `reason` `response`), not at the server's close that follows.
        request.end_on_jsonrpc_response()
    }

    fn default_resume(&self) -> Resume {
        match (self.revision, self.method()) {
            ("2025-11-25", _) => Resume::LastEventId {
                method: "GET".to_owned(),
            },
            (_, "subscriptions/listen") => Resume::Reissue {
                max_failures: LISTEN_REISSUES,
            },
            _ => Resume::Never,
        }
    }

    /// The body of attempt `info`: the first keeps its JSON-RPC id; under 2026-07-28 each
    /// later sending of the request is a new request with a new id (the n-th: a numeric id
    /// plus n - 1, a string id with `-n`). `None` keeps the request's body.
    pub(crate) fn body_for(&self, info: &AttemptInfo) -> Option<Vec<u8>> {
        if self.revision != "2026-07-28" || info.number <= 1 || info.attempt == Attempt::Resume {
            return None;
        }
        let id = match self.id.as_ref()? {
            Value::Number(n) => Value::from(n.as_u64()?.saturating_add(info.number - 1)),
            Value::String(s) => Value::from(format!("{s}-{}", info.number)),
            _ => return None,
        };
        let mut body = self.body.clone();
        body["id"] = id;
        serde_json::to_vec(&body).ok()
    }
}

/// Without a handshake a 2026-07-28 request says what it speaks in `params._meta`:
/// `io.modelcontextprotocol/protocolVersion` (which must match the header) and
/// `io.modelcontextprotocol/clientCapabilities`. Added where the body has none.
fn add_meta(body: &mut Value) {
    let Some(object) = body.as_object_mut() else {
        return;
    };
    let params = object
        .entry("params")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    meta.entry("io.modelcontextprotocol/protocolVersion")
        .or_insert_with(|| Value::from("2026-07-28"));
    meta.entry("io.modelcontextprotocol/clientCapabilities")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_revision_gets_its_headers_and_policy() {
        let listen = br#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen"}"#;
        let mcp = Mcp::new("2026-07-28", listen).unwrap_or_else(|e| panic!("{e}"));
        let request = mcp.apply(Request::post(listen.to_vec()), false);
        assert_eq!(request.resume, Resume::Reissue { max_failures: 5 });
        let names: Vec<&str> = request.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "content-type",
                "accept",
                "mcp-protocol-version",
                "mcp-method"
            ]
        );
        let call = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"count"}}"#;
        let mcp = Mcp::new("2026-07-28", call).unwrap_or_else(|e| panic!("{e}"));
        let request = mcp.apply(Request::post(call.to_vec()).header("Accept", "x"), false);
        assert_eq!(request.resume, Resume::Never);
        assert!(request
            .headers
            .contains(&("mcp-name".into(), "count".into())));
        assert!(
            request.headers.contains(&("Accept".into(), "x".into())),
            "-H wins"
        );
        let old = Mcp::new("2025-11-25", call).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            old.apply(Request::post(call.to_vec()), false).resume,
            Resume::LastEventId { .. }
        ));
        assert!(Mcp::new("2024-01-01", call).is_err());
        assert!(Mcp::new("2026-07-28", b"[1]").is_err());
    }
}
