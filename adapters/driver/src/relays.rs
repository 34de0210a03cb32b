//! [`Relays`]: every relay a driver holds, by key: its socket ([`Wire`]), the waker its
//! socket is polled with, its NIP-11 document fetch and its AUTH answer being signed.
//!
//! A relay driver holds one relay (key [`Solo`]), a pool driver one per
//! [`RelayId`]. Both poll only the relays whose waker fired or that were handed output
//! ([`Ready`]), so a pool of 1 000 quiet relays costs nothing per event of a busy one.
//!
//! Nothing here decides anything about the protocol: the core says when to open, send,
//! ping, close and fetch ([`Transmit`]); the signer's answer and the fetched document go
//! back to the core, which decides whether they still apply.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tether_core::link::{Epoch, SocketError};
use tether_core::nostr::{ChallengeId, Transmit};
use tether_core::pool::RelayId;
use tungstenite::Message;

use crate::ready::{Key, Ready};
use crate::relay_info::InfoFetchError;
use crate::runtime::{Addresses, BoxFuture, WsConnect};
use crate::signer::SignerError;
use crate::wire::{Wire, WireInput};

/// The one relay of a relay driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Solo;

impl Key for Solo {
    fn index(self) -> usize {
        0
    }
}

impl Key for RelayId {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// A signer's answer in flight, with the challenge it answers.
pub(crate) type Signing = (ChallengeId, BoxFuture<Result<String, SignerError>>);

/// A NIP-11 document fetch in flight.
pub(crate) type InfoFetch = BoxFuture<Result<Vec<u8>, InfoFetchError>>;

/// A finished side task of one relay.
pub(crate) enum Finished<K> {
    /// The signer answered the challenge `challenge`.
    Signed(K, ChallengeId, Result<String, SignerError>),
    /// The document fetch ended.
    Fetched(K, Result<Vec<u8>, InfoFetchError>),
}

/// The relays of one driver.
pub(crate) struct Relays<K: Key> {
    ws: Arc<dyn WsConnect>,
    max_frame: usize,
    relays: BTreeMap<K, Relay>,
    /// Relays whose socket woke (their wakers queue them here, from any thread).
    ready: Ready<K>,
    /// Relays the driver itself queued (handed output, progressed, reads resumed): kept
    /// apart from `ready` so the busy path takes no lock. `queued[key.index()]` says which
    /// are in it.
    local: Vec<K>,
    queued: Vec<bool>,
    /// The relays taken from `ready` for this pass (kept to reuse its allocation).
    batch: Vec<K>,
    /// Relays that had something to read while reading was paused: the core was told their
    /// reads are paused, and they are polled again when reading resumes.
    deferred: BTreeSet<K>,
    /// Relays whose writes are so far behind that no command is taken.
    backed_up: BTreeSet<K>,
    /// AUTH answers being signed (the newest challenge of each relay).
    signing: BTreeMap<K, Signing>,
    /// NIP-11 fetches in flight: only these are polled.
    fetches: BTreeMap<K, InfoFetch>,
    /// The URL of each relay removed, until its key is held again: the machine may still
    /// have events queued about it, which are named by it ([`Relays::name`]).
    removed: BTreeMap<K, Arc<str>>,
}

struct Relay {
    url: Arc<str>,
    /// The addresses its socket may be opened to.
    addresses: Addresses,
    wire: Wire,
    /// Its socket is polled with this: waking it queues the relay in `ready`.
    waker: Waker,
}

impl<K: Key> Relays<K> {
    /// No relays yet; sockets open through `ws` and refuse frames over `max_frame`.
    pub(crate) fn new(ws: Arc<dyn WsConnect>, max_frame: usize) -> Self {
        Relays {
            ws,
            max_frame,
            relays: BTreeMap::new(),
            ready: Ready::default(),
            local: Vec::new(),
            queued: Vec::new(),
            batch: Vec::new(),
            deferred: BTreeSet::new(),
            backed_up: BTreeSet::new(),
            signing: BTreeMap::new(),
            fetches: BTreeMap::new(),
            removed: BTreeMap::new(),
        }
    }

