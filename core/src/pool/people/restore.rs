//! Routed subscriptions across a restart: their filters into a pool checkpoint, and back.

use super::*;

impl RelayPool {
    /// The routed subscriptions and their filters, for a checkpoint (the pool's own list
    /// watch is made again on restore).
    pub(crate) fn people_filters(&self) -> Vec<(u64, String)> {
        self.routing
            .as_deref()
            .map(|o| {
                o.subs
                    .iter()
                    .filter(|(_, r)| r.want != Want::Lists)
                    .map(|(s, r)| (s.0, Value::Object(r.filter.clone()).to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether routing asks people on `relay` (it is routing's, opened or the
    /// application's): saved with its URL.
    pub(crate) fn routes_people_on(&self, relay: RelayId) -> bool {
        self.routing
            .as_deref()
            .is_some_and(|o| o.url_of.contains_key(&relay))
    }

    /// Who each REQ of routed `sub` asks, for a checkpoint.
    pub(crate) fn people_placed(&self, sub: SubId) -> Vec<SavedReq> {
        let Some(routed) = self.routing.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return Vec::new();
        };
        if routed.want == Want::Lists {
            return Vec::new();
        }
        let mut saved = Vec::new();
        for (relay, placed) in &routed.placed {
            for (local, chunk) in &placed.chunks {
                saved.push(SavedReq(
                    relay.0,
                    local.0,
                    chunk.authors.clone(),
                    chunk.window,
                ));
            }
        }
        saved
    }

    /// A restored relay routing asked, at `url`: routing's again. Whether routing is on.
    pub(crate) fn restore_people_relay(&mut self, relay: RelayId, url: &str) -> bool {
        let Some(routing) = self.routing.as_deref_mut() else {
            return false;
        };
        routing.by_url.insert(url.to_owned(), relay);
        routing.url_of.insert(relay, url.to_owned());
        true
    }

    /// Restore routed subscription `sub` with `filter`, caught up from `unix` (the
    /// checkpoint's wall clock) where its people are placed anew; its dedup memory is
    /// restored beside it, and its REQs on the restored relays (`placed`) resume there,
    /// each with its session's catch-up.
    pub(crate) fn restore_by_people(
        &mut self,
        sub: SubId,
        filter: &str,
        unix: u64,
        seen: Seen,
        placed: &[SavedReq],
        now: Instant,
    ) -> Result<(), String> {
        let map: Map<String, Value> = serde_json::from_str(filter).map_err(|e| e.to_string())?;
        let want = want_of(&map)?;
        self.follow_and_register(now, Some(sub), map, want)
            .map_err(|e| e.to_string())?;
        if let Some(logical) = self.subs.get_mut(&sub) {
            logical.seen = seen;
        }
        for SavedReq(relay, local, authors, window) in placed {
            let (relay, local) = (RelayId(*relay), SubscriptionId(*local));
            let serves = self
                .member(relay)
                .is_some_and(|m| m.routes.get(&local) == Some(&sub));
            let Some(routing) = self.routing.as_deref_mut() else {
                return Err("routed with no router".into());
            };
            let Some(routed) = routing.subs.get_mut(&sub) else {
                return Err("not registered".into());
            };
            if !serves || !routing.url_of.contains_key(&relay) {
                return Err(format!(
                    "a REQ on relay {}, which does not serve it",
                    relay.0
                ));
            }
            let asks = |author: &String| match &routed.want {
                Want::Feed(people) => people.contains(author),
                Want::Inbox(me) => author == me,
                Want::Lists => false,
            };
            if authors.is_empty() || !authors.iter().all(asks) {
                return Err(format!("REQ {local} asks someone it does not follow"));
            }
            let at = routed.placed.get_or_default(relay);
            at.authors.extend(authors.iter().cloned());
            let chunk = Chunk {
                authors: authors.clone(),
                window: *window,
            };
            if at.chunks.insert(local, chunk).is_some() {
                return Err(format!("REQ {local} saved twice"));
            }
            if let Some(logical) = self.subs.get_mut(&sub) {
                logical.add_req(relay, local);
            }
        }
        if let Some(routed) = self
            .routing
            .as_deref_mut()
            .and_then(|o| o.subs.get_mut(&sub))
        {
            routed.restored_at = Some(unix);
        }
        Ok(())
    }

    /// After a restore: watch the lists again and route.
    pub(crate) fn restart_routing(&mut self, now: Instant) -> Result<(), PoolError> {
        if self.routing.as_deref().is_none_or(|o| o.subs.is_empty()) {
            return Ok(());
        }
        self.ensure_lists_watch(now)?;
        self.reroute(now);
        Ok(())
    }
}
