//! The relay pool: many relays, one logical subscription across them, dedup, outcomes,
//! verification, routing by people, publishing and checkpoints. One relay is a pool of one.
//!
//! The host owns one WebSocket per relay. Every transmit names the `relay` it is for (and its
//! `url` when the pool knows it), and every socket input takes the relay and the `epoch` of
//! the `open` transmit it belongs to: input for an epoch that relay let go is ignored, input
//! for one never handed out is an `UnknownId` error.
//!
//! With `verify` set, an event is delivered only after it was checked, and the relay lists
//! routing by people reads always are: call [`Pool::verify_queued`] after each input to
//! check every queued copy here with libsecp256k1, or take them with [`Pool::poll_verify`]
//! and answer each with [`Pool::handle_verified`].

use tether_core::line::nostr::{Line, TransmitLine, VerifyLine};
use tether_core::line::{Ids, Label, Limiter};
use tether_core::nostr::{ChallengeId, Filter, RelayInfo};
use tether_core::pool::{PoolCheckpoint, RelayId, RelayPool, SubId, VerifyTicket};
use tether_core::Epoch;
use tether_verify::Verifier;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::config::PoolOptions;
use crate::{instant, keys, text, whole, ErrorKind, TetherError};

/// A relay pool driven by the host's event loop.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Pool {
    pool: RelayPool,
    /// The latest `nowMs` seen: what `pollTimeout` says while output is held.
    now: u64,
    peer_errors: Limiter,
    invalid: Limiter,
    /// Built at the first `verifyQueued`: a context costs more than a check.
    verifier: Option<Verifier>,
}

