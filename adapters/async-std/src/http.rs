//! The SSE request through hyper 1.x's HTTP/1 client over async-net (rustls for https://).
//!
//! hyper's client connection is a future that must be polled for the response and its body
//! to make progress. Instead of spawning it, the response future and then the body stream
//! poll it themselves, so an [`EventSource`](crate::EventSource) still does nothing in the
//! background and needs no executor hook.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::poll_fn;
use futures_util::Stream;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{self, Connection};
use hyper::header::HOST;
use hyper::Request;
use smol_hyper::rt::FuturesIo;
use tether_core::link::SocketLoss;
use tether_core::sse::Request as SseRequest;
use tether_driver::url::parse_http_url;
use tether_driver::{
    request_headers, BoxFuture, ConnectError, DefaultHttp, HttpConnect, HttpError, HttpResponse,
    RequestError,
};

use crate::net::{self, Conn};
use crate::runtime::AsyncIoRuntime;

type ClientConn = Connection<FuturesIo<Conn>, Full<Bytes>>;

/// hyper as tether's HTTP client (SSE streams, NIP-11 documents): one connection per
/// request, since an SSE stream holds its connection for its life.
#[derive(Clone, Copy, Debug, Default)]
pub struct HyperHttp;

impl DefaultHttp for AsyncIoRuntime {
    fn default_http() -> Result<(Self, Arc<dyn HttpConnect>), ConnectError> {
        Ok((AsyncIoRuntime::new(), Arc::new(HyperHttp)))
    }
}

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

async fn send(
    url: &str,
    sse: &SseRequest,
    last_event_id: Option<&str>,
) -> Result<HttpResponse, RequestError> {
    // The entry points checked the URL already; a document URL derived from a relay's comes
    // through here unchecked.
    let url = parse_http_url(url).map_err(|e| RequestError::Invalid(e.to_string()))?;
    // Built before connecting: a request that cannot be built must not cost a connection.
    let mut request = Request::builder()
        .method(sse.method.as_str())
        .uri(url.path_and_query())
        .header(HOST, url.authority());
    for (name, value) in request_headers(sse, last_event_id) {
        request = request.header(name, value);
    }
    // hyper sends `Content-Length` from the body's exact size, and none for an empty GET.
    let request = request
        .body(Full::new(Bytes::from(sse.body.clone())))
        .map_err(|e| RequestError::invalid(&e))?;
    let conn = net::connect(url.host(), url.port(), url.secure())
        .await
        .map_err(connect_error)?;
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
    let (head, body) = response.into_parts();
    let body = ConnBody {
        // A finished connection future is not polled again.
        connection: (!finished).then_some(connection),
        body,
    };
    Ok(HttpResponse::from_head(
        head.status,
        &head.headers,
        Box::pin(body),
    ))
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
