//! One subscription's state: its filters, where it stands with the relay, its bounded retry
//! count, its catch-up and its memory of delivered event ids.

use std::cmp::Reverse;
use std::fmt;

use serde_json::value::RawValue;

use crate::nostr::catch_up::{self, CatchUp, Memory};
use crate::nostr::message::EventId;
use crate::time::Instant;

/// The application's handle for a subscription; stable across retries and reconnects.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriptionId(pub u64);

impl fmt::Debug for SubscriptionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for SubscriptionId {
    /// `s7` for slot 7; `s7g2` for the slot's third tenant (slots are reused).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (generation, slot) = (self.0 >> 32, self.0 & u64::from(u32::MAX));
        if generation == 0 {
            write!(f, "s{slot}")
        } else {
            write!(f, "s{slot}g{generation}")
        }
    }
}

/// Which subscriptions go first when several wait (replay, queue): higher first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub i32);

impl Priority {
    /// The default priority.
    pub const NORMAL: Priority = Priority(0);
    /// For what the user is looking at right now (the visible channel).
    pub const HIGH: Priority = Priority(10);
    /// For background subscriptions.
    pub const LOW: Priority = Priority(-10);
}

/// One NIP-01 filter, validated to be a JSON object and kept as its raw text.
#[derive(Clone, Debug)]
pub struct Filter(Box<RawValue>);

/// A filter that is not a JSON object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidFilter(pub String);

impl fmt::Display for InvalidFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid filter: {}", self.0)
    }
}

impl std::error::Error for InvalidFilter {}

impl Filter {
    /// Validate `json` as a filter object.
    ///
    /// # Errors
    /// [`InvalidFilter`] when it is not valid JSON or not an object.
    pub fn new(json: &str) -> Result<Filter, InvalidFilter> {
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(json).map_err(|e| InvalidFilter(e.to_string()))?;
        let compact = serde_json::to_string(&map).map_err(|e| InvalidFilter(e.to_string()))?;
        RawValue::from_string(compact)
            .map(Filter)
            .map_err(|e| InvalidFilter(e.to_string()))
    }

    /// The filter's JSON.
    pub fn json(&self) -> &str {
        self.0.get()
    }
}

/// Where a subscription stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubState {
    /// Registered, not on the wire, not waiting for a slot (no connection yet).
    Idle,
    /// Waiting in the send queue: for its replay batch, a free slot, or the gate.
    Queued,
    /// REQ sent, waiting for EOSE.
    Pending,
    /// EOSE received: stored events are done, new ones stream in.
    Live,
    /// Refused; it re-enters the send queue when its timer fires (behind the gate).
    Retrying,
    /// Refused with `auth-required:`; held until `authenticate` gets its OK.
    AwaitingAuth,
}

impl SubState {
    /// Whether a REQ for it is open on the relay (counts against `max_subscriptions`).
    pub fn is_open(self) -> bool {
        matches!(self, SubState::Pending | SubState::Live)
    }
}

/// Where a subscription waits in the send queue: priority (highest first), registration
/// order, and the id to find it by.
pub(crate) type QueueKey = (Reverse<Priority>, u64, SubscriptionId);

/// The session's record of one subscription.
#[derive(Debug)]
pub(crate) struct Subscription {
    pub(crate) id: SubscriptionId,
    pub(crate) priority: Priority,
    /// Registration order. Slots are reused, so ids do not follow it; waiting REQs are sent
    /// by priority, then by this, first come first served.
    pub(crate) order: u64,
    /// The filters as one JSON array text: a single allocation, most of it the filters' own
    /// bytes, which keeps the per-subscription overhead small.
    pub(crate) filters: Box<str>,
    /// How many filters `filters` holds.
    pub(crate) filter_count: usize,
    pub(crate) state: SubState,
    /// Bumped on every REQ: the wire id is `(id, attempt)`, so anything the relay says about
    /// an older REQ is recognisably stale.
    pub(crate) attempt: u32,
    /// Whether the current REQ has produced anything (a relay that streams without EOSE is
    /// slow, not stalled).
    pub(crate) responded: bool,
    /// Order of the current REQ among all sent, to attribute id-less NOTICE refusals.
    pub(crate) sent_seq: u64,
    /// The current REQ is a catch-up's re-send under the same wire id: its EOSE is the
    /// catch-up's, and the application already heard this attempt's.
    pub(crate) reissued: bool,
    /// The deadline of this subscription's one timer, if any (retry, EOSE or auth hold).
    pub(crate) timer: Option<Instant>,
    /// What it delivered, exact above the floor: dedup and the NIP-77 "have" set.
    pub(crate) memory: Memory,
    pub(crate) catch_up: CatchUp,
}

