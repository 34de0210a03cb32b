//! How far back a catch-up looks, by what a filter can match: most events reach a relay
//! within seconds of their `created_at`, but a NIP-59 gift wrap (kind 1059, the envelope of
//! every NIP-17 direct message) is dated at a random time up to two days in the past, so a
//! wrap that reaches the relay during a gap is dated hours or days before it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::tree::IntoTree;

/// NIP-59 gift wraps: dated up to two days back.
pub const GIFT_WRAP: u16 = 1059;

/// The lookback per kind: a default for every kind, and longer ones for the kinds whose
/// events are dated in the past on purpose.
///
/// A filter's lookback is the longest of the kinds it can match: every kind in its `kinds`,
/// or, with no `kinds`, every kind at all (the longest entry of the table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookbacks {
    /// For every kind the table does not name (2 min).
    pub default: Duration,
    /// Kind -> lookback, for the kinds that need more than the default. Bounded by the kinds
    /// there are (65 536); it is the application's configuration, not the peer's input.
    pub by_kind: BTreeMap<u16, Duration>,
}

impl Default for Lookbacks {
    /// 2 minutes for every kind; kind 1059 two days plus an hour (NIP-59's two days, and an
    /// hour for the clocks of the sender and the relay).
    fn default() -> Self {
        Lookbacks {
            default: Duration::from_secs(120),
            by_kind: [(GIFT_WRAP, Duration::from_secs(49 * 3_600))]
                .into_iter()
                .into_map(),
        }
    }
}

impl Lookbacks {
    /// Set kind `kind`'s lookback (an application's own kind that is dated back, say).
    #[must_use]
    pub fn with(mut self, kind: u16, lookback: Duration) -> Self {
        self.by_kind.insert(kind, lookback);
        self
    }

    /// The lookback of a filter (its JSON text): the longest of the kinds it can match.
    pub fn for_filter(&self, filter: &str) -> Duration {
        match serde_json::from_str::<Map<String, Value>>(filter) {
            Ok(map) => self.for_map(&map),
            Err(_) => self.longest(),
        }
    }

    fn for_map(&self, filter: &Map<String, Value>) -> Duration {
        let Some(kinds) = filter.get("kinds").and_then(Value::as_array) else {
            return self.longest();
        };
        kinds
            .iter()
            .filter_map(|k| k.as_u64().and_then(|k| u16::try_from(k).ok()))
            .filter_map(|k| self.by_kind.get(&k).copied())
            .fold(self.default, Duration::max)
    }

    fn longest(&self) -> Duration {
        self.by_kind
            .values()
            .copied()
            .fold(self.default, Duration::max)
    }
}

/// What a catch-up needs to know of one of the user's filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FilterBounds {
    /// Its `since`, or 0.
    pub(crate) since: u64,
    /// Its `limit`, if any.
    pub(crate) limit: Option<u64>,
    /// Its lookback, in seconds.
    pub(crate) lookback: u64,
}

impl FilterBounds {
    pub(crate) fn of(filter: &RawValue, lookbacks: &Lookbacks) -> FilterBounds {
        let Ok(map) = serde_json::from_str::<Map<String, Value>>(filter.get()) else {
            return FilterBounds {
                since: 0,
                limit: None,
                lookback: lookbacks.longest().as_secs(),
            };
        };
        FilterBounds {
            since: map.get("since").and_then(Value::as_u64).unwrap_or(0),
            limit: map.get("limit").and_then(Value::as_u64),
            lookback: lookbacks.for_map(&map).as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_looks_back_as_far_as_the_kinds_it_can_match() {
        let l = Lookbacks::default();
        let two_days = Duration::from_secs(49 * 3_600);
        assert_eq!(l.for_filter(r#"{"kinds":[1]}"#), Duration::from_secs(120));
        assert_eq!(l.for_filter(r##"{"kinds":[1059],"#p":["ab"]}"##), two_days);
        assert_eq!(l.for_filter(r#"{"kinds":[1,1059]}"#), two_days);
        assert_eq!(
            l.for_filter(r#"{"authors":["ab"]}"#),
            two_days,
            "no kinds: any kind"
        );
        assert_eq!(l.for_filter(r#"{"kinds":[]}"#), Duration::from_secs(120));
        assert_eq!(
            l.for_filter(r#"{"kinds":[99999999]}"#),
            Duration::from_secs(120)
        );
        let l = l.with(30_000, Duration::from_secs(7 * 86_400));
        assert_eq!(
            l.for_filter(r#"{"kinds":[30000,1]}"#),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(l.for_filter(r#"{}"#), Duration::from_secs(7 * 86_400));
    }
}
