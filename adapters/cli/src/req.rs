//! `tether req`: subscriptions on a real relay, as JSON lines.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{select_all, StreamExt};
use tether_tokio::tether_driver::check_ws_url;
use tether_tokio::tether_driver::tether_core::nostr::RelayCheckpoint;
use tether_tokio::tether_driver::verify::{Verifier, Verify};
use tether_tokio::{
    Config, Filter, Lifecycle, RelayClient, SessionEvent, SessionEvents, Signer, Subscription,
    SubscriptionEvent, SubscriptionId,
};

use tether_tokio::tether_core::line::{Label, Limiter};

use crate::output::{monotonic, JsonLines};
use crate::signer::KeySigner;
use crate::state::StateFile;
use crate::{parse_secs, stop_requested, Failure};

/// The filter used when none is given.
const DEFAULT_FILTER: &str = r#"{"limit":10}"#;

/// How long a clean shutdown waits for the driver to confirm the socket is closed.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// `tether req <URL> [FILTER_JSON ...]`
///
/// Writes one JSON object per line to stdout: `connected`, `disconnected`
/// (`reconnect_in_ms`, `why`, `close_code`), `event` (`sub`, `event`), `eose`, `closed` (`reason`, `attempts`),
/// `notice`, `auth` (`challenge`), and what the session does in between: `retrying`,
/// `queued`, `eose_timeout`, `rate_limited`, `subscription_limit`, `authenticated`,
/// `auth_failed`, `signer_failed`, `peer_error` (`kind`, `excerpt`, `suppressed`). `sub` is the
/// filter argument's index, from 0.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output, one JSON object per line on stdout: connected, disconnected \
    (reconnect_in_ms; why: requested, connection_refused, tls_rejected, handshake_failed, \
    connect_timeout, closed_by_peer with close_code, frame_too_large, pong_timeout, \
    network_error), event (sub, event), eose (sub), closed (sub, reason, attempts), notice \
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
    Exit codes: 0 done (--until-eose, --duration, Ctrl-C), 1 failure, 2 bad arguments."
)]
pub(crate) struct Args {
    /// The relay, ws:// or wss://. More relays may follow (as in `nak req`): then the
    /// subscriptions span all of them through one pool, each event is written once, and
    /// every line about one relay carries `relay`.
    url: String,
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
}

/// Run `tether req`.
///
/// # Errors
/// [`Failure::Usage`] for a bad URL, filter or key; [`Failure::Failed`] when the driver
/// stops on its own.
pub(crate) async fn run(args: Args) -> Result<(), Failure> {
    let extra = args
        .filters
        .iter()
        .take_while(|a| a.starts_with("ws://") || a.starts_with("wss://"))
        .count();
    let mut relays = vec![args.url.clone()];
    relays.extend(args.filters[..extra].iter().cloned());
    // Every relay URL before anything starts: a port out of range would otherwise reach a
    // socket as the default port and be retried forever.
    for url in &relays {
        check_ws_url(url).map_err(|e| Failure::Usage(e.to_string()))?;
    }
    let filters = parse_filters(&args.filters[extra..])?;
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
    let state = args
        .state
        .clone()
        .map(|path| StateFile::new(path, "req", relays.clone()));
    let loaded = match &state {
        Some(state) => state.load()?,
        None => None,
    };
    if relays.len() > 1 || args.verify {
        return crate::req_pool::run(crate::req_pool::PoolArgs {
            relays,
            filters,
            config,
            until_eose: args.until_eose,
            duration: args.duration,
            eose_timeout: args.eose_timeout,
            state: state.zip(Some(loaded)),
        })
        .await;
    }
    let stop = stop_requested()?;
    let (client, mut remembered, checkpoint) = match (&state, loaded) {
        (Some(state), Some(loaded)) => {
            let checkpoint = RelayCheckpoint::from_json(&loaded.checkpoint)
                .map_err(|e| state.refuse(&e.to_string()))?;
            let (client, subs) = RelayClient::restore(&args.url, config, &checkpoint)
                .map_err(|e| state.refuse(&e.to_string()))?;
            let remembered = remembered_streams(loaded.subscriptions, subs);
            (client, remembered, Some(checkpoint))
        }
        _ => (
            RelayClient::connect(&args.url, config).map_err(|e| Failure::Usage(e.to_string()))?,
            Vec::new(),
            None,
        ),
    };
    let Some(mut session) = client.events() else {
        return Err(Failure::Failed("session events already taken".into()));
    };
    let mut ids = Vec::with_capacity(filters.len());
    let mut keys = Vec::with_capacity(filters.len());
    let mut catching_up = Vec::with_capacity(filters.len());
    let mut streams = Vec::with_capacity(filters.len());
    for (index, filter) in filters.into_iter().enumerate() {
        let key = filter.json().to_owned();
        // A filter the state remembers goes on where it stopped; a new one starts fresh.
        let sub = match remembered.iter().position(|(f, _)| *f == key) {
            Some(at) => remembered.swap_remove(at).1,
            None => client
                .subscribe(vec![filter])
                .await
                .map_err(|e| Failure::Failed(format!("subscribe: {e}")))?,
        };
        catching_up.push(checkpoint.as_ref().is_some_and(|c| c.catches_up(sub.id())));
        ids.push(sub.id());
        keys.push(key);
        streams.push(sub.map(move |item| (index, item)));
    }
    // Remembered subscriptions whose filter is no longer given are dropped (unsubscribed).
    drop(remembered);
    let mut run = Run {
        out: JsonLines::new(),
        labels: (0..ids.len()).map(|i| i.to_string()).collect(),
        done: vec![false; ids.len()],
        catching_up,
        ended: vec![false; ids.len()],
        peer_errors: Limiter::default(),
    };
    let mut items = select_all(streams);
    let mut stop = pin!(stop);
    let mut signals = crate::StopContinue::install()?;
    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX / 4));
    let mut deadline = pin!(deadline);
    let mut saves = tokio::time::interval(SAVE_EVERY);
    let mut dirty = false;
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            () = &mut deadline, if args.duration.is_some() => break,
            _ = saves.tick(), if dirty && state.is_some() => {
                dirty = false;
                if let Some(state) = &state {
                    if let Err(error) = save(state, &client, &keys, &ids, &run.ended).await {
                        tracing::warn!(%error, "--state not written");
                    }
                }
            }
            // Ctrl-Z and continued: an app to the background and back; a socket that died
            // meanwhile is found by the resume probe.
            signal = signals.next() => {
                if client.lifecycle(signal).await.is_err() {
                    return Err(Failure::Failed("the relay driver stopped".into()));
                }
                if signal == Lifecycle::Suspended {
                    crate::stop_self();
                }
            }
            // Session events first: a `connected` line then precedes the replay's EOSEs.
            event = session.next() => {
                let Some(event) = event else {
                    return Err(Failure::Failed("the relay driver stopped".into()));
                };
                run.session_event(&event)?;
                dirty = true;
            }
            item = items.next() => {
                let Some((index, item)) = item else {
                    // Every subscription was closed by the relay: nothing left to stream.
                    break;
                };
                run.sub_event(index, &item)?;
                dirty = true;
                if args.until_eose && run.done.iter().all(|&d| d) {
                    break;
                }
            }
        }
    }
    // Before the shutdown unsubscribes: the state keeps the subscriptions.
    if let Some(state) = &state {
        save(state, &client, &keys, &ids, &run.ended)
            .await
            .map_err(|e| Failure::Failed(format!("--state not written: {e}")))?;
    }
    run.shut_down(&client, &ids, &mut session).await
}

