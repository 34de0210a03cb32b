//! Liveness hints for routing: NIP-66 relay discovery events (kind 30166) a monitor
//! published, or the application's own word about a relay. A hint weighs a relay's
//! estimate; it never rules a relay in or out (NIP-66: clients must work without it).

use serde_json::Value;

use super::super::{PoolError, RelayPool};
use crate::nostr::Error;
use crate::time::Instant;

/// The kind of a NIP-66 relay discovery event: a monitor saw the relay named by its `d` tag.
pub const RELAY_DISCOVERY_KIND: u64 = 30166;
/// A discovery event at most this old says the relay is alive (1 day).
const FRESH_SECS: u64 = 24 * 3600;
/// A discovery event at least this old says its monitor stopped seeing the relay (3 days):
/// monitors republish the relays they still reach.
const STALE_SECS: u64 = 3 * 24 * 3600;

impl RelayPool {
    /// The application's liveness word on a relay (its own list, a monitor it trusts):
    /// routing weighs it, and never rules a relay out by it.
    pub fn hint_live(&mut self, now: Instant, url: &str, alive: bool) {
        let now = self.clock.observe(now);
        self.start_routing(None);
        if let Some(routing) = self.routing.as_deref_mut() {
            routing.router.hint_live(url, alive);
        }
        self.schedule_reroute(now);
    }

    /// A NIP-66 relay discovery event (kind 30166) the application got from a monitor: one
    /// dated within a day says its relay (the `d` tag) is alive; one three days old or more
    /// says the monitor stopped seeing it. Without the wall clock
    /// ([`RelayPool::set_wall_clock`]) its age is unknown and it says nothing.
    ///
    /// # Errors
    /// [`PoolError::Session`] with [`Error::InvalidEvent`] for an event that is no kind
    /// 30166 naming a relay.
    pub fn handle_liveness(&mut self, now: Instant, event_json: &str) -> Result<(), PoolError> {
        let now = self.clock.observe(now);
        let invalid = |detail: &str| {
            PoolError::Session(Error::InvalidEvent {
                detail: detail.to_owned(),
            })
        };
        let value: Value =
            serde_json::from_str(event_json).map_err(|_| invalid("not a JSON object"))?;
        if value.get("kind").and_then(Value::as_u64) != Some(RELAY_DISCOVERY_KIND) {
            return Err(invalid("not a relay discovery event (kind 30166)"));
        }
        let created_at = value
            .get("created_at")
            .and_then(Value::as_u64)
            .ok_or_else(|| invalid("no created_at"))?;
        let url = value
            .get("tags")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .find(|t| t.first().and_then(Value::as_str) == Some("d"))
            .and_then(|t| t.get(1)?.as_str())
            .ok_or_else(|| invalid("no `d` tag naming the relay"))?
            .to_owned();
        let Some(unix) = self.wall.map(|w| w.unix_secs(now)) else {
            return Ok(());
        };
        let age = unix.saturating_sub(created_at);
        if age <= FRESH_SECS {
            self.hint_live(now, &url, true);
        } else if age >= STALE_SECS {
            self.hint_live(now, &url, false);
        }
        Ok(())
    }
}
