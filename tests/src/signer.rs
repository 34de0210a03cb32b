//! Signers for tests that need the NIP-42 path: [`KeySigner`] signs for real (relays that
//! check signatures), [`FakeSigner`] answers with the relay model's unsigned AUTH event (the
//! model only checks the challenge tag).

use nostr::{EventBuilder, JsonUtil, Keys, RelayUrl};
use tether_driver::{BoxFuture, Signer, SignerError};

use crate::relay_model::auth_event;

/// Signs kind 22242 AUTH events with one secp256k1 key (Schnorr signatures).
#[derive(Clone, Debug)]
pub struct KeySigner(pub Keys);

impl KeySigner {
    /// A signer with a fresh key.
    pub fn generate() -> Self {
        KeySigner(Keys::generate())
    }
}

impl Signer for KeySigner {
    fn sign_auth(
        &self,
        relay_url: &str,
        challenge: &str,
    ) -> BoxFuture<Result<String, SignerError>> {
        let signed = RelayUrl::parse(relay_url)
            .map_err(|e| SignerError(format!("relay URL {relay_url}: {e}")))
            .and_then(|relay| {
                EventBuilder::auth(challenge, relay)
                    .sign_with_keys(&self.0)
                    .map_err(|e| SignerError(e.to_string()))
            })
            .map(|event| event.as_json());
        Box::pin(std::future::ready(signed))
    }
}

/// Answers every challenge with [`auth_event`]: enough for the
/// [`RelayModel`](crate::RelayModel), refused by any relay that verifies signatures.
#[derive(Clone, Copy, Debug, Default)]
pub struct FakeSigner;

impl Signer for FakeSigner {
    fn sign_auth(
        &self,
        _relay_url: &str,
        challenge: &str,
    ) -> BoxFuture<Result<String, SignerError>> {
        Box::pin(std::future::ready(Ok(auth_event(1, challenge))))
    }
}
