//! Catch-up: what a subscription that was live asks for when it is sent again, so that
//! nothing that reached the relay meanwhile is lost and nothing already delivered is
//! delivered twice.
//!
//! - The **live half** of every REQ after the first keeps the user's filter, with `limit: 0`:
//!   a catch-up never narrows what the relay pushes live.
//! - The **window** is what is exact: from `exact_since` on, every event the relay holds for
//!   the filter is delivered once. Its start is the later of the memory's floor (below
//!   it nothing delivered is remembered, so nothing below it may be asked again) and, per
//!   method:
//!   - **NIP-77** (negentropy, learned per relay): from when the subscription went live,
//!     minus the lookback. The remembered ids are reconciled with the relay's set and only
//!     the missing ids are fetched, as `ids` filters in the subscription's own REQ.
//!   - **`since`** (the fallback): from the wall-clock time the subscription stopped being
//!     live, minus the lookback, so an event that reaches the relay up to `lookback` late
//!     is still found. The window filters ride in the subscription's own REQ, beside the live
//!     half, paged with `until` when an answer may have been capped.
//!
//! Both methods re-send the subscription's REQ under its own wire id, which relays treat as
//! a replacement (NIP-01): no second slot is taken against the relay's subscription cap, and
//! the live half never has a gap.

mod filters;
mod memory;
mod reconcile;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use serde_json::value::RawValue;

use crate::nostr::message::EventId;
use crate::time::Instant;

pub(crate) use memory::{Item, Memory, Stored};
pub(crate) use reconcile::NegFailure;
use reconcile::{Limits, Reconciliation, Step};

/// How a catch-up was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatchUpMethod {
    /// NIP-77 negentropy: the remembered ids reconciled with the relay's, the missing ones
    /// fetched by id.
    Negentropy,
    /// A `since` query over the lookback window (the relay has no NIP-77, or refused it).
    Since,
}

impl CatchUpMethod {
    /// `negentropy` or `since`, as the CLI writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUpMethod::Negentropy => "negentropy",
            CatchUpMethod::Since => "since",
        }
    }
}

/// How subscriptions catch up after a gap, and what that may cost.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CatchUpConfig {
    /// How late an event may reach the relay and still be found by a `since` catch-up
    /// (2 min): the window starts this long before the subscription stopped being live.
    pub lookback: Duration,
    /// Events remembered per subscription (1 024, 40 bytes each): the dedup memory and the
    /// NIP-77 "have" set. When full, the oldest second is forgotten and the exact window
    /// starts after it.
    pub memory: usize,
    /// Events remembered across all subscriptions of the session (65 536, 2.5 MiB).
    pub memory_total: usize,
    /// Events asked per page of a `since` catch-up (500), lowered to the relay's declared
    /// `max_limit`.
    pub page: usize,
    /// An answer of at least this many events (200) may have been cut short: relays cap an
    /// answer below what was asked without declaring it (rnostr 300, nostr-relay-builder
    /// 500, khatru's LMDB store 375). The next, older page follows, up to the `created_at`
    /// of the answer's this-many-th newest event, which is safe under any cap at least this
    /// large.
    pub possibly_capped: usize,
    /// Try NIP-77 where the relay may have it (true).
    pub negentropy: bool,
    /// A negentropy session with no answer for this long falls back (10 s).
    pub negentropy_timeout: Duration,
    /// After a relay refused or failed NIP-77, how long it is not asked again (1 h).
    pub negentropy_retry_after: Duration,
    /// Relay messages answered per negentropy session at most (32).
    pub negentropy_rounds: u32,
    /// Largest negentropy message sent, in bytes before hex (60 000; at least 4 096).
    pub negentropy_frame: u64,
    /// Missing ids one reconciliation may find at most (10 000); past it, it falls back.
    pub max_missing: usize,
    /// Ids fetched per REQ (100).
    pub fetch_batch: usize,
}

