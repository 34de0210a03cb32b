//! What a relay's refusal means: the machine-readable prefix of a `CLOSED` or `OK false`
//! message, its `retry in Ns` hint, and the refusals real relays send without a prefix.

use std::time::Duration;

/// What the session should do about a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `rate-limited:` — retry behind the session's rate-limit gate, honouring the hint.
    RateLimited {
        /// The relay's `retry in Ns`, when present and positive.
        retry_after: Option<Duration>,
    },
    /// `auth-required:` — authenticate (NIP-42), then retry once.
    AuthRequired,
    /// Anything not known to be final: retry under bounded backoff.
    Retryable,
    /// The request itself is the problem; retrying it cannot succeed.
    Terminal(Terminal),
}

/// Why a refusal is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal {
    /// `error: too many subscriptions` (or a prefix-less equivalent): retrying on a timer
    /// would be a loop that keeps the relay's subscription budget full.
    TooManySubscriptions,
    /// `error: mixed search` — the filter combines search with what the relay cannot mix.
    MixedSearch,
    /// `error: query timed out` — the same query will time out again.
    QueryTimedOut,
    /// `restricted:`
    Restricted,
    /// `blocked:`
    Blocked,
    /// `invalid:`
    Invalid,
    /// `pow:`
    Pow,
    /// `duplicate:` — for a publish, the relay already has the event: a success.
    Duplicate,
    /// `unsupported:`
    Unsupported,
    /// `mute:`
    Mute,
}

/// Classify the message of a `CLOSED` or an `OK false`.
///
/// Known prefixes follow NIP-01; an unknown or missing prefix is retryable unless the text
/// matches a refusal from [`UNPREFIXED`].
pub fn classify(message: &str) -> Class {
    let (prefix, rest) = split_prefix(message);
    match prefix.as_deref() {
        Some("rate-limited") => Class::RateLimited {
            retry_after: retry_hint(message),
        },
        Some("auth-required") => Class::AuthRequired,
        Some("restricted") => Class::Terminal(Terminal::Restricted),
        Some("blocked") => Class::Terminal(Terminal::Blocked),
        Some("invalid") => Class::Terminal(Terminal::Invalid),
        Some("pow") => Class::Terminal(Terminal::Pow),
        Some("duplicate") => Class::Terminal(Terminal::Duplicate),
        Some("unsupported") => Class::Terminal(Terminal::Unsupported),
        Some("mute") => Class::Terminal(Terminal::Mute),
        Some("error") => classify_error(rest),
        _ => classify_unprefixed(message).unwrap_or(Class::Retryable),
    }
}

/// Classify a `NOTICE`, which carries no subscription id: `Some` when its text is a known
/// refusal (nostr-rs-relay refuses the 33rd subscription this way), `None` for chatter.
pub fn classify_notice(message: &str) -> Option<Class> {
    let (prefix, _) = split_prefix(message);
    match prefix.as_deref() {
        Some("rate-limited") => Some(Class::RateLimited {
            retry_after: retry_hint(message),
        }),
        _ => classify_unprefixed(message),
    }
}

/// Parse the relay's `retry in Ns` hint (also `N s`, `N sec`, `N seconds`, `N.5s`,
/// `N ms`, `N min`, `N minutes`; a bare number means seconds).
///
/// A hint of zero or less is no hint. A huge hint saturates instead of overflowing; the
/// gate caps it. A number that is not after `retry in` is never a hint.
pub fn retry_hint(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let start = lower.find("retry in")? + "retry in".len();
    let rest = lower[start..].trim_start();
    if rest.starts_with('-') {
        return None;
    }
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if int_len == 0 {
        return None;
    }
    let int = saturating_parse(&rest[..int_len]);
    let mut after = &rest[int_len..];
    let mut frac_nanos = 0u64;
    if let Some(f) = after.strip_prefix('.') {
        let frac_len = f.bytes().take_while(u8::is_ascii_digit).count();
        frac_nanos = fraction_nanos(&f[..frac_len]);
        after = &f[frac_len..];
    }
    let unit: String = after
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let hint = match unit.as_str() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => {
            Duration::new(int, 0).saturating_add(Duration::from_nanos(frac_nanos))
        }
        "ms" | "millisecond" | "milliseconds" => Duration::from_millis(int),
        "m" | "min" | "mins" | "minute" | "minutes" => Duration::from_secs(int.saturating_mul(60)),
        _ => return None,
    };
    (!hint.is_zero()).then_some(hint)
}

/// Refusals real relays send without a machine-readable prefix: a lower-case substring of the
/// message, what it means, and where it was seen. Checked in order.
pub const UNPREFIXED: &[(&str, Class, &str)] = &[
    (
        "maximum concurrent subscription count reached",
        Class::Terminal(Terminal::TooManySubscriptions),
        "nostr-rs-relay NOTICE `Subscription error: Maximum concurrent subscription count reached`",
    ),
    (
        "too many subscriptions",
        Class::Terminal(Terminal::TooManySubscriptions),
        "strfry and others, with or without `error:`",
    ),
    (
        "too many concurrent req",
        Class::Terminal(Terminal::TooManySubscriptions),
        "relays counting open REQs",
    ),
    (
        "max subscriptions",
        Class::Terminal(Terminal::TooManySubscriptions),
        "relays quoting their NIP-11 limit",
    ),
    (
        "rate limit",
        Class::RateLimited { retry_after: None },
        "prose refusals such as `you are being rate limited`",
    ),
    (
        "slow down",
        Class::RateLimited { retry_after: None },
        "prose refusals such as `slow down`",
    ),
];

fn classify_error(rest: &str) -> Class {
    let rest = rest.trim_start().to_ascii_lowercase();
    if rest.starts_with("too many subscriptions") {
        Class::Terminal(Terminal::TooManySubscriptions)
    } else if rest.starts_with("mixed search") {
        Class::Terminal(Terminal::MixedSearch)
    } else if rest.starts_with("query timed out") {
        Class::Terminal(Terminal::QueryTimedOut)
    } else {
        classify_unprefixed(&rest).unwrap_or(Class::Retryable)
    }
}

fn classify_unprefixed(message: &str) -> Option<Class> {
    let lower = message.to_ascii_lowercase();
    let (_, class, _) = UNPREFIXED
        .iter()
        .find(|(pattern, _, _)| lower.contains(pattern))?;
    Some(match class {
        Class::RateLimited { .. } => Class::RateLimited {
            retry_after: retry_hint(message),
        },
        other => *other,
    })
}

/// Split `prefix: rest`; a prefix is a short run of lower-case letters and dashes.
fn split_prefix(message: &str) -> (Option<String>, &str) {
    let trimmed = message.trim_start();
    let Some((head, rest)) = trimmed.split_once(':') else {
        return (None, message);
    };
    let is_prefix = !head.is_empty()
        && head.len() <= 32
        && head.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-');
    if !is_prefix {
        return (None, message);
    }
    (Some(head.to_ascii_lowercase()), rest)
}

fn saturating_parse(digits: &str) -> u64 {
    digits.bytes().fold(0u64, |acc, d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    })
}

fn fraction_nanos(digits: &str) -> u64 {
    let mut nanos = 0u64;
    let mut scale = 100_000_000u64;
    for d in digits.bytes().take(9) {
        nanos += u64::from(d - b'0') * scale;
        scale /= 10;
    }
    nanos
}
