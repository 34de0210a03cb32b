//! `tether req <RELAY> <RELAY>... [FILTER_JSON ...]`: one subscription per filter across
//! every relay, through the core's relay pool. Each event is written once, with the relay
//! that delivered it first; every line about one relay says which; each subscription ends
//! its query with exactly one `complete` line (`complete` or `partial`, and who is missing).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;
use std::time::Duration;

use futures_util::stream::{select_all, StreamExt};
use tether_tokio::tether_core::nostr::Filter;
use tether_tokio::tether_core::pool::{PoolCheckpoint, SubId};
use tether_tokio::tether_driver::{normalize_relay_url, PoolHandle, PoolSubscription};
use tether_tokio::{Config, Lifecycle, PoolConfig, PoolItem, RelayId, SessionEvent};

use tether_tokio::tether_core::line::{Label, Labels, Limiter};

use crate::output::{monotonic, JsonLines};
use crate::state::{Loaded, StateFile};
use crate::{stop_requested, Failure};

/// What the pool run needs from `tether req`'s arguments.
pub(crate) struct PoolArgs {
    pub(crate) relays: Vec<String>,
    pub(crate) filters: Vec<Filter>,
    pub(crate) config: Config,
    pub(crate) until_eose: bool,
    pub(crate) duration: Option<Duration>,
    pub(crate) eose_timeout: Option<Duration>,
    /// `--state`: the file, and what it held when it exists.
    pub(crate) state: Option<(StateFile, Option<Loaded>)>,
}

/// Run `tether req` over several relays.
///
/// # Errors
/// [`Failure::Usage`] for a bad URL; [`Failure::Failed`] when the pool driver stops.
pub(crate) async fn run(args: PoolArgs) -> Result<(), Failure> {
    let mut pool_config = PoolConfig::default();
    pool_config.relay = args.config.relay.clone();
    if let Some(deadline) = args.eose_timeout {
        pool_config.eose_deadline = deadline;
    }
    let eose_deadline = pool_config.eose_deadline;
    let stop = stop_requested()?;
    let (state, loaded) = match args.state {
        Some((state, loaded)) => (Some(state), loaded),
        None => (None, None),
    };
    let (pool, mut urls, mut remembered) = match (&state, loaded) {
        (Some(state), Some(loaded)) => {
            let checkpoint = PoolCheckpoint::from_json(&loaded.checkpoint)
                .map_err(|e| state.refuse(&e.to_string()))?;
            // Relays were added in the order given, one id per distinct relay.
            let urls = distinct_relays(&args.relays);
            let by_id: Vec<(RelayId, String)> = urls.clone().into_iter().collect();
            let (pool, subs) =
                tether_tokio::pool_restored(pool_config, args.config, &checkpoint, &by_id)
                    .map_err(|e| state.refuse(&e.to_string()))?;
            let remembered = loaded
                .subscriptions
                .into_iter()
                .filter_map(|(filter, id)| {
                    let sub = subs.iter().position(|s| s.id().0 == id)?;
                    Some((filter, sub))
                })
                .collect::<Vec<_>>();
            let mut subs: Vec<Option<PoolSubscription>> = subs.into_iter().map(Some).collect();
            let remembered = remembered
                .into_iter()
                .filter_map(|(filter, at)| Some((filter, subs.get_mut(at)?.take()?)))
                .collect();
            (pool, urls, remembered)
        }
        _ => (
            tether_tokio::pool(pool_config, args.config),
            BTreeMap::new(),
            Vec::new(),
        ),
    };
    let Some(mut relay_events) = pool.events() else {
        return Err(Failure::Failed("pool events already taken".into()));
    };
    if urls.is_empty() {
        for url in &args.relays {
            let relay = pool
                .add_relay(url)
                .await
                .map_err(|e| Failure::Usage(e.to_string()))?;
            urls.insert(relay, url.clone());
        }
    }
    let mut streams = Vec::with_capacity(args.filters.len());
    let mut keys = Vec::with_capacity(args.filters.len());
    let mut ids = Vec::with_capacity(args.filters.len());
    let mut restored = Vec::with_capacity(args.filters.len());
    for (index, filter) in args.filters.into_iter().enumerate() {
        let key = filter.json().to_owned();
        // A filter the state remembers goes on where it stopped; a new one starts fresh.
        let (sub, was_restored) = match remembered.iter().position(|(f, _)| *f == key) {
            Some(at) => (remembered.swap_remove(at).1, true),
            None => (
                pool.subscribe(vec![filter])
                    .await
                    .map_err(|e| Failure::Failed(format!("subscribe: {e}")))?,
                false,
            ),
        };
        keys.push(key);
        ids.push(sub.id());
        restored.push(was_restored);
        streams.push(sub.map(move |item| (index, item)));
    }
    // Remembered subscriptions whose filter is no longer given are dropped (unsubscribed).
    drop(remembered);
    let mut run = Run {
        out: JsonLines::new(),
        complete: vec![false; streams.len()],
        // A restored subscription had its `complete` line in an earlier run: it is done
        // once every relay caught it up or gave up, or at the outcome deadline.
        answered: restored.iter().map(|&r| r.then(BTreeSet::new)).collect(),
        relays: urls.len(),
        urls,
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
    // A restored subscription whose relays do not all report a catch-up (one never live
    // before, one down) is done at the outcome deadline, as a new one would be.
    let restored_deadline = tokio::time::sleep(eose_deadline);
    let mut restored_deadline = pin!(restored_deadline);
    let mut restored_pending = run.answered.iter().any(Option::is_some);
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
            signal = signals.next() => {
                if pool.lifecycle(signal).await.is_err() {
                    return Err(Failure::Failed("the pool driver stopped".into()));
                }
                if signal == Lifecycle::Suspended {
                    crate::stop_self();
                }
            }
            event = relay_events.next() => {
                let Some((relay, event)) = event else {
                    return Err(Failure::Failed("the pool driver stopped".into()));
                };
                run.relay_event(relay, &event)?;
                dirty = true;
            }
            item = items.next() => {
                let Some((index, item)) = item else {
                    // Every subscription ended: nothing left to stream.
                    break;
                };
                run.item(index, &item)?;
                dirty = true;
                if args.until_eose && run.complete.iter().all(|&c| c) {
                    break;
                }
            }
        }
    }
    if let Some(state) = &state {
        save(state, &pool, &keys, &ids, &run.ended)
            .await
            .map_err(|e| Failure::Failed(format!("--state not written: {e}")))?;
    }
    let _ = pool.close().await;
    Ok(())
}

