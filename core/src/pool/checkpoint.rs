//! [`PoolCheckpoint`]: what a [`RelayPool`] keeps across a restart, and restoring from it.
//!
//! A pool's checkpoint is each relay session's [`RelayCheckpoint`] under its [`RelayId`],
//! plus what only the pool knows: which relay subscription serves which logical one, each
//! logical subscription's dedup memory across relays and whether its outcome was reported,
//! the publishes still waiting for relays' answers, and events held for verification.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::dedup::Seen;
use super::logical::{Logical, Targets};
use super::publish::Fanout;
use super::{Deadline, Member, PoolConfig, PublishOutcome, RelayId, RelayPool, SubId};
use crate::checkpoint::{self, hex_id, CheckpointError};
use crate::nostr::message::{EventId, RawEvent};
use crate::nostr::{Filter, RelayCheckpoint, RelaySession, SubscriptionId};
use crate::router::RouterCheckpoint;
use crate::time::Instant;
use crate::tree::IntoTree;

/// The kind a pool's checkpoint says it is.
const KIND: &str = "pool";

/// A [`RelayPool`]'s durable state: plain, versioned data (see
/// [`checkpoint`](mod@crate::checkpoint) for the format's rules).
///
/// # What it holds
/// - every relay's [`RelayCheckpoint`] under its [`RelayId`] (the driver keeps its own map
///   from id to URL for the relays it added); the relays routing by people holds are among
///   them with their URLs, so a restored subscription by people resumes on them, each REQ
///   with its exact catch-up (an application's URL is not saved: it may carry credentials);
/// - every logical subscription: its targets (all relays with their filters, or the relays
///   it was routed to), the ids it delivered across relays (its dedup memory, with each id's
///   bytes summary and `seen_on`), and whether its outcome was reported (it is not reported
///   again, except for one by people: its outcome is this run's, as routing checks every
///   restored relay again); for one by people, who each of its REQs asks;
/// - the publishes still waiting for some relay's answer, with the answers already in: each
///   relay's outbox sends the event again and the aggregate is reported once;
/// - events held for verification and not yet delivered: verified again after the restore.
///
/// # What it never holds
/// What [`RelayCheckpoint`] leaves out, and the pool's per-relay counters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolCheckpoint {
    tether: String,
    version: u32,
    /// By relay id; `None` for an id free for the next relay.
    relays: Vec<Option<SavedMember>>,
    subscriptions: Vec<SavedLogical>,
    next_sub: u64,
    publishes: Vec<SavedPublish>,
    held: Vec<SavedCopy>,
    /// Routing by people: what the router learned, and the wall clock the subscriptions by
    /// people catch up from where they are placed anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outbox: Option<SavedOutbox>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedOutbox {
    router: RouterCheckpoint,
    /// The wall clock when the checkpoint was taken (0 unknown).
    unix: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedMember {
    session: RelayCheckpoint,
    /// `(the session's subscription, the logical subscription it serves)`.
    routes: Vec<(u64, u64)>,
    /// Its URL, normalised, for a relay routing by people holds (an application's URL is
    /// never saved: it may carry credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    /// Routing by people opened it (the application did not add it).
    #[serde(default, skip_serializing_if = "is_false")]
    opened: bool,
    /// Routing by people asks it about people.
    #[serde(default, skip_serializing_if = "is_false")]
    routing: bool,
}

/// One REQ of a subscription by people: `[relay, its session's subscription, the people it
/// asks, whether it asks from a catch-up window]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct SavedReq(
    pub(crate) u32,
    pub(crate) u64,
    pub(crate) Vec<String>,
    pub(crate) bool,
);

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedLogical {
    id: u64,
    /// The filters of a subscription on every relay; `None` for a routed one.
    everywhere: Option<Vec<Box<RawValue>>>,
    /// The filter of a subscription by people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outbox: Option<Box<RawValue>>,
    /// `(relay, its session's subscription)` for each relay serving it.
    relays: Vec<(u32, u64)>,
    /// Who each REQ of a subscription by people asks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    placed: Vec<SavedReq>,
    reported: bool,
    /// Delivered ids, oldest first.
    seen: Vec<SavedSeen>,
}

