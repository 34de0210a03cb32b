//! The bodies of the cargo-fuzz targets in `fuzz/`, as ordinary functions over `&[u8]` so the
//! committed corpora are replayed on stable Rust by `tests/fuzz_corpus.rs` through exactly the
//! code the fuzzer runs. Every check panics on failure: a panic is the fuzzer's crash signal.
//!
//! One file per target (`fuzz/<target>.rs`), each re-exported here:
//!
//! - [`relay_frame()`]: arbitrary bytes into the NIP-01 decoders (both directions).
//! - [`sse_parser()`]: arbitrary bytes in arbitrary chunkings into the SSE parser.
//! - [`relay_session()`]: a [`Sim`](crate::sim::Sim) script decoded from the bytes, with the
//!   property tests' invariants checked after every step.
//! - [`pool()`]: a [`PoolSim`](crate::pool_sim::PoolSim) world and script decoded from the
//!   bytes, the pool's promises checked after every step and its outcomes at the end.
//! - [`negentropy()`]: a session catching up by NIP-77 against a relay that speaks it, with
//!   arbitrary `NEG-MSG` (any bytes), `NEG-ERR` and NOTICE frames injected: the invariants
//!   hold after every step, and the catch-up always ends (exact or by the fallback).
//! - [`sse_session()`]: an [`SseSim`](crate::sse_sim::SseSim) (the SSE simulator the
//!   transcripts use) driven input by input, with its
//!   [`SseInvariants`](crate::sse_invariants::SseInvariants) checked after every input.
//! - [`pool_outbox()`]: routing by people in a [`PoolSim`](crate::pool_sim::PoolSim) world of
//!   relays by URL (lists, list moves, deaths, publishes by outbox, NIP-11 documents,
//!   lifecycle): the pool's and routing's promises after every step, outcomes at the end.
//! - [`router()`]: relay lists (hostile and junk included), deliveries, silences, failures
//!   and hints into the outbox router: routes within the budget, each relay once, only
//!   followed authors, coverage naming every follow once; the checkpoint restores.
//! - [`checkpoint()`]: arbitrary bytes restored as a relay, pool and SSE checkpoint (small
//!   bounds, so trimming is reached): never a panic, and whatever restores passes the
//!   consistency checks, before and after it connects and runs.
//!
//! This file holds what several targets share: the operation bound and the grammar of relay
//! frames, filters, publishes and refusal texts that `relay_session` and `pool` both draw from.
//! A grammar change changes what every committed corpus input of those targets decodes to, so
//! new choices go last in their lists (see the comments there).

use arbitrary::{Result, Unstructured};

use crate::relay_model::{LimitStyle, RelayModel, StoredEvent};

mod checkpoint;
mod negentropy;
mod pool;
mod pool_outbox;
mod relay_frame;
mod relay_session;
mod router;
mod sse_parser;
mod sse_session;

pub use checkpoint::checkpoint;
pub use negentropy::negentropy;
pub use pool::{pool, pool_transcript, POOL_MAX_OPS, POOL_MAX_SCRIPT};
pub use pool_outbox::{pool_outbox, OUTBOX_MAX_OPS};
pub use relay_frame::relay_frame;
pub use relay_session::{relay_session, relay_session_transcript, RelayScript, MAX_SCRIPT};
pub use router::router;
pub use sse_parser::sse_parser;
pub use sse_session::sse_session;

/// Most operations decoded from one input: enough for interesting interleavings, few enough
/// that one input runs in milliseconds.
pub const MAX_OPS: usize = 64;

