//! [`ConnectError`]: why an adapter could not create a client, the same for every runtime.

/// Why a client could not be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The URL cannot be used (wrong scheme, no host, not a URL).
    InvalidUrl(String),
    /// The HTTP client could not be built (its TLS backend failed to initialise).
    Http(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            ConnectError::Http(why) => write!(f, "HTTP client: {why}"),
        }
    }
}

impl std::error::Error for ConnectError {}