/// `[id, bytes summary, [relays]]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedSeen(#[serde(with = "hex_id")] EventId, u64, Vec<u32>);

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedPublish {
    #[serde(with = "hex_id")]
    id: EventId,
    pending: Vec<u32>,
    accepted: Vec<u32>,
    rejected: Vec<(u32, String)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SavedCopy {
    sub: u64,
    relay: u32,
    event: Box<RawValue>,
}

impl PoolCheckpoint {
    /// The checkpoint as JSON (the same bytes for the same state).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        checkpoint::to_json(self)
    }

    /// Read a checkpoint written by [`PoolCheckpoint::to_json`].
    ///
    /// # Errors
    /// [`CheckpointError`] when it is not a pool checkpoint or comes from a newer format.
    pub fn from_json(json: &[u8]) -> Result<PoolCheckpoint, CheckpointError> {
        checkpoint::from_json(json, KIND)
    }

    /// The ids of the application's relays, in order: those a driver names when it
    /// restores (the relays routing by people opened carry their URLs).
    pub fn relays(&self) -> impl Iterator<Item = RelayId> + '_ {
        self.relays
            .iter()
            .enumerate()
            .filter(|(_, m)| m.as_ref().is_some_and(|m| !m.opened))
            .filter_map(|(i, _)| u32::try_from(i).ok().map(RelayId))
    }

    /// The logical subscriptions: each one's id and, for one on every relay, its filters as
    /// one JSON array (`None` for a routed one).
    pub fn subscriptions(&self) -> impl Iterator<Item = (SubId, Option<String>)> + '_ {
        self.subscriptions.iter().map(|s| {
            let filters = s.everywhere.as_ref().map(|f| {
                let parts: Vec<&str> = f.iter().map(|r| r.get()).collect();
                format!("[{}]", parts.join(","))
            });
            (SubId(s.id), filters)
        })
    }
}

impl PoolCheckpoint {
    /// A pool of one relay (id 0) from that relay session's own checkpoint: each of its
    /// subscriptions becomes the logical subscription of the same id, on every relay, its
    /// outcome already reported. A host that ran one relay as a session and now runs it as a
    /// pool of one goes on from where the session stopped.
    ///
    /// # Errors
    /// [`CheckpointError::Invalid`] when a subscription's filters are not a JSON array.
    pub fn of_one_relay(session: RelayCheckpoint) -> Result<PoolCheckpoint, CheckpointError> {
        let mut subscriptions = Vec::new();
        let mut routes = Vec::new();
        for (id, filters) in session.subscriptions() {
            let everywhere: Vec<Box<RawValue>> = serde_json::from_str(filters)
                .map_err(|e| CheckpointError::Invalid(format!("{id}'s filters: {e}")))?;
            routes.push((id.0, id.0));
            subscriptions.push(SavedLogical {
                id: id.0,
                everywhere: Some(everywhere),
                relays: vec![(0, id.0)],
                reported: true,
                seen: Vec::new(),
                outbox: None,
                placed: Vec::new(),
            });
        }
        Ok(PoolCheckpoint {
            tether: KIND.into(),
            version: checkpoint::VERSION,
            next_sub: subscriptions.iter().map(|s| s.id).max().unwrap_or(0),
            subscriptions,
            relays: vec![Some(SavedMember {
                session,
                routes,
                url: None,
                opened: false,
                routing: false,
            })],
            publishes: Vec::new(),
            held: Vec::new(),
            outbox: None,
        })
    }

    /// Whether `relay` will catch `sub` up after the restore (it had been live there): its
    /// `caught_up` follows the EOSE. Otherwise that relay's EOSE is the whole answer.
    #[must_use]
    pub fn catches_up(&self, sub: SubId, relay: RelayId) -> bool {
        let Some(Some(member)) = self.relays.get(relay.0 as usize) else {
            return false;
        };
        member
            .routes
            .iter()
            .filter(|&&(_, logical)| logical == sub.0)
            .any(|&(local, _)| member.session.catches_up(SubscriptionId(local)))
    }
}

