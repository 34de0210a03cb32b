//! tether's [`Router`] as a [`Strategy`]: the core's own code, scored in the same world as
//! the field's algorithms. Each session is a restart: the router is restored from the JSON
//! of the previous session's checkpoint, as `tether req --outbox --state` does.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tether_core::router::{Role, Router, RouterCheckpoint, RouterConfig, Routes};
use tether_core::Instant;

use super::session::{Answer, Ask, Change, Strategy, View};
use super::world::Marker;

/// A day between sessions, on the wall clock the router's evidence decays by.
const SESSION_GAP_SECS: u64 = 86_400;

/// tether's router in the synthetic world.
#[derive(Debug, Default)]
pub struct Tether {
    saved: Option<Vec<u8>>,
    run: Option<Run>,
}

#[derive(Debug)]
struct Run {
    router: Router,
    relay_ix: HashMap<String, usize>,
    author_ix: HashMap<String, usize>,
    /// What each open connection was asked, by relay.
    open: BTreeMap<usize, BTreeSet<usize>>,
}

impl Tether {
    /// A router that has learned nothing yet.
    #[must_use]
    pub fn new() -> Self {
        Tether::default()
    }

    fn config(view: &View<'_>) -> RouterConfig {
        let mut config = RouterConfig::default();
        config.max_relays = view.budget;
        config.indexers = view.indexer_urls().take(1).map(str::to_owned).collect();
        config
    }
}

impl Strategy for Tether {
    fn name(&self) -> String {
        "tether (learned, restored)".into()
    }

    fn start(&mut self, view: &View<'_>) -> Vec<Ask> {
        let config = Tether::config(view);
        let mut router = match &self.saved {
            Some(json) => {
                let saved = RouterCheckpoint::from_json(json).expect("own checkpoint");
                Router::restore(config, &saved).expect("own checkpoint restores")
            }
            None => Router::new(config),
        };
        router.set_wall_clock(
            Instant::ZERO,
            1_700_000_000 + u64::from(view.session) * SESSION_GAP_SECS,
        );
        let keys: Vec<&str> = view.follows.iter().map(|&a| view.pubkey(a)).collect();
        router
            .follow(keys.iter().copied())
            .expect("world keys are hex");
        for &a in view.follows {
            if view.has_list(a) {
                let list = list_json(view, a, view.session);
                router.handle_list(Instant::ZERO, &list).expect("a list");
            }
        }
        let relay_ix = (0..view.relay_count())
            .map(|r| (view.url(r).to_owned(), r))
            .collect();
        let author_ix = view
            .follows
            .iter()
            .map(|&a| (view.pubkey(a).to_owned(), a))
            .collect();
        let mut run = Run {
            router,
            relay_ix,
            author_ix,
            open: BTreeMap::new(),
        };
        // The indexers answered the lists request above: alive, as the pool hears them.
        for url in view.indexer_urls() {
            run.router.handle_opened(Instant::ZERO, url);
            run.router.handle_eose(Instant::ZERO, url, []);
        }
        let routes = run.router.route(Instant::ZERO);
        let changes = run.apply(&routes);
        self.run = Some(run);
        changes
            .into_iter()
            .filter_map(|c| match c {
                Change::Ask(ask) => Some(ask),
                Change::Drop(_) => None,
            })
            .collect()
    }

    fn answered(
        &mut self,
        view: &View<'_>,
        at_ms: u64,
        relay: usize,
        answer: &Answer,
    ) -> Vec<Change> {
        let Some(run) = self.run.as_mut() else {
            return Vec::new();
        };
        let now = Instant::from_millis(at_ms);
        let url = view.url(relay);
        match answer {
            Answer::Events(counts) => {
                run.router.handle_opened(now, url);
                for &(author, n) in counts {
                    for _ in 0..n {
                        run.router.handle_event(now, url, view.pubkey(author));
                    }
                }
                let asked: Vec<&str> = counts.iter().map(|&(a, _)| view.pubkey(a)).collect();
                run.router.handle_eose(now, url, asked);
            }
            Answer::Failed => {
                run.router.handle_failed(now, url);
                run.open.remove(&relay);
            }
        }
        let routes = run.router.route(now);
        run.apply(&routes)
    }

    fn wake_at(&self) -> Option<u64> {
        let at = self.run.as_ref()?.router.poll_timeout()?;
        u64::try_from(at.since_origin().as_millis()).ok()
    }

    fn woke(&mut self, _view: &View<'_>, at_ms: u64) -> Vec<Change> {
        let Some(run) = self.run.as_mut() else {
            return Vec::new();
        };
        let routes = run.router.route(Instant::from_millis(at_ms));
        run.apply(&routes)
    }

    fn end(&mut self, _view: &View<'_>) {
        if let Some(run) = self.run.take() {
            self.saved = Some(run.router.checkpoint().to_json());
        }
    }
}

impl Run {
    /// The changes that turn the open connections into `routes`: drops first, so their
    /// slots are free for the asks.
    fn apply(&mut self, routes: &Routes) -> Vec<Change> {
        let mut wanted: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for route in routes.relays.iter().filter(|r| r.role != Role::Indexer) {
            let Some(&relay) = self.relay_ix.get(&route.url) else {
                continue;
            };
            let authors = route
                .authors
                .iter()
                .filter_map(|k| self.author_ix.get(k).copied());
            wanted.insert(relay, authors.collect());
        }
        let mut changes = Vec::new();
        let gone: Vec<usize> = self
            .open
            .keys()
            .copied()
            .filter(|r| !wanted.contains_key(r))
            .collect();
        for relay in gone {
            self.open.remove(&relay);
            changes.push(Change::Drop(relay));
        }
        for (relay, authors) in wanted {
            let asked = self.open.entry(relay).or_default();
            let new: Vec<usize> = authors.into_iter().filter(|a| asked.insert(*a)).collect();
            if !new.is_empty() {
                changes.push(Change::Ask(Ask {
                    relay,
                    authors: new,
                }));
            }
        }
        changes
    }
}

/// The author's kind 10002 as the indexer serves it, dated by session (the world's lists do
/// not change between sessions, so a restored router finds each one stale).
fn list_json(view: &View<'_>, author: usize, _session: u32) -> String {
    let tags: Vec<String> = view
        .declared(author)
        .iter()
        .map(|d| {
            let url = view.url(d.relay);
            match d.marker {
                Marker::Write => format!(r#"["r","{url}","write"]"#),
                Marker::Read => format!(r#"["r","{url}","read"]"#),
                Marker::Both => format!(r#"["r","{url}"]"#),
            }
        })
        .collect();
    format!(
        r#"{{"id":"{:064x}","pubkey":"{}","created_at":1,"kind":10002,"tags":[{}],"content":"","sig":""}}"#,
        author,
        view.pubkey(author),
        tags.join(",")
    )
}
