//! Relay lists as events: kind 10002 (NIP-65: where a person writes and reads) and kind 10050
//! (NIP-17: where a person receives direct messages), read from the event's JSON with bounds.

use serde_json::Value;

use super::relay_url::{self, BadRelayUrl};

/// Kind 10002: NIP-65 relay list metadata.
pub const OUTBOX_KIND: u64 = 10_002;
/// Kind 10050: NIP-17 relays for direct messages.
pub const INBOX_KIND: u64 = 10_050;

/// Which of a person's lists an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ListKind {
    /// Kind 10002.
    Outbox,
    /// Kind 10050.
    Inbox,
}

/// Why an event was not taken as a relay list.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListError {
    /// Not a JSON object with `pubkey`, `created_at`, `kind`, `id` and `tags`.
    Malformed(&'static str),
    /// Neither kind 10002 nor kind 10050.
    NotAList {
        /// The event's kind.
        kind: u64,
    },
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Malformed(what) => write!(f, "not a relay list event: {what}"),
            ListError::NotAList { kind } => write!(f, "kind {kind} is no relay list"),
        }
    }
}

impl std::error::Error for ListError {}

/// One entry of a list: a relay and how its owner uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) url: String,
    pub(crate) write: bool,
    pub(crate) read: bool,
}

/// A relay list event, read and bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParsedList {
    pub(crate) author: String,
    pub(crate) kind: ListKind,
    pub(crate) created_at: u64,
    pub(crate) id: String,
    /// Valid, distinct relays, in the list's order, at most `max` of them.
    pub(crate) entries: Vec<Entry>,
    /// Entries left out: past the bound, or not a relay URL.
    pub(crate) refused: usize,
}

/// Read `json` as a relay list, keeping at most `max` distinct valid relays.
pub(crate) fn parse(json: &str, max: usize, allow_private: bool) -> Result<ParsedList, ListError> {
    let value: Value = serde_json::from_str(json).map_err(|_| ListError::Malformed("not JSON"))?;
    let author = value
        .get("pubkey")
        .and_then(Value::as_str)
        .filter(|p| is_hex64(p))
        .ok_or(ListError::Malformed("pubkey"))?;
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .filter(|p| is_hex64(p))
        .ok_or(ListError::Malformed("id"))?;
    let created_at = value
        .get("created_at")
        .and_then(Value::as_u64)
        .ok_or(ListError::Malformed("created_at"))?;
    let kind_number = value
        .get("kind")
        .and_then(Value::as_u64)
        .ok_or(ListError::Malformed("kind"))?;
    let kind = match kind_number {
        OUTBOX_KIND => ListKind::Outbox,
        INBOX_KIND => ListKind::Inbox,
        kind => return Err(ListError::NotAList { kind }),
    };
    let tags = value
        .get("tags")
        .and_then(Value::as_array)
        .ok_or(ListError::Malformed("tags"))?;
    let (entries, refused) = entries(tags, kind, max, allow_private);
    Ok(ParsedList {
        author: author.to_owned(),
        kind,
        created_at,
        id: id.to_owned(),
        entries,
        refused,
    })
}

