//! Table tests for refusal classification and the `retry in Ns` hint: every refusal text
//! collected from relay implementations' source, the fallback for texts in no table, and
//! which rule wins where they meet.

use std::time::Duration;

use tether_core::nostr::reason::{
    classify, classify_notice, dialect, retry_hint, Class, Frame, Terminal, DIALECTS,
};

const fn rl(secs: Option<u64>) -> Class {
    Class::RateLimited {
        retry_after: match secs {
            Some(secs) => Some(Duration::from_secs(secs)),
            None => None,
        },
    }
}

const fn cap() -> Class {
    Class::Terminal(Terminal::TooManySubscriptions)
}

const fn t(terminal: Terminal) -> Class {
    Class::Terminal(terminal)
}

/// Every collected text as a relay sends it (numbers and names filled in), its source, and
/// the class it must get. Written out here, apart from the table, so that a change of class
/// in the table or in the classifier fails this test.
const COLLECTED: &[(&str, &str, Class)] = &[
        ("hoytech/strfry", "ERROR: too many concurrent REQs", cap()),
        ("hoytech/strfry", "ERROR: auth-required: requested filter requires authentication", Class::AuthRequired),
        ("hoytech/strfry", "ERROR: count-failed: can only count events you are involved in", t(Terminal::Restricted)),
        ("hoytech/strfry", "ERROR: bad req: filter validation failed: kind not allowed: 4", t(Terminal::Invalid)),
        ("hoytech/strfry", "error: internal error", Class::Retryable),
        ("hoytech/strfry", "Write error: MDB_MAP_FULL", Class::Retryable),
        ("hoytech/strfry", "replaced: have newer event", t(Terminal::Blocked)),
        ("hoytech/strfry", "deleted: user requested deletion", t(Terminal::Blocked)),
        ("hoytech/strfry", "duplicate: have this event", t(Terminal::Duplicate)),
        ("hoytech/strfry", "blocked: event marked as protected", t(Terminal::Blocked)),
        ("hoytech/strfry", "auth-required: event marked as protected", Class::AuthRequired),
        ("hoytech/strfry", "restricted: must be published by the author", t(Terminal::Restricted)),
        ("hoytech/strfry", "blocked: reposts can't embed protected events", t(Terminal::Blocked)),
        ("hoytech/strfry", "invalid: created_at too late", t(Terminal::Invalid)),
        ("hoytech/strfry", "invalid: event too large: 70000", t(Terminal::Invalid)),
        ("fiatjaf/khatru", "auth-required: all requests must be authenticated", Class::AuthRequired),
        ("fiatjaf/khatru", "blocked: too many things to filter for", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: can't handle empty filters", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: search is not supported", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "rate-limited: there is a bug in the client, no one should be making so many requests", rl(None)),
        ("fiatjaf/khatru", "rate-limited: slow down, please", rl(None)),
        ("fiatjaf/khatru", "restricted: this relay does not serve kind-4 to unauthenticated users, does your client implement NIP-42?", Class::AuthRequired),
        ("fiatjaf/khatru", "restricted: authenticated user does not have authorization for requested filters.", t(Terminal::Restricted)),
        ("fiatjaf/khatru", "unsupported: this relay does not support NIP-45", t(Terminal::Unsupported)),
        ("fiatjaf/khatru", "blocked: too many indexable tags", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: event contains too large tags", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: received event kind 1984 not allowed", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: event too old", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: event too much in the future", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: event with base64 media", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: we only accept events protected with the nip70 \"-\" tag", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: missing json name in kind 0", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: this kind has been deprecated", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: no reason", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: this event has been deleted", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "invalid: id is computed incorrectly", t(Terminal::Invalid)),
        ("fiatjaf/khatru", "error: failed to verify signature", t(Terminal::Invalid)),
        ("fiatjaf/khatru", "invalid: signature is invalid", t(Terminal::Invalid)),
        ("fiatjaf/khatru", "auth-required: must be published by authenticated event author", Class::AuthRequired),
        ("fiatjaf/khatru", "blocked: must be published by event author", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "blocked: can't repost nip70 protected", t(Terminal::Blocked)),
        ("fiatjaf/khatru", "mute: no one was listening for this", t(Terminal::Mute)),
        ("fiatjaf/khatru", "failed to parse envelope: unknown envelope label", t(Terminal::Invalid)),
        ("bitvora/haven", "restricted: you must be whitelisted to query this relay", t(Terminal::Restricted)),
        ("bitvora/haven", "restricted: you must be in the web of trust to query this relay", t(Terminal::Restricted)),
        ("bitvora/haven", "auth-required: you must be authenticated to post to this relay", Class::AuthRequired),
        ("bitvora/haven", "restricted: you must be whitelisted to post to this relay", t(Terminal::Restricted)),
        ("bitvora/haven", "blocked: you must be in the web of trust to post to this relay", t(Terminal::Blocked)),
        ("bitvora/haven", "blocked: you are blacklisted from this relay", t(Terminal::Blocked)),
        ("bitvora/haven", "blocked: only chat related events are allowed", t(Terminal::Blocked)),
        ("bitvora/haven", "blocked: only gift wrapped DMs are supported", t(Terminal::Blocked)),
        ("bitvora/haven", "blocked: you can only post notes if you've tagged a whitelisted pubkey in this relay", t(Terminal::Blocked)),
        ("bitvora/wot-relay", "blocked: not in web of trust", t(Terminal::Blocked)),
        ("bitvora/wot-relay", "blocked: only gift wrapped DMs are allowed", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: it's not allowed to mix metadata kinds with others", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "auth-required: trying to read from a private group", Class::AuthRequired),
        ("fiatjaf/relay29", "restricted: not a member", t(Terminal::Restricted)),
        ("fiatjaf/relay29", "blocked: invalid query, must have 'h', 'e' or 'a' tag", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: rate-limited", rl(None)),
        ("fiatjaf/relay29", "blocked: missing group (`h`) tag", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: group 'pizza' doesn't exist", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "duplicate: already a member", t(Terminal::Duplicate)),
        ("fiatjaf/relay29", "duplicate: group already exists", t(Terminal::Duplicate)),
        ("fiatjaf/relay29", "blocked: unknown member", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: this was deleted", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: moderation action is too old (older than 1 minute ago)", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: invalid moderation action: missing 'p' tags", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: groups cannot be private", t(Terminal::Blocked)),
        ("fiatjaf/relay29", "blocked: insufficient permissions", t(Terminal::Blocked)),
        ("Cameri/nostream", "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to 10", cap()),
        ("Cameri/nostream", "Subscription rejected: Too many filters: Number of filters per susbscription must be less then or equal to 10", t(Terminal::Invalid)),
        ("Cameri/nostream", "Subscription rejected: Subscription ID too long: Subscription ID must be less or equal to 256", t(Terminal::Invalid)),
        ("Cameri/nostream", "Subscription rejected: Duplicate subscription feed: Ignoring", Class::Retryable),
        ("Cameri/nostream", "rate limited", rl(None)),
        ("Cameri/nostream", "rate-limited: slow down", rl(None)),
        ("Cameri/nostream", "event is expired", t(Terminal::Invalid)),
        ("Cameri/nostream", "error: event not supported", t(Terminal::Unsupported)),
        ("Cameri/nostream", "error: unable to process event", Class::Retryable),
        ("Cameri/nostream", "rejected: content is longer than 102400 bytes", t(Terminal::Invalid)),
        ("Cameri/nostream", "rejected: created_at is more than 900 seconds in the future", t(Terminal::Invalid)),
        ("Cameri/nostream", "rejected: created_at is more than 3600 seconds in the past", t(Terminal::Invalid)),
        ("Cameri/nostream", "rejected: event already exists", t(Terminal::Blocked)),
        ("Cameri/nostream", "pow: difficulty 3<16", t(Terminal::Pow)),
        ("Cameri/nostream", "pow: pubkey difficulty 2<8", t(Terminal::Pow)),
        ("Cameri/nostream", "blocked: pubkey not allowed", t(Terminal::Blocked)),
        ("Cameri/nostream", "blocked: event kind 4 not allowed", t(Terminal::Blocked)),
        ("Cameri/nostream", "invalid: event id does not match", t(Terminal::Invalid)),
        ("Cameri/nostream", "invalid: event signature verification failed", t(Terminal::Invalid)),
        ("Cameri/nostream", "blocked: pubkey not admitted", t(Terminal::Blocked)),
        ("Cameri/nostream", "blocked: Insufficient balance", t(Terminal::Blocked)),
        ("scsibug/nostr-rs-relay", "Subscription error: Maximum concurrent subscription count reached", cap()),
        ("scsibug/nostr-rs-relay", "Subscription error: Subscription identifier max length exceeded", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "message too large (200000 > 131072)", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "event exceeded max size", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "could not parse command", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "binary messages are not accepted", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "blocked: event kind is blocked by relay", t(Terminal::Blocked)),
        ("scsibug/nostr-rs-relay", "blocked: pubkey is not allowed to publish to this relay", t(Terminal::Blocked)),
        ("scsibug/nostr-rs-relay", "blocked: User is not admitted", t(Terminal::Blocked)),
        ("scsibug/nostr-rs-relay", "error: Pubkey not registered", t(Terminal::Restricted)),
        ("scsibug/nostr-rs-relay", "error: relay experienced an error checking your admission status", Class::Retryable),
        ("scsibug/nostr-rs-relay", "error: relay experienced an error trying to publish the latest event", Class::Retryable),
        ("scsibug/nostr-rs-relay", "blocked: NIP-05 verification is no longer valid (expired/wrong domain)", t(Terminal::Blocked)),
        ("scsibug/nostr-rs-relay", "blocked: NIP-05 verification needed to publish events", t(Terminal::Blocked)),
        ("scsibug/nostr-rs-relay", "invalid: The event has already expired", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "invalid: The event created_at field is out of the acceptable range (+900sec) for this relay.", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "invalid: Event invalid signature", t(Terminal::Invalid)),
        ("scsibug/nostr-rs-relay", "invalid: Event invalid id", t(Terminal::Invalid)),
        ("mikedilger/chorus", "blocked: No more than 32 subscriptions are allowed at any one time", cap()),
        ("mikedilger/chorus", "invalid: Filter is underspecified. Scrapers are not allowed", t(Terminal::Invalid)),
        ("mikedilger/chorus", "auth-required: DM kinds were included in the filters", Class::AuthRequired),
        ("mikedilger/chorus", "auth-required: At least one matching event requires AUTH", Class::AuthRequired),
        ("mikedilger/chorus", "auth-required: this personal relay only accepts events related to its users", Class::AuthRequired),
        ("mikedilger/chorus", "restricted: this personal relay only accepts events related to its users", t(Terminal::Restricted)),
        ("mikedilger/chorus", "blocked: Event has been banned", t(Terminal::Blocked)),
        ("mikedilger/chorus", "blocked: Author has been banned", t(Terminal::Blocked)),
        ("mikedilger/chorus", "blocked: That event is deleted", t(Terminal::Blocked)),
        ("mikedilger/chorus", "Rate limit exceeded.", rl(None)),
        ("mikedilger/chorus", "Closing due to error(s)", Class::Retryable),
        ("mikedilger/chorus", "binary messages are not processed by this relay", t(Terminal::Invalid)),
        ("mikedilger/chorus", "Command unrecognized", t(Terminal::Invalid)),
        ("rust-nostr/nostr", "blocked: subscription ID exceeds max length 64", t(Terminal::Blocked)),
        ("rust-nostr/nostr", "rate-limited: too many REQs", cap()),
        ("rust-nostr/nostr", "auth-required: you must auth", Class::AuthRequired),
        ("rust-nostr/nostr", "error: you cannot request another user's gift wrap", t(Terminal::Restricted)),
        ("rust-nostr/nostr", "invalid: invalid event ID", t(Terminal::Invalid)),
        ("rust-nostr/nostr", "blocked: event is expired", t(Terminal::Blocked)),
        ("rust-nostr/nostr", "pow: required a difficulty >= 20", t(Terminal::Pow)),
        ("rust-nostr/nostr", "invalid: invalid event signature", t(Terminal::Invalid)),
        ("rust-nostr/nostr", "blocked: this event may only be published by its author", t(Terminal::Blocked)),
        ("rust-nostr/nostr", "duplicate: already have this event", t(Terminal::Duplicate)),
        ("rust-nostr/nostr", "blocked: this event is deleted", t(Terminal::Blocked)),
        ("rust-nostr/nostr", "blocked: event not related to owner of this relay", t(Terminal::Blocked)),
        ("rust-nostr/nostr", "error: unknown", Class::Retryable),
        ("rust-nostr/nostr", "error: database error", Class::Retryable),
        ("rnostr/rnostr", "Number of subscriptions exceeds limit", cap()),
        ("rnostr/rnostr", "Subscription id should be non-empty string of max length 64 chars", t(Terminal::Invalid)),
        ("rnostr/rnostr", "Something is wrong", Class::Retryable),
        ("rnostr/rnostr", "get event error: Scan timeout", t(Terminal::QueryTimedOut)),
        ("rnostr/rnostr", "get event error: io: broken pipe", Class::Retryable),
        ("rnostr/rnostr", "auth-required: need reconnect", Class::AuthRequired),
        ("rnostr/rnostr", "auth-required: this event may only be published by its author", Class::AuthRequired),
        ("rnostr/rnostr", "auth-required: this event require authorization", Class::AuthRequired),
        ("rnostr/rnostr", "duplicate: event exists", t(Terminal::Duplicate)),
        ("rnostr/rnostr", "write event error", Class::Retryable),
        ("rnostr/rnostr", "payload reached size limit.", t(Terminal::Invalid)),
        ("rnostr/rnostr", "Not support binary message", t(Terminal::Invalid)),
        ("rnostr/rnostr", "json error: expected value at line 1 column 1", t(Terminal::Invalid)),
        ("rnostr/rnostr", "Unsupported message", t(Terminal::Unsupported)),
        ("CodyTseng/nostr-relay", "restricted: we can't serve DMs to unauthenticated users, does your client implement NIP-42?", Class::AuthRequired),
        ("CodyTseng/nostr-relay", "invalid: unknown message type", t(Terminal::Invalid)),
        ("CodyTseng/nostr-relay", "duplicate: the event already exists", t(Terminal::Duplicate)),
        ("CodyTseng/nostr-relay", "invalid: id is wrong", t(Terminal::Invalid)),
        ("CodyTseng/nostr-relay", "invalid: signature is wrong", t(Terminal::Invalid)),
        ("CodyTseng/nostr-relay", "reject: event is expired", t(Terminal::Invalid)),
        ("CodyTseng/nostr-relay", "invalid: delegation tag verification failed", t(Terminal::Invalid)),
        ("CodyTseng/nostr-relay-nestjs", "rate-limited: slow down there chief", rl(None)),
        ("CodyTseng/nostr-relay-nestjs", "blocked: you are banned from posting here", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "rate-limited: REQ rate limit exceeded", rl(None)),
        ("0ceanSlim/grain", "rate-limited: WebSocket message rate limit exceeded", rl(None)),
        ("0ceanSlim/grain", "error: server at max capacity, try again later", Class::Retryable),
        ("0ceanSlim/grain", "auth-required: authentication is required to use this relay", Class::AuthRequired),
        ("0ceanSlim/grain", "invalid: subscription ID must be between 1 and 64 characters long", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "invalid: invalid filter format", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "invalid: invalid REQ message format", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "Global event rate limit exceeded", rl(None)),
        ("0ceanSlim/grain", "Rate limit exceeded for kind: 1", rl(None)),
        ("0ceanSlim/grain", "Rate limit exceeded for category: regular", rl(None)),
        ("0ceanSlim/grain", "Global event size limit exceeded", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "Event size limit exceeded for kind", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "blocked: pubkey is blacklisted", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "blocked: pubkey is temporarily blacklisted", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "blocked: pubkey is permanently banned", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "blocked: pubkey is temporarily banned", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "blocked: a newer replaceable event of kind 0 already exists for this pubkey", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "blocked: a newer addressable event of kind 30023 with d-tag \"post\" already exists for this pubkey", t(Terminal::Blocked)),
        ("0ceanSlim/grain", "auth-required: this event is protected and requires authentication", Class::AuthRequired),
        ("0ceanSlim/grain", "restricted: protected events may only be published by their author", t(Terminal::Restricted)),
        ("0ceanSlim/grain", "invalid: event created_at timestamp is out of allowed range", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "invalid: event is expired", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "invalid: signature verification failed", t(Terminal::Invalid)),
        ("0ceanSlim/grain", "error: internal server error", Class::Retryable),
        ("0ceanSlim/grain", "error: internal server error during duplicate check", Class::Retryable),
        ("0ceanSlim/grain", "error: database not available", Class::Retryable),
        ("pippellia-btc/rely", "invalid subscription ID: subscription ID is empty", t(Terminal::Invalid)),
        ("pippellia-btc/rely", "invalid event ID", t(Terminal::Invalid)),
        ("pippellia-btc/rely", "invalid event signature", t(Terminal::Invalid)),
        ("pippellia-btc/rely", "NIP-45 COUNT is not supported", t(Terminal::Unsupported)),
        ("bezysoftware/netstr", "invalid: too many subscriptions", cap()),
        ("bezysoftware/netstr", "invalid: too many filters", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: subscription id is too long", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: filter limit is too high", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: cannot process filters", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "unsupported: filter contains unknown elements", t(Terminal::Unsupported)),
        ("bezysoftware/netstr", "auth-required: we only allow publishing and subscribing to authenticated clients", Class::AuthRequired),
        ("bezysoftware/netstr", "auth-required: subscribing to specified kind(s) requires authentication", Class::AuthRequired),
        ("bezysoftware/netstr", "auth-required: we only allow publishing to authenticated clients", Class::AuthRequired),
        ("bezysoftware/netstr", "invalid: event creation date is too far off from the current time", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: too few fields in tag", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: too many tags", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: cannot delete deletions and someone else's events", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: this event was already deleted", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "invalid: this event has an unexpected value of tag p", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "duplicate: already have a newer version of this event", t(Terminal::Duplicate)),
        ("bezysoftware/netstr", "pow: difficulty 10 is less than 20", t(Terminal::Pow)),
        ("bezysoftware/netstr", "pow: difficulty 24 doesn't match target of 20", t(Terminal::Pow)),
        ("bezysoftware/netstr", "error: unable to process the event", Class::Retryable),
        ("bezysoftware/netstr", "error: internal error while processing your message", Class::Retryable),
        ("bezysoftware/netstr", "invalid: message is too large", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "unable to parse the message", t(Terminal::Invalid)),
        ("bezysoftware/netstr", "unknown message type", t(Terminal::Invalid)),
];

#[test]
fn every_collected_text_has_its_class() {
    for (source, text, want) in COLLECTED {
        let row = dialect(text).unwrap_or_else(|| panic!("{source}: {text:?} is in no table row"));
        assert_eq!(classify(text), *want, "{source}: {text:?}");
        if row.frames.contains(&Frame::Notice) {
            assert_eq!(
                classify_notice(text),
                Some(*want),
                "{source}: NOTICE {text:?}"
            );
        }
    }
}

#[test]
fn every_table_row_is_reached_by_a_collected_text() {
    for row in DIALECTS {
        assert!(
            COLLECTED
                .iter()
                .any(|(_, text, _)| dialect(text).is_some_and(|d| std::ptr::eq(d, row))),
            "no collected text reaches {:?} (missing, or shadowed by an earlier row)",
            row.pattern
        );
    }
}

#[test]
fn table_rows_are_well_formed() {
    for row in DIALECTS {
        let p = row.pattern;
        assert!(!p.is_empty() && p == p.trim(), "{p:?}");
        assert_eq!(p, p.to_ascii_lowercase(), "patterns are lower-case");
        for (i, _) in p.match_indices('{') {
            assert!(
                p[i..].starts_with("{n}") || p[i..].starts_with("{*}"),
                "{p:?}: only {{n}} and {{*}} are placeholders"
            );
        }
        assert!(!row.frames.is_empty(), "{p:?}");
        assert!(row.source.contains('/'), "{p:?}: name the repository");
        if let Class::RateLimited { retry_after } = row.class {
            assert_eq!(retry_after, None, "{p:?}: the hint comes from each message");
        }
    }
}

#[test]
fn the_fallback_reads_prefixless_rate_and_cap_refusals() {
    let table: &[(&str, Class)] = &[
        ("Subscription limit exceeded", cap()),
        (
            "you have exceeded the maximum number of subscriptions",
            cap(),
        ),
        ("too many subscriptions open, close some first", cap()),
        ("max subscriptions: 20", cap()),
        ("Maximum of 10 subscriptions per connection", cap()),
        ("error: subscription limit of 50 reached", cap()),
        ("closed: too many subscriptions for this IP", cap()),
        ("slow down there chief", rl(None)),
        ("posting too fast", rl(None)),
        ("rate limit hit", rl(None)),
        ("ratelimited", rl(None)),
        ("you are being rate limited, retry in 7s", rl(Some(7))),
        ("error: rate limited", rl(None)),
        ("error: slow down", rl(None)),
        // Rate wins over a cap: the cheaper mistake.
        (
            "Subscription rate limit exceeded, retry in 30 seconds",
            rl(Some(30)),
        ),
    ];
    for (msg, want) in table {
        assert!(dialect(msg).is_none(), "{msg:?} is in the table");
        assert_eq!(classify(msg), *want, "{msg:?}");
        assert_eq!(classify_notice(msg), Some(*want), "NOTICE {msg:?}");
    }
}

#[test]
fn the_fallback_leaves_other_texts_alone() {
    let table: &[(&str, Class)] = &[
        ("subscription closed by admin", Class::Retryable),
        (
            "Subscription ID exceeds the maximum length",
            Class::Retryable,
        ),
        ("subscription id too long, max 64", Class::Retryable),
        ("too many filters in subscription", Class::Retryable),
        ("subscription tag size limit exceeded", Class::Retryable),
        ("moderated content is not allowed here", Class::Retryable),
        ("generated too many events", Class::Retryable),
        ("server at max capacity", Class::Retryable),
        ("too many concurrent requests", Class::Retryable),
        ("error: limit 500 reached", Class::Retryable),
        ("invalid: bad signature", t(Terminal::Invalid)),
        // A NIP-01 prefix keeps its meaning for a text in no table.
        ("blocked: rate of posting too high", t(Terminal::Blocked)),
        ("blocked: subscription limit reached", t(Terminal::Blocked)),
        (
            "restricted: too many subscriptions for guests",
            t(Terminal::Restricted),
        ),
        ("invalid: subscription limit exceeded", t(Terminal::Invalid)),
        (
            "auth-required: too many subscriptions for anonymous users",
            Class::AuthRequired,
        ),
    ];
    for (msg, want) in table {
        assert!(dialect(msg).is_none(), "{msg:?} is in the table");
        assert_eq!(classify(msg), *want, "{msg:?}");
    }
    for chatter in [
        "subscription closed by admin",
        "welcome!",
        "ERROR: bad msg: unparseable message",
    ] {
        assert_eq!(classify_notice(chatter), None, "{chatter:?}");
    }
}

#[test]
fn where_the_rules_meet() {
    let table: &[(&str, Class)] = &[
        // The table wins over a text's own prefix...
        ("blocked: rate-limited", rl(None)),
        ("invalid: too many subscriptions", cap()),
        (
            "ERROR: auth-required: requested filter requires authentication",
            Class::AuthRequired,
        ),
        // ...but only for the whole text: anything else follows its prefix.
        ("invalid: too many subscriptions!!", t(Terminal::Invalid)),
        (
            "blocked: No more than many subscriptions are allowed at any one time",
            t(Terminal::Blocked),
        ),
        // strfry's `ERROR: ` before another NIP-01 prefix means that prefix.
        ("ERROR: blocked: not today", t(Terminal::Blocked)),
        ("ERROR: rate-limited: slow down, retry in 2s", rl(Some(2))),
        ("error: invalid: bad filter", t(Terminal::Invalid)),
        // A table row still reads each message's hint.
        (
            "Rate limit exceeded for category: regular, retry in 4s",
            rl(Some(4)),
        ),
        ("rate-limited: too many REQs, retry in 3s", rl(Some(3))),
        // Case and surrounding whitespace do not matter.
        (
            "  blocked: No more than 32 subscriptions are allowed at any one time\n",
            cap(),
        ),
        (
            "BLOCKED: NO MORE THAN 32 SUBSCRIPTIONS ARE ALLOWED AT ANY ONE TIME",
            cap(),
        ),
        ("error: Too Many Subscriptions (max 20)", cap()),
    ];
    for (msg, want) in table {
        assert_eq!(classify(msg), *want, "{msg:?}");
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

#[test]
fn a_huge_refusal_text_is_classified_by_its_start() {
    // Only the first KiB is read: the class comes from the start, whatever follows.
    let huge = format!("rate-limited: slow down {}", "x".repeat(4 << 20));
    assert!(matches!(classify(&huge), Class::RateLimited { .. }));
    let past_the_clip = format!("{} rate-limited: slow down", "y".repeat(2048));
    assert_eq!(classify(&past_the_clip), Class::Retryable);
}

/// The first row that matches, by a scan of the whole table (what `dialect` must equal).
fn scan(text: &str) -> Option<&'static tether_core::nostr::reason::Dialect> {
    DIALECTS.iter().find(|d| d.matches(text))
}

#[test]
fn the_first_byte_index_finds_the_row_a_whole_scan_finds() {
    for (_, text, _) in COLLECTED {
        for variant in [
            text.to_string(),
            text.to_ascii_uppercase(),
            format!("  {text}\n"),
            text[1..].to_string(),
            format!("x{text}"),
        ] {
            let (got, want) = (dialect(&variant), scan(&variant));
            assert!(
                got.map(|d| d as *const _) == want.map(|d| d as *const _),
                "{variant:?}: index {:?}, scan {:?}",
                got.map(|d| d.pattern),
                want.map(|d| d.pattern)
            );
        }
    }
    assert_eq!(dialect(""), None);
    assert_eq!(dialect(" \t"), None);
}

proptest::proptest! {
    #[test]
    fn the_first_byte_index_agrees_with_a_whole_scan_on_any_text(
        row in 0..DIALECTS.len(),
        cut in 0usize..80,
        noise in "[ -~]{0,12}",
        upper: bool,
    ) {
        // Texts near a row: a prefix of its pattern with noise after, in either case.
        let pattern = DIALECTS[row].pattern.replace("{n}", "42").replace("{*}", "");
        let mut text = format!("{}{noise}", &pattern[..cut.min(pattern.len())]);
        if upper {
            text = text.to_ascii_uppercase();
        }
        let (got, want) = (dialect(&text), scan(&text));
        proptest::prop_assert_eq!(got.map(|d| d.pattern), want.map(|d| d.pattern));
    }
}
