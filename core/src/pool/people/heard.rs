//! What the relay sessions say about subscriptions routed by people: every copy of an event
//! (the router's evidence, before dedup), EOSEs and refusals per REQ, socket health, and the
//! list watch's verified lists. Each turns into the router's input and, where the
//! application is owed one, a pool event.

use super::*;

impl RelayPool {
    /// Whether `sub` is routed by people.
    pub(crate) fn is_by_people(&self, sub: SubId) -> bool {
        self.routing
            .as_deref()
            .is_some_and(|o| o.subs.contains_key(&sub))
    }

    /// An event of a routed subscription, before dedup: whether it matches what was asked.
    pub(crate) fn people_admit(&mut self, sub: SubId, relay: RelayId, raw: &str) -> bool {
        let Some(routed) = self.routing.as_deref().and_then(|o| o.subs.get(&sub)) else {
            return true;
        };
        let fields = Fields::of(raw).filter(|e| matches::matches(&routed.filter, e));
        let Some(fields) = fields else {
            self.count(relay, |s| s.unmatched += 1);
            return false;
        };
        // Every copy is evidence, before dedup: the relay that delivered a note second
        // holds it as surely as the first. A relay list says where an author's content is,
        // not that this relay holds it.
        let list = fields.kind() == OUTBOX_KIND || fields.kind() == INBOX_KIND;
        let now = self.clock.now();
        if let Some(routing) = self.routing.as_deref_mut() {
            if let (Some(url), false) = (routing.url_of.get(&relay), list) {
                routing.router.handle_event(now, url, fields.author());
            }
        }
        true
    }

    /// What the pool's list watch heard, in order and each list after its verdict: a list
    /// goes to the router; an EOSE marks the people it asked as looked up (their lists,
    /// if any, came before it).
    pub(crate) fn lists_heard(&mut self, now: Instant, event: PoolEvent) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        match event {
            PoolEvent::Received { raw, .. } => {
                let applied = matches!(
                    routing.router.handle_list(now, &raw),
                    Ok(crate::router::ListUpdate::Applied { .. })
                );
                if applied {
                    self.schedule_reroute(now);
                }
            }
            PoolEvent::Eose { .. } => {
                let asked = routing.lists_answers.pop_front().unwrap_or_default();
                self.lists_answered(now, &asked);
            }
            _ => {}
        }
    }

    /// `relay` answered EOSE to REQ `local` of routed `sub`: the router hears who it was
    /// asked about, and routing runs again. Returns whether the pool's own list watch took
    /// it: its EOSEs pair with the lists' verdicts, one per REQ, and are no relay's answer
    /// to anyone.
    pub(crate) fn people_eose(
        &mut self,
        now: Instant,
        relay: RelayId,
        local: SubscriptionId,
        sub: SubId,
    ) -> bool {
        let lists = self.is_lists(sub);
        let Some(routing) = self.routing.as_deref_mut() else {
            return false;
        };
        let answered = self
            .subs
            .get(&sub)
            .is_none_or(|l| l.req_answered(relay, local));
        let chunk = routing
            .subs
            .get(&sub)
            .and_then(|r| r.placed.get(&relay)?.chunks.get(&local));
        let (Some(chunk), false) = (chunk, answered) else {
            return lists;
        };
        let asked = chunk.authors.clone();
        match routing.url_of.get(&relay) {
            // An indexer's answer about lists says it is alive, nothing about notes.
            Some(url) if lists => routing.router.handle_eose(now, url, []),
            Some(url) if chunk.window => {
                routing
                    .router
                    .handle_window_eose(now, url, asked.iter().map(String::as_str));
            }
            Some(url) => {
                routing
                    .router
                    .handle_eose(now, url, asked.iter().map(String::as_str));
            }
            None => {}
        }
        self.schedule_reroute(now);
        if !lists {
            return false;
        }
        if let Some(logical) = self.subs.get_mut(&sub) {
            logical.eose(relay, local);
        }
        // Looked up once the lists before this EOSE have their verdicts: it waits in the
        // verification queue behind them.
        let full = self
            .routing
            .as_deref()
            .is_none_or(|r| r.lists_answers.len() >= MAX_LIST_ANSWERS);
        if full {
            // Past the bound the answer is taken now rather than queued: dropping a queued
            // one would pair every later EOSE with the wrong people.
            self.lists_answered(now, &asked);
        } else {
            if let Some(routing) = self.routing.as_deref_mut() {
                routing.lists_answers.push_back(asked);
            }
            self.emit(sub, PoolEvent::Eose { sub, relay });
        }
        true
    }

    /// `relay` gave up REQ `local` of routed `sub`: the router hears it refused, and
    /// routing runs again (its people are asked again, there once the relay's backoff ends
    /// or elsewhere, from when they were last served live). Returns whether the
    /// application hears of it: not of the pool's own list watch, nor of the session's own
    /// re-cut of a REQ its relay's NIP-11 document made too large.
    pub(crate) fn people_closed(
        &mut self,
        now: Instant,
        relay: RelayId,
        local: SubscriptionId,
        sub: SubId,
        reason: &str,
        attempts: u32,
    ) -> bool {
        let lists = self.is_lists(sub);
        let Some(routing) = self.routing.as_deref_mut() else {
            return true;
        };
        // The session gave the REQ up itself when the relay's NIP-11 document lowered its
        // frame size below it (the document came after the REQ was cut): no refusal of the
        // relay's; its people are asked again at once, cut to the new size.
        let too_large = attempts == 0 && is_frame_too_large(reason);
        if let (Some(url), false) = (routing.url_of.get(&relay), too_large) {
            routing.router.handle_refused(now, url, refusal_of(reason));
        }
        if let Some(placed) = routing
            .subs
            .get_mut(&sub)
            .and_then(|r| r.placed.get_mut(&relay))
        {
            if let Some(chunk) = placed.chunks.remove(&local) {
                for author in &chunk.authors {
                    placed.authors.remove(author);
                }
            }
        }
        if too_large {
            self.schedule_reroute_at(now);
        } else {
            self.schedule_reroute(now);
        }
        !too_large && !lists
    }

    /// A routed relay's socket opened or was lost: the router's health input.
    pub(crate) fn people_link(
        &mut self,
        now: Instant,
        relay: RelayId,
        event: &crate::nostr::Event,
    ) {
        let away = self.away();
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let Some(url) = routing.url_of.get(&relay).cloned() else {
            return;
        };
        match event {
            crate::nostr::Event::Connected => {
                routing.opened.insert(relay);
                routing.router.handle_opened(now, &url);
            }
            // A refusal with a retry hint, a cap, an AUTH challenge: the relay speaks, it
            // is alive (the session retries; the router waits no answer from it).
            crate::nostr::Event::RateLimited { .. }
            | crate::nostr::Event::SubscriptionLimit { .. }
            | crate::nostr::Event::AuthChallenge { .. } => {
                routing.router.handle_alive(now, &url);
            }
            crate::nostr::Event::Disconnected {
                why: Disconnect::Lost(loss),
                ..
            } => {
                let local = is_local(*loss) || away;
                let failed = if routing.opened.remove(&relay) {
                    // Closed before its first answer (accept-then-close) is dead too.
                    routing.router.handle_closed(now, &url) && !local
                } else if !local {
                    // Lost before it opened: reset, refused, TLS, timeout alike.
                    routing.router.handle_failed(now, &url);
                    true
                } else {
                    return;
                };
                if failed {
                    // Route at once, before the session's own reconnect: the router, not
                    // the session's backoff, decides whether a failing relay is tried again
                    // (at most `max_attempts` in `retry_window`).
                    self.schedule_reroute_at(now);
                } else {
                    self.schedule_reroute(now);
                }
            }
            _ => {}
        }
    }

    /// Routed `sub` is dropped (its REQs are closed with it): routing forgets it, and
    /// relays it no longer needs close at the next routing.
    pub(crate) fn people_unsubscribe(&mut self, now: Instant, sub: SubId) {
        let Some(routing) = self.routing.as_deref_mut() else {
            return;
        };
        let Some(routed) = routing.subs.remove(&sub) else {
            return;
        };
        if let Want::Feed(people) = &routed.want {
            routing.unfollow_unused(people);
        }
        self.schedule_reroute(now);
    }

    pub(crate) fn is_lists(&self, sub: SubId) -> bool {
        self.routing
            .as_deref()
            .is_some_and(|o| o.lists == Some(sub))
    }
}