/// Whether `s` is 64 lowercase hex digits: a public key or an event id.
pub(crate) fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn entries(tags: &[Value], kind: ListKind, max: usize, allow_private: bool) -> (Vec<Entry>, usize) {
    let name = match kind {
        ListKind::Outbox => "r",
        ListKind::Inbox => "relay",
    };
    let mut out: Vec<Entry> = Vec::new();
    let mut refused = 0;
    for tag in tags {
        let Some(tag) = tag.as_array() else {
            continue;
        };
        if tag.first().and_then(Value::as_str) != Some(name) {
            continue;
        }
        let Some(url) = tag.get(1).and_then(Value::as_str) else {
            refused += 1;
            continue;
        };
        let marker = tag.get(2).and_then(Value::as_str);
        let (write, read) = match (kind, marker) {
            (ListKind::Inbox, _) => (false, true),
            (ListKind::Outbox, Some("write")) => (true, false),
            (ListKind::Outbox, Some("read")) => (false, true),
            (ListKind::Outbox, _) => (true, true),
        };
        let url = match relay_url::normalize(url, allow_private) {
            Ok(url) => url,
            Err(BadRelayUrl::TooLong | BadRelayUrl::NotARelay | BadRelayUrl::Private) => {
                refused += 1;
                continue;
            }
        };
        if let Some(seen) = out.iter_mut().find(|e| e.url == url) {
            // The same relay twice: the markers add up.
            seen.write |= write;
            seen.read |= read;
            continue;
        }
        if out.len() >= max {
            refused += 1;
            continue;
        }
        out.push(Entry { url, write, read });
    }
    (out, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PK: &str = "aa00000000000000000000000000000000000000000000000000000000000001";
    const ID: &str = "bb00000000000000000000000000000000000000000000000000000000000001";

    fn list(kind: u64, tags: &str) -> String {
        format!(
            r#"{{"id":"{ID}","pubkey":"{PK}","created_at":100,"kind":{kind},"tags":{tags},"content":"","sig":""}}"#
        )
    }

    #[test]
    fn markers_say_write_read_or_both() {
        let parsed = parse(
            &list(
                10002,
                r#"[["r","wss://a.example","write"],["r","wss://b.example","read"],["r","wss://c.example"],["p","x"]]"#,
            ),
            16,
            false,
        )
        .unwrap();
        let got: Vec<(&str, bool, bool)> = parsed
            .entries
            .iter()
            .map(|e| (e.url.as_str(), e.write, e.read))
            .collect();
        assert_eq!(
            got,
            [
                ("wss://a.example", true, false),
                ("wss://b.example", false, true),
                ("wss://c.example", true, true)
            ]
        );
        assert_eq!(
            (parsed.kind, parsed.created_at, parsed.refused),
            (ListKind::Outbox, 100, 0)
        );
    }

    #[test]
    fn an_inbox_list_names_relay_tags() {
        let parsed = parse(
            &list(
                10050,
                r#"[["relay","wss://dm.example/"],["r","wss://x.example"]]"#,
            ),
            16,
            false,
        )
        .unwrap();
        assert_eq!(parsed.kind, ListKind::Inbox);
        assert_eq!(
            parsed.entries,
            [Entry {
                url: "wss://dm.example".into(),
                write: false,
                read: true
            }]
        );
    }

    #[test]
    fn a_hostile_list_is_cut_at_its_bound() {
        let mut tags: Vec<String> = (0..10_000)
            .map(|i| format!(r#"["r","wss://r{i}.example"]"#))
            .collect();
        tags.push(r#"["r","https://no.example"]"#.into());
        tags.push(r#"["r",7]"#.into());
        let parsed = parse(&list(10002, &format!("[{}]", tags.join(","))), 16, false).unwrap();
        assert_eq!(parsed.entries.len(), 16);
        assert_eq!(parsed.entries[15].url, "wss://r15.example");
        assert_eq!(parsed.refused, 10_000 - 16 + 2);
    }

    #[test]
    fn the_same_relay_twice_is_one_entry() {
        let parsed = parse(
            &list(
                10002,
                r#"[["r","wss://a.example","read"],["r","wss://A.example:443/","write"]]"#,
            ),
            16,
            false,
        )
        .unwrap();
        assert_eq!(
            parsed.entries,
            [Entry {
                url: "wss://a.example".into(),
                write: true,
                read: true
            }]
        );
    }

    #[test]
    fn what_is_no_list_is_a_typed_error() {
        assert_eq!(parse("[]", 16, false), Err(ListError::Malformed("pubkey")));
        assert_eq!(parse("{", 16, false), Err(ListError::Malformed("not JSON")));
        assert_eq!(
            parse(&list(1, "[]"), 16, false),
            Err(ListError::NotAList { kind: 1 })
        );
        assert_eq!(
            parse(&list(10002, "{}"), 16, false),
            Err(ListError::Malformed("tags"))
        );
    }
}
