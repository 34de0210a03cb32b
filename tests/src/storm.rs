//! A fleet reconnect storm: `n` clients lose their server at once; it is down for `down`,
//! then accepts at most `capacity` connections per second and refuses the rest, which back
//! off again. Each tether policy runs through the core's real [`Link`] (reconnect scheduling,
//! [`Backoff`](tether_core::Backoff), jitter, seeded per client); the peers' policies are
//! modelled from their documented schedules. Deterministic: the same seed gives the same
//! numbers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use tether_core::{BackoffPolicy, Instant, Jitter, Link, LinkAction, LinkConfig, Liveness, Rng};

/// How a client waits between attempts.
#[derive(Clone, Copy, Debug)]
pub enum Policy {
    /// Any core [`BackoffPolicy`], driven through a real [`Link`].
    Core(BackoffPolicy),
    /// rust-nostr's relay reconnect: 10 s more per attempt up to 60 s, plus or minus 3 s.
    LinearSteps {
        /// Added per attempt.
        step: Duration,
        /// Largest delay.
        cap: Duration,
        /// Uniform jitter either side.
        jitter: Duration,
    },
}

/// One policy under test, with the name used in tables and plots.
#[derive(Clone, Copy, Debug)]
pub struct Contender {
    /// Short name.
    pub name: &'static str,
    /// The policy.
    pub policy: Policy,
}

/// The default's shape (1-30 s, x2) with other jitter.
fn exp(jitter: Jitter) -> Policy {
    Policy::Core(BackoffPolicy {
        jitter,
        ..BackoffPolicy::reconnect()
    })
}

/// The candidates weighed when choosing the default's jitter (+-20% and +-50% are in
/// [`contenders`]): `storm --sweep`.
pub fn jitter_sweep() -> Vec<Contender> {
    [
        ("1-30 s, x2, +-30%", Jitter::Proportional(0.3)),
        ("1-30 s, x2, +-40%", Jitter::Proportional(0.4)),
        ("1-30 s, x2, +-60%", Jitter::Proportional(0.6)),
        ("equal jitter 1-30 s", Jitter::Equal),
    ]
    .into_iter()
    .map(|(name, jitter)| Contender {
        name,
        policy: exp(jitter),
    })
    .collect()
}

/// The policies compared by default.
pub fn contenders() -> Vec<Contender> {
    vec![
        Contender {
            name: "fixed 30 s (the analysis's original client)",
            policy: Policy::Core(BackoffPolicy {
                base: Duration::from_secs(30),
                factor: 1.0,
                cap: Duration::from_secs(30),
                max_attempts: None,
                jitter: Jitter::None,
            }),
        },
        Contender {
            name: "analysis: 1-30 s, x2, +-20%",
            policy: exp(Jitter::Proportional(0.2)),
        },
        Contender {
            name: "full jitter 1-30 s",
            policy: exp(Jitter::Full),
        },
        Contender {
            name: "decorrelated jitter 1-30 s",
            policy: exp(Jitter::Decorrelated),
        },
        Contender {
            name: "rust-nostr: +10 s steps to 60 s, +-3 s",
            policy: Policy::LinearSteps {
                step: Duration::from_secs(10),
                cap: Duration::from_secs(60),
                jitter: Duration::from_secs(3),
            },
        },
        Contender {
            name: "tether default: 1-30 s, x2, +-50%",
            policy: Policy::Core(BackoffPolicy::reconnect()),
        },
    ]
}

/// The storm's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Storm {
    /// Clients.
    pub clients: usize,
    /// How long the server is down.
    pub down: Duration,
    /// Connections the server accepts per second once back.
    pub capacity: usize,
    /// How long to simulate.
    pub horizon: Duration,
    /// Seed; each client derives its own from it and its index.
    pub seed: u64,
}

impl Default for Storm {
    fn default() -> Self {
        Storm {
            clients: 100_000,
            down: Duration::from_secs(60),
            capacity: 2_000,
            horizon: Duration::from_secs(600),
            seed: 1,
        }
    }
}

