//! One subscription's state: its filters, where it stands with the relay, its bounded retry
//! count, its catch-up point and its memory of recently delivered event ids.

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use serde_json::value::RawValue;

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
    /// Re-REQs after refusals since the retry state last cleared.
    pub(crate) retries: u32,
    /// Whether the one retry after re-authentication has been used.
    pub(crate) auth_retried: bool,
    /// Whether the current REQ has produced anything (a relay that streams without EOSE is
    /// slow, not stalled).
    pub(crate) responded: bool,
    /// Order of the current REQ among all sent, to attribute id-less NOTICE refusals.
    pub(crate) sent_seq: u64,
    /// The deadline of this subscription's one timer, if any (retry, EOSE or auth hold).
    pub(crate) timer: Option<Instant>,
    /// What the last EOSE cleared, until the subscription proves stable.
    pub(crate) forgiven: Option<Forgiven>,
    /// Newest `created_at` delivered, for `since` catch-up.
    pub(crate) newest: Option<u64>,
    pub(crate) recent: RecentIds,
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
            retries: 0,
            auth_retried: false,
            responded: false,
            sent_seq: 0,
            timer: None,
            forgiven: None,
            newest: None,
            recent: RecentIds::default(),
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

    /// Forget refusal history (new socket, disconnect).
    pub(crate) fn clear_retry_state(&mut self) {
        self.retries = 0;
        self.auth_retried = false;
        self.forgiven = None;
    }

    /// A clean EOSE clears the retry state, provisionally: see [`Subscription::refused`].
    pub(crate) fn eose(&mut self, now: Instant) {
        self.forgiven = Some(Forgiven {
            at: now,
            retries: self.retries,
            auth_retried: self.auth_retried,
        });
        self.retries = 0;
        self.auth_retried = false;
    }

    /// A refusal arrived. If it came within `stable_after` of the EOSE that cleared the
    /// retry state, that EOSE was not clean and the count it cleared comes back: otherwise a
    /// relay answering every REQ with EOSE then CLOSED would reset the bound each time and
    /// keep the client re-requesting forever.
    pub(crate) fn refused(&mut self, now: Instant, stable_after: Duration) {
        let Some(forgiven) = self.forgiven.take() else {
            return;
        };
        if now.saturating_duration_since(forgiven.at) < stable_after {
            self.retries = self.retries.max(forgiven.retries);
            self.auth_retried |= forgiven.auth_retried;
        }
    }

    /// The filters for the next REQ: with `since` moved up when events were seen before
    /// (see [`CatchUpWindow::since`]); `None` as the window turns catch-up off.
    pub(crate) fn req_filters(&self, window: Option<&CatchUpWindow>) -> Vec<Box<RawValue>> {
        let since = window.zip(self.newest).map(|(w, newest)| w.since(newest));
        // The text was built from validated filter objects, so it always parses.
        let raw: Vec<&RawValue> = serde_json::from_str(&self.filters).unwrap_or_default();
        raw.into_iter()
            .map(|f| match since {
                Some(since) => with_since(f, since),
                None => f.to_owned(),
            })
            .collect()
    }

    /// Record a delivered event. Returns `false` when it is a re-delivery to drop.
    ///
    /// An event dated after `latest` (the wall clock plus its tolerance) is admitted but
    /// kept apart: it moves neither the catch-up watermark nor the overlap window, so it
    /// cannot push `since` into the future or evict the ids a re-REQ will deliver again.
    pub(crate) fn admit(&mut self, id: EventId, created_at: u64, window: &CatchUpWindow) -> Admit {
        if self.recent.contains(id) {
            return Admit::Duplicate;
        }
        if window.latest().is_some_and(|latest| created_at > latest) {
            self.recent.insert_future(id);
            return Admit::FutureDated;
        }
        let newest = self.newest.map_or(created_at, |n| n.max(created_at));
        self.newest = Some(newest);
        // The overlap starts where the next `since` will: both are capped by the wall clock.
        let horizon = window.since(newest);
        self.recent.insert(id, created_at, horizon, window.capacity);
        Admit::Fresh
    }
}

