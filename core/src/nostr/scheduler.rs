//! The subscription scheduler: which REQs go out when. It owns the send queue (priority,
//! then registration order), who was told they wait for a slot, the REQs open on the relay
//! and the order they were sent in, the relay's subscription cap (declared in its NIP-11
//! document, or learned from refusals, see [`Cap`]), and the batch pacing of replays. The session decides *that* a subscription should be sent; the
//! scheduler decides *when*, under three bounds: never past the subscription limit, never
//! inside a rate-limit gate window (background work only), at most `replay_batch` background
//! sends (REQs, and a catch-up's re-sends and `NEG-OPEN`s) in any `replay_pause`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::gate::RateLimitGate;
use crate::nostr::catch_up::{self, NegFailure, Next};
use crate::nostr::config::RelayConfig;
use crate::nostr::message::ClientMessage;
use crate::nostr::output::{Carries, Event, Transmit};
use crate::nostr::registry::Registry;
use crate::nostr::stats::Stats;
use crate::nostr::subscription::{neg_wire_id, split_filters, QueueKey, SubState, SubscriptionId};
use crate::time::Instant;
use crate::timers::Timers;

/// The parts of the session the scheduler acts through, borrowed side by side.
pub(crate) struct Env<'a> {
    pub(crate) config: &'a RelayConfig,
    /// The relay's declared `max_subid_length`, which wire ids keep to.
    pub(crate) max_subid: Option<usize>,
    /// How a REQ catches up (`None`: catch-up is off).
    pub(crate) catch_up: Option<catch_up::Ctx<'a>>,
    /// REQs may go out: the socket is open and no AUTH hold keeps them back.
    pub(crate) sending: bool,
    pub(crate) gate: &'a RateLimitGate,
    pub(crate) subs: &'a mut Registry,
    pub(crate) timers: &'a mut Timers<SubscriptionId>,
    pub(crate) transmits: &'a mut VecDeque<Transmit>,
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) stats: &'a mut Stats,
}

#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    /// Subscriptions waiting to be sent: highest priority first, then first registered.
    send_queue: BTreeSet<QueueKey>,
    /// Which queued subscriptions were told they wait for a slot.
    told_queued: BTreeSet<SubscriptionId>,
    /// Live subscriptions whose catch-up has a next step to send (a page, a fetch batch, a
    /// fallback, a `NEG-OPEN`): under their open REQ, so no slot is needed, but paced and
    /// gated like any replay.
    steps: BTreeSet<QueueKey>,
    /// Catch-up steps that would open a NIP-77 session while the relay's bound on open
    /// sessions is reached: back into `steps` when one ends.
    negentropy_waiting: BTreeSet<QueueKey>,
    /// Subscriptions waiting for EOSE, by send order (to attribute id-less NOTICE refusals).
    pending_by_seq: BTreeMap<u64, SubscriptionId>,
    req_seq: u64,
    open_reqs: usize,
    /// The relay's cap, when it declared or showed one.
    cap: Option<Cap>,
    /// The one REQ sent past a declared cap to see whether the relay allows more.
    probe: Option<SubscriptionId>,
    /// When each background send of the last `replay_pause` went out (at most
    /// `replay_batch`): the pacing is a sliding window, so a catch-up step right after a
    /// small replay goes at once, while a large replay still leaves in batches.
    sent: VecDeque<Instant>,
}

/// The relay's subscription cap and where it comes from. What the relay does wins over
/// what it says:
///
/// - **Declared** (NIP-11 `limitation.max_subscriptions`): a first guess. While it is the
///   limit in force and subscriptions wait, one REQ at a time goes out past it (a probe).
///   A probe that gets its EOSE raises the declared cap to the REQs open then (one more);
///   a probe refused as a cap makes the cap learned.
/// - **Learned** (a cap refusal in any dialect): the REQs that were open when the refused
///   one arrived at the relay. It replaces a declared cap in either direction, and after
///   that only goes down: nothing is probed past a learned cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    /// From the relay's information document.
    Declared(usize),
    /// From a refusal.
    Learned(usize),
}

impl Cap {
    fn max(self) -> usize {
        match self {
            Cap::Declared(n) | Cap::Learned(n) => n,
        }
    }
}

impl Scheduler {
    /// REQs open on the relay (sent and not closed).
    pub(crate) fn open_reqs(&self) -> usize {
        self.open_reqs
    }

