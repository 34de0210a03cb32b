//! The runtime-specific part of an adapter, as three traits: a clock with sleeps, a WebSocket
//! connector and an HTTP request for SSE.
//!
//! This module depends on [`sse_request`](crate::sse_request) (what an HTTP request carries
//! and how it fails) and never the other way round.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use futures_sink::Sink;
use tether_core::router::relay_url::is_private_ip;
use tether_core::{Instant, Wake};
use tungstenite::Message;

/// A boxed, sendable future: what the connector traits return.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Why a WebSocket could not be opened or failed (tungstenite's error, shared by every
/// runtime's tungstenite binding).
pub type WsError = tungstenite::Error;

pub use crate::sse_request::HttpError;
use crate::sse_request::RequestError;

/// Time as the core sees it, and sleeps, from one runtime.
///
/// `now` is a [`tether_core::Instant`]: the runtime's monotonic clock minus an origin the
/// runtime picked when it was created, so a runtime with a paused or simulated clock gives
/// the core the same view of time.
pub trait Runtime: Send + Unpin + 'static {
    /// A sleep that can be moved to a new deadline without reallocating.
    type Sleep: Future<Output = ()> + Send + Unpin;

    /// The current time.
    fn now(&self) -> Instant;

    /// A sleep that ends at `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Self::Sleep;

    /// Move `sleep` to end at `deadline` instead.
    fn reset(&self, sleep: &mut Self::Sleep, deadline: Instant);
}

/// The one sleep a driver waits on, re-armed to each new deadline.
pub(crate) struct Alarm<R: Runtime> {
    sleep: Option<R::Sleep>,
    /// The deadline last logged, so a wake that keeps it logs nothing.
    logged: Option<(Instant, Wake)>,
}

impl<R: Runtime> Alarm<R> {
    pub(crate) fn new() -> Self {
        Alarm {
            sleep: None,
            logged: None,
        }
    }

    /// Ready once the deadline of `wake` has passed; with none, pending with the sleep
    /// dropped (the next input wakes the task). The clock is asked first: a runtime's
    /// cooperative budget can keep a sleep pending past its deadline. A new deadline is
    /// logged (debug) with what it is for.
    pub(crate) fn poll(
        &mut self,
        rt: &R,
        cx: &mut Context<'_>,
        wake: Option<(Instant, Wake)>,
    ) -> Poll<()> {
        let Some((deadline, why)) = wake else {
            self.sleep = None;
            return Poll::Pending;
        };
        let now = rt.now();
        if now >= deadline {
            return Poll::Ready(());
        }
        if self.logged != wake {
            self.logged = wake;
            tracing::debug!(wake = %why, after = ?deadline.saturating_duration_since(now), "sleeping");
        }
        let sleep = match self.sleep.as_mut() {
            Some(sleep) => {
                rt.reset(sleep, deadline);
                sleep
            }
            None => self.sleep.insert(rt.sleep_until(deadline)),
        };
        Pin::new(sleep).poll(cx)
    }
}

/// An open WebSocket: tungstenite messages in and out, whichever runtime carries them.
pub trait WsSocket:
    Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Send
{
}

impl<T> WsSocket for T where
    T: Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Send
{
}

/// An open WebSocket, boxed so the driver does not depend on the runtime's socket type.
pub type BoxSocket = Pin<Box<dyn WsSocket>>;

/// Which addresses a WebSocket may be opened to, decided by the core for each relay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Addresses {
    /// Any address: a relay the application named (or one routing may dial anywhere).
    #[default]
    Any,
    /// Public addresses only: a relay a stranger's relay list named. Every address its host
    /// resolves to must pass the core's rule
    /// ([`is_private_ip`](tether_core::router::relay_url::is_private_ip)) before
    /// anything is dialed; otherwise the connect fails ([`Addresses::admit`]).
    Public,
}

impl Addresses {
    /// The addresses `host` resolved to (`resolved`) that a connector may dial, in order.
    ///
    /// The check is on the resolved addresses, the ones then dialed, not on a second lookup:
    /// a name that resolves elsewhere the next time (DNS rebinding) cannot slip past it.
    ///
    /// # Errors
    /// With [`Addresses::Public`], `PermissionDenied` naming the first private address when
    /// any address is private: a name that leads into the network is refused as a whole,
    /// as its address written in the URL would be.
    pub fn admit(
        self,
        host: &str,
        resolved: impl IntoIterator<Item = SocketAddr>,
    ) -> io::Result<Vec<SocketAddr>> {
        let resolved: Vec<SocketAddr> = resolved.into_iter().collect();
        if self == Addresses::Public {
            if let Some(private) = resolved.iter().find(|a| is_private_ip(a.ip())) {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{host} resolves to {}, a private address: a relay from a relay \
                         list is not dialed inside the network",
                        private.ip()
                    ),
                ));
            }
        }
        Ok(resolved)
    }
}

