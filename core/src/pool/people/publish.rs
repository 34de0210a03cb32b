//! Publishing by outbox: an event goes to its author's write relays and to each p-tagged
//! person's read relays (their DM relays for a gift wrap, kind 1059), found in their relay
//! lists as routing finds them.
//!
//! A publish whose people's lists the pool has not looked up yet waits for the indexers'
//! answer (their EOSE to the lists request asking those people), at most [`LIST_WAIT`]; it
//! then goes to whatever relays the lists name. Its relays are opened as routing's, take
//! their slots from the same budget (after inbox relays, leaving routing one), and stay open
//! until its [`PoolEvent::PublishDone`](super::super::PoolEvent::PublishDone). Each relay's
//! answer is the pool's usual [`PoolEvent::Published`](super::super::PoolEvent::Published)
//! or [`PoolEvent::Rejected`](super::super::PoolEvent::Rejected), by relay id, whose URL is
//! [`RelayPool::relay_url`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use super::super::{PoolError, PublishOutcome, RelayId, RelayPool};
use crate::nostr::message::{EventId, RawEvent};
use crate::nostr::Error;
use crate::router::is_public_key;
use crate::time::Instant;
use crate::tree::IntoTree;

/// Longest a publish waits for its people's relay lists (3 s): past it, the event goes to
/// the relays known then.
pub const LIST_WAIT: Duration = Duration::from_secs(3);
/// Most publishes by outbox waiting or in flight at once (64).
pub const MAX_PUBLISHES: usize = 64;
/// Most p-tagged people whose relays a publish goes to (32, in tag order): a note tagging
/// thousands cannot make the pool watch thousands of lists.
pub const MAX_TAGGED: usize = 32;

/// One publish by outbox.
#[derive(Debug)]
pub(super) struct PendingPublish {
    json: String,
    author: String,
    kind: u64,
    tagged: Vec<String>,
    /// People whose lists were not looked up yet.
    missing: BTreeSet<String>,
    /// When it goes out even if lists are missing.
    ready_at: Instant,
    /// When it is done with no relay if it has not gone out by then (the pool's publish
    /// deadline: the app was away, say).
    expires_at: Instant,
    /// Where it goes, once decided.
    urls: Option<Vec<String>>,
    /// Handed to the pool's fan-out.
    sent: bool,
}

impl RelayPool {
    /// Publish a signed event by outbox: to its author's write relays (kind 10002) and to
    /// each p-tagged person's read relays (their kind 10050 DM relays for a gift wrap), at
    /// most the router's `max_relays`. Lists the pool does not hold yet are fetched from the
    /// indexers first (at most [`LIST_WAIT`]). The relays' answers and the one
    /// [`PoolEvent::PublishDone`](super::super::PoolEvent::PublishDone) come as for
    /// [`RelayPool::publish`]; a publish no list gave a relay to is done with no relay.
    ///
    /// # Errors
    /// [`PoolError::Session`] for an event that does not parse,
    /// [`PoolError::AlreadyPublishing`], [`PoolError::TooManyPublishes`].
    pub fn publish_outbox(&mut self, now: Instant, event_json: &str) -> Result<EventId, PoolError> {
        let now = self.clock.observe(now);
        let invalid = |detail: String| PoolError::Session(Error::InvalidEvent { detail });
        let id = RawEvent::parse(event_json)
            .map_err(|e| invalid(e.to_string()))?
            .id();
        let value: Value = serde_json::from_str(event_json).map_err(|e| invalid(e.to_string()))?;
        let author = value
            .get("pubkey")
            .and_then(Value::as_str)
            .filter(|k| is_public_key(k))
            .ok_or_else(|| invalid("no valid pubkey".into()))?
            .to_owned();
        let kind = value
            .get("kind")
            .and_then(Value::as_u64)
            .ok_or_else(|| invalid("no kind".into()))?;
        let tagged = tagged(&value, &author);
        self.start_routing(None);
        let Some(routing) = self.routing.as_deref_mut() else {
            return Err(invalid("routing is off".into()));
        };
        if self.publishes.contains_key(&id) || routing.publishes.contains_key(&id) {
            return Err(PoolError::AlreadyPublishing(id));
        }
        if routing.publishes.len() >= MAX_PUBLISHES {
            return Err(PoolError::TooManyPublishes { max: MAX_PUBLISHES });
        }
        for person in std::iter::once(&author).chain(&tagged) {
            // Their lists are wanted now; a full author table only means a publish that
            // goes where the lists known already say.
            let _ = routing.router.watch(person);
        }
        let missing = std::iter::once(&author)
            .chain(&tagged)
            .filter(|p| !routing.looked_up.contains(*p))
            .cloned()
            .into_set();
        routing.publishes.insert(
            id,
            PendingPublish {
                json: event_json.to_owned(),
                author,
                kind,
                tagged,
                missing,
                ready_at: now.saturating_add(LIST_WAIT),
                expires_at: now.saturating_add(self.config.publish_deadline),
                urls: None,
                sent: false,
            },
        );
        self.ensure_lists_watch(now)?;
        self.reroute(now);
        if let Some(at) = self.held_publish_due(self.away()) {
            self.schedule_reroute_at(at.max(now));
        }
        Ok(id)
    }