impl Default for CatchUpConfig {
    fn default() -> Self {
        CatchUpConfig {
            lookback: Duration::from_secs(120),
            memory: 1_024,
            memory_total: 65_536,
            page: 500,
            possibly_capped: 200,
            negentropy: true,
            negentropy_timeout: Duration::from_secs(10),
            negentropy_retry_after: Duration::from_secs(3_600),
            negentropy_rounds: 32,
            negentropy_frame: 60_000,
            max_missing: 10_000,
            fetch_batch: 100,
        }
    }
}

/// What the session knows, when a subscription plans its next step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) config: &'a CatchUpConfig,
    /// Wall-clock seconds now, if the driver gave the wall clock.
    pub(crate) unix_now: Option<u64>,
    /// NIP-77 may be tried with this relay now.
    pub(crate) negentropy: bool,
    /// The relay's declared `max_limit`.
    pub(crate) max_limit: Option<usize>,
    /// The relay's declared `max_message_length`.
    pub(crate) max_message_length: Option<usize>,
}

impl Ctx<'_> {
    fn page(&self) -> usize {
        let page = self.config.page.max(1);
        self.max_limit.map_or(page, |m| page.min(m.max(1)))
    }

    fn lookback(&self) -> u64 {
        self.config.lookback.as_secs()
    }

    /// How many events make an answer possibly capped.
    fn capped_at(&self) -> usize {
        self.page().min(self.config.possibly_capped.max(1))
    }

    /// Ids per fetch: the configured batch, fewer when the relay's frame limit needs it (an
    /// id costs 67 bytes in a filter; half the frame is left for the live half).
    fn fetch_batch(&self) -> usize {
        let batch = self.config.fetch_batch.max(1);
        self.max_message_length
            .map_or(batch, |max| batch.min((max / 2 / 67).max(1)))
    }
}

/// One subscription's catch-up state: 24 bytes while it is live, the rest boxed while it
/// catches up (most subscriptions, most of the time, have no gap).
#[derive(Debug, Default)]
pub(crate) struct CatchUp {
    /// Wall-clock seconds of the subscription's first EOSE: before it, the first answer
    /// (the user's `limit`) was all it asked for.
    live_from: Option<u64>,
    /// The gap being caught up, from when it stopped being live until a catch-up completes.
    gap: Option<Box<Gap>>,
}

/// A gap in a subscription's liveness and how its catch-up stands.
#[derive(Debug)]
struct Gap {
    /// Wall-clock seconds it stopped being live.
    from: u64,
    /// Events the catch-up delivered from the relay's store for this gap so far, whatever
    /// attempt (a retry, a fallback) delivered them: first deliveries in an answer to one of
    /// its REQs, not live events.
    recovered: u64,
    phase: Phase,
}

impl Gap {
    fn new(from: u64) -> Box<Gap> {
        Box::new(Gap {
            from,
            recovered: 0,
            phase: Phase::Idle,
        })
    }
}

/// Where a catch-up stands.
#[derive(Debug)]
enum Phase {
    /// None in flight: the REQ is the user's filters (first) or the live half alone.
    Idle,
    /// The REQ carries the window from `since`, up to `until` (paging).
    Window {
        since: u64,
        until: Option<u64>,
        /// How many filters the window has (one filter's full page is known to be full).
        filters: usize,
        /// The `page` newest `created_at` of the current answer, to find where the next,
        /// older page starts.
        newest: BinaryHeap<Reverse<u64>>,
    },
    /// The REQ carries the live half; a NIP-77 session reconciles `since` onwards.
    Reconcile {
        since: u64,
        session: Option<Box<Reconciliation>>,
    },
    /// The REQ carries `batch`; `missing` follow.
    Fetch {
        since: u64,
        batch: Vec<EventId>,
        missing: VecDeque<EventId>,
    },
}

/// What the session does after an EOSE or a negentropy message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing: the catch-up (if any) goes on by itself.
    Wait,
    /// Re-send the REQ under its own wire id (next page, next fetch batch, fallback).
    Reissue,
    /// Open the NIP-77 session.
    Reconcile,
    /// Send this `NEG-MSG`.
    NegMsg(String),
    /// The catch-up is complete.
    Done(CaughtUp),
}

