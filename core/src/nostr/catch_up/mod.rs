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
//!   - **NIP-77** (negentropy, learned per relay): the memory's whole exact span. The first
//!     answer is the relay's whole set for a filter back to its `since`, or back to where its
//!     `limit` (or a cap the relay applied without saying so) cut it; from then on the memory
//!     is exact. The range reaches further back where the filter's lookback does (a gift
//!     wrap dated two days back). One session per filter (NIP-77 takes one filter each), one
//!     filter after another, at most [`CatchUpConfig::negentropy_sessions`] open per relay;
//!     only the missing ids are fetched, as `ids` filters in the subscription's own REQ. A
//!     filter whose session fails takes the `since` path alone.
//!   - **`since`** (the fallback): from the wall-clock time the subscription stopped being
//!     live, minus the filter's lookback ([`Lookbacks`]: by the kinds it can match), so an
//!     event that reaches the relay up to that late is still found. The window filters ride
//!     in the subscription's own REQ, beside the live half, paged with `until` when an answer
//!     may have been capped.
//!
//! Both methods re-send the subscription's REQ under its own wire id, which relays treat as
//! a replacement (NIP-01): no second slot is taken against the relay's subscription cap, and
//! the live half never has a gap.

mod filters;
mod lookback;
mod memory;
mod reconcile;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use serde_json::value::RawValue;

use crate::nostr::message::EventId;
use crate::time::Instant;

use lookback::FilterBounds;
pub use lookback::{Lookbacks, GIFT_WRAP};
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
    /// How late an event may reach the relay and still be found, by the kinds a filter can
    /// match: the window starts this long before the subscription stopped being live (2 min;
    /// kind 1059 gift wraps 49 h, as NIP-59 dates them up to two days back).
    pub lookback: Lookbacks,
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
    /// NIP-77 sessions open at once per relay (8). strfry counts them against its
    /// `maxSubsPerConnection` (200) apart from REQs; nostr-relay-builder bounds them not at
    /// all; each holds a set the relay built from its store, so a client asks for few.
    pub negentropy_sessions: usize,
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
            lookback: Lookbacks::default(),
            memory: 1_024,
            memory_total: 65_536,
            page: 500,
            possibly_capped: 200,
            negentropy: true,
            negentropy_timeout: Duration::from_secs(10),
            negentropy_retry_after: Duration::from_secs(3_600),
            negentropy_rounds: 32,
            negentropy_sessions: 8,
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

/// One subscription's catch-up state: 48 bytes while it is live (a single filter's span
/// inline), the rest boxed while it catches up (most subscriptions, most of the time, have
/// no gap).
#[derive(Debug, Default)]
pub(crate) struct CatchUp {
    /// Wall-clock seconds of the subscription's first EOSE: before it, the first answer
    /// (the user's `limit`) was all it asked for.
    live_from: Option<u64>,
    /// Where the memory holds the relay's whole set, per filter (see [`Span`]).
    span: Span,
    /// The gap being caught up, from when it stopped being live until a catch-up completes.
    gap: Option<Box<Gap>>,
}

/// What the first answer (up to the first EOSE) taught about where the memory is exact.
///
/// The first answer is the relay's whole set for each filter back to the filter's `since`,
/// unless the filter's `limit` or a cap the relay applies without saying so cut it. From
/// then on every event is delivered live, so the memory holds the relay's set from each
/// filter's span start up (down to the memory's own floor, where its bound forgot).
#[derive(Debug, Default)]
enum Span {
    /// Not known: never live, or restored from a checkpoint that did not keep it.
    #[default]
    Unknown,
    /// The first answer so far.
    First(Box<FirstAnswer>),
    /// The one filter's: the `created_at` from which the memory held the relay's whole set
    /// (inline: most subscriptions have one filter).
    One(u64),
    /// Per filter, the same.
    Many(Box<[u64]>),
}

impl Span {
    fn known(spans: Vec<u64>) -> Span {
        match spans.as_slice() {
            [] => Span::Unknown,
            [one] => Span::One(*one),
            _ => Span::Many(spans.into()),
        }
    }