    /// When routing must run next for the publishes held: the earliest time one goes out
    /// without its lists (`away`: the earliest it expires, as none goes out meanwhile).
    pub(super) fn held_publish_due(&self, away: bool) -> Option<Instant> {
        let routing = self.routing.as_deref()?;
        routing
            .publishes
            .values()
            .filter(|h| !h.sent)
            .map(|h| {
                if away {
                    h.expires_at
                } else {
                    h.ready_at.min(h.expires_at)
                }
            })
            .min()
    }

    /// Publishes that never went out by their deadline (routing waited while the app was
    /// away) are done, with no relay: nothing was sent.
    pub(super) fn expire_held_publishes(&mut self, now: Instant) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let expired: Vec<EventId> = routing
            .publishes
            .iter()
            .filter(|(_, h)| !h.sent && now >= h.expires_at)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            routing.publishes.remove(&id);
            self.events.push_back(super::super::PoolEvent::PublishDone {
                id,
                outcome: PublishOutcome::default(),
            });
        }
    }

    /// The indexers answered the lists request asking `asked`: publishes waiting only on
    /// them go out now.
    pub(super) fn lists_answered(&mut self, now: Instant, asked: &[String]) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        if routing.looked_up.len() + asked.len() > routing.router.config().max_authors {
            // Bounded: forgetting who was looked up only makes a later publish wait.
            routing.looked_up.clear();
        }
        routing.looked_up.extend(asked.iter().cloned());
        let mut ready = false;
        for held in routing.publishes.values_mut().filter(|h| h.urls.is_none()) {
            held.missing.retain(|p| !asked.contains(p));
            ready |= held.missing.is_empty();
        }
        if ready {
            self.schedule_reroute_at(now);
        }
    }

    /// The pool's fan-out of `id` is done: relays only it wanted close at the next routing.
    pub(crate) fn routing_publish_done(&mut self, id: EventId) {
        let now = self.clock.now();
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        if routing.publishes.remove(&id).is_some() {
            self.schedule_reroute(now);
        }
    }

    /// Decide where each publish that is ready goes; the URLs of every publish decided and
    /// not done, which routing keeps open.
    pub(super) fn publish_urls(&mut self, now: Instant) -> Vec<String> {
        let Some(routing) = self.routing.as_deref_mut() else {
            return Vec::new();
        };
        let router = &routing.router;
        let mut out: Vec<String> = Vec::new();
        for held in routing.publishes.values_mut() {
            let ready = held.missing.is_empty() || now >= held.ready_at;
            if held.urls.is_none() && ready {
                let tagged: Vec<&str> = held.tagged.iter().map(String::as_str).collect();
                held.urls = Some(router.publish_relays(&held.author, held.kind, &tagged));
            }
            for url in held.urls.iter().flatten() {
                if !out.contains(url) {
                    out.push(url.clone());
                }
            }
        }
        out
    }

    /// Whether `id` is a publish by outbox (not saved in a checkpoint).
    pub(crate) fn is_outbox_publish(&self, id: EventId) -> bool {
        self.routing
            .as_deref()
            .is_some_and(|o| o.publishes.contains_key(&id))
    }

    /// The URLs of the relays of `outcome` that routing opened.
    pub(crate) fn people_urls(&self, outcome: &PublishOutcome) -> Vec<(RelayId, String)> {
        let Some(routing) = self.routing.as_deref() else {
            return Vec::new();
        };
        let relays = outcome
            .accepted
            .iter()
            .chain(outcome.rejected.iter().map(|(r, _)| r))
            .chain(&outcome.pending);
        let mut out: Vec<(RelayId, String)> = relays
            .filter_map(|r| Some((*r, routing.url_of.get(r)?.clone())))
            .collect();
        crate::sort::sort(&mut out);
        out.dedup();
        out
    }

    /// The people whose lists waiting publishes need (the lists watch asks them too).
    pub(super) fn publish_people(&self) -> Vec<String> {
        let Some(routing) = self.routing.as_deref() else {
            return Vec::new();
        };
        let mut out: BTreeSet<String> = BTreeSet::new();
        for held in routing.publishes.values().filter(|h| h.urls.is_none()) {
            out.insert(held.author.clone());
            out.extend(held.tagged.iter().cloned());
        }
        out.into_iter().collect()
    }

    /// Hand each decided publish to the pool's fan-out, on the relays routing opened for it
    /// (`ids`; a URL past the budget has none).
    pub(super) fn send_publishes(&mut self, now: Instant, ids: &BTreeMap<String, RelayId>) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let mut due: Vec<(EventId, String, Vec<RelayId>)> = Vec::new();
        for (id, held) in &mut routing.publishes {
            let (Some(urls), false) = (&held.urls, held.sent) else {
                continue;
            };
            held.sent = true;
            let relays = urls.iter().filter_map(|u| ids.get(u).copied()).collect();
            due.push((*id, held.json.clone(), relays));
        }
        for (id, json, relays) in due {
            if self.publish(now, &json, Some(&relays)).is_err() {
                // Nothing was sent (the application published the same event meanwhile):
                // this publish has nothing left to wait for.
                self.routing_publish_done(id);
            }
        }
    }
}