/// What catch-up asks again and keeps of delivered events, for [`Subscription::admit`]
/// and [`Subscription::req_filters`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct CatchUpWindow {
    /// The overlap a `since` re-REQ delivers again.
    pub(crate) slack: Duration,
    /// Ids remembered at most.
    pub(crate) capacity: usize,
    /// Wall-clock seconds now, if the driver gave the wall clock.
    pub(crate) unix_now: Option<u64>,
    /// How far past `unix_now` a `created_at` is still plausible.
    pub(crate) tolerance: Duration,
}

impl CatchUpWindow {
    /// The `since` of a re-REQ after events up to `newest`: `newest - slack`, but never
    /// later than wall-clock now minus the slack.
    pub(crate) fn since(&self, newest: u64) -> u64 {
        let newest = self.unix_now.map_or(newest, |now| newest.min(now));
        newest.saturating_sub(self.slack.as_secs())
    }

    /// The latest plausible `created_at`, if the wall clock is known.
    fn latest(&self) -> Option<u64> {
        self.unix_now
            .map(|now| now.saturating_add(self.tolerance.as_secs()))
    }
}

/// Whether an event is new to a subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// New: deliver it.
    Fresh,
    /// New but dated implausibly far ahead: deliver it, keep it out of catch-up.
    FutureDated,
    /// Delivered before: drop it.
    Duplicate,
}

/// `filter` with `since` raised to at least `since` (catch-up after a gap), never lowered.
fn with_since(filter: &RawValue, since: u64) -> Box<RawValue> {
    let Ok(mut map) =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(filter.get())
    else {
        return filter.to_owned();
    };
    let current = map
        .get("since")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    map.insert("since".into(), since.max(current).into());
    serde_json::to_string(&map)
        .ok()
        .and_then(|s| RawValue::from_string(s).ok())
        .unwrap_or_else(|| filter.to_owned())
}

/// Retry state cleared by an EOSE, kept until the subscription has stayed up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Forgiven {
    at: Instant,
    retries: u32,
    auth_retried: bool,
}

