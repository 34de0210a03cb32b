//! The filters a catch-up sends, each rewritten from the user's own. The user's filter is
//! never narrowed on the live side: `limit: 0` asks for no stored events and keeps every
//! other field, so whatever the relay would push live before a reconnect it pushes after.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::nostr::message::EventId;

/// The live half: the user's filter with `limit: 0` (no stored events, the same live ones).
pub(crate) fn live(filter: &RawValue) -> Box<RawValue> {
    rewrite(filter, |map| {
        map.insert("limit".into(), 0.into());
    })
}

/// The live half while a NIP-77 session reconciles: the user's filter with at most one
/// stored event. Not `limit: 0`, because nostr-rs-relay sends no EOSE at all for a REQ whose
/// every filter has `limit: 0` (`subscription.rs`, `needs_historical_events`), and the
/// session opens the reconciliation at EOSE. The one event is the newest, which the memory
/// most likely holds.
pub(crate) fn newest(filter: &RawValue) -> Box<RawValue> {
    rewrite(filter, |map| {
        let own = map.get("limit").and_then(Value::as_u64).unwrap_or(1);
        map.insert("limit".into(), own.min(1).into());
    })
}

/// One page of a `since` catch-up: the user's filter from `since` (never earlier than its
/// own), up to `until` (never later than its own), at most `page` events. The user's `limit`
/// bounded the first answer only; a catch-up wants the whole window.
pub(crate) fn window(
    filter: &RawValue,
    since: u64,
    until: Option<u64>,
    page: usize,
) -> Box<RawValue> {
    rewrite(filter, |map| {
        raise(map, "since", since);
        if let Some(until) = until {
            lower(map, "until", until);
        }
        map.insert("limit".into(), page.into());
    })
}

/// The filter a NIP-77 session reconciles: the user's, from `since`, without a `limit` (the
/// set is the whole window).
pub(crate) fn reconciled(filter: &RawValue, since: u64) -> Box<RawValue> {
    rewrite(filter, |map| {
        raise(map, "since", since);
        map.remove("limit");
    })
}

/// A fetch of `ids` (what a reconciliation found missing); `None` only if JSON could not
/// hold hex strings.
pub(crate) fn ids(ids: &[EventId]) -> Option<Box<RawValue>> {
    let list: Vec<String> = ids.iter().map(ToString::to_string).collect();
    RawValue::from_string(serde_json::json!({ "ids": list }).to_string()).ok()
}

fn rewrite(filter: &RawValue, edit: impl FnOnce(&mut Map<String, Value>)) -> Box<RawValue> {
    let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(filter.get()) else {
        return filter.to_owned();
    };
    edit(&mut map);
    serde_json::to_string(&map)
        .ok()
        .and_then(|s| RawValue::from_string(s).ok())
        .unwrap_or_else(|| filter.to_owned())
}

fn raise(map: &mut Map<String, Value>, key: &str, at_least: u64) {
    let current = map.get(key).and_then(Value::as_u64).unwrap_or(0);
    map.insert(key.into(), at_least.max(current).into());
}

fn lower(map: &mut Map<String, Value>, key: &str, at_most: u64) {
    let current = map.get(key).and_then(Value::as_u64).unwrap_or(u64::MAX);
    map.insert(key.into(), at_most.min(current).into());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn rewrites_keep_the_users_bounds() {
        let f = raw(r##"{"kinds":[1],"#t":["s0"],"limit":2,"since":100,"until":900}"##);
        assert_eq!(
            live(&f).get(),
            r##"{"#t":["s0"],"kinds":[1],"limit":0,"since":100,"until":900}"##
        );
        assert_eq!(
            window(&f, 50, Some(1_000), 500).get(),
            r##"{"#t":["s0"],"kinds":[1],"limit":500,"since":100,"until":900}"##
        );
        assert_eq!(
            window(&f, 200, Some(300), 500).get(),
            r##"{"#t":["s0"],"kinds":[1],"limit":500,"since":200,"until":300}"##
        );
        assert_eq!(
            reconciled(&f, 300).get(),
            r##"{"#t":["s0"],"kinds":[1],"since":300,"until":900}"##
        );
        assert_eq!(
            ids(&[EventId([0xab; 32])]).unwrap().get(),
            format!(r#"{{"ids":["{}"]}}"#, "ab".repeat(32))
        );
    }
}