#[wasm_bindgen]
impl Pool {
    /// A new pool; `options` is a JSON object of camelCase settings (absent: defaults).
    ///
    /// # Errors
    /// `InvalidArgument` for options that do not parse or are out of range.
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<String>) -> Result<Pool, TetherError> {
        let (config, seed) = PoolOptions::parse(options)?;
        Ok(Pool::from_pool(RelayPool::new(config, seed), 0))
    }

    /// A pool restored from [`Pool::checkpoint`] text, at `nowMs` and the wall clock
    /// `unixSecs`.
    ///
    /// # Errors
    /// `Checkpoint` or `CheckpointNewer` for text this library cannot restore;
    /// `InvalidArgument` for bad options.
    pub fn restore(
        options: Option<String>,
        checkpoint: &str,
        now_ms: f64,
        unix_secs: f64,
    ) -> Result<Pool, TetherError> {
        let (config, seed) = PoolOptions::parse(options)?;
        let saved = PoolCheckpoint::from_json(checkpoint.as_bytes())?;
        let now = instant(now_ms)?;
        let pool = RelayPool::restore(config, seed, &saved, now, whole(unix_secs, "unixSecs")?)?;
        Ok(Pool::from_pool(pool, whole(now_ms, "nowMs")?))
    }

    /// The pool's durable state as JSON text (the core's checkpoint format, the same a Rust
    /// driver or the C ABI writes).
    pub fn checkpoint(&self) -> String {
        String::from_utf8(self.pool.checkpoint().to_json()).unwrap_or_default()
    }

    /// Tell the pool the wall clock: `unixSecs` at `nowMs`.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = setWallClock)]
    pub fn set_wall_clock(&mut self, now_ms: f64, unix_secs: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.pool.set_wall_clock(now, whole(unix_secs, "unixSecs")?);
        Ok(())
    }

    /// A lifecycle signal: `suspended`, `resumed`, `network_changed`, `network_gone`,
    /// `online`, `offline`.
    ///
    /// # Errors
    /// `InvalidArgument` for another name.
    pub fn lifecycle(&mut self, now_ms: f64, signal: &str) -> Result<(), TetherError> {
        let signal = crate::lifecycle(signal)?;
        let now = self.at(now_ms)?;
        self.pool.handle_lifecycle(now, signal);
        Ok(())
    }

    /// Add a relay and return its id. With `url`, the relay is the one for that normalised
    /// URL (routing by people reuses it rather than dialing a second socket); the pool then
    /// names it in its transmits.
    ///
    /// # Errors
    /// `Limit` past `maxRelays`; `InvalidArgument` for a URL that is not a relay URL.
    #[wasm_bindgen(js_name = addRelay)]
    pub fn add_relay(&mut self, now_ms: f64, url: Option<String>) -> Result<u32, TetherError> {
        let now = self.at(now_ms)?;
        let relay = match url {
            Some(url) => self.pool.add_relay_url(now, &url)?,
            None => self.pool.add_relay(now)?,
        };
        Ok(relay.0)
    }

    /// Name the URL of a relay the pool holds without one: after [`Pool::restore`], each
    /// relay the application added (a checkpoint never saves an application's URL, which may
    /// carry credentials). It is then the one relay at that URL, as if added with it:
    /// routing by people asks it on its socket rather than opening a second. Naming a relay
    /// by the URL it has does nothing.
    ///
    /// # Errors
    /// `UnknownId` for a relay not in the pool; `InvalidArgument` for no relay URL, or when
    /// the relay has another URL or another relay has this one.
    #[wasm_bindgen(js_name = nameRelay)]
    pub fn name_relay(&mut self, relay: u32, url: &str) -> Result<(), TetherError> {
        Ok(self.pool.name_relay(RelayId(relay), url)?)
    }

    /// Remove a relay: its subscriptions there close and its socket is let go.
    ///
    /// # Errors
    /// `UnknownId` for a relay not in the pool.
    #[wasm_bindgen(js_name = removeRelay)]
    pub fn remove_relay(&mut self, now_ms: f64, relay: u32) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        Ok(self.pool.remove_relay(now, RelayId(relay))?)
    }

    /// Subscribe on every relay the application added, with `filters` (a JSON array of
    /// filter objects); returns the subscription id.
    ///
    /// # Errors
    /// `InvalidArgument` for filters that do not parse; `Limit` past the bound.
    pub fn subscribe(&mut self, now_ms: f64, filters: &str) -> Result<f64, TetherError> {
        let filters = filter_array(filters)?;
        let now = self.at(now_ms)?;
        Ok(sub_number(self.pool.subscribe(now, filters)?))
    }

    /// Subscribe with filters per relay: `routing` is a JSON array of
    /// `{"relay": id, "filters": [...]}`.
    ///
    /// # Errors
    /// `InvalidArgument` for routing that does not parse; `UnknownId` for a relay not in
    /// the pool; `Limit` past the bound.
    #[wasm_bindgen(js_name = subscribeRouted)]
    pub fn subscribe_routed(&mut self, now_ms: f64, routing: &str) -> Result<f64, TetherError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Route<'a> {
            relay: u32,
            #[serde(borrow)]
            filters: Vec<&'a serde_json::value::RawValue>,
        }
        let routes: Vec<Route<'_>> = serde_json::from_str(routing).map_err(|e| {
            TetherError::invalid(format!(
                "routing is not a JSON array of {{\"relay\",\"filters\"}}: {e}"
            ))
        })?;
        let routing = routes
            .into_iter()
            .map(|r| Ok((RelayId(r.relay), filters(&r.filters)?)))
            .collect::<Result<Vec<_>, TetherError>>()?;
        let now = self.at(now_ms)?;
        Ok(sub_number(self.pool.subscribe_routed(now, routing)?))
    }

    /// Subscribe by people: `filter` (one JSON filter object with `authors`, or `#p` for
    /// inboxes) is routed to each person's relays from their relay lists.
    ///
    /// # Errors
    /// `InvalidArgument` for a filter that does not parse or names no one; `Limit` past the
    /// bound.
    #[wasm_bindgen(js_name = subscribeOutbox)]
    pub fn subscribe_outbox(&mut self, now_ms: f64, filter: &str) -> Result<f64, TetherError> {
        let filter = Filter::new(filter)
            .map_err(|e| TetherError::from(tether_core::nostr::Error::InvalidFilter(e)))?;
        let now = self.at(now_ms)?;
        Ok(sub_number(self.pool.subscribe_outbox(now, filter)?))
    }

    /// A relay list (kind 10002 or 10050) the application learned elsewhere.
    ///
    /// # Errors
    /// `InvalidArgument` for an event that is not a relay list.
    #[wasm_bindgen(js_name = handleRelayList)]
    pub fn handle_relay_list(&mut self, now_ms: f64, event: &str) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_relay_list(now, event)?)
    }

    /// A liveness report (NIP-66 kind 30166) the application learned elsewhere.
    ///
    /// # Errors
    /// `InvalidArgument` for an event that is not one.
    #[wasm_bindgen(js_name = handleLiveness)]
    pub fn handle_liveness(&mut self, now_ms: f64, event: &str) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_liveness(now, event)?)
    }

    /// The application's own word on whether a relay URL is alive.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = hintLive)]
    pub fn hint_live(&mut self, now_ms: f64, url: &str, alive: bool) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.pool.hint_live(now, url, alive);
        Ok(())
    }

    /// End a subscription everywhere (CLOSE where it is open).
    ///
    /// # Errors
    /// `UnknownId` for a subscription not open.
    pub fn unsubscribe(&mut self, now_ms: f64, sub: f64) -> Result<(), TetherError> {
        let sub = SubId(whole(sub, "sub")?);
        let now = self.at(now_ms)?;
        Ok(self.pool.unsubscribe(now, sub)?)
    }

    /// Publish a signed event to `relays` (ids), or to every relay the application added;
    /// returns its id (hex). The outcome is one `publish_done` event.
    ///
    /// # Errors
    /// `InvalidArgument` for an event that does not parse; `UnknownId` for a relay not in
    /// the pool; `Limit` past the bound or for an event already being published.
    pub fn publish(
        &mut self,
        now_ms: f64,
        event: &str,
        relays: Option<Vec<u32>>,
    ) -> Result<String, TetherError> {
        let targets: Option<Vec<RelayId>> =
            relays.map(|ids| ids.into_iter().map(RelayId).collect());
        let now = self.at(now_ms)?;
        let id = self.pool.publish(now, event, targets.as_deref())?;
        Ok(keys::hex(&id.0))
    }

    /// Publish a signed event by people: to its author's write relays and the read (or
    /// inbox) relays of the people it tags; returns its id (hex).
    ///
    /// # Errors
    /// As [`Pool::publish`].
    #[wasm_bindgen(js_name = publishOutbox)]
    pub fn publish_outbox(&mut self, now_ms: f64, event: &str) -> Result<String, TetherError> {
        let now = self.at(now_ms)?;
        let id = self.pool.publish_outbox(now, event)?;
        Ok(keys::hex(&id.0))
    }

    /// Answer a relay's `auth` event (its `relay` and `challenge`) with a signed kind 22242;
    /// returns the AUTH event's id (hex).
    ///
    /// # Errors
    /// `WrongState` for a challenge superseded or a relay disconnected; `UnknownId` for a
    /// relay not in the pool.
    pub fn authenticate(
        &mut self,
        now_ms: f64,
        relay: u32,
        challenge: f64,
        event: &str,
    ) -> Result<String, TetherError> {
        let challenge = ChallengeId(whole(challenge, "challenge")?);
        let now = self.at(now_ms)?;
        let id = self
            .pool
            .authenticate(now, RelayId(relay), challenge, event)?;
        Ok(keys::hex(&id.0))
    }

    /// A relay's NIP-11 document (when a `fetch_info` transmit asked): returns what the
    /// session applies, as JSON, or `{"error": ...}` for a document that does not parse.
    ///
    /// # Errors
    /// `UnknownId` for a relay not in the pool.
    #[wasm_bindgen(js_name = applyRelayInfo)]
    pub fn apply_relay_info(
        &mut self,
        now_ms: f64,
        relay: u32,
        document: &str,
    ) -> Result<String, TetherError> {
        let now = self.at(now_ms)?;
        match RelayInfo::parse(document.as_bytes()) {
            Ok(info) => Ok(text(&self.pool.apply_relay_info(
                now,
                RelayId(relay),
                &info,
            )?)),
            Err(e) => Ok(text(&serde_json::json!({ "error": e.to_string() }))),
        }
    }

    /// The socket of `relay`'s `epoch` opened.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out; `WrongState` for a second open.
    #[wasm_bindgen(js_name = handleOpen)]
    pub fn handle_open(&mut self, now_ms: f64, relay: u32, epoch: f64) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_open(now, RelayId(relay), epoch)?)
    }

    /// The socket of `relay`'s `epoch` ended: `loss` names how (see the crate docs), with
    /// the WebSocket close code for `closed_by_peer`.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown loss; `UnknownId` for an epoch never handed out.
    #[wasm_bindgen(js_name = handleClose)]
    pub fn handle_close(
        &mut self,
        now_ms: f64,
        relay: u32,
        epoch: f64,
        loss: &str,
        close_code: Option<u16>,
    ) -> Result<(), TetherError> {
        let loss = crate::socket_loss(loss, close_code)?;
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_close(now, RelayId(relay), epoch, loss)?)
    }

    /// A text frame from `relay`'s `epoch`.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out; `WrongState` before the open.
    #[wasm_bindgen(js_name = handleFrame)]
    pub fn handle_frame(
        &mut self,
        now_ms: f64,
        relay: u32,
        epoch: f64,
        frame: &str,
    ) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_frame(now, RelayId(relay), epoch, frame)?)
    }

    /// A text frame from `relay`'s `epoch` as the socket delivered it, UTF-8 bytes (Node's
    /// `ws` hands over a `Buffer`): copied into the wasm in one block, where a string is
    /// re-encoded a character at a time. Bytes that are not UTF-8 (a text frame never is,
    /// the socket checks) reach the core with replacement characters (U+FFFD), where a broken
    /// id, key or structure is a peer error as in any malformed frame.
    ///
    /// # Errors
    /// As [`Pool::handle_frame`].
    #[wasm_bindgen(js_name = handleFrameBytes)]
    pub fn handle_frame_bytes(
        &mut self,
        now_ms: f64,
        relay: u32,
        epoch: f64,
        frame: &[u8],
    ) -> Result<(), TetherError> {
        match std::str::from_utf8(frame) {
            Ok(text) => self.handle_frame(now_ms, relay, epoch, text),
            Err(_) => self.handle_frame(now_ms, relay, epoch, &String::from_utf8_lossy(frame)),
        }
    }

    /// A binary frame of `len` bytes (NIP-01 has none: a peer error).
    ///
    /// # Errors
    /// As [`Pool::handle_frame`].
    #[wasm_bindgen(js_name = handleBinary)]
    pub fn handle_binary(
        &mut self,
        now_ms: f64,
        relay: u32,
        epoch: f64,
        len: u32,
    ) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self
            .pool
            .handle_binary(now, RelayId(relay), epoch, len as usize)?)
    }

    /// A pong answering the session's ping.
    ///
    /// # Errors
    /// As [`Pool::handle_frame`].
    #[wasm_bindgen(js_name = handlePong)]
    pub fn handle_pong(&mut self, now_ms: f64, relay: u32, epoch: f64) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_pong(now, RelayId(relay), epoch)?)
    }

    /// The host stopped (or resumed) reading `relay`'s socket because the application is
    /// not pulling; silence while paused is not the relay's.
    ///
    /// # Errors
    /// `UnknownId` for a relay not in the pool.
    #[wasm_bindgen(js_name = handleReadPaused)]
    pub fn handle_read_paused(
        &mut self,
        now_ms: f64,
        relay: u32,
        paused: bool,
    ) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        Ok(self.pool.handle_read_paused(now, RelayId(relay), paused)?)
    }

    /// The timer armed at [`Pool::poll_timeout`] fired.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.pool.handle_timeout(now);
        Ok(())
    }

    /// The next transmit (`open`, `send`, `close`, `fetch_info`, ...) as JSON, or
    /// `undefined`.
    #[wasm_bindgen(js_name = pollTransmit)]
    pub fn poll_transmit(&mut self) -> Option<String> {
        let (relay, transmit) = self.pool.poll_transmit()?;
        let label = Label::Id(relay.0.into());
        Some(text(&TransmitLine::pool(
            &transmit,
            label,
            self.pool.relay_url(relay),
        )))
    }

    /// The next event for the application as JSON, or `undefined`.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> Option<String> {
        while let Some(event) = self.pool.poll_event() {
            let now = self.pool.now();
            let line = Line::pool_event(&event, now, &Ids);
            let limiter = match line {
                Line::Invalid { .. } => &mut self.invalid,
                _ => &mut self.peer_errors,
            };
            if let Some(line) = line.admit(limiter, now) {
                return Some(text(&line));
            }
        }
        None
    }

    /// Every event ready now, in order: [`Pool::poll_event`] without a boundary crossing
    /// per event (what a driver reading thousands of events a second wants).
    #[wasm_bindgen(js_name = pollEvents)]
    pub fn poll_events(&mut self) -> Vec<String> {
        std::iter::from_fn(|| self.poll_event()).collect()
    }

    /// Check every queued event copy here (libsecp256k1) and hand the verdicts to the pool;
    /// returns how many were checked. Call it after every input even without `verify`: the
    /// relay lists routing by people reads are always verified.
    #[wasm_bindgen(js_name = verifyQueued)]
    pub fn verify_queued(&mut self, now_ms: f64) -> Result<u32, TetherError> {
        let now = self.at(now_ms)?;
        let mut checked = 0;
        while let Some(request) = self.pool.poll_verify() {
            let verifier = self.verifier.get_or_insert_with(Verifier::new);
            let verdict = verifier.verify(&request.raw).map_err(|why| why.to_string());
            // The ticket was just handed out, so the pool awaits it.
            let _ = self.pool.handle_verified(now, request.ticket, verdict);
            checked += 1;
        }
        Ok(checked)
    }

    /// The next event copy to verify elsewhere (a worker) as JSON (`ticket`, `relay`, `id`,
    /// `event`), or `undefined`; answer with [`Pool::handle_verified`].
    #[wasm_bindgen(js_name = pollVerify)]
    pub fn poll_verify(&mut self) -> Option<String> {
        let request = self.pool.poll_verify()?;
        Some(text(&VerifyLine::new(&request)))
    }

    /// The verdict on a `pollVerify` ticket: `reason` absent delivers the event, present
    /// drops it as invalid for that reason.
    ///
    /// # Errors
    /// `UnknownId` for a ticket not awaited.
    #[wasm_bindgen(js_name = handleVerified)]
    pub fn handle_verified(
        &mut self,
        now_ms: f64,
        ticket: f64,
        reason: Option<String>,
    ) -> Result<(), TetherError> {
        let ticket = VerifyTicket(whole(ticket, "ticket")?);
        let now = self.at(now_ms)?;
        let verdict = reason.map_or(Ok(()), Err);
        Ok(self.pool.handle_verified(now, ticket, verdict)?)
    }

    /// When to call [`Pool::handle_timeout`] (milliseconds on the host's clock), or
    /// `undefined` when nothing is pending.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        crate::poll_timeout(false, self.now, self.pool.poll_timeout())
    }

    /// A relay's counters as JSON.
    ///
    /// # Errors
    /// `UnknownId` for a relay not in the pool.
    #[wasm_bindgen(js_name = relayStats)]
    pub fn relay_stats(&self, relay: u32) -> Result<String, TetherError> {
        let Some(stats) = self.pool.relay_stats(RelayId(relay)) else {
            return Err(TetherError::new(
                ErrorKind::UnknownId,
                format!("no relay {relay} in this pool"),
            ));
        };
        Ok(text(&stats))
    }

    /// Whether `relay` may be dialed only at public addresses: a relay routing opened from a
    /// stranger's relay list. A host that resolves names checks every address the name
    /// resolves to with [`is_private_ip`](crate::keys::is_private_ip) before it dials, so a
    /// name pointing into the network is refused as its address in the URL would be; the
    /// core says which relays (the indexers are exempt, and every relay when an indexer is
    /// itself on a private network).
    #[wasm_bindgen(js_name = publicOnly)]
    pub fn public_only(&self, relay: u32) -> bool {
        self.pool.dials_public_only(RelayId(relay))
    }

    /// The URL the pool knows `relay` by (given to `addRelay`, or from a relay list), or
    /// `undefined`.
    #[wasm_bindgen(js_name = relayUrl)]
    pub fn relay_url(&self, relay: u32) -> Option<String> {
        self.pool.relay_url(RelayId(relay)).map(str::to_owned)
    }
}