    /// The limit in force: `configured` or the relay's cap, whichever is lower.
    pub(crate) fn limit(&self, configured: Option<usize>) -> Option<usize> {
        match (configured, self.cap.map(Cap::max)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The relay's cap, if it declared or showed one.
    pub(crate) fn cap(&self) -> Option<Cap> {
        self.cap
    }

    /// The cap a checkpoint remembered (before any REQ is open).
    pub(crate) fn restore_cap(&mut self, cap: Option<Cap>) {
        self.cap = cap;
    }

    /// Whether one more REQ may be open: under the limit, or as the one probe past a
    /// declared cap (never past the configured limit).
    pub(crate) fn slot_available(&self, configured: Option<usize>) -> bool {
        self.limit(configured)
            .is_none_or(|max| self.open_reqs < max)
            || self.may_probe(configured)
    }

    /// The relay's information document declares `max` open REQs (`None`: it declares
    /// none). A learned cap is kept: what the relay did outranks what it says; so do the
    /// REQs it already accepted (answered with EOSE) on this socket, which raise a lower
    /// declared cap to their number. Returns the cap now in force when it changed.
    pub(crate) fn declare_limit(&mut self, max: Option<usize>) -> Option<usize> {
        if matches!(self.cap, Some(Cap::Learned(_))) {
            return None;
        }
        let before = self.cap;
        let accepted = self.open_reqs - self.pending_by_seq.len();
        self.cap = max.map(|m| Cap::Declared(m.max(accepted).max(1)));
        if self.cap.is_none() {
            self.probe = None;
        }
        (self.cap != before)
            .then(|| self.cap.map(Cap::max))
            .flatten()
    }

    /// The relay refused a REQ as past its cap while `before` of our REQs sent ahead of it
    /// were still open: it allows `before` (at least one). The learned cap replaces a
    /// declared one either way and otherwise only goes down. Returns the cap when it
    /// changed.
    pub(crate) fn learn_limit(&mut self, before: usize) -> Option<usize> {
        let max = before.max(1);
        let was = self.cap.map(Cap::max);
        if matches!(self.cap, Some(Cap::Learned(m)) if max >= m) {
            return None;
        }
        self.cap = Some(Cap::Learned(max));
        self.probe = None;
        (was != Some(max)).then_some(max)
    }

    /// `id` got its EOSE. When it was the probe past a declared cap, the relay allows what
    /// is open now: returns the raised cap.
    pub(crate) fn accepted(&mut self, id: SubscriptionId) -> Option<usize> {
        if self.probe != Some(id) {
            return None;
        }
        self.probe = None;
        let Some(Cap::Declared(n)) = self.cap else {
            return None;
        };
        let raised = n.max(self.open_reqs);
        self.cap = Some(Cap::Declared(raised));
        (raised > n).then_some(raised)
    }

    /// One REQ past a declared cap, when exactly the cap is open and no probe is out.
    fn may_probe(&self, configured: Option<usize>) -> bool {
        matches!(self.cap, Some(Cap::Declared(n)) if self.open_reqs == n)
            && self.probe.is_none()
            && configured.is_none_or(|c| self.open_reqs < c)
    }

    /// The newest REQ still waiting for EOSE: the only one an id-less refusal can mean.
    pub(crate) fn newest_pending(&self) -> Option<SubscriptionId> {
        self.pending_by_seq.last_key_value().map(|(_, &id)| id)
    }

    /// A new socket is open: its replay may start at once.
    pub(crate) fn on_open(&mut self) {
        self.sent.clear();
    }

    /// Nothing is open or queued any more (the socket is gone, or a new one starts).
    pub(crate) fn reset(&mut self) {
        self.send_queue.clear();
        self.told_queued.clear();
        self.steps.clear();
        self.negentropy_waiting.clear();
        self.pending_by_seq.clear();
        self.open_reqs = 0;
        self.probe = None;
    }

    /// `id` waits in the send queue.
    pub(crate) fn enqueue(&mut self, id: SubscriptionId, env: &mut Env<'_>) {
        let Some(sub) = env.subs.get_mut(id) else {
            return;
        };
        sub.state = SubState::Queued;
        self.send_queue.insert(sub.queue_key());
    }

    /// `id` is leaving the session: take it out of the queue.
    pub(crate) fn dequeue(&mut self, key: QueueKey) {
        self.send_queue.remove(&key);
        self.told_queued.remove(&key.2);
    }

    /// Tell `id` once that it waits for a slot.
    pub(crate) fn tell_queued(&mut self, id: SubscriptionId, env: &mut Env<'_>) {
        if self.told_queued.insert(id) {
            env.events.push_back(Event::Queued { sub: id });
        }
    }

    /// `id`'s catch-up has a step to send (see [`Scheduler::pump`]).
    pub(crate) fn schedule_step(&mut self, id: SubscriptionId, env: &mut Env<'_>) {
        if let Some(sub) = env.subs.get(id) {
            self.steps.insert(sub.queue_key());
        }
    }

    /// Send REQs from the queue, then catch-up steps: only outside a gate window, at most
    /// one batch per `replay_pause`, REQs never past the subscription limit. The caller
    /// checks the socket.
    pub(crate) fn pump(&mut self, now: Instant, env: &mut Env<'_>) {
        if !env.sending || (self.send_queue.is_empty() && self.steps.is_empty()) {
            return;
        }
        let configured = env.config.max_subscriptions;
        // Checked before the pause and the gate: with no slot free, nothing wakes the pump
        // again until a slot frees up, so whoever waits must hear `Queued` now.
        if !self.send_queue.is_empty() && !self.slot_available(configured) {
            self.tell_all_queued(env);
        }
        let pause = env.config.replay_pause;
        while self
            .sent
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= pause)
        {
            self.sent.pop_front();
        }
        if env.gate.is_open(now) {
            return;
        }
        let batch = env.config.replay_batch.max(1);
        while self.sent.len() < batch {
            if !self.send_queue.is_empty() && self.slot_available(configured) {
                let Some((_, _, id)) = self.send_queue.pop_first() else {
                    break;
                };
                self.told_queued.remove(&id);
                self.send_req(now, id, env);
            } else if let Some((_, _, id)) = self.steps.pop_first() {
                if !self.send_step(now, id, env) {
                    continue;
                }
            } else {
                if !self.send_queue.is_empty() {
                    self.tell_all_queued(env);
                }
                break;
            }
            self.sent.push_back(now);
        }
    }

    /// When [`Scheduler::pump`] can next send, if anything waits that may go.
    pub(crate) fn deadline(
        &self,
        sending: bool,
        gate: &RateLimitGate,
        config: &RelayConfig,
    ) -> Option<Instant> {
        let reqs = !self.send_queue.is_empty() && self.slot_available(config.max_subscriptions);
        if !sending || (!reqs && self.steps.is_empty()) {
            return None;
        }
        let gate = gate.ready_at().unwrap_or(Instant::ZERO);
        // With the window full, the oldest send's leaving it frees the next.
        let window = match self.sent.front() {
            Some(&oldest) if self.sent.len() >= config.replay_batch.max(1) => {
                oldest.saturating_add(config.replay_pause)
            }
            _ => Instant::ZERO,
        };
        Some(window.max(gate))
    }

    /// A NIP-77 session may have ended: the steps waiting for one may go.
    pub(crate) fn negentropy_ended(&mut self) {
        if !self.negentropy_waiting.is_empty() {
            self.steps.append(&mut self.negentropy_waiting);
        }
    }

    /// Send `id`'s next catch-up step: a NIP-77 session's `NEG-OPEN`, or its REQ again
    /// under the same wire id (relays replace a subscription re-sent under its id, so the
    /// live half never lapses and no second slot is taken). Returns whether anything went
    /// out (a step waiting for a NIP-77 session to end sends nothing).
    fn send_step(&mut self, now: Instant, id: SubscriptionId, env: &mut Env<'_>) -> bool {
        let Some(ctx) = env.catch_up else {
            return false;
        };
        let Some(sub) = env.subs.get(id) else {
            return false;
        };
        if sub.state != SubState::Live {
            return false;
        }
        if sub.catch_up.wants_negentropy() && ctx.negentropy {
            let open = env.subs.iter().filter(|s| s.catch_up.negotiating()).count();
            if open >= ctx.config.negentropy_sessions.max(1) {
                self.negentropy_waiting.insert(sub.queue_key());
                return false;
            }
        }
        let Some(sub) = env.subs.get_mut(id) else {
            return false;
        };
        let filters = sub.filter_count;
        if sub.catch_up.wants_negentropy() && !ctx.negentropy {
            // The relay refused NIP-77 since this catch-up began (another subscription
            // learned it): straight to `since`.
            sub.catch_up.fall_back(&ctx, &sub.memory, filters, true);
        }
        while sub.catch_up.wants_negentropy() {
            let index = sub.catch_up.reconciling().unwrap_or(0);
            let Some(filter) = sub.user_filters().get(index).map(|&f| f.to_owned()) else {
                return false;
            };
            match sub.catch_up.open_negentropy(&filter, &sub.memory, &ctx) {
                Ok((filter, first)) => {
                    let text = ClientMessage::NegOpen {
                        sub: neg_wire_id(id, sub.attempt, index).into(),
                        filter: &filter,
                        message: first.into(),
                    }
                    .encode();
                    let deadline = now.saturating_add(ctx.config.negentropy_timeout);
                    env.timers.set(id, &mut sub.timer, Some(deadline));
                    env.stats.negentropy += 1;
                    env.transmits.push_back(Transmit::Send {
                        text,
                        carries: Carries::Negentropy(id),
                    });
                }
                Err(
                    NegFailure::Malformed(_) | NegFailure::TooManyRounds | NegFailure::TooManyIds,
                ) => {
                    // Our own items could not start this filter's session: it catches up
                    // by `since` instead, and the next filter tries its own.
                    // The failed filter always has a window to send, so the fallback ends
                    // in a re-send unless another filter's session is due first.
                    if sub.catch_up.fall_back(&ctx, &sub.memory, filters, false) == Next::Reconcile
                    {
                        continue;
                    }
                    break;
                }
            }
            return true;
        }
        self.reissue(now, id, env);
        true
    }

    /// Send live `id`'s REQ again under its wire id, with what its catch-up asks now.
    fn reissue(&mut self, now: Instant, id: SubscriptionId, env: &mut Env<'_>) {
        let Some(sub) = env.subs.get_mut(id) else {
            return;
        };
        sub.reissued = true;
        self.put_on_wire(now, id, env);
    }

    /// Send `id`'s REQ now (a foreground subscribe, or the pump), with its EOSE timeout.
    pub(crate) fn send_req(&mut self, now: Instant, id: SubscriptionId, env: &mut Env<'_>) {
        if let Some(Cap::Declared(n)) = self.cap {
            if self.open_reqs == n && self.probe.is_none() {
                self.probe = Some(id);
            }
        }
        let Some(sub) = env.subs.get_mut(id) else {
            return;
        };
        sub.attempt = sub.attempt.wrapping_add(1) & attempt_mask(id, env.max_subid);
        sub.reissued = false;
        if let Some(ctx) = &env.catch_up {
            let user = split_filters(&sub.filters);
            sub.catch_up.begin(ctx, &sub.memory, &user);
        }
        self.open_reqs += 1;
        self.put_on_wire(now, id, env);
    }

    /// Send `id`'s REQ under its current wire id with what it asks now, waiting for EOSE
    /// under the EOSE timeout: the tail of a first send, a retry and a catch-up's re-send.
    fn put_on_wire(&mut self, now: Instant, id: SubscriptionId, env: &mut Env<'_>) {
        let Some(sub) = env.subs.get_mut(id) else {
            return;
        };
        sub.responded = false;
        sub.state = SubState::Pending;
        self.req_seq += 1;
        sub.sent_seq = self.req_seq;
        let filters = sub.req_filters(env.catch_up.as_ref());
        let text = ClientMessage::Req {
            sub: sub.wire_id().into(),
            filters: filters.iter().map(|f| &**f).collect(),
        }
        .encode();
        env.timers.set(
            id,
            &mut sub.timer,
            Some(now.saturating_add(env.config.eose_timeout)),
        );
        self.pending_by_seq.insert(self.req_seq, id);
        env.stats.reqs += 1;
        env.transmits.push_back(Transmit::Send {
            text,
            carries: Carries::Req(id),
        });
    }

    /// `id` got its EOSE: it no longer waits for one.
    pub(crate) fn answered(&mut self, sent_seq: u64) {
        self.pending_by_seq.remove(&sent_seq);
    }

    /// `id`'s REQ is no longer open on the relay; its timer is cancelled.
    pub(crate) fn leave_open(&mut self, id: SubscriptionId, env: &mut Env<'_>) {
        let Some(sub) = env.subs.get_mut(id) else {
            return;
        };
        if sub.state == SubState::Pending {
            self.pending_by_seq.remove(&sub.sent_seq);
        }
        self.steps.remove(&sub.queue_key());
        self.negentropy_waiting.remove(&sub.queue_key());
        if sub.state.is_open() {
            self.open_reqs -= 1;
            sub.state = SubState::Idle;
        }
        if self.probe == Some(id) {
            self.probe = None;
        }
        env.timers.set(id, &mut sub.timer, None);
    }

    fn tell_all_queued(&mut self, env: &mut Env<'_>) {
        if self.told_queued.len() == self.send_queue.len() {
            return;
        }
        let waiting: Vec<SubscriptionId> = self.send_queue.iter().map(|&(_, _, id)| id).collect();
        for id in waiting {
            self.tell_queued(id, env);
        }
    }
}

/// The attempt counter's bits that fit a wire id `<id hex>:<attempt hex>` of at most
/// `max_len` characters: it wraps in fewer hex digits. An id too long to fit with one digit
/// keeps all of them (the relay refuses it, and the refusal is classified as any other).
/// A frame for an attempt 16^k sends ago then routes to the current one: only with a relay
/// that declares ids this short.
fn attempt_mask(id: SubscriptionId, max_len: Option<usize>) -> u32 {
    let Some(max_len) = max_len else {
        return u32::MAX;
    };
    let id_len = (64 - id.0.leading_zeros()).div_ceil(4).max(1) as usize;
    match max_len.saturating_sub(id_len + 1) {
        0 | 8.. => u32::MAX,
        digits => (1u32 << (4 * digits)) - 1,
    }
}

#[cfg(feature = "fuzzing")]
impl Scheduler {
    /// Check the scheduler's indexes against the subscriptions themselves.
    pub(crate) fn check_consistency(&self, subs: &Registry) -> Result<(), String> {
        // Runs after every fuzz step, so it allocates nothing: each index is checked entry by
        // entry against the subscriptions, and by count.
        let mut open = 0;
        let mut queued = 0;
        let mut pending = 0;
        for sub in subs.iter() {
            let id = sub.id;
            open += usize::from(sub.state.is_open());
            if sub.state == SubState::Pending {
                pending += 1;
                // Two pending subscriptions cannot both be the one entry at their sequence.
                let indexed = self.pending_by_seq.get(&sub.sent_seq);
                if indexed != Some(&id) {
                    return Err(format!(
                        "{id} is pending at sequence {} but pending_by_seq has {indexed:?}",
                        sub.sent_seq
                    ));
                }
            }
            let in_queue = self.send_queue.contains(&sub.queue_key());
            if in_queue != (sub.state == SubState::Queued) {
                return Err(format!("{id} is {:?} but in_queue={in_queue}", sub.state));
            }
            queued += usize::from(in_queue);
        }
        if queued != self.send_queue.len() {
            return Err(format!(
                "send queue holds {} entries for {queued} queued subscriptions",
                self.send_queue.len()
            ));
        }
        // The queue is exactly the queued subscriptions (above), so "told and in the queue"
        // is "told and queued".
        if let Some(id) = self
            .told_queued
            .iter()
            .find(|&&id| subs.get(id).is_none_or(|sub| sub.state != SubState::Queued))
        {
            return Err(format!(
                "{id} was told it is queued but is not in the queue"
            ));
        }
        if open != self.open_reqs {
            return Err(format!("open_reqs {} but {open} open", self.open_reqs));
        }
        if let Some((_, _, id)) = self
            .steps
            .iter()
            .find(|&&(_, _, id)| subs.get(id).is_none_or(|sub| !sub.state.is_open()))
        {
            return Err(format!("{id} has a catch-up step but no open REQ"));
        }
        if let Some((_, _, id)) = self.negentropy_waiting.iter().find(|&&(_, _, id)| {
            subs.get(id)
                .is_none_or(|sub| !sub.catch_up.wants_negentropy())
        }) {
            return Err(format!("{id} waits for a NIP-77 session it does not want"));
        }
        if pending != self.pending_by_seq.len() {
            return Err(format!(
                "pending_by_seq holds {} entries for {pending} pending subscriptions",
                self.pending_by_seq.len()
            ));
        }
        Ok(())
    }
}
