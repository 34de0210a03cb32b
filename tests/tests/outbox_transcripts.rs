//! Subscriptions by people in the pool (`RelayPool::subscribe_outbox`), one transcript per
//! case the outbox issue asked for: a list update moving an author, a dead relay replaced,
//! an inbox behind NIP-42 AUTH, and a feed split by the relay's `max_message_length`. The
//! exact assertions of the same features are in `outbox_pool.rs`; each case here is an
//! insta transcript checked with exact assertions of its own. Writing them found four bugs
//! (a relay opened with nobody to ask, a dead relay dialled past the router's bound by its
//! session's own reconnect, REQs the relay session refused after the split, routing every
//! second after a backoff ended); each case here fails on the old code.
//!
//! The transcripts are the `PoolSim`'s, written as [`render`] says: people's keys by name,
//! and in a feed of hundreds the lists of keys by their count. Relays are named for what
//! they are (`old`, `new`, `dead`, ...), not `r1`, `r2`: the transcript's `r1` is the
//! pool's relay id, and routing hands ids out again.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use tether_core::nostr::Carries;
use tether_core::pool::{PoolConfig, PoolEvent, RouteReport, SubId};
use tether_core::router::RouterConfig;
use tether_testkit::pool_sim::{PoolAction, PoolSim};
use tether_testkit::sim::UNIX_START;
use tether_testkit::{RelayModel, StoredEvent};

const INDEXER: &str = "wss://index.example";
const SEED: u64 = 7;
/// The first routed subscription; the pool's own, on the relay lists, is the next (`q2`).
const Q1: SubId = SubId(1);
/// The second routed subscription.
const Q3: SubId = SubId(3);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Person `n`'s public key. (Not the `0xa000_0000 + n` of `outbox_pool.rs`: the PoolSim's
/// AUTH events have those ids, and a key's name would show up in their `OK`.)
fn key(n: u64) -> String {
    format!("{:064x}", 0xb000_0000 + n)
}

/// What every key of [`key`] starts with: how [`render`] counts keys.
fn key_prefix() -> String {
    key(0)[..60].to_owned()
}

fn url(name: &str) -> String {
    format!("wss://{name}.example")
}

/// An event numbered `n` by `author`, dated `at` seconds after the Sim's wall-clock start
/// (negative: before it).
fn note(n: u64, author: &str, at: i64, kind: u64, tags: &str) -> StoredEvent {
    let created_at = UNIX_START.saturating_add_signed(at);
    StoredEvent {
        n,
        created_at,
        kind,
        json: format!(
            r#"{{"id":"{n:064x}","pubkey":"{author}","created_at":{created_at},"kind":{kind},"tags":[{tags}],"content":"","sig":"{n:0128x}"}}"#
        ),
    }
}

