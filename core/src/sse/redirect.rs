//! Redirects, decided by the core: the HTTP clients under the drivers follow none, so every
//! 3xx head reaches the session, which follows it, refuses it, or counts it against the
//! limit, with the same retry-safety rules as any other request.
//!
//! | status | a GET or HEAD | any other method (a POST) |
//! | --- | --- | --- |
//! | 307, 308 | followed: the same request to the new URL | followed: the same method and body (the server did not act on it, it points elsewhere) |
//! | 301, 302, 303 | followed | [`FailReason::Redirect`](crate::sse::FailReason::Redirect) with [`RedirectRefusal::MethodChange`], unless [`RedirectPolicy::allow_method_change`]: then a GET with no body, and the original is never sent again (a 303 says the server took it) |
//!
//! A hop is part of its attempt: it is counted in [`SseStats::requests`](crate::sse::SseStats::requests)
//! and [`SseStats::redirects`](crate::sse::SseStats::redirects), it shares the attempt's
//! connect timeout, and the next attempt (after a loss) starts at the stream's own URL again,
//! as a browser's `EventSource` does. More than [`RedirectPolicy::max_hops`] hops in one
//! attempt, a `Location` that is missing or not an `http(s)` URL, and a hop from `https` to
//! `http` (which would send the request, its token and its body in clear) fail the stream:
//! a server that redirects wrongly once does so again.
//!
//! `Location` may be relative: it is resolved against the URL the response came from
//! (RFC 3986 section 5.2, by the `url` crate), and its fragment dropped.
//!
//! A hop to another origin (scheme, host or port) sends no credentials: the
//! [`CREDENTIALS`] headers are withheld from it and every later hop of the attempt
//! ([`Transmit::Open`](crate::sse::Transmit::Open)'s `withhold`), as `fetch` drops
//! `Authorization` and curl drops its credentials when a redirect changes host: a token
//! for one server is not handed to the next because it asked.

use std::fmt;

use url::Url;

/// How the session treats redirect statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedirectPolicy {
    /// Redirects followed within one attempt (5; browsers allow 20, reqwest 10). The next one
    /// fails the stream with [`RedirectRefusal::TooMany`]; 0 follows none.
    pub max_hops: u32,
    /// Follow a 301, 302 or 303 answering a request other than GET or HEAD as a GET without
    /// a body (what `fetch` does), instead of failing with [`RedirectRefusal::MethodChange`].
    /// Off by default: an LLM or MCP POST turned into a GET silently is a different request.
    pub allow_method_change: bool,
}

impl Default for RedirectPolicy {
    fn default() -> Self {
        RedirectPolicy {
            max_hops: 5,
            allow_method_change: false,
        }
    }
}

/// Why a redirect was not followed ([`FailReason::Redirect`](crate::sse::FailReason::Redirect)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedirectRefusal {
    /// No `Location` header, or one that is not an `http` or `https` URL.
    BadLocation,
    /// From `https` to `http`.
    Downgrade,
    /// A 301, 302 or 303 would turn the request into a GET, and the policy does not allow it.
    MethodChange,
    /// More than [`RedirectPolicy::max_hops`] in one attempt.
    TooMany,
}

impl RedirectRefusal {
    /// `bad_location`, `downgrade`, `method_change` or `too_many`, for logs, JSON lines and
    /// the C ABI.
    pub fn as_str(self) -> &'static str {
        match self {
            RedirectRefusal::BadLocation => "bad_location",
            RedirectRefusal::Downgrade => "downgrade",
            RedirectRefusal::MethodChange => "method_change",
            RedirectRefusal::TooMany => "too_many",
        }
    }
}

impl fmt::Display for RedirectRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedirectRefusal::BadLocation => "no usable Location",
            RedirectRefusal::Downgrade => "https redirected to http",
            RedirectRefusal::MethodChange => "the redirect would turn the request into a GET",
            RedirectRefusal::TooMany => "too many redirects",
        })
    }
}