/// What one policy did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The policy's name.
    pub name: &'static str,
    /// Connection attempts started in each second of the run.
    pub attempts_per_sec: Vec<u64>,
    /// Peak of `attempts_per_sec` over the whole run (the outage's first seconds included).
    pub peak: u64,
    /// Peak of `attempts_per_sec` from the server's return: the herd the restarted server meets.
    pub peak_after_return: u64,
    /// All attempts.
    pub total: u64,
    /// Time from the server's return until 99% of clients are connected, if it happened.
    pub to_99: Option<Duration>,
}

impl Storm {
    /// The best any client-side policy with a 30 s cap can do: every client's attempt spread
    /// evenly over one 30 s cap window.
    pub fn uniform_ideal(&self) -> f64 {
        self.clients as f64 / 30.0
    }

    /// Run one policy.
    pub fn run(&self, c: &Contender) -> Outcome {
        let horizon_secs = self.horizon.as_secs() as usize;
        let mut per_sec = vec![0u64; horizon_secs + 1];
        let mut clients: Vec<Client> = (0..self.clients)
            .map(|i| {
                Client::new(
                    c.policy,
                    self.seed
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        .wrapping_add(i as u64),
                )
            })
            .collect();
        let mut queue: BinaryHeap<Reverse<(Instant, usize)>> =
            BinaryHeap::with_capacity(self.clients);
        // Everyone was connected; the server dies at t = 0 and every socket closes at once.
        for (i, client) in clients.iter_mut().enumerate() {
            if let Some(at) = client.lose(Instant::ZERO) {
                queue.push(Reverse((at, i)));
            }
        }
        let back = Instant::ZERO + self.down;
        let end = Instant::ZERO + self.horizon;
        let (mut connected, mut to_99) = (0usize, None);
        let mut accepted_in: (u64, usize) = (u64::MAX, 0);
        while let Some(Reverse((now, i))) = queue.pop() {
            if now > end {
                break;
            }
            let client = &mut clients[i];
            if !client.attempt(now) {
                if let Some(at) = client.next_wake() {
                    queue.push(Reverse((at, i)));
                }
                continue;
            }
            let sec = now.since_origin().as_secs();
            per_sec[sec as usize] += 1;
            if accepted_in.0 != sec {
                accepted_in = (sec, 0);
            }
            if now >= back && accepted_in.1 < self.capacity {
                accepted_in.1 += 1;
                client.open(now);
                connected += 1;
                if to_99.is_none() && connected * 100 >= self.clients * 99 {
                    to_99 = Some(now - back);
                }
                continue;
            }
            if let Some(at) = client.lose(now) {
                queue.push(Reverse((at, i)));
            }
        }
        Outcome {
            name: c.name,
            peak: per_sec.iter().copied().max().unwrap_or(0),
            peak_after_return: per_sec
                .iter()
                .skip(self.down.as_secs() as usize)
                .copied()
                .max()
                .unwrap_or(0),
            total: per_sec.iter().sum(),
            attempts_per_sec: per_sec,
            to_99,
        }
    }
}

