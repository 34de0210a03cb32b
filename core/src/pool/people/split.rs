//! Fitting a routed filter to one relay: its authors in chunks, chunks packed into REQs no
//! larger than the relay takes. A follow feed of 2 000 authors is about 134 KB of hex keys;
//! a relay that caps frames at 64 KiB refuses it whole, so it is asked in pieces instead of
//! being refused locally.

use serde_json::{Map, Value};

use crate::nostr::session::req_frame_bound;
use crate::nostr::{Filter, RelayInfo};

/// Authors in one filter (250): most relays cap a filter's list somewhere above it, and a
/// filter of this size is about 17 KB.
pub const AUTHOR_CHUNK: usize = 250;
/// Filters in one REQ (10) when the relay declares no NIP-11 `max_filters` (a lower one
/// wins): the `max_filters` of the relays that declare one is at
/// least this in the deployments seen.
pub const FILTERS_PER_REQ: usize = 10;
/// Frame size a REQ is held to when the relay declares none (64 KiB): the smallest cap
/// seen on deployed relays.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024;

/// One group of authors asked with the same `since`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) authors: Vec<String>,
    /// Where a catch-up starts: the group is asked in two halves, live (the user's filter
    /// with `limit: 0`) and the window from here (no `limit`), as a relay session catches
    /// up. `None` asks the user's filter as it is, `limit` included.
    pub(crate) since: Option<u64>,
    /// The relay never answered about these people: its live half is the user's filter as
    /// it is (`limit` included, whole history), beside the window, so a first ask sees what
    /// the relay holds and the gap since they were last served live is still covered.
    pub(crate) whole: bool,
}

/// The REQs for `groups` on a relay that declared `limits` (its NIP-11 document): each
/// REQ's filters, and the authors it asks about. `base` is the user's filter without `authors`; `author_key` is the field the
/// people go in (`authors`, or `#p` for an inbox).
pub(crate) fn reqs(
    base: &Map<String, Value>,
    author_key: &str,
    groups: &[Group],
    limits: &RelayInfo,
) -> Vec<(Vec<Filter>, Vec<String>)> {
    let per_req = limits
        .max_filters
        .unwrap_or(FILTERS_PER_REQ)
        .min(FILTERS_PER_REQ);
    let max_frame = limits
        .max_message_length
        .unwrap_or(DEFAULT_MAX_FRAME)
        .min(DEFAULT_MAX_FRAME * 16);
    let mut chunk = AUTHOR_CHUNK;
    // A limit the relay clamps is spread over more filters, each asking what it serves.
    let mut limit = base.get("limit").and_then(Value::as_u64);
    if let (Some(l), Some(max)) = (limit, limits.max_limit) {
        let max = max as u64;
        if l > max {
            let pieces = l.div_ceil(max).min(64) as usize;
            let authors = groups.iter().map(|g| g.authors.len()).max().unwrap_or(1);
            chunk = chunk.min(authors.div_ceil(pieces).max(1));
            limit = Some(max);
        }
    }
    // A catch-up's two halves share a REQ, and the relay session refuses a REQ whose
    // catch-up after a reconnect (every filter twice, with `since`, `until` and `limit`)
    // could exceed the frame: each chunk of authors must fit that bound.
    let per_author = 2 * 2 * (64 + 3);
    let fixed = req_frame_bound(2 * (base_len(base) + 64), 2);
    chunk = chunk.min((max_frame.saturating_sub(fixed) / per_author).max(1));
    let mut units: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for group in groups {
        for authors in group.authors.chunks(chunk) {
            let mut map = base.clone();
            map.insert(
                author_key.into(),
                Value::Array(authors.iter().cloned().map(Value::String).collect()),
            );
            let filters = match group.since {
                Some(since) if group.whole => {
                    let mut filters = catch_up(map.clone(), since);
                    if let Some(l) = limit {
                        map.insert("limit".into(), Value::from(l));
                    }
                    filters[0] = Value::Object(map).to_string();
                    filters
                }
                Some(since) => catch_up(map, since),
                None => {
                    if let Some(l) = limit {
                        map.insert("limit".into(), Value::from(l));
                    }
                    vec![Value::Object(map).to_string()]
                }
            };
            units.push((filters, authors.to_vec()));
        }
    }
    pack(units, max_frame, per_req)
}

/// The two halves of a catch-up from `since` of the user's filter `map`, as a relay
/// session asks them after a gap: live, the filter itself with `limit: 0` (a catch-up never
/// narrows the live subscription: an event dated before `since` that arrives later still
/// matches), and the window from `since` (never earlier than the filter's own) with no
/// `limit` (the user's bounded the first answer only).
fn catch_up(mut map: Map<String, Value>, since: u64) -> Vec<String> {
    let mut window = map.clone();
    map.insert("limit".into(), Value::from(0));
    let own = window.get("since").and_then(Value::as_u64).unwrap_or(0);
    window.insert("since".into(), Value::from(since.max(own)));
    window.remove("limit");
    vec![
        Value::Object(map).to_string(),
        Value::Object(window).to_string(),
    ]
}

fn base_len(base: &Map<String, Value>) -> usize {
    Value::Object(base.clone()).to_string().len()
}

