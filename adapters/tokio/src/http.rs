//! The SSE GET through reqwest (rustls).

use futures_util::{StreamExt, TryStreamExt};
use tether_core::link::SocketLoss;
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
    fn get(
        &self,
        url: &str,
        last_event_id: Option<&str>,
    ) -> BoxFuture<Result<HttpResponse, RequestError>> {
        let mut request = self.client.get(url);
        for (name, value) in request_headers(last_event_id) {
            request = request.header(name, value);
        }
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
