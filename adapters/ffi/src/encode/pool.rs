//! The JSON objects a pool's transmits, events, verifications and counters are polled as.
//! They follow the relay session's (see the parent module): a pool transmit is a relay
//! transmit with the `"relay"` it is for, and what one relay's session reports that the pool
//! does not interpret is passed on whole, as a relay event inside a `relay` event.

use tether_core::nostr::{Applied, Transmit};
use tether_core::pool::{Missing, Outcome, PoolEvent, PoolStats, RelayId, VerifyRequest};

use super::{encode_relay_event, encode_relay_transmit, Obj};

/// Append the JSON object for a pool transmit: a relay transmit (see
/// [`encode_relay_transmit`]) with `"relay":R` first, the relay whose socket it is for.
pub fn encode_pool_transmit(relay: RelayId, transmit: &Transmit, out: &mut Vec<u8>) {
    let start = out.len();
    encode_relay_transmit(transmit, out);
    // `{"type":...}` becomes `{"relay":R,"type":...}`.
    let relay = format!("\"relay\":{},", relay.0);
    out.splice(start + 1..start + 1, relay.into_bytes());
}

/// Append the JSON object for a pool event:
///
/// - `{"type":"received","sub":N,"relay":R,"id":"hex","event":{...}}`: the first copy of
///   an id in the subscription, with the relay that delivered it
/// - `{"type":"eose","sub":N,"relay":R}`
/// - `{"type":"caught_up","sub":N,"relay":R,"method":"negentropy"|"since","exact_since":N,"recovered":N}`
/// - `{"type":"relay_closed","sub":N,"relay":R,"reason":"...","attempts":N}`: that relay gave
///   up on the subscription; others may still serve it
/// - `{"type":"complete","sub":N,"outcome":"complete"|"partial","missing":[M...]}`, once per
///   subscription; `M` is `{"relay":R,"why":W,"reason":"..."|null}`, `W` one of `no_eose`,
///   `closed`, `refused`, `removed` (`reason` for `closed` and `refused`)
/// - `{"type":"ended","sub":N,"reasons":[{"relay":R,"reason":"..."}...]}`: no relay serves it
///   any more; it is gone
/// - `{"type":"invalid","sub":N,"relay":R,"id":"hex","reason":"..."}`: a copy failed
///   verification and was dropped
/// - `{"type":"published","id":"hex","relay":R}`, `{"type":"rejected","id":"hex","relay":R,"reason":"..."}`
/// - `{"type":"publish_done","id":"hex","accepted":[R...],"rejected":[{"relay":R,"reason":"..."}...],"pending":[R...]}`
/// - `{"type":"relay","relay":R,"sub":N|null,"event":{...}}`: anything else one relay's
///   session reported (connected, disconnected, retrying, notice, auth challenge,
///   peer error, ...), as a relay event (see [`encode_relay_event`]) whose `sub` is that
///   session's own; the outer `sub` is the pool's subscription it concerns
pub fn encode_pool_event(event: &PoolEvent, out: &mut Vec<u8>) {
    let mut o = Obj::new(out);
    match event {
        PoolEvent::Received {
            sub,
            relay,
            id,
            raw,
        } => o
            .kind("received")
            .num("sub", sub.0)
            .num("relay", u64::from(relay.0))
            .hex("id", &id.0)
            .raw("event", raw),
        PoolEvent::Eose { sub, relay } => o
            .kind("eose")
            .num("sub", sub.0)
            .num("relay", u64::from(relay.0)),
        PoolEvent::CaughtUp {
            sub,
            relay,
            method,
            exact_since,
            recovered,
        } => o
            .kind("caught_up")
            .num("sub", sub.0)
            .num("relay", u64::from(relay.0))
            .str("method", method.as_str())
            .num("exact_since", *exact_since)
            .num("recovered", *recovered),
        PoolEvent::RelayClosed {
            sub,
            relay,
            reason,
            attempts,
        } => o
            .kind("relay_closed")
            .num("sub", sub.0)
            .num("relay", u64::from(relay.0))
            .str("reason", reason)
            .num("attempts", u64::from(*attempts)),
        PoolEvent::Complete { sub, outcome } => {
            o.kind("complete").num("sub", sub.0);
            outcome_fields(&mut o, outcome)
        }
        PoolEvent::Ended { sub, reasons } => {
            let list = array(reasons, |(relay, reason), out| {
                Obj::new(out)
                    .num("relay", u64::from(relay.0))
                    .str("reason", reason)
                    .end();
            });
            o.kind("ended").num("sub", sub.0).raw("reasons", &list)
        }
        PoolEvent::Invalid {
            sub,
            relay,
            id,
            reason,
        } => o
            .kind("invalid")
            .num("sub", sub.0)
            .num("relay", u64::from(relay.0))
            .hex("id", &id.0)
            .str("reason", reason),
        PoolEvent::Published { id, relay } => o
            .kind("published")
            .hex("id", &id.0)
            .num("relay", u64::from(relay.0)),
        PoolEvent::Rejected { id, relay, reason } => o
            .kind("rejected")
            .hex("id", &id.0)
            .num("relay", u64::from(relay.0))
            .str("reason", reason),
        PoolEvent::PublishDone { id, outcome } => {
            let rejected = array(&outcome.rejected, |(relay, reason), out| {
                Obj::new(out)
                    .num("relay", u64::from(relay.0))
                    .str("reason", reason)
                    .end();
            });
            o.kind("publish_done")
                .hex("id", &id.0)
                .raw("accepted", &relay_list(&outcome.accepted))
                .raw("rejected", &rejected)
                .raw("pending", &relay_list(&outcome.pending))
        }
        PoolEvent::Relay { relay, sub, event } => {
            let mut inner = Vec::new();
            encode_relay_event(event, &mut inner);
            o.kind("relay")
                .num("relay", u64::from(relay.0))
                .opt_num("sub", sub.map(|s| s.0))
                .raw("event", std::str::from_utf8(&inner).unwrap_or("{}"))
        }
        _ => o.kind("unknown"),
    };
    o.end();
}