/// `location` (a `Location` header) as an absolute `http` or `https` URL without its
/// fragment, resolved against `from` (the URL the response came from) when relative; `None`
/// when it is not one. For a driver's own GETs (a NIP-11 document) that follow redirects
/// the way the session does.
#[must_use]
pub fn resolve_location(from: &str, location: &str) -> Option<String> {
    resolve(Some(from), Some(location)).map(String::from)
}

/// The headers a hop to another origin does not carry (lower case).
pub const CREDENTIALS: &[&str] = &["authorization", "cookie", "proxy-authorization"];

/// Whether `status` is a redirect the session acts on.
#[must_use]
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Where a GET that was answered `status` with `location` goes next, by the same rule as a
/// stream's redirects (the module docs): `Ok(None)` for a response that is not a redirect,
/// `Ok(Some(url))` to follow, or why not (a location that is no `http(s)` URL, https to
/// http, more than `max_hops` hops after `hops`). For GETs a driver makes outside a session,
/// such as a relay's NIP-11 document.
///
/// # Errors
/// The [`RedirectRefusal`] of a redirect that must not be followed.
pub fn next_get(
    from: &str,
    status: u16,
    location: Option<&str>,
    hops: u32,
    max_hops: u32,
) -> Result<Option<String>, RedirectRefusal> {
    if !is_redirect(status) {
        return Ok(None);
    }
    let redirect = Redirect {
        status,
        method: "GET",
        from: Some(from),
        location,
        hops,
    };
    let policy = RedirectPolicy {
        max_hops,
        ..RedirectPolicy::default()
    };
    match judge(&redirect, &policy) {
        Hop::Follow { url, .. } => Ok(Some(url)),
        Hop::Refuse(why) => Err(why),
    }
}

/// What to do with one redirect.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hop {
    /// Send to `url`; `as_get`: as a GET without a body; `cross_origin`: to another origin
    /// than the response came from (or one not known).
    Follow {
        url: String,
        as_get: bool,
        cross_origin: bool,
    },
    /// Fail the stream.
    Refuse(RedirectRefusal),
}

/// One redirect, as the response reported it.
pub(crate) struct Redirect<'a> {
    pub(crate) status: u16,
    /// The method the redirected request was sent with.
    pub(crate) method: &'a str,
    /// The URL the response came from, if the driver said.
    pub(crate) from: Option<&'a str>,
    /// The `Location` header.
    pub(crate) location: Option<&'a str>,
    /// Hops already followed in this attempt.
    pub(crate) hops: u32,
}

/// The rule table in the module docs.
pub(crate) fn judge(redirect: &Redirect<'_>, policy: &RedirectPolicy) -> Hop {
    let Some(target) = resolve(redirect.from, redirect.location) else {
        return Hop::Refuse(RedirectRefusal::BadLocation);
    };
    let from = redirect.from.and_then(|from| Url::parse(from).ok());
    let from_https = from.as_ref().is_some_and(|from| from.scheme() == "https");
    if from_https && target.scheme() == "http" {
        return Hop::Refuse(RedirectRefusal::Downgrade);
    }
    if redirect.hops >= policy.max_hops {
        return Hop::Refuse(RedirectRefusal::TooMany);
    }
    let safe_method = matches!(redirect.method, "GET" | "HEAD");
    let as_get = matches!(redirect.status, 301..=303) && !safe_method;
    if as_get && !policy.allow_method_change {
        return Hop::Refuse(RedirectRefusal::MethodChange);
    }
    let cross_origin = from.is_none_or(|from| from.origin() != target.origin());
    Hop::Follow {
        url: target.into(),
        as_get,
        cross_origin,
    }
}

