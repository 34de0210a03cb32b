//! The simulated network under every simulator: a clock, a queue of timed items and the one
//! loop that drives a machine through them, always to the earliest deadline of either the
//! queue or the machine (str0m's `netem`, firezone's `sim_net`).
//!
//! The network knows nothing of Nostr or SSE. A simulator says what an item is (a frame on
//! its way, a connection being accepted, a scripted action) and, as a [`Machine`], how it
//! handles one and what its own next deadline is; [`step`], [`run_for`] and
//! [`run_until_settled`] are the same for all of them. Items due at the same time come out
//! in the order they were queued, so one seed gives one transcript.
//!
//! Latency is one value per run, as every simulator has used it. Loss and outages stay with
//! the peer models (a socket dropped by script, a relay down, an SSE server's down periods
//! answered with 503s): each protocol shows them to its session differently.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::nostr::RelaySession;
use tether_core::pool::RelayPool;
use tether_core::sse::SseSession;
use tether_core::{Instant, Wake};

/// The clock, the one-way latency and everything in flight.
#[derive(Debug)]
pub(crate) struct Net<I> {
    /// One-way latency of an item [`Net::send`]s.
    pub(crate) latency: Duration,
    start: Instant,
    now: Instant,
    /// Breaks ties between items due at the same time: the one queued first comes out first.
    seq: u64,
    queue: BTreeMap<(Instant, u64), I>,
}

impl<I> Net<I> {
    /// An empty network whose clock starts at `start`.
    pub(crate) fn new(start: Instant, latency: Duration) -> Self {
        Net {
            latency,
            start,
            now: start,
            seq: 0,
            queue: BTreeMap::new(),
        }
    }

    /// The current simulated time.
    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// When the run started.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// Time since the start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Move the clock to `t` if that is later: time never goes backwards, even when a test
    /// hands a machine an input dated earlier than the last.
    pub(crate) fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    /// Queue `item` to arrive at `at`.
    pub(crate) fn push(&mut self, at: Instant, item: I) {
        self.seq += 1;
        self.queue.insert((at, self.seq), item);
    }

    /// Queue `item` to arrive one latency from now.
    pub(crate) fn send(&mut self, item: I) {
        self.push(self.now + self.latency, item);
    }

    /// When the earliest item arrives.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.queue.first_key_value().map(|(&(at, _), _)| at)
    }

    /// The earliest item, if it has arrived by now.
    fn pop_due(&mut self) -> Option<I> {
        if self.next_at()? > self.now {
            return None;
        }
        self.queue.pop_first().map(|(_, item)| item)
    }

    /// Everything in flight, earliest first.
    pub(crate) fn in_flight(&self) -> impl Iterator<Item = &I> + '_ {
        self.queue.values()
    }

    /// Drop every item in flight that `keep` refuses (a connection gone with what was on it).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&I) -> bool) {
        self.queue.retain(|_, item| keep(item));
    }
}

/// The sans-IO machine a simulator drives: its next deadline with what it is for, and the
/// timeout input. [`RelaySession`], [`RelayPool`] and [`SseSession`] all answer the same way.
pub(crate) trait UnderTest {
    /// The machine's `poll_wake`.
    fn poll_wake(&self) -> Option<(Instant, Wake)>;

    /// The machine's `handle_timeout`.
    fn handle_timeout(&mut self, now: Instant);
}

macro_rules! under_test {
    ($($machine:ty),*) => {$(
        impl UnderTest for $machine {
            fn poll_wake(&self) -> Option<(Instant, Wake)> {
                <$machine>::poll_wake(self)
            }

            fn handle_timeout(&mut self, now: Instant) {
                <$machine>::handle_timeout(self, now);
            }
        }
    )*};
}

under_test!(RelaySession, RelayPool, SseSession);