    fn as_slice(&self) -> Option<&[u64]> {
        match self {
            Span::One(one) => Some(std::slice::from_ref(one)),
            Span::Many(many) => Some(many),
            Span::Unknown | Span::First(_) => None,
        }
    }
}

/// The first answer's fresh events, as far as a span needs them.
#[derive(Debug)]
struct FirstAnswer {
    count: usize,
    oldest: u64,
    /// With several filters, the `possibly_capped` newest `created_at` (the relay does not
    /// say which filter an event matched, so a cut is bounded from the answer as a whole).
    newest: Newest,
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
    /// Per filter: where its catch-up is exact from (before the memory's floor applies).
    starts: Box<[u64]>,
    /// Per filter: where a `since` window starts (the gap's start minus the filter's
    /// lookback), for a filter that falls back.
    windows: Box<[u64]>,
    /// Whether any filter took the `since` path.
    fell_back: bool,
    phase: Phase,
}

impl Gap {
    fn new(from: u64) -> Box<Gap> {
        Box::new(Gap {
            from,
            recovered: 0,
            starts: Box::default(),
            windows: Box::default(),
            fell_back: false,
            phase: Phase::Idle,
        })
    }

    /// A `since` window over `filters` (indexes into the user's filters), each from its
    /// lookback before the gap.
    fn window(&mut self, filters: Vec<usize>) -> Phase {
        for &i in &filters {
            if let (Some(start), Some(&window)) = (self.starts.get_mut(i), self.windows.get(i)) {
                *start = window;
            }
        }
        Phase::Window {
            filters,
            until: None,
            newest: Newest::default(),
        }
    }

    /// NIP-77 is done with every filter it could reconcile: fetch what was missing, then the
    /// `since` window of the filters that fell back, then done.
    fn after_reconcile(
        &mut self,
        ctx: &Ctx<'_>,
        mut missing: Vec<EventId>,
        failed: Vec<usize>,
    ) -> Option<Next> {
        crate::sort::sort(&mut missing);
        missing.dedup();
        if !missing.is_empty() {
            let mut missing: VecDeque<EventId> = missing.into();
            let take = ctx.fetch_batch().min(missing.len());
            let batch = missing.drain(..take).collect();
            self.phase = Phase::Fetch {
                batch,
                missing,
                then: failed,
            };
            return Some(Next::Reissue);
        }
        self.after_fetch(failed)
    }

    /// Fetching is done: the `since` window of the filters that fell back, or done (`None`).
    fn after_fetch(&mut self, failed: Vec<usize>) -> Option<Next> {
        if failed.is_empty() {
            return None;
        }
        self.phase = self.window(failed);
        Some(Next::Reissue)
    }
}

/// Where a catch-up stands.
#[derive(Debug)]
enum Phase {
    /// None in flight: the REQ is the user's filters (first) or the live half alone.
    Idle,
    /// The REQ carries the `since` window of `filters` (indexes into the user's), each from
    /// its own start, up to `until` (paging).
    Window {
        filters: Vec<usize>,
        until: Option<u64>,
        /// The `page` newest `created_at` of the current answer, to find where the next,
        /// older page starts.
        newest: Newest,
    },
    /// The REQ carries the live half; NIP-77 reconciles the user's filters one at a time
    /// (NIP-77 takes one filter per session), `filter` now.
    Reconcile {
        filter: usize,
        session: Option<Box<Reconciliation>>,
        /// What the filters reconciled so far found missing.
        missing: Vec<EventId>,
        /// The filters whose session failed: they take the `since` window afterwards.
        failed: Vec<usize>,
    },
    /// The REQ carries `batch`; `missing` follow, then the window of the filters in `then`.
    Fetch {
        batch: Vec<EventId>,
        missing: VecDeque<EventId>,
        then: Vec<usize>,
    },
}

/// What the session does after an EOSE or a negentropy message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing: the catch-up (if any) goes on by itself.
    Wait,
    /// Re-send the REQ under its own wire id (next page, next fetch batch, fallback).
    Reissue,
    /// Open the next NIP-77 session.
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

