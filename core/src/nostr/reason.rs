//! What a relay's refusal means: the machine-readable prefix of a `CLOSED` or `OK false`
//! message, its `retry in Ns` hint, and the dialects real relays speak instead.
//!
//! # How a text is classified
//!
//! This runs once per refusal (never per event): byte comparisons against the table, which
//! mostly fail on the first few bytes, and one pass over the words; it allocates only to
//! read a rate limit's hint. The first rule that matches decides:
//!
//! 1. **The table.** [`DIALECTS`] holds every refusal text collected from the source of
//!    deployed relay implementations, each with its repository, file and frame. A text in
//!    the table takes the table's class **even when its own prefix says otherwise**: the
//!    table records what the relay means, and a prefix is sometimes a framework's default
//!    rather than the relay's intent (khatru puts `blocked: ` before any prose reason, so
//!    relay29's `rate-limited` arrives as `blocked: rate-limited`; chorus sends its
//!    subscription cap as `blocked: No more than 32 subscriptions...`; netstr as
//!    `invalid: too many subscriptions`; strfry wraps `auth-required: ...` in `ERROR: `).
//! 2. **The NIP-01 prefix**, for a text in no table. `rate-limited:`, `auth-required:`,
//!    `restricted:`, `blocked:`, `invalid:`, `pow:`, `duplicate:`, `unsupported:` and
//!    `mute:` keep their meaning, whatever follows: `blocked: rate of posting too high`
//!    stays [`Terminal::Blocked`] and `blocked: subscription limit reached` is not a cap.
//!    A specific prefix is the relay's own word, and guessing past it is how a false cap
//!    happens (see below). `error:` is the generic prefix, so after it: `too many
//!    subscriptions`, `mixed search` and `query timed out` are terminal (the rule book);
//!    another NIP-01 prefix (`ERROR: blocked: ...`, strfry's wrapping) means that prefix;
//!    anything else goes to the fallback, then is retryable.
//! 3. **The fallback**, for a text with no prefix (or an unknown one, such as `closed:` or
//!    `bad req:`) and for the rest of an `error:` text. It reads words, not substrings:
//!    - one that plainly speaks of rate — the word `rate` (also `ratelimit...`), or
//!      `slow down`, or `too fast` — is a rate limit, with the message's hint;
//!    - else one that plainly speaks of a subscription limit — a word starting with
//!      `subscription` together with `limit...`, `max`, `maximum`, `exceed...` or
//!      `too many` — is a cap ([`Terminal::TooManySubscriptions`]), unless it speaks of the
//!      request's shape (`id`, `identifier`, `length`, `long`, `filter(s)`, `tag(s)`,
//!      `size`, `bytes`, `chars`, `characters`): `subscription id exceeds max length 64`
//!      is about the id, not the number of subscriptions.
//!
//!    Rate wins over a cap when a text speaks of both, and the cap test is narrow, because
//!    the two mistakes do not cost the same: a rate limit taken wrongly costs a few
//!    bounded retries, a cap taken wrongly lowers, for the rest of the session, the number
//!    of subscriptions it will open. (A `NOTICE` greeting such as `max 20 subscriptions per
//!    connection` would read as a cap if a REQ were waiting for its EOSE; no relay in the
//!    table sends one.)
//! 4. Anything else is [`Class::Retryable`].
//!
//! A `NOTICE` ([`classify_notice`]) goes through the same rules; it is a refusal only when
//! one of rules 1 to 3 recognised it, and chatter otherwise.
//!
//! ## Decided against the text's own prefix
//!
//! nostr-relay-builder refuses a REQ while the connection already has `max_reqs` open
//! subscriptions with `rate-limited: too many REQs` (`crates/nostr-relay-builder/src/local/
//! inner.rs`: the check is `session.subscriptions.len() >= max_reqs`, not a rate). It is a
//! cap in a rate limit's words, so the table makes it [`Terminal::TooManySubscriptions`]:
//! the session learns the cap and queues the refused subscription for a slot, where a rate
//! limit would retry it on a timer into the same full table and, after five tries, give up.
//! The same text with a `retry in Ns` hint is not that row and stays a rate limit.

mod dialects;

use std::time::Duration;

pub use dialects::DIALECTS;

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
    /// `error: too many subscriptions` (or another dialect's cap): retrying on a timer
    /// would be a loop that keeps the relay's subscription budget full.
    TooManySubscriptions,
    /// `error: mixed search` — the filter combines search with what the relay cannot mix.
    MixedSearch,
    /// `error: query timed out` — the same query will time out again.
    QueryTimedOut,
    /// `restricted:`
    Restricted,
    /// `blocked:` (also a relay keeping a deleted event deleted, or a newer version of a
    /// replaceable one: strfry's `deleted:` and `replaced:`).
    Blocked,
    /// `invalid:` (also a malformed request or event refused in other words).
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