impl RelayPool {
    /// Its durable state now (see [`PoolCheckpoint`]). Taking one changes nothing.
    #[must_use]
    pub fn checkpoint(&self) -> PoolCheckpoint {
        let by_people: BTreeMap<u64, String> = self.people_filters().into_iter().into_map();
        let held = self.held.undelivered();
        let held_ids: BTreeSet<(SubId, EventId)> =
            held.iter().map(|&(sub, _, id, _)| (sub, id)).into_set();
        PoolCheckpoint {
            tether: KIND.into(),
            version: checkpoint::VERSION,
            relays: self
                .relays
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let routing = self.routes_people_on(RelayId(i as u32));
                    m.as_deref()
                        .map(|m| save_member(m, routing, |sub| !self.is_lists(sub)))
                })
                .collect(),
            subscriptions: self
                .subs
                .iter()
                .filter(|(&id, _)| !self.is_by_people(id) || by_people.contains_key(&id.0))
                .map(|(&id, logical)| {
                    let mut saved = save_logical(id, logical, &held_ids);
                    saved.outbox = by_people
                        .get(&id.0)
                        .and_then(|f| RawValue::from_string(f.clone()).ok());
                    saved.placed = self.people_placed(id);
                    saved
                })
                .collect(),
            next_sub: self.next_sub,
            // A publish by outbox is not saved: it is decided on the lists of the moment.
            publishes: self
                .publishes
                .iter()
                .filter(|(id, _)| !self.is_outbox_publish(**id))
                .map(|(&id, fanout)| save_publish(id, fanout))
                .collect(),
            // The pool's own list watch is not saved: it asks again after a restore.
            held: held
                .into_iter()
                .filter(|&(sub, ..)| !self.is_by_people(sub) || by_people.contains_key(&sub.0))
                .filter_map(|(sub, relay, _, raw)| {
                    Some(SavedCopy {
                        sub: sub.0,
                        relay: relay.0,
                        event: RawValue::from_string(raw.to_owned()).ok()?,
                    })
                })
                .collect(),
            outbox: self.router().map(|router| SavedOutbox {
                router: router.checkpoint(),
                unix: self.wall.map_or(0, |w| w.unix_secs(self.clock.now())),
            }),
        }
    }

    /// A pool from `checkpoint`, at `now` when the wall clock reads `unix_secs`, with every
    /// relay connecting: each relay session restores as
    /// [`RelaySession::restore`] says (its subscriptions catch up from the checkpoint's time,
    /// its unacknowledged publishes go again), each logical subscription keeps its dedup
    /// memory across relays, an outcome already reported is not reported again, and one
    /// that was not gets a new deadline.
    ///
    /// # Errors
    /// [`CheckpointError`] when it is of another kind, from a newer format, or contradicts
    /// itself (a route to a subscription that does not exist, more relays or subscriptions
    /// than `config` allows, a relay's own checkpoint that does not restore).
    pub fn restore(
        config: PoolConfig,
        seed: u64,
        checkpoint: &PoolCheckpoint,
        now: Instant,
        unix_secs: u64,
    ) -> Result<RelayPool, CheckpointError> {
        checkpoint::check_header(&checkpoint.tether, checkpoint.version, KIND)?;
        let invalid = |what: String| CheckpointError::Invalid(what);
        if checkpoint.relays.len() > config.max_relays {
            return Err(invalid(format!(
                "more than max_relays {}",
                config.max_relays
            )));
        }
        if checkpoint.subscriptions.len() > config.max_subscriptions {
            return Err(invalid(format!(
                "more than max_subscriptions {}",
                config.max_subscriptions
            )));
        }
        let mut pool = RelayPool::new(config, seed);
        pool.set_wall_clock(now, unix_secs);
        let now = pool.clock.now();
        for (index, saved) in checkpoint.relays.iter().enumerate() {
            let member = match saved {
                Some(saved) => Some(Box::new(pool.restore_member(saved, now, unix_secs)?)),
                None => None,
            };
            pool.relays.push(member);
            if pool.relays[index].is_none() {
                pool.free.push(u32::try_from(index).unwrap_or(u32::MAX));
            }
        }
        pool.free.reverse();
        if let Some(saved) = &checkpoint.outbox {
            let router = crate::router::Router::restore(pool.config.router.clone(), &saved.router)?;
            pool.start_routing(Some(router));
        }
        for (index, saved) in checkpoint.relays.iter().enumerate() {
            let Some(saved) = saved else { continue };
            let relay = RelayId(u32::try_from(index).unwrap_or(u32::MAX));
            pool.restore_url(relay, saved)?;
        }
        for saved in &checkpoint.subscriptions {
            if let Some(filter) = &saved.outbox {
                let unix = checkpoint.outbox.as_ref().map_or(0, |o| o.unix);
                pool.restore_outbox_logical(saved, filter.get(), unix, now)?;
                continue;
            }
            pool.restore_logical(saved, now)?;
        }
        pool.check_routes()?;
        pool.drop_unrouted(now);
        pool.next_sub = checkpoint
            .next_sub
            .max(pool.subs.keys().last().map_or(0, |s| s.0));
        for saved in &checkpoint.publishes {
            pool.restore_publish(saved, now)?;
        }
        for copy in &checkpoint.held {
            pool.restore_copy(copy)?;
        }
        let relays: Vec<RelayId> = pool.relay_ids().collect();
        for relay in relays {
            if let Some(member) = pool.member_mut(relay) {
                member.session.connect(now);
            }
            pool.settle(now, relay);
        }
        pool.restart_routing(now)
            .map_err(|e| CheckpointError::Invalid(format!("routing: {e}")))?;
        Ok(pool)
    }

    fn restore_outbox_logical(
        &mut self,
        saved: &SavedLogical,
        filter: &str,
        unix: u64,
        now: Instant,
    ) -> Result<(), CheckpointError> {
        let invalid =
            |what: String| CheckpointError::Invalid(format!("subscription {}: {what}", saved.id));
        if saved.id == 0 || self.subs.contains_key(&SubId(saved.id)) || self.routing.is_none() {
            return Err(invalid("saved twice, or by people with no router".into()));
        }
        let mut seen = Seen::new(self.config.dedup_capacity, self.config.seen_on_max);
        for SavedSeen(event, bytes, relays) in &saved.seen {
            seen.restore_delivered(*event, *bytes, relays.iter().map(|&r| RelayId(r)).collect());
        }
        // Its outcome is owed again even if an earlier run reported one: routing checks
        // every restored relay again, and only their answers say when the restored
        // subscription is caught up.
        self.restore_by_people(SubId(saved.id), filter, unix, seen, &saved.placed, now)
            .map_err(invalid)
    }

    fn restore_member(
        &mut self,
        saved: &SavedMember,
        now: Instant,
        unix_secs: u64,
    ) -> Result<Member, CheckpointError> {
        let session = RelaySession::restore_shared(
            Arc::clone(&self.relay_config),
            self.rng.next_u64(),
            &saved.session,
            now,
            unix_secs,
        )?;
        let local: BTreeSet<SubscriptionId> =
            session.subscriptions().iter().map(|v| v.id).into_set();
        let mut routes = BTreeMap::new();
        for &(sub, logical) in &saved.routes {
            let sub = SubscriptionId(sub);
            if !local.contains(&sub) || routes.insert(sub, SubId(logical)).is_some() {
                return Err(CheckpointError::Invalid(format!(
                    "a route from {sub}, which its relay does not hold once"
                )));
            }
        }
        Ok(Member::new(session, routes))
    }

    /// `relay`'s URL, as saved: the pool's one relay per URL, and routing's relays.
    fn restore_url(&mut self, relay: RelayId, saved: &SavedMember) -> Result<(), CheckpointError> {
        let invalid = |what: &str| CheckpointError::Invalid(format!("relay {}: {what}", relay.0));
        if saved.opened && !saved.routing {
            return Err(invalid("opened by routing, which does not hold it"));
        }
        let Some(url) = &saved.url else {
            return match saved.routing {
                true => Err(invalid("routing's, with no URL")),
                false => Ok(()),
            };
        };
        if self.by_url.insert(url.clone(), relay).is_some() {
            return Err(invalid("a URL saved twice"));
        }
        if let Some(member) = self.member_mut(relay) {
            member.url = Some(url.clone());
            member.app = !saved.opened;
        }
        if saved.routing && !self.restore_people_relay(relay, url) {
            return Err(invalid("routing's, with no router"));
        }
        Ok(())
    }

    fn restore_logical(
        &mut self,
        saved: &SavedLogical,
        now: Instant,
    ) -> Result<(), CheckpointError> {
        let id = SubId(saved.id);
        let invalid =
            |what: &str| CheckpointError::Invalid(format!("subscription {}: {what}", id.0));
        let targets = match &saved.everywhere {
            Some(filters) if filters.is_empty() => return Err(invalid("no filters")),
            Some(filters) => Targets::All(
                filters
                    .iter()
                    .map(|f| Filter::new(f.get()))
                    .collect::<Result<Vec<Filter>, _>>()
                    .map_err(|e| invalid(&e.to_string()))?,
            ),
            None => Targets::Routed,
        };
        let mut seen = Seen::new(self.config.dedup_capacity, self.config.seen_on_max);
        for SavedSeen(event, bytes, relays) in &saved.seen {
            seen.restore_delivered(*event, *bytes, relays.iter().map(|&r| RelayId(r)).collect());
        }
        let mut logical = Logical::new(targets, seen);
        for &(relay, local) in &saved.relays {
            let relay = RelayId(relay);
            let local = SubscriptionId(local);
            let routed = self
                .member(relay)
                .is_some_and(|m| m.routes.get(&local) == Some(&id));
            if !routed || logical.relays.contains_key(&relay) {
                return Err(invalid(
                    "a relay that does not serve it, or serves it twice",
                ));
            }
            logical.add_relay(relay, Some(local));
        }
        if saved.reported {
            logical.mark_reported();
        } else {
            let at = now.saturating_add(self.config.eose_deadline);
            self.timers
                .set(Deadline::Outcome(id), &mut logical.deadline, Some(at));
        }
        if self.subs.insert(id, logical).is_some() {
            return Err(invalid("saved twice"));
        }
        Ok(())
    }

    /// A relay session's subscription no logical one claims (the pool's own list watch,
    /// made again) is dropped before it is sent again.
    fn drop_unrouted(&mut self, now: Instant) {
        for member in self.relays.iter_mut().flatten() {
            let orphans: Vec<SubscriptionId> = member
                .session
                .subscriptions()
                .iter()
                .map(|v| v.id)
                .filter(|local| !member.routes.contains_key(local))
                .collect();
            for local in orphans {
                let _ = member.session.unsubscribe(now, local);
            }
        }
    }

    /// Every route leads to a subscription that counts its relay.
    fn check_routes(&self) -> Result<(), CheckpointError> {
        for (index, member) in self.relays.iter().enumerate() {
            let Some(member) = member else { continue };
            let relay = RelayId(u32::try_from(index).unwrap_or(u32::MAX));
            for (&local, sub) in &member.routes {
                let counted = self
                    .subs
                    .get(sub)
                    .is_some_and(|l| l.reqs(relay).any(|l| l == local));
                if !counted {
                    return Err(CheckpointError::Invalid(format!(
                        "relay {} routes {local} to subscription {}, which does not count it",
                        relay.0, sub.0
                    )));
                }
            }
        }
        Ok(())
    }

    fn restore_publish(
        &mut self,
        saved: &SavedPublish,
        now: Instant,
    ) -> Result<(), CheckpointError> {
        // Answers already in may be from relays removed since; a pending one must be here.
        let known = |relays: &[u32]| relays.iter().all(|&r| self.member(RelayId(r)).is_some());
        if !known(&saved.pending) {
            return Err(CheckpointError::Invalid(format!(
                "publish {} names a relay the pool does not have",
                saved.id
            )));
        }
        let mut fanout = Fanout {
            pending: saved.pending.iter().map(|&r| RelayId(r)).into_set(),
            outcome: PublishOutcome {
                accepted: saved.accepted.iter().map(|&r| RelayId(r)).collect(),
                rejected: saved
                    .rejected
                    .iter()
                    .map(|(r, why)| (RelayId(*r), why.clone()))
                    .collect(),
                pending: Vec::new(),
                urls: Vec::new(),
            },
            deadline: None,
        };
        let at = now.saturating_add(self.config.publish_deadline);
        self.timers
            .set(Deadline::Publish(saved.id), &mut fanout.deadline, Some(at));
        self.publishes.insert(saved.id, fanout);
        Ok(())
    }

    /// An event held for verification at the checkpoint arrives again from its relay.
    fn restore_copy(&mut self, copy: &SavedCopy) -> Result<(), CheckpointError> {
        let (sub, relay) = (SubId(copy.sub), RelayId(copy.relay));
        // A subscription by people may hold a copy from a relay routing has let go of since:
        // it is verified and delivered in the name of the relay that sent it.
        let relay_known = self.member(relay).is_some() || self.is_by_people(sub);
        if !self.subs.contains_key(&sub) || !relay_known {
            return Err(CheckpointError::Invalid(format!(
                "a held event for subscription {} from relay {}, which the pool does not have",
                sub.0, relay.0
            )));
        }
        let event = RawEvent::parse(copy.event.get())
            .map_err(|e| CheckpointError::Invalid(format!("a held event: {e}")))?;
        self.deliver(sub, relay, event.id(), event.json().to_owned());
        Ok(())
    }
}

