//! Applying routing's plan ([`plan`](super::plan)): the one place the pool turns it into
//! sockets and REQs. Relays no longer wanted close first (freeing their slots), relays
//! wanted open by URL, and each subscription's people are placed on each relay with their
//! window.

use super::*;
use crate::tree::IntoTree;

impl RelayPool {
    /// Run routing again at `now + REROUTE_DELAY`, unless it is due sooner.
    pub(crate) fn schedule_reroute(&mut self, now: Instant) {
        let at = now.saturating_add(REROUTE_DELAY);
        self.schedule_reroute_at(at);
    }

    pub(super) fn schedule_reroute_at(&mut self, at: Instant) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        if routing.reroute_at.is_some_and(|t| t <= at) {
            return;
        }
        let mut slot = routing.reroute_at.take();
        self.timers.set(Deadline::Reroute, &mut slot, Some(at));
        if let Some(routing) = self.routing.as_deref_mut() {
            routing.reroute_at = slot;
        }
    }

    /// Route every routed subscription again: open the relays routing wants, move people
    /// between them (each newcomer asked from when it was last served live), close the
    /// relays no longer wanted, and report what changed.
    pub(crate) fn reroute(&mut self, now: Instant) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let mut slot = routing.reroute_at.take();
        self.timers.set(Deadline::Reroute, &mut slot, None);
        self.expire_held_publishes(now);
        if self.away() {
            // Suspended or offline: what fails now says nothing about the relays, and no
            // relay would be reached. `resume` and `set_online` route again; a publish held
            // meanwhile still ends at its deadline.
            if let Some(at) = self.held_publish_due(true) {
                self.schedule_reroute_at(at.max(now));
            }
            return;
        }
        self.mark_live(now);
        if let Some(routing) = self.routing.as_deref_mut() {
            if now.saturating_duration_since(routing.window_start) >= ROUTER_WINDOW {
                routing.window_start = now;
                routing.router.new_window();
            }
        }
        let publish_urls = self.publish_urls(now);
        let publish_people = self.publish_people();
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let plan = routing.plan(now, publish_urls, &publish_people);
        self.apply(now, plan);
        let next = self
            .routing
            .as_deref()
            .and_then(|o| o.router.poll_timeout());
        if let Some(at) = next {
            self.schedule_reroute_at(at.max(now.saturating_add(REROUTE_DELAY)));
        }
        if let Some(at) = self.held_publish_due(false) {
            self.schedule_reroute_at(at.max(now));
        }
    }

    /// The one place a plan becomes sockets and REQs: relays no longer wanted close first
    /// (their sockets close, no CLOSE is sent on them), freeing their slots for the relays to
    /// open; then each subscription's people are placed, and publishes decided go out.
    fn apply(&mut self, now: Instant, plan: Plan) {
        let unwanted: Vec<RelayId> = self
            .routing
            .as_deref()
            .map(|o| {
                o.url_of
                    .iter()
                    .filter(|(_, url)| !plan.relays.contains(*url))
                    .map(|(&r, _)| r)
                    .collect()
            })
            .unwrap_or_default();
        for relay in unwanted {
            self.drop_people_relay(now, relay);
        }
        let mut ids: BTreeMap<String, RelayId> = BTreeMap::new();
        for url in &plan.relays {
            if let Some(relay) = self.people_relay(now, url) {
                ids.insert(url.clone(), relay);
            }
        }
        for (sub, asks) in plan.asks {
            let desired: BTreeMap<RelayId, BTreeSet<String>> = asks
                .into_iter()
                .filter_map(|(url, people)| Some((*ids.get(&url)?, people)))
                .into_map();
            self.place(now, sub, desired);
            self.report_route(sub, &plan.coverage, &plan.inbox_urls);
        }
        self.send_publishes(now, &ids);
    }

    /// Every person asked by a REQ past its EOSE on an open relay was served live until now.
    pub(super) fn mark_live(&mut self, now: Instant) {
        let Some(unix) = self.wall.map(|w| w.unix_secs(now)) else {
            return;
        };
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        for (sub, routed) in &mut routing.subs {
            let Some(logical) = self.subs.get(sub) else {
                continue;
            };
            for (&relay, placed) in &routed.placed {
                let open = self.relays[relay.0 as usize]
                    .as_deref()
                    .is_some_and(|m| m.session.link().is_open());
                if !open {
                    continue;
                }
                // Only a REQ past its EOSE serves its people live: a newcomer's catch-up
                // may still be under way.
                let answered = placed
                    .chunks
                    .iter()
                    .filter(|(&local, _)| logical.req_answered(relay, local));
                for (_, chunk) in answered {
                    for author in &chunk.authors {
                        routed.live.insert(author.clone(), unix);
                    }
                }
            }
        }
    }

    /// The pool's relay for `url`, opened for routing if it is not yet.
    pub(super) fn people_relay(&mut self, now: Instant, url: &str) -> Option<RelayId> {
        if let Some(&relay) = self.routing.as_deref()?.by_url.get(url) {
            return Some(relay);
        }
        // The application's relay at that URL, or a new one: one socket per URL.
        let relay = match self.relay_at(url) {
            Some(relay) => relay,
            None => self.add_member(now, false, Some(url.to_owned())).ok()?,
        };
        let open = self
            .member(relay)
            .is_some_and(|m| m.session.link().is_open());
        let routing = self.routing.as_deref_mut()?;
        routing.by_url.insert(url.to_owned(), relay);
        routing.url_of.insert(relay, url.to_owned());
        if open {
            // An application's relay already open: its socket is routing's news too.
            routing.opened.insert(relay);
            routing.router.handle_opened(now, url);
        }
        Some(relay)
    }

    /// `relay` left the pool by the application's hand while routing asked it: routing
    /// forgets it and routes again (its people go elsewhere).
    pub(crate) fn people_relay_removed(&mut self, now: Instant, relay: RelayId) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let Some(url) = routing.url_of.remove(&relay) else {
            return;
        };
        routing.by_url.remove(&url);
        routing.opened.remove(&relay);
        for routed in routing.subs.values_mut() {
            routed.placed.remove(&relay);
        }
        self.schedule_reroute(now);
    }

    /// Close a relay routing no longer wants.
    pub(super) fn drop_people_relay(&mut self, now: Instant, relay: RelayId) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let mut asked: Vec<(SubId, SubscriptionId)> = Vec::new();
        for (&sub, routed) in &mut routing.subs {
            if let Some(placed) = routed.placed.remove(&relay) {
                asked.extend(placed.chunks.into_iter().map(|(local, _)| (sub, local)));
            }
        }
        let failing = routing
            .url_of
            .get(&relay)
            .is_some_and(|url| !routing.router.usable(url, now));
        routing.opened.remove(&relay);
        if let Some(url) = routing.url_of.remove(&relay) {
            routing.by_url.remove(&url);
        }
        if self.member(relay).is_some_and(|m| m.app) {
            // The application's relay: routing stops asking it; its socket stays.
            let subs: BTreeSet<SubId> = asked.iter().map(|&(sub, _)| sub).into_set();
            for sub in subs {
                self.relay_gone(sub, relay, Missing::Removed);
            }
            let locals: Vec<SubscriptionId> = asked.into_iter().map(|(_, l)| l).collect();
            self.close_reqs(now, relay, &locals);
            return;
        }
        if failing {
            self.publish_gone(relay, "relay unreachable: routing gave it up");
        }
        let _ = self.remove_relay(now, relay);
    }

    /// Ask each relay of `sub` about exactly `desired` (nobody, on a relay it leaves out).
    pub(super) fn place(
        &mut self,
        now: Instant,
        sub: SubId,
        desired: BTreeMap<RelayId, BTreeSet<String>>,
    ) {
        let Some(routed) = self.routing.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return;
        };
        let relays: BTreeSet<RelayId> = routed
            .placed
            .keys()
            .chain(desired.keys())
            .copied()
            .into_set();
        for relay in relays {
            let want = desired.get(&relay).cloned().unwrap_or_default();
            self.place_on(now, sub, relay, want);
        }
    }

    /// Ask `relay` about exactly `want` for `sub`, re-sending only what must change: a REQ
    /// that asks someone no longer wanted there is closed and the others it asked are asked
    /// again (from when they were last served live); newcomers get REQs of their own; a REQ
    /// that asks only wanted people stays as it is. When churn has left more than twice the
    /// REQs a fresh placement needs, everyone is asked afresh in full chunks.
    pub(super) fn place_on(
        &mut self,
        now: Instant,
        sub: SubId,
        relay: RelayId,
        want: BTreeSet<String>,
    ) {
        let Some(routed) = self
            .routing
            .as_deref_mut()
            .and_then(|o| o.subs.get_mut(&sub))
        else {
            return;
        };
        let mut placed = routed.placed.remove(&relay).unwrap_or_default();
        if placed.authors == want {
            if !want.is_empty() {
                routed.placed.insert(relay, placed);
            }
            return;
        }
        let mut close: Vec<SubscriptionId> = Vec::new();
        let mut ask: BTreeSet<String> = want.difference(&placed.authors).cloned().into_set();
        for (local, chunk) in &placed.chunks {
            if chunk.authors.iter().any(|a| !want.contains(a)) {
                close.push(*local);
                ask.extend(chunk.authors.iter().filter(|a| want.contains(*a)).cloned());
            }
        }
        let reqs = |n: usize| n.div_ceil(split::AUTHOR_CHUNK);
        if placed.chunks.len() - close.len() + reqs(ask.len()) > 2 * reqs(want.len()) + 2 {
            close = placed.chunks.keys().copied().collect();
            ask.clone_from(&want);
        }
        for local in &close {
            placed.chunks.remove(local);
        }
        placed.authors = want;
        self.close_reqs(now, relay, &close);
        self.ask_on(now, sub, relay, &mut placed, &ask);
        if !placed.authors.is_empty() {
            if let Some(routed) = self
                .routing
                .as_deref_mut()
                .and_then(|o| o.subs.get_mut(&sub))
            {
                routed.placed.insert(relay, placed);
            }
        }
        // The closed REQs leave the subscription's answers after the new ones join: the
        // relay has answered once its newcomers' REQs have too.
        for local in close {
            self.req_gone(now, sub, relay, local, None);
        }
    }

    /// CLOSE `locals` on `relay`.
    pub(super) fn close_reqs(&mut self, now: Instant, relay: RelayId, locals: &[SubscriptionId]) {
        let Some(member) = self.member_mut(relay) else {
            return;
        };
        for local in locals {
            member.routes.remove(local);
            let _ = member.session.unsubscribe(now, *local);
        }
        self.settle(now, relay);
    }

    /// Open REQs on `relay` asking `ask` for `sub`, cut to the relay's limits, into `placed`.
    pub(super) fn ask_on(
        &mut self,
        now: Instant,
        sub: SubId,
        relay: RelayId,
        placed: &mut Placed,
        ask: &BTreeSet<String>,
    ) {
        if ask.is_empty() {
            return;
        }
        let Some(routed) = self.routing.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return;
        };
        let routing = self.routing.as_deref().expect("routing is on");
        let url = routing.url_of.get(&relay).map(String::as_str);
        let groups = routed.groups(ask, |author| {
            url.is_some_and(|url| routing.router.has_answered_for(author, url))
        });
        let key = if matches!(routed.want, Want::Inbox(_)) {
            "#p"
        } else {
            "authors"
        };
        let Some(member) = crate::pool::member_in(&mut self.relays, relay) else {
            return;
        };
        // Whole-history asks and window asks go in REQs of their own: only the silence of
        // a whole-history ask is evidence.
        let (windows, whole): (Vec<Group>, Vec<Group>) = groups
            .into_iter()
            .partition(|g| g.since.is_some() && !g.whole);
        let info = member.session.relay_info();
        let reqs = split::reqs(&routed.base, key, &whole, info)
            .into_iter()
            .map(|r| (r, false))
            .chain(
                split::reqs(&routed.base, key, &windows, info)
                    .into_iter()
                    .map(|r| (r, true)),
            )
            .collect::<Vec<_>>();
        for ((filters, asked), window) in reqs {
            let Ok(local) = member.session.subscribe(now, filters, Priority::NORMAL) else {
                // Not asked: left unplaced, so the next routing asks them again.
                for author in &asked {
                    placed.authors.remove(author);
                }
                continue;
            };
            member.routes.insert(local, sub);
            if let Some(logical) = self.subs.get_mut(&sub) {
                logical.add_req(relay, local);
            }
            placed.chunks.insert(
                local,
                Chunk {
                    authors: asked,
                    window,
                },
            );
        }
        self.settle(now, relay);
    }

    /// Report `sub`'s routing if it changed.
    pub(super) fn report_route(&mut self, sub: SubId, coverage: &Coverage, inbox_urls: &[String]) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let url_of = &routing.url_of;
        let lists = routing.lists;
        let subs_placed: BTreeMap<SubId, BTreeSet<RelayId>> = lists
            .and_then(|l| Some((l, routing.subs.get(&l)?.placed.keys().copied().into_set())))
            .into_iter()
            .into_map();
        // The indexers serve every subscription (its people's lists): they are used for it.
        let indexers: BTreeSet<RelayId> = lists
            .and_then(|l| subs_placed.get(&l).cloned())
            .unwrap_or_default();
        let Some(routed) = routing.subs.get_mut(&sub) else {
            return;
        };
        let relays: Vec<(RelayId, String)> = routed
            .placed
            .keys()
            .chain(indexers.iter())
            .into_set()
            .into_iter()
            .filter_map(|r| Some((*r, url_of.get(r)?.clone())))
            .collect();
        let report = match &routed.want {
            Want::Lists => return,
            Want::Feed(people) => {
                let mine: BTreeSet<&String> = people.iter().into_set();
                RouteReport {
                    relays,
                    covered: coverage
                        .covered
                        .iter()
                        .filter(|(a, _)| mine.contains(a))
                        .cloned()
                        .collect(),
                    fallback_only: keep(&coverage.fallback_only, &mine),
                    uncovered: keep(&coverage.uncovered, &mine),
                }
            }
            Want::Inbox(me) => {
                let n = routed.placed.len();
                let declared = inbox_urls.len();
                RouteReport {
                    relays,
                    covered: if n > 0 {
                        vec![(me.clone(), n)]
                    } else {
                        Vec::new()
                    },
                    fallback_only: Vec::new(),
                    uncovered: if n == 0 || declared == 0 {
                        vec![me.clone()]
                    } else {
                        Vec::new()
                    },
                }
            }
        };
        if routed.report.as_ref() == Some(&report) {
            return;
        }
        routed.report = Some(report.clone());
        self.emit(sub, PoolEvent::Routed { sub, report });
    }
}

fn keep(list: &[String], mine: &BTreeSet<&String>) -> Vec<String> {
    list.iter().filter(|a| mine.contains(a)).cloned().collect()
}