/// The frame a refusal text arrives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame {
    /// `["CLOSED", <subscription id>, <text>]`: a refused or ended REQ.
    Closed,
    /// `["OK", <event id>, false, <text>]`: a refused EVENT.
    Ok,
    /// `["NOTICE", <text>]`: no id; some relays refuse REQs only this way.
    Notice,
}

/// One refusal text of a deployed relay implementation: a row of [`DIALECTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// The text as the relay sends it, lower-cased, matched against the whole message
    /// ignoring ASCII case and surrounding whitespace. `{n}` stands for one or more
    /// digits, `{*}` for any text, possibly empty.
    pub pattern: &'static str,
    /// The frames the relay sends it in.
    pub frames: &'static [Frame],
    /// What it means. A rate limit's `retry_after` is read from each message.
    pub class: Class,
    /// Where it comes from: repository, file, and why the class is what it is when that
    /// is not plain from the prefix.
    pub source: &'static str,
}

impl Dialect {
    /// Whether `message` is this text.
    pub fn matches(&self, message: &str) -> bool {
        glob(self.pattern.as_bytes(), message.trim().as_bytes())
    }
}

/// The row of [`DIALECTS`] that `message` is, if any (the first that matches).
pub fn dialect(message: &str) -> Option<&'static Dialect> {
    let text = message.trim().as_bytes();
    let Some(&first) = text.first() else {
        return DIALECTS.iter().find(|d| glob(d.pattern.as_bytes(), text));
    };
    // Only the rows that can match this first byte are tried, in table order, so the first
    // match is the one a scan of the whole table would find.
    candidates(first)
        .map(|row| &DIALECTS[row])
        .find(|d| glob(d.pattern.as_bytes(), text))
}

/// Rows of the table that a text starting with `first` can match, in table order.
fn candidates(first: u8) -> impl Iterator<Item = usize> {
    let words = &BY_FIRST_BYTE[usize::from(first.to_ascii_lowercase())];
    words.iter().enumerate().flat_map(|(w, &bits)| {
        std::iter::successors((bits != 0).then_some(bits), |b| {
            let rest = b & (b - 1);
            (rest != 0).then_some(rest)
        })
        .map(move |b| w * 64 + b.trailing_zeros() as usize)
    })
}

const INDEX_WORDS: usize = dialects::TABLE.len().div_ceil(64);

/// For each (lower-cased) first byte, the rows whose pattern can start with it, as a bit set.
/// Every refusal is matched against the table, and a hostile relay decides how often; most
/// rows fail on the first byte, so they are not tried at all.
static BY_FIRST_BYTE: [[u64; INDEX_WORDS]; 256] = first_byte_index(dialects::TABLE);

const fn first_byte_index(rows: &[Dialect]) -> [[u64; INDEX_WORDS]; 256] {
    let mut index = [[0u64; INDEX_WORDS]; 256];
    let mut row = 0;
    while row < rows.len() {
        let pattern = rows[row].pattern.as_bytes();
        let (word, bit) = (row / 64, 1u64 << (row % 64));
        // A wildcard (or any `{`) may come first: such a row is a candidate for every byte.
        if pattern.is_empty() || pattern[0] == b'{' {
            let mut byte = 0;
            while byte < 256 {
                index[byte][word] |= bit;
                byte += 1;
            }
        } else {
            index[pattern[0].to_ascii_lowercase() as usize][word] |= bit;
        }
        row += 1;
    }
    index
}

/// Classify the message of a `CLOSED` or an `OK false`, by the rules in the module docs:
/// the table, then the NIP-01 prefix, then the fallback, else retryable.
pub fn classify(message: &str) -> Class {
    resolve(message).unwrap_or(Class::Retryable)
}

