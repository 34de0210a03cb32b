//! `tether req`: subscriptions on real relays, as JSON lines.
//!
//! One path for one relay and many: the relays are a pool, one relay a pool of one. What
//! differs is only how it is written ([`Form`]): one relay's lines carry no `relay` and no
//! `complete`, and its run ends with the socket's closing `disconnected`.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{select_all, StreamExt};
use tether_tokio::tether_core::checkpoint::CheckpointError;
use tether_tokio::tether_core::line::{Label, Labels, Limiter};
use tether_tokio::tether_core::nostr::RelayCheckpoint;
use tether_tokio::tether_core::pool::{Outcome, PoolCheckpoint, SubId};
use tether_tokio::tether_driver::verify::{Verifier, Verify};
use tether_tokio::tether_driver::{
    check_ws_url, normalize_relay_url, PoolEvents, PoolHandle, PoolRelayEvent,
};
use tether_tokio::{
    Config, Filter, Lifecycle, PoolConfig, PoolItem, PoolSubscription, RelayId, SessionEvent,
    Signer,
};

use crate::output::{monotonic, JsonLines};
use crate::signer::KeySigner;
use crate::state::{Loaded, StateFile};
use crate::{parse_secs, stop_requested, Failure};

/// The filter used when none is given.
const DEFAULT_FILTER: &str = r#"{"limit":10}"#;

