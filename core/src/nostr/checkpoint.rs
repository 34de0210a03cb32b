//! [`RelayCheckpoint`]: what a [`RelaySession`] keeps across a restart, and restoring from it.
//!
//! A restored session is one that has been disconnected since the checkpoint: every
//! subscription that was live has a gap from the checkpoint's wall-clock time on, so its
//! catch-up (NIP-77 where the relay has it, else the `since` window) asks for exactly what
//! reached the relay meanwhile, and its memory drops what it had already delivered.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::checkpoint::{self, hex_id, CheckpointError};
use crate::nostr::catch_up::{Anchors, CatchUp, Item, Memory, Support};
use crate::nostr::config::RelayConfig;
use crate::nostr::message::{EventId, RawEvent};
use crate::nostr::registry::Registry;
use crate::nostr::relay_info::RelayInfo;
use crate::nostr::scheduler::Cap;
use crate::nostr::session::RelaySession;
use crate::nostr::subscription::{Filter, Priority, Subscription, SubscriptionId};
use crate::time::Instant;

/// The kind a relay session's checkpoint says it is.
const KIND: &str = "relay";

/// A [`RelaySession`]'s durable state: plain, versioned data (see
/// [`checkpoint`](mod@crate::checkpoint) for the format's rules).
///
/// # What it holds
/// - every registered subscription: its id, priority, filters, when it first went live and
///   when its current gap began, and its catch-up memory (the ids it delivered, exact above
///   the memory's floor). A subscription already reported as closed is not registered, so
///   it is not in the checkpoint and is never revived;
/// - the outbox's unacknowledged publishes (signed events: sending one again is safe, a relay
///   answers a second copy with `duplicate:`), each reported once after the restore;
/// - what the relay taught: its subscription cap (declared or learned), its NIP-11 limits
///   and when they were fetched, whether it speaks NIP-77.
///
/// # What it never holds
/// - secrets: the AUTH answer and anything signed for it, the challenge;
/// - what belonged to the connection: the rate-limit gate's window, backoff, retry counts,
///   timers, wire attempts, the NIP-77 session in flight. A restored session starts them
///   afresh, as a new socket would.
///
/// # Size
/// Bounded by the memory it mirrors: about 80 bytes per remembered event (its `created_at`
/// and hex id) plus each subscription's filters, so at most
/// [`CatchUpConfig::memory_total`](crate::nostr::CatchUpConfig::memory_total) x 80 bytes of
/// memories (5.3 MB at the default 65 536) and [`RelayConfig::max_outbox`] events.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayCheckpoint {
    tether: String,
    version: u32,
    /// Wall-clock seconds when it was taken; `None` when the driver never gave the wall clock.
    saved_at: Option<u64>,
    /// Wall-clock seconds up to which its live subscriptions are known to have been live:
    /// when the relay was last heard from (a socket may have died unseen any time after).
    live_until: Option<u64>,
    /// Each registry slot's generation, so an id handed out before is never handed out again.
    slots: Vec<u32>,
    subscriptions: Vec<SavedSubscription>,
    publishes: Vec<Box<RawValue>>,
    relay: Learned,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedSubscription {
    id: u64,
    priority: i32,
    order: u64,
    /// The filters as one JSON array.
    filters: Box<RawValue>,
    live_from: Option<u64>,
    gap_from: Option<u64>,
    /// Per filter, from which `created_at` the memory held the relay's whole set when the
    /// subscription went live (absent from checkpoints before it was kept: then from when
    /// it went live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spans: Option<Vec<u64>>,
    floor: u64,
    events: Vec<SavedItem>,
    future: Vec<SavedItem>,
}

/// One remembered event: `[created_at, "id"]`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct SavedItem(u64, #[serde(with = "hex_id")] EventId);

/// What the relay taught the session.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Learned {
    cap: Option<SavedCap>,
    info: Option<SavedInfo>,
    negentropy: SavedSupport,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SavedCap {
    Declared(usize),
    Learned(usize),
}

