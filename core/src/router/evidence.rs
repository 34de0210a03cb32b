//! What relays delivered, as decaying tallies: per (author, relay) pair, and per relay for
//! the authors that declared it and for those that did not.
//!
//! A tally counts sessions, not events: "asked about this author, and delivered at least one
//! of their events" is a hit; "answered EOSE with none of them, while the author's events
//! came from elsewhere in the same session" is a miss. An author who posted nothing makes no
//! relay look bad.

use serde::{Deserialize, Serialize};

/// Hits and misses, each halving every `half_life` seconds of wall-clock time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tally {
    pub(crate) hits: f64,
    pub(crate) misses: f64,
    /// Unix seconds the tally was last brought forward to.
    pub(crate) at: u64,
}

impl Tally {
    /// Bring the tally forward to `now` (unix seconds).
    pub(crate) fn decay_to(&mut self, now: u64, half_life: u64) {
        if now <= self.at || half_life == 0 {
            self.at = self.at.max(now);
            return;
        }
        #[allow(clippy::cast_precision_loss)]
        let factor = (-((now - self.at) as f64) / half_life as f64).exp2();
        self.hits *= factor;
        self.misses *= factor;
        self.at = now;
    }

    pub(crate) fn hit(&mut self, now: u64, half_life: u64) {
        self.decay_to(now, half_life);
        self.hits += 1.0;
    }

    pub(crate) fn miss(&mut self, now: u64, half_life: u64) {
        self.decay_to(now, half_life);
        self.misses += 1.0;
    }

    /// The posterior mean of a Beta whose prior is `mean` worth `strength` observations.
    pub(crate) fn mean(&self, prior: f64, strength: f64) -> f64 {
        (self.hits + prior * strength) / (self.hits + self.misses + strength)
    }

    /// How many observations it holds: what a prior is weighed against.
    pub(crate) fn weight(&self) -> f64 {
        self.hits + self.misses
    }

    /// Whether the tally has decayed to nothing worth keeping.
    pub(crate) fn faded(&self) -> bool {
        self.weight() < 0.05
    }
}

/// A relay's tallies over the authors it was asked about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RelayTallies {
    /// Over authors whose list declares it as a write relay.
    pub(crate) declared: Tally,
    /// Over every other author: how much content lives on it beyond the lists.
    pub(crate) undeclared: Tally,
}

/// The prior for a declared (author, write relay) pair: the field measured 37% of declared
/// pairs working; a little more, since dead relays are already told apart by their health.
pub(crate) const DECLARED_PRIOR: f64 = 0.45;
/// How many observations the declared prior is worth.
pub(crate) const DECLARED_STRENGTH: f64 = 3.0;
/// The prior for an undeclared pair, before the relay's popularity lifts it.
pub(crate) const UNDECLARED_PRIOR: f64 = 0.03;
/// How many observations the undeclared prior is worth: content beyond the lists is rare,
/// so it takes evidence to believe in it.
pub(crate) const UNDECLARED_STRENGTH: f64 = 6.0;
/// How many observations a relay's own rate is worth as the prior of one of its pairs.
pub(crate) const PAIR_STRENGTH: f64 = 1.5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_halves_every_half_life() {
        let mut t = Tally::default();
        t.hit(1_000, 100);
        t.hit(1_000, 100);
        t.miss(1_100, 100);
        assert_eq!((t.hits, t.misses, t.at), (1.0, 1.0, 1_100));
        t.decay_to(1_300, 100);
        assert_eq!((t.hits, t.misses), (0.25, 0.25));
        t.decay_to(1_200, 100);
        assert_eq!(t.at, 1_300, "time does not go back");
    }

    #[test]
    fn the_prior_gives_way_to_evidence() {
        let mut t = Tally::default();
        assert!((t.mean(0.4, 2.0) - 0.4).abs() < 1e-12);
        for _ in 0..18 {
            t.hit(0, 100);
        }
        assert!((t.mean(0.4, 2.0) - 0.94).abs() < 1e-12);
    }
}