/// `tether req <URL> [FILTER_JSON ...]`
///
/// Writes one JSON object per line to stdout: `connected`, `disconnected`
/// (`reconnect_in_ms`, `why`, `close_code`), `event` (`sub`, `event`), `eose`, `caught_up`
/// (`method`, `exact_since`, `recovered`), `closed` (`reason`, `attempts`),
/// `notice`, `auth` (`challenge`), and what the session does in between: `retrying`,
/// `queued`, `eose_timeout`, `rate_limited`, `subscription_limit`, `authenticated`,
/// `auth_failed`, `signer_failed`, `peer_error` (`kind`, `excerpt`, `suppressed`). `sub` is the
/// filter argument's index, from 0.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output, one JSON object per line on stdout: connected, disconnected \
    (reconnect_in_ms; why: requested, connection_refused, tls_rejected, handshake_failed, \
    connect_timeout, closed_by_peer with close_code, frame_too_large, pong_timeout, \
    network_error), event (sub, event), eose (sub), caught_up (sub, method: negentropy or \
    since, exact_since, recovered: after a gap, every event from exact_since on was \
    delivered once, recovered of them from the relay's store), closed (sub, reason, \
    attempts), notice \
    (message), auth (challenge), retrying (sub, in_ms, attempt), queued, eose_timeout, \
    rate_limited (window_ms), subscription_limit (max), authenticated, auth_failed, \
    signer_failed, peer_error (kind: too_large, json, not_array, missing_verb, unknown_verb, \
    arity, wrong_type, sub_id, event; excerpt: the first 64 characters of what was wrong; \
    at most 10 per second, the next one carrying `suppressed`: how many were left out). `sub` is the filter argument's index, from 0. Diagnostics go to stderr.\n\
    With several relays (`tether req wss://a wss://b FILTER...`) every line about one relay \
    carries `relay` (the URL as given); `event` lines appear once per event id per \
    subscription, `relay` being the first relay that delivered it; each subscription gets \
    one `complete` line (sub, outcome: complete or partial, missing: URLs of the relays \
    that did not answer EOSE by --eose-timeout), and `ended` (sub) once if no relay serves \
    it any more; --until-eose exits 0 after every subscription's `complete`. With \
    --verify, an event whose id or signature is wrong is dropped and written as `invalid` \
    (sub, relay, id, reason).\n\
    With --outbox there is no relay argument: each filter names people (`authors`, or one \
    `#p` key for an inbox), their relays come from their relay lists (NIP-65 kind 10002, \
    NIP-17 kind 10050) on the indexers, and each subscription gets a `routed` line whenever \
    its routes change (sub, relays: URLs asked, covered: [{author, relays}], fallback_only, \
    uncovered), beside the pool's lines.\n\
    Exit codes: 0 done (--until-eose, --duration, Ctrl-C), 1 failure, 2 bad arguments."
)]
pub(crate) struct Args {
    /// The relay, ws:// or wss://. More relays may follow (as in `nak req`): then the
    /// subscriptions span all of them through one pool, each event is written once, and
    /// every line about one relay carries `relay`. None with --outbox.
    #[arg(value_name = "URL")]
    url: Option<String>,
    /// One subscription per filter: a NIP-01 filter object as JSON [default: {"limit":10}].
    /// Leading ws:// or wss:// arguments are further relays.
    #[arg(value_name = "FILTER_JSON")]
    filters: Vec<String>,
    /// With several relays: report each subscription's `complete` line at the latest this
    /// long after it was made, naming the relays that had not answered EOSE [default: 10].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    eose_timeout: Option<Duration>,
    /// Exit 0 once every subscription has had EOSE or was closed by the relay.
    #[arg(long)]
    until_eose: bool,
    /// Seed for the session's jitter, for a reproducible run (default: from the OS).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Answer NIP-42 AUTH challenges by signing with this secret key (hex or nsec).
    #[arg(
        long,
        value_name = "HEX",
        env = "TETHER_SECRET_KEY",
        hide_env_values = true
    )]
    secret_key: Option<String>,
    /// Keep at most N REQs open (the relay's NIP-11 max_subscriptions); the rest queue.
    #[arg(long, value_name = "N")]
    max_subscriptions: Option<usize>,
    /// Check each event's id and Schnorr signature before writing it (once per event id,
    /// after dedup, on one worker thread per core). An event that fails is dropped and
    /// reported as an `invalid` line (sub, relay, id, reason). Runs through the pool, so
    /// even with one relay the lines carry `relay` and each subscription gets `complete`.
    #[arg(long)]
    verify: bool,
    /// Stop after this many seconds: CLOSE every subscription, close the socket, exit 0.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    duration: Option<Duration>,
    /// Keep the run's state in FILE and resume from it: what each subscription delivered,
    /// unacknowledged publishes and what the relays taught. If FILE exists the run goes on
    /// from it (a filter it remembers catches up on what reached the relays meanwhile, with
    /// nothing delivered twice; a new filter starts fresh; a remembered one no longer given
    /// is dropped). FILE is replaced atomically at least once a second while anything
    /// changes and at exit; after a kill, at most the last second's events come again. A
    /// FILE that is not a tether state file, is corrupt, is for other relays or from a newer
    /// tether: exit 2, FILE untouched.
    #[arg(long, value_name = "FILE")]
    state: Option<std::path::PathBuf>,
    /// Also trust the CA certificates in this PEM file for wss:// relays (repeatable).
    #[arg(long, value_name = "FILE")]
    cacert: Vec<std::path::PathBuf>,
    /// Also trust the platform's root certificates (the system store) for wss:// relays,
    /// beside the built-in webpki roots.
    #[arg(long)]
    native_roots: bool,
    /// Subscribe to people, not relays: route each filter's `authors` (or its one `#p` key,
    /// an inbox) to their relays, learned from their relay lists and from what relays
    /// deliver. Takes no relay URL.
    #[arg(long)]
    outbox: bool,
    /// With --outbox: fetch relay lists from this relay (repeatable; replaces the default
    /// indexers purplepag.es, user.kindpag.es, indexer.coracle.social).
    #[arg(long, value_name = "URL")]
    indexer: Vec<String>,
    /// With --outbox: most relays connected at once, the indexers included [default: 20].
    #[arg(long, value_name = "N")]
    max_relays: Option<usize>,
}

/// Run `tether req`.
///
/// # Errors
/// [`Failure::Usage`] for a bad URL, filter, key or state file; [`Failure::Failed`] when
/// the driver stops on its own.
pub(crate) async fn run(mut args: Args) -> Result<(), Failure> {
    if args.outbox {
        return run_outbox(args).await;
    }
    if !args.indexer.is_empty() || args.max_relays.is_some() {
        return Err(Failure::Usage(
            "--indexer and --max-relays go with --outbox".into(),
        ));
    }
    let Some(first) = args.url.take() else {
        return Err(Failure::Usage(
            "a relay URL is required (or --outbox)".into(),
        ));
    };
    let extra = args
        .filters
        .iter()
        .take_while(|a| a.starts_with("ws://") || a.starts_with("wss://"))
        .count();
    let mut relays = vec![first];
    relays.extend(args.filters[..extra].iter().cloned());
    // Every relay URL before anything starts: a port out of range would otherwise reach a
    // socket as the default port and be retried forever.
    for url in &relays {
        check_ws_url(url).map_err(|e| Failure::Usage(e.to_string()))?;
    }
    let filters = parse_filters(&args.filters[extra..])?;
    let config = driver_config(&args)?;
    let form = if relays.len() == 1 && !args.verify {
        Form::One
    } else {
        Form::Pool
    };
    let pool_config = pool_config(&args, &config);
    stream(
        args,
        config,
        pool_config,
        relays,
        filters,
        form,
        Mode::Relays,
    )
    .await
}