/// A completed catch-up, as the application hears it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CaughtUp {
    pub(crate) method: CatchUpMethod,
    pub(crate) exact_since: u64,
    pub(crate) recovered: u64,
}

impl CatchUp {
    /// What a checkpoint keeps: when it first went live, and when its gap began (`None`
    /// while it is live or was never live).
    pub(crate) fn anchors(&self) -> (Option<u64>, Option<u64>) {
        (self.live_from, self.gap.as_ref().map(|g| g.from))
    }

    /// A catch-up from a checkpoint's anchors, for a session that was away since `saved_at`:
    /// a subscription that was live then has a gap from then on; one that was catching up
    /// starts its catch-up again from its gap's beginning.
    pub(crate) fn restored(live_from: Option<u64>, gap_from: Option<u64>, saved_at: u64) -> Self {
        let gap = live_from.map(|_| Gap::new(gap_from.unwrap_or(saved_at)));
        CatchUp { live_from, gap }
    }

    /// Whether a gap is being caught up (its REQs may re-deliver what was forgotten).
    pub(crate) fn in_gap(&self) -> bool {
        self.gap.is_some()
    }

    fn phase(&self) -> &Phase {
        self.gap.as_ref().map_or(&Phase::Idle, |g| &g.phase)
    }

    /// Whether a NIP-77 session is open on the relay.
    pub(crate) fn negotiating(&self) -> bool {
        matches!(
            self.phase(),
            Phase::Reconcile {
                session: Some(_),
                ..
            }
        )
    }

    /// Whether the next step is opening the NIP-77 session.
    pub(crate) fn wants_negentropy(&self) -> bool {
        matches!(self.phase(), Phase::Reconcile { session: None, .. })
    }

    /// A fresh REQ (not a re-send under the same id) is about to go out: choose how it
    /// catches up. `filter_count` filters; `memory` as it stands.
    pub(crate) fn begin(&mut self, ctx: &Ctx<'_>, memory: &Memory, filter_count: usize) {
        let Some(live_from) = self.live_from else {
            return;
        };
        let now = ctx.unix_now.or(memory.newest()).unwrap_or(0);
        let gap = self.gap.get_or_insert_with(|| Gap::new(now));
        // NIP-77 sessions take one filter each; several filters take the `since` path.
        gap.phase = if ctx.negentropy && filter_count == 1 {
            Phase::Reconcile {
                since: live_from.saturating_sub(ctx.lookback()).max(memory.floor()),
                session: None,
            }
        } else {
            window(gap.from, ctx, memory, filter_count)
        };
    }

    /// The filters of the REQ now going out.
    pub(crate) fn req_filters(&self, user: &[&RawValue], ctx: &Ctx<'_>) -> Vec<Box<RawValue>> {
        if self.live_from.is_none() {
            return user.iter().map(|f| (*f).to_owned()).collect();
        }
        if let Phase::Reconcile { .. } = self.phase() {
            return user.iter().map(|f| filters::newest(f)).collect();
        }
        let mut out: Vec<Box<RawValue>> = user.iter().map(|f| filters::live(f)).collect();
        match self.phase() {
            Phase::Idle | Phase::Reconcile { .. } => {}
            Phase::Window { since, until, .. } => {
                let page = ctx.page();
                out.extend(
                    user.iter()
                        .map(|f| filters::window(f, *since, *until, page)),
                );
            }
            Phase::Fetch { batch, .. } => out.extend(filters::ids(batch)),
        }
        out
    }

    /// An event arrived (`pending`: for the REQ waiting for EOSE); `fresh` if it was
    /// delivered.
    pub(crate) fn on_event(&mut self, created_at: u64, fresh: bool, pending: bool, ctx: &Ctx<'_>) {
        let Some(gap) = self.gap.as_deref_mut() else {
            return;
        };
        if let (Phase::Window { newest, .. }, true) = (&mut gap.phase, pending) {
            newest.push(Reverse(created_at));
            if newest.len() > ctx.page() {
                newest.pop();
            }
        }
        // What came in an answer was recovered from the relay's store; the rest is live.
        if fresh && pending {
            gap.recovered += 1;
        }
    }