/// Opens WebSockets (ws:// and wss://).
pub trait WsConnect: Send + Sync + 'static {
    /// Open a WebSocket to `url`, refusing inbound messages and frames larger than
    /// `max_message` bytes, at the `addresses` allowed: with [`Addresses::Public`], a host
    /// that resolves to a private address is not connected to and the connect fails.
    fn connect(
        &self,
        url: &str,
        max_message: usize,
        addresses: Addresses,
    ) -> BoxFuture<Result<BoxSocket, WsError>>;
}

/// The head of an HTTP response and its body, as the SSE driver needs them.
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header, if present and valid text.
    pub content_type: Option<String>,
    /// The `Retry-After` header, already converted (see [`retry_after`](crate::retry_after)).
    pub retry_after: Option<Duration>,
    /// The `Location` header, as sent: the core resolves and judges a redirect.
    pub location: Option<String>,
    /// The `Content-Encoding` header.
    pub content_encoding: Option<String>,
    /// The body, chunk by chunk.
    pub body: Pin<Box<dyn Stream<Item = Result<bytes::Bytes, HttpError>> + Send>>,
}

impl HttpResponse {
    /// A response as the SSE driver needs it, from the head every HTTP client built on the
    /// `http` crate exposes (reqwest, hyper): the status, `Content-Type` when it is text, and
    /// `Retry-After` converted by [`retry_after`](crate::retry_after), `Location` and
    /// `Content-Encoding`.
    pub fn from_head(
        status: http::StatusCode,
        headers: &http::HeaderMap,
        body: Pin<Box<dyn Stream<Item = Result<bytes::Bytes, HttpError>> + Send>>,
    ) -> Self {
        let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
        HttpResponse {
            status: status.as_u16(),
            content_type: header(http::header::CONTENT_TYPE).map(str::to_owned),
            retry_after: header(http::header::RETRY_AFTER).and_then(crate::retry_after),
            location: header(http::header::LOCATION).map(str::to_owned),
            content_encoding: header(http::header::CONTENT_ENCODING).map(str::to_owned),
            body,
        }
    }
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("content_type", &self.content_type)
            .field("retry_after", &self.retry_after)
            .field("location", &self.location)
            .field("content_encoding", &self.content_encoding)
            .finish_non_exhaustive()
    }
}

/// Performs the SSE request.
pub trait HttpConnect: Send + Sync + 'static {
    /// Send `request` (its method and body, as given) to `url` with the
    /// [`request_headers`](crate::sse_request::request_headers) for `request` and
    /// `last_event_id`. Redirects are not followed: a 3xx is the response (the core decides
    /// whether to follow it). A failure says whether the request could not be built or was lost on
    /// the network, and why ([`RequestError`]).
    fn send(
        &self,
        url: &str,
        request: &tether_core::sse::Request,
        last_event_id: Option<&str>,
    ) -> BoxFuture<Result<HttpResponse, RequestError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().expect(a)).collect()
    }

    #[test]
    fn public_only_refuses_a_name_with_any_private_address() {
        let public = addrs(&[
            "93.184.215.14:443",
            "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443",
        ]);
        assert_eq!(
            Addresses::Public
                .admit("relay.example", public.clone())
                .ok(),
            Some(public.clone())
        );
        for inside in [
            "127.0.0.1:443",
            "10.0.0.7:443",
            "[::1]:443",
            "[::7f00:1]:443",
            "[::ffff:192.168.1.1]:443",
            "[fd00::1]:443",
        ] {
            let mut resolved = public.clone();
            resolved.push(inside.parse().expect(inside));
            let refused = Addresses::Public
                .admit("relay.example", resolved)
                .expect_err(inside);
            assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
            let ip = inside.parse::<SocketAddr>().expect(inside).ip();
            assert_eq!(
                refused.to_string(),
                format!(
                    "relay.example resolves to {ip}, a private address: a relay from a relay \
                     list is not dialed inside the network"
                )
            );
        }
    }

    #[test]
    fn any_admits_every_address_in_order() {
        let resolved = addrs(&["[::1]:7000", "127.0.0.1:7000", "93.184.215.14:7000"]);
        assert_eq!(
            Addresses::Any.admit("localhost", resolved.clone()).ok(),
            Some(resolved)
        );
    }
}