/// `tether req --outbox`: no relay given; the pool routes each filter by its people.
async fn run_outbox(mut args: Args) -> Result<(), Failure> {
    let mut filters = args.filters.clone();
    if let Some(first) = args.url.take() {
        if first.starts_with("ws://") || first.starts_with("wss://") {
            return Err(Failure::Usage(
                "--outbox takes no relay URL: its relays come from the people's relay lists".into(),
            ));
        }
        filters.insert(0, first);
    }
    if filters.is_empty() {
        return Err(Failure::Usage(
            "--outbox needs a filter naming people (`authors`, or one `#p` key)".into(),
        ));
    }
    let filters = parse_filters(&filters)?;
    for url in &args.indexer {
        check_ws_url(url).map_err(|e| Failure::Usage(format!("--indexer: {e}")))?;
    }
    let config = driver_config(&args)?;
    let mut pool_config = pool_config(&args, &config);
    let router = &mut pool_config.router;
    if !args.indexer.is_empty() {
        router.set_indexers(args.indexer.clone());
    }
    if let Some(max) = args.max_relays {
        if max == 0 {
            return Err(Failure::Usage("--max-relays must be at least 1".into()));
        }
        router.max_relays = max;
    }
    // The state file is this run's: its targets name the mode and the indexers.
    let mut targets = vec!["outbox".to_owned()];
    targets.extend(pool_config.router.indexers.iter().cloned());
    stream(
        args,
        config,
        pool_config,
        targets,
        filters,
        Form::Pool,
        Mode::Outbox,
    )
    .await
}

/// Whether the pool's relays are given or routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Relays,
    Outbox,
}

/// The pool's configuration from the arguments.
fn pool_config(args: &Args, config: &Config) -> PoolConfig {
    let mut pool_config = PoolConfig::default();
    pool_config.relay = config.relay.clone();
    if let Some(deadline) = args.eose_timeout {
        pool_config.eose_deadline = deadline;
    }
    pool_config
}

