//! [`KeySigner`]: answers NIP-42 challenges with a secp256k1 key held by the CLI, never by
//! the adapter.

use nostr::{EventBuilder, JsonUtil, Keys, RelayUrl};
use tether_tokio::tether_driver::BoxFuture;
use tether_tokio::{Signer, SignerError};

/// Signs kind 22242 AUTH events with one key.
pub(crate) struct KeySigner {
    keys: Keys,
}

impl KeySigner {
    /// A signer for a secret key in hex or `nsec` form.
    ///
    /// # Errors
    /// When the text is not a secret key.
    pub(crate) fn parse(secret_key: &str) -> Result<Self, String> {
        let keys = Keys::parse(secret_key.trim())
            .map_err(|e| format!("--secret-key is not a secret key: {e}"))?;
        Ok(KeySigner { keys })
    }

    /// A signer with a fresh throwaway key (for the demo).
    pub(crate) fn generate() -> Self {
        KeySigner {
            keys: Keys::generate(),
        }
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
                    .sign_with_keys(&self.keys)
                    .map_err(|e| SignerError(e.to_string()))
            })
            .map(|event| event.as_json());
        // Signing is a few microseconds of CPU: no need to leave the driver's task.
        Box::pin(std::future::ready(signed))
    }
}