/// Relay behaviour switched mid-run (the Sim takes plain functions, so each is a fixed change);
/// `relay_session` and `pool` both choose from it.
const RELAY_CHANGES: &[fn(&mut RelayModel)] = &[
    |r| r.silent_reqs = !r.silent_reqs,
    |r| r.ignore_pings = !r.ignore_pings,
    |r| r.auth_required = !r.auth_required,
    |r| r.refuse_all = None,
    |r| r.refuse_all = Some("error: internal".into()),
    |r| {
        r.scripted_closed
            .push_back("rate-limited: retry in 7s".into())
    },
    |r| r.scripted_closed.push_back("auth-required: sign in".into()),
    |r| {
        r.scripted_ok
            .push_back((false, "rate-limited: slow down".into()))
    },
    |r| {
        r.scripted_ok
            .push_back((false, "auth-required: who?".into()))
    },
    |r| {
        r.scripted_ok
            .push_back((false, "duplicate: have it".into()))
    },
    |r| r.max_subs = Some((1, LimitStyle::Notice)),
    |r| r.max_subs = None,
    // A stored event from the far future (`created_at` u64::MAX, issue 20), replayed to every
    // matching REQ from now on. Appended last: a choice takes one byte whatever the list's
    // length, so older corpus files still decode to the same operations.
    |r| r.events.push(StoredEvent::new(13, u64::MAX, 1)),
];

/// One to three REQ filters: notes (some with a `since`), everything, or kind 2 with a
/// `limit`.
fn filters(u: &mut Unstructured<'_>) -> Result<Vec<String>> {
    let n = u.int_in_range(1..=3)?;
    (0..n)
        .map(|_| {
            Ok(match u.int_in_range(0..=3)? {
                0 => r#"{"kinds":[1]}"#.to_owned(),
                1 => format!(
                    r#"{{"kinds":[1],"since":{}}}"#,
                    u.int_in_range(0..=1_000_010)?
                ),
                2 => "{}".to_owned(),
                _ => r#"{"kinds":[2],"limit":5}"#.to_owned(),
            })
        })
        .collect()
}

/// What the application publishes: mostly a well-formed event (ids 0-6), sometimes one with
/// a bad id, or junk.
fn publish_json(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=5)? {
        0..=3 => StoredEvent::new(u.int_in_range(0..=6)?, 1_700_000_000, 1).json,
        4 => r#"{"id":"nothex","created_at":1}"#.to_owned(),
        _ => short_string(u)?,
    })
}

/// A refusal text: every kind the fuzz target and the property tests ever generated (the
/// NIP-01 prefixes, a rate limit with and without a hint in s and ms, both cap dialects, the
/// empty text) and junk.
fn refusal(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=13)? {
        0 => "rate-limited: slow down".to_owned(),
        1 => format!("rate-limited: retry in {}s", u.arbitrary::<u32>()?),
        2 => format!("rate-limited: retry in {}ms", u.int_in_range(0..=5_000)?),
        3 => "error: too many subscriptions".to_owned(),
        4 => "Subscription error: Maximum concurrent subscription count reached".to_owned(),
        5 => "auth-required: sign in".to_owned(),
        6 => "error: internal".to_owned(),
        7 => "blocked: no".to_owned(),
        8 => "duplicate: already have it".to_owned(),
        9 => "restricted: members only".to_owned(),
        10 => "invalid: bad filter".to_owned(),
        11 => String::new(),
        _ => short_string(u)?,
    })
}