    /// The REQ got its EOSE.
    pub(crate) fn on_eose(&mut self, ctx: &Ctx<'_>, memory: &Memory) -> Next {
        if self.live_from.is_none() {
            self.live_from = Some(ctx.unix_now.or(memory.newest()).unwrap_or(0));
            return Next::Wait;
        }
        let Some(gap) = self.gap.as_deref_mut() else {
            return Next::Wait;
        };
        match &mut gap.phase {
            Phase::Idle => Next::Wait,
            Phase::Window {
                since,
                until,
                filters,
                newest,
            } => {
                let Some(oldest_kept) = next_page(std::mem::take(newest), *filters, ctx) else {
                    return self.done(CatchUpMethod::Since, None, memory.floor());
                };
                if until.is_some_and(|u| oldest_kept >= u) || oldest_kept <= *since {
                    // A full page within one second (or at the window's start): no older
                    // page can be asked without skipping; exact only after it.
                    let stuck = oldest_kept.saturating_add(1).max(*since);
                    return self.done(CatchUpMethod::Since, Some(stuck), memory.floor());
                }
                *until = Some(oldest_kept);
                Next::Reissue
            }
            Phase::Reconcile { session: None, .. } => Next::Reconcile,
            Phase::Reconcile { .. } => Next::Wait,
            Phase::Fetch { batch, missing, .. } => {
                batch.clear();
                if missing.is_empty() {
                    return self.done(CatchUpMethod::Negentropy, None, memory.floor());
                }
                let take = ctx.fetch_batch().min(missing.len());
                batch.extend(missing.drain(..take));
                Next::Reissue
            }
        }
    }

    /// Open the NIP-77 session: the filter to reconcile and the first message (hex).
    pub(crate) fn open_negentropy(
        &mut self,
        user: &RawValue,
        memory: &Memory,
        ctx: &Ctx<'_>,
    ) -> Result<(Box<RawValue>, String), NegFailure> {
        let Some(Phase::Reconcile { since, session }) =
            self.gap.as_deref_mut().map(|g| &mut g.phase)
        else {
            return Err(NegFailure::Malformed("no reconciliation due".into()));
        };
        // The floor may have risen since the catch-up began (the live half's event filled
        // the memory): below it, what was delivered is no longer known.
        *since = (*since).max(memory.floor());
        let (opened, first) = Reconciliation::open(memory.items_since(*since), limits(ctx))?;
        *session = Some(Box::new(opened));
        Ok((filters::reconciled(user, *since), first))
    }

    /// The relay's `NEG-MSG`.
    pub(crate) fn on_negentropy(
        &mut self,
        message: &str,
        ctx: &Ctx<'_>,
        memory: &Memory,
    ) -> Result<Next, NegFailure> {
        let Some(gap) = self.gap.as_deref_mut() else {
            return Ok(Next::Wait);
        };
        let Phase::Reconcile {
            since,
            session: Some(session),
        } = &mut gap.phase
        else {
            return Ok(Next::Wait);
        };
        match session.on_message(message)? {
            Step::Send(next) => Ok(Next::NegMsg(next)),
            Step::Done(missing) => {
                let since = *since;
                if missing.is_empty() {
                    return Ok(self.done(CatchUpMethod::Negentropy, None, memory.floor()));
                }
                let mut missing: VecDeque<EventId> = missing.into();
                let take = ctx.fetch_batch().min(missing.len());
                let batch = missing.drain(..take).collect();
                gap.phase = Phase::Fetch {
                    since,
                    batch,
                    missing,
                };
                Ok(Next::Reissue)
            }
        }
    }

    /// NIP-77 failed (refused, silent, malformed, over a bound): catch up with `since`
    /// instead, by re-sending the REQ with the window.
    pub(crate) fn fall_back(&mut self, ctx: &Ctx<'_>, memory: &Memory) -> Next {
        let Some(gap) = self.gap.as_deref_mut() else {
            return Next::Wait;
        };
        if !matches!(gap.phase, Phase::Reconcile { .. } | Phase::Fetch { .. }) {
            return Next::Wait;
        }
        // NIP-77 runs for single-filter subscriptions only.
        gap.phase = window(gap.from, ctx, memory, 1);
        Next::Reissue
    }