/// How often `--state` is written while anything changes.
const SAVE_EVERY: Duration = Duration::from_secs(1);

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

struct Run {
    out: JsonLines,
    urls: BTreeMap<RelayId, String>,
    complete: Vec<bool>,
    /// For a restored subscription, the relays that caught it up or gave up.
    answered: Vec<Option<BTreeSet<RelayId>>>,
    relays: usize,
    /// Ended: no relay serves it any more.
    ended: Vec<bool>,
    peer_errors: Limiter,
    /// `invalid` lines: a relay flooding forgeries must not flood stdout.
    invalid: Limiter,
}

/// The URL `relay` was added with, as given on the command line.
fn url(urls: &BTreeMap<RelayId, String>, relay: RelayId) -> &str {
    urls.get(&relay).map_or("", String::as_str)
}

impl Run {
    /// `relay` answered (or gave up on) restored subscription `index`: once every relay has,
    /// it is done.
    fn answered_by(&mut self, index: usize, relay: RelayId) {
        let Some(Some(answered)) = self.answered.get_mut(index) else {
            return;
        };
        answered.insert(relay);
        if answered.len() >= self.relays {
            self.complete[index] = true;
        }
    }

    fn relay_event(&mut self, relay: RelayId, event: &SessionEvent) -> Result<(), Failure> {
        let url = Urls(&self.urls);
        let Some(line) = event.line(url.relay(relay.0)) else {
            tracing::debug!(?event, relay = url.relay_url(relay), "relay event");
            return Ok(());
        };
        let Some(line) = line.admit(&mut self.peer_errors, monotonic()) else {
            return Ok(());
        };
        Ok(self.out.write(&line)?)
    }

    fn item(&mut self, index: usize, item: &PoolItem) -> Result<(), Failure> {
        match item {
            PoolItem::CaughtUp { relay, .. } | PoolItem::RelayClosed { relay, .. } => {
                self.answered_by(index, *relay);
            }
            PoolItem::Complete(_) => self.complete[index] = true,
            PoolItem::Ended { .. } => {
                self.ended[index] = true;
                self.complete[index] = true;
            }
            _ => {}
        }
        let sub = index.to_string();
        let urls = Urls(&self.urls);
        let Some(line) = item.line(Label::Name(sub.as_str().into()), &urls) else {
            tracing::debug!(index, ?item, "pool item");
            return Ok(());
        };
        let Some(line) = line.admit(&mut self.invalid, monotonic()) else {
            return Ok(());
        };
        Ok(self.out.write(&line)?)
    }
}

/// The CLI's relay labels: each relay by its URL as given on the command line.
struct Urls<'a>(&'a BTreeMap<RelayId, String>);

impl Urls<'_> {
    fn relay_url(&self, relay: RelayId) -> &str {
        url(self.0, relay)
    }
}

impl Labels for Urls<'_> {
    fn sub(&self, sub: u64) -> Label<'_> {
        Label::Id(sub)
    }

    fn relay(&self, relay: u32) -> Option<Label<'_>> {
        Some(Label::Name(url(self.0, RelayId(relay)).into()))
    }
}
