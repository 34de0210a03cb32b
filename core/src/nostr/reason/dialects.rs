//! The refusal texts of deployed relay implementations, read from their source.
//!
//! Only the message texts were taken, never code. Each entry names the repository, the
//! file and the snapshot (short commit) it was read from. Patterns are matched against
//! the whole message, ignoring ASCII case and surrounding whitespace: `{n}` stands for a
//! run of digits, `{*}` for any text (see [`super::Dialect`]).
//!
//! Where the class differs from what the NIP-01 prefix alone would say, the entry says
//! why (`override:`). Entries are checked in order; a more specific pattern comes before
//! a wider one it overlaps.

use super::{Class, Dialect, Frame, Terminal};

const CAP: Class = Class::Terminal(Terminal::TooManySubscriptions);
const RATE: Class = Class::RateLimited { retry_after: None };
const AUTH: Class = Class::AuthRequired;
const RETRY: Class = Class::Retryable;
const INVALID: Class = Class::Terminal(Terminal::Invalid);
const BLOCKED: Class = Class::Terminal(Terminal::Blocked);
const RESTRICTED: Class = Class::Terminal(Terminal::Restricted);
const UNSUPPORTED: Class = Class::Terminal(Terminal::Unsupported);
const DUPLICATE: Class = Class::Terminal(Terminal::Duplicate);
const POW: Class = Class::Terminal(Terminal::Pow);
const MUTE: Class = Class::Terminal(Terminal::Mute);
const TIMED_OUT: Class = Class::Terminal(Terminal::QueryTimedOut);

const C: &[Frame] = &[Frame::Closed];
const O: &[Frame] = &[Frame::Ok];
const N: &[Frame] = &[Frame::Notice];
const CN: &[Frame] = &[Frame::Closed, Frame::Notice];
const CO: &[Frame] = &[Frame::Closed, Frame::Ok];
const ON: &[Frame] = &[Frame::Ok, Frame::Notice];
const CON: &[Frame] = &[Frame::Closed, Frame::Ok, Frame::Notice];

const fn d(
    pattern: &'static str,
    frames: &'static [Frame],
    class: Class,
    source: &'static str,
) -> Dialect {
    Dialect {
        pattern,
        frames,
        class,
        source,
    }
}

/// Every collected refusal text, grouped by implementation.
pub static DIALECTS: &[Dialect] = TABLE;

