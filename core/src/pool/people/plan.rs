//! Routing's plan: which relays it wants now, by URL, and who each routed subscription asks
//! on each. Routing decides it from its own state (the router's routes, the inbox relays, the
//! relays of publishes under way); the pool applies it in one place
//! ([`RelayPool::reroute`](super::RelayPool::reroute)). The router's own choice of relays
//! is [`router::plan`](crate::router).

use super::*;
use crate::tree::IntoTree;

/// What routing wants now.
#[derive(Debug)]
pub(super) struct Plan {
    /// The relays wanted, by URL: every other relay routing holds closes.
    pub(super) relays: BTreeSet<String>,
    /// Per routed subscription (each one, asking nobody included), who is asked on each
    /// wanted relay.
    pub(super) asks: BTreeMap<SubId, BTreeMap<String, BTreeSet<String>>>,
    /// The router's coverage of the people, for the route reports.
    pub(super) coverage: Coverage,
    /// The inbox relays asked, for the inboxes' route reports.
    pub(super) inbox_urls: Vec<String>,
}

impl Routing {
    /// The plan now: the inbox relays first, counted against the budget, then the usable
    /// relays of `publish_urls`, leaving the router at least one; the router's routes fill
    /// the rest. The pool's list watch asks the indexers about everyone followed, every
    /// inbox's owner and `publish_people`.
    pub(super) fn plan(
        &mut self,
        now: Instant,
        publish_urls: Vec<String>,
        publish_people: &[String],
    ) -> Plan {
        let budget = self.router.config().max_relays;
        let inbox_urls = self.inbox_urls(budget);
        let mut reserved = inbox_urls.clone();
        for url in publish_urls {
            // A publish relay obeys the same health rule as a route: one that failed waits
            // out its backoff (and its publish hears it gave up), never redialed beside it.
            let usable = self.router.usable(&url, now);
            if usable && !reserved.contains(&url) && reserved.len() + 1 < budget {
                reserved.push(url);
            }
        }
        self.router
            .set_max_relays(budget.saturating_sub(reserved.len()).max(1));
        let routes = self.router.route(now);
        self.router.set_max_relays(budget);
        // The relays wanted, by URL: who to ask there, for feeds; whether it is an indexer.
        let mut wanted: BTreeMap<String, (Role, BTreeSet<String>)> = BTreeMap::new();
        for route in routes.relays {
            // A relay chosen with nobody to ask (its every pair under the ask threshold)
            // would hold a socket for nothing.
            if route.role == Role::Indexer || !route.authors.is_empty() {
                wanted.insert(
                    route.url,
                    (route.role, route.authors.into_iter().into_set()),
                );
            }
        }
        for url in &reserved {
            wanted
                .entry(url.clone())
                .or_insert((Role::Assigned, BTreeSet::new()));
        }
        let asks = self.asks(&wanted, &inbox_urls, publish_people);
        Plan {
            relays: wanted.into_keys().into_set(),
            asks,
            coverage: routes.coverage,
            inbox_urls,
        }
    }

    /// Each inbox's DM relays, at most [`MAX_INBOX_RELAYS`] each, leaving the budget one.
    fn inbox_urls(&self, budget: usize) -> Vec<String> {
        let mut inbox_urls: Vec<String> = Vec::new();
        for routed in self.subs.values() {
            let Want::Inbox(me) = &routed.want else {
                continue;
            };
            let mine = self.router.inbox_relays(me);
            for url in mine.into_iter().take(MAX_INBOX_RELAYS) {
                if !inbox_urls.iter().any(|u| u == url) && inbox_urls.len() + 1 < budget {
                    inbox_urls.push(url.to_owned());
                }
            }
        }
        inbox_urls
    }

    /// Who each routed subscription asks on each `wanted` relay.
    fn asks(
        &self,
        wanted: &BTreeMap<String, (Role, BTreeSet<String>)>,
        inbox_urls: &[String],
        publish_people: &[String],
    ) -> BTreeMap<SubId, BTreeMap<String, BTreeSet<String>>> {
        let followed: Vec<String> = self.router.followed().map(str::to_owned).collect();
        let inbox_owners: Vec<String> = self
            .subs
            .values()
            .filter_map(|r| match &r.want {
                Want::Inbox(me) => Some(me.clone()),
                _ => None,
            })
            .collect();
        let mut asks = BTreeMap::new();
        for (&sub, routed) in &self.subs {
            let mut on: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (url, (role, authors)) in wanted {
                let asked: BTreeSet<String> = match &routed.want {
                    Want::Feed(people) => people
                        .iter()
                        .filter(|p| authors.contains(*p))
                        .cloned()
                        .into_set(),
                    Want::Inbox(me) if inbox_urls.contains(url) => BTreeSet::from([me.clone()]),
                    Want::Inbox(_) => BTreeSet::new(),
                    Want::Lists if *role == Role::Indexer => followed
                        .iter()
                        .chain(&inbox_owners)
                        .chain(publish_people)
                        .cloned()
                        .into_set(),
                    Want::Lists => BTreeSet::new(),
                };
                if !asked.is_empty() {
                    on.insert(url.clone(), asked);
                }
            }
            asks.insert(sub, on);
        }
        asks
    }
}
