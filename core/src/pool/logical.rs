//! [`Logical`]: one logical subscription — which relays serve it, what each answered, and
//! when its one outcome is due.

use std::collections::BTreeMap;

use super::dedup::Seen;
use super::{Missing, Outcome, RelayId};
use crate::nostr::{Filter, SubscriptionId};
use crate::time::Instant;

/// Which relays a subscription targets.
#[derive(Clone, Debug)]
pub(crate) enum Targets {
    /// Every relay, with these filters, including relays added later.
    All(Vec<Filter>),
    /// The relays given at subscribe time only, each with its own filters.
    Routed,
    /// Routed by people ([`RelayPool::subscribe_outbox`](super::RelayPool::subscribe_outbox)):
    /// the pool's routing keeps its relays and outcome; this keeps its dedup memory only.
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
    /// Relays still `Waiting` for EOSE, relays that answered EOSE, relays still serving:
    /// kept beside `relays` so no answer scans every relay.
    waiting: usize,
    eosed: usize,
    serving: usize,
}

#[derive(Debug)]
pub(crate) struct Target {
    /// The relay session's own subscription, while it serves this one.
    pub(crate) local: Option<SubscriptionId>,
    answer: Answer,
    /// Why it stopped serving, for `Ended`.
    gave_up: Option<String>,
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
            waiting: 0,
            eosed: 0,
            serving: 0,
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

    pub(crate) fn add_relay(&mut self, relay: RelayId, local: Option<SubscriptionId>) {
        let target = Target {
            local,
            answer: Answer::Waiting,
            gave_up: None,
        };
        self.count(&target, 1);
        if let Some(old) = self.relays.insert(relay, target) {
            self.count(&old, -1);
        }
    }

    /// `relay` answered EOSE; returns whether it is the first relay to.
    pub(crate) fn eosed(&mut self, relay: RelayId) -> bool {
        let first = self.eosed == 0;
        let Some(target) = self.relays.get_mut(&relay) else {
            return false;
        };
        if target.answer != Answer::Waiting {
            return false;
        }
        target.answer = Answer::Eose;
        self.waiting -= 1;
        self.eosed += 1;
        first
    }

    /// `relay` no longer serves this subscription.
    pub(crate) fn gone(&mut self, relay: RelayId, why: Missing) {
        let Some(target) = self.relays.get_mut(&relay) else {
            return;
        };
        if target.local.take().is_some() {
            self.serving -= 1;
        }
        target.gave_up = Some(why.to_string());
        if target.answer == Answer::Waiting {
            target.answer = Answer::Missing(why);
            self.waiting -= 1;
        }
    }

    /// Whether any relay still serves it. A subscription on every relay is served by the
    /// relays to come, too, so it never ends on its own... unless relays it had all gave up.
    pub(crate) fn served(&self) -> bool {
        self.serving > 0
            || matches!(self.targets, Targets::People)
            || (self.relays.is_empty() && matches!(self.targets, Targets::All(_)))
    }

    /// Add (`1`) or remove (`-1`) `target` from the counters.
    fn count(&mut self, target: &Target, sign: isize) {
        let add = |n: &mut usize| *n = n.saturating_add_signed(sign);
        match target.answer {
            Answer::Waiting => add(&mut self.waiting),
            Answer::Eose => add(&mut self.eosed),
            Answer::Missing(_) => {}
        }
        if target.local.is_some() {
            add(&mut self.serving);
        }
    }

    pub(crate) fn reasons(&self) -> Vec<(RelayId, String)> {
        self.relays
            .iter()
            .filter_map(|(&r, t)| t.gave_up.clone().map(|why| (r, why)))
            .collect()
    }

    /// The outcome, the first time it is known: every relay answered, or (`deadline`) time
    /// is up and whoever has not answered is missing.
    pub(crate) fn outcome(&mut self, deadline: bool) -> Option<Outcome> {
        if self.reported || matches!(self.targets, Targets::People) {
            return None;
        }
        if !deadline && (self.waiting > 0 || self.relays.is_empty()) {
            return None;
        }
        self.reported = true;
        let missing: Vec<(RelayId, Missing)> = self
            .relays
            .iter()
            .filter_map(|(&r, t)| match &t.answer {
                Answer::Eose => None,
                Answer::Waiting => Some((r, Missing::NoEose)),
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
        let waiting = self
            .relays
            .values()
            .filter(|t| t.answer == Answer::Waiting)
            .count();
        let eosed = self
            .relays
            .values()
            .filter(|t| t.answer == Answer::Eose)
            .count();
        let serving = self.relays.values().filter(|t| t.local.is_some()).count();
        if (waiting, eosed, serving) != (self.waiting, self.eosed, self.serving) {
            return Err(format!(
                "subscription counts (waiting, eose, serving) {:?}, holds {:?}",
                (self.waiting, self.eosed, self.serving),
                (waiting, eosed, serving)
            ));
        }
        self.seen.check_consistency()
    }
}
