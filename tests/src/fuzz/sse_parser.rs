//! The `sse_parser` target: arbitrary bytes in arbitrary chunkings into the SSE parser, with
//! a plain reading of the WHATWG rules as the oracle.

use std::time::Duration;

use arbitrary::Unstructured;
use tether_core::sse::{Item, Message, Parser, ParserConfig, Unsendable};

/// Parse a byte stream whole and in arbitrary chunks; both must give the same items and last
/// event ID, buffers must stay within their bounds, and with the default limits the result
/// must equal a naive reading of the WHATWG rules.
///
/// Layout: `[flags, line limit, event limit, cut count, cuts (u16 LE) ..., stream ...]`.
///
/// # Panics
/// When the parser panics or one of those properties fails.
pub fn sse_parser(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let (Ok(flags), Ok(line), Ok(event), Ok(cuts)) = (
        u.arbitrary::<u8>(),
        u.arbitrary::<u8>(),
        u.arbitrary::<u8>(),
        u.arbitrary::<u8>(),
    ) else {
        return;
    };
    let tight = flags & 4 != 0;
    let mut config = ParserConfig::default();
    config.max_queued = usize::from(flags & 3) + 1;
    if tight {
        config.max_line_len = usize::from(line) + 1;
        config.max_event_len = usize::from(event) + 1;
        config.max_sendable_id_len = usize::from(line & 15);
    }
    let cuts: Vec<usize> = (0..cuts % 16)
        .map_while(|_| u.arbitrary::<u16>().ok().map(usize::from))
        .collect();
    let stream = u.take_rest();
    let whole = parse_chunks(config, &[stream]);
    let chunks = split(stream, &cuts);
    assert_eq!(parse_chunks(config, &chunks), whole, "chunking {cuts:?}");
    if stream.len() <= 4096 {
        let singles: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse_chunks(config, &singles), whole, "byte at a time");
    }
    if !tight {
        assert_eq!(whole, reference_parse(stream), "WHATWG reference");
    }
}

/// The items, the last event ID and the resume id.
type Parsed = (Vec<Item>, String, String);

/// Feed `chunks` as one stream, draining after every feed, then end it.
fn parse_chunks(config: ParserConfig, chunks: &[&[u8]]) -> Parsed {
    let mut p = Parser::new(config);
    let mut items = Vec::new();
    for chunk in chunks {
        let mut rest = *chunk;
        loop {
            let n = p.feed(rest);
            // One over: a message and its unsendable-id notice come from one blank line.
            assert!(
                p.queued() <= config.max_queued.max(1) + 1,
                "{} items queued, limit {}",
                p.queued(),
                config.max_queued
            );
            if let Err(e) = p.check_consistency() {
                panic!("parser: {e}");
            }
            // Progress is bytes taken or items queued: a partial BOM from the previous chunk can
            // become an over-long line that fills the queue before this chunk's first byte.
            assert!(
                n > 0 || rest.is_empty() || p.queued() > 0,
                "feed made no progress"
            );
            rest = &rest[n..];
            items.extend(std::iter::from_fn(|| p.next_item()));
            if rest.is_empty() {
                break;
            }
        }
    }
    p.finish();
    items.extend(std::iter::from_fn(|| p.next_item()));
    for item in &items {
        if let Item::Message(m) = item {
            assert!(
                m.data.len() <= 3 * config.max_event_len,
                "{} bytes",
                m.data.len()
            );
        }
    }
    (
        items,
        p.last_event_id().to_owned(),
        p.resume_id().to_owned(),
    )
}

fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        out.push(&bytes[start..p]);
        start = p;
    }
    out.push(&bytes[start..]);
    out
}

/// The HTML standard's "interpreting an event stream", written as plainly as possible over the
/// whole stream: the oracle for the incremental parser.
fn reference_parse(stream: &[u8]) -> Parsed {
    let stream = stream.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(stream);
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < stream.len() {
        match stream[i] {
            b'\r' => {
                lines.push(&stream[start..i]);
                if stream.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            b'\n' => {
                lines.push(&stream[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    // What follows the last line ending is an incomplete line: dropped at the end of stream.
    let (mut items, mut data, mut event_type) = (Vec::new(), Vec::<u8>::new(), Vec::new());
    let (mut id_buffer, mut last_id) = (String::new(), String::new());
    let (mut id_seen, mut resume_id) = (false, String::new());
    let max_id = ParserConfig::default().max_sendable_id_len;
    for line in lines {
        if line.is_empty() {
            last_id.clone_from(&id_buffer);
            // A header value holds TAB, SP..'~' and obs-text (>= 0x80), and servers take 4 KiB.
            let bad_byte = id_buffer
                .bytes()
                .enumerate()
                .find(|&(_, b)| b < 0x20 && b != b'\t' || b == 0x7F);
            let notice = match (std::mem::take(&mut id_seen), bad_byte) {
                (false, _) => None,
                (true, Some((at, byte))) => Some(Unsendable::Byte { at, byte }),
                (true, None) if id_buffer.len() > max_id => Some(Unsendable::TooLong {
                    len: id_buffer.len(),
                    limit: max_id,
                }),
                (true, None) => {
                    resume_id.clone_from(&id_buffer);
                    None
                }
            };
            let notice = notice.map(|why| Item::UnsendableId {
                id: id_buffer.clone(),
                why,
            });
            if data.is_empty() {
                event_type.clear();
                items.extend(notice);
                continue;
            }
            data.pop();
            let event = if event_type.is_empty() {
                "message".to_owned()
            } else {
                String::from_utf8_lossy(&event_type).into_owned()
            };
            items.push(Item::Message(Message {
                event,
                data: String::from_utf8_lossy(&data).into_owned(),
                id: id_buffer.clone(),
            }));
            data.clear();
            event_type.clear();
            items.extend(notice);
            continue;
        }
        if line[0] == b':' {
            items.push(Item::Heartbeat);
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => (
                &line[..c],
                line[c + 1..].strip_prefix(b" ").unwrap_or(&line[c + 1..]),
            ),
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
            }
            b"event" => event_type = value.to_vec(),
            b"id" if !value.contains(&0) => {
                id_buffer = String::from_utf8_lossy(value).into_owned();
                id_seen = true;
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().fold(0u64, |n, &d| {
                    n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                items.push(Item::Retry(Duration::from_millis(ms)));
            }
            _ => {}
        }
    }
    (items, last_id, resume_id)
}
