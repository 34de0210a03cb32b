//! Paced connects: at most [`PoolConfig::max_connecting`](super::PoolConfig) handshakes in
//! flight, the other relays waiting in arrival order.
//!
//! Every relay session of a pool is paced ([`crate::link::Link::set_paced`]): an attempt
//! that falls due (the first connect, a reconnect after backoff) waits in
//! [`LinkState::Queued`](crate::link::LinkState) with no socket and no connect timeout
//! running. The pool admits waiting relays first come, first served while fewer than the
//! limit are connecting; an admitted relay holds its slot until its socket opens, fails or
//! times out (the session's connect timeout starts at admission), so a relay that never
//! completes its handshake holds a slot for one connect timeout at most. A relay that fails
//! goes to the back of the line after its backoff: nobody starves, and a relay `k` places
//! back in line is admitted within `ceil(k / limit)` connect timeouts.

use std::collections::VecDeque;

use super::output::RelayId;
use crate::link::Link;

/// A relay's place in the pacing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Pace {
    /// Neither waiting nor holding a slot.
    #[default]
    Free,
    /// In the line (its link may have left `Queued` since: the entry is then skipped).
    Waiting,
    /// Holds a slot: admitted, its handshake not over.
    InFlight,
}

/// Handshakes in flight and waiting, as [`RelayPool::handshakes`](super::RelayPool) reports
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handshakes {
    /// Relays admitted whose socket has not opened, failed or timed out yet.
    pub in_flight: usize,
    /// Relays whose attempt is due and waits for a slot (reported as connecting).
    pub waiting: usize,
    /// The most in flight at once since the pool was made.
    pub peak_in_flight: usize,
}

/// The line of relays waiting for a slot and the count of slots held.
#[derive(Debug)]
pub(super) struct Pacing {
    limit: usize,
    line: VecDeque<RelayId>,
    in_flight: usize,
    peak: usize,
}

impl Pacing {
    /// `limit` handshakes at once (at least one).
    pub(super) fn new(limit: usize) -> Self {
        Pacing {
            limit: limit.max(1),
            line: VecDeque::new(),
            in_flight: 0,
            peak: 0,
        }
    }

    /// What the counts are now.
    pub(super) fn handshakes(&self) -> Handshakes {
        Handshakes {
            in_flight: self.in_flight,
            waiting: self.line.len(),
            peak_in_flight: self.peak,
        }
    }

    /// After `relay`'s session ran: a finished handshake gives its slot back, an attempt that
    /// fell due joins the line.
    pub(super) fn observe(&mut self, relay: RelayId, pace: &mut Pace, link: &Link) {
        if *pace == Pace::InFlight && !link.is_connecting() {
            self.in_flight -= 1;
            *pace = Pace::Free;
        }
        if *pace == Pace::Free && link.is_queued() {
            self.line.push_back(relay);
            *pace = Pace::Waiting;
        }
    }

    /// The next relay to admit, while a slot is free.
    pub(super) fn next(&mut self) -> Option<RelayId> {
        if self.in_flight >= self.limit {
            return None;
        }
        self.line.pop_front()
    }

    /// A relay taken by [`Pacing::next`] was admitted and is connecting.
    pub(super) fn admitted(&mut self, pace: &mut Pace) {
        self.in_flight += 1;
        self.peak = self.peak.max(self.in_flight);
        *pace = Pace::InFlight;
    }

    /// A relay removed from the pool leaves the line, or gives its slot back.
    pub(super) fn forget(&mut self, relay: RelayId, pace: Pace) {
        match pace {
            Pace::Free => {}
            Pace::Waiting => self.line.retain(|&r| r != relay),
            Pace::InFlight => self.in_flight -= 1,
        }
    }

    /// The counts agree with the relays' own paces (`paces`: every relay's).
    #[cfg(feature = "fuzzing")]
    pub(super) fn check(&self, paces: impl Iterator<Item = (RelayId, Pace)>) -> Result<(), String> {
        let (mut in_flight, mut waiting) = (0, 0);
        for (relay, pace) in paces {
            match pace {
                Pace::InFlight => in_flight += 1,
                Pace::Waiting => {
                    waiting += 1;
                    let entries = self.line.iter().filter(|&&r| r == relay).count();
                    if entries != 1 {
                        return Err(format!("{relay} waits with {entries} places in line"));
                    }
                }
                Pace::Free => {}
            }
        }
        if in_flight != self.in_flight || in_flight > self.limit {
            return Err(format!(
                "{} handshakes counted in flight, {in_flight} relays hold a slot, limit {}",
                self.in_flight, self.limit
            ));
        }
        if waiting != self.line.len() {
            return Err(format!(
                "{} places in line for {waiting} waiting relays",
                self.line.len()
            ));
        }
        Ok(())
    }
}
