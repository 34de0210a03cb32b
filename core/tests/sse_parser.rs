//! Conformance of the event-stream parser: the WHATWG `eventsource/format-*` cases, the edge
//! cases eventsource-parser's suite is known for, bounds, and chunking invariance.
//!
//! The vectors are our own data written from the spec's rules, not copies of those suites.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::sse::{Item, Message, ParseError, Parser, ParserConfig, Unsendable};

/// Parse `chunks` as one stream and end it; returns the items and the final last event ID.
fn parse_with(config: ParserConfig, chunks: &[&[u8]]) -> (Vec<Item>, String) {
    let mut p = Parser::new(config);
    let mut items = Vec::new();
    for chunk in chunks {
        let mut rest: &[u8] = chunk;
        loop {
            let n = p.feed(rest);
            rest = &rest[n..];
            items.extend(std::iter::from_fn(|| p.next_item()));
            if rest.is_empty() {
                break;
            }
        }
    }
    p.finish();
    items.extend(std::iter::from_fn(|| p.next_item()));
    (items, p.last_event_id().to_owned())
}

fn parse(stream: &[u8]) -> Vec<Item> {
    parse_with(ParserConfig::default(), &[stream]).0
}

/// Only the messages, as (type, data, id).
fn messages(items: &[Item]) -> Vec<(String, String, String)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Message(m) => Some((m.event.clone(), m.data.clone(), m.id.clone())),
            _ => None,
        })
        .collect()
}

fn datas(stream: &[u8]) -> Vec<String> {
    messages(&parse(stream)).into_iter().map(|m| m.1).collect()
}

fn msg(event: &str, data: &str, id: &str) -> Item {
    Item::Message(Message {
        event: event.into(),
        data: data.into(),
        id: id.into(),
    })
}

// ---- WHATWG format-* ----

#[test]
fn bom_one_leading_bom_is_stripped() {
    assert_eq!(datas(b"\xEF\xBB\xBFdata: one\n\n"), ["one"]);
}

#[test]
fn bom_a_second_bom_is_part_of_the_first_field_name() {
    // The second BOM turns `data` into an unknown field, so the first block dispatches nothing.
    let s = b"\xEF\xBB\xBF\xEF\xBB\xBFdata: lost\n\ndata: kept\n\n";
    assert_eq!(datas(s), ["kept"]);
}

#[test]
fn bom_in_the_middle_of_the_stream_is_not_stripped() {
    let s = b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n";
    assert_eq!(datas(s), ["a", "c"]);
}

#[test]
fn comments_between_data_lines_do_not_break_the_event() {
    let long = format!(":{}\n", "x".repeat(10_000));
    let s = format!("data:1\n:comment\n{long}data:2\n:\n\n");
    let items = parse(s.as_bytes());
    assert_eq!(
        items,
        [
            Item::Heartbeat,
            Item::Heartbeat,
            Item::Heartbeat,
            msg("message", "1\n2", "")
        ]
    );
}

#[test]
fn data_before_a_missing_final_blank_line_is_discarded() {
    let items = parse(b"retry:1000\ndata:first\n\nid:late\ndata:second");
    assert_eq!(
        items,
        [
            Item::Retry(Duration::from_secs(1)),
            msg("message", "first", "")
        ]
    );
}

#[test]
fn field_data_empty_values_and_bare_names() {
    // `data:` + blank -> "", `data` twice -> "\n", then "test".
    assert_eq!(
        datas(b"data:\n\ndata\ndata\n\ndata:test\n\n"),
        ["", "\n", "test"]
    );
}

#[test]
fn field_event_sets_the_type_for_one_event_only() {
    let items = parse(b"event:ping\ndata:x\n\ndata:y\n\nevent: \ndata:z\n\n");
    assert_eq!(
        messages(&items),
        [
            ("ping".into(), "x".into(), "".into()),
            ("message".into(), "y".into(), "".into()),
            ("message".into(), "z".into(), "".into()),
        ]
    );
}

#[test]
fn event_without_data_dispatches_nothing_and_resets_the_type() {
    assert_eq!(
        parse(b"event:lonely\n\ndata:x\n\n"),
        [msg("message", "x", "")]
    );
}

#[test]
fn field_id_is_sticky_and_can_be_cleared() {
    let (items, last) = parse_with(
        ParserConfig::default(),
        &[b"id:1\ndata:a\n\ndata:b\n\nid\ndata:c\n\nid: 7\ndata:d\n\n"],
    );
    assert_eq!(
        messages(&items)
            .into_iter()
            .map(|m| m.2)
            .collect::<Vec<_>>(),
        ["1", "1", "", "7"]
    );
    assert_eq!(last, "7");
}