/// Append the JSON object for a verification the host must run:
/// `{"ticket":N,"relay":R,"id":"hex","event":{...the relay's bytes...}}`.
pub fn encode_verify_request(request: &VerifyRequest, out: &mut Vec<u8>) {
    let mut o = Obj::new(out);
    o.num("ticket", request.ticket.0)
        .num("relay", u64::from(request.relay.0))
        .hex("id", &request.id.0)
        .raw("event", &request.raw);
    o.end();
}

/// Append what a relay's counters say: `{"duplicates":N,"conflicts":N,"invalid":N,
/// "unverified_dropped":N}`.
pub fn encode_pool_stats(stats: &PoolStats, out: &mut Vec<u8>) {
    let mut o = Obj::new(out);
    o.num("duplicates", stats.duplicates)
        .num("conflicts", stats.conflicts)
        .num("invalid", stats.invalid)
        .num("unverified_dropped", stats.unverified_dropped);
    o.end();
}

/// Append what a session does with a relay's NIP-11 document once applied:
/// `{"subscription_limit":N|null,"limit_is_declared":B,"max_message_length":N|null,
/// "max_subid_length":N|null,"auth_first":B,"max_limit":N|null}`.
pub fn encode_applied(applied: &Applied, out: &mut Vec<u8>) {
    let count = |n: Option<usize>| n.map(|n| n as u64);
    let mut o = Obj::new(out);
    o.opt_num("subscription_limit", count(applied.subscription_limit))
        .bool("limit_is_declared", applied.limit_is_declared)
        .opt_num("max_message_length", count(applied.max_message_length))
        .opt_num("max_subid_length", count(applied.max_subid_length))
        .bool("auth_first", applied.auth_first)
        .opt_num("max_limit", count(applied.max_limit));
    o.end();
}

fn outcome_fields<'o, 'a>(o: &'o mut Obj<'a>, outcome: &Outcome) -> &'o mut Obj<'a> {
    let missing: &[(RelayId, Missing)] = match outcome {
        Outcome::Partial { missing } => missing,
        _ => &[],
    };
    let list = array(missing, |(relay, why), out| {
        let mut m = Obj::new(out);
        m.num("relay", u64::from(relay.0));
        match why {
            Missing::NoEose => m.str("why", "no_eose").null("reason"),
            Missing::Closed(reason) => m.str("why", "closed").str("reason", reason),
            Missing::Refused(reason) => m.str("why", "refused").str("reason", reason),
            Missing::Removed => m.str("why", "removed").null("reason"),
            _ => m.str("why", "unknown").null("reason"),
        };
        m.end();
    });
    let name = if matches!(outcome, Outcome::Complete) {
        "complete"
    } else {
        "partial"
    };
    o.str("outcome", name).raw("missing", &list)
}

fn relay_list(relays: &[RelayId]) -> String {
    array(relays, |relay, out| {
        out.extend_from_slice(relay.0.to_string().as_bytes());
    })
}

/// A JSON array of `items`, each written by `item`.
fn array<T>(items: &[T], mut item: impl FnMut(&T, &mut Vec<u8>)) -> String {
    let mut out = vec![b'['];
    for (i, value) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(value, &mut out);
    }
    out.push(b']');
    // Only this module's writers touched it: valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}
