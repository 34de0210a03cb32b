//! Table tests for refusal classification and the `retry in Ns` hint.

use std::time::Duration;

use tether_core::nostr::reason::{classify, classify_notice, retry_hint, Class, Terminal};

fn rl(secs: Option<u64>) -> Class {
    Class::RateLimited {
        retry_after: secs.map(Duration::from_secs),
    }
}

#[test]
fn every_prefix_has_its_class() {
    let table: &[(&str, Class)] = &[
        ("rate-limited: slow down", rl(None)),
        ("rate-limited: too many REQs, retry in 3s", rl(Some(3))),
        ("auth-required: we only serve members", Class::AuthRequired),
        (
            "error: too many subscriptions",
            Class::Terminal(Terminal::TooManySubscriptions),
        ),
        (
            "error: Too Many Subscriptions (max 20)",
            Class::Terminal(Terminal::TooManySubscriptions),
        ),
        (
            "error: mixed search",
            Class::Terminal(Terminal::MixedSearch),
        ),
        (
            "error: query timed out",
            Class::Terminal(Terminal::QueryTimedOut),
        ),
        (
            "restricted: not on the list",
            Class::Terminal(Terminal::Restricted),
        ),
        (
            "blocked: you are banned",
            Class::Terminal(Terminal::Blocked),
        ),
        ("invalid: bad filter", Class::Terminal(Terminal::Invalid)),
        (
            "pow: difficulty 25 required",
            Class::Terminal(Terminal::Pow),
        ),
        (
            "duplicate: already have it",
            Class::Terminal(Terminal::Duplicate),
        ),
        (
            "unsupported: kind 1059",
            Class::Terminal(Terminal::Unsupported),
        ),
        (
            "mute: no one was listening",
            Class::Terminal(Terminal::Mute),
        ),
        ("error: internal database error", Class::Retryable),
        ("error: limit 500 reached", Class::Retryable),
        ("shutting down", Class::Retryable),
        ("", Class::Retryable),
        ("weird-prefix: something", Class::Retryable),
        (
            "Subscription error: Maximum concurrent subscription count reached",
            Class::Terminal(Terminal::TooManySubscriptions),
        ),
        ("you are being rate limited, retry in 7s", rl(Some(7))),
    ];
    for (msg, want) in table {
        assert_eq!(classify(msg), *want, "{msg:?}");
    }
}

#[test]
fn notices_are_refusals_only_when_recognised() {
    assert_eq!(
        classify_notice("Subscription error: Maximum concurrent subscription count reached"),
        Some(Class::Terminal(Terminal::TooManySubscriptions))
    );
    assert_eq!(
        classify_notice("rate-limited: retry in 2s"),
        Some(rl(Some(2)))
    );
    assert_eq!(classify_notice("welcome to the relay"), None);
    assert_eq!(classify_notice("could not parse 3 filters"), None);
}

#[test]
fn hint_parser_table() {
    let ms = Duration::from_millis;
    let table: &[(&str, Option<Duration>)] = &[
        ("rate-limited: retry in 3s", Some(ms(3_000))),
        ("rate-limited: retry in 3 s", Some(ms(3_000))),
        ("rate-limited: retry in 12 seconds", Some(ms(12_000))),
        ("rate-limited: Retry In 1 second.", Some(ms(1_000))),
        ("rate-limited: retry in 2.5s", Some(ms(2_500))),
        ("rate-limited: retry in 1500ms", Some(ms(1_500))),
        ("rate-limited: retry in 2 minutes", Some(ms(120_000))),
        ("rate-limited: retry in 4", Some(ms(4_000))),
        ("rate-limited: retry in 0s", None),
        ("rate-limited: retry in -3s", None),
        ("rate-limited: retry in soon", None),
        ("rate-limited: retry in 5 fortnights", None),
        ("error: limit 500 reached", None),
        ("rate-limited: 30 per minute", None),
        (
            "rate-limited: retry in 99999999999s",
            Some(Duration::from_secs(99_999_999_999)),
        ),
        (
            "rate-limited: retry in 999999999999999999999999999s",
            Some(Duration::from_secs(u64::MAX)),
        ),
    ];
    for (msg, want) in table {
        assert_eq!(retry_hint(msg), *want, "{msg:?}");
    }
}

#[test]
fn huge_hint_is_clamped_by_the_gate() {
    use tether_core::{Instant, RateLimitGate};
    let Class::RateLimited { retry_after } = classify("rate-limited: retry in 99999999999s") else {
        panic!("not rate limited");
    };
    let mut gate = RateLimitGate::default();
    assert_eq!(
        gate.refuse(Instant::ZERO, retry_after),
        Instant::from_millis(300_000)
    );
}