/// `location` as an absolute `http(s)` URL without a fragment: resolved against `from` when
/// relative (and `from` is known).
fn resolve(from: Option<&str>, location: Option<&str>) -> Option<Url> {
    let location = location?.trim();
    if location.is_empty() {
        return None;
    }
    let mut url = match Url::parse(location) {
        Ok(url) => url,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            Url::parse(from?).ok()?.join(location).ok()?
        }
        Err(_) => return None,
    };
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return None;
    }
    url.set_fragment(None);
    Some(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_outside_a_session_is_judged_by_the_same_rule() {
        let from = "https://relay.example/";
        assert_eq!(next_get(from, 200, None, 0, 3), Ok(None));
        assert_eq!(
            next_get(from, 301, Some("/nip11"), 0, 3),
            Ok(Some("https://relay.example/nip11".into()))
        );
        assert_eq!(
            next_get(from, 302, Some("http://relay.example/"), 0, 3),
            Err(RedirectRefusal::Downgrade)
        );
        assert_eq!(
            next_get(from, 307, Some("/again"), 3, 3),
            Err(RedirectRefusal::TooMany)
        );
        assert_eq!(
            next_get(from, 308, None, 0, 3),
            Err(RedirectRefusal::BadLocation)
        );
        assert_eq!(
            next_get(
                "http://relay.example/",
                301,
                Some("https://relay.example/"),
                0,
                3
            ),
            Ok(Some("https://relay.example/".into()))
        );
    }

    fn hop(status: u16, method: &str, from: &str, location: &str, hops: u32) -> Hop {
        let redirect = Redirect {
            status,
            method,
            from: Some(from),
            location: Some(location),
            hops,
        };
        judge(&redirect, &RedirectPolicy::default())
    }

    fn follow(url: &str, as_get: bool) -> Hop {
        let cross_origin = !url.starts_with("https://a.example/");
        Hop::Follow {
            url: url.to_owned(),
            as_get,
            cross_origin,
        }
    }

    #[test]
    fn relative_locations_resolve_against_the_response_url() {
        let from = "https://a.example/v1/stream?x=1";
        assert_eq!(
            hop(307, "POST", from, "/v2/stream", 0),
            follow("https://a.example/v2/stream", false)
        );
        assert_eq!(
            hop(308, "GET", from, "next#frag", 0),
            follow("https://a.example/v1/next", false)
        );
        assert_eq!(
            hop(302, "GET", from, "//b.example/s", 0),
            follow("https://b.example/s", false)
        );
        assert_eq!(
            hop(301, "GET", from, "../up", 0),
            follow("https://a.example/up", false)
        );
    }

    #[test]
    fn method_changes_and_downgrades_are_refused() {
        let from = "https://a.example/s";
        for status in [301, 302, 303] {
            assert_eq!(
                hop(status, "POST", from, "/t", 0),
                Hop::Refuse(RedirectRefusal::MethodChange)
            );
        }
        assert_eq!(
            hop(307, "GET", from, "http://a.example/s", 0),
            Hop::Refuse(RedirectRefusal::Downgrade)
        );
        assert_eq!(
            hop(307, "GET", "http://a.example/s", "https://a.example/s", 0),
            Hop::Follow {
                url: "https://a.example/s".to_owned(),
                as_get: false,
                cross_origin: true,
            },
            "another scheme is another origin"
        );
        let allowed = RedirectPolicy {
            allow_method_change: true,
            ..RedirectPolicy::default()
        };
        let redirect = Redirect {
            status: 303,
            method: "POST",
            from: Some(from),
            location: Some("/done"),
            hops: 0,
        };
        assert_eq!(
            judge(&redirect, &allowed),
            follow("https://a.example/done", true)
        );
    }

    #[test]
    fn bad_locations_and_the_limit_fail() {
        let from = "https://a.example/s";
        for location in ["", "ftp://a.example/x", "mailto:x@a.example", "http://"] {
            assert_eq!(
                hop(307, "GET", from, location, 0),
                Hop::Refuse(RedirectRefusal::BadLocation),
                "{location:?}"
            );
        }
        let unknown_base = Redirect {
            status: 307,
            method: "GET",
            from: None,
            location: Some("/relative"),
            hops: 0,
        };
        assert_eq!(
            judge(&unknown_base, &RedirectPolicy::default()),
            Hop::Refuse(RedirectRefusal::BadLocation)
        );
        assert_eq!(
            hop(307, "GET", from, "/t", 4),
            follow("https://a.example/t", false)
        );
        assert_eq!(
            hop(307, "GET", from, "/t", 5),
            Hop::Refuse(RedirectRefusal::TooMany)
        );
    }
}
