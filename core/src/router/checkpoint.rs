//! [`RouterCheckpoint`]: what a [`Router`] learned, kept across a restart so the next run
//! routes straight to where content was.
//!
//! It holds the relay lists, the learned tallies (per relay and per pair), each author's
//! activity and each relay's failure count. It never holds this run's pending silences, the
//! current routes or backoff deadlines (monotonic times mean nothing in another process).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::evidence::{RelayTallies, Tally};
use super::health::Health;
use super::{relay_url, Author, List, Router, RouterConfig};
use crate::checkpoint::{self, CheckpointError};
use crate::tree::IntoTree;

/// The kind a router's checkpoint says it is.
const KIND: &str = "router";

/// A [`Router`]'s durable state: plain, versioned data, validated and bounded on restore.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterCheckpoint {
    tether: String,
    version: u32,
    relays: Vec<SavedRelay>,
    authors: Vec<SavedAuthor>,
    /// `(author, relay, tally)`.
    pairs: Vec<(u32, u32, Tally)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SavedRelay {
    url: String,
    failures: u32,
    hinted_dead: bool,
    tallies: RelayTallies,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SavedAuthor {
    key: String,
    followed: bool,
    outbox: Option<SavedList>,
    inbox: Option<SavedList>,
    activity: Tally,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SavedList {
    created_at: u64,
    id: String,
    write: Vec<u32>,
    read: Vec<u32>,
}

impl RouterCheckpoint {
    /// The checkpoint as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        checkpoint::to_json(self)
    }

    /// Read a checkpoint written by [`RouterCheckpoint::to_json`].
    ///
    /// # Errors
    /// [`CheckpointError`] for anything that is not a router checkpoint this build reads.
    pub fn from_json(json: &[u8]) -> Result<RouterCheckpoint, CheckpointError> {
        checkpoint::from_json(json, KIND)
    }
}

impl Router {
    /// What it learned, for [`Router::restore`]: about the people followed only (a
    /// stranger's list or an inbox owner's is fetched again), and the relays that knowledge
    /// names or that failed.
    pub fn checkpoint(&self) -> RouterCheckpoint {
        let authors: Vec<u32> = (0..self.authors.len())
            .filter(|&a| self.authors[a].followed)
            .filter_map(|a| u32::try_from(a).ok())
            .collect();
        let author_at: BTreeMap<u32, u32> = authors
            .iter()
            .enumerate()
            .filter_map(|(new, &old)| Some((old, u32::try_from(new).ok()?)))
            .into_map();
        let pairs: Vec<(u32, u32, Tally)> = self
            .pairs
            .iter()
            .filter(|(&(a, _), t)| author_at.contains_key(&a) && !t.faded())
            .map(|(&(a, r), &t)| (a, r, t))
            .collect();
        let mut kept: BTreeSet<u32> = pairs.iter().map(|&(_, r, _)| r).into_set();
        for &a in &authors {
            let author = &self.authors[a as usize];
            for list in author.outbox.iter().chain(author.inbox.iter()) {
                kept.extend(list.write.iter().chain(&list.read));
            }
        }
        for (i, relay) in self.relays.iter().enumerate() {
            let learned = relay.health.failures > 0
                || !relay.tallies.declared.faded()
                || !relay.tallies.undeclared.faded();
            if !relay.url.is_empty() && (relay.indexer || learned) {
                kept.extend(u32::try_from(i).ok());
            }
        }
        let relay_at: BTreeMap<u32, u32> = kept
            .iter()
            .enumerate()
            .filter_map(|(new, &old)| Some((old, u32::try_from(new).ok()?)))
            .into_map();
        let relays_of = |v: &[u32]| v.iter().filter_map(|r| relay_at.get(r).copied()).collect();
        let list = |l: &Option<List>| {
            l.as_ref().map(|l| SavedList {
                created_at: l.created_at,
                id: l.id.clone(),
                write: relays_of(&l.write),
                read: relays_of(&l.read),
            })
        };
        RouterCheckpoint {
            tether: KIND.to_owned(),
            version: checkpoint::VERSION,
            relays: kept
                .iter()
                .map(|&r| {
                    let r = &self.relays[r as usize];
                    SavedRelay {
                        url: r.url.clone(),
                        failures: r.health.failures,
                        hinted_dead: r.health.hinted_dead,
                        tallies: r.tallies,
                    }
                })
                .collect(),
            authors: authors
                .iter()
                .map(|&a| {
                    let a = &self.authors[a as usize];
                    SavedAuthor {
                        key: a.key.clone(),
                        followed: a.followed,
                        outbox: list(&a.outbox),
                        inbox: list(&a.inbox),
                        activity: a.activity,
                    }
                })
                .collect(),
            pairs: pairs
                .into_iter()
                .filter_map(|(a, r, t)| Some((author_at[&a], *relay_at.get(&r)?, t)))
                .collect(),
        }
    }

    /// A router that knows what `saved` learned, running by `config`.
    ///
    /// # Errors
    /// [`CheckpointError::Invalid`] for a checkpoint past `config`'s bounds or inconsistent
    /// in itself (an index out of range, a key or URL that is not one, a tally that is not a
    /// finite, non-negative count); [`CheckpointError::Newer`] and
    /// [`CheckpointError::WrongKind`] as for every checkpoint.
    pub fn restore(
        config: RouterConfig,
        saved: &RouterCheckpoint,
    ) -> Result<Router, CheckpointError> {
        checkpoint::check_header(&saved.tether, saved.version, KIND)?;
        let invalid = |why: String| CheckpointError::Invalid(why);
        if saved.relays.len() > config.max_known_relays {
            return Err(invalid(format!(
                "{} relays, past the bound",
                saved.relays.len()
            )));
        }
        if saved.authors.len() > config.max_authors {
            return Err(invalid(format!(
                "{} authors, past the bound",
                saved.authors.len()
            )));
        }
        let mut router = Router::new(config);
        router.restored = true;
        for relay in &saved.relays {
            let url = relay_url::normalize(&relay.url, true)
                .ok()
                .filter(|u| *u == relay.url)
                .ok_or_else(|| invalid("a relay URL that is not one".into()))?;
            if !finite(&relay.tallies.declared) || !finite(&relay.tallies.undeclared) {
                return Err(invalid(format!("relay {url}: a tally that is no count")));
            }
            let ix = router
                .add_relay(&url, false)
                .ok_or_else(|| invalid("too many relays".into()))?;
            let r = &mut router.relays[ix as usize];
            r.health = Health::restored(relay.failures, relay.hinted_dead);
            r.tallies = relay.tallies;
        }
        // The config's indexers were added first, so the checkpoint's indices are mapped
        // through the URLs.
        let order: Vec<String> = saved.relays.iter().map(|r| r.url.clone()).collect();
        let known: Vec<String> = router.relays.iter().map(|r| r.url.clone()).collect();
        let map = |i: u32| -> Result<u32, CheckpointError> {
            let url = order
                .get(i as usize)
                .ok_or_else(|| invalid(format!("relay index {i} out of range")))?;
            router_ix(&known, url)
        };
        let mut seen = BTreeSet::new();
        for author in &saved.authors {
            if !super::lists::is_hex64(&author.key) || !seen.insert(author.key.clone()) {
                return Err(invalid("an author key that is not one, or twice".into()));
            }
            if !finite(&author.activity) {
                return Err(invalid("an activity that is no count".into()));
            }
            let ix = router
                .author_ix(&author.key)
                .ok_or_else(|| invalid("too many authors".into()))?;
            let outbox = restore_list(author.outbox.as_ref(), &map, router.config.max_list_relays)?;
            let inbox = restore_list(author.inbox.as_ref(), &map, router.config.max_list_relays)?;
            router.authors[ix as usize] = Author {
                key: author.key.clone(),
                outbox,
                inbox,
                activity: author.activity,
                ..Author::default()
            };
            if author.followed {
                router.authors[ix as usize].followed = true;
                router.count_declarations(ix, 1);
            }
        }
        let mut per_author: Vec<usize> = vec![0; router.authors.len()];
        for &(a, r, tally) in &saved.pairs {
            if a as usize >= router.authors.len() || !finite(&tally) {
                return Err(invalid(format!("pair ({a}, {r}) is not one")));
            }
            let r = map(r)?;
            let n = &mut per_author[a as usize];
            *n += 1;
            if *n > router.config.max_pairs_per_author {
                return Err(invalid(format!("author {a}: more pairs than the bound")));
            }
            router.pairs.insert((a, r), tally);
        }
        Ok(router)
    }
}

/// The index `url` has in the restored router (the config's indexers came first).
fn router_ix(known: &[String], url: &str) -> Result<u32, CheckpointError> {
    known
        .iter()
        .position(|u| u == url)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| CheckpointError::Invalid(format!("relay {url} lost")))
}

fn restore_list(
    saved: Option<&SavedList>,
    map: &impl Fn(u32) -> Result<u32, CheckpointError>,
    max: usize,
) -> Result<Option<List>, CheckpointError> {
    let Some(saved) = saved else {
        return Ok(None);
    };
    if saved.write.len() > max || saved.read.len() > max || !super::lists::is_hex64(&saved.id) {
        return Err(CheckpointError::Invalid(
            "a relay list past its bound".into(),
        ));
    }
    Ok(Some(List {
        created_at: saved.created_at,
        id: saved.id.clone(),
        write: saved
            .write
            .iter()
            .map(|&i| map(i))
            .collect::<Result<_, _>>()?,
        read: saved
            .read
            .iter()
            .map(|&i| map(i))
            .collect::<Result<_, _>>()?,
    }))
}

fn finite(t: &Tally) -> bool {
    t.hits.is_finite() && t.misses.is_finite() && t.hits >= 0.0 && t.misses >= 0.0
}
