//! `Retry-After` in both of its forms.

use std::time::{Duration, SystemTime};

/// The delay a `Retry-After` header value asks for, by the core's rule
/// ([`tether_core::sse::status::retry_after`]), the wall clock read once, here, for the
/// response that carried it.
pub fn retry_after(value: &str) -> Option<Duration> {
    let unix_now = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs());
    tether_core::sse::status::retry_after(value, unix_now)
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
