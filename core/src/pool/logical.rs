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
}

#[derive(Debug)]
pub(crate) struct Logical {
    pub(crate) targets: Targets,
    pub(crate) relays: BTreeMap<RelayId, Target>,
    pub(crate) seen: Seen,
    /// When the outcome is due (registered in the pool's index); `None` once reported.
    pub(crate) deadline: Option<Instant>,
    reported: bool,
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
        }
    }

    pub(crate) fn add_relay(&mut self, relay: RelayId, local: Option<SubscriptionId>) {
        self.relays.insert(
            relay,
            Target {
                local,
                answer: Answer::Waiting,
                gave_up: None,
            },
        );
    }

    /// `relay` answered EOSE; returns whether it is the first relay to.
    pub(crate) fn eosed(&mut self, relay: RelayId) -> bool {
        let first = !self.relays.values().any(|t| t.answer == Answer::Eose);
        let Some(target) = self.relays.get_mut(&relay) else {
            return false;
        };
        if target.answer != Answer::Waiting {
            return false;
        }
        target.answer = Answer::Eose;
        first
    }

    /// `relay` no longer serves this subscription.
    pub(crate) fn gone(&mut self, relay: RelayId, why: Missing) {
        let Some(target) = self.relays.get_mut(&relay) else {
            return;
        };
        target.local = None;
        target.gave_up = Some(why.to_string());
        if target.answer == Answer::Waiting {
            target.answer = Answer::Missing(why);
        }
    }

    /// Whether any relay still serves it. A subscription on every relay is served by the
    /// relays to come, too, so it never ends on its own... unless relays it had all gave up.
    pub(crate) fn served(&self) -> bool {
        self.relays.values().any(|t| t.local.is_some())
            || (self.relays.is_empty() && matches!(self.targets, Targets::All(_)))
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
        if self.reported {
            return None;
        }
        let waiting = self.relays.values().any(|t| t.answer == Answer::Waiting);
        if !deadline && (waiting || self.relays.is_empty()) {
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
}
