//! [`Machine`]: the one interface the driver loop drives, implemented by the core's
//! [`RelaySession`] (one relay, key [`Solo`]) and [`RelayPool`] (a relay per [`RelayId`]).
//!
//! Keyed transmits out, events out, one wake-up, and socket input in by key and epoch: the
//! driver loop (`drive.rs`) and the relays it holds (`relays.rs`) are written once against
//! this, and what differs per machine is only its commands and where its events go.

use std::time::Duration;

use tether_core::link::{Epoch, SocketError};
use tether_core::nostr::{Applied, ChallengeId, Event, RelayInfo, RelaySession, Transmit};
use tether_core::pool::{PoolError, PoolEvent, RelayId, RelayPool};
use tether_core::{Instant, Wake};

use crate::ready::Key;
use crate::relays::Solo;
use crate::runtime::Addresses;
use crate::wire::WireInput;

/// A sans-IO machine the driver loop can drive.
pub(crate) trait Machine: Send + 'static {
    /// How it names its relays.
    type Key: Key;
    /// What it tells the application.
    type Event: Send;

    /// The next socket instruction, with the relay it is for.
    fn poll_transmit(&mut self) -> Option<(Self::Key, Transmit)>;
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// When to wake it, and why.
    fn poll_wake(&self) -> Option<(Instant, Wake)>;
    /// Time passed.
    fn handle_timeout(&mut self, now: Instant);
    /// One socket input of `key`'s socket `epoch`.
    fn feed(
        &mut self,
        now: Instant,
        key: Self::Key,
        epoch: Epoch,
        input: WireInput,
    ) -> Result<(), SocketError>;
    /// The driver stopped or resumed reading `key`'s socket.
    fn handle_read_paused(&mut self, now: Instant, key: Self::Key, paused: bool);
    /// The signer's answer to `key`'s challenge; the machine decides whether it applies.
    fn authenticate(
        &mut self,
        now: Instant,
        key: Self::Key,
        challenge: ChallengeId,
        event: &str,
    ) -> Result<(), PoolError>;
    /// `key`'s NIP-11 document arrived; `None` for a relay no longer held.
    fn apply_relay_info(
        &mut self,
        now: Instant,
        key: Self::Key,
        info: &RelayInfo,
    ) -> Option<Applied>;
    /// The wall clock reads `unix_secs` at `now`.
    fn set_wall_clock(&mut self, now: Instant, unix_secs: u64);
    /// Ask for NIP-11 documents every `refresh` (`None`: never).
    fn set_info_refresh(&mut self, refresh: Option<Duration>);
    /// The relay and challenge of an AUTH challenge event, for the signer.
    fn challenge(event: &Self::Event) -> Option<(Self::Key, ChallengeId, &str)>;
    /// The addresses `key`'s socket may be opened to.
    fn addresses(&self, _key: Self::Key) -> Addresses {
        Addresses::Any
    }
}

impl Machine for RelaySession {
    type Key = Solo;
    type Event = Event;

    fn poll_transmit(&mut self) -> Option<(Solo, Transmit)> {
        RelaySession::poll_transmit(self).map(|t| (Solo, t))
    }

    fn poll_event(&mut self) -> Option<Event> {
        RelaySession::poll_event(self)
    }

    fn poll_wake(&self) -> Option<(Instant, Wake)> {
        RelaySession::poll_wake(self)
    }

    fn handle_timeout(&mut self, now: Instant) {
        RelaySession::handle_timeout(self, now);
    }

    fn feed(
        &mut self,
        now: Instant,
        _: Solo,
        epoch: Epoch,
        input: WireInput,
    ) -> Result<(), SocketError> {
        match input {
            WireInput::Open => self.handle_open(now, epoch),
            WireInput::Close(why) => self.handle_close(now, epoch, why),
            WireInput::Text(text) => self.handle_frame(now, epoch, &text),
            WireInput::Binary(len) => self.handle_binary(now, epoch, len),
            WireInput::Pong => self.handle_pong(now, epoch),
        }
    }

