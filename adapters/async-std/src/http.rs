//! The SSE request through hyper 1.x's HTTP/1 client over async-net (rustls for https://).
//!
//! hyper's client connection is a future that must be polled for the response and its body
//! to make progress. Instead of spawning it, the response future and then the body stream
//! poll it themselves, so an [`EventSource`](crate::EventSource) still does nothing in the
//! background and needs no executor hook.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::poll_fn;
use futures_util::Stream;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{self, Connection};
use hyper::header::HOST;
use hyper::{Request, Uri};
use smol_hyper::rt::FuturesIo;
use tether_core::link::SocketLoss;
use tether_core::sse::Request as SseRequest;
use tether_driver::{
    request_headers, retry_after, BoxFuture, HttpConnect, HttpError, HttpResponse, RequestError,
};

use crate::net::{self, Conn};

type ClientConn = Connection<FuturesIo<Conn>, Full<Bytes>>;

/// hyper, one connection per request (an SSE stream holds its connection for its life).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HyperHttp;

impl HttpConnect for HyperHttp {
    fn send(
        &self,
        url: &str,
        request: &SseRequest,
        last_event_id: Option<&str>,
    ) -> BoxFuture<Result<HttpResponse, RequestError>> {
        let url = url.to_owned();
        let request = request.clone();
        let last_event_id = last_event_id.map(str::to_owned);
        Box::pin(async move { send(&url, &request, last_event_id.as_deref()).await })
    }
}

/// Whether `url` is an http:// or https:// URL with a host, as [`HyperHttp`] needs.
pub(crate) fn check_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!("{url}: expected http:// or https://"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{url}: no host"));
    }
    Ok(uri)
}

async fn send(
    url: &str,
    sse: &SseRequest,
    last_event_id: Option<&str>,
) -> Result<HttpResponse, RequestError> {
    let uri = check_url(url).map_err(RequestError::Invalid)?;
    let tls = uri.scheme_str() == Some("https");
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    // Built before connecting: a request that cannot be built must not cost a connection.
    let authority = uri.authority().map_or(host, |a| a.as_str());
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = Request::builder()
        .method(sse.method.as_str())
        .uri(path)
        .header(HOST, authority);
    for (name, value) in request_headers(sse, last_event_id) {
        request = request.header(name, value);
    }
    // hyper sends `Content-Length` from the body's exact size, and none for an empty GET.
    let request = request
        .body(Full::new(Bytes::from(sse.body.clone())))
        .map_err(|e| RequestError::invalid(&e))?;
    let conn = net::connect(host, port, tls).await.map_err(connect_error)?;
    let (mut sender, mut connection) = http1::handshake(FuturesIo::new(conn))
        .await
        .map_err(hyper_error)?;
    let mut response = std::pin::pin!(sender.send_request(request));
    let mut finished = false;
    let response = poll_fn(|cx| {
        if let Poll::Ready(result) = Pin::new(&mut connection).poll(cx) {
            finished = true;
            // A short response with `connection: close` (a NIP-11 document) can end the
            // connection in the poll that delivered its head: the head wins.
            if let Poll::Ready(Ok(head)) = response.as_mut().poll(cx) {
                return Poll::Ready(Ok(head));
            }
            // The connection ended before the response head: that is the error.
            return Poll::Ready(Err(match result {
                Err(e) => hyper_error(e),
                Ok(()) => RequestError::lost(
                    SocketLoss::NetworkError,
                    "connection closed before the response",
                ),
            }));
        }
        response.as_mut().poll(cx).map_err(hyper_error)
    })
    .await?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type");
    let retry_after = header("retry-after").as_deref().and_then(retry_after);
    let status = response.status().as_u16();
    let body = ConnBody {
        // A finished connection future is not polled again.
        connection: (!finished).then_some(connection),
        body: response.into_body(),
    };
    Ok(HttpResponse {
        status,
        content_type,
        retry_after,
        body: Box::pin(body),
    })
}

/// A failure to open the connection: a host that cannot be a TLS server name is the URL's
/// fault (local), a TLS failure is reported by rustls as `InvalidData`, anything else kept
/// the connection from existing.
fn connect_error(error: std::io::Error) -> RequestError {
    match error.kind() {
        std::io::ErrorKind::InvalidInput => RequestError::invalid(&error),
        std::io::ErrorKind::InvalidData => RequestError::lost(SocketLoss::TlsRejected, error),
        _ => RequestError::lost(SocketLoss::ConnectionRefused, error),
    }
}

/// A response head that is not HTTP is a failed handshake; the rest is the network's.
fn hyper_error(error: hyper::Error) -> RequestError {
    let loss = if error.is_parse() {
        SocketLoss::HandshakeFailed
    } else {
        SocketLoss::NetworkError
    };
    RequestError::lost(loss, error)
}

/// A response body that also drives its connection.
struct ConnBody {
    /// `None` once the connection future finished cleanly.
    connection: Option<ClientConn>,
    body: Incoming,
}

impl Stream for ConnBody {
    type Item = Result<Bytes, HttpError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(connection) = self.connection.as_mut() {
            match Pin::new(connection).poll(cx) {
                Poll::Ready(Ok(())) => self.connection = None,
                Poll::Ready(Err(e)) => {
                    self.connection = None;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Pending => {}
            }
        }
        loop {
            let frame = match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(Box::new(e)))),
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            // Trailers carry no events.
            if let Ok(data) = frame.into_data() {
                return Poll::Ready(Some(Ok(data)));
            }
        }
    }
}
