//! Whether an event matches a NIP-01 filter: what the pool checks before it delivers an
//! event of a routed subscription. A relay that ignores `#p` (or any other field) must not
//! hand the application another user's gift wraps because it was asked on their behalf.

use serde::Deserialize;
use serde_json::{Map, Value};

/// The fields of an event a filter can test.
#[derive(Debug, Deserialize)]
pub(crate) struct Fields {
    id: String,
    pubkey: String,
    kind: u64,
    created_at: u64,
    #[serde(default)]
    tags: Vec<Vec<String>>,
}

impl Fields {
    /// The fields of `raw`, or `None` for JSON that is no event.
    pub(crate) fn of(raw: &str) -> Option<Fields> {
        serde_json::from_str(raw).ok()
    }

    /// The author, hex.
    pub(crate) fn author(&self) -> &str {
        &self.pubkey
    }

    /// The kind.
    pub(crate) fn kind(&self) -> u64 {
        self.kind
    }
}

/// Whether `event` matches `filter` (NIP-01: every field present must match; a list
/// matches if the event's value is in it; `#x` matches a tag `x` whose value is in it).
pub(crate) fn matches(filter: &Map<String, Value>, event: &Fields) -> bool {
    filter.iter().all(|(key, want)| match key.as_str() {
        "ids" => contains_str(want, &event.id),
        "authors" => contains_str(want, &event.pubkey),
        "kinds" => want
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k.as_u64() == Some(event.kind))),
        "since" => want.as_u64().is_none_or(|s| event.created_at >= s),
        "until" => want.as_u64().is_none_or(|u| event.created_at <= u),
        "limit" | "search" => true,
        tag if tag.len() == 2 && tag.starts_with('#') => {
            let name = &tag[1..];
            event.tags.iter().any(|t| {
                t.first().is_some_and(|n| n == name)
                    && t.get(1).is_some_and(|v| contains_str(want, v))
            })
        }
        // Fields NIP-01 does not define are the relay's business (extensions).
        _ => true,
    })
}

fn contains_str(list: &Value, value: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    const WRAP: &str = r#"{"id":"aa","pubkey":"bb","kind":1059,"created_at":100,
        "tags":[["p","me"]],"content":"","sig":""}"#;

    #[test]
    fn each_field_of_a_filter_must_match() {
        let e = Fields::of(WRAP).unwrap();
        assert!(matches(&filter(r##"{"kinds":[1059],"#p":["me"]}"##), &e));
        assert!(!matches(&filter(r##"{"kinds":[1059],"#p":["you"]}"##), &e));
        assert!(!matches(&filter(r#"{"kinds":[1]}"#), &e));
        assert!(matches(
            &filter(r#"{"authors":["bb"],"since":100,"until":100}"#),
            &e
        ));
        assert!(!matches(&filter(r#"{"since":101}"#), &e));
        assert!(!matches(&filter(r#"{"until":99}"#), &e));
        assert!(!matches(&filter(r#"{"ids":["ab"]}"#), &e));
        assert!(!matches(&filter(r##"{"#e":["x"]}"##), &e));
        assert!(matches(&filter(r#"{"limit":1}"#), &e));
        assert!(Fields::of("[1]").is_none());
    }
}