/// Subscribe with `filters` and write every line until the run ends.
async fn stream(
    args: Args,
    config: Config,
    pool_config: PoolConfig,
    relays: Vec<String>,
    filters: Vec<Filter>,
    form: Form,
    mode: Mode,
) -> Result<(), Failure> {
    let eose_deadline = pool_config.eose_deadline;
    let state = args
        .state
        .clone()
        .map(|path| StateFile::new(path, "req", relays.clone()));
    let loaded = match &state {
        Some(state) => state.load()?,
        None => None,
    };
    let stop = stop_requested()?;
    let given: &[String] = if mode == Mode::Outbox { &[] } else { &relays };
    let opened = open(pool_config, config, given, form, state.as_ref(), loaded).await?;
    let Opened {
        pool,
        urls,
        mut remembered,
        checkpoint,
    } = opened;
    let Some(mut relay_events) = pool.events() else {
        return Err(Failure::Failed("pool events already taken".into()));
    };
    let mut streams = Vec::with_capacity(filters.len());
    let mut keys = Vec::with_capacity(filters.len());
    let mut ids = Vec::with_capacity(filters.len());
    let mut answered = Vec::with_capacity(filters.len());
    for (index, filter) in filters.into_iter().enumerate() {
        let key = filter.json().to_owned();
        // A filter the state remembers goes on where it stopped; a new one starts fresh.
        let (sub, restored) = match remembered.iter().position(|(f, _)| *f == key) {
            Some(at) => (remembered.swap_remove(at).1, true),
            None => {
                let sub = match mode {
                    Mode::Relays => pool
                        .subscribe(vec![filter])
                        .await
                        .map_err(|e| Failure::Failed(format!("subscribe: {e}")))?,
                    Mode::Outbox => pool
                        .subscribe_outbox(filter)
                        .await
                        .map_err(|e| Failure::Usage(format!("filter {index}: {e}")))?,
                };
                (sub, false)
            }
        };
        keys.push(key);
        ids.push(sub.id());
        // One relay is done by its own answer; in a pool a new subscription is done at its
        // outcome, and a restored one (its outcome was reported in an earlier run) once
        // every relay answered. A restored routed one is owed its outcome again: its relays
        // are this run's.
        let by_answers = form == Form::One || (restored && mode == Mode::Relays);
        answered.push(by_answers.then(BTreeSet::new));
        streams.push(sub.map(move |item| (index, item)));
    }
    // Remembered subscriptions whose filter is no longer given are dropped (unsubscribed).
    drop(remembered);
    let mut run = Run {
        out: JsonLines::new(),
        form,
        mode,
        complete: vec![false; streams.len()],
        answered,
        relays: urls.len(),
        urls,
        routed: vec![BTreeMap::new(); streams.len()],
        ids: ids.clone(),
        checkpoint,
        ended: vec![false; streams.len()],
        peer_errors: Limiter::default(),
        invalid: Limiter::default(),
    };
    let mut items = select_all(streams);
    let mut stop = pin!(stop);
    let mut signals = crate::StopContinue::install()?;
    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX / 4));
    let mut deadline = pin!(deadline);
    let mut saves = tokio::time::interval(SAVE_EVERY);
    let mut dirty = false;
    // A restored pool subscription whose relays do not all answer (one never live before,
    // one down) is done at the outcome deadline, as a new one would be.
    let restored_deadline = tokio::time::sleep(eose_deadline);
    let mut restored_deadline = pin!(restored_deadline);
    let mut restored_pending = form == Form::Pool && run.answered.iter().any(Option::is_some);
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            () = &mut deadline, if args.duration.is_some() => break,
            () = &mut restored_deadline, if restored_pending => {
                restored_pending = false;
                for (done, answered) in run.complete.iter_mut().zip(&run.answered) {
                    *done |= answered.is_some();
                }
                if args.until_eose && run.complete.iter().all(|&c| c) {
                    break;
                }
            }
            _ = saves.tick(), if dirty && state.is_some() => {
                dirty = false;
                if let Some(state) = &state {
                    if let Err(error) = save(state, &pool, &keys, &ids, &run.ended).await {
                        tracing::warn!(%error, "--state not written");
                    }
                }
            }
            // Ctrl-Z and continued: an app to the background and back; a socket that died
            // meanwhile is found by the resume probe.
            signal = signals.next() => {
                if pool.lifecycle(signal).await.is_err() {
                    return Err(Failure::Failed("the relay driver stopped".into()));
                }
                if signal == Lifecycle::Suspended {
                    crate::stop_self();
                }
            }
            // Relay events first: a `connected` line then precedes the replay's EOSEs.
            event = relay_events.next() => {
                let Some(event) = event else {
                    return Err(Failure::Failed("the relay driver stopped".into()));
                };
                run.relay_event(&event)?;
                dirty = true;
            }
            item = items.next() => {
                let Some((index, item)) = item else {
                    // Every subscription ended: nothing left to stream.
                    break;
                };
                run.name_routed(&pool, index, &item).await;
                run.item(index, &item)?;
                dirty = true;
                if args.until_eose && run.complete.iter().all(|&c| c) {
                    break;
                }
            }
        }
    }
    // Before the shutdown unsubscribes: the state keeps the subscriptions.
    if let Some(state) = &state {
        save(state, &pool, &keys, &ids, &run.ended)
            .await
            .map_err(|e| Failure::Failed(format!("--state not written: {e}")))?;
    }
    // Every subscription still open is CLOSEd before the sockets close.
    for sub in items.into_iter().map(|stream| stream.into_inner()) {
        if let Err(error) = sub.unsubscribe().await {
            tracing::debug!(%error, "unsubscribe at shutdown");
        }
    }
    run.shut_down(&pool, &mut relay_events).await
}

/// How `tether req`'s lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// One relay: no `relay` field, no `complete` or `ended` line (its `closed` says it),
    /// and a subscription is done at that relay's answer.
    One,
    /// Several relays, or `--verify`: every line about one relay names it.
    Pool,
}

