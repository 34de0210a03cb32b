//! [`Logical`]: one logical subscription — which relays serve it with which REQs, what each
//! relay answered, and when its one outcome is due. Every kind of subscription (on every
//! relay, routed by the application, routed by people) follows these rules.

use std::collections::BTreeMap;

use super::dedup::Seen;
use super::{Missing, Outcome, RelayId};
use crate::nostr::{Filter, SubscriptionId};
use crate::small::SmallMap;
use crate::time::Instant;

/// Which relays a subscription targets.
#[derive(Clone, Debug)]
pub(crate) enum Targets {
    /// Every relay, with these filters, including relays added later.
    All(Vec<Filter>),
    /// The relays given at subscribe time only, each with its own filters.
    Routed,
    /// Routed by people ([`RelayPool::subscribe_outbox`](super::RelayPool::subscribe_outbox)):
    /// the pool's routing places its people, a relay at a time, in REQs of a few people
    /// each; it is served as long as it is subscribed, whichever relays its people move to.
    People,
}

#[derive(Debug)]
pub(crate) struct Logical {
    pub(crate) targets: Targets,
    pub(crate) relays: BTreeMap<RelayId, Target>,
    pub(crate) seen: Seen,
    /// When the outcome is due (registered in the pool's index); `None` once reported.
    pub(crate) deadline: Option<Instant>,
    reported: bool,
    counts: Counts,
}

/// Relays still `Waiting` for EOSE, relays that answered EOSE, relays still serving: kept
/// beside `relays` so no answer scans every relay.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    waiting: usize,
    eosed: usize,
    serving: usize,
}

#[derive(Debug)]
pub(crate) struct Target {
    /// The relay session's REQs serving this subscription, each with how many EOSEs it
    /// answered (again after each reconnect): one REQ, or for a subscription by people one
    /// per group of its people there.
    reqs: SmallMap<SubscriptionId, u32>,
    answer: Answer,
    /// Why it stopped serving (for `Ended`), or why a REQ of it was closed before the
    /// relay answered (for the outcome).
    gave_up: Option<Missing>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Waiting,
    Eose,
    Missing(Missing),
}

impl Logical {
    pub(crate) fn new(targets: Targets, seen: Seen) -> Self {
        Logical {
            targets,
            relays: BTreeMap::new(),
            seen,
            deadline: None,
            reported: false,
            counts: Counts::default(),
        }
    }

    /// Whether its one outcome was reported.
    pub(crate) fn reported(&self) -> bool {
        self.reported
    }

    /// Its outcome was reported before a checkpoint: it is not reported again.
    pub(crate) fn mark_reported(&mut self) {
        self.reported = true;
    }

    /// `relay` serves it with its one REQ `local` (none: the session refused it), replacing
    /// whatever the relay had.
    pub(crate) fn add_relay(&mut self, relay: RelayId, local: Option<SubscriptionId>) {
        let target = Target {
            reqs: local.into_iter().map(|l| (l, 0)).collect(),
            answer: Answer::Waiting,
            gave_up: None,
        };
        self.counts.add(&target, 1);
        if let Some(old) = self.relays.insert(relay, target) {
            self.counts.add(&old, -1);
        }
    }

    /// One more REQ on `relay` (routing by people asks a relay in several). A relay still
    /// asked that answered keeps its answer, reported once; one asked afresh (it had no REQ
    /// left, or the relay's id was reused) is waited for again.
    pub(crate) fn add_req(&mut self, relay: RelayId, local: SubscriptionId) {
        let target = self.relays.entry(relay).or_insert_with(|| {
            let target = Target {
                reqs: SmallMap::new(),
                answer: Answer::Waiting,
                gave_up: None,
            };
            self.counts.add(&target, 1);
            target
        });
        self.counts.add(target, -1);
        if target.reqs.is_empty() {
            target.answer = Answer::Waiting;
            target.gave_up = None;
        }
        target.reqs.insert(local, 0);
        self.counts.add(target, 1);
    }

