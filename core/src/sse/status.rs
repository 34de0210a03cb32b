//! How an SSE response head is judged: the status and content-type rules, and
//! `Retry-After`.

use std::time::Duration;

use crate::sse::output::FailReason;
use crate::sse::redirect::is_redirect;

/// The delta-seconds form of `Retry-After` (`"120"`), or `None`. The HTTP-date form needs a
/// wall clock the core does not have: the driver converts it to a `Duration` itself.
#[must_use]
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = digits.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some(Duration::from_secs(secs))
}

/// The delay a `Retry-After` value asks for, in either form: delta-seconds (`"120"`), or an
/// HTTP-date against `unix_now` (the wall clock's Unix seconds, read once by the driver for
/// the response that carried it; a date in the past is no delay; `None`: dates are not
/// judged). `None` when the value is neither, or a date with no wall clock.
#[must_use]
pub fn retry_after(value: &str, unix_now: Option<u64>) -> Option<Duration> {
    if let Some(delay) = parse_retry_after(value) {
        return Some(delay);
    }
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    let at = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(unix_now?)))
}

/// Whether a `Content-Type` value is `text/event-stream`, ignoring case, spaces and
/// parameters (`text/event-stream; charset=utf-8`).
pub fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("");
    essence.trim().eq_ignore_ascii_case("text/event-stream")
}

/// A response head, as the session judges it ([`SseSession::handle_head`](crate::sse::SseSession::handle_head)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponseHead<'a> {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: Option<&'a str>,
    /// The `Retry-After` header, parsed (see [`parse_retry_after`]).
    pub retry_after: Option<Duration>,
    /// The `Location` header, as sent (it may be relative).
    pub location: Option<&'a str>,
    /// The `Content-Encoding` header.
    pub content_encoding: Option<&'a str>,
    /// The URL the request went to, which a relative `Location` is resolved against. Without
    /// it only an absolute `Location` can be followed.
    pub url: Option<&'a str>,
}

impl<'a> ResponseHead<'a> {
    /// A head with `status` and no headers.
    #[must_use]
    pub fn new(status: u16) -> Self {
        ResponseHead {
            status,
            ..ResponseHead::default()
        }
    }

    /// With this `Content-Type`.
    #[must_use]
    pub fn content_type(mut self, value: Option<&'a str>) -> Self {
        self.content_type = value;
        self
    }

    /// With this parsed `Retry-After`.
    #[must_use]
    pub fn retry_after(mut self, value: Option<Duration>) -> Self {
        self.retry_after = value;
        self
    }

    /// With this `Location`.
    #[must_use]
    pub fn location(mut self, value: Option<&'a str>) -> Self {
        self.location = value;
        self
    }

    /// With this `Content-Encoding`.
    #[must_use]
    pub fn content_encoding(mut self, value: Option<&'a str>) -> Self {
        self.content_encoding = value;
        self
    }

    /// Answering a request sent to `url`.
    #[must_use]
    pub fn url(mut self, value: Option<&'a str>) -> Self {
        self.url = value;
        self
    }
}

pub(crate) enum Verdict {
    Open,
    Retry,
    NoContent,
    Redirect,
    Fail(FailReason),
}

/// Whether a `Content-Encoding` leaves the body as it is (`identity`, or none). The drivers
/// ask for `Accept-Encoding: identity`: a compressed event stream is delivered only as the
/// compressor flushes (proxies and gzip buffer whole blocks), so events arrive late or in
/// bursts, and a client that did not ask cannot decode it.
fn is_identity(encoding: Option<&str>) -> bool {
    encoding.is_none_or(|e| e.trim().is_empty() || e.trim().eq_ignore_ascii_case("identity"))
}

/// Whether a retryable status may come from the application itself, which may have acted on
/// the request before failing: a 500 (or 501, 505, ...), unlike a gateway's 502, 503 or 504
/// (the request never reached the application) or a 408 / 429 (refused before acting). A
/// request that is not safe to repeat is not sent again after one.
pub(crate) fn may_have_acted(status: u16) -> bool {
    matches!(status, 500..=599) && !matches!(status, 502..=504)
}

pub(crate) fn classify(head: &ResponseHead<'_>) -> Verdict {
    let ResponseHead {
        status,
        content_type,
        content_encoding,
        ..
    } = *head;
    match status {
        200 if !content_type.is_some_and(is_event_stream) => {
            Verdict::Fail(FailReason::ContentType(content_type.map(str::to_owned)))
        }
        200 if !is_identity(content_encoding) => Verdict::Fail(FailReason::ContentEncoding(
            content_encoding.unwrap_or_default().to_owned(),
        )),
        200 => Verdict::Open,
        204 => Verdict::NoContent,
        status if is_redirect(status) => Verdict::Redirect,
        408 | 429 | 500..=599 => Verdict::Retry,
        _ => Verdict::Fail(FailReason::Status(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date_against_the_given_wall_clock() {
        // Wed, 21 Oct 2015 07:28:00 GMT
        let set = 1_445_412_480;
        let date = "Wed, 21 Oct 2015 07:31:02 GMT";
        assert_eq!(retry_after(" 7 ", None), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(date, Some(set)), Some(Duration::from_secs(182)));
        assert_eq!(retry_after(date, Some(set + 1_000)), Some(Duration::ZERO));
        assert_eq!(
            retry_after(date, None),
            None,
            "no wall clock: a date is not judged"
        );
        assert_eq!(retry_after("soon", Some(set)), None);
    }
}
