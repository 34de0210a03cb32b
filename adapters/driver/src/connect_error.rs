//! [`ConnectError`]: why an adapter could not create a client, the same for every runtime.

/// Why a client could not be created.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL cannot be used (wrong scheme, no host, a port outside 1-65535, not a URL;
    /// see [`crate::url`]): the URL and what is wrong with it.
    InvalidUrl(String),
    /// The HTTP client could not be built (its TLS backend failed to initialise).
    Http(String),
    /// The roots to trust (`Config::roots`) cannot be used: a PEM certificate that does not
    /// parse, or nothing at all to trust.
    Tls(String),
    /// The checkpoint to restore from was refused (another kind, a newer format, or
    /// inconsistent); nothing was started.
    Checkpoint(tether_core::CheckpointError),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            ConnectError::Http(why) => write!(f, "HTTP client: {why}"),
            ConnectError::Tls(why) => write!(f, "TLS roots: {why}"),
            ConnectError::Checkpoint(why) => write!(f, "checkpoint: {why}"),
        }
    }
}

impl std::error::Error for ConnectError {}