#[test]
fn field_id_with_null_is_ignored() {
    let (items, last) = parse_with(
        ParserConfig::default(),
        &[b"id:5\ndata:a\n\nid:6\x00x\ndata:b\n\n"],
    );
    assert_eq!(items, [msg("message", "a", "5"), msg("message", "b", "5")]);
    assert_eq!(last, "5");
}

#[test]
fn id_is_committed_by_a_blank_line_even_without_an_event() {
    let (items, last) = parse_with(ParserConfig::default(), &[b"id: 42\n\n"]);
    assert!(items.is_empty());
    assert_eq!(last, "42");
}

#[test]
fn id_without_its_blank_line_is_not_committed() {
    let (_, last) = parse_with(ParserConfig::default(), &[b"id: 1\n\nid: 2\ndata: x\n"]);
    assert_eq!(last, "1");
}

#[test]
fn the_last_id_carries_into_the_next_stream() {
    let mut p = Parser::default();
    p.feed(b"id: 9\ndata: a\n\n");
    p.finish();
    p.feed(b"data: b\n\n");
    let items: Vec<_> = std::iter::from_fn(|| p.next_item()).collect();
    assert_eq!(items, [msg("message", "a", "9"), msg("message", "b", "9")]);
}

#[test]
fn field_parsing_is_exact_and_case_sensitive() {
    // Lines: `data:\0`, `data:  2` (one space stripped), `Data:1` (unknown), `data\0:2`
    // (unknown), `data:1`, `\0data:4` (unknown), `da-ta:3`, `data_5` (unknown), `data:3`,
    // `data:` (empty), ` data:32` (unknown: leading space), `data:4`, blank.
    let s = b"data:\x00\ndata:  2\rData:1\ndata\x00:2\ndata:1\r\x00data:4\nda-ta:3\rdata_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n";
    assert_eq!(datas(s), ["\u{0}\n 2\n1\n3\n\n4"]);
}

#[test]
fn field_retry_accepts_only_ascii_digits() {
    let s = b"retry:03000\nretry: 1000\nretry:  1000\nretry:1000x\nretry:1e3\nretry:-1\nretry:\nretry\nretry:\xD9\xA3\n\n";
    assert_eq!(
        parse(s),
        [
            Item::Retry(Duration::from_millis(3000)),
            Item::Retry(Duration::from_millis(1000)),
        ]
    );
}

#[test]
fn field_retry_saturates_instead_of_overflowing() {
    assert_eq!(
        parse(b"retry:999999999999999999999999999\n"),
        [Item::Retry(Duration::from_millis(u64::MAX))]
    );
}

#[test]
fn unknown_fields_and_text_lines_are_ignored() {
    let s = b"data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\ndata:test\n\n";
    assert_eq!(datas(s), ["test\n\ntest"]);
}

#[test]
fn only_one_leading_space_is_stripped() {
    assert_eq!(
        datas(b"data:\ttest\rdata: \ndata:  two\n\n"),
        ["\ttest\n\n two"]
    );
}

#[test]
fn newline_forms_crlf_lf_and_lone_cr() {
    assert_eq!(datas(b"data:a\r\ndata\ndata:b\r\n\r"), ["a\n\nb"]);
    assert_eq!(
        datas(b"data:x\r\rdata:y\n\ndata:z\r\n\r\n"),
        ["x", "y", "z"]
    );
}

#[test]
fn null_character_in_data_is_kept() {
    assert_eq!(datas(b"data:\x00\n\n\n\n"), ["\u{0}"]);
}

#[test]
fn utf8_is_decoded() {
    assert_eq!(
        datas("data:ok\u{2026} \u{1F600}\n\n".as_bytes()),
        ["ok\u{2026} \u{1F600}"]
    );
}

// ---- edge cases from eventsource-parser's suite, in our own data ----

#[test]
fn cr_at_the_end_of_a_chunk_and_lf_at_the_start_of_the_next_is_one_line_end() {
    let (items, _) = parse_with(
        ParserConfig::default(),
        &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"],
    );
    assert_eq!(items, [msg("message", "a\nb", "")]);
}

#[test]
fn a_lone_cr_at_the_end_of_a_chunk_still_ends_the_line() {
    let (items, _) = parse_with(
        ParserConfig::default(),
        &[b"data: a\r", b"\r", b"data: b\r\r"],
    );
    assert_eq!(items, [msg("message", "a", ""), msg("message", "b", "")]);
}

