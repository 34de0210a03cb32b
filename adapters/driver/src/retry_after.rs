//! `Retry-After` in both of its forms.

use std::time::{Duration, SystemTime};

use tether_core::sse::parse_retry_after;

/// The delay a `Retry-After` header value asks for: delta-seconds (`"120"`), or an HTTP-date
/// converted against the wall clock (a date in the past means no delay). `None` when the
/// value is neither.
///
/// The core only parses delta-seconds because it has no wall clock; the driver has one.
pub fn retry_after(value: &str) -> Option<Duration> {
    if let Some(delay) = parse_retry_after(value) {
        return Some(delay);
    }
    let at = httpdate::parse_http_date(value.trim()).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_and_garbage() {
        assert_eq!(retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        let later = SystemTime::now() + Duration::from_secs(3600);
        let delay = retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(delay > Duration::from_secs(3590) && delay <= Duration::from_secs(3600));
        assert_eq!(retry_after("soon"), None);
    }
}