    fn handle_read_paused(&mut self, now: Instant, _: Solo, paused: bool) {
        RelaySession::handle_read_paused(self, now, paused);
    }

    fn authenticate(
        &mut self,
        now: Instant,
        _: Solo,
        challenge: ChallengeId,
        event: &str,
    ) -> Result<(), PoolError> {
        RelaySession::authenticate(self, now, challenge, event)
            .map(drop)
            .map_err(PoolError::Session)
    }

    fn apply_relay_info(&mut self, now: Instant, _: Solo, info: &RelayInfo) -> Option<Applied> {
        Some(RelaySession::apply_relay_info(self, now, info))
    }

    fn set_wall_clock(&mut self, now: Instant, unix_secs: u64) {
        RelaySession::set_wall_clock(self, now, unix_secs);
    }

    fn set_info_refresh(&mut self, refresh: Option<Duration>) {
        RelaySession::set_info_refresh(self, refresh);
    }

    fn challenge(event: &Event) -> Option<(Solo, ChallengeId, &str)> {
        let Event::AuthChallenge { challenge, id } = event else {
            return None;
        };
        Some((Solo, *id, challenge))
    }
}

impl Machine for RelayPool {
    type Key = RelayId;
    type Event = PoolEvent;

    fn poll_transmit(&mut self) -> Option<(RelayId, Transmit)> {
        RelayPool::poll_transmit(self)
    }

    fn poll_event(&mut self) -> Option<PoolEvent> {
        RelayPool::poll_event(self)
    }

    fn poll_wake(&self) -> Option<(Instant, Wake)> {
        RelayPool::poll_wake(self)
    }

    fn handle_timeout(&mut self, now: Instant) {
        RelayPool::handle_timeout(self, now);
    }

    fn feed(
        &mut self,
        now: Instant,
        relay: RelayId,
        epoch: Epoch,
        input: WireInput,
    ) -> Result<(), SocketError> {
        let result = match input {
            WireInput::Open => self.handle_open(now, relay, epoch),
            WireInput::Close(why) => self.handle_close(now, relay, epoch, why),
            WireInput::Text(text) => self.handle_frame(now, relay, epoch, &text),
            WireInput::Binary(len) => self.handle_binary(now, relay, epoch, len),
            WireInput::Pong => self.handle_pong(now, relay, epoch),
        };
        match result {
            Err(PoolError::Socket(e)) => Err(e),
            // A relay removed while its socket still had input in flight.
            Err(_) | Ok(()) => Ok(()),
        }
    }

    fn handle_read_paused(&mut self, now: Instant, relay: RelayId, paused: bool) {
        // A relay removed meanwhile has nothing to pause.
        let _ = RelayPool::handle_read_paused(self, now, relay, paused);
    }

    fn authenticate(
        &mut self,
        now: Instant,
        relay: RelayId,
        challenge: ChallengeId,
        event: &str,
    ) -> Result<(), PoolError> {
        RelayPool::authenticate(self, now, relay, challenge, event).map(drop)
    }

    fn apply_relay_info(
        &mut self,
        now: Instant,
        relay: RelayId,
        info: &RelayInfo,
    ) -> Option<Applied> {
        RelayPool::apply_relay_info(self, now, relay, info).ok()
    }

    fn set_wall_clock(&mut self, now: Instant, unix_secs: u64) {
        RelayPool::set_wall_clock(self, now, unix_secs);
    }

    fn set_info_refresh(&mut self, refresh: Option<Duration>) {
        RelayPool::set_info_refresh(self, refresh);
    }

    /// A relay routing opened from a stranger's relay list may not be dialed inside the
    /// network, whatever its name resolves to: the core says which ones may.
    fn addresses(&self, relay: RelayId) -> Addresses {
        if self.dials_public_only(relay) {
            Addresses::Public
        } else {
            Addresses::Any
        }
    }

    fn challenge(event: &PoolEvent) -> Option<(RelayId, ChallengeId, &str)> {
        let PoolEvent::Relay {
            relay,
            event: Event::AuthChallenge { challenge, id },
            ..
        } = event
        else {
            return None;
        };
        Some((*relay, *id, challenge))
    }
}
