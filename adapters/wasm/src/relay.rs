//! One relay session on its own: what the C ABI's `tether_relay_*` is, for hosts that keep
//! one socket and want the session's own ids (the determinism transcript is pinned on it).
//! Applications usually want a [`Pool`](crate::pool::Pool) of one instead.

use tether_core::line::nostr::{Line, TransmitLine};
use tether_core::line::{Ids, Limiter};
use tether_core::nostr::{ChallengeId, Priority, RelayCheckpoint, RelaySession, SubscriptionId};
use tether_core::Epoch;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::config::{parse, RelayOptions};
use crate::{instant, keys, text, whole, TetherError};

/// One relay session driven by the host's event loop.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Relay {
    session: RelaySession,
    now: u64,
    peer_errors: Limiter,
}

#[wasm_bindgen]
impl Relay {
    /// A new session; `options` is a JSON object of camelCase settings (absent: defaults).
    ///
    /// # Errors
    /// `InvalidArgument` for options that do not parse or are out of range.
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<String>) -> Result<Relay, TetherError> {
        let options: RelayOptions = parse(options, "relay")?;
        let session = RelaySession::new(options.to_core()?, options.seed);
        Ok(Relay::from_session(session, 0))
    }

    /// A session restored from [`Relay::checkpoint`] text at `nowMs` and `unixSecs`.
    ///
    /// # Errors
    /// `Checkpoint` or `CheckpointNewer` for text this library cannot restore.
    pub fn restore(
        options: Option<String>,
        checkpoint: &str,
        now_ms: f64,
        unix_secs: f64,
    ) -> Result<Relay, TetherError> {
        let options: RelayOptions = parse(options, "relay")?;
        let saved = RelayCheckpoint::from_json(checkpoint.as_bytes())?;
        let unix_secs = whole(unix_secs, "unixSecs")?;
        let session = RelaySession::restore(
            options.to_core()?,
            options.seed,
            &saved,
            instant(now_ms)?,
            unix_secs,
        )?;
        Ok(Relay::from_session(session, whole(now_ms, "nowMs")?))
    }

    /// The session's durable state as JSON text.
    pub fn checkpoint(&self) -> String {
        String::from_utf8(self.session.checkpoint().to_json()).unwrap_or_default()
    }

    /// Tell the session the wall clock: `unixSecs` at `nowMs`.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = setWallClock)]
    pub fn set_wall_clock(&mut self, now_ms: f64, unix_secs: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session
            .set_wall_clock(now, whole(unix_secs, "unixSecs")?);
        Ok(())
    }

    /// Start connecting (an `open` transmit follows).
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    pub fn connect(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.connect(now);
        Ok(())
    }

    /// Let the socket go and stay disconnected.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    pub fn disconnect(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.disconnect(now);
        Ok(())
    }

    /// A lifecycle signal by name (see the crate docs).
    ///
    /// # Errors
    /// `InvalidArgument` for another name.
    pub fn lifecycle(&mut self, now_ms: f64, signal: &str) -> Result<(), TetherError> {
        let signal = crate::lifecycle(signal)?;
        let now = self.at(now_ms)?;
        self.session.handle_lifecycle(now, signal);
        Ok(())
    }

    /// Subscribe with `filters` (a JSON array) at `priority` (higher goes first under a
    /// cap); returns the subscription id.
    ///
    /// # Errors
    /// `InvalidArgument` for filters that do not parse; `Limit` past the bound.
    pub fn subscribe(
        &mut self,
        now_ms: f64,
        filters: &str,
        priority: i32,
    ) -> Result<f64, TetherError> {
        let filters = crate::pool::filter_array(filters)?;
        let now = self.at(now_ms)?;
        let id = self.session.subscribe(now, filters, Priority(priority))?;
        #[allow(clippy::cast_precision_loss)]
        Ok(id.0 as f64)
    }

    /// End a subscription (CLOSE where it is open).
    ///
    /// # Errors
    /// `UnknownId` for a subscription not open.
    pub fn unsubscribe(&mut self, now_ms: f64, sub: f64) -> Result<(), TetherError> {
        let sub = SubscriptionId(whole(sub, "sub")?);
        let now = self.at(now_ms)?;
        Ok(self.session.unsubscribe(now, sub)?)
    }

    /// Publish a signed event; returns its id (hex).
    ///
    /// # Errors
    /// `InvalidArgument` for an event that does not parse; `Limit` for a full outbox.
    pub fn publish(&mut self, now_ms: f64, event: &str) -> Result<String, TetherError> {
        let now = self.at(now_ms)?;
        let id = self.session.publish(now, event)?;
        Ok(keys::hex(&id.0))
    }

    /// Answer the `auth` event's `challenge` with a signed kind 22242; returns its id (hex).
    ///
    /// # Errors
    /// `WrongState` for a superseded challenge or while disconnected.
    pub fn authenticate(
        &mut self,
        now_ms: f64,
        challenge: f64,
        event: &str,
    ) -> Result<String, TetherError> {
        let challenge = ChallengeId(whole(challenge, "challenge")?);
        let now = self.at(now_ms)?;
        let id = self.session.authenticate(now, challenge, event)?;
        Ok(keys::hex(&id.0))
    }

    /// The socket of `epoch` opened.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out; `WrongState` for a second open.
    #[wasm_bindgen(js_name = handleOpen)]
    pub fn handle_open(&mut self, now_ms: f64, epoch: f64) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.session.handle_open(now, epoch)?)
    }

    /// The socket of `epoch` ended; `loss` names how (see the crate docs).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown loss; `UnknownId` for an epoch never handed out.
    #[wasm_bindgen(js_name = handleClose)]
    pub fn handle_close(
        &mut self,
        now_ms: f64,
        epoch: f64,
        loss: &str,
        close_code: Option<u16>,
    ) -> Result<(), TetherError> {
        let loss = crate::socket_loss(loss, close_code)?;
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.session.handle_close(now, epoch, loss)?)
    }

    /// A text frame from the socket of `epoch`.
    ///
    /// # Errors
    /// `UnknownId` for an epoch never handed out; `WrongState` before the open.
    #[wasm_bindgen(js_name = handleFrame)]
    pub fn handle_frame(
        &mut self,
        now_ms: f64,
        epoch: f64,
        frame: &str,
    ) -> Result<(), TetherError> {
        let epoch = Epoch(whole(epoch, "epoch")?);
        let now = self.at(now_ms)?;
        Ok(self.session.handle_frame(now, epoch, frame)?)
    }

    /// The timer armed at [`Relay::poll_timeout`] fired.
    ///
    /// # Errors
    /// `InvalidArgument` for a number that is not whole.
    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now_ms: f64) -> Result<(), TetherError> {
        let now = self.at(now_ms)?;
        self.session.handle_timeout(now);
        Ok(())
    }

    /// The next transmit as JSON, or `undefined`.
    #[wasm_bindgen(js_name = pollTransmit)]
    pub fn poll_transmit(&mut self) -> Option<String> {
        let transmit = self.session.poll_transmit()?;
        Some(text(&TransmitLine::new(&transmit, None)))
    }

    /// The next event as JSON, or `undefined`.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> Option<String> {
        while let Some(event) = self.session.poll_event() {
            let now = self.session.now();
            let line = Line::relay_event(&event, now, None, &Ids);
            if let Some(line) = line.admit(&mut self.peer_errors, now) {
                return Some(text(&line));
            }
        }
        None
    }

    /// When to call [`Relay::handle_timeout`], or `undefined`.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        crate::poll_timeout(false, self.now, self.session.poll_timeout())
    }
}

impl Relay {
    fn from_session(session: RelaySession, now_ms: u64) -> Self {
        Relay {
            session,
            now: now_ms,
            peer_errors: Limiter::default(),
        }
    }

    fn at(&mut self, now_ms: f64) -> Result<tether_core::Instant, TetherError> {
        let now = instant(now_ms)?;
        self.now = self.now.max(whole(now_ms, "nowMs")?);
        Ok(now)
    }
}