/// A relay frame from a grammar of realistic frames, near misses and plain junk.
fn frame(u: &mut Unstructured<'_>) -> Result<String> {
    let wire = wire_id(u)?;
    let frame = match u.int_in_range(0..=15)? {
        0 | 1 => format!(r#"["EOSE",{}]"#, json_str(&wire)),
        2 | 3 => format!(
            r#"["CLOSED",{},{}]"#,
            json_str(&wire),
            json_str(&refusal(u)?)
        ),
        4 | 5 => {
            let n = u.int_in_range(0..=12)?;
            let created_at = 1_000_000 + u.int_in_range(0..=20)?;
            let event = StoredEvent::new(n, created_at, 1).json;
            format!(r#"["EVENT",{},{event}]"#, json_str(&wire))
        }
        6 => format!(r#"["NOTICE",{}]"#, json_str(&refusal(u)?)),
        7 => format!(r#"["AUTH",{}]"#, json_str(&short_string(u)?)),
        8 => format!(
            r#"["OK","{:064x}",{},{}]"#,
            u.int_in_range(0..=6)?,
            u.arbitrary::<bool>()?,
            json_str(&refusal(u)?)
        ),
        9 => format!(
            r#"["COUNT",{},{{"count":{}}}]"#,
            json_str(&wire),
            u.arbitrary::<u64>()?
        ),
        10 => {
            // Events the decoder must refuse (bad ids, bad times, wrong shapes), and one at
            // the edge of time.
            let event = u.choose(&[
                r#"{"id":"00","created_at":1}"#,
                r#"{"created_at":1}"#,
                r#"{"id":"0000000000000000000000000000000000000000000000000000000000000001","created_at":-1}"#,
                r#"{"id":"0000000000000000000000000000000000000000000000000000000000000001","created_at":1.5}"#,
                r#"{"id":"0000000000000000000000000000000000000000000000000000000000000001","created_at":99999999999999999999}"#,
                r#"["not","an","object"]"#,
                r#""string""#,
                // Not refused: a well-formed event from the far future (issue 20), last in the
                // list so the others keep their bytes.
                r#"{"id":"000000000000000000000000000000000000000000000000000000000000000e","pubkey":"0000000000000000000000000000000000000000000000000000000000000000","created_at":18446744073709551615,"kind":1,"tags":[],"content":"far future","sig":"0"}"#,
            ])?;
            format!(r#"["EVENT",{},{event}]"#, json_str(&wire))
        }
        11 => {
            // Wrong arity and types.
            (*u.choose(&[
                r#"["EOSE"]"#,
                r#"["EOSE","0:1","extra"]"#,
                r#"["CLOSED","0:1"]"#,
                r#"["OK","00",true,""]"#,
                r#"["OK"]"#,
                r#"[1,2,3]"#,
                r#"[]"#,
                r#"{"EOSE":"0:1"}"#,
                r#"["EVENT","0:1"]"#,
                r#"["NOTICE",{"a":1}]"#,
            ])?)
            .to_owned()
        }
        12 | 13 => {
            // A realistic frame cut short or with a byte flipped.
            let full = format!(r#"["EOSE",{}]"#, json_str(&wire));
            let cut = u.int_in_range(0..=full.len())?;
            let cut = (0..=cut)
                .rev()
                .find(|&i| full.is_char_boundary(i))
                .unwrap_or(0);
            let mut s = full[..cut].to_owned();
            if u.arbitrary()? {
                s.push(u.arbitrary::<char>()?);
            }
            s
        }
        _ => short_string(u)?,
    };
    Ok(frame)
}

/// A wire subscription id: mostly ids this session could have sent (a few slots, generations
/// and attempts), some that it could not.
fn wire_id(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=9)? {
        0..=6 => {
            let slot: u64 = u.int_in_range(0..=7)?;
            let generation: u64 = u.int_in_range(0..=1)?;
            let attempt: u32 = u.int_in_range(0..=6)?;
            format!("{:x}:{attempt:x}", (generation << 32) | slot)
        }
        7 => "x".repeat(u.int_in_range(0..=70)?),
        8 => (*u.choose(&[
            "",
            ":",
            "0:",
            "0:0:0",
            "ffffffffffffffffff:1",
            "0:ffffffffff",
        ])?)
        .to_owned(),
        _ => short_string(u)?,
    })
}

/// Up to 48 arbitrary `char`s.
fn short_string(u: &mut Unstructured<'_>) -> Result<String> {
    let n = u.int_in_range(0..=48)?;
    (0..n).map(|_| u.arbitrary::<char>()).collect()
}

/// `s` as a JSON string literal (quoted and escaped).
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