impl Subscription {
    pub(crate) fn new(
        id: SubscriptionId,
        filters: &[Filter],
        priority: Priority,
        order: u64,
    ) -> Self {
        let mut joined =
            String::with_capacity(2 + filters.iter().map(|f| f.json().len() + 1).sum::<usize>());
        joined.push('[');
        for (i, f) in filters.iter().enumerate() {
            if i > 0 {
                joined.push(',');
            }
            joined.push_str(f.json());
        }
        joined.push(']');
        Subscription {
            id,
            priority,
            order,
            filters: joined.into_boxed_str(),
            filter_count: filters.len(),
            state: SubState::Idle,
            attempt: 0,
            responded: false,
            sent_seq: 0,
            reissued: false,
            timer: None,
            memory: Memory::default(),
            catch_up: CatchUp::default(),
        }
    }

    /// Its place in the send queue: higher priority first, then registration order.
    pub(crate) fn queue_key(&self) -> QueueKey {
        (Reverse(self.priority), self.order, self.id)
    }

    /// The wire id of the current attempt.
    pub(crate) fn wire_id(&self) -> String {
        wire_id(self.id, self.attempt)
    }

    /// The user's filters as given.
    pub(crate) fn user_filters(&self) -> Vec<&RawValue> {
        split_filters(&self.filters)
    }

    /// The filters for the next REQ: the user's, or with catch-up on, what its catch-up
    /// phase asks (see [`CatchUp::req_filters`]).
    pub(crate) fn req_filters(&self, ctx: Option<&catch_up::Ctx<'_>>) -> Vec<Box<RawValue>> {
        let user = self.user_filters();
        match ctx {
            Some(ctx) => self.catch_up.req_filters(&user, ctx, &self.memory),
            None => user.into_iter().map(ToOwned::to_owned).collect(),
        }
    }

    /// Record a delivered event. `latest` is the latest plausible `created_at` (wall clock
    /// plus tolerance) if known; `room` is what the memory may add without evicting.
    ///
    /// An event dated after `latest` is admitted but kept apart: it never moves the memory's
    /// window, so one event dated 2106 cannot push the remembered window past everything
    /// else.
    pub(crate) fn admit(
        &mut self,
        id: EventId,
        created_at: u64,
        latest: Option<u64>,
        room: usize,
    ) -> (Admit, catch_up::Stored) {
        let nothing = catch_up::Stored {
            added: 0,
            evicted: 0,
        };
        if self.memory.contains(created_at, id) {
            return (Admit::Duplicate, nothing);
        }
        if self.catch_up.in_gap() && created_at < self.memory.floor() {
            // Below the window while catching up: it may have been delivered and forgotten
            // (the memory's bound moved the floor), so it is not delivered again. The window
            // reported exact starts at the floor.
            return (Admit::BelowWindow, nothing);
        }
        if latest.is_some_and(|latest| created_at > latest) {
            self.memory.insert_future(created_at, id);
            return (Admit::FutureDated, nothing);
        }
        (Admit::Fresh, self.memory.insert(created_at, id, room))
    }
}