/// What the router should make of the reason a relay gave up on a REQ with, classified as
/// the session classifies refusals (every dialect, the `retry in Ns` hint). A relay that
/// gave up for any other reason will not serve this request: for routing, it is blocked.
fn refusal_of(reason: &str) -> Refusal {
    match reason::classify(reason) {
        Class::RateLimited { retry_after } => {
            Refusal::RateLimited(retry_after.unwrap_or(DEFAULT_RATE_LIMIT))
        }
        Class::AuthRequired => Refusal::AuthRequired,
        Class::Retryable | Class::Terminal(_) => Refusal::Blocked,
    }
}

/// Whether `reason` is the relay session's own refusal of a REQ larger than the relay's
/// declared `max_message_length` ([`Error::MessageTooLarge`]).
fn is_frame_too_large(reason: &str) -> bool {
    reason.ends_with("bytes") && reason.contains("exceeds the relay's max_message_length")
}

/// Whether a socket was lost for a cause of this client's own (out of descriptors, a
/// network that changed, a socket that died while the app was away): that says nothing
/// about the relay. Every other loss before the relay answered counts against it.
fn is_local(loss: SocketLoss) -> bool {
    matches!(
        loss,
        SocketLoss::OutOfFiles | SocketLoss::NetworkChanged | SocketLoss::ResumeProbe
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn the_sessions_own_frame_refusal_is_told_from_a_relays_refusal() {
        let own = Error::MessageTooLarge {
            len: 80_861,
            max: 8_192,
        };
        assert!(is_frame_too_large(&own.to_string()));
        assert!(!is_frame_too_large("blocked: too large"));
        assert!(!is_frame_too_large(
            "error: filter exceeds the relay's max_message_length"
        ));
    }
}