/// How long a clean shutdown waits for the driver to confirm the socket is closed.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// How often `--state` is written while anything changes.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// The driver's configuration from the arguments.
fn driver_config(args: &Args) -> Result<Config, Failure> {
    let signer = match &args.secret_key {
        Some(key) => {
            Some(Arc::new(KeySigner::parse(key).map_err(Failure::Usage)?) as Arc<dyn Signer>)
        }
        None => None,
    };
    let mut config = Config::default();
    config.roots = crate::sse::roots(&args.cacert, args.native_roots)?;
    // Roots that cannot be used are the caller's to fix, before any relay is tried.
    tether_tokio::tether_driver::tls::client_config(&config.roots)
        .map_err(|e| Failure::Usage(format!("--cacert: {e}")))?;
    config.relay.max_subscriptions = args.max_subscriptions;
    config.seed = args.seed;
    config.signer = signer;
    config.verifier = args
        .verify
        .then(|| Arc::new(Verifier::new()) as Arc<dyn Verify>);
    Ok(config)
}

/// The running pool, its relays' URLs by id, and what a state file brought back.
struct Opened {
    pool: PoolHandle,
    urls: BTreeMap<RelayId, String>,
    /// Each remembered subscription's filter and its restored stream.
    remembered: Vec<(String, PoolSubscription)>,
    checkpoint: Option<PoolCheckpoint>,
}

/// Start the pool: restored from `loaded` when the state file held a run, else fresh with
/// every relay added in the order given.
async fn open(
    pool_config: PoolConfig,
    config: Config,
    relays: &[String],
    form: Form,
    state: Option<&StateFile>,
    loaded: Option<Loaded>,
) -> Result<Opened, Failure> {
    let (Some(state), Some(loaded)) = (state, loaded) else {
        let pool = tether_tokio::pool(pool_config, config);
        let mut urls = BTreeMap::new();
        for url in relays {
            let relay = pool
                .add_relay(url)
                .await
                .map_err(|e| Failure::Usage(e.to_string()))?;
            urls.insert(relay, url.clone());
        }
        return Ok(Opened {
            pool,
            urls,
            remembered: Vec::new(),
            checkpoint: None,
        });
    };
    let checkpoint =
        read_checkpoint(&loaded.checkpoint, form).map_err(|e| state.refuse(&e.to_string()))?;
    // Relays were added in the order given, one id per distinct relay.
    let urls = distinct_relays(relays);
    let by_id: Vec<(RelayId, String)> = urls.clone().into_iter().collect();
    let (pool, subs) = tether_tokio::pool_restored(pool_config, config, &checkpoint, &by_id)
        .map_err(|e| state.refuse(&e.to_string()))?;
    let mut subs: Vec<Option<PoolSubscription>> = subs.into_iter().map(Some).collect();
    let remembered = loaded
        .subscriptions
        .into_iter()
        .filter_map(|(filter, id)| {
            let at = subs
                .iter()
                .position(|s| s.as_ref().is_some_and(|s| s.id().0 == id))?;
            Some((filter, subs[at].take()?))
        })
        .collect();
    Ok(Opened {
        pool,
        urls,
        remembered,
        checkpoint: Some(checkpoint),
    })
}

/// The pool's checkpoint in a state file. A one-relay run before `tether req` ran one relay
/// as a pool of one saved that relay session's checkpoint: it goes on as a pool of one.
fn read_checkpoint(json: &[u8], form: Form) -> Result<PoolCheckpoint, CheckpointError> {
    match PoolCheckpoint::from_json(json) {
        Err(CheckpointError::WrongKind { .. }) if form == Form::One => {
            PoolCheckpoint::of_one_relay(RelayCheckpoint::from_json(json)?)
        }
        other => other,
    }
}

/// Each distinct relay (by its normalised URL) with the id the pool gave it: the order
/// they were added in, a relay given twice being one relay.
fn distinct_relays(relays: &[String]) -> BTreeMap<RelayId, String> {
    let mut seen = BTreeSet::new();
    let mut out = BTreeMap::new();
    for url in relays {
        let key = normalize_relay_url(url).unwrap_or_else(|_| url.clone());
        if seen.insert(key) {
            let id = RelayId(u32::try_from(out.len()).unwrap_or(u32::MAX));
            out.insert(id, url.clone());
        }
    }
    out
}