/// The NIP-11 limits and when the document was asked for (wall-clock seconds).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct SavedInfo {
    fetched_at: Option<u64>,
    max_subscriptions: Option<usize>,
    max_message_length: Option<usize>,
    max_subid_length: Option<usize>,
    max_limit: Option<usize>,
    /// Absent in checkpoints written before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_filters: Option<usize>,
    auth_required: bool,
    negentropy: Option<bool>,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SavedSupport {
    #[default]
    Unknown,
    Declared(bool),
    Works,
    /// Refused or failed; not asked again before this wall-clock second.
    Failed(u64),
}

impl RelayCheckpoint {
    /// The checkpoint as JSON (the same bytes for the same state).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        checkpoint::to_json(self)
    }

    /// Read a checkpoint written by [`RelayCheckpoint::to_json`].
    ///
    /// # Errors
    /// [`CheckpointError`] when it is not a relay checkpoint or comes from a newer format.
    pub fn from_json(json: &[u8]) -> Result<RelayCheckpoint, CheckpointError> {
        checkpoint::from_json(json, KIND)
    }

    /// Wall-clock seconds when it was taken, if the session had the wall clock.
    pub fn saved_at(&self) -> Option<u64> {
        self.saved_at
    }

    /// Each subscription's id and its filters as one JSON array, in slot order.
    pub fn subscriptions(&self) -> impl Iterator<Item = (SubscriptionId, &str)> + '_ {
        self.subscriptions
            .iter()
            .map(|s| (SubscriptionId(s.id), s.filters.get()))
    }

    /// Whether subscription `id` was live before the checkpoint, so that a restore gives it
    /// a gap to catch up on (and, with catch-up on, one [`Event::CaughtUp`](crate::nostr::Event::CaughtUp)
    /// when that is done); `false` for one that never had its first EOSE, or is not here.
    pub fn catches_up(&self, id: SubscriptionId) -> bool {
        self.subscriptions
            .iter()
            .any(|s| s.id == id.0 && s.live_from.is_some())
    }

    /// Events remembered across all subscriptions.
    pub fn remembered(&self) -> usize {
        self.subscriptions.iter().map(|s| s.events.len()).sum()
    }

    /// Publishes waiting for their OK.
    pub fn publishes(&self) -> usize {
        self.publishes.len()
    }
}

impl RelaySession {
    /// Its durable state now (see [`RelayCheckpoint`] for what is and is not kept). Taking
    /// one changes nothing.
    #[must_use]
    pub fn checkpoint(&self) -> RelayCheckpoint {
        let unix_now = self.unix_now();
        RelayCheckpoint {
            tether: KIND.into(),
            version: checkpoint::VERSION,
            saved_at: unix_now,
            live_until: self.live_until(),
            slots: self.subs.generations(),
            subscriptions: self.subs.iter().map(save_subscription).collect(),
            publishes: self
                .outbox
                .events()
                .filter_map(|json| RawValue::from_string(json.to_owned()).ok())
                .collect(),
            relay: self.learned(unix_now),
        }
    }

    /// A disconnected session from `checkpoint`, at `now` when the wall clock reads
    /// `unix_secs`. Call [`RelaySession::connect`] to go on: every subscription that was
    /// live catches up from the checkpoint's time, and the unacknowledged publishes are sent
    /// again.
    ///
    /// # Errors
    /// [`CheckpointError`] when it is of another kind, from a newer format, or contradicts
    /// itself (an id used twice, filters that are not filters, memory out of order, more
    /// subscriptions or publishes than `config` allows); nothing is restored then.
    pub fn restore(
        config: RelayConfig,
        seed: u64,
        checkpoint: &RelayCheckpoint,
        now: Instant,
        unix_secs: u64,
    ) -> Result<RelaySession, CheckpointError> {
        RelaySession::restore_shared(Arc::new(config), seed, checkpoint, now, unix_secs)
    }

