//! Local misuse, thrown to JavaScript as an `Error` whose `name` is its [`ErrorKind`].

use std::fmt;

use tether_core::nostr::Error as SessionError;
use tether_core::pool::PoolError;
use tether_core::{CheckpointError, SocketError};
use wasm_bindgen::JsValue;

/// What kind of misuse a [`TetherError`] is; its name is the thrown `Error`'s `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed input: a filter, an event, a config, a number, a name.
    InvalidArgument,
    /// A subscription, relay, ticket or epoch this machine never handed out.
    UnknownId,
    /// The call does not fit the state: input before a socket's open, authenticating while
    /// disconnected or for a superseded challenge.
    WrongState,
    /// A configured bound is reached.
    Limit,
    /// Checkpoint text that is not a checkpoint of this kind, or contradicts itself.
    Checkpoint,
    /// Checkpoint text written by a newer format than this library reads.
    CheckpointNewer,
}

impl ErrorKind {
    /// The `name` JavaScript sees.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "InvalidArgument",
            ErrorKind::UnknownId => "UnknownId",
            ErrorKind::WrongState => "WrongState",
            ErrorKind::Limit => "Limit",
            ErrorKind::Checkpoint => "Checkpoint",
            ErrorKind::CheckpointNewer => "CheckpointNewer",
        }
    }
}

/// A refused call: its kind and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TetherError {
    kind: ErrorKind,
    message: String,
}

impl TetherError {
    /// A refused call of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        TetherError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        TetherError::new(ErrorKind::InvalidArgument, message)
    }

    /// Which kind of misuse.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What was wrong, for a person.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TetherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

impl std::error::Error for TetherError {}

impl From<TetherError> for JsValue {
    fn from(error: TetherError) -> JsValue {
        let thrown = js_sys::Error::new(&error.message);
        thrown.set_name(error.kind.name());
        thrown.into()
    }
}

impl From<SessionError> for TetherError {
    fn from(e: SessionError) -> Self {
        let kind = match e {
            SessionError::UnknownSubscription(_) => ErrorKind::UnknownId,
            SessionError::TooManySubscriptions { .. }
            | SessionError::OutboxFull { .. }
            | SessionError::AlreadyPublishing(_) => ErrorKind::Limit,
            SessionError::NotConnected | SessionError::StaleChallenge(_) => ErrorKind::WrongState,
            _ => ErrorKind::InvalidArgument,
        };
        TetherError::new(kind, e.to_string())
    }
}

impl From<SocketError> for TetherError {
    fn from(e: SocketError) -> Self {
        let kind = match e {
            SocketError::UnknownEpoch(_) => ErrorKind::UnknownId,
            _ => ErrorKind::WrongState,
        };
        TetherError::new(kind, e.to_string())
    }
}

impl From<PoolError> for TetherError {
    fn from(e: PoolError) -> Self {
        let kind = match e {
            PoolError::Session(e) => return e.into(),
            PoolError::Socket(e) => return e.into(),
            PoolError::UnknownRelay(_)
            | PoolError::UnknownSubscription(_)
            | PoolError::UnknownTicket(_) => ErrorKind::UnknownId,
            PoolError::TooManyRelays { .. }
            | PoolError::TooManySubscriptions { .. }
            | PoolError::TooManyPublishes { .. }
            | PoolError::AlreadyPublishing(_) => ErrorKind::Limit,
            _ => ErrorKind::InvalidArgument,
        };
        TetherError::new(kind, e.to_string())
    }
}

impl From<CheckpointError> for TetherError {
    fn from(e: CheckpointError) -> Self {
        let kind = match e {
            CheckpointError::Newer { .. } => ErrorKind::CheckpointNewer,
            _ => ErrorKind::Checkpoint,
        };
        TetherError::new(kind, e.to_string())
    }
}