/// `member` as saved, with its routes to the subscriptions `saved` keeps (the pool's own
/// list watch is made again after a restore; its REQs there are dropped then).
fn save_member(member: &Member, routing: bool, saved: impl Fn(SubId) -> bool) -> SavedMember {
    SavedMember {
        session: member.session.checkpoint(),
        routes: member
            .routes
            .iter()
            .filter(|(_, s)| saved(**s))
            .map(|(l, s)| (l.0, s.0))
            .collect(),
        // Only routing's relays: an application's URL may carry credentials (userinfo, a
        // token in the query), and its driver names it again on restore.
        url: member.url.clone().filter(|_| routing),
        opened: !member.app,
        routing,
    }
}

fn save_logical(id: SubId, logical: &Logical, held: &BTreeSet<(SubId, EventId)>) -> SavedLogical {
    SavedLogical {
        id: id.0,
        everywhere: match &logical.targets {
            Targets::All(filters) => Some(
                filters
                    .iter()
                    .filter_map(|f| RawValue::from_string(f.json().to_owned()).ok())
                    .collect(),
            ),
            Targets::Routed | Targets::People => None,
        },
        outbox: None,
        // A subscription by people is placed afresh by routing after a restore.
        relays: match logical.targets {
            Targets::People => Vec::new(),
            _ => logical
                .relays
                .keys()
                .filter_map(|&r| Some((r.0, logical.reqs(r).next()?.0)))
                .collect(),
        },
        placed: Vec::new(),
        reported: logical.reported(),
        seen: logical
            .seen
            .delivered()
            .filter(|(event, _, _)| !held.contains(&(id, *event)))
            .map(|(event, bytes, relays)| {
                SavedSeen(event, bytes, relays.iter().map(|r| r.0).collect())
            })
            .collect(),
    }
}

fn save_publish(id: EventId, fanout: &Fanout) -> SavedPublish {
    SavedPublish {
        id,
        pending: fanout.pending.iter().map(|r| r.0).collect(),
        accepted: fanout.outcome.accepted.iter().map(|r| r.0).collect(),
        rejected: fanout
            .outcome
            .rejected
            .iter()
            .map(|(r, why)| (r.0, why.clone()))
            .collect(),
    }
}