/// [`DIALECTS`] as a constant, so that the first-byte index is built at compile time.
pub(super) const TABLE: &[Dialect] = &[
    // ----- strfry (hoytech/strfry @ f8a56a859676) -------------------------------------------
    // `sendNoticeError` and `sendClosedError` (src/apps/relay/RelayServer.h) put `ERROR: `
    // before every text, including texts that carry their own NIP-01 prefix.
    d(
        "error: too many concurrent reqs",
        N,
        CAP,
        "hoytech/strfry src/apps/relay/RelayReqWorker.cpp, RelayReqMonitor.cpp: the \
         maxSubsPerConnection cap, NOTICE only",
    ),
    d(
        "error: auth-required: requested filter requires authentication",
        C,
        AUTH,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp (override: `error:` wraps the real \
         prefix)",
    ),
    d(
        "error: count-failed: can only count events you are involved in",
        C,
        RESTRICTED,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp, COUNT (override: a policy, not a \
         passing error)",
    ),
    d(
        "error: bad req: {*}",
        CN,
        INVALID,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp: `arr too big`, `filter validation \
         failed: ...`, `too many tags in filter`, `invalid subscription id length`, `COUNT \
         disabled` (override: the same REQ fails the same way)",
    ),
    d(
        "error: internal error",
        O,
        RETRY,
        "hoytech/strfry src/PluginEventSifter.h: the write-policy plugin failed",
    ),
    d(
        "write error: {*}",
        O,
        RETRY,
        "hoytech/strfry src/apps/relay/RelayWriter.cpp: the database write failed",
    ),
    d(
        "replaced: have newer event",
        O,
        BLOCKED,
        "hoytech/strfry src/apps/relay/RelayWriter.cpp; rnostr/rnostr relay/src/server.rs \
         (override: unknown prefix, but the relay keeps the newer version)",
    ),
    d(
        "deleted: user requested deletion",
        O,
        BLOCKED,
        "hoytech/strfry src/apps/relay/RelayWriter.cpp; rnostr/rnostr relay/src/server.rs \
         (override: unknown prefix, but a deleted event stays deleted)",
    ),
    d(
        "duplicate: have this event",
        O,
        DUPLICATE,
        "hoytech/strfry src/apps/relay/RelayWriter.cpp",
    ),
    d(
        "blocked: event marked as protected",
        O,
        BLOCKED,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp; rnostr/rnostr relay/src/message.rs",
    ),
    d(
        "auth-required: event marked as protected",
        O,
        AUTH,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp",
    ),
    d(
        "restricted: must be published by the author",
        O,
        RESTRICTED,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp",
    ),
    d(
        "blocked: reposts can't embed protected events",
        O,
        BLOCKED,
        "hoytech/strfry src/apps/relay/RelayIngester.cpp",
    ),
    d(
        "invalid: created_at too late",
        O,
        INVALID,
        "hoytech/strfry src/events.cpp (one of the `invalid: <reason>` texts)",
    ),
    d(
        "invalid: event too large: {n}",
        O,
        INVALID,
        "hoytech/strfry src/events.cpp",
    ),
    // ----- khatru (fiatjaf/khatru @ 9f99b9827a6e) -------------------------------------------
    // A policy's prose reason gets `blocked: ` put before it unless it has a prefix
    // (go-nostr `NormalizeOKMessage`), so khatru relays rarely send a bare text.
    d(
        "auth-required: all requests must be authenticated",
        C,
        AUTH,
        "fiatjaf/khatru policies/filters.go MustAuth",
    ),
    d(
        "blocked: too many things to filter for",
        C,
        BLOCKED,
        "fiatjaf/khatru policies/filters.go NoComplexFilters",
    ),
    d(
        "blocked: can't handle empty filters",
        C,
        BLOCKED,
        "fiatjaf/khatru policies/filters.go NoEmptyFilters",
    ),
    d(
        "blocked: search is not supported",
        C,
        BLOCKED,
        "fiatjaf/khatru policies/filters.go NoSearchQueries",
    ),
    d(
        "rate-limited: there is a bug in the client, no one should be making so many requests",
        C,
        RATE,
        "fiatjaf/khatru policies/ratelimits.go FilterIPRateLimiter",
    ),
    d(
        "rate-limited: slow down, please",
        O,
        RATE,
        "fiatjaf/khatru policies/ratelimits.go EventIPRateLimiter, EventPubKeyRateLimiter",
    ),
    d(
        "restricted: this relay does not serve kind-4 to unauthenticated users, does your \
         client implement nip-42?",
        C,
        AUTH,
        "fiatjaf/khatru policies/nip04.go (override: sent only before AUTH; authenticating \
         is the cure)",
    ),
    d(
        "restricted: authenticated user does not have authorization for requested filters.",
        C,
        RESTRICTED,
        "fiatjaf/khatru policies/nip04.go",
    ),
    d(
        "unsupported: this relay does not support nip-45",
        C,
        UNSUPPORTED,
        "fiatjaf/khatru handlers.go, COUNT",
    ),
    d(
        "blocked: too many indexable tags",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: event contains too large tags",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: received event kind {n} not allowed",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: event too old",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: event too much in the future",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: event with base64 media",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: we only accept events protected with the nip70 \"-\" tag",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/events.go",
    ),
    d(
        "blocked: missing json name in kind 0",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/kind_validation.go",
    ),
    d(
        "blocked: this kind has been deprecated",
        O,
        BLOCKED,
        "fiatjaf/khatru policies/kind_validation.go",
    ),
    d("blocked: no reason", O, BLOCKED, "fiatjaf/khatru adding.go"),
    d(
        "blocked: this event has been deleted",
        O,
        BLOCKED,
        "fiatjaf/khatru adding.go",
    ),
    d(
        "invalid: id is computed incorrectly",
        O,
        INVALID,
        "fiatjaf/khatru handlers.go",
    ),
    d(
        "error: failed to verify signature",
        O,
        INVALID,
        "fiatjaf/khatru handlers.go (override: the same event fails the same way)",
    ),
    d(
        "invalid: signature is invalid",
        O,
        INVALID,
        "fiatjaf/khatru handlers.go",
    ),
    d(
        "auth-required: must be published by authenticated event author",
        O,
        AUTH,
        "fiatjaf/khatru handlers.go, NIP-70",
    ),
    d(
        "blocked: must be published by event author",
        O,
        BLOCKED,
        "fiatjaf/khatru handlers.go, NIP-70",
    ),
    d(
        "blocked: can't repost nip70 protected",
        O,
        BLOCKED,
        "fiatjaf/khatru handlers.go",
    ),
    d(
        "mute: no one was listening for this",
        O,
        MUTE,
        "fiatjaf/khatru handlers.go, ephemeral events",
    ),
    d(
        "failed to parse envelope: {*}",
        N,
        INVALID,
        "fiatjaf/khatru handlers.go",
    ),
    // ----- relays built on khatru -------------------------------------------------------------
    d(
        "restricted: you must be whitelisted to query this relay",
        C,
        RESTRICTED,
        "bitvora/haven @ 45d835fbb98e policies.go",
    ),
    d(
        "restricted: you must be in the web of trust to query this relay",
        C,
        RESTRICTED,
        "bitvora/haven policies.go",
    ),
    d(
        "auth-required: you must be authenticated to post to this relay",
        O,
        AUTH,
        "bitvora/haven policies.go",
    ),
    d(
        "restricted: you must be whitelisted to post to this relay",
        O,
        RESTRICTED,
        "bitvora/haven policies.go",
    ),
    d(
        "blocked: you must be in the web of trust to post to this relay",
        O,
        BLOCKED,
        "bitvora/haven policies.go (prose, `blocked: ` added by khatru)",
    ),
    d(
        "blocked: you are blacklisted from this relay",
        O,
        BLOCKED,
        "bitvora/haven policies.go",
    ),
    d(
        "blocked: only chat related events are allowed",
        O,
        BLOCKED,
        "bitvora/haven policies.go",
    ),
    d(
        "blocked: only gift wrapped dms are supported",
        O,
        BLOCKED,
        "bitvora/haven policies.go",
    ),
    d(
        "blocked: you can only post notes if you've tagged a whitelisted pubkey in this relay",
        O,
        BLOCKED,
        "bitvora/haven policies.go",
    ),
    d(
        "blocked: not in web of trust",
        O,
        BLOCKED,
        "bitvora/wot-relay @ 24b51de9fdd8 main.go",
    ),
    d(
        "blocked: only gift wrapped dms are allowed",
        O,
        BLOCKED,
        "bitvora/wot-relay main.go",
    ),
    d(
        "blocked: it's not allowed to mix metadata kinds with others",
        C,
        BLOCKED,
        "fiatjaf/relay29 @ 3276594e9d85 filter_policy.go",
    ),
    d(
        "auth-required: trying to read from a private group",
        C,
        AUTH,
        "fiatjaf/relay29 filter_policy.go",
    ),
    d(
        "restricted: not a member",
        C,
        RESTRICTED,
        "fiatjaf/relay29 filter_policy.go",
    ),
    d(
        "blocked: invalid query, must have 'h', 'e' or 'a' tag",
        C,
        BLOCKED,
        "fiatjaf/relay29 filter_policy.go",
    ),
    d(
        "blocked: rate-limited",
        O,
        RATE,
        "fiatjaf/relay29 examples/opinionated/extra_policies.go (override: a bare \
         `rate-limited` that khatru wrapped in `blocked: `)",
    ),
    d(
        "blocked: missing group (`h`) tag",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: group '{*}' doesn't exist",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "duplicate: already a member",
        O,
        DUPLICATE,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "duplicate: group already exists",
        O,
        DUPLICATE,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: unknown member",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: this was deleted",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: moderation action is too old (older than 1 minute ago)",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: invalid moderation action: {*}",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: groups cannot be private",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    d(
        "blocked: insufficient permissions",
        O,
        BLOCKED,
        "fiatjaf/relay29 event_policy.go",
    ),
    // ----- nostream (Cameri/nostream @ b6133a18fde1) ----------------------------------------
    // REQ refusals arrive as a NOTICE only, without the subscription id.
    d(
        "subscription rejected: too many subscriptions: number of subscriptions must be less \
         than or equal to {n}",
        N,
        CAP,
        "Cameri/nostream src/handlers/subscribe-message-handler.ts",
    ),
    d(
        "subscription rejected: too many filters: number of filters per susbscription must be \
         less then or equal to {n}",
        N,
        INVALID,
        "Cameri/nostream src/handlers/subscribe-message-handler.ts (not a cap: the REQ has too \
         many filters)",
    ),
    d(
        "subscription rejected: subscription id too long: subscription id must be less or \
         equal to {n}",
        N,
        INVALID,
        "Cameri/nostream src/handlers/subscribe-message-handler.ts",
    ),
    d(
        "subscription rejected: duplicate subscription {*}: ignoring",
        N,
        RETRY,
        "Cameri/nostream src/handlers/subscribe-message-handler.ts: the same REQ is already \
         open",
    ),
    d(
        "rate limited",
        N,
        RATE,
        "Cameri/nostream src/adapters/web-socket-adapter.ts: any message over the rate",
    ),
    d(
        "rate-limited: slow down",
        O,
        RATE,
        "Cameri/nostream src/handlers/event-message-handler.ts; rust-nostr/nostr \
         crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "event is expired",
        O,
        INVALID,
        "Cameri/nostream src/handlers/event-message-handler.ts (override: no prefix, final)",
    ),
    d(
        "error: event not supported",
        O,
        UNSUPPORTED,
        "Cameri/nostream src/handlers/event-message-handler.ts (override: no strategy for the \
         kind)",
    ),
    d(
        "error: unable to process event",
        O,
        RETRY,
        "Cameri/nostream src/handlers/event-message-handler.ts",
    ),
    d(
        "rejected: content is longer than {n} bytes",
        O,
        INVALID,
        "Cameri/nostream src/handlers/event-message-handler.ts (override: unknown prefix, \
         final)",
    ),
    d(
        "rejected: created_at is more than {n} seconds in the future",
        O,
        INVALID,
        "Cameri/nostream src/handlers/event-message-handler.ts (override: unknown prefix, \
         final)",
    ),
    d(
        "rejected: created_at is more than {n} seconds in the past",
        O,
        INVALID,
        "Cameri/nostream src/handlers/event-message-handler.ts (override: unknown prefix, \
         final)",
    ),
    d(
        "rejected: event already exists",
        O,
        BLOCKED,
        "Cameri/nostream src/handlers/event-strategies/replaceable-event-strategy.ts \
         (override: a newer version is kept)",
    ),
    d(
        "pow: difficulty {n}<{n}",
        O,
        POW,
        "Cameri/nostream src/handlers/event-message-handler.ts",
    ),
    d(
        "pow: pubkey difficulty {n}<{n}",
        O,
        POW,
        "Cameri/nostream src/handlers/event-message-handler.ts",
    ),
    d(
        "blocked: pubkey not allowed",
        O,
        BLOCKED,
        "Cameri/nostream src/handlers/event-message-handler.ts",
    ),
    d(
        "blocked: event kind {n} not allowed",
        O,
        BLOCKED,
        "Cameri/nostream src/handlers/event-message-handler.ts",
    ),
    d(
        "invalid: event id does not match",
        O,
        INVALID,
        "Cameri/nostream src/handlers/event-message-handler.ts; bezysoftware/netstr \
         src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: event signature verification failed",
        O,
        INVALID,
        "Cameri/nostream src/handlers/event-message-handler.ts; bezysoftware/netstr \
         src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "blocked: pubkey not admitted",
        O,
        BLOCKED,
        "Cameri/nostream src/handlers/event-message-handler.ts",
    ),
    d(
        "blocked: insufficient balance",
        O,
        BLOCKED,
        "Cameri/nostream src/handlers/event-message-handler.ts; scsibug/nostr-rs-relay \
         src/db.rs",
    ),
    // ----- nostr-rs-relay (scsibug/nostr-rs-relay @ 64cfcaf44af4) ---------------------------
    // Never sends CLOSED: REQ refusals are a NOTICE `Subscription error: <error>`.
    d(
        "subscription error: maximum concurrent subscription count reached",
        N,
        CAP,
        "scsibug/nostr-rs-relay src/server.rs, src/error.rs SubMaxExceededError",
    ),
    d(
        "subscription error: subscription identifier max length exceeded",
        N,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs, src/error.rs SubIdMaxLengthError (not a cap: \
         the id is too long)",
    ),
    d(
        "message too large ({n} > {n})",
        N,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs",
    ),
    d(
        "event exceeded max size",
        N,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs",
    ),
    d(
        "could not parse command",
        N,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs",
    ),
    d(
        "binary messages are not accepted",
        N,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs",
    ),
    d(
        "blocked: event kind is blocked by relay",
        O,
        BLOCKED,
        "scsibug/nostr-rs-relay src/db.rs",
    ),
    d(
        "blocked: pubkey is not allowed to publish to this relay",
        O,
        BLOCKED,
        "scsibug/nostr-rs-relay src/db.rs",
    ),
    d(
        "blocked: user is not admitted",
        O,
        BLOCKED,
        "scsibug/nostr-rs-relay src/db.rs, pay-to-relay",
    ),
    d(
        "error: pubkey not registered",
        O,
        RESTRICTED,
        "scsibug/nostr-rs-relay src/db.rs, pay-to-relay (override: retrying cannot register \
         the key)",
    ),
    d(
        "error: relay experienced an error checking your admission status",
        O,
        RETRY,
        "scsibug/nostr-rs-relay src/db.rs",
    ),
    d(
        "error: relay experienced an error trying to publish the latest event",
        O,
        RETRY,
        "scsibug/nostr-rs-relay src/db.rs",
    ),
    d(
        "blocked: nip-05 verification is no longer valid (expired/wrong domain)",
        O,
        BLOCKED,
        "scsibug/nostr-rs-relay src/db.rs",
    ),
    d(
        "blocked: nip-05 verification needed to publish events",
        O,
        BLOCKED,
        "scsibug/nostr-rs-relay src/db.rs",
    ),
    d(
        "invalid: the event has already expired",
        O,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs",
    ),
    d(
        "invalid: the event created_at field is out of the acceptable range (+{n}sec) for \
         this relay.",
        O,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs",
    ),
    d(
        "invalid: event invalid signature",
        O,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs, src/error.rs",
    ),
    d(
        "invalid: event invalid id",
        O,
        INVALID,
        "scsibug/nostr-rs-relay src/server.rs, src/error.rs",
    ),
    // ----- chorus (mikedilger/chorus @ 411f16ad1839) ----------------------------------------
    d(
        "blocked: no more than {n} subscriptions are allowed at any one time",
        C,
        CAP,
        "mikedilger/chorus src/nostr.rs TooManySubscriptions (override: the max_subscriptions \
         cap under `blocked:`)",
    ),
    d(
        "invalid: filter is underspecified. scrapers are not allowed",
        C,
        INVALID,
        "mikedilger/chorus src/nostr.rs, src/error.rs Scraper",
    ),
    d(
        "auth-required: dm kinds were included in the filters",
        C,
        AUTH,
        "mikedilger/chorus src/nostr.rs",
    ),
    d(
        "auth-required: at least one matching event requires auth",
        C,
        AUTH,
        "mikedilger/chorus src/nostr.rs, after the events it may send",
    ),
    d(
        "auth-required: this personal relay only accepts events related to its users",
        O,
        AUTH,
        "mikedilger/chorus src/nostr.rs",
    ),
    d(
        "restricted: this personal relay only accepts events related to its users",
        O,
        RESTRICTED,
        "mikedilger/chorus src/nostr.rs",
    ),
    d(
        "blocked: event has been banned",
        O,
        BLOCKED,
        "mikedilger/chorus src/nostr.rs",
    ),
    d(
        "blocked: author has been banned",
        O,
        BLOCKED,
        "mikedilger/chorus src/nostr.rs",
    ),
    d(
        "blocked: that event is deleted",
        O,
        BLOCKED,
        "mikedilger/chorus src/nostr.rs",
    ),
    d(
        "rate limit exceeded.",
        N,
        RATE,
        "mikedilger/chorus src/lib.rs: the byte-rate throttle",
    ),
    d(
        "closing due to error(s)",
        N,
        RETRY,
        "mikedilger/chorus src/lib.rs: the connection is about to close",
    ),
    d(
        "binary messages are not processed by this relay",
        N,
        INVALID,
        "mikedilger/chorus src/lib.rs; rust-nostr/nostr \
         crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "command unrecognized",
        N,
        INVALID,
        "mikedilger/chorus src/nostr.rs",
    ),
    // ----- nostr-relay-builder (rust-nostr/nostr @ 9df86d400ff1) ----------------------------
    // All in crates/nostr-relay-builder/src/local/inner.rs.
    d(
        "blocked: subscription id exceeds max length {n}",
        C,
        BLOCKED,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs (not a cap: the id is \
         too long)",
    ),
    d(
        "rate-limited: too many reqs",
        C,
        CAP,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs: a cap in a rate \
         limit's words (refused while the connection's open subscriptions >= max_reqs), so a \
         cap: queued for a slot (see the module docs)",
    ),
    d(
        "auth-required: you must auth",
        CO,
        AUTH,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs, with a fresh AUTH",
    ),
    d(
        "error: you cannot request another user's gift wrap",
        C,
        RESTRICTED,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs (override: a policy)",
    ),
    d(
        "invalid: invalid event id",
        O,
        INVALID,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "blocked: event is expired",
        O,
        BLOCKED,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "pow: required a difficulty >= {n}",
        O,
        POW,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "invalid: invalid event signature",
        O,
        INVALID,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "blocked: this event may only be published by its author",
        O,
        BLOCKED,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs, NIP-70",
    ),
    d(
        "duplicate: already have this event",
        O,
        DUPLICATE,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs; 0ceanSlim/grain \
         server/handlers/event.go; bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "blocked: this event is deleted",
        O,
        BLOCKED,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "blocked: event not related to owner of this relay",
        O,
        BLOCKED,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    d(
        "error: unknown",
        O,
        RETRY,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs; CodyTseng/nostr-relay \
         packages/core/src/services/event.service.ts",
    ),
    d(
        "error: database error",
        O,
        RETRY,
        "rust-nostr/nostr crates/nostr-relay-builder/src/local/inner.rs",
    ),
    // ----- rnostr (rnostr/rnostr @ 0983e527b23d) --------------------------------------------
    d(
        "number of subscriptions exceeds limit",
        C,
        CAP,
        "rnostr/rnostr relay/src/server.rs Subscribed::Overlimit",
    ),
    d(
        "subscription id should be non-empty string of max length {n} chars",
        C,
        INVALID,
        "rnostr/rnostr relay/src/server.rs (not a cap: the id is too long)",
    ),
    d(
        "something is wrong",
        C,
        RETRY,
        "rnostr/rnostr relay/src/server.rs",
    ),
    d(
        "get event error: scan timeout",
        C,
        TIMED_OUT,
        "rnostr/rnostr relay/src/reader.rs, db/src/error.rs (the same query times out again)",
    ),
    d(
        "get event error: {*}",
        C,
        RETRY,
        "rnostr/rnostr relay/src/reader.rs",
    ),
    d(
        "auth-required: need reconnect",
        O,
        AUTH,
        "rnostr/rnostr extensions/src/auth.rs",
    ),
    d(
        "auth-required: this event may only be published by its author",
        O,
        AUTH,
        "rnostr/rnostr extensions/src/auth.rs; bezysoftware/netstr \
         src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "auth-required: this event require authorization",
        O,
        AUTH,
        "rnostr/rnostr extensions/src/auth.rs",
    ),
    d(
        "duplicate: event exists",
        O,
        DUPLICATE,
        "rnostr/rnostr relay/src/server.rs",
    ),
    d(
        "write event error",
        O,
        RETRY,
        "rnostr/rnostr relay/src/writer.rs",
    ),
    d(
        "payload reached size limit.",
        N,
        INVALID,
        "rnostr/rnostr relay/src/session.rs",
    ),
    d(
        "not support binary message",
        N,
        INVALID,
        "rnostr/rnostr relay/src/session.rs",
    ),
    d(
        "json error: {*}",
        N,
        INVALID,
        "rnostr/rnostr relay/src/session.rs",
    ),
    d(
        "unsupported message",
        N,
        UNSUPPORTED,
        "rnostr/rnostr relay/src/server.rs",
    ),
    // ----- nostr-relay (CodyTseng/nostr-relay @ 901454293320, nostr-relay-nestjs @ 47ee02fe09fb)
    d(
        "restricted: we can't serve dms to unauthenticated users, does your client implement \
         nip-42?",
        C,
        AUTH,
        "CodyTseng/nostr-relay packages/core/src/nostr-relay.ts, with an AUTH challenge \
         (override: authenticating is the cure)",
    ),
    d(
        "invalid: unknown message type",
        N,
        INVALID,
        "CodyTseng/nostr-relay packages/core/src/nostr-relay.ts",
    ),
    d(
        "duplicate: the event already exists",
        O,
        DUPLICATE,
        "CodyTseng/nostr-relay packages/core/src/services/event.service.ts",
    ),
    d(
        "invalid: id is wrong",
        O,
        INVALID,
        "CodyTseng/nostr-relay packages/common/src/utils/event.util.ts",
    ),
    d(
        "invalid: signature is wrong",
        O,
        INVALID,
        "CodyTseng/nostr-relay packages/common/src/utils/event.util.ts",
    ),
    d(
        "reject: event is expired",
        O,
        INVALID,
        "CodyTseng/nostr-relay packages/common/src/utils/event.util.ts (override: unknown \
         prefix, final)",
    ),
    d(
        "invalid: delegation tag verification failed",
        O,
        INVALID,
        "CodyTseng/nostr-relay packages/common/src/utils/event.util.ts",
    ),
    d(
        "rate-limited: slow down there chief",
        CON,
        RATE,
        "CodyTseng/nostr-relay-nestjs src/common/exceptions/throttler.exception.ts (NOTICE); \
         bezysoftware/netstr src/Netstr/Messaging/Messages.cs (OK, CLOSED)",
    ),
    d(
        "blocked: you are banned from posting here",
        O,
        BLOCKED,
        "CodyTseng/nostr-relay-nestjs src/modules/nostr/plugins/blacklist-guard.plugin.ts",
    ),
    // ----- grain (0ceanSlim/grain @ 07ad0ae39a77) -------------------------------------------
    d(
        "rate-limited: req rate limit exceeded",
        C,
        RATE,
        "0ceanSlim/grain server/handlers/req.go, config/setRateLimit.go",
    ),
    d(
        "rate-limited: websocket message rate limit exceeded",
        N,
        RATE,
        "0ceanSlim/grain server/client.go, then the connection closes",
    ),
    d(
        "error: server at max capacity, try again later",
        N,
        RETRY,
        "0ceanSlim/grain server/client.go: connection refused, not a subscription cap",
    ),
    d(
        "auth-required: authentication is required to use this relay",
        CO,
        AUTH,
        "0ceanSlim/grain server/handlers/req.go, event.go",
    ),
    d(
        "invalid: subscription id must be between 1 and {n} characters long",
        C,
        INVALID,
        "0ceanSlim/grain server/handlers/req.go",
    ),
    d(
        "invalid: invalid filter format",
        C,
        INVALID,
        "0ceanSlim/grain server/handlers/req.go",
    ),
    d(
        "invalid: invalid req message format",
        C,
        INVALID,
        "0ceanSlim/grain server/handlers/req.go",
    ),
    d(
        "global event rate limit exceeded",
        O,
        RATE,
        "0ceanSlim/grain config/setRateLimit.go, no prefix",
    ),
    d(
        "rate limit exceeded for kind: {n}",
        O,
        RATE,
        "0ceanSlim/grain config/setRateLimit.go, no prefix",
    ),
    d(
        "rate limit exceeded for category: {*}",
        O,
        RATE,
        "0ceanSlim/grain config/setRateLimit.go, no prefix",
    ),
    d(
        "global event size limit exceeded",
        O,
        INVALID,
        "0ceanSlim/grain config/setSizeLimit.go (override: no prefix, final)",
    ),
    d(
        "event size limit exceeded for kind",
        O,
        INVALID,
        "0ceanSlim/grain config/setSizeLimit.go (override: no prefix, final)",
    ),
    d(
        "blocked: pubkey is blacklisted",
        O,
        BLOCKED,
        "0ceanSlim/grain config/Blacklist.go",
    ),
    d(
        "blocked: pubkey is temporarily blacklisted",
        O,
        BLOCKED,
        "0ceanSlim/grain config/Blacklist.go",
    ),
    d(
        "blocked: pubkey is permanently banned",
        O,
        BLOCKED,
        "0ceanSlim/grain config/Blacklist.go",
    ),
    d(
        "blocked: pubkey is temporarily banned",
        O,
        BLOCKED,
        "0ceanSlim/grain config/Blacklist.go",
    ),
    d(
        "blocked: a newer replaceable event of kind {n} already exists for this pubkey",
        O,
        BLOCKED,
        "0ceanSlim/grain server/db/nostrdb/store.go",
    ),
    d(
        "blocked: a newer addressable event of kind {n} with d-tag {*} already exists for this \
         pubkey",
        O,
        BLOCKED,
        "0ceanSlim/grain server/db/nostrdb/store.go",
    ),
    d(
        "auth-required: this event is protected and requires authentication",
        O,
        AUTH,
        "0ceanSlim/grain server/handlers/event.go",
    ),
    d(
        "restricted: protected events may only be published by their author",
        O,
        RESTRICTED,
        "0ceanSlim/grain server/handlers/event.go",
    ),
    d(
        "invalid: event created_at timestamp is out of allowed range",
        O,
        INVALID,
        "0ceanSlim/grain server/handlers/event.go",
    ),
    d(
        "invalid: event is expired",
        O,
        INVALID,
        "0ceanSlim/grain server/handlers/event.go; bezysoftware/netstr \
         src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: signature verification failed",
        O,
        INVALID,
        "0ceanSlim/grain server/handlers/event.go",
    ),
    d(
        "error: internal server error",
        O,
        RETRY,
        "0ceanSlim/grain server/handlers/event.go",
    ),
    d(
        "error: internal server error during duplicate check",
        O,
        RETRY,
        "0ceanSlim/grain server/handlers/event.go",
    ),
    d(
        "error: database not available",
        CO,
        RETRY,
        "0ceanSlim/grain server/handlers/event.go, count.go",
    ),
    // ----- rely (pippellia-btc/rely @ a19cc98c24da) -----------------------------------------
    d(
        "invalid subscription id{*}",
        C,
        INVALID,
        "pippellia-btc/rely requests.go ErrInvalidSubscriptionID (override: no prefix, final)",
    ),
    d(
        "invalid event id",
        O,
        INVALID,
        "pippellia-btc/rely requests.go ErrInvalidEventID (override: no prefix, final)",
    ),
    d(
        "invalid event signature{*}",
        O,
        INVALID,
        "pippellia-btc/rely requests.go, hooks.go (override: no prefix, final)",
    ),
    d(
        "nip-45 count is not supported",
        C,
        UNSUPPORTED,
        "pippellia-btc/rely relay.go, COUNT (override: no prefix, final)",
    ),
    // ----- netstr (bezysoftware/netstr @ 37559628a611) --------------------------------------
    // All in src/Netstr/Messaging/Messages.cs.
    d(
        "invalid: too many subscriptions",
        C,
        CAP,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs, SubscribeMessageHandler.cs \
         (override: the cap under `invalid:`)",
    ),
    d(
        "invalid: too many filters",
        C,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: subscription id is too long",
        C,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: filter limit is too high",
        C,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: cannot process filters",
        C,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "unsupported: filter contains unknown elements",
        C,
        UNSUPPORTED,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "auth-required: we only allow publishing and subscribing to authenticated clients",
        CO,
        AUTH,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "auth-required: subscribing to specified kind(s) requires authentication",
        C,
        AUTH,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "auth-required: we only allow publishing to authenticated clients",
        O,
        AUTH,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: event creation date is too far off from the current time",
        O,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: too few fields in tag",
        O,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: too many tags",
        O,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: cannot delete deletions and someone else's events",
        O,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: this event was already deleted",
        O,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "invalid: this event has an unexpected value of tag {*}",
        O,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "duplicate: already have a newer version of this event",
        O,
        DUPLICATE,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "pow: difficulty {n} is less than {n}",
        O,
        POW,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "pow: difficulty {n} doesn't match target of {n}",
        O,
        POW,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "error: unable to process the event",
        O,
        RETRY,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "error: internal error while processing your message",
        ON,
        RETRY,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs, MessageDispatcher.cs",
    ),
    d(
        "invalid: message is too large",
        N,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs, WebSocketAdapter.cs",
    ),
    d(
        "unable to parse the message",
        N,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
    d(
        "unknown message type",
        N,
        INVALID,
        "bezysoftware/netstr src/Netstr/Messaging/Messages.cs",
    ),
];
