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
use futures_rustls::rustls::ClientConfig;
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
use tether_driver::http_options::{Proxies, ProxyConfig};
use tether_driver::url::parse_http_url;
use tether_driver::{
    request_headers, BoxFuture, ConnectError, DefaultHttp, HttpConnect, HttpError, HttpOptions,
    HttpResponse, RequestError,
};

use crate::net::{self, Conn};
use crate::runtime::AsyncIoRuntime;

type ClientConn = Connection<FuturesIo<Conn>, Full<Bytes>>;

/// hyper as tether's HTTP client (SSE streams, NIP-11 documents): one connection per
/// request, since an SSE stream holds its connection for its life. It follows no redirect
/// (the core decides), and goes through the proxy [`Proxies`] picks per target.
#[derive(Clone, Debug)]
pub struct HyperHttp {
    proxies: Arc<Proxies>,
    tls: Arc<ClientConfig>,
}

impl Default for HyperHttp {
    /// The environment's proxy (as reqwest's default client reads it; a malformed one is
    /// logged and ignored) and the webpki roots.
    fn default() -> Self {
        let proxies = Proxies::resolve(&ProxyConfig::FromEnv).unwrap_or_else(|error| {
            tracing::warn!(%error, "ignoring the environment's proxy");
            Proxies::default()
        });
        HyperHttp {
            proxies: Arc::new(proxies),
            tls: tether_driver::tls::default_config(),
        }
    }
}

impl HyperHttp {
    /// A client with `options`: the proxy (from the configuration or the environment) and the
    /// roots they say.
    ///
    /// # Errors
    /// [`ConnectError::Http`]: a proxy URL or PEM root that cannot be used.
    pub fn with_options(options: &HttpOptions) -> Result<Self, ConnectError> {
        let proxies =
            Proxies::resolve(&options.proxy).map_err(|e| ConnectError::Http(e.to_string()))?;
        let tls = tether_driver::tls::client_config(&options.roots)
            .map_err(|e| ConnectError::Http(e.to_string()))?;
        Ok(HyperHttp {
            proxies: Arc::new(proxies),
            tls,
        })
    }
}

impl DefaultHttp for AsyncIoRuntime {
    fn default_http(options: &HttpOptions) -> Result<(Self, Arc<dyn HttpConnect>), ConnectError> {
        Ok((
            AsyncIoRuntime::new(),
            Arc::new(HyperHttp::with_options(options)?),
        ))
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
        let client = self.clone();
        Box::pin(async move {
            client
                .send_one(&url, &request, last_event_id.as_deref())
                .await
        })
    }
}

impl HyperHttp {
    async fn send_one(
        &self,
        target: &str,
        sse: &SseRequest,
        last_event_id: Option<&str>,
    ) -> Result<HttpResponse, RequestError> {
        // The entry points checked the URL already; a document URL derived from a relay's comes
        // through here unchecked.
        let url = parse_http_url(target).map_err(|e| RequestError::Invalid(e.to_string()))?;
        let scheme = if url.secure() { "https" } else { "http" };
        let proxy = self.proxies.for_target(scheme, url.host());
        // Through a proxy, a plain request names its target in absolute form (the proxy
        // connects); a TLS one goes through a tunnel and looks as it would directly.
        let forward = proxy.filter(|_| !url.secure());
        let uri = match forward {
            Some(_) => target.split('#').next().unwrap_or(target).to_owned(),
            None => url.path_and_query().to_owned(),
        };
        // Built before connecting: a request that cannot be built must not cost a connection.
        let mut request = Request::builder()
            .method(sse.method.as_str())
            .uri(uri)
            .header(HOST, url.authority());
        if let Some(authorization) = forward.and_then(|p| p.authorization.as_deref()) {
            request = request.header("proxy-authorization", authorization);
        }
        for (name, value) in request_headers(sse, last_event_id) {
            request = request.header(name, value);
        }
        // hyper sends `Content-Length` from the body's exact size, and none for an empty GET.
        let request = request
            .body(Full::new(Bytes::from(sse.body.clone())))
            .map_err(|e| RequestError::invalid(&e))?;
        let tls = url.secure().then_some(&self.tls);
        let conn = net::connect_via(url.host(), url.port(), tls, proxy)
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
