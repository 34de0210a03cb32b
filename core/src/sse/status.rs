//! How an SSE response head is judged: the status and content-type rules, and
//! `Retry-After`.

use std::time::Duration;

use crate::sse::output::FailReason;

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

/// Whether a `Content-Type` value is `text/event-stream`, ignoring case, spaces and
/// parameters (`text/event-stream; charset=utf-8`).
pub fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("");
    essence.trim().eq_ignore_ascii_case("text/event-stream")
}

pub(crate) enum Verdict {
    Open,
    Retry,
    NoContent,
    Fail(FailReason),
}

/// Whether a retryable status may come from the application itself, which may have acted on
/// the request before failing: a 500 (or 501, 505, ...), unlike a gateway's 502, 503 or 504
/// (the request never reached the application) or a 408 / 429 (refused before acting). A
/// request that is not safe to repeat is not sent again after one.
pub(crate) fn may_have_acted(status: u16) -> bool {
    matches!(status, 500..=599) && !matches!(status, 502..=504)
}

pub(crate) fn classify(status: u16, content_type: Option<&str>) -> Verdict {
    match status {
        200 if content_type.is_some_and(is_event_stream) => Verdict::Open,
        200 => Verdict::Fail(FailReason::ContentType(content_type.map(str::to_owned))),
        204 => Verdict::NoContent,
        408 | 429 | 500..=599 => Verdict::Retry,
        _ => Verdict::Fail(FailReason::Status(status)),
    }
}
