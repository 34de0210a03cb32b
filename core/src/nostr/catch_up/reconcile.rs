//! One NIP-77 reconciliation, client side: the initial message from the remembered items,
//! each `NEG-MSG` answered until the relay's set and ours are known to differ by exactly the
//! ids to fetch. The range-based protocol itself is rust-nostr's `negentropy` crate (pure,
//! no I/O, deterministic); what is ours is the bounds a hostile relay meets.

use std::fmt;

use negentropy::{Id, Negentropy, NegentropyStorageVector};

use super::memory::Item;
use crate::nostr::message::EventId;

/// Bounds on one reconciliation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Largest message we send (bytes before hex; the crate splits ranges to keep to it).
    pub(crate) frame: u64,
    /// Messages from the relay answered at most.
    pub(crate) rounds: u32,
    /// Ids the relay may say we lack at most.
    pub(crate) need: usize,
}

/// Where a reconciliation stands after a relay message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Send this `NEG-MSG` (hex) and wait for the next answer.
    Send(String),
    /// Done: the relay holds these and we do not.
    Done(Vec<EventId>),
}

/// Why a reconciliation could not go on (the session falls back to a `since` catch-up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NegFailure {
    /// Not hex, or not a negentropy message the crate accepts.
    Malformed(String),
    /// More rounds than [`Limits::rounds`].
    TooManyRounds,
    /// More missing ids than [`Limits::need`].
    TooManyIds,
}

impl fmt::Display for NegFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NegFailure::Malformed(why) => write!(f, "malformed negentropy message: {why}"),
            NegFailure::TooManyRounds => f.write_str("too many negentropy rounds"),
            NegFailure::TooManyIds => f.write_str("too many missing ids"),
        }
    }
}

/// The client side of one NIP-77 session.
pub(crate) struct Reconciliation {
    neg: Negentropy<'static, NegentropyStorageVector>,
    limits: Limits,
    rounds: u32,
    need: Vec<EventId>,
}

impl fmt::Debug for Reconciliation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconciliation")
            .field("rounds", &self.rounds)
            .field("need", &self.need.len())
            .finish_non_exhaustive()
    }
}

impl Reconciliation {
    /// Start from `items` (what we have in the window): the session and its first message,
    /// hex-encoded for `NEG-OPEN`.
    pub(crate) fn open(
        items: impl Iterator<Item = Item>,
        limits: Limits,
    ) -> Result<(Reconciliation, String), NegFailure> {
        let mut storage = NegentropyStorageVector::new();
        for (created_at, id) in items {
            storage
                .insert(created_at, Id::from_byte_array(id.0))
                .map_err(malformed)?;
        }
        storage.seal().map_err(malformed)?;
        // The crate takes 0 (no limit) or at least 4096.
        let frame = if limits.frame == 0 {
            0
        } else {
            limits.frame.max(4096)
        };
        let mut neg = Negentropy::owned(storage, frame).map_err(malformed)?;
        let first = neg.initiate().map_err(malformed)?;
        let session = Reconciliation {
            neg,
            limits,
            rounds: 0,
            need: Vec::new(),
        };
        Ok((session, hex(&first)))
    }

    /// The relay's `NEG-MSG` (hex).
    pub(crate) fn on_message(&mut self, message: &str) -> Result<Step, NegFailure> {
        self.rounds += 1;
        if self.rounds > self.limits.rounds {
            return Err(NegFailure::TooManyRounds);
        }
        let bytes = unhex(message)
            .ok_or_else(|| NegFailure::Malformed("not an even-length hex string".into()))?;
        let mut have = Vec::new();
        let mut need = Vec::new();
        let next = self
            .neg
            .reconcile_with_ids(&bytes, &mut have, &mut need)
            .map_err(malformed)?;
        if self.need.len() + need.len() > self.limits.need {
            return Err(NegFailure::TooManyIds);
        }
        let start = self.need.len();
        self.need
            .extend(need.into_iter().map(|id| EventId(id.to_bytes())));
        // With its `std` feature (which nostr-relay-builder turns on in a shared build) the
        // crate collects a range's ids in a `HashSet`, in a random order: sorted, the same
        // inputs give the same fetches.
        crate::sort::sort(&mut self.need[start..]);
        Ok(match next {
            Some(message) => Step::Send(hex(&message)),
            None => Step::Done(std::mem::take(&mut self.need)),
        })
    }
}

fn malformed(e: negentropy::Error) -> NegFailure {
    NegFailure::Malformed(e.to_string())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    if bytes.len() % 2 != 0 {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> EventId {
        let mut bytes = [0u8; 32];
        bytes[24..].copy_from_slice(&n.to_be_bytes());
        EventId(bytes)
    }

    const LIMITS: Limits = Limits {
        frame: 60_000,
        rounds: 16,
        need: 1_000,
    };

    /// The relay side, as nostr-relay-builder runs it: the same crate, in responder mode.
    fn relay(items: &[Item]) -> Negentropy<'static, NegentropyStorageVector> {
        let mut storage = NegentropyStorageVector::new();
        for &(t, id) in items {
            storage.insert(t, Id::from_byte_array(id.0)).unwrap();
        }
        storage.seal().unwrap();
        Negentropy::owned(storage, 60_000).unwrap()
    }

    #[test]
    fn finds_exactly_what_the_relay_has_and_we_lack() {
        let relay_items: Vec<Item> = (1..=2_000).map(|n| (1_000 + n, id(n))).collect();
        let ours: Vec<Item> = relay_items
            .iter()
            .copied()
            .filter(|&(_, i)| ![id(7), id(1_500), id(2_000)].contains(&i))
            .chain([(5, id(9_999))])
            .collect();
        let mut server = relay(&relay_items);
        let (mut client, mut msg) = Reconciliation::open(ours.into_iter(), LIMITS).unwrap();
        let mut rounds = 0;
        let need = loop {
            let answer = server.reconcile(&unhex(&msg).unwrap()).unwrap();
            rounds += 1;
            match client.on_message(&hex(&answer)).unwrap() {
                Step::Send(next) => msg = next,
                Step::Done(need) => break need,
            }
        };
        let mut need = need;
        need.sort();
        assert_eq!(need, vec![id(7), id(1_500), id(2_000)]);
        assert!(rounds <= 3, "{rounds} rounds");
    }

    #[test]
    fn an_initial_message_is_what_nip_77_specifies() {
        // Worked by hand from the spec: protocol version 0x61; one range up to the infinity
        // bound (timestamp varint 0, id prefix length 0); mode IdList (2); 2 ids; the ids.
        let (_, first) =
            Reconciliation::open([(1, id(1)), (2, id(2))].into_iter(), LIMITS).unwrap();
        let expected = format!("6100000202{}{}", id(1), id(2));
        assert_eq!(first, expected);
    }

    #[test]
    fn hostile_messages_end_in_a_typed_failure() {
        let (mut c, _) = Reconciliation::open(std::iter::empty(), LIMITS).unwrap();
        assert!(matches!(c.on_message("zz"), Err(NegFailure::Malformed(_))));
        assert!(matches!(c.on_message("abc"), Err(NegFailure::Malformed(_))));
        assert!(matches!(c.on_message("62"), Err(NegFailure::Malformed(_))));
        let (mut c, _) = Reconciliation::open(
            std::iter::empty(),
            Limits {
                rounds: 1,
                ..LIMITS
            },
        )
        .unwrap();
        let _ = c.on_message("61");
        assert_eq!(c.on_message("61"), Err(NegFailure::TooManyRounds));
    }
}
