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

    /// Restore routed subscription `sub` with `filter`, caught up from `unix` (the
    /// checkpoint's wall clock); its dedup memory is restored beside it.
    pub(crate) fn restore_by_people(
        &mut self,
        sub: SubId,
        filter: &str,
        unix: u64,
        seen: Seen,
        now: Instant,
    ) -> Result<(), String> {
        let map: Map<String, Value> = serde_json::from_str(filter).map_err(|e| e.to_string())?;
        let want = want_of(&map)?;
        self.follow_and_register(now, Some(sub), map, want)
            .map_err(|e| e.to_string())?;
        if let Some(logical) = self.subs.get_mut(&sub) {
            logical.seen = seen;
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