/// How often `--state` is written while anything changes.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Pair each remembered subscription's filter with its restored stream (a stream the state
/// does not name is dropped: unsubscribed).
fn remembered_streams(
    saved: Vec<(String, u64)>,
    mut subs: Vec<Subscription>,
) -> Vec<(String, Subscription)> {
    saved
        .into_iter()
        .filter_map(|(filter, id)| {
            let at = subs.iter().position(|s| s.id() == SubscriptionId(id))?;
            Some((filter, subs.swap_remove(at)))
        })
        .collect()
}

/// Write the session's checkpoint and each live subscription's filter and id to `state`.
async fn save(
    state: &StateFile,
    client: &RelayClient,
    keys: &[String],
    ids: &[SubscriptionId],
    ended: &[bool],
) -> Result<(), String> {
    let checkpoint = client.checkpoint().await.map_err(|e| e.to_string())?;
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
    labels: Vec<String>,
    /// Had EOSE (or, restored with a gap, its `caught_up`) or was closed.
    done: Vec<bool>,
    /// Restored with a gap: done at its `caught_up`, which follows the EOSE.
    catching_up: Vec<bool>,
    /// Closed: gone from the session.
    ended: Vec<bool>,
    peer_errors: Limiter,
}

impl Run {
    fn session_event(&mut self, event: &SessionEvent) -> Result<(), Failure> {
        let Some(line) = event.line(None) else {
            tracing::debug!(?event, "session event");
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

    fn sub_event(&mut self, index: usize, item: &SubscriptionEvent) -> Result<(), Failure> {
        match item {
            SubscriptionEvent::Eose => self.done[index] |= !self.catching_up[index],
            SubscriptionEvent::CaughtUp(_) => self.done[index] = true,
            SubscriptionEvent::Closed { .. } => {
                self.done[index] = true;
                self.ended[index] = true;
            }
            _ => {}
        }
        let sub = Label::Name(self.labels[index].as_str().into());
        match item.line(sub, None) {
            Some(line) => self.out.write(&line)?,
            None => tracing::debug!(index, ?item, "subscription event"),
        }
        Ok(())
    }

    /// CLOSE every subscription still open, close the socket, and wait (bounded) for the
    /// driver to say it is closed.
    async fn shut_down(
        mut self,
        client: &RelayClient,
        ids: &[SubscriptionId],
        session: &mut SessionEvents,
    ) -> Result<(), Failure> {
        for (&id, _) in ids.iter().zip(&self.ended).filter(|(_, &ended)| !ended) {
            // The relay may have closed it a moment ago; either way it is gone.
            if let Err(error) = client.unsubscribe(id).await {
                tracing::debug!(%error, "unsubscribe at shutdown");
            }
        }
        if client.disconnect().await.is_err() {
            return Ok(());
        }
        let closed = async {
            while let Some(event) = session.next().await {
                let last = matches!(
                    event,
                    SessionEvent::Disconnected {
                        reconnect_in: None,
                        ..
                    }
                );
                self.session_event(&event)?;
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