/// Write the pool's checkpoint and each live subscription's filter and id to `state`.
async fn save(
    state: &StateFile,
    pool: &PoolHandle,
    keys: &[String],
    ids: &[SubId],
    ended: &[bool],
) -> Result<(), String> {
    let checkpoint = pool.checkpoint().await.map_err(|e| e.to_string())?;
    state.store_live(
        keys,
        ids.iter().map(|id| id.0),
        ended,
        &checkpoint.to_json(),
    )
}

/// What `tether req` is writing.
struct Run {
    out: JsonLines,
    form: Form,
    mode: Mode,
    /// The relays given on the command line, by id, as given.
    urls: BTreeMap<RelayId, String>,
    /// By filter index: the relays routing placed that subscription on, by id, from its own
    /// `Routed` reports. Its items come in order with its reports, so an id routing reused
    /// for another relay names, in each item, the relay that sent it.
    routed: Vec<BTreeMap<RelayId, String>>,
    /// By filter index: done for `--until-eose`.
    complete: Vec<bool>,
    /// For a subscription done by its relays' answers, the relays that answered: EOSE
    /// (or, restored with a gap there, its `caught_up`), or gave up.
    answered: Vec<Option<BTreeSet<RelayId>>>,
    relays: usize,
    ids: Vec<SubId>,
    /// What the run was restored from: which relays catch which subscriptions up.
    checkpoint: Option<PoolCheckpoint>,
    /// Ended: no relay serves it any more.
    ended: Vec<bool>,
    peer_errors: Limiter,
    /// `invalid` lines: a relay flooding forgeries must not flood stdout.
    invalid: Limiter,
}

impl Run {
    /// `relay` answered (or gave up on) subscription `index`: once every relay has, it is
    /// done.
    fn answered_by(&mut self, index: usize, relay: RelayId) {
        let Some(Some(answered)) = self.answered.get_mut(index) else {
            return;
        };
        answered.insert(relay);
        if answered.len() >= self.relays {
            self.complete[index] = true;
        }
    }

    /// Whether `relay`'s `caught_up` for subscription `index` follows its EOSE.
    fn catches_up(&self, index: usize, relay: RelayId) -> bool {
        self.checkpoint
            .as_ref()
            .is_some_and(|c| c.catches_up(self.ids[index], relay))
    }

    /// Name a relay of subscription `index` that `item` is about and that none of its
    /// `Routed` reports named yet (a relay can speak for it first) by the URL the pool dials
    /// for it now: a relay that just took an id over is the one the pool names.
    async fn name_routed(&mut self, pool: &PoolHandle, index: usize, item: &PoolItem) {
        if self.mode != Mode::Outbox {
            return;
        }
        let Some(routed) = self.routed.get_mut(index) else {
            return;
        };
        for relay in relays_of(item) {
            if let Entry::Vacant(unnamed) = routed.entry(relay) {
                if let Ok(Some(url)) = pool.relay_url(relay).await {
                    unnamed.insert(url);
                }
            }
        }
    }

    /// A relay-wide event: a given relay named as given, a routed one by the URL it had when
    /// the event happened (the driver's), since routing may have reused its id by now.
    fn relay_event(&mut self, event: &PoolRelayEvent) -> Result<(), Failure> {
        let PoolRelayEvent {
            relay, url, event, ..
        } = event;
        let name = match self.urls.get(relay) {
            Some(given) => given.as_str(),
            None => url.as_deref().unwrap_or_default(),
        };
        let relay_label = match self.form {
            Form::One => None,
            Form::Pool => Some(Label::Name(name.into())),
        };
        let Some(line) = event.line(relay_label) else {
            tracing::debug!(?event, relay = name, "relay event");
            return Ok(());
        };
        if let SessionEvent::PeerError { error } = event {
            tracing::debug!(?error, "the relay sent a malformed frame; dropped");
        }
        let Some(line) = line.admit(&mut self.peer_errors, monotonic()) else {
            return Ok(());
        };
        Ok(self.out.write(&line)?)
    }

