//! The SSE GET through reqwest (rustls).

use futures_util::{StreamExt, TryStreamExt};
use tether_driver::{retry_after, BoxFuture, HttpConnect, HttpError, HttpResponse};

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
    ) -> BoxFuture<Result<HttpResponse, HttpError>> {
        let mut request = self
            .client
            .get(url)
            .header("Accept", "text/event-stream")
            .header("Cache-Control", "no-cache");
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        Box::pin(async move {
            let response = request.send().await?;
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
