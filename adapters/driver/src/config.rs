//! Adapter configuration: the core's configuration plus channel sizes, seed, signer.

use std::fmt;
use std::sync::Arc;

use tether_core::nostr::RelayConfig;
use tether_core::sse::{Attempt, AttemptInfo, Request};
use tether_core::SseConfig;

use crate::relay_info::InfoPolicy;
use crate::signer::Signer;
use crate::verify::Verify;

/// Configuration of a relay client or pool.
///
/// Start from [`Config::default`] and set the fields you need (`let mut config =
/// Config::default(); config.seed = Some(7);`): fields are added over time, so the struct
/// cannot be built with a literal outside this crate.
#[derive(Clone)]
#[non_exhaustive]
pub struct Config {
    /// The session's rules (retries, gate, replay, timeouts, bounds).
    pub relay: RelayConfig,
    /// Seed for the session's jitter; `None` draws one from the OS so a fleet of clients
    /// decorrelates. Set it for reproducible runs.
    pub seed: Option<u64>,
    /// Events buffered per subscription before the driver stops reading the socket (256).
    pub subscription_capacity: usize,
    /// Session events buffered for [`RelayHandle::events`](crate::RelayHandle::events) (64).
    pub session_capacity: usize,
    /// Commands from handles buffered before callers wait (64).
    pub command_capacity: usize,
    /// Units of work (inputs fed to the core) per wake before the driver yields (64).
    pub work_budget: usize,
    /// Answers NIP-42 challenges; `None` leaves them to the application. With one, the
    /// session knows it can authenticate ([`RelayConfig::authenticates`]).
    pub signer: Option<Arc<dyn Signer>>,
    /// Checks every event before a pool delivers it (once per id and subscription, after
    /// dedup, on worker threads); `None` delivers as received. The relay client ignores it.
    pub verifier: Option<Arc<dyn Verify>>,
    /// Worker threads for the verifier (0: one per core).
    pub verify_workers: usize,
    /// Fetching the relay's NIP-11 document (when the runtime gave the driver an HTTP
    /// client): bounds and refresh.
    pub relay_info: InfoPolicy,
    /// The certificate authorities a wss:// relay's certificate may chain to (Mozilla's
    /// webpki roots by default; add a private CA's PEM, or the platform's store). Every
    /// socket of a client or pool shares one TLS configuration built from it.
    pub roots: crate::http_options::Roots,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            relay: RelayConfig::default(),
            seed: None,
            subscription_capacity: 256,
            session_capacity: 64,
            command_capacity: 64,
            work_budget: 64,
            signer: None,
            verifier: None,
            verify_workers: 0,
            relay_info: InfoPolicy::default(),
            roots: crate::http_options::Roots::default(),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("relay", &self.relay)
            .field("seed", &self.seed)
            .field("subscription_capacity", &self.subscription_capacity)
            .field("session_capacity", &self.session_capacity)
            .field("command_capacity", &self.command_capacity)
            .field("work_budget", &self.work_budget)
            .field("signer", &self.signer.is_some())
            .field("verifier", &self.verifier.is_some())
            .field("verify_workers", &self.verify_workers)
            .field("relay_info", &self.relay_info)
            .field("roots", &self.roots)
            .finish()
    }
}

/// Configuration of an SSE event source. Start from [`EventSourceConfig::default`], as for
/// [`Config`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct EventSourceConfig {
    /// The session's rules (backoff, `Retry-After` cap, idle watchdog, bounds).
    pub sse: SseConfig,
    /// Seed for the session's jitter; `None` draws one from the OS.
    pub seed: Option<u64>,
    /// What each attempt sends beyond the request (a fresh `Authorization`, a new JSON-RPC
    /// id, MCP's mirror headers): asked before every request the core decided may go.
    pub per_attempt: Option<PerAttempt>,
    /// The proxy and the trusted roots of the runtime's own HTTP client (`connect`,
    /// `connect_request`, `restore`); a client brought with `open` has its own.
    pub http: crate::http_options::HttpOptions,
}

/// The application's answer to "what does this attempt send": headers that replace the
/// request's headers of the same name, and for an attempt of the application's request (the
/// first, a retry, a re-issue; not a `Last-Event-ID` resume) a body in place of its body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptParts {
    /// Headers for this attempt, each replacing the request's header of that name.
    pub headers: Vec<(String, String)>,
    /// The body for this attempt; `None` keeps the request's.
    pub body: Option<Vec<u8>>,
}

impl AttemptParts {
    /// Parts with these headers and the request's body.
    #[must_use]
    pub fn headers(headers: Vec<(String, String)>) -> Self {
        AttemptParts {
            headers,
            body: None,
        }
    }

    /// Set the body for this attempt.
    #[must_use]
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// `request` as this attempt sends it. `attempt` and the method decide whether the body
    /// may change: a resume request has none, and neither has a GET (a POST a redirect
    /// turned into one).
    #[must_use]
    pub fn apply(&self, request: &Request, attempt: Attempt) -> Request {
        let mut built = request.clone();
        for (name, value) in &self.headers {
            built.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            built.headers.push((name.clone(), value.clone()));
        }
        let bodiless =
            attempt == Attempt::Resume || matches!(request.method.as_str(), "GET" | "HEAD");
        if let (Some(body), false) = (&self.body, bodiless) {
            built.body.clone_from(body);
        }
        built
    }
}

/// The application's per-attempt builder ([`EventSourceConfig::per_attempt`]). It runs on
/// the driver's task, before each request: keep it quick (read a token you keep fresh
/// elsewhere) or bounded.
#[derive(Clone)]
pub struct PerAttempt(Arc<PerAttemptFn>);

/// What a [`PerAttempt`] runs: the parts of the attempt `info` describes, or why it could not
/// say (a local failure: the stream fails with `FailReason::InvalidRequest`, nothing is
/// retried).
type PerAttemptFn = dyn Fn(&AttemptInfo) -> Result<AttemptParts, String> + Send + Sync;

impl PerAttempt {
    /// A builder from `build`, called once per attempt with what the attempt is.
    pub fn new(build: impl Fn(&AttemptInfo) -> AttemptParts + Send + Sync + 'static) -> Self {
        PerAttempt(Arc::new(move |info: &AttemptInfo| Ok(build(info))))
    }

    /// A builder that can fail (a token source that is down, a command that hung).
    pub fn fallible(
        build: impl Fn(&AttemptInfo) -> Result<AttemptParts, String> + Send + Sync + 'static,
    ) -> Self {
        PerAttempt(Arc::new(build))
    }

    /// The parts for the attempt `info` describes.
    ///
    /// # Errors
    /// The builder's own description of why it could not build them.
    pub fn parts(&self, info: &AttemptInfo) -> Result<AttemptParts, String> {
        (self.0)(info)
    }
}

impl std::fmt::Debug for PerAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PerAttempt(..)")
    }
}

/// `seed`, or 64 bits of OS randomness when it is `None` (or, if the OS has none to give, a
/// mix of the time and the process id: jitter only needs to differ between clients).
pub fn seed_or_random(seed: Option<u64>) -> u64 {
    if let Some(seed) = seed {
        return seed;
    }
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32)
}
