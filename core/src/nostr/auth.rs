//! NIP-42 on one connection: the latest challenge, the answer waiting for its OK, whether the
//! relay accepted one, and the hold that keeps REQs back until then on relays that declare
//! `auth_required`. Whether an answer still applies is decided here, the same for a relay
//! session alone and in a pool: only the latest challenge on the live socket can be answered,
//! and only the OK for the AUTH event sent is its answer.

use std::time::Duration;

use crate::nostr::error::Error;
use crate::nostr::message::EventId;
use crate::nostr::output::ChallengeId;
use crate::time::Instant;

/// NIP-42 state of a relay session.
#[derive(Debug, Default)]
pub(crate) struct Auth {
    /// The latest challenge on this socket.
    challenge: Option<(ChallengeId, String)>,
    /// The AUTH event sent in answer, until its OK.
    pending: Option<EventId>,
    /// The relay accepted our AUTH on this socket.
    authenticated: bool,
    /// REQs wait for authentication on this socket until then.
    hold: Option<Instant>,
    /// Challenges heard so far, across sockets: the next one's id.
    challenges: u64,
}

impl Auth {
    /// A new socket, or none: what the last one authenticated no longer counts. Challenge
    /// ids go on counting, so an answer to an old socket's challenge stays stale.
    pub(crate) fn on_socket(&mut self) {
        let challenges = self.challenges;
        *self = Auth {
            challenges,
            ..Auth::default()
        };
    }

    /// Keep REQs back until `at` (a relay that requires authentication, on a new socket).
    pub(crate) fn hold_until(&mut self, at: Instant) {
        self.hold = Some(at);
    }

    /// The relay challenged: the challenge's id. A hold waits `answer_within` for the
    /// answer.
    pub(crate) fn challenged(
        &mut self,
        now: Instant,
        challenge: String,
        answer_within: Duration,
    ) -> ChallengeId {
        self.challenges += 1;
        let id = ChallengeId(self.challenges);
        self.challenge = Some((id, challenge));
        if self.hold.is_some() {
            self.hold = Some(now.saturating_add(answer_within));
        }
        id
    }

    /// The application answers `challenge` with the AUTH event `event`.
    ///
    /// # Errors
    /// [`Error::StaleChallenge`] when a newer challenge or a new socket superseded it.
    pub(crate) fn answer(&mut self, challenge: ChallengeId, event: EventId) -> Result<(), Error> {
        if self.challenge.as_ref().map(|(id, _)| *id) != Some(challenge) {
            return Err(Error::StaleChallenge(challenge));
        }
        self.pending = Some(event);
        Ok(())
    }

    /// An OK for `event`: whether it answers our AUTH (then it is no longer waited for).
    pub(crate) fn is_answer(&mut self, event: EventId) -> bool {
        if self.pending != Some(event) {
            return false;
        }
        self.pending = None;
        true
    }

    /// The relay accepted our AUTH: REQs no longer wait.
    pub(crate) fn accepted(&mut self) {
        self.authenticated = true;
        self.hold = None;
    }

    /// Let the REQs held back go (the AUTH was refused); whether any hold was on.
    pub(crate) fn release(&mut self) -> bool {
        self.hold.take().is_some()
    }

    /// The hold ran out at `now` without a challenge or an answer in time: REQs go out and
    /// take their chances.
    pub(crate) fn expire(&mut self, now: Instant) {
        if self.hold.is_some_and(|at| at <= now) {
            self.hold = None;
        }
    }

    /// The application was away for `by`: the hold is that much later.
    pub(crate) fn postpone(&mut self, by: Duration) {
        if let Some(hold) = self.hold.as_mut() {
            *hold = hold.saturating_add(by);
        }
    }

    /// When the hold ends, while one is on.
    pub(crate) fn hold(&self) -> Option<Instant> {
        self.hold
    }

    /// Whether the relay accepted our AUTH on this socket.
    #[cfg(test)]
    pub(crate) fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// The latest challenge on this socket, with its id.
    #[cfg(test)]
    pub(crate) fn challenge(&self) -> Option<(ChallengeId, &str)> {
        self.challenge.as_ref().map(|(id, c)| (*id, c.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_origin(Duration::from_millis(ms))
    }

    fn event(byte: u8) -> EventId {
        EventId([byte; 32])
    }

    #[test]
    fn only_the_latest_challenge_on_the_live_socket_can_be_answered() {
        let mut auth = Auth::default();
        let first = auth.challenged(at(0), "a".into(), Duration::from_secs(10));
        let second = auth.challenged(at(1), "b".into(), Duration::from_secs(10));
        assert_eq!((first, second), (ChallengeId(1), ChallengeId(2)));
        assert_eq!(auth.challenge(), Some((ChallengeId(2), "b")));
        assert_eq!(
            auth.answer(first, event(1)),
            Err(Error::StaleChallenge(first))
        );
        auth.on_socket();
        assert_eq!(auth.challenge(), None);
        assert_eq!(
            auth.answer(second, event(1)),
            Err(Error::StaleChallenge(second))
        );
        let third = auth.challenged(at(2), "c".into(), Duration::from_secs(10));
        assert_eq!(third, ChallengeId(3));
        assert_eq!(auth.answer(third, event(3)), Ok(()));
        assert!(!auth.is_answer(event(4)));
        assert!(auth.is_answer(event(3)));
        assert!(!auth.is_answer(event(3)), "an answer is taken once");
    }

    #[test]
    fn a_hold_waits_for_the_answer_and_ends_at_acceptance_or_its_deadline() {
        let mut auth = Auth::default();
        auth.challenged(at(0), "x".into(), Duration::from_secs(10));
        assert_eq!(auth.hold(), None, "no hold, nothing to extend");
        auth.hold_until(at(2_000));
        auth.challenged(at(1_000), "y".into(), Duration::from_secs(10));
        assert_eq!(auth.hold(), Some(at(11_000)));
        auth.postpone(Duration::from_secs(5));
        assert_eq!(auth.hold(), Some(at(16_000)));
        auth.expire(at(15_999));
        assert_eq!(auth.hold(), Some(at(16_000)));
        auth.expire(at(16_000));
        assert_eq!(auth.hold(), None);
        assert!(!auth.release());
        auth.hold_until(at(20_000));
        auth.accepted();
        assert!(auth.is_authenticated());
        assert_eq!(auth.hold(), None);
        auth.on_socket();
        assert!(!auth.is_authenticated());
    }
}
