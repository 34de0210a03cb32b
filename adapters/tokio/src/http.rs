//! The SSE request through reqwest (rustls).

use futures_util::{StreamExt, TryStreamExt};
use tether_core::link::SocketLoss;
use tether_core::sse::Request;
use tether_driver::sse_request::connect_loss;
use tether_driver::{
    request_headers, retry_after, BoxFuture, HttpConnect, HttpError, HttpResponse, RequestError,
};

/// reqwest, set up for long-lived event streams.
#[derive(Clone, Debug)]
pub(crate) struct ReqwestHttp {
    client: reqwest::Client,
}

impl ReqwestHttp {
    /// `client` should have no overall timeout: the stream is meant to stay open. Liveness
    /// is the core's idle watchdog; connecting is bounded by its connect timeout.
    pub(crate) fn new(client: reqwest::Client) -> Self {
        ReqwestHttp { client }
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
            let body = response
                .bytes_stream()
                .map_err(|e| Box::new(e) as HttpError);
            Ok(HttpResponse {
                status,
                content_type,
                retry_after,
                body: body.boxed(),
            })
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