    /// Hold `key`'s socket to `url` at the `addresses` allowed (opened when the core says
    /// so).
    pub(crate) fn add(&mut self, key: K, url: Arc<str>, addresses: Addresses) {
        let waker = self.ready.waker(key);
        self.removed.remove(&key);
        self.relays.insert(
            key,
            Relay {
                url,
                addresses,
                wire: Wire::default(),
                waker,
            },
        );
    }

    /// Let `key` dial `addresses` from now on (a relay routing opened that the application
    /// adds too becomes the application's); its socket stays as it is.
    pub(crate) fn allow(&mut self, key: K, addresses: Addresses) {
        if let Some(relay) = self.relays.get_mut(&key) {
            relay.addresses = addresses;
        }
    }

    /// Drop `key`: its socket gets one attempt at a close handshake; its side tasks stop.
    pub(crate) fn remove(&mut self, key: K) {
        if let Some(mut relay) = self.relays.remove(&key) {
            relay.wire.close();
            relay.wire.shut_down();
            self.removed.insert(key, relay.url);
        }
        self.deferred.remove(&key);
        self.backed_up.remove(&key);
        self.signing.remove(&key);
        self.fetches.remove(&key);
    }

    /// `key`'s URL, if it is held.
    pub(crate) fn url(&self, key: K) -> Option<&Arc<str>> {
        self.relays.get(&key).map(|r| &r.url)
    }

    /// The URL that names an event about `key`: the one it is held at, or for a relay
    /// removed since, the one it was held at (its last events come after its removal).
    pub(crate) fn name(&self, key: K) -> Option<&Arc<str>> {
        self.url(key).or_else(|| self.removed.get(&key))
    }

    /// Carry out a socket transmit of the core's for `key` ([`Transmit::FetchInfo`] is the
    /// caller's: it needs the runtime). Returns `false` for a relay no longer held.
    pub(crate) fn transmit(&mut self, key: K, transmit: Transmit) -> bool {
        let Some(relay) = self.relays.get_mut(&key) else {
            return false;
        };
        match transmit {
            Transmit::Open { epoch, .. } => {
                relay.wire.open(
                    &*self.ws,
                    &relay.url,
                    self.max_frame,
                    relay.addresses,
                    epoch,
                );
            }
            Transmit::Send { text, .. } => relay.wire.send(Message::text(text)),
            Transmit::Ping => relay.wire.send(Message::Ping(Default::default())),
            Transmit::Close { .. } => relay.wire.close(),
            Transmit::FetchInfo => {}
        }
        if relay.wire.backed_up() {
            self.backed_up.insert(key);
        }
        // Its socket has work (a connect, a write): poll it this pass.
        self.queue(key);
        true
    }

    /// Start signing `key`'s challenge `id`, replacing an answer still being signed for an
    /// older one (the core would refuse that answer anyway).
    pub(crate) fn sign(
        &mut self,
        key: K,
        id: ChallengeId,
        future: BoxFuture<Result<String, SignerError>>,
    ) {
        if self.relays.contains_key(&key) {
            self.signing.insert(key, (id, future));
        }
    }

    /// Start fetching `key`'s document unless a fetch is in flight.
    pub(crate) fn fetch(&mut self, key: K, future: impl FnOnce(&str) -> InfoFetch) {
        let Some(relay) = self.relays.get(&key) else {
            return;
        };
        if let std::collections::btree_map::Entry::Vacant(slot) = self.fetches.entry(key) {
            slot.insert(future(&relay.url));
        }
    }

    /// Whether some relay's writes are so far behind that no command should be taken.
    pub(crate) fn backed_up(&self) -> bool {
        !self.backed_up.is_empty()
    }

    /// Frames waiting to be written, over every relay.
    pub(crate) fn outgoing_len(&self) -> usize {
        self.relays.values().map(|r| r.wire.outgoing_len()).sum()
    }