/// The distinct valid keys `event` p-tags, the author's left out, at most [`MAX_TAGGED`].
fn tagged(event: &Value, author: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let tags = event.get("tags").and_then(Value::as_array);
    for tag in tags.into_iter().flatten().filter_map(Value::as_array) {
        if out.len() >= MAX_TAGGED {
            break;
        }
        if tag.first().and_then(Value::as_str) != Some("p") {
            continue;
        }
        let Some(key) = tag.get(1).and_then(Value::as_str) else {
            continue;
        };
        if is_public_key(key) && key != author && !out.iter().any(|k| k == key) {
            out.push(key.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_people_are_distinct_valid_bounded_and_not_the_author() {
        let me = "a".repeat(64);
        let you = "b".repeat(64);
        let mut tags = vec![
            serde_json::json!(["p", you]),
            serde_json::json!(["p", me]),
            serde_json::json!(["p", you]),
            serde_json::json!(["p", "junk"]),
            serde_json::json!(["e", "c".repeat(64)]),
        ];
        for n in 0..40 {
            tags.push(serde_json::json!(["p", format!("{n:064x}")]));
        }
        let event = serde_json::json!({ "tags": tags });
        let got = tagged(&event, &me);
        assert_eq!(got.len(), MAX_TAGGED);
        assert_eq!(got[0], you);
        assert_eq!(got[1], format!("{:064x}", 0));
        assert_eq!(got[MAX_TAGGED - 1], format!("{:064x}", MAX_TAGGED - 2));
    }
}