/// Whether an event is new to a subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// New: deliver it.
    Fresh,
    /// New but dated implausibly far ahead: deliver it, keep it out of the window.
    FutureDated,
    /// Delivered before: drop it.
    Duplicate,
    /// Older than the window a catch-up is exact in, and possibly delivered before: drop it.
    BelowWindow,
}

/// A subscription's joined filters, one by one (borrowing the text alone, so the rest of the
/// subscription stays free to change).
pub(crate) fn split_filters(filters: &str) -> Vec<&RawValue> {
    // The text was built from validated filter objects, so it always parses.
    serde_json::from_str(filters).unwrap_or_default()
}

/// Encode the wire id of `attempt` of subscription `id`: short, ASCII, <= 64 characters.
pub(crate) fn wire_id(id: SubscriptionId, attempt: u32) -> String {
    format!("{:x}:{:x}", id.0, attempt)
}

/// The wire id of `attempt`'s NIP-77 session for its `filter`-th filter: its REQ's, marked
/// with `n`, and after the first filter with the filter's index (so an answer to one
/// filter's session is never taken for the next one's).
pub(crate) fn neg_wire_id(id: SubscriptionId, attempt: u32, filter: usize) -> String {
    if filter == 0 {
        format!("n{}", wire_id(id, attempt))
    } else {
        format!("n{}.{filter:x}", wire_id(id, attempt))
    }
}

/// Decode a NIP-77 session's wire id: the subscription, the attempt and the filter.
pub(crate) fn parse_neg_wire_id(wire: &str) -> Option<(SubscriptionId, u32, usize)> {
    let wire = wire.strip_prefix('n')?;
    let (wire, filter) = match wire.split_once('.') {
        None => (wire, 0),
        // One spelling per session: the first filter's has no index, the others' no
        // leading zero.
        Some((wire, filter)) if !filter.starts_with('0') && filter.len() <= 4 => {
            (wire, usize::from_str_radix(filter, 16).ok()?)
        }
        Some(_) => return None,
    };
    let (id, attempt) = parse_wire_id(wire)?;
    Some((id, attempt, filter))
}

/// Decode a wire id; `None` for anything this session could not have sent.
pub(crate) fn parse_wire_id(wire: &str) -> Option<(SubscriptionId, u32)> {
    let (id, attempt) = wire.split_once(':')?;
    if id.is_empty() || id.len() > 16 || attempt.is_empty() || attempt.len() > 8 {
        return None;
    }
    let id = u64::from_str_radix(id, 16).ok()?;
    let attempt = u32::from_str_radix(attempt, 16).ok()?;
    Some((SubscriptionId(id), attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_ids_round_trip_and_reject_foreign_ids() {
        let w = wire_id(SubscriptionId(u64::MAX), u32::MAX);
        assert!(w.len() <= 64);
        assert_eq!(
            parse_wire_id(&w),
            Some((SubscriptionId(u64::MAX), u32::MAX))
        );
        assert_eq!(parse_wire_id("1f:2"), Some((SubscriptionId(31), 2)));
        for foreign in [
            "",
            ":",
            "a:",
            ":1",
            "zz:1",
            "1:zz",
            "11111111111111111:1",
            "1:111111111",
            "feed",
        ] {
            assert_eq!(parse_wire_id(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn negentropy_wire_ids_name_one_filter_in_one_spelling() {
        let id = SubscriptionId(7);
        assert_eq!(neg_wire_id(id, 2, 0), "n7:2");
        assert_eq!(neg_wire_id(id, 2, 17), "n7:2.11");
        for filter in [0, 1, 17, 0xffff] {
            let wire = neg_wire_id(id, 2, filter);
            assert_eq!(parse_neg_wire_id(&wire), Some((id, 2, filter)), "{wire}");
        }
        for foreign in [
            "7:2",
            "n7:2.",
            "n7:2.0",
            "n7:2.01",
            "n7:2.10000",
            "n7:2.x",
            "n7:2.1.1",
        ] {
            assert_eq!(parse_neg_wire_id(foreign), None, "{foreign}");
        }
    }
}
