//! Verification off the socket task: a [`Verify`] implementation shared by a bounded pool of
//! worker threads. The core pool decides what is verified and when it is delivered
//! ([`PoolConfig::verify`](tether_core::pool::PoolConfig::verify)); this only runs the checks.
//!
//! Threads rather than the runtime's blocking pool: a Schnorr check is ~50 µs of pure CPU,
//! the same on every runtime, and a fixed set of threads sized to the machine is what bounds
//! it. Each worker has its own queue and the driver gives a check to the least loaded one;
//! a busy worker answers in batches, so the driver is woken once per batch, not per check.
//! The driver hands out at most 32 checks per worker at a time; the rest wait in the
//! core pool's bounded queue while the driver stops reading sockets.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
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

/// Verdicts a busy worker answers as one message (an idle one answers at once): a wake-up
/// of the driver per verdict cost a good part of what the checks themselves cost.
const BATCH: usize = 8;

type Verdict = (VerifyTicket, Result<(), String>);

/// The worker threads, a queue to each and one channel back. Dropping it stops the threads
/// once they finish the check in hand.
pub(crate) struct Workers {
    /// Each worker's queue and how many of its checks are unanswered.
    queues: Vec<(SyncSender<VerifyRequest>, usize)>,
    verdicts: mpsc::UnboundedReceiver<(usize, Vec<Verdict>)>,
    /// The batch being handed out, one verdict at a time.
    answered: std::vec::IntoIter<Verdict>,
    in_flight: usize,
    capacity: usize,
    /// When no thread could be started: check on the driver's own task rather than wait
    /// for workers that do not exist (which would stop every socket for good).
    inline: Option<Arc<dyn Verify>>,
}

impl Workers {
    /// `threads` workers (0: one per core the machine has).
    pub(crate) fn start(verifier: Arc<dyn Verify>, threads: usize) -> Workers {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        let (tx, verdicts) = mpsc::unbounded();
        let mut queues = Vec::with_capacity(threads);
        for n in 0..threads {
            let (jobs, rx) = sync_channel(PER_WORKER);
            let (verifier, tx) = (Arc::clone(&verifier), tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("tether-verify-{n}"))
                .spawn(move || work(n, &*verifier, &rx, &tx));
            match spawned {
                Ok(_) => queues.push((jobs, 0)),
                Err(error) => tracing::warn!(%error, "could not start a verification worker"),
            }
        }
        let capacity = queues.len() * PER_WORKER;
        let inline = queues.is_empty().then(|| {
            tracing::error!("no verification worker started: checking on the driver's task");
            Arc::clone(&verifier)
        });
        Workers {
            queues,
            verdicts,
            answered: Vec::new().into_iter(),
            in_flight: 0,
            capacity,
            inline,
        }
    }

    /// Checks the workers hold or are running; at most this many are handed out at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity.max(1)
    }

    /// Whether another check can be handed out now.
    pub(crate) fn has_room(&self) -> bool {
        self.inline.is_some() || self.in_flight < self.capacity
    }

    /// Hand out one check to the least loaded worker; only while [`Workers::has_room`], so
    /// it never blocks. A check that cannot be handed out (no worker is left) comes back as
    /// a failed verdict.
    pub(crate) fn submit(&mut self, request: VerifyRequest) -> Option<Verdict> {
        if let Some(verifier) = &self.inline {
            return Some((request.ticket, verifier.verify(&request.raw)));
        }
        let Some((jobs, load)) = self.queues.iter_mut().min_by_key(|(_, load)| *load) else {
            return Some((request.ticket, Err("no verification worker".to_owned())));
        };
        match jobs.try_send(request) {
            Ok(()) => {
                *load += 1;
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
        loop {
            if let Some(verdict) = self.answered.next() {
                self.in_flight -= 1;
                return Poll::Ready(Some(verdict));
            }
            if self.in_flight == 0 {
                return Poll::Ready(None);
            }
            match std::pin::Pin::new(&mut self.verdicts).poll_next(cx) {
                Poll::Ready(Some((worker, batch))) => {
                    if let Some((_, load)) = self.queues.get_mut(worker) {
                        *load = load.saturating_sub(batch.len());
                    }
                    self.answered = batch.into_iter();
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// One worker: check what its queue holds, answering in batches while it is busy and at
/// once before it waits.
fn work(
    me: usize,
    verifier: &dyn Verify,
    jobs: &Receiver<VerifyRequest>,
    verdicts: &mpsc::UnboundedSender<(usize, Vec<Verdict>)>,
) {
    let mut answers = Vec::with_capacity(BATCH);
    loop {
        let request = match jobs.try_recv() {
            Ok(request) => request,
            Err(TryRecvError::Disconnected) => return,
            Err(TryRecvError::Empty) => {
                if !answers.is_empty()
                    && verdicts
                        .unbounded_send((me, std::mem::take(&mut answers)))
                        .is_err()
                {
                    return;
                }
                let Ok(request) = jobs.recv() else {
                    return;
                };
                request
            }
        };
        answers.push((request.ticket, verifier.verify(&request.raw)));
        if answers.len() >= BATCH
            && verdicts
                .unbounded_send((me, std::mem::take(&mut answers)))
                .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    use tether_core::nostr::message::EventId;
    use tether_core::pool::RelayId;

    /// Holds each check until another one runs beside it (or 2 s pass), and remembers how
    /// many ran at once: parallel workers meet, one at a time never does.
    #[derive(Default)]
    struct Meeting {
        active: AtomicUsize,
        most: AtomicUsize,
    }

    impl Verify for Meeting {
        fn verify(&self, raw: &str) -> Result<(), String> {
            let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            let until = Instant::now() + Duration::from_secs(2);
            while self.most.load(Ordering::SeqCst) < 2 && Instant::now() < until {
                std::thread::yield_now();
            }
            self.active.fetch_sub(1, Ordering::SeqCst);
            if raw == "bad" {
                Err("bad".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn workers_check_in_parallel_and_answer_every_ticket() {
        let meeting = Arc::new(Meeting::default());
        let mut workers = Workers::start(Arc::clone(&meeting) as Arc<dyn Verify>, 2);
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
                Poll::Pending => std::thread::yield_now(),
            }
        }
        verdicts.sort_by_key(|(t, _)| *t);
        let tickets: Vec<u64> = verdicts.iter().map(|(t, _)| t.0).collect();
        assert_eq!(
            tickets,
            (0..8).collect::<Vec<_>>(),
            "each ticket answered once"
        );
        let failed: Vec<u64> = verdicts
            .iter()
            .filter(|(_, v)| v.is_err())
            .map(|(t, _)| t.0)
            .collect();
        assert_eq!(failed, [3]);
        assert_eq!(
            meeting.most.load(Ordering::SeqCst),
            2,
            "two checks ran at once"
        );
        assert_eq!(workers.in_flight, 0);
    }
}