    /// The REQs serving it on `relay`.
    pub(crate) fn reqs(&self, relay: RelayId) -> impl Iterator<Item = SubscriptionId> + '_ {
        self.relays
            .get(&relay)
            .into_iter()
            .flat_map(|t| t.reqs.keys().copied())
    }

    /// Whether REQ `local` on `relay` answered EOSE.
    pub(crate) fn req_answered(&self, relay: RelayId, local: SubscriptionId) -> bool {
        self.relays
            .get(&relay)
            .and_then(|t| t.reqs.get(&local))
            .is_some_and(|&eoses| eoses > 0)
    }

    /// REQ `local` on `relay` answered EOSE. `Some(first)` when every REQ there has now
    /// answered, `first` when that is the first relay's answer; and once more, `Some(false)`,
    /// each time every REQ there has answered again (after a reconnect the relay finished
    /// its stored events again), whichever REQ answers last. A newcomer's first EOSE on a
    /// relay that answered is no new answer of the relay's.
    pub(crate) fn eose(&mut self, relay: RelayId, local: SubscriptionId) -> Option<bool> {
        let first = self.counts.eosed == 0;
        let target = self.relays.get_mut(&relay)?;
        let before = target.round();
        let eoses = target.reqs.get_mut(&local)?;
        *eoses = eoses.saturating_add(1);
        if target.answer == Answer::Eose {
            let after = target.round();
            return (after > before && after >= 2).then_some(false);
        }
        self.counts.add(target, -1);
        let now_answered = target.settle();
        self.counts.add(target, 1);
        now_answered.then_some(first)
    }

    /// REQ `local` on `relay` no longer serves it: closed by the relay (`why`), or by the
    /// pool (`None`: its people were moved). `Some(first)`, as for [`Logical::eose`], when
    /// the relay's other REQs have all answered, which is then the relay's answer. A relay
    /// left with no REQ that neither answered nor refused is as if it had never been asked.
    pub(crate) fn close_req(
        &mut self,
        relay: RelayId,
        local: SubscriptionId,
        why: Option<Missing>,
    ) -> Option<bool> {
        let first = self.counts.eosed == 0;
        let target = self.relays.get_mut(&relay)?;
        if !target.reqs.contains_key(&local) {
            return None;
        }
        self.counts.add(target, -1);
        target.reqs.remove(&local);
        if why.is_some() {
            target.gave_up = why;
        }
        let now_answered = target.settle();
        if target.reqs.is_empty() && target.answer == Answer::Waiting {
            self.relays.remove(&relay);
        } else {
            self.counts.add(target, 1);
        }
        now_answered.then_some(first)
    }

    /// `relay` no longer serves it at all.
    pub(crate) fn gone(&mut self, relay: RelayId, why: Missing) {
        let Some(target) = self.relays.get_mut(&relay) else {
            return;
        };
        self.counts.add(target, -1);
        target.reqs.clear();
        if target.answer == Answer::Waiting {
            target.answer = Answer::Missing(why.clone());
        }
        target.gave_up = Some(why);
        self.counts.add(target, 1);
    }

    /// Whether any relay still serves it. A subscription on every relay is served by the
    /// relays to come, too, so it never ends on its own... unless relays it had all gave up.
    /// One by people is served by whichever relays routing finds next.
    pub(crate) fn served(&self) -> bool {
        self.counts.serving > 0
            || matches!(self.targets, Targets::People)
            || (self.relays.is_empty() && matches!(self.targets, Targets::All(_)))
    }

    pub(crate) fn reasons(&self) -> Vec<(RelayId, String)> {
        self.relays
            .iter()
            .filter_map(|(&r, t)| t.gave_up.as_ref().map(|why| (r, why.to_string())))
            .collect()
    }

    /// The outcome, the first time it is known: every relay answered, or (`deadline`) time
    /// is up and whoever has not answered is missing. One by people waits, too, while no
    /// relay is asked (its people are being placed again).
    pub(crate) fn outcome(&mut self, deadline: bool) -> Option<Outcome> {
        if self.reported {
            return None;
        }
        let unplaced = matches!(self.targets, Targets::People) && self.counts.serving == 0;
        if !deadline && (self.counts.waiting > 0 || self.relays.is_empty() || unplaced) {
            return None;
        }
        self.reported = true;
        let missing: Vec<(RelayId, Missing)> = self
            .relays
            .iter()
            .filter_map(|(&r, t)| match &t.answer {
                Answer::Eose => None,
                Answer::Waiting => Some((r, t.gave_up.clone().unwrap_or(Missing::NoEose))),
                Answer::Missing(why) => Some((r, why.clone())),
            })
            .collect();
        Some(if missing.is_empty() && !self.relays.is_empty() {
            Outcome::Complete
        } else {
            Outcome::Partial { missing }
        })
    }

    /// The counters agree with the relays they count.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn check_consistency(&self) -> Result<(), String> {
        let mut counts = Counts::default();
        for target in self.relays.values() {
            counts.add(target, 1);
        }
        if counts != self.counts {
            return Err(format!(
                "subscription counts {:?}, holds {counts:?}",
                self.counts
            ));
        }
        self.seen.check_consistency()
    }
}

impl Target {
    /// How many times every REQ here has answered: the fewest EOSEs of any (0 with none).
    fn round(&self) -> u32 {
        self.reqs.values().copied().min().unwrap_or(0)
    }