/// `author`'s relay list of `kind` (10002 or 10050) naming `relays`.
fn list(n: u64, author: &str, at: i64, kind: u64, relays: &[&str]) -> StoredEvent {
    let tag = if kind == 10002 { "r" } else { "relay" };
    let tags: Vec<String> = relays
        .iter()
        .map(|r| format!(r#"["{tag}","{}"]"#, url(r)))
        .collect();
    note(n, author, at, kind, &tags.join(","))
}

/// A gift wrap numbered `n` for `to`, dated `at`.
fn wrap(n: u64, from: &str, to: &str, at: i64) -> StoredEvent {
    note(n, from, at, 1059, &format!(r#"["p","{to}"]"#))
}

fn config() -> PoolConfig {
    let mut router = RouterConfig::default();
    router.indexers = vec![INDEXER.to_owned()];
    let mut config = PoolConfig::default();
    config.router = router;
    config
}

fn holding(events: Vec<StoredEvent>) -> RelayModel {
    let mut model = RelayModel::default();
    model.events = events;
    model
}

/// The relays routing may open, by name (`index` is the indexer).
fn world(s: &mut PoolSim, relays: Vec<(&str, RelayModel)>) {
    for (name, model) in relays {
        let at = if name == "index" {
            INDEXER.to_owned()
        } else {
            url(name)
        };
        s.world.insert(at, model);
    }
}

fn feed(authors: &[String]) -> PoolAction {
    let quoted: Vec<String> = authors.iter().map(|a| format!("\"{a}\"")).collect();
    PoolAction::SubscribeOutbox(format!(
        r#"{{"kinds":[1],"authors":[{}]}}"#,
        quoted.join(",")
    ))
}

/// Event numbers delivered to `sub`, each with how many times.
fn delivered(s: &PoolSim, sub: SubId) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for n in s.heard(|e| match e {
        PoolEvent::Received { sub: q, id, .. } if *q == sub => {
            Some(u64::from_be_bytes(id.0[24..].try_into().expect("8 bytes")))
        }
        _ => None,
    }) {
        *out.entry(n).or_default() += 1;
    }
    out
}

/// The frames sent to the relay at `name` while routing held it there, with when (ms).
fn sent_to(s: &PoolSim, name: &str, what: fn(&Carries) -> bool) -> Vec<(u128, String)> {
    let history = held_history(s, name);
    s.sent
        .iter()
        .filter(|(at, relay, carries, _)| {
            what(carries) && was(&history, relay.0, at.since_origin().as_millis())
        })
        .map(|(at, _, _, text)| (at.since_origin().as_millis(), text.clone()))
        .collect()
}

/// When each relay id became (`true`) or stopped being (`false`) the relay at `name`: the
/// transcript's `rN is <url>` lines (routing hands ids out again).
fn held_history(s: &PoolSim, name: &str) -> Vec<(u128, u32, bool)> {
    let url = url(name);
    s.transcript()
        .lines()
        .filter_map(|line| {
            let (ms, rest) = line.trim_start().split_once("ms io  r")?;
            let (relay, at) = rest.split_once(" is ")?;
            Some((ms.parse().ok()?, relay.parse().ok()?, at == url))
        })
        .collect()
}

/// Whether relay id `relay` was the relay of `history` at `ms`.
fn was(history: &[(u128, u32, bool)], relay: u32, ms: u128) -> bool {
    history
        .iter()
        .rfind(|&&(t, r, _)| r == relay && t <= ms)
        .is_some_and(|&(_, _, is)| is)
}

fn is_req(c: &Carries) -> bool {
    matches!(c, Carries::Req(_))
}

fn routed(s: &PoolSim, sub: SubId) -> Vec<RouteReport> {
    s.heard(|e| match e {
        PoolEvent::Routed { sub: q, report } if *q == sub => Some(report.clone()),
        _ => None,
    })
}

/// The transcript as the snapshots show it:
/// - each person's key by its name (`A`, `ME`);
/// - a `StoreAt` by its event's number and date, as `Store` lines are written;
/// - a list of more than 8 keys by its count (`[<600 keys>]`), and a REQ that had one with
///   its length in bytes, as sent;
/// - a run of more than 3 EVENTs a relay sent at once by its first and the count of the
///   rest.
///
/// Everything else is the PoolSim's transcript as it is.
fn render(s: &PoolSim, names: &[(&str, &str)]) -> String {
    let prefix = key_prefix();
    let lines: Vec<String> = s
        .transcript()
        .lines()
        .map(|line| render_line(line, names, &prefix))
        .collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let run = event_run(&lines[i]);
        let mut j = i + 1;
        // A relay list's verification request follows its EVENT: part of the run.
        let mut verified = 0;
        while run.is_some() && j < lines.len() {
            if event_run(&lines[j]) == run {
                j += 1;
            } else if lines[j].contains("ms vf  r") && lines[j].contains(" Verify ") {
                verified += 1;
                j += 1;
            } else {
                break;
            }
        }
        let events = j - i - verified;
        match run {
            Some((relay, wire)) if events > 3 => {
                let _ = writeln!(out, "{}", lines[i]);
                let _ = writeln!(out, "{relay} ... and {} more EVENTs on {wire}", events - 1);
                if verified > 0 {
                    let _ = writeln!(out, "{relay} ... {verified} of them sent to verify");
                }
            }
            None if is_verdict(&lines[i]) => {
                while j < lines.len() && is_verdict(&lines[j]) {
                    j += 1;
                }
                let _ = writeln!(out, "{}", lines[i]);
                if j - i > 1 {
                    let _ = writeln!(out, "... and {} more verdicts", j - i - 1);
                }
            }
            _ => {
                for line in &lines[i..j] {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
        i = j;
    }
    out
}

fn is_verdict(line: &str) -> bool {
    line.contains("ms vf  Verdict ")
}

fn render_line(line: &str, names: &[(&str, &str)], prefix: &str) -> String {
    let Some(at) = line.find("ms ").map(|i| i + 3) else {
        return line.to_owned();
    };
    let (head, what) = line.split_at(at);
    // A REQ's length as sent, before keys are named.
    let frame_len = what
        .strip_prefix("tx  r")
        .and_then(|rest| rest.find(r#" ["REQ","#).map(|i| rest.len() - i - 1));
    // Long lists first, counting every key, named or not.
    let (mut what, squeezed) = squeeze(what, prefix);
    for (name, key) in names {
        what = what.replace(key, name);
    }
    if let Some(rest) = what.strip_prefix("app StoreAt(") {
        what = store_at(rest).unwrap_or(what);
    }
    if let (true, Some(len)) = (squeezed, frame_len) {
        let _ = write!(what, "  ({len} bytes)");
    }
    format!("{head}{what}")
}

/// `(<time> rx  rN, "<wire>")` of a line with an EVENT a relay sent.
fn event_run(line: &str) -> Option<(String, String)> {
    let at = line.find("ms rx  r")?;
    let frame = line.find(r#" ["EVENT",""#)?;
    let wire = &line[frame + 11..];
    let wire = &wire[..wire.find('"')?];
    Some((line[..frame].to_owned(), format!("\"{wire}\""))).filter(|_| at < frame)
}

/// `'<url>', StoredEvent { n: <n>, created_at: <t>, ...` as `StoreAt '<url>' ev#<n> t=<t>`.
fn store_at(rest: &str) -> Option<String> {
    let (url, rest) = rest.split_once(", StoredEvent { n: ")?;
    let (n, rest) = rest.split_once(", created_at: ")?;
    let (t, _) = rest.split_once(',')?;
    Some(format!("app StoreAt {url} ev#{n} t={t}"))
}

/// Every `[...]` holding no list and more than 8 keys, as `[<N keys>]`; whether any was.
fn squeeze(what: &str, prefix: &str) -> (String, bool) {
    let mut out = String::new();
    let mut rest = what;
    let mut any = false;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let close = rest.find(']').unwrap_or(rest.len());
        let inner = &rest[..close];
        let keys = inner.matches(prefix).count();
        if keys > 8 && !inner.contains('[') {
            let _ = write!(out, "<{keys} keys>");
            rest = &rest[close..];
            any = true;
        }
    }
    out.push_str(rest);
    (out, any)
}

#[test]
fn a_list_update_moves_an_author() {
    let a = key(1);
    let mut s = PoolSim::new(config(), SEED);
    // A's list names `old`, which never kept A's notes (why A moves): the router has no
    // evidence of A there, so the move takes A off it. (Had `old` delivered A's notes, the
    // router would keep asking it about A, as a relay that held them, beside `new`.)
    world(
        &mut s,
        vec![
            ("index", holding(vec![list(8, &a, 0, 10002, &["old"])])),
            ("old", holding(Vec::new())),
            ("new", holding(Vec::new())),
        ],
    );
    // `limit: 10`: the first answer's bound, which the move's catch-up must not inherit.
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r#"{{"kinds":[1],"authors":["{a}"],"limit":10}}"#)),
    );
    // A posts to `new` before telling anyone: the pool asks only `old` meanwhile.
    s.at(
        secs(5),
        PoolAction::StoreAt(url("new"), note(1, &a, 5, 1, "")),
    );
    s.at(
        secs(12),
        PoolAction::StoreAt(url("new"), note(2, &a, 12, 1, "")),
    );
    // A's newer list names `new` only.
    s.at(
        secs(20),
        PoolAction::StoreAt(INDEXER.into(), list(9, &a, 20, 10002, &["new"])),
    );
    // Live on `new` after the move.
    s.at(
        secs(30),
        PoolAction::StoreAt(url("new"), note(3, &a, 30, 1, "")),
    );
    s.run_for(secs(40));

    assert_eq!(
        delivered(&s, Q1),
        BTreeMap::from([(1, 1), (2, 1), (3, 1)]),
        "what reached `new` before the move, once, then what it got live: {}",
        s.transcript()
    );
    // `new` is asked once. It never answered about A, so it gets the user's filter as it
    // is (`limit: 10`, whole history) beside the window from when A was last served live
    // (21 s) less the 2 min lookback, rounded down to 10 min, with no `limit`.
    let since = (UNIX_START + 21 - 120) / 600 * 600;
    let quoted = format!(r#"["{a}"]"#);
    let asked_new: Vec<String> = sent_to(&s, "new", is_req)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        asked_new,
        [format!(
            r#"["REQ","0:1",{{"authors":{quoted},"kinds":[1],"limit":10}},{{"authors":{quoted},"kinds":[1],"since":{since}}}]"#
        )]
    );
    // `old` is let go: asked once, before the move, closed at it, and not opened again.
    assert_eq!(sent_to(&s, "old", is_req).len(), 1);
    let held: Vec<&str> = s
        .pool
        .relay_ids()
        .filter_map(|r| s.pool.relay_url(r))
        .collect();
    assert_eq!(held, [INDEXER, url("new").as_str()], "{}", s.transcript());
    let last = routed(&s, Q1).pop().expect("routing was reported");
    assert_eq!(
        last.relays
            .iter()
            .map(|(_, u)| u.as_str())
            .collect::<Vec<_>>(),
        [INDEXER, url("new").as_str()]
    );
    assert_eq!(last.covered, [(a.clone(), 1)]);
    insta::assert_snapshot!(render(&s, &[("A", &a)]));
}

#[test]
fn a_dead_relay_is_replaced() {
    let a = key(1);
    let mut s = PoolSim::new(config(), SEED);
    world(
        &mut s,
        vec![
            (
                "index",
                holding(vec![list(8, &a, 0, 10002, &["dead", "live"])]),
            ),
            ("dead", holding(vec![note(1, &a, 1, 1, "")])),
            (
                "live",
                holding(vec![note(1, &a, 1, 1, ""), note(2, &a, 2, 1, "")]),
            ),
        ],
    );
    s.at(secs(0), PoolAction::DownAt(url("dead"), true));
    s.at(secs(0), feed(std::slice::from_ref(&a)));
    s.at(
        secs(40),
        PoolAction::StoreAt(url("live"), note(3, &a, 40, 1, "")),
    );
    s.run_for(secs(60));

    // Every socket asked for `dead`: never more than 3 in any 25 s (`RouterConfig::
    // max_attempts` in `retry_window`), counting the relay sessions' own reconnects.
    let history = held_history(&s, "dead");
    let tries: Vec<u64> = s
        .opens()
        .into_iter()
        .filter(|&(ms, relay)| was(&history, relay, u128::from(ms)))
        .map(|(ms, _)| ms)
        .collect();
    for (i, &from) in tries.iter().enumerate() {
        let within = tries[i..].iter().filter(|&&t| t < from + 25_000).count();
        assert!(within <= 3, "{within} tries from {from} ms: {tries:?}");
    }
    assert_eq!(
        delivered(&s, Q1),
        BTreeMap::from([(1, 1), (2, 1), (3, 1)]),
        "{}",
        s.transcript()
    );
    let last = routed(&s, Q1).pop().expect("routing was reported");
    assert!(
        last.relays.iter().any(|(_, u)| *u == url("live")),
        "{last:?}"
    );
    assert!(last.uncovered.is_empty(), "{last:?}");
    insta::assert_snapshot!(render(&s, &[("A", &a)]));
}

#[test]
fn an_inbox_with_auth() {
    let (me, sender) = (key(1), key(2));
    let mut s = PoolSim::new(config(), SEED);
    let mut inbox = holding(vec![wrap(1, &sender, &me, 1)]);
    // NIP-42 before anything: the relay challenges on connect and refuses REQs until it
    // has my AUTH. (The PoolSim answers every challenge with a signed kind 22242, as an
    // application's signer would.)
    inbox.auth_required = true;
    world(
        &mut s,
        vec![
            ("index", holding(vec![list(8, &me, 0, 10050, &["inbox"])])),
            ("inbox", inbox),
        ],
    );
    s.at(
        secs(0),
        PoolAction::SubscribeOutbox(format!(r##"{{"kinds":[1059],"#p":["{me}"]}}"##)),
    );
    // A wrap dated 30 hours back (NIP-59 randomises it), stored while the REQ is live.
    s.at(
        secs(5),
        PoolAction::StoreAt(url("inbox"), wrap(2, &sender, &me, -30 * 3600)),
    );
    s.run_for(secs(10));

    assert_eq!(
        delivered(&s, Q1),
        BTreeMap::from([(1, 1), (2, 1)]),
        "{}",
        s.transcript()
    );
    let p = format!(r##"{{"#p":["{me}"],"kinds":[1059]}}"##);
    let reqs: Vec<String> = sent_to(&s, "inbox", is_req)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        reqs,
        [
            format!(r#"["REQ","0:1",{p}]"#),
            // After the relay's OK to the AUTH: the same filter, asked again.
            format!(r#"["REQ","0:2",{p}]"#),
        ]
    );
    let auths = sent_to(&s, "inbox", |c| !matches!(c, Carries::Req(_)))
        .into_iter()
        .filter(|(_, t)| t.starts_with(r#"["AUTH""#))
        .count();
    assert_eq!(auths, 1);
    // The refusal before the AUTH is the session's to retry: no one hears the relay
    // closed, and the router does not count it against the relay.
    assert!(s
        .heard(|e| matches!(e, PoolEvent::RelayClosed { .. }).then_some(()))
        .is_empty());
    let last = routed(&s, Q1).pop().expect("routing was reported");
    assert_eq!(last.covered, [(me.clone(), 1)]);
    assert!(last.relays.iter().any(|(_, u)| *u == url("inbox")));
    insta::assert_snapshot!(render(&s, &[("ME", &me), ("S", &sender)]));
}

#[test]
fn a_filter_split_by_max_message_length() {
    const MAX: usize = 8 * 1024;
    let authors: Vec<String> = (0..600).map(key).collect();
    let lists: Vec<StoredEvent> = authors
        .iter()
        .zip(10_000..)
        .map(|(a, n)| list(n, a, 0, 10002, &["small"]))
        .collect();
    let mut s = PoolSim::new(config(), SEED);
    world(
        &mut s,
        vec![
            ("index", holding(lists)),
            (
                "small",
                holding(vec![
                    note(1, &authors[0], 3, 1, ""),
                    note(2, &authors[599], 4, 1, ""),
                ]),
            ),
        ],
    );
    // The relay is opened for a feed of one; its NIP-11 document comes back after the
    // socket opened (the driver fetches it beside the socket); then the feed of 600.
    s.at(secs(0), feed(&authors[..1]));
    s.at(
        secs(2),
        PoolAction::RelayInfoAt(
            url("small"),
            format!(r#"{{"limitation":{{"max_message_length":{MAX}}}}}"#),
        ),
    );
    s.at(secs(5), feed(&authors));
    s.run_for(secs(15));

    let reqs: Vec<String> = sent_to(&s, "small", is_req)
        .into_iter()
        .filter(|&(ms, _)| ms >= 5_000)
        .map(|(_, t)| t)
        .collect();
    let lens: Vec<usize> = reqs.iter().map(String::len).collect();
    assert!(reqs.len() >= 2, "{lens:?}");
    assert!(lens.iter().all(|&l| l <= MAX), "{lens:?}");
    // Each of the 600 is asked in exactly one of them.
    for a in &authors {
        let asked = reqs.iter().filter(|r| r.contains(a.as_str())).count();
        assert_eq!(asked, 1, "{a} asked in {asked} REQs of {lens:?}");
    }
    assert_eq!(delivered(&s, Q1), BTreeMap::from([(1, 1)]));
    assert_eq!(delivered(&s, Q3), BTreeMap::from([(1, 1), (2, 1)]));
    insta::assert_snapshot!(render(&s, &[("K0", &authors[0]), ("K599", &authors[599])]));
}
