//! The SSE request through reqwest (rustls).

use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use tether_core::link::SocketLoss;
use tether_core::sse::Request;
use tether_driver::http_options::Proxies;
use tether_driver::sse_request::connect_loss;
use tether_driver::{
    request_headers, BoxFuture, ConnectError, DefaultHttp, HttpConnect, HttpError, HttpOptions,
    HttpResponse, RequestError,
};

use crate::runtime::TokioRuntime;

/// reqwest as tether's HTTP client (SSE streams, NIP-11 documents).
#[derive(Clone, Debug)]
pub struct ReqwestHttp {
    client: reqwest::Client,
}

impl ReqwestHttp {
    /// Send through `client`. It should have no overall timeout (a stream is meant to stay
    /// open: liveness is the core's idle watchdog, connecting is bounded by its connect
    /// timeout) and follow no redirects (`reqwest::redirect::Policy::none()`: the core
    /// decides whether a redirect may be followed, and one the client followed by itself
    /// would re-send a POST the core never heard of).
    pub fn new(client: reqwest::Client) -> Self {
        ReqwestHttp { client }
    }

    /// A default reqwest client (rustls with the webpki roots, the environment's proxy, no
    /// redirects followed).
    pub(crate) fn default_client() -> Result<Self, ConnectError> {
        Self::with_options(&HttpOptions::default())
    }

    /// A reqwest client with `options`: the proxy [`Proxies`] picks per target (the same
    /// rule as every runtime's), the roots asked for, no redirects followed (the core
    /// decides whether a redirect may be followed; one the client followed by itself would
    /// send a POST again without the core knowing) and no overall timeout.
    ///
    /// # Errors
    /// [`ConnectError::Http`]: a proxy URL or PEM root that cannot be used, or a client
    /// reqwest cannot build.
    pub fn with_options(options: &HttpOptions) -> Result<Self, ConnectError> {
        let proxies =
            Proxies::resolve(&options.proxy).map_err(|e| ConnectError::Http(e.to_string()))?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .tls_built_in_webpki_certs(options.roots.webpki)
            .tls_built_in_native_certs(options.roots.native);
        if proxies.any() {
            builder = builder.proxy(reqwest::Proxy::custom(move |url| {
                let host = url.host_str()?;
                proxies
                    .for_target(url.scheme(), host)
                    .map(|proxy| proxy.url.clone())
            }));
        }
        for pem in &options.roots.extra_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ConnectError::Http(format!("a root certificate: {e}")))?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder
            .build()
            .map_err(|e| ConnectError::Http(e.to_string()))?;
        Ok(ReqwestHttp::new(client))
    }
}

impl DefaultHttp for TokioRuntime {
    fn default_http(options: &HttpOptions) -> Result<(Self, Arc<dyn HttpConnect>), ConnectError> {
        Ok((
            TokioRuntime::new(),
            Arc::new(ReqwestHttp::with_options(options)?),
        ))
    }
}

impl HttpConnect for ReqwestHttp {
    fn send(
        &self,
        url: &str,
        request: &Request,
        last_event_id: Option<&str>,
    ) -> BoxFuture<Result<HttpResponse, RequestError>> {
        let method = match reqwest::Method::from_bytes(request.method.as_bytes()) {
            Ok(method) => method,
            Err(e) => {
                let error = RequestError::invalid(&e);
                return Box::pin(async move { Err(error) });
            }
        };
        let mut builder = self.client.request(method, url);
        for (name, value) in request_headers(request, last_event_id) {
            builder = builder.header(name, value);
        }
        // No body at all for an empty one: a GET stays exactly what it was.
        if !request.body.is_empty() {
            builder = builder.body(request.body.clone());
        }
        let request = builder;
        Box::pin(async move {
            let response = request.send().await.map_err(classify)?;
            let (status, headers) = (response.status(), response.headers().clone());
            let body = response
                .bytes_stream()
                .map_err(|e| Box::new(e) as HttpError);
            Ok(HttpResponse::from_head(status, &headers, body.boxed()))
        })
    }
}

/// reqwest's error kinds as the core's: a builder error (a header or URL reqwest refuses)
/// is local; a connect error is refused or TLS by its I/O cause; the rest happened on an
/// open connection. reqwest does not expose hyper's malformed-response kind, so a server
/// that answers with something other than HTTP is a network error here.
fn classify(error: reqwest::Error) -> RequestError {
    if error.is_builder() {
        return RequestError::invalid(&error);
    }
    let loss = if error.is_connect() {
        connect_loss(&error)
    } else {
        SocketLoss::NetworkError
    };
    RequestError::lost(loss, error)
}