/// Units of filters into REQs: in order, a unit never split (a catch-up's live half alone
/// would get no EOSE from nostr-rs-relay, which sends none for a REQ whose every filter has
/// `limit: 0`), at most `per_req` filters a REQ (a unit larger than that goes alone), each
/// REQ within `max_frame`.
fn pack(
    units: Vec<(Vec<String>, Vec<String>)>,
    max_frame: usize,
    per_req: usize,
) -> Vec<(Vec<Filter>, Vec<String>)> {
    let mut out: Vec<(Vec<Filter>, Vec<String>)> = Vec::new();
    let mut size = 0;
    for (jsons, authors) in units {
        let Ok(filters) = jsons
            .iter()
            .map(|j| Filter::new(j))
            .collect::<Result<Vec<Filter>, _>>()
        else {
            continue;
        };
        let len: usize = jsons.iter().map(String::len).sum();
        // The relay session's own bound, which it refuses a REQ past.
        let fits = out.last().is_some_and(|(f, _)| {
            let count = f.len() + filters.len();
            count <= per_req && req_frame_bound(size + len, count) <= max_frame
        });
        if !fits {
            out.push((Vec::new(), Vec::new()));
            size = 0;
        }
        size += len;
        if let Some((f, a)) = out.last_mut() {
            f.extend(filters);
            a.extend(authors);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{i:064x}")).collect()
    }

    #[test]
    fn a_large_feed_is_cut_to_the_relays_frame_size() {
        let base: Map<String, Value> = serde_json::from_str(r#"{"kinds":[1]}"#).unwrap();
        let groups = [Group {
            authors: keys(2_000),
            since: None,
            whole: false,
        }];
        let mut limits = RelayInfo {
            max_message_length: Some(64 * 1024),
            ..RelayInfo::default()
        };
        let reqs = reqs(&base, "authors", &groups, &limits);
        let asked: usize = reqs.iter().map(|(_, a)| a.len()).sum();
        assert_eq!(asked, 2_000);
        for (filters, _) in &reqs {
            // Within the bound the relay session itself accepts a REQ by: its catch-up
            // after a reconnect asks every filter twice.
            let len = filters.iter().map(|f| f.json().len()).sum();
            let bound = req_frame_bound(len, filters.len());
            assert!(bound <= 64 * 1024, "{bound}");
        }
        assert_eq!(
            reqs.len(),
            5,
            "2 000 keys are 134 KB, twice that for a catch-up: five frames of 64 KiB"
        );
        limits.max_message_length = Some(8 * 1024);
        let small = super::reqs(&base, "authors", &groups, &limits);
        assert!(small.len() >= 33, "{}", small.len());
        for (filters, _) in &small {
            let len = filters.iter().map(|f| f.json().len()).sum();
            assert!(req_frame_bound(len, filters.len()) <= 8 * 1024);
        }
    }

    #[test]
    fn a_catch_up_group_is_a_live_half_and_an_unlimited_window() {
        let base: Map<String, Value> =
            serde_json::from_str(r#"{"kinds":[1],"since":50,"limit":10}"#).unwrap();
        let groups = [
            Group {
                authors: keys(1),
                since: None,
                whole: false,
            },
            Group {
                authors: keys(2)[1..].to_vec(),
                since: Some(100),
                whole: false,
            },
        ];
        let reqs = reqs(&base, "authors", &groups, &no_limits());
        assert_eq!(reqs.len(), 1);
        let json: Vec<&str> = reqs[0].0.iter().map(Filter::json).collect();
        let (first, moved) = (&keys(1)[0], &keys(2)[1]);
        assert_eq!(
            json,
            [
                format!(r#"{{"authors":["{first}"],"kinds":[1],"limit":10,"since":50}}"#),
                // The live half keeps the user's filter (its `since` too), with no stored
                // events; the window half asks from the catch-up's start, unlimited.
                format!(r#"{{"authors":["{moved}"],"kinds":[1],"limit":0,"since":50}}"#),
                format!(r#"{{"authors":["{moved}"],"kinds":[1],"since":100}}"#),
            ]
        );
    }

    #[test]
    fn a_catch_ups_halves_are_never_split_across_reqs() {
        let base: Map<String, Value> = serde_json::from_str(r#"{"kinds":[1]}"#).unwrap();
        let groups: Vec<Group> = (0..9)
            .map(|i| Group {
                authors: vec![keys(9)[i].clone()],
                since: Some(100 + i as u64),
                whole: false,
            })
            .collect();
        let reqs = reqs(&base, "authors", &groups, &no_limits());
        // 18 filters, 10 a REQ at most, pairs kept together: 5 pairs, then 4.
        let sizes: Vec<usize> = reqs.iter().map(|(f, _)| f.len()).collect();
        assert_eq!(sizes, [10, 8]);
        for (filters, _) in &reqs {
            assert!(filters.iter().any(|f| !f.json().contains(r#""limit":0"#)));
        }
    }

    fn no_limits() -> RelayInfo {
        RelayInfo::default()
    }

    #[test]
    fn a_declared_max_filters_bounds_every_req_and_never_splits_a_catch_up() {
        let base: Map<String, Value> = serde_json::from_str(r#"{"kinds":[1]}"#).unwrap();
        let groups = [
            Group {
                authors: keys(600),
                since: None,
                whole: false,
            },
            Group {
                authors: keys(601)[600..].to_vec(),
                since: Some(100),
                whole: false,
            },
        ];
        let limits = RelayInfo {
            max_filters: Some(2),
            ..RelayInfo::default()
        };
        let reqs = reqs(&base, "authors", &groups, &limits);
        // The 600 in three filters, two to a REQ; the catch-up's two halves in one of their
        // own rather than beside the third.
        let sizes: Vec<usize> = reqs.iter().map(|(f, _)| f.len()).collect();
        assert_eq!(sizes, [2, 1, 2]);
        let last: Vec<&str> = reqs[2].0.iter().map(Filter::json).collect();
        assert!(
            last[0].contains(r#""limit":0"#) || last[1].contains(r#""limit":0"#),
            "{last:?}"
        );
    }
}
