//! Fetching a relay's NIP-11 information document: an HTTP GET to the relay's URL (ws://
//! becomes http://, wss:// https://) with `Accept: application/nostr+json`, bounded in size
//! and time. Only bytes move here; what the document means is the core's
//! ([`tether_core::nostr::RelayInfo`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::StreamExt;
use tether_core::sse::redirect::{next_get, RedirectRefusal};
use tether_core::sse::Request;

use crate::runtime::{BoxFuture, HttpConnect, Runtime};
use crate::sse_request::RequestError;

/// How a relay driver fetches the relay's information document. Start from
/// [`InfoPolicy::default`], as for [`Config`](crate::Config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InfoPolicy {
    /// Fetch it at all (true).
    pub fetch: bool,
    /// Bytes read at most (64 KiB, the core's [`MAX_DOCUMENT`]); a longer body is dropped
    /// unread past the bound.
    ///
    /// [`MAX_DOCUMENT`]: tether_core::nostr::relay_info::MAX_DOCUMENT
    pub max_bytes: usize,
    /// Time for the whole request, head and body (5 s).
    pub timeout: Duration,
    /// A document fetched (or failed) this long ago is fetched again at the next connect
    /// (1 hour); until then every reconnect keeps the one the driver has.
    pub refresh_after: Duration,
}

impl Default for InfoPolicy {
    fn default() -> Self {
        InfoPolicy {
            fetch: true,
            max_bytes: tether_core::nostr::relay_info::MAX_DOCUMENT,
            timeout: Duration::from_secs(5),
            refresh_after: Duration::from_secs(3600),
        }
    }
}

/// Why no document came back. None of these changes the session.
#[derive(Debug)]
#[non_exhaustive]
pub enum InfoFetchError {
    /// The relay URL has no HTTP counterpart (it is not a relay URL): what is wrong with it.
    Url(String),
    /// The request failed before a response head.
    Request(String),
    /// A response other than 200.
    Status(u16),
    /// The body passed [`InfoPolicy::max_bytes`].
    TooLarge {
        /// The bound.
        max: usize,
    },
    /// The body failed half way.
    Body(String),
    /// No complete document within [`InfoPolicy::timeout`].
    TimedOut(Duration),
    /// A redirect that must not be followed (judged as an SSE stream's are: no https to
    /// http, at most [`MAX_INFO_REDIRECTS`] hops).
    Redirect(RedirectRefusal),
}

impl fmt::Display for InfoFetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InfoFetchError::Url(why) => write!(f, "no information document URL: {why}"),
            InfoFetchError::Request(why) => write!(f, "request failed: {why}"),
            InfoFetchError::Status(status) => write!(f, "HTTP status {status}"),
            InfoFetchError::TooLarge { max } => write!(f, "document larger than {max} bytes"),
            InfoFetchError::Redirect(why) => write!(f, "redirect not followed: {why}"),
            InfoFetchError::Body(why) => write!(f, "body failed: {why}"),
            InfoFetchError::TimedOut(after) => write!(f, "no document within {after:?}"),
        }
    }
}

impl std::error::Error for InfoFetchError {}

/// The information document's URL for a relay URL: ws:// -> http://, wss:// -> https://,
/// the rest kept.
///
/// # Errors
/// [`InfoFetchError::Url`] for a URL the relay clients would refuse
/// ([`check_ws_url`](crate::check_ws_url)).
pub fn info_url(relay_url: &str) -> Result<String, InfoFetchError> {
    let checked = crate::url::parse_ws_url(relay_url).map_err(|e| match e {
        crate::ConnectError::InvalidUrl(why) => InfoFetchError::Url(why),
        other => InfoFetchError::Url(other.to_string()),
    })?;
    let (http, rest) = if checked.secure() {
        ("https", &relay_url["wss".len()..])
    } else {
        ("http", &relay_url["ws".len()..])
    };
    Ok(format!("{http}{rest}"))
}

/// Redirects followed to the document.
pub const MAX_INFO_REDIRECTS: u32 = 3;

/// The request that asks for the document.
pub fn info_request() -> Request {
    Request::get().header("accept", "application/nostr+json")
}

/// GET `relay_url`'s information document with `http`, within `policy`'s size and time
/// bounds (timed by `rt`): the body's bytes.
///
/// # Errors
/// [`InfoFetchError`]: no URL, no response, a status other than 200, too large, too slow.
pub fn fetch_info<R: Runtime>(
    rt: &R,
    http: Arc<dyn HttpConnect>,
    relay_url: &str,
    policy: InfoPolicy,
) -> BoxFuture<Result<Vec<u8>, InfoFetchError>>
where
    R::Sleep: 'static,
{
    let url = info_url(relay_url);
    let deadline = rt.sleep_until(rt.now().saturating_add(policy.timeout));
    let get = async move {
        let mut url = url?;
        let mut hops = 0;
        let response = loop {
            let response = http
                .send(&url, &info_request(), None)
                .await
                .map_err(|e| match e {
                    RequestError::Invalid(why) => InfoFetchError::Request(why),
                    RequestError::Lost(_, error) => InfoFetchError::Request(error.to_string()),
                })?;
            // The HTTP client follows no redirect; a document moved behind one (http to https,
            // a trailing slash) is still the relay's, judged by the core's redirect rule.
            let location = response.location.as_deref();
            match next_get(&url, response.status, location, hops, MAX_INFO_REDIRECTS) {
                Ok(Some(next)) => {
                    hops += 1;
                    url = next;
                }
                Ok(None) => break response,
                Err(why) => return Err(InfoFetchError::Redirect(why)),
            }
        };
        if response.status != 200 {
            return Err(InfoFetchError::Status(response.status));
        }
        let mut body = response.body;
        let mut document = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| InfoFetchError::Body(e.to_string()))?;
            if document.len() + chunk.len() > policy.max_bytes {
                return Err(InfoFetchError::TooLarge {
                    max: policy.max_bytes,
                });
            }
            document.extend_from_slice(&chunk);
        }
        Ok(document)
    };
    Box::pin(async move {
        match select(Box::pin(get), deadline).await {
            Either::Left((result, _)) => result,
            Either::Right(((), _)) => Err(InfoFetchError::TimedOut(policy.timeout)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_urls_map_to_http() {
        assert_eq!(
            info_url("ws://127.0.0.1:7777").unwrap(),
            "http://127.0.0.1:7777"
        );
        assert_eq!(
            info_url("wss://relay.example.com/path?x=1").unwrap(),
            "https://relay.example.com/path?x=1"
        );
        for bad in ["http://x", "relay.example.com", "", "ws://127.0.0.1:99999"] {
            assert!(
                matches!(info_url(bad), Err(InfoFetchError::Url(_))),
                "{bad}"
            );
        }
    }
}
