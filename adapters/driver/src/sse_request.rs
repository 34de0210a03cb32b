//! The SSE request, described once for every HTTP client: the headers it carries and how its
//! failures are told apart (a request the client cannot build versus one the network lost).

use std::error::Error;
use std::fmt;
use std::io;

use tether_core::link::SocketLoss;
pub use tether_core::sse::request_headers;

/// Why an HTTP request or body failed: the client's own error.
pub type HttpError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an SSE request produced no response head.
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The client could not build the request (a header or URL it refuses). A local failure:
    /// the same request would fail again, so the session stops instead of retrying. The text
    /// is the client's error with its causes.
    Invalid(String),
    /// The request was lost on the way, for the reason given; the session retries it.
    Lost(SocketLoss, HttpError),
}

impl RequestError {
    /// A loss of kind `loss` caused by `error`.
    pub fn lost(loss: SocketLoss, error: impl Into<HttpError>) -> Self {
        RequestError::Lost(loss, error.into())
    }

    /// An unbuildable request, described by `error` and its causes.
    pub fn invalid(error: &(dyn Error + 'static)) -> Self {
        RequestError::Invalid(describe(error))
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Invalid(why) => write!(f, "request could not be built: {why}"),
            RequestError::Lost(loss, error) => {
                write!(f, "{}: {}", loss.as_str(), describe(error.as_ref()))
            }
        }
    }
}

impl Error for RequestError {}

/// What a failure while *connecting* was, from the I/O errors in its cause chain: a TLS
/// failure (rustls reports every handshake failure, a rejected certificate included, as
/// [`io::ErrorKind::InvalidData`]) is [`SocketLoss::TlsRejected`]; anything else before a
/// connection existed — refused, unreachable, unresolved, timed out — is
/// [`SocketLoss::ConnectionRefused`]; no file descriptor left is [`SocketLoss::OutOfFiles`].
pub fn connect_loss(error: &(dyn Error + 'static)) -> SocketLoss {
    let out_of_files = causes(error).any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(crate::io_error::out_of_files)
    });
    if out_of_files {
        return SocketLoss::OutOfFiles;
    }
    let tls = causes(error).any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::InvalidData)
    });
    if tls {
        SocketLoss::TlsRejected
    } else {
        SocketLoss::ConnectionRefused
    }
}

/// `error` and its causes, joined with `: ` (a client's top-level message alone, like
/// reqwest's "builder error", says too little).
pub fn describe(error: &(dyn Error + 'static)) -> String {
    let mut out = String::new();
    for (i, e) in causes(error).enumerate() {
        let text = e.to_string();
        // Some errors repeat their cause in their own message.
        if out.contains(&text) {
            continue;
        }
        if i > 0 {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn causes<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&e| e.source())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::sse::Request;

    #[derive(Debug)]
    struct Wrap(&'static str, io::Error);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrap {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.1)
        }
    }

    #[test]
    fn headers_in_order_with_the_id_last() {
        let get = Request::get();
        let all: Vec<_> = request_headers(&get, Some("7")).collect();
        assert_eq!(
            all,
            [
                ("accept", "text/event-stream"),
                ("cache-control", "no-cache"),
                ("accept-encoding", "identity"),
                ("last-event-id", "7")
            ]
        );
        assert_eq!(request_headers(&get, None).count(), 3);
    }

    #[test]
    fn the_applications_headers_replace_defaults_but_not_the_id() {
        let post = Request::post("{}")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", "s1")
            .header("Last-Event-ID", "stale");
        let all: Vec<_> = request_headers(&post, Some("9")).collect();
        assert_eq!(
            all,
            [
                ("cache-control", "no-cache"),
                ("accept-encoding", "identity"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", "s1"),
                ("last-event-id", "9")
            ]
        );
    }

    #[test]
    fn connect_failures_are_told_apart_by_their_io_cause() {
        let tls = Wrap(
            "connect",
            io::Error::new(io::ErrorKind::InvalidData, "invalid peer certificate"),
        );
        assert_eq!(connect_loss(&tls), SocketLoss::TlsRejected);
        let refused = Wrap("connect", io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(connect_loss(&refused), SocketLoss::ConnectionRefused);
        let emfile = io::Error::from_raw_os_error(24);
        assert_eq!(connect_loss(&emfile), SocketLoss::OutOfFiles);
        assert_eq!(
            describe(&tls),
            "connect: invalid peer certificate",
            "causes joined"
        );
    }
}