    fn item(&mut self, index: usize, item: &PoolItem) -> Result<(), Failure> {
        match item {
            PoolItem::Eose { relay } if !self.catches_up(index, *relay) => {
                self.answered_by(index, *relay);
            }
            PoolItem::CaughtUp { relay, .. } | PoolItem::RelayClosed { relay, .. } => {
                self.answered_by(index, *relay);
            }
            PoolItem::Complete(_) if self.form == Form::Pool => self.complete[index] = true,
            // Routed relays are named by the pool: this subscription's lines carry those URLs.
            PoolItem::Routed(report) => {
                if let Some(routed) = self.routed.get_mut(index) {
                    for (relay, url) in &report.relays {
                        routed.insert(*relay, url.clone());
                    }
                }
            }
            PoolItem::Ended { .. } => {
                self.ended[index] = true;
                self.complete[index] = true;
            }
            _ => {}
        }
        if self.form == Form::One && matches!(item, PoolItem::Complete(_) | PoolItem::Ended { .. })
        {
            return Ok(());
        }
        let sub = index.to_string();
        let labels = Urls {
            urls: self.routed.get(index).unwrap_or(&self.urls),
            given: &self.urls,
            form: self.form,
        };
        let Some(line) = item.line(Label::Name(sub.as_str().into()), &labels) else {
            tracing::debug!(index, ?item, "pool item");
            return Ok(());
        };
        let Some(line) = line.admit(&mut self.invalid, monotonic()) else {
            return Ok(());
        };
        Ok(self.out.write(&line)?)
    }

    /// Close every socket. One relay's run then waits (bounded) for the driver to say its
    /// socket is closed, and writes that as its last line.
    async fn shut_down(
        mut self,
        pool: &PoolHandle,
        events: &mut PoolEvents,
    ) -> Result<(), Failure> {
        if pool.close().await.is_err() || self.form == Form::Pool {
            return Ok(());
        }
        let closed = async {
            while let Some(event) = events.next().await {
                let last = matches!(
                    event.event,
                    SessionEvent::Disconnected {
                        reconnect_in: None,
                        ..
                    }
                );
                self.relay_event(&event)?;
                if last {
                    break;
                }
            }
            Ok::<(), Failure>(())
        };
        match tokio::time::timeout(SHUTDOWN_WAIT, closed).await {
            Ok(result) => result,
            Err(_) => {
                tracing::debug!("the driver did not confirm the close in time");
                Ok(())
            }
        }
    }
}

/// The URL `relay` was added with, as given on the command line.
fn url(urls: &BTreeMap<RelayId, String>, relay: RelayId) -> &str {
    urls.get(&relay).map_or("", String::as_str)
}

/// The relays `item` names by id.
fn relays_of(item: &PoolItem) -> Vec<RelayId> {
    match item {
        PoolItem::Event { relay, .. }
        | PoolItem::CaughtUp { relay, .. }
        | PoolItem::Eose { relay }
        | PoolItem::RelayClosed { relay, .. }
        | PoolItem::Invalid { relay, .. }
        | PoolItem::Relay { relay, .. } => vec![*relay],
        PoolItem::Complete(Outcome::Partial { missing }) => {
            missing.iter().map(|(relay, _)| *relay).collect()
        }
        _ => Vec::new(),
    }
}

/// The CLI's relay labels for one subscription's items: each relay by its URL (`urls`: the
/// subscription's routed relays, or the relays given), else as given on the command line;
/// none for one relay.
struct Urls<'a> {
    urls: &'a BTreeMap<RelayId, String>,
    given: &'a BTreeMap<RelayId, String>,
    form: Form,
}

impl Labels for Urls<'_> {
    fn sub(&self, sub: u64) -> Label<'_> {
        Label::Id(sub)
    }

    fn relay(&self, relay: u32) -> Option<Label<'_>> {
        match self.form {
            Form::One => None,
            Form::Pool => {
                let relay = RelayId(relay);
                let name = self
                    .urls
                    .get(&relay)
                    .map_or_else(|| url(self.given, relay), String::as_str);
                Some(Label::Name(name.into()))
            }
        }
    }
}

/// Validate every filter argument before connecting; `{"limit":10}` when there are none.
///
/// # Errors
/// [`Failure::Usage`] naming the first argument that is not a JSON object.
fn parse_filters(args: &[String]) -> Result<Vec<Filter>, Failure> {
    if args.is_empty() {
        let filter = Filter::new(DEFAULT_FILTER).map_err(|e| Failure::Failed(format!("{e:?}")))?;
        return Ok(vec![filter]);
    }
    args.iter()
        .enumerate()
        .map(|(i, json)| {
            Filter::new(json).map_err(|e| {
                Failure::Usage(format!("filter {i} is not a JSON object ({}): {json}", e.0))
            })
        })
        .collect()
}
