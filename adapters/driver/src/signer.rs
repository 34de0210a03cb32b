//! [`Signer`]: the application's answer to NIP-42 challenges.

use std::fmt;

use crate::runtime::BoxFuture;

/// Signs NIP-42 AUTH events for the driver.
///
/// The driver never holds keys: when a relay sends an `AUTH` challenge and a signer is
/// configured, the driver asks it for a signed kind 22242 event and passes the result to the
/// core. Without a signer the application hears [`SessionEvent::AuthChallenge`] and calls
/// [`RelayHandle::authenticate`] itself.
///
/// [`SessionEvent::AuthChallenge`]: crate::SessionEvent::AuthChallenge
/// [`RelayHandle::authenticate`]: crate::RelayHandle::authenticate
pub trait Signer: Send + Sync + 'static {
    /// A signed kind 22242 event (JSON object) with the tags `["relay", relay_url]` and
    /// `["challenge", challenge]` and a current `created_at`.
    fn sign_auth(&self, relay_url: &str, challenge: &str)
        -> BoxFuture<Result<String, SignerError>>;
}

/// A signer could not (or would not) sign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignerError(pub String);

impl fmt::Display for SignerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "signer failed: {}", self.0)
    }
}

impl std::error::Error for SignerError {}