    /// The relay's answer once every REQ there answered; missing once it has no REQ left
    /// after one was refused. Returns whether it has just answered.
    fn settle(&mut self) -> bool {
        if self.answer != Answer::Eose && self.round() > 0 {
            self.answer = Answer::Eose;
            return true;
        }
        if let (true, Answer::Waiting, Some(why)) =
            (self.reqs.is_empty(), &self.answer, &self.gave_up)
        {
            self.answer = Answer::Missing(why.clone());
        }
        false
    }
}

impl Counts {
    /// Add (`1`) or remove (`-1`) `target`.
    fn add(&mut self, target: &Target, sign: isize) {
        let add = |n: &mut usize| *n = n.saturating_add_signed(sign);
        match target.answer {
            Answer::Waiting => add(&mut self.waiting),
            Answer::Eose => add(&mut self.eosed),
            Answer::Missing(_) => {}
        }
        if !target.reqs.is_empty() {
            add(&mut self.serving);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_people() -> Logical {
        Logical::new(Targets::People, Seen::new(16, 4))
    }

    const R: RelayId = RelayId(1);

    #[test]
    fn a_relay_asked_in_several_reqs_answers_once_all_of_them_did() {
        let mut l = by_people();
        l.add_req(R, SubscriptionId(1));
        l.add_req(R, SubscriptionId(2));
        assert_eq!(l.eose(R, SubscriptionId(1)), None);
        assert_eq!(l.outcome(false), None);
        assert_eq!(l.eose(R, SubscriptionId(2)), Some(true));
        // A newcomer's REQ does not take the relay's answer back: it was reported.
        l.add_req(R, SubscriptionId(3));
        assert_eq!(l.eose(R, SubscriptionId(3)), None);
        assert_eq!(l.outcome(false), Some(Outcome::Complete));
    }

    #[test]
    fn after_a_reconnect_a_relay_answers_again_once_all_its_reqs_did() {
        let mut l = by_people();
        l.add_req(R, SubscriptionId(1));
        l.add_req(R, SubscriptionId(2));
        assert_eq!(l.eose(R, SubscriptionId(1)), None);
        assert_eq!(l.eose(R, SubscriptionId(2)), Some(true));
        // A newcomer joins the answered relay; its first EOSE is no new answer.
        l.add_req(R, SubscriptionId(3));
        assert_eq!(l.eose(R, SubscriptionId(3)), None);
        // A reconnect: every REQ answers again, and the relay once, when the last did.
        assert_eq!(l.eose(R, SubscriptionId(3)), None);
        assert_eq!(l.eose(R, SubscriptionId(1)), None);
        assert_eq!(l.eose(R, SubscriptionId(2)), Some(false));
    }

    #[test]
    fn a_req_the_relay_closed_names_the_relay_unless_its_other_reqs_answer() {
        let mut l = by_people();
        l.add_req(R, SubscriptionId(1));
        l.add_req(R, SubscriptionId(2));
        let closed = Missing::Closed("blocked: no".into());
        assert_eq!(
            l.close_req(R, SubscriptionId(1), Some(closed.clone())),
            None
        );
        assert_eq!(
            l.outcome(true),
            Some(Outcome::Partial {
                missing: vec![(R, closed.clone())]
            })
        );
        let mut l = by_people();
        l.add_req(R, SubscriptionId(1));
        l.add_req(R, SubscriptionId(2));
        assert_eq!(l.eose(R, SubscriptionId(2)), None);
        assert_eq!(l.close_req(R, SubscriptionId(1), Some(closed)), Some(true));
        assert_eq!(l.outcome(false), Some(Outcome::Complete));
    }

    #[test]
    fn people_moved_off_a_relay_that_never_answered_leave_no_trace() {
        let mut l = by_people();
        l.add_req(R, SubscriptionId(1));
        assert_eq!(l.close_req(R, SubscriptionId(1), None), None);
        assert!(l.relays.is_empty());
        // Nothing is asked anywhere: the outcome waits for the next placement.
        assert_eq!(l.outcome(false), None);
        assert!(l.served());
    }

    #[test]
    fn a_relay_asked_afresh_after_it_was_gone_is_waited_for_again() {
        let mut l = by_people();
        l.add_req(R, SubscriptionId(1));
        l.gone(R, Missing::Removed);
        l.add_req(R, SubscriptionId(7));
        assert_eq!(l.outcome(false), None);
        assert_eq!(
            l.outcome(true),
            Some(Outcome::Partial {
                missing: vec![(R, Missing::NoEose)]
            })
        );
    }
}