    /// Signer answers and document fetches that finished, into `done`.
    pub(crate) fn poll_side_tasks(&mut self, cx: &mut Context<'_>, done: &mut Vec<Finished<K>>) {
        // The common case, checked first: a wake of a busy relay costs no map walk.
        if self.signing.is_empty() && self.fetches.is_empty() {
            return;
        }
        self.signing.retain(|&key, (challenge, future)| {
            let Poll::Ready(result) = future.as_mut().poll(cx) else {
                return true;
            };
            done.push(Finished::Signed(key, *challenge, result));
            false
        });
        self.fetches.retain(|&key, future| {
            let Poll::Ready(result) = future.as_mut().poll(cx) else {
                return true;
            };
            done.push(Finished::Fetched(key, result));
            false
        });
    }

    /// The sockets that woke, each with its own waker: one that is slow or dead holds up no
    /// other, and the quiet ones are not polled at all. Every socket input goes to `feed`;
    /// with `read` false nothing is read, and `paused` hears each relay that had something
    /// to do meanwhile (once, until [`Relays::resume_reading`]). Returns whether any socket
    /// made progress.
    pub(crate) fn poll_sockets(
        &mut self,
        cx: &mut Context<'_>,
        read: bool,
        feed: &mut dyn FnMut(K, Epoch, WireInput) -> Result<(), SocketError>,
        paused: &mut dyn FnMut(K),
    ) -> bool {
        // Registered before taking the batch: a socket waking in between wakes the driver.
        self.ready.register(cx.waker());
        let mut batch = std::mem::take(&mut self.batch);
        self.take_batch(&mut batch);
        let mut worked = false;
        for &key in &batch {
            let Some(relay) = self.relays.get_mut(&key) else {
                continue;
            };
            let mut fed = Ok(());
            let mut relay_cx = Context::from_waker(&relay.waker);
            let progressed = relay.wire.poll(&mut relay_cx, read, &mut |epoch, input| {
                fed = fed.and(feed(key, epoch, input));
            });
            if let Err(error) = fed {
                // Input is tagged only with the epoch the core handed out last, after its
                // open: an error is this driver's bug, not the peer's doing.
                tracing::warn!(%error, url = %relay.url, "driver fed the core out of order");
                debug_assert!(false, "driver misuse: {error}");
            }
            if relay.wire.backed_up() {
                self.backed_up.insert(key);
            } else {
                self.backed_up.remove(&key);
            }
            if !read && self.deferred.insert(key) {
                paused(key);
            }
            if progressed {
                // It may have more ready than one pass took: its waker is not armed.
                self.queue(key);
                worked = true;
            }
        }
        self.batch = batch;
        worked
    }

    /// Reading resumed: the relays that had something to read while it was paused are
    /// handed to `resumed` and polled again. Only those: a relay whose socket stayed quiet
    /// missed nothing.
    pub(crate) fn resume_reading(&mut self, resumed: &mut dyn FnMut(K)) {
        for key in std::mem::take(&mut self.deferred) {
            resumed(key);
            self.queue(key);
        }
    }

    /// Poll `key`'s socket in the next pass.
    fn queue(&mut self, key: K) {
        let index = key.index();
        if self.queued.len() <= index {
            self.queued.resize(index + 1, false);
        }
        if !self.queued[index] {
            self.queued[index] = true;
            self.local.push(key);
        }
    }

    /// The relays to poll this pass, each once: those the driver queued, then those whose
    /// waker fired.
    fn take_batch(&mut self, batch: &mut Vec<K>) {
        batch.clear();
        batch.append(&mut self.local);
        let queued = &self.queued;
        self.ready.take_into(batch, |key| {
            queued.get(key.index()).copied().unwrap_or(false)
        });
        for key in batch.iter() {
            if let Some(flag) = self.queued.get_mut(key.index()) {
                *flag = false;
            }
        }
    }

    /// Best effort at shutdown: each socket gets one attempt at a close handshake.
    pub(crate) fn shut_down(&mut self) {
        for relay in self.relays.values_mut() {
            relay.wire.shut_down();
        }
    }

    /// How many relays are held.
    pub(crate) fn len(&self) -> usize {
        self.relays.len()
    }
}