    /// The REQ is no longer open (socket lost, refused, timed out): the subscription is not
    /// live from `unix_now` until a catch-up completes. Returns whether a NIP-77 session was
    /// open on the relay (to close it while the socket lives).
    pub(crate) fn on_left_open(&mut self, unix_now: Option<u64>, memory: &Memory) -> bool {
        let negotiating = self.negotiating();
        if self.live_from.is_some() {
            let now = unix_now.or(memory.newest()).unwrap_or(0);
            self.gap.get_or_insert_with(|| Gap::new(now)).phase = Phase::Idle;
        }
        negotiating
    }

    fn done(&mut self, method: CatchUpMethod, stuck: Option<u64>, floor: u64) -> Next {
        let Some(gap) = self.gap.take() else {
            return Next::Wait;
        };
        let since = match gap.phase {
            Phase::Window { since, .. }
            | Phase::Reconcile { since, .. }
            | Phase::Fetch { since, .. } => since,
            Phase::Idle => return Next::Wait,
        };
        Next::Done(CaughtUp {
            method,
            // Exact from the window's start, unless a page could not be split or the memory's
            // bound moved the floor past it meanwhile.
            exact_since: stuck.unwrap_or(since).max(floor),
            recovered: gap.recovered,
        })
    }
}

/// The `since` window of a gap from `from`: the lookback before it, never below the
/// memory's floor.
fn window(from: u64, ctx: &Ctx<'_>, memory: &Memory, filters: usize) -> Phase {
    Phase::Window {
        since: from.saturating_sub(ctx.lookback()).max(memory.floor()),
        until: None,
        filters,
        newest: BinaryHeap::new(),
    }
}

/// Where the next, older page ends (its `until`, inclusive), if the answer may have been
/// cut short; `None` when it was complete. Above the returned `created_at` the answer is
/// complete:
///
/// - One filter that returned the whole page it asked for was cut at its oldest event.
/// - Otherwise, any filter the relay cut returned at least `possibly_capped` events (the
///   caps relays apply without saying so are larger), all at or after its own cut: so the
///   answer's `possibly_capped`-th newest is at or after every cut.
fn next_page(newest: BinaryHeap<Reverse<u64>>, filters: usize, ctx: &Ctx<'_>) -> Option<u64> {
    let (page, capped_at) = (ctx.page(), ctx.capped_at());
    let count = newest.len();
    // Ascending by `Reverse`: newest first.
    let newest_first = newest.into_sorted_vec();
    if filters == 1 && count >= page {
        return newest_first.get(page - 1).map(|r| r.0);
    }
    (count >= capped_at)
        .then(|| newest_first.get(capped_at - 1).map(|r| r.0))
        .flatten()
}

fn limits(ctx: &Ctx<'_>) -> Limits {
    Limits {
        frame: ctx.config.negentropy_frame,
        rounds: ctx.config.negentropy_rounds,
        need: ctx.config.max_missing,
    }
}

/// Whether NIP-77 may be tried with a relay: what it did outranks what it declared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Support {
    /// Nothing known: try it.
    #[default]
    Unknown,
    /// Its NIP-11 document lists NIP-77 (`true`) or lists NIPs without it (`false`).
    Declared(bool),
    /// A reconciliation worked on this relay.
    Works,
    /// It refused or failed: not asked again until then.
    Failed(Instant),
}

impl Support {
    /// Whether to try NIP-77 now.
    pub(crate) fn usable(self, now: Instant) -> bool {
        match self {
            Support::Unknown | Support::Works | Support::Declared(true) => true,
            Support::Declared(false) => false,
            Support::Failed(until) => now >= until,
        }
    }

    /// The relay's document said `declared`.
    pub(crate) fn declare(self, declared: Option<bool>) -> Support {
        match (self, declared) {
            (Support::Works | Support::Failed(_), _) | (_, None) => self,
            (_, Some(d)) => Support::Declared(d),
        }
    }
}