/// What a checkpoint keeps of a catch-up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Anchors {
    /// When it first went live.
    pub(crate) live_from: Option<u64>,
    /// When its gap began (`None` while it is live or was never live).
    pub(crate) gap_from: Option<u64>,
    /// Per filter, where the memory holds the relay's whole set (see [`Span`]).
    pub(crate) spans: Option<Vec<u64>>,
}

impl CatchUp {
    /// What a checkpoint keeps.
    pub(crate) fn anchors(&self) -> Anchors {
        let spans = self
            .span
            .as_slice()
            .filter(|_| self.live_from.is_some())
            .map(<[u64]>::to_vec);
        Anchors {
            live_from: self.live_from,
            gap_from: self.gap.as_ref().map(|g| g.from),
            spans,
        }
    }

    /// A catch-up from a checkpoint's anchors, for a session that was away since `saved_at`:
    /// a subscription that was live then has a gap from then on; one that was catching up
    /// starts its catch-up again from its gap's beginning.
    pub(crate) fn restored(anchors: Anchors, saved_at: u64) -> Self {
        let gap = anchors
            .live_from
            .map(|_| Gap::new(anchors.gap_from.unwrap_or(saved_at)));
        let span = anchors.spans.map_or(Span::Unknown, Span::known);
        CatchUp {
            live_from: anchors.live_from,
            span,
            gap,
        }
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

    /// The user's filter (its index) the open or next NIP-77 session reconciles.
    pub(crate) fn reconciling(&self) -> Option<usize> {
        match self.phase() {
            Phase::Reconcile { filter, .. } => Some(*filter),
            _ => None,
        }
    }

    /// Whether the next step is opening a NIP-77 session.
    pub(crate) fn wants_negentropy(&self) -> bool {
        matches!(self.phase(), Phase::Reconcile { session: None, .. })
    }

    /// Per filter, where the memory holds the relay's whole set; when it went live where the
    /// first answer is not known (a checkpoint from before spans were kept).
    fn spans(&self, bounds: &[FilterBounds], live_from: u64) -> Vec<u64> {
        match self.span.as_slice() {
            Some(spans) if spans.len() == bounds.len() => spans.to_vec(),
            _ => vec![live_from; bounds.len()],
        }
    }

    /// A fresh REQ (not a re-send under the same id) is about to go out: choose how it
    /// catches up. `user`: the user's filters; `memory` as it stands.
    pub(crate) fn begin(&mut self, ctx: &Ctx<'_>, memory: &Memory, user: &[&RawValue]) {
        let Some(live_from) = self.live_from else {
            return;
        };
        let now = ctx.unix_now.or(memory.newest()).unwrap_or(0);
        let bounds: Vec<FilterBounds> = user
            .iter()
            .map(|f| FilterBounds::of(f, &ctx.config.lookback))
            .collect();
        let spans = self.spans(&bounds, live_from);
        let gap = self.gap.get_or_insert_with(|| Gap::new(now));
        let from = gap.from;
        gap.windows = bounds
            .iter()
            .map(|b| from.saturating_sub(b.lookback))
            .collect();
        gap.fell_back = false;
        if ctx.negentropy {
            // NIP-77 reconciles what the memory holds (from each span's start) and as far
            // back as the filter's lookback reaches beyond it (a wrap dated two days back).
            gap.starts = spans
                .iter()
                .zip(gap.windows.iter())
                .map(|(&span, &window)| span.min(window))
                .collect();
            gap.phase = Phase::Reconcile {
                filter: 0,
                session: None,
                missing: Vec::new(),
                failed: Vec::new(),
            };
        } else {
            gap.starts = gap.windows.clone();
            gap.phase = Phase::Window {
                filters: (0..user.len()).collect(),
                until: None,
                newest: Newest::default(),
            };
            gap.fell_back = true;
        }
    }

    /// The filters of the REQ now going out.
    pub(crate) fn req_filters(
        &self,
        user: &[&RawValue],
        ctx: &Ctx<'_>,
        memory: &Memory,
    ) -> Vec<Box<RawValue>> {
        if self.live_from.is_none() {
            return user.iter().map(|f| (*f).to_owned()).collect();
        }
        let Some(gap) = self.gap.as_deref() else {
            return user.iter().map(|f| filters::live(f)).collect();
        };
        if let Phase::Reconcile { .. } = gap.phase {
            return user.iter().map(|f| filters::newest(f)).collect();
        }
        let mut out: Vec<Box<RawValue>> = user.iter().map(|f| filters::live(f)).collect();
        match &gap.phase {
            Phase::Idle | Phase::Reconcile { .. } => {}
            Phase::Window { filters, until, .. } => {
                let page = ctx.page();
                out.extend(filters.iter().filter_map(|&i| {
                    let since = window_start(&gap.starts, i, memory);
                    Some(filters::window(user.get(i)?, since, *until, page))
                }));
            }
            Phase::Fetch { batch, .. } => out.extend(filters::ids(batch)),
        }
        out
    }

    /// An event arrived (`pending`: for the REQ waiting for EOSE); `fresh` if it was
    /// delivered. `filter_count`: how many filters the subscription has.
    pub(crate) fn on_event(
        &mut self,
        created_at: u64,
        fresh: bool,
        pending: bool,
        filter_count: usize,
        ctx: &Ctx<'_>,
    ) {
        if self.live_from.is_none() && pending && fresh {
            self.first_answer(created_at, filter_count, ctx);
        }
        let Some(gap) = self.gap.as_deref_mut() else {
            return;
        };
        if let (Phase::Window { newest, .. }, true) = (&mut gap.phase, pending) {
            newest.push(created_at, ctx.page());
        }
        // What came in an answer was recovered from the relay's store; the rest is live.
        if fresh && pending {
            gap.recovered += 1;
        }
    }

    fn first_answer(&mut self, created_at: u64, filter_count: usize, ctx: &Ctx<'_>) {
        if matches!(self.span, Span::Unknown) {
            self.span = Span::First(Box::new(FirstAnswer {
                count: 0,
                oldest: u64::MAX,
                newest: Newest::default(),
            }));
        }
        let Span::First(first) = &mut self.span else {
            return;
        };
        first.count += 1;
        first.oldest = first.oldest.min(created_at);
        if filter_count > 1 {
            first
                .newest
                .push(created_at, ctx.config.possibly_capped.max(1));
        }
    }

    /// The first EOSE: from now on everything is delivered live, and the first answer says
    /// from where, per filter, the memory holds the relay's whole set.
    fn went_live(&mut self, live_from: u64, user: &[&RawValue], ctx: &Ctx<'_>) {
        self.live_from = Some(live_from);
        let first = match std::mem::take(&mut self.span) {
            Span::First(first) => Some(first),
            _ => None,
        };
        let spans: Vec<u64> = user
            .iter()
            .map(|f| {
                let bounds = FilterBounds::of(f, &ctx.config.lookback);
                span_of(bounds, first.as_deref(), user.len(), live_from, ctx)
            })
            .collect();
        self.span = Span::known(spans);
    }

    /// The REQ got its EOSE.
    pub(crate) fn on_eose(&mut self, ctx: &Ctx<'_>, memory: &Memory, user: &[&RawValue]) -> Next {
        if self.live_from.is_none() {
            let live_from = ctx.unix_now.or(memory.newest()).unwrap_or(0);
            self.went_live(live_from, user, ctx);
            return Next::Wait;
        }
        let Some(gap) = self.gap.as_deref_mut() else {
            return Next::Wait;
        };
        match &mut gap.phase {
            Phase::Idle => Next::Wait,
            Phase::Window {
                filters,
                until,
                newest,
            } => {
                let since = filters
                    .iter()
                    .map(|&i| window_start(&gap.starts, i, memory))
                    .min()
                    .unwrap_or(0);
                let Some(oldest_kept) = next_page(&std::mem::take(newest), filters.len(), ctx)
                else {
                    return self.done(None, memory.floor());
                };
                if until.is_some_and(|u| oldest_kept >= u) || oldest_kept <= since {
                    // A full page within one second (or at the window's start): no older
                    // page can be asked without skipping; exact only after it.
                    let stuck = oldest_kept.saturating_add(1).max(since);
                    return self.done(Some(stuck), memory.floor());
                }
                *until = Some(oldest_kept);
                // A filter whose window starts after the next page's end has no more pages.
                filters.retain(|&i| window_start(&gap.starts, i, memory) <= oldest_kept);
                if filters.is_empty() {
                    return self.done(None, memory.floor());
                }
                Next::Reissue
            }
            Phase::Reconcile { session: None, .. } => Next::Reconcile,
            Phase::Reconcile { .. } => Next::Wait,
            Phase::Fetch {
                batch,
                missing,
                then,
            } => {
                batch.clear();
                if missing.is_empty() {
                    let then = std::mem::take(then);
                    return match gap.after_fetch(then) {
                        Some(next) => next,
                        None => self.done(None, memory.floor()),
                    };
                }
                let take = ctx.fetch_batch().min(missing.len());
                batch.extend(missing.drain(..take));
                Next::Reissue
            }
        }
    }

    /// Open the NIP-77 session of the filter due: the filter to reconcile and the first
    /// message (hex).
    pub(crate) fn open_negentropy(
        &mut self,
        user: &RawValue,
        memory: &Memory,
        ctx: &Ctx<'_>,
    ) -> Result<(Box<RawValue>, String), NegFailure> {
        let Some(gap) = self.gap.as_deref_mut() else {
            return Err(NegFailure::Malformed("no reconciliation due".into()));
        };
        let Phase::Reconcile {
            filter, session, ..
        } = &mut gap.phase
        else {
            return Err(NegFailure::Malformed("no reconciliation due".into()));
        };
        // The floor may have risen since the catch-up began (the live half's events filled
        // the memory): below it, what was delivered is no longer known.
        let Some(start) = gap.starts.get_mut(*filter) else {
            return Err(NegFailure::Malformed("no such filter".into()));
        };
        *start = (*start).max(memory.floor());
        let since = *start;
        let (opened, first) = Reconciliation::open(memory.items_since(since), limits(ctx))?;
        *session = Some(Box::new(opened));
        Ok((filters::reconciled(user, since), first))
    }

    /// The relay's `NEG-MSG`.
    pub(crate) fn on_negentropy(
        &mut self,
        message: &str,
        ctx: &Ctx<'_>,
        memory: &Memory,
        filter_count: usize,
    ) -> Result<Next, NegFailure> {
        let Some(gap) = self.gap.as_deref_mut() else {
            return Ok(Next::Wait);
        };
        let Phase::Reconcile {
            session: Some(session),
            missing,
            ..
        } = &mut gap.phase
        else {
            return Ok(Next::Wait);
        };
        match session.on_message(message)? {
            Step::Send(next) => Ok(Next::NegMsg(next)),
            Step::Done(found) => {
                if missing.len() + found.len() > ctx.config.max_missing {
                    return Err(NegFailure::TooManyIds);
                }
                missing.extend(found);
                Ok(self.advance(ctx, memory, filter_count))
            }
        }
    }

    /// The current filter is reconciled (or failed): on to the next one, or past NIP-77.
    fn advance(&mut self, ctx: &Ctx<'_>, memory: &Memory, filter_count: usize) -> Next {
        let Some(gap) = self.gap.as_deref_mut() else {
            return Next::Wait;
        };
        let Phase::Reconcile {
            filter,
            session,
            missing,
            failed,
        } = &mut gap.phase
        else {
            return Next::Wait;
        };
        *session = None;
        if *filter + 1 < filter_count {
            *filter += 1;
            return Next::Reconcile;
        }
        let (missing, failed) = (std::mem::take(missing), std::mem::take(failed));
        match gap.after_reconcile(ctx, missing, failed) {
            Some(next) => next,
            None => self.done(None, memory.floor()),
        }
    }

    /// NIP-77 failed for the filter being reconciled (refused, silent, malformed, over a
    /// bound): that filter catches up with `since` instead, after the others. With
    /// `all_left`, so does every filter not reconciled yet (the relay is not asked again).
    pub(crate) fn fall_back(
        &mut self,
        ctx: &Ctx<'_>,
        memory: &Memory,
        filter_count: usize,
        all_left: bool,
    ) -> Next {
        let Some(gap) = self.gap.as_deref_mut() else {
            return Next::Wait;
        };
        let Phase::Reconcile { filter, failed, .. } = &mut gap.phase else {
            return Next::Wait;
        };
        failed.push(*filter);
        if all_left {
            failed.extend(*filter + 1..filter_count);
            *filter = filter_count.saturating_sub(1);
        }
        gap.fell_back = true;
        self.advance(ctx, memory, filter_count)
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

    fn done(&mut self, stuck: Option<u64>, floor: u64) -> Next {
        let Some(gap) = self.gap.take() else {
            return Next::Wait;
        };
        if matches!(gap.phase, Phase::Idle) {
            return Next::Wait;
        }
        let method = if gap.fell_back {
            CatchUpMethod::Since
        } else {
            CatchUpMethod::Negentropy
        };
        // Exact from where every filter is: the latest of their starts, unless a page could
        // not be split or the memory's bound moved the floor past it meanwhile.
        let since = gap.starts.iter().copied().max().unwrap_or(0);
        Next::Done(CaughtUp {
            method,
            exact_since: stuck.unwrap_or(0).max(since).max(floor),
            recovered: gap.recovered,
        })
    }
}

/// Where the memory holds the relay's whole set for one filter of `filters`, after a first
/// answer that went live at `live_from`.
///
/// - `limit: 0` asked for nothing stored: only what came live.
/// - A filter the answer may have been cut for (its `limit`, or a cap the relay applies
///   without saying so) is whole from the cut: with one filter, the oldest event delivered;
///   with several, the answer's `k`-th newest, where `k` is the fewest events a cut filter
///   returned (every one of them at or after its own cut).
/// - Otherwise, from the filter's `since`.
fn span_of(
    bounds: FilterBounds,
    first: Option<&FirstAnswer>,
    filters: usize,
    live_from: u64,
    ctx: &Ctx<'_>,
) -> u64 {
    let limit = bounds
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    if limit == 0 {
        return live_from;
    }
    let Some(first) = first else {
        return bounds.since;
    };
    let k = ctx.capped_at().min(limit).max(1);
    if first.count < k {
        return bounds.since;
    }
    let cut = if filters == 1 {
        first.oldest
    } else {
        first.newest.nth(k).unwrap_or(live_from)
    };
    bounds.since.max(cut)
}

/// Where the next, older page ends (its `until`, inclusive), if the answer may have been
/// cut short; `None` when it was complete. Above the returned `created_at` the answer is
/// complete:
///
/// - One filter that returned the whole page it asked for was cut at its oldest event.
/// - Otherwise, any filter the relay cut returned at least `possibly_capped` events (the
///   caps relays apply without saying so are larger), all at or after its own cut: so the
///   answer's `possibly_capped`-th newest is at or after every cut.
fn next_page(newest: &Newest, filters: usize, ctx: &Ctx<'_>) -> Option<u64> {
    let (page, capped_at) = (ctx.page(), ctx.capped_at());
    let count = newest.len();
    if filters == 1 && count >= page {
        return newest.nth(page);
    }
    (count >= capped_at)
        .then(|| newest.nth(capped_at))
        .flatten()
}

/// The newest `created_at` values seen, at most as many as each push allows: where an
/// answer that may have been cut is known to be whole.
#[derive(Debug, Default)]
struct Newest(BinaryHeap<Reverse<u64>>);

impl Newest {
    /// Add `created_at`, keeping the `keep` newest.
    fn push(&mut self, created_at: u64, keep: usize) {
        self.0.push(Reverse(created_at));
        if self.0.len() > keep {
            self.0.pop();
        }
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// The `n`-th newest (1 is the newest), if that many were kept.
    fn nth(&self, n: usize) -> Option<u64> {
        let skip = self.0.len().checked_sub(n)?;
        // The heap's smallest is the oldest kept: the `n`-th newest has `len - n` older.
        let mut ascending: Vec<u64> = self.0.iter().map(|r| r.0).collect();
        crate::sort::sort(&mut ascending);
        ascending.get(skip).copied()
    }
}

/// Where filter `i`'s `since` window starts: its own start, never below the memory's floor.
fn window_start(starts: &[u64], i: usize, memory: &Memory) -> u64 {
    starts.get(i).copied().unwrap_or(0).max(memory.floor())
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