/// One simulator's machine on the network: the session under test, its peer's model and the
/// checks, which handle the items the network delivers and have deadlines of their own.
///
/// The session's timeouts are driven here, the same way for every simulator: when its
/// deadline is the earliest thing due, the transcript shows the reason (`due <wake>`), the
/// session handles the timeout, and the simulator drains it ([`Machine::after_timeout`]).
pub(crate) trait Machine {
    /// What travels on the network.
    type Item;

    /// The sans-IO machine under test.
    type Session: UnderTest;

    /// The network the machine is on.
    fn net(&mut self) -> &mut Net<Self::Item>;

    /// The machine under test; `None` while it is down (saved to a checkpoint, not yet
    /// restored), when it has no deadline.
    fn session(&self) -> Option<&Self::Session>;

    /// [`Machine::session`], to hand it an input.
    fn session_mut(&mut self) -> Option<&mut Self::Session>;

    /// The peer models' own next deadline (a server's heartbeat); none unless said.
    fn model_deadline(&self) -> Option<Instant> {
        None
    }

    /// The clock reached [`Machine::model_deadline`]: whether a model acted (then the
    /// session's deadline waits for the next step).
    fn on_model_timeout(&mut self) -> bool {
        false
    }

    /// `item` arrived (the clock reads its arrival time or later).
    fn on_item(&mut self, item: Self::Item);

    /// The session handled a timeout: drain its outputs and check what holds after one.
    fn after_timeout(&mut self);

    /// Write a transcript line.
    fn line(&mut self, who: &str, what: &str);

    /// Whether nothing the checks look at can change any more, so [`run_until_settled`] may
    /// stop. Never, unless the machine says otherwise.
    fn settled(&self) -> bool {
        false
    }

    /// After every step, whatever it did: checks that hold between steps.
    fn after_step(&mut self) {}
}

/// The earliest of the session's and the models' deadlines.
fn next_timeout<M: Machine>(m: &M) -> Option<Instant> {
    let session = m.session().and_then(UnderTest::poll_wake).map(|(at, _)| at);
    [session, m.model_deadline()].into_iter().flatten().min()
}

/// Nothing in flight has arrived by now and a deadline is due: a model's first, then the
/// session's.
fn on_timeout<M: Machine>(m: &mut M) {
    if m.on_model_timeout() {
        return;
    }
    let now = m.net().now();
    let due = m.session().and_then(UnderTest::poll_wake);
    let Some((_, why)) = due.filter(|&(at, _)| at <= now) else {
        return;
    };
    m.line("due", why.as_str());
    if let Some(session) = m.session_mut() {
        session.handle_timeout(now);
    }
    m.after_timeout();
}

/// A transcript line: `<ms since the start>ms <who> <what>`. A transcript that is not kept
/// whole keeps only a tail, enough for an invariant failure to show what led to it.
pub(crate) fn write_line(
    transcript: &mut String,
    elapsed: Duration,
    who: &str,
    what: &str,
    keep: bool,
) {
    let ms = elapsed.as_millis();
    let _ = writeln!(transcript, "{ms:>8}ms {who:<3} {what}");
    if !keep {
        keep_tail(transcript);
    }
}

/// Past 64 KiB, keep only the last 8 KiB of a transcript from a line start. A newline byte
/// never sits inside a multi-byte character, so the cut is a character boundary whatever
/// the frames held.
fn keep_tail(transcript: &mut String) {
    if transcript.len() <= 64 * 1024 {
        return;
    }
    let from = transcript.len() - 8 * 1024;
    let Some(newline) = transcript.as_bytes()[from..]
        .iter()
        .position(|&b| b == b'\n')
    else {
        transcript.clear();
        return;
    };
    transcript.drain(..from + newline + 1);
}

/// Handle the earliest thing due at or before `end`: an item that has arrived by then goes
/// before the machine's own deadline. Returns `false` when nothing is due.
pub(crate) fn step<M: Machine>(m: &mut M, end: Instant) -> bool {
    let next_item = m.net().next_at();
    let Some(t) = [next_item, next_timeout(m)].into_iter().flatten().min() else {
        return false;
    };
    if t > end {
        return false;
    }
    m.net().advance_to(t);
    // The clock may be ahead of `t` (a test gave an input dated later than what was in
    // flight): everything that has arrived by then is delivered first, in order.
    match m.net().pop_due() {
        Some(item) => m.on_item(item),
        None => on_timeout(m),
    }
    m.after_step();
    true
}