    /// [`RelaySession::restore`] with a configuration shared with other sessions (a pool's).
    pub(crate) fn restore_shared(
        config: Arc<RelayConfig>,
        seed: u64,
        checkpoint: &RelayCheckpoint,
        now: Instant,
        unix_secs: u64,
    ) -> Result<RelaySession, CheckpointError> {
        checkpoint::check_header(&checkpoint.tether, checkpoint.version, KIND)?;
        let mut session = RelaySession::with_shared_config(config, seed);
        session.set_wall_clock(now, unix_secs);
        let now = session.clock.now();
        session.restore_learned(&checkpoint.relay, now, unix_secs);
        session.restore_subscriptions(checkpoint)?;
        session.restore_publishes(now, &checkpoint.publishes)?;
        Ok(session)
    }

    /// Wall-clock seconds up to which an open socket's subscriptions were surely live.
    fn live_until(&self) -> Option<u64> {
        let heard = self.link.heard_at().min(self.clock.now());
        let at = if self.link.is_open() {
            heard
        } else {
            self.clock.now()
        };
        self.wall.map(|w| w.unix_secs(at))
    }

    fn learned(&self, unix_now: Option<u64>) -> Learned {
        let now = self.clock.now();
        let unix_at = |at: Instant| {
            unix_now.map(|u| u.saturating_sub(now.saturating_duration_since(at).as_secs()))
        };
        let negentropy = match self.negentropy {
            Support::Unknown => SavedSupport::Unknown,
            Support::Declared(d) => SavedSupport::Declared(d),
            Support::Works => SavedSupport::Works,
            Support::Failed(until) => match unix_now {
                Some(u) => SavedSupport::Failed(
                    u.saturating_add(until.saturating_duration_since(now).as_secs()),
                ),
                None => SavedSupport::Unknown,
            },
        };
        let info = (self.declared != RelayInfo::default()).then(|| SavedInfo {
            fetched_at: self.info_asked_at.and_then(unix_at),
            max_subscriptions: self.declared.max_subscriptions,
            max_message_length: self.declared.max_message_length,
            max_subid_length: self.declared.max_subid_length,
            max_limit: self.declared.max_limit,
            max_filters: self.declared.max_filters,
            auth_required: self.declared.auth_required,
            negentropy: self.declared.negentropy,
        });
        Learned {
            cap: self.scheduler.cap().map(|cap| match cap {
                Cap::Declared(n) => SavedCap::Declared(n),
                Cap::Learned(n) => SavedCap::Learned(n),
            }),
            info,
            negentropy,
        }
    }

    fn restore_learned(&mut self, learned: &Learned, now: Instant, unix_now: u64) {
        if let Some(info) = learned.info {
            self.declared = RelayInfo {
                max_subscriptions: info.max_subscriptions.filter(|&n| n > 0),
                max_message_length: info.max_message_length,
                max_subid_length: info.max_subid_length,
                max_limit: info.max_limit.filter(|&n| n > 0),
                max_filters: info.max_filters.filter(|&n| n > 0),
                auth_required: info.auth_required,
                negentropy: info.negentropy,
            };
            // A document older than this process's clock reaches is due again: asking once
            // more is harmless, keeping a stale one is not.
            self.info_asked_at = info.fetched_at.and_then(|at| {
                let age = std::time::Duration::from_secs(unix_now.saturating_sub(at));
                (now.since_origin() >= age).then(|| now.saturating_sub(age))
            });
        }
        self.scheduler.restore_cap(learned.cap.map(|cap| match cap {
            SavedCap::Declared(n) => Cap::Declared(n.max(1)),
            SavedCap::Learned(n) => Cap::Learned(n.max(1)),
        }));
        self.negentropy = match learned.negentropy {
            SavedSupport::Unknown => Support::Unknown,
            SavedSupport::Declared(d) => Support::Declared(d),
            SavedSupport::Works => Support::Works,
            SavedSupport::Failed(until) => Support::Failed(now.saturating_add(
                std::time::Duration::from_secs(until.saturating_sub(unix_now)),
            )),
        };
    }