impl Pool {
    fn from_pool(pool: RelayPool, now_ms: u64) -> Self {
        Pool {
            pool,
            now: now_ms,
            peer_errors: Limiter::default(),
            invalid: Limiter::default(),
            verifier: None,
        }
    }

    fn at(&mut self, now_ms: f64) -> Result<tether_core::Instant, TetherError> {
        let now = instant(now_ms)?;
        self.now = self.now.max(whole(now_ms, "nowMs")?);
        Ok(now)
    }
}

fn sub_number(sub: SubId) -> f64 {
    // Subscription ids count up from 0 by one per subscribe: far below 2^53.
    #[allow(clippy::cast_precision_loss)]
    let n = sub.0 as f64;
    n
}

/// A JSON array of filter objects.
pub(crate) fn filter_array(text: &str) -> Result<Vec<Filter>, TetherError> {
    let list: Vec<&serde_json::value::RawValue> = serde_json::from_str(text)
        .map_err(|e| TetherError::invalid(format!("filters are not a JSON array: {e}")))?;
    filters(&list)
}

fn filters(list: &[&serde_json::value::RawValue]) -> Result<Vec<Filter>, TetherError> {
    list.iter()
        .map(|raw| Filter::new(raw.get()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tether_core::nostr::Error::InvalidFilter(e).into())
}