impl Storm {
    /// A fleet whose network returns at the same instant (a cell tower or Wi-Fi outage):
    /// every client (tether's default policy, `network_jitter` = `jitter`) loses its socket
    /// at t = 0 with the device offline, so nothing is attempted and nothing charged; the
    /// network is back at `down` for all of them at once (`set_online(true)`); the server
    /// accepts `capacity` per second as in [`Storm::run`], and whoever is refused backs off
    /// from a reset backoff.
    pub fn network_return(&self, jitter: Duration) -> Outcome {
        let horizon_secs = self.horizon.as_secs() as usize;
        let mut per_sec = vec![0u64; horizon_secs + 1];
        let back = Instant::ZERO + self.down;
        let end = Instant::ZERO + self.horizon;
        let mut clients: Vec<(Link, Rng)> = (0..self.clients)
            .map(|i| {
                let config = LinkConfig {
                    liveness: Liveness::Off,
                    network_jitter: jitter,
                    ..LinkConfig::default()
                };
                let mut link = Link::new(config);
                let mut rng = Rng::new(
                    self.seed
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        .wrapping_add(i as u64),
                );
                link.connect(Instant::ZERO);
                link.on_open(Instant::ZERO);
                link.set_online(Instant::ZERO, false, &mut rng);
                link.on_close(Instant::ZERO, Duration::ZERO, &mut rng);
                (link, rng)
            })
            .collect();
        let mut queue: BinaryHeap<Reverse<(Instant, usize)>> =
            BinaryHeap::with_capacity(self.clients);
        for (i, (link, rng)) in clients.iter_mut().enumerate() {
            link.set_online(back, true, rng);
            if let Some(at) = link.poll_timeout() {
                queue.push(Reverse((at, i)));
            }
        }
        let (mut connected, mut to_99) = (0usize, None);
        let mut accepted_in: (u64, usize) = (u64::MAX, 0);
        while let Some(Reverse((now, i))) = queue.pop() {
            if now > end {
                break;
            }
            let (link, rng) = &mut clients[i];
            if !matches!(link.handle_timeout(now, rng), Some(LinkAction::Open(_))) {
                if let Some(at) = link.poll_timeout() {
                    queue.push(Reverse((at, i)));
                }
                continue;
            }
            let sec = now.since_origin().as_secs();
            per_sec[sec as usize] += 1;
            if accepted_in.0 != sec {
                accepted_in = (sec, 0);
            }
            if accepted_in.1 < self.capacity {
                accepted_in.1 += 1;
                link.on_open(now);
                connected += 1;
                if to_99.is_none() && connected * 100 >= self.clients * 99 {
                    to_99 = Some(now - back);
                }
                continue;
            }
            if let Some(at) = link.on_close(now, Duration::ZERO, rng) {
                queue.push(Reverse((at, i)));
            }
        }
        Outcome {
            name: "network return",
            peak: per_sec.iter().copied().max().unwrap_or(0),
            peak_after_return: per_sec
                .iter()
                .skip(self.down.as_secs() as usize)
                .copied()
                .max()
                .unwrap_or(0),
            total: per_sec.iter().sum(),
            attempts_per_sec: per_sec,
            to_99,
        }
    }
}

/// One client: a real core `Link`, or the linear schedule for the rust-nostr model.
struct Client {
    policy: Policy,
    link: Link,
    rng: Rng,
    attempts: u32,
    wake: Option<Instant>,
}

impl Client {
    fn new(policy: Policy, seed: u64) -> Self {
        let reconnect = match policy {
            Policy::Core(p) => p,
            Policy::LinearSteps { .. } => BackoffPolicy::reconnect(),
        };
        let config = LinkConfig {
            reconnect,
            liveness: Liveness::Off,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config);
        link.connect(Instant::ZERO);
        link.on_open(Instant::ZERO);
        Client {
            policy,
            link,
            rng: Rng::new(seed),
            attempts: 0,
            wake: None,
        }
    }

    /// The socket closed or was refused at `now`: when does the next attempt start?
    fn lose(&mut self, now: Instant) -> Option<Instant> {
        let at = match self.policy {
            Policy::Core(_) => self.link.on_close(now, Duration::ZERO, &mut self.rng),
            Policy::LinearSteps { step, cap, jitter } => {
                self.attempts += 1;
                let base = step.saturating_mul(self.attempts).min(cap).as_secs_f64();
                let j = jitter.as_secs_f64();
                let delay = (base + self.rng.range_f64(-j, j)).max(0.0);
                Some(now + Duration::from_secs_f64(delay))
            }
        };
        self.wake = at;
        at
    }

    /// The wake-up at `now`: returns whether it starts a connection attempt.
    fn attempt(&mut self, now: Instant) -> bool {
        match self.policy {
            Policy::Core(_) => matches!(
                self.link.handle_timeout(now, &mut self.rng),
                Some(LinkAction::Open(_))
            ),
            Policy::LinearSteps { .. } => true,
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        match self.policy {
            Policy::Core(_) => self.link.poll_timeout(),
            Policy::LinearSteps { .. } => self.wake,
        }
    }

    fn open(&mut self, now: Instant) {
        if let Policy::Core(_) = self.policy {
            self.link.on_open(now);
        }
    }
}
