//! A pool checkpoint read without restoring it: what a host asks of the text it saved (which
//! subscriptions it holds, which relay catches which one up) before or beside a restore, so
//! that no host reads the core's checkpoint format itself.

use tether_core::nostr::RelayCheckpoint;
use tether_core::pool::{PoolCheckpoint, RelayId, SubId};
use tether_core::CheckpointError;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::{whole, TetherError};

/// A parsed pool checkpoint.
#[wasm_bindgen]
#[derive(Debug)]
pub struct SavedPool {
    inner: PoolCheckpoint,
}

#[wasm_bindgen]
impl SavedPool {
    /// Read checkpoint text. With `ofOneRelay`, a relay session's checkpoint (what a
    /// one-relay host saved before it ran one relay as a pool of one) is taken as a pool of
    /// that one relay, its subscriptions the pool's of the same ids, their outcomes already
    /// reported.
    ///
    /// # Errors
    /// `Checkpoint` or `CheckpointNewer` for text that is neither.
    #[wasm_bindgen(constructor)]
    pub fn new(text: &str, of_one_relay: bool) -> Result<SavedPool, TetherError> {
        let inner = match PoolCheckpoint::from_json(text.as_bytes()) {
            Err(CheckpointError::WrongKind { .. }) if of_one_relay => {
                PoolCheckpoint::of_one_relay(RelayCheckpoint::from_json(text.as_bytes())?)?
            }
            other => other?,
        };
        Ok(SavedPool { inner })
    }

    /// The pool checkpoint as JSON text (what `Pool.restore` takes).
    #[wasm_bindgen(js_name = toJson)]
    pub fn to_json(&self) -> String {
        String::from_utf8(self.inner.to_json()).unwrap_or_default()
    }

    /// The ids of the subscriptions it holds.
    pub fn subscriptions(&self) -> Vec<f64> {
        #[allow(clippy::cast_precision_loss)] // ids count up from 0: far below 2^53
        self.inner
            .subscriptions()
            .map(|(id, _)| id.0 as f64)
            .collect()
    }

    /// The filters (a JSON array) subscription `sub` had on every relay, if it had any
    /// (a subscription by people or per relay has none).
    pub fn filters(&self, sub: f64) -> Result<Option<String>, TetherError> {
        let sub = SubId(whole(sub, "sub")?);
        Ok(self
            .inner
            .subscriptions()
            .find(|(id, _)| *id == sub)
            .and_then(|(_, filters)| filters))
    }

    /// Whether `relay` catches subscription `sub` up after a restore (it had been live
    /// there): its first EOSE then precedes a `caught_up`.
    #[wasm_bindgen(js_name = catchesUp)]
    pub fn catches_up(&self, sub: f64, relay: u32) -> Result<bool, TetherError> {
        let sub = SubId(whole(sub, "sub")?);
        Ok(self.inner.catches_up(sub, RelayId(relay)))
    }
}