/// Run until `d` after the current time, handling everything due on the way.
pub(crate) fn run_for<M: Machine>(m: &mut M, d: Duration) {
    let end = m.net().now() + d;
    while step(m, end) {}
    m.net().advance_to(end);
}

/// Run until `d` after the current time or until the machine has settled
/// ([`Machine::settled`]), whichever comes first. Returns whether it settled.
pub(crate) fn run_until_settled<M: Machine>(m: &mut M, d: Duration) -> bool {
    let end = m.net().now() + d;
    loop {
        if m.settled() {
            return true;
        }
        if !step(m, end) {
            break;
        }
    }
    m.net().advance_to(end);
    false
}

/// The parts of a simulator's [`Machine`] implementation that only reach its fields: it has a
/// `net`, the session under test in `$session`, a `saved: Option<_>` checkpoint while it is
/// down, and a `transcript` kept whole or not by `keep_transcript` (and silenced by `quiet`
/// when the simulator can run quiet).
macro_rules! machine_fields {
    ($session:ident: $ty:ty $(, $quiet:ident)?) => {
        type Session = $ty;

        fn net(&mut self) -> &mut crate::net::Net<Self::Item> {
            &mut self.net
        }

        fn session(&self) -> Option<&$ty> {
            self.saved.is_none().then_some(&self.$session)
        }

        fn session_mut(&mut self) -> Option<&mut $ty> {
            self.saved.is_none().then_some(&mut self.$session)
        }

        fn line(&mut self, who: &str, what: &str) {
            $(if self.$quiet {
                return;
            })?
            let elapsed = self.net.elapsed();
            crate::net::write_line(&mut self.transcript, elapsed, who, what, self.keep_transcript);
        }
    };
}

pub(crate) use machine_fields;

/// The scripting, clock and run accessors of a simulator over a [`Net`], written once for
/// every simulator: it has a `net: Net<Item>` whose `Item::Script` carries `$action`, a
/// `transcript: String`, an `is_settled` and a [`Machine`] implementation.
macro_rules! simulator_accessors {
    ($sim:ident, $action:ty) => {
        impl $sim {
            /// One-way network latency (10 ms unless set).
            pub fn latency(&self) -> Duration {
                self.net.latency
            }

            /// Set the one-way network latency.
            pub fn set_latency(&mut self, latency: Duration) -> &mut Self {
                self.net.latency = latency;
                self
            }

            /// Schedule `action` at `at` after the start.
            pub fn at(&mut self, at: Duration, action: $action) -> &mut Self {
                self.net.push(self.net.start() + at, Item::Script(action));
                self
            }

            /// The current simulated time.
            pub fn now(&self) -> Instant {
                self.net.now()
            }

            /// Time since the start.
            pub fn elapsed(&self) -> Duration {
                self.net.elapsed()
            }

            /// The transcript so far.
            pub fn transcript(&self) -> &str {
                &self.transcript
            }

            /// Run until `d` after the current time, processing everything due on the way.
            pub fn run_for(&mut self, d: Duration) {
                crate::net::run_for(self, d);
            }

            /// Run until `d` after the current time, or until the run has settled
            #[doc = concat!("([`", stringify!($sim), "::is_settled`]):")]
            /// from then on only pings and pongs would happen, which change nothing the
            /// checks look at. Returns whether it settled before `d` ran out.
            pub fn run_until_settled(&mut self, d: Duration) -> bool {
                crate::net::run_until_settled(self, d)
            }

            /// Process the earliest thing due at or before `end`; `false` when nothing is.
            pub fn step(&mut self, end: Instant) -> bool {
                crate::net::step(self, end)
            }
        }
    };
}

pub(crate) use simulator_accessors;