    fn restore_subscriptions(
        &mut self,
        checkpoint: &RelayCheckpoint,
    ) -> Result<(), CheckpointError> {
        let invalid = CheckpointError::Invalid;
        if checkpoint.slots.len() > self.config.max_registered {
            return Err(invalid(format!(
                "{} subscription slots, more than max_registered {}",
                checkpoint.slots.len(),
                self.config.max_registered
            )));
        }
        let (per_sub, total) = self.memory_bounds();
        let live_until = checkpoint.live_until.or(checkpoint.saved_at);
        let mut subs = Vec::with_capacity(checkpoint.subscriptions.len());
        for saved in &checkpoint.subscriptions {
            let room = per_sub.min(total.saturating_sub(self.remembered));
            let sub = restore_subscription(saved, live_until, room).map_err(invalid)?;
            self.remembered += sub.memory.len();
            self.registered = self.registered.max(sub.order);
            subs.push(sub);
        }
        self.subs = Registry::restore(&checkpoint.slots, subs).map_err(invalid)?;
        Ok(())
    }

    fn restore_publishes(
        &mut self,
        now: Instant,
        publishes: &[Box<RawValue>],
    ) -> Result<(), CheckpointError> {
        if publishes.len() > self.config.max_outbox {
            return Err(CheckpointError::Invalid(format!(
                "{} publishes, more than max_outbox {}",
                publishes.len(),
                self.config.max_outbox
            )));
        }
        for json in publishes {
            let event = RawEvent::parse(json.get())
                .map_err(|e| CheckpointError::Invalid(format!("a publish: {e}")))?;
            if self.outbox.contains(event.id()) {
                return Err(CheckpointError::Invalid(format!(
                    "publish {} saved twice",
                    event.id()
                )));
            }
            let (outbox, mut env) = self.outbox();
            outbox.push(now, event.id(), event.json(), &mut env);
        }
        Ok(())
    }
}

fn save_subscription(sub: &Subscription) -> SavedSubscription {
    let anchors = sub.catch_up.anchors();
    let (floor, events, future) = sub.memory.parts();
    let saved = |items: Vec<Item>| items.into_iter().map(|(t, id)| SavedItem(t, id)).collect();
    SavedSubscription {
        id: sub.id.0,
        priority: sub.priority.0,
        order: sub.order,
        // The joined filters are JSON objects in an array, so always valid raw JSON.
        filters: RawValue::from_string(sub.filters.to_string()).unwrap_or_default(),
        live_from: anchors.live_from,
        gap_from: anchors.gap_from,
        spans: anchors.spans,
        floor,
        events: saved(events),
        future: saved(future),
    }
}

fn restore_subscription(
    saved: &SavedSubscription,
    live_until: Option<u64>,
    room: usize,
) -> Result<Subscription, String> {
    let id = SubscriptionId(saved.id);
    let raw: Vec<&RawValue> = serde_json::from_str(saved.filters.get())
        .map_err(|e| format!("{id}: filters are not a JSON array: {e}"))?;
    if raw.is_empty() {
        return Err(format!("{id}: no filters"));
    }
    let filters = raw
        .iter()
        .map(|f| Filter::new(f.get()))
        .collect::<Result<Vec<Filter>, _>>()
        .map_err(|e| format!("{id}: {e}"))?;
    let items = |saved: &[SavedItem]| saved.iter().map(|i| (i.0, i.1)).collect::<Vec<Item>>();
    let memory = Memory::from_parts(
        saved.floor,
        items(&saved.events),
        items(&saved.future),
        room,
    )
    .map_err(|e| format!("{id}: {e}"))?;
    let mut sub = Subscription::new(id, &filters, Priority(saved.priority), saved.order);
    let away_from = live_until.or(memory.newest()).unwrap_or(0);
    if saved
        .spans
        .as_ref()
        .is_some_and(|s| s.len() != filters.len())
    {
        return Err(format!("{id}: spans for another number of filters"));
    }
    let anchors = Anchors {
        live_from: saved.live_from,
        gap_from: saved.gap_from,
        spans: saved.spans.clone(),
    };
    sub.catch_up = CatchUp::restored(anchors, away_from);
    sub.memory = memory;
    Ok(sub)
}
