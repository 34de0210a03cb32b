//! Fitting a routed filter to one relay: its authors in chunks, chunks packed into REQs no
//! larger than the relay takes. A follow feed of 2 000 authors is about 134 KB of hex keys;
//! a relay that caps frames at 64 KiB refuses it whole, so it is asked in pieces instead of
//! being refused locally.

use serde_json::{Map, Value};

use crate::nostr::{Applied, Filter};

/// Authors in one filter (250): most relays cap a filter's list somewhere above it, and a
/// filter of this size is about 17 KB.
pub const AUTHOR_CHUNK: usize = 250;
/// Filters in one REQ (10): NIP-11's `max_filters` of the relays that declare one is at
/// least this in the deployments seen.
pub const FILTERS_PER_REQ: usize = 10;
/// Frame size a REQ is held to when the relay declares none (64 KiB): the smallest cap
/// seen on deployed relays.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024;
/// Bytes of a REQ beyond its filters: `["REQ","<id of at most 64>",` and `]`.
const REQ_OVERHEAD: usize = 80;

/// One group of authors asked with the same `since`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) authors: Vec<String>,
    /// Overrides the filter's `since` when later (a catch-up's start); `None` keeps the
    /// user's filter as it is, `limit` included.
    pub(crate) since: Option<u64>,
}

/// The REQs for `groups` on a relay with `limits`: each REQ's filters, and the authors it
/// asks about. `base` is the user's filter without `authors`; `author_key` is the field the
/// people go in (`authors`, or `#p` for an inbox).
pub(crate) fn reqs(
    base: &Map<String, Value>,
    author_key: &str,
    groups: &[Group],
    limits: &Applied,
) -> Vec<(Vec<Filter>, Vec<String>)> {
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
    // Each filter must fit a frame of its own with room to spare.
    let per_author = 64 + 3;
    let room = max_frame.saturating_sub(REQ_OVERHEAD + 256 + base_len(base));
    chunk = chunk.min((room / per_author).max(1));
    let mut filters: Vec<(String, Vec<String>)> = Vec::new();
    for group in groups {
        for authors in group.authors.chunks(chunk) {
            let mut map = base.clone();
            if let Some(since) = group.since {
                let user = map.get("since").and_then(Value::as_u64).unwrap_or(0);
                map.insert("since".into(), Value::from(since.max(user)));
                // Bounded by `since`: a catch-up is cut by no `limit`.
                map.remove("limit");
            } else if let Some(l) = limit {
                map.insert("limit".into(), Value::from(l));
            }
            map.insert(
                author_key.into(),
                Value::Array(authors.iter().cloned().map(Value::String).collect()),
            );
            let json = Value::Object(map).to_string();
            filters.push((json, authors.to_vec()));
        }
    }
    pack(filters, max_frame)
}

fn base_len(base: &Map<String, Value>) -> usize {
    Value::Object(base.clone()).to_string().len()
}

/// Filters into REQs: in order, at most [`FILTERS_PER_REQ`] a REQ, each REQ within
/// `max_frame`.
fn pack(filters: Vec<(String, Vec<String>)>, max_frame: usize) -> Vec<(Vec<Filter>, Vec<String>)> {
    let mut out: Vec<(Vec<Filter>, Vec<String>)> = Vec::new();
    let mut size = REQ_OVERHEAD;
    for (json, authors) in filters {
        let Ok(filter) = Filter::new(&json) else {
            continue;
        };
        let fits = out
            .last()
            .is_some_and(|(f, _)| f.len() < FILTERS_PER_REQ && size + json.len() < max_frame);
        if !fits {
            out.push((Vec::new(), Vec::new()));
            size = REQ_OVERHEAD;
        }
        size += json.len() + 1;
        if let Some((f, a)) = out.last_mut() {
            f.push(filter);
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
        }];
        let mut limits = Applied {
            subscription_limit: None,
            limit_is_declared: false,
            max_message_length: Some(64 * 1024),
            max_subid_length: None,
            auth_first: false,
            max_limit: None,
        };
        let reqs = reqs(&base, "authors", &groups, &limits);
        let asked: usize = reqs.iter().map(|(_, a)| a.len()).sum();
        assert_eq!(asked, 2_000);
        for (filters, _) in &reqs {
            let frame: usize = filters.iter().map(|f| f.json().len() + 1).sum::<usize>() + 80;
            assert!(frame <= 64 * 1024, "{frame}");
        }
        assert_eq!(
            reqs.len(),
            3,
            "2 000 keys are 134 KB: three frames of 64 KiB"
        );
        limits.max_message_length = Some(8 * 1024);
        let small = super::reqs(&base, "authors", &groups, &limits);
        assert!(small.len() >= 17, "{}", small.len());
    }

    #[test]
    fn a_catch_up_group_sets_since_and_drops_limit() {
        let base: Map<String, Value> =
            serde_json::from_str(r#"{"kinds":[1],"since":50,"limit":10}"#).unwrap();
        let groups = [
            Group {
                authors: keys(1),
                since: None,
            },
            Group {
                authors: keys(2)[1..].to_vec(),
                since: Some(100),
            },
        ];
        let limits = Applied {
            subscription_limit: None,
            limit_is_declared: false,
            max_message_length: None,
            max_subid_length: None,
            auth_first: false,
            max_limit: None,
        };
        let reqs = reqs(&base, "authors", &groups, &limits);
        assert_eq!(reqs.len(), 1);
        let json: Vec<&str> = reqs[0].0.iter().map(Filter::json).collect();
        assert_eq!(
            json,
            [
                format!(
                    r#"{{"authors":["{}"],"kinds":[1],"limit":10,"since":50}}"#,
                    keys(1)[0]
                ),
                format!(
                    r#"{{"authors":["{}"],"kinds":[1],"since":100}}"#,
                    keys(2)[1]
                ),
            ]
        );
    }
}