#[test]
fn bom_split_across_chunks_is_stripped() {
    let (items, _) = parse_with(
        ParserConfig::default(),
        &[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"],
    );
    assert_eq!(items, [msg("message", "x", "")]);
}

#[test]
fn a_broken_bom_prefix_becomes_replacement_characters() {
    // EF BB then `d`: not a BOM, so the bytes start the first line and make its field unknown.
    assert_eq!(datas(b"\xEF\xBBdata: x\n\ndata: y\n\n"), ["y"]);
    // As data it decodes to one U+FFFD (the maximal ill-formed subpart).
    assert_eq!(datas(b"data: \xEF\xBB!\n\n"), ["\u{FFFD}!"]);
}

#[test]
fn invalid_utf8_is_replaced_never_a_panic() {
    assert_eq!(
        datas(b"data: a\xFFb\xC3\n\nevent: \xFE\ndata: c\n\n"),
        ["a\u{FFFD}b\u{FFFD}", "c"]
    );
    let items = parse(b"event: \xFE\ndata: c\n\n");
    assert_eq!(items, [msg("\u{FFFD}", "c", "")]);
}

#[test]
fn empty_data_dispatches_an_empty_message_but_no_data_dispatches_nothing() {
    assert_eq!(
        parse(b"data:\n\n\n\nid: 1\n\n:hi\n\n"),
        [msg("message", "", ""), Item::Heartbeat]
    );
}

#[test]
fn an_incomplete_event_at_eof_is_discarded() {
    let (items, last) = parse_with(
        ParserConfig::default(),
        &[b"data: complete\n\ndata: half\nid: 3\n"],
    );
    assert_eq!(items, [msg("message", "complete", "")]);
    assert_eq!(last, "");
}

#[test]
fn after_finish_a_new_stream_starts_clean() {
    let mut p = Parser::default();
    p.feed(b"data: cut\r");
    p.finish();
    // The pending CR is forgotten (the LF starts a blank line of the new stream) and a BOM
    // may lead again.
    p.feed(b"\xEF\xBB\xBFdata: fresh\n\n");
    let items: Vec<_> = std::iter::from_fn(|| p.next_item()).collect();
    assert_eq!(items, [msg("message", "fresh", "")]);
}

// ---- bounds ----

fn small() -> ParserConfig {
    let mut config = ParserConfig::default();
    config.max_line_len = 16;
    config.max_event_len = 24;
    config
}

fn queue_of(n: usize) -> ParserConfig {
    let mut config = ParserConfig::default();
    config.max_queued = n;
    config
}

#[test]
fn an_overlong_line_is_an_error_and_parsing_resumes_at_the_next_event() {
    let s = b"data: 0123456789abcdef\nid: 5\ndata: more\n\ndata: ok\n\n";
    let (items, last) = parse_with(small(), &[s]);
    assert_eq!(
        items,
        [
            Item::Error(ParseError::LineTooLong { limit: 16 }),
            msg("message", "ok", "")
        ]
    );
    assert_eq!(last, "");
}

#[test]
fn an_overlong_line_split_across_chunks_is_detected_without_buffering_it() {
    let mut p = Parser::new(small());
    for _ in 0..1000 {
        assert_eq!(p.feed(b"xxxxxxxx"), 8);
    }
    p.feed(b"\n\ndata: ok\n\n");
    let items: Vec<_> = std::iter::from_fn(|| p.next_item()).collect();
    assert_eq!(
        items,
        [
            Item::Error(ParseError::LineTooLong { limit: 16 }),
            msg("message", "ok", "")
        ]
    );
}

#[test]
fn an_oversized_event_is_an_error_and_the_next_event_survives() {
    // Three 10-byte lines need 33 bytes with their joining LFs: over the 24-byte limit.
    let s = b"data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\ndata: ok\n\n";
    let (items, _) = parse_with(small(), &[s]);
    assert_eq!(
        items,
        [
            Item::Error(ParseError::EventTooLarge { limit: 24 }),
            msg("message", "ok", "")
        ]
    );
}

#[test]
fn a_full_queue_stops_consumption_at_a_line_boundary() {
    let mut p = Parser::new(queue_of(2));
    let s = b"data: 1\n\ndata: 2\n\ndata: 3\n\n";
    let n = p.feed(s);
    assert_eq!(n, b"data: 1\n\ndata: 2\n\n".len());
    assert_eq!(p.queued(), 2);
    assert_eq!(p.feed(&s[n..]), 0, "full queue consumes nothing");
    assert_eq!(p.next_item(), Some(msg("message", "1", "")));
    assert_eq!(p.next_item(), Some(msg("message", "2", "")));
    assert_eq!(p.feed(&s[n..]), s.len() - n);
    assert_eq!(p.next_item(), Some(msg("message", "3", "")));
}

// ---- ids a header cannot carry ----

fn unsendable(id: &str, at: usize, byte: u8) -> Item {
    Item::UnsendableId {
        id: id.into(),
        why: Unsendable::Byte { at, byte },
    }
}

#[test]
fn an_id_with_a_control_character_is_delivered_but_not_resumed_from() {
    let mut p = Parser::default();
    p.feed(b"id: 1\ndata: a\n\nid: 2\x01x\ndata: b\n\ndata: c\n\n");
    let items: Vec<_> = std::iter::from_fn(|| p.next_item()).collect();
    assert_eq!(
        items,
        [
            msg("message", "a", "1"),
            msg("message", "b", "2\u{1}x"),
            unsendable("2\u{1}x", 1, 0x01),
            // Inherits the id (WHATWG) without a second notice: one per `id` field.
            msg("message", "c", "2\u{1}x"),
        ]
    );
    assert_eq!(p.last_event_id(), "2\u{1}x");
    assert_eq!(p.resume_id(), "1");
    // A later sendable id moves the resume point again.
    p.feed(b"id: 3\n\n");
    assert_eq!(p.next_item(), None, "an id-only event dispatches nothing");
    assert_eq!((p.last_event_id(), p.resume_id()), ("3", "3"));
}

#[test]
fn every_header_unsafe_byte_is_caught_and_obs_text_is_not() {
    for b in (0x01..=0x1Fu8).chain([0x7F]) {
        if matches!(b, b'\t' | b'\n' | b'\r') {
            continue;
        }
        let mut p = Parser::default();
        p.feed(&[b"id: a".as_slice(), &[b], b"\n\n"].concat());
        let id = format!("a{}", char::from(b));
        assert_eq!(p.next_item(), Some(unsendable(&id, 1, b)), "byte {b:#04x}");
        assert_eq!(p.resume_id(), "");
    }
    // TAB, SP, non-ASCII UTF-8 and invalid UTF-8 (decoded to U+FFFD) are all header-safe.
    let mut p = Parser::default();
    p.feed(b"id: \tx y\xC3\xA9\xFF\ndata: d\n\n");
    assert_eq!(
        p.next_item(),
        Some(msg("message", "d", "\tx y\u{e9}\u{fffd}"))
    );
    assert_eq!(p.next_item(), None);
    assert_eq!(p.resume_id(), "\tx y\u{e9}\u{fffd}");
}

#[test]
fn an_id_over_the_sendable_length_is_not_resumed_from() {
    let mut config = ParserConfig::default();
    config.max_sendable_id_len = 4;
    let mut p = Parser::new(config);
    p.feed(b"id: abcd\n\nid: abcde\ndata: x\n\n");
    assert_eq!(p.next_item(), Some(msg("message", "x", "abcde")));
    assert_eq!(
        p.next_item(),
        Some(Item::UnsendableId {
            id: "abcde".into(),
            why: Unsendable::TooLong { len: 5, limit: 4 }
        })
    );
    assert_eq!((p.last_event_id(), p.resume_id()), ("abcde", "abcd"));
}

#[test]
fn an_unsendable_id_of_an_unfinished_event_is_never_judged() {
    let mut p = Parser::default();
    p.feed(b"id: 1\n\nid: x\x02\ndata: cut");
    p.finish();
    assert_eq!(p.next_item(), None);
    assert_eq!((p.last_event_id(), p.resume_id()), ("1", "1"));
}

// ---- properties ----

/// Bytes drawn mostly from the event-stream alphabet so lines, fields and events happen.
fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"event:".to_vec()),
        Just(b"id: ".to_vec()),
        Just(b"retry:".to_vec()),
        Just(b":".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(b"\x00".to_vec()),
        Just(b"\xC3\xA9".to_vec()),
        Just(b"\xFF".to_vec()),
        "[a-z0-9 ]{0,12}".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..4),
    ];
    proptest::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for p in points {
        out.push(bytes[start..p].to_vec());
        start = p;
    }
    out.push(bytes[start..].to_vec());
    out
}

proptest! {
    #[test]
    fn any_chunking_parses_like_one_piece(
        bytes in stream_bytes(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        queue in 1usize..4,
    ) {
        let config = queue_of(queue);
        let whole = parse_with(config, &[&bytes]);
        let chunks = split(&bytes, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(parse_with(config, &refs), whole);
    }

    #[test]
    fn any_chunking_parses_like_one_piece_with_tight_limits(
        bytes in stream_bytes(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = parse_with(small(), &[&bytes]);
        let chunks = split(&bytes, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(parse_with(small(), &refs), whole);
    }

    #[test]
    fn byte_at_a_time_parses_like_one_piece(bytes in stream_bytes()) {
        let whole = parse_with(ParserConfig::default(), &[&bytes]);
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(parse_with(ParserConfig::default(), &singles), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let chunks = split(&bytes, &cuts);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let (items, _) = parse_with(small(), &refs);
        for item in items {
            if let Item::Message(m) = item {
                prop_assert!(m.data.len() <= 3 * small().max_event_len);
            }
        }
    }
}