/// Encode the wire id of `attempt` of subscription `id`: short, ASCII, <= 64 characters.
pub(crate) fn wire_id(id: SubscriptionId, attempt: u32) -> String {
    format!("{:x}:{:x}", id.0, attempt)
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

/// Ids of events delivered within the catch-up overlap: the only ones a `since` re-REQ can
/// deliver again. Bounded by `capacity`: when full, ids older than the overlap go first, then
/// the oldest by `created_at` (which might then be delivered twice: the capacity makes that
/// unlikely rather than impossible). Ids are stored as 8 bytes folded from all 32: a false
/// "duplicate" needs a 64-bit collision.
///
/// Every delivered event is checked and recorded here, so a busy live subscription must not
/// pay for the whole memory on each event: entries are kept in `created_at` order (live
/// events arrive in order, so an insert is an append), which makes expiry and eviction a
/// pop from the front.
///
/// Future-dated events (see [`Subscription::admit`]) are remembered apart, at most
/// [`FUTURE_IDS`] of them, oldest forgotten first: they are re-delivered by every `since`
/// re-REQ, yet must not take the overlap's room.
#[derive(Debug, Default)]
pub(crate) struct RecentIds {
    /// `(created_at, key)`, ascending.
    entries: VecDeque<(u64, u64)>,
    /// Boxed: one pointer for the many subscriptions that never see a future date.
    future: Option<Box<FutureIds>>,
}

/// A ring of the last [`FUTURE_IDS`] future-dated keys.
#[derive(Debug, Default)]
struct FutureIds {
    keys: [u64; FUTURE_IDS],
    len: usize,
    next: usize,
}

/// Future-dated ids remembered per subscription.
pub(crate) const FUTURE_IDS: usize = 16;

impl RecentIds {
    fn contains(&self, id: EventId) -> bool {
        let key = short(id);
        self.entries.iter().any(|&(_, k)| k == key)
            || self
                .future
                .as_ref()
                .is_some_and(|f| f.keys[..f.len].contains(&key))
    }

    fn insert_future(&mut self, id: EventId) {
        let ring = self.future.get_or_insert_with(Box::default);
        ring.keys[ring.next] = short(id);
        ring.next = (ring.next + 1) % FUTURE_IDS;
        ring.len = (ring.len + 1).min(FUTURE_IDS);
    }

    fn insert(&mut self, id: EventId, created_at: u64, horizon: u64, capacity: usize) {
        while self.entries.front().is_some_and(|&(t, _)| t < horizon) {
            self.entries.pop_front();
        }
        if created_at < horizon || capacity == 0 {
            return;
        }
        if self.entries.len() >= capacity {
            self.entries.pop_front();
        }
        // Stored events arrive newest first, live ones in order: search from the back.
        let at = self
            .entries
            .iter()
            .rposition(|&(t, _)| t <= created_at)
            .map_or(0, |i| i + 1);
        self.entries.insert(at, (created_at, short(id)));
    }

    /// How many ids are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// All 32 bytes folded into 8, so ids that share a prefix (test ids, vanity ids) still differ.
fn short(id: EventId) -> u64 {
    id.0.chunks_exact(8).fold(0u64, |acc, c| {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        acc.rotate_left(17) ^ u64::from_le_bytes(b)
    })
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
    fn since_is_raised_never_lowered() {
        let f = Filter::new(r#"{"kinds":[1],"since":100}"#).unwrap();
        let raw = RawValue::from_string(f.json().to_owned()).unwrap();
        assert_eq!(with_since(&raw, 50).get(), r#"{"kinds":[1],"since":100}"#);
        assert_eq!(with_since(&raw, 500).get(), r#"{"kinds":[1],"since":500}"#);
        assert!(Filter::new("[1]").is_err());
        assert!(Filter::new("{").is_err());
    }

    #[test]
    fn recent_ids_keep_the_overlap_window_within_capacity() {
        let mut s = Subscription::new(SubscriptionId(1), &[], Priority::NORMAL, 0);
        let id = |n: u8| EventId([n; 32]);
        let w = CatchUpWindow {
            slack: Duration::from_secs(5),
            capacity: 4,
            unix_now: None,
            tolerance: Duration::ZERO,
        };
        assert_eq!(s.admit(id(1), 100, &w), Admit::Fresh);
        assert_eq!(s.admit(id(1), 100, &w), Admit::Duplicate);
        // 100 is now older than 110 - 5: forgotten; 104 is not worth remembering.
        assert_eq!(s.admit(id(2), 110, &w), Admit::Fresh);
        assert_eq!(s.admit(id(9), 104, &w), Admit::Fresh);
        assert_eq!(s.recent.len(), 1);
        for (n, t) in [(3, 110), (4, 111), (5, 111)] {
            assert_eq!(s.admit(id(n), t, &w), Admit::Fresh);
        }
        assert_eq!(s.recent.len(), 4);
        // Full: the oldest by created_at goes, whatever the arrival order.
        assert_eq!(s.admit(id(6), 108, &w), Admit::Fresh);
        assert_eq!(s.recent.len(), 4);
        assert_eq!(s.admit(id(3), 110, &w), Admit::Duplicate);
        assert_eq!(s.admit(id(6), 108, &w), Admit::Duplicate);
        assert_eq!(s.admit(id(7), 112, &w), Admit::Fresh);
        assert_eq!(
            s.admit(id(3), 110, &w),
            Admit::Duplicate,
            "108 went, not 110"
        );
        assert_eq!(s.recent.len(), 4);
        assert_eq!(s.newest, Some(112));
    }
}