/// Classify a `NOTICE`, which carries no subscription id: `Some` when its text is a known
/// refusal (nostr-rs-relay, nostream and strfry refuse a subscription past their cap this
/// way), `None` for chatter.
pub fn classify_notice(message: &str) -> Option<Class> {
    resolve(message)
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

fn resolve(message: &str) -> Option<Class> {
    let message = clip(message.trim());
    let class = match dialect(message) {
        Some(d) => Some(d.class),
        None => match split_prefix(message) {
            Some((prefix, rest)) => by_prefix(prefix, rest, message),
            None => fallback(message),
        },
    }?;
    Some(match class {
        Class::RateLimited { .. } => Class::RateLimited {
            retry_after: retry_hint(message),
        },
        other => other,
    })
}

/// Rule 2: a prefix, then what follows it.
fn by_prefix(prefix: &str, rest: &str, message: &str) -> Option<Class> {
    if prefix.eq_ignore_ascii_case("error") {
        return by_error(rest.trim_start());
    }
    nip01(prefix).or_else(|| fallback(message))
}

/// The meaning of a NIP-01 prefix other than `error`.
fn nip01(prefix: &str) -> Option<Class> {
    const PREFIXES: &[(&str, Class)] = &[
        ("rate-limited", Class::RateLimited { retry_after: None }),
        ("auth-required", Class::AuthRequired),
        ("restricted", Class::Terminal(Terminal::Restricted)),
        ("blocked", Class::Terminal(Terminal::Blocked)),
        ("invalid", Class::Terminal(Terminal::Invalid)),
        ("pow", Class::Terminal(Terminal::Pow)),
        ("duplicate", Class::Terminal(Terminal::Duplicate)),
        ("unsupported", Class::Terminal(Terminal::Unsupported)),
        ("mute", Class::Terminal(Terminal::Mute)),
    ];
    PREFIXES
        .iter()
        .find(|(p, _)| prefix.eq_ignore_ascii_case(p))
        .map(|(_, class)| *class)
}

/// After `error:`: the rule book's terminal texts, a wrapped NIP-01 prefix, the fallback.
fn by_error(rest: &str) -> Option<Class> {
    const RULE_BOOK: &[(&str, Terminal)] = &[
        ("too many subscriptions", Terminal::TooManySubscriptions),
        ("mixed search", Terminal::MixedSearch),
        ("query timed out", Terminal::QueryTimedOut),
    ];
    if let Some((_, t)) = RULE_BOOK
        .iter()
        .find(|(text, _)| starts_with_ignore_case(rest, text))
    {
        return Some(Class::Terminal(*t));
    }
    if let Some(class) = split_prefix(rest).and_then(|(inner, _)| nip01(inner)) {
        return Some(class);
    }
    fallback(rest)
}

/// Words that say a limit is about the request's shape, not the number of subscriptions.
const SHAPE: &[&str] = &[
    "id",
    "ids",
    "identifier",
    "length",
    "long",
    "filter",
    "filters",
    "tag",
    "tags",
    "size",
    "bytes",
    "chars",
    "characters",
];

/// Rule 3: a text that plainly speaks of rate, or of a subscription limit.
fn fallback(text: &str) -> Option<Class> {
    let (mut subscription, mut limit, mut shape, mut rate) = (false, false, false, false);
    let mut prev = "";
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let is = |w: &str| word.eq_ignore_ascii_case(w);
        let starts = |p: &str| starts_with_ignore_case(word, p);
        let after = |p: &str| prev.eq_ignore_ascii_case(p);
        subscription |= starts("subscription");
        limit |= starts("limit")
            || starts("exceed")
            || is("max")
            || is("maximum")
            || (after("too") && is("many"));
        shape |= SHAPE.iter().any(|s| is(s));
        rate |= is("rate")
            || starts("ratelimit")
            || (after("slow") && is("down"))
            || (after("too") && is("fast"));
        prev = word;
    }
    if rate {
        Some(Class::RateLimited { retry_after: None })
    } else if subscription && limit && !shape {
        Some(Class::Terminal(Terminal::TooManySubscriptions))
    } else {
        None
    }
}

/// Match a [`Dialect::pattern`] against a whole text, ignoring ASCII case.
///
/// Literal bytes are compared one at a time, so a row fails at its first differing byte
/// without its pattern being scanned ahead for wildcards.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut pattern, mut text) = (pattern, text);
    loop {
        match pattern {
            [] => return text.is_empty(),
            [b'{', b'*', b'}', rest @ ..] => {
                return rest.is_empty() || (0..=text.len()).any(|i| glob(rest, &text[i..]));
            }
            [b'{', b'n', b'}', rest @ ..] => {
                let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
                return (1..=digits).rev().any(|i| glob(rest, &text[i..]));
            }
            [literal, rest @ ..] => {
                let Some((byte, after)) = text.split_first() else {
                    return false;
                };
                if !literal.eq_ignore_ascii_case(byte) {
                    return false;
                }
                (pattern, text) = (rest, after);
            }
        }
    }
}

/// Refusal texts are a sentence; only the first [`MAX_REASON`] bytes are read, so a hostile
/// relay's 4 MiB CLOSED costs what a short one does.
fn clip(message: &str) -> &str {
    if message.len() <= MAX_REASON {
        return message;
    }
    let mut end = MAX_REASON;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// Bytes of a refusal text that are classified.
const MAX_REASON: usize = 1024;

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Split `prefix: rest`; a prefix is a short run of ASCII letters and dashes.
fn split_prefix(message: &str) -> Option<(&str, &str)> {
    let (head, rest) = message.trim_start().split_once(':')?;
    let is_prefix = !head.is_empty()
        && head.len() <= 32
        && head.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-');
    is_prefix.then_some((head, rest))
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
