//! Verification off the socket task: a [`Verify`] implementation shared by a bounded pool of
//! worker threads. The core pool decides what is verified and when it is delivered
//! ([`PoolConfig::verify`](tether_core::pool::PoolConfig::verify)); this only runs the checks.
//!
//! Threads rather than the runtime's blocking pool: a Schnorr check is ~50 µs of pure CPU,
//! the same on every runtime, and a fixed set of threads sized to the machine is what bounds
//! it. The driver hands out at most [`Workers::capacity`] checks at a time; the rest wait in
//! the core pool's bounded queue while the driver stops reading sockets.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_channel::mpsc;
use futures_core::Stream;
use tether_core::pool::{VerifyRequest, VerifyTicket};

/// Checks one event's JSON; `Err` says why it is not genuine. Called from worker threads.
pub trait Verify: Send + Sync + 'static {
    /// The verdict on one event (the object a relay sends inside `["EVENT", sub, ...]`).
    ///
    /// # Errors
    /// Why the event is not genuine: it is dropped and counted against its relay.
    fn verify(&self, raw: &str) -> Result<(), String>;
}

/// libsecp256k1's check of the id and the Schnorr signature (feature `verify`).
#[cfg(feature = "verify")]
pub use tether_verify::Verifier;

#[cfg(feature = "verify")]
impl Verify for tether_verify::Verifier {
    fn verify(&self, raw: &str) -> Result<(), String> {
        tether_verify::Verifier::verify(self, raw).map_err(|e| e.to_string())
    }
}

/// Checks handed to each worker before the driver waits for verdicts.
const PER_WORKER: usize = 32;

type Verdict = (VerifyTicket, Result<(), String>);

/// The worker threads and the two channels to them. Dropping it stops the threads once
/// they finish the check in hand.
pub(crate) struct Workers {
    jobs: SyncSender<VerifyRequest>,
    verdicts: mpsc::UnboundedReceiver<Verdict>,
    in_flight: usize,
    capacity: usize,
}

impl Workers {
    /// `threads` workers (0: one per core the machine has).
    pub(crate) fn start(verifier: Arc<dyn Verify>, threads: usize) -> Workers {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        let capacity = threads * PER_WORKER;
        let (jobs, rx) = sync_channel(capacity);
        let rx = Arc::new(Mutex::new(rx));
        let (tx, verdicts) = mpsc::unbounded();
        for n in 0..threads {
            let (verifier, rx, tx) = (Arc::clone(&verifier), Arc::clone(&rx), tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("tether-verify-{n}"))
                .spawn(move || work(&*verifier, &rx, &tx));
            if let Err(error) = spawned {
                tracing::warn!(%error, "could not start a verification worker");
            }
        }
        Workers {
            jobs,
            verdicts,
            in_flight: 0,
            capacity,
        }
    }

    /// Checks the workers hold or are running; at most this many are handed out at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether another check can be handed out now.
    pub(crate) fn has_room(&self) -> bool {
        self.in_flight < self.capacity
    }

    /// Hand out one check; only while [`Workers::has_room`], so it never blocks. A check
    /// that cannot be handed out (no worker is left) comes back as a failed verdict.
    pub(crate) fn submit(&mut self, request: VerifyRequest) -> Option<Verdict> {
        match self.jobs.try_send(request) {
            Ok(()) => {
                self.in_flight += 1;
                None
            }
            Err(TrySendError::Full(r) | TrySendError::Disconnected(r)) => {
                Some((r.ticket, Err("no verification worker".to_owned())))
            }
        }
    }

    /// The next verdict, if one is in.
    pub(crate) fn poll_verdict(&mut self, cx: &mut Context<'_>) -> Poll<Option<Verdict>> {
        if self.in_flight == 0 {
            return Poll::Ready(None);
        }
        match std::pin::Pin::new(&mut self.verdicts).poll_next(cx) {
            Poll::Ready(Some(verdict)) => {
                self.in_flight -= 1;
                Poll::Ready(Some(verdict))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

fn work(
    verifier: &dyn Verify,
    jobs: &Mutex<Receiver<VerifyRequest>>,
    verdicts: &mpsc::UnboundedSender<Verdict>,
) {
    loop {
        // Hold the lock only to take a job, never while checking it.
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(request) = job else {
            return;
        };
        let verdict = verifier.verify(&request.raw);
        if verdicts.unbounded_send((request.ticket, verdict)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use tether_core::nostr::message::EventId;
    use tether_core::pool::RelayId;

    /// Busy for `ms` of CPU, like a signature check.
    struct Busy(u64);

    impl Verify for Busy {
        fn verify(&self, raw: &str) -> Result<(), String> {
            let until = Instant::now() + Duration::from_millis(self.0);
            let mut x = 0u64;
            while Instant::now() < until {
                x = x.wrapping_add(1);
            }
            std::hint::black_box(x);
            if raw == "bad" {
                Err("bad".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn workers_check_in_parallel_and_answer_every_ticket() {
        let threads = 2;
        let mut workers = Workers::start(Arc::new(Busy(20)), threads);
        let started = Instant::now();
        for n in 0..8u64 {
            let request = VerifyRequest {
                ticket: VerifyTicket(n),
                relay: RelayId(0),
                id: EventId([0; 32]),
                raw: if n == 3 { "bad".into() } else { "ok".into() },
            };
            assert!(workers.has_room());
            assert_eq!(workers.submit(request), None);
        }
        let mut verdicts = Vec::new();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        while verdicts.len() < 8 {
            match workers.poll_verdict(&mut cx) {
                Poll::Ready(Some(v)) => verdicts.push(v),
                Poll::Ready(None) => panic!("nothing in flight with {} answered", verdicts.len()),
                Poll::Pending => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        let elapsed = started.elapsed();
        verdicts.sort_by_key(|(t, _)| *t);
        let failed: Vec<u64> = verdicts
            .iter()
            .filter(|(_, v)| v.is_err())
            .map(|(t, _)| t.0)
            .collect();
        assert_eq!(failed, [3]);
        // 8 checks of 20 ms on 2 workers: ~80 ms in parallel, 160 ms one at a time.
        assert!(elapsed < Duration::from_millis(140), "{elapsed:?}");
    }
}
