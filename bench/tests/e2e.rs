//! The end-to-end benchmark's harness, small: every contender receives every stored event
//! from the real relay exactly once, and the verifying contender really checks signatures.

use tether_bench::e2e::{self, Contender, Relay};

#[test]
fn every_contender_receives_each_stored_event_exactly_once() {
    let corpus = e2e::realistic_notes(1_500, 7);
    let expected = e2e::fingerprint(corpus.iter().map(|e| e.id.as_bytes()));
    let relay = Relay::start(&corpus);
    for contender in Contender::ALL {
        let m = e2e::measure(contender, relay.url(), corpus.len());
        assert_eq!(m.received, 1_500, "{}", contender.name());
        assert_eq!(m.fingerprint, expected, "{}", contender.name());
        assert!(m.client_cpu > std::time::Duration::ZERO);
        // The workers' CPU comes from /proc in clock ticks (10 ms): allow a tick or two of
        // rounding against the process's nanosecond clock.
        assert!(
            m.process_cpu + std::time::Duration::from_millis(20) >= m.client_cpu,
            "{}: process {:?} < client {:?}",
            contender.name(),
            m.process_cpu,
            m.client_cpu
        );
    }
}

#[test]
fn three_overlapping_relays_give_every_spanning_contender_each_unique_event_once() {
    let shared = e2e::realistic_notes(600, 8);
    let owns: Vec<Vec<nostr::Event>> = (0..3).map(|i| e2e::realistic_notes(60, 20 + i)).collect();
    let relays: Vec<Relay> = owns
        .iter()
        .map(|mine| Relay::start(&[shared.as_slice(), mine.as_slice()].concat()))
        .collect();
    let urls: Vec<String> = relays.iter().map(|r| r.url().to_owned()).collect();
    let unique: Vec<&nostr::Event> = shared.iter().chain(owns.iter().flatten()).collect();
    let expected = e2e::fingerprint(unique.iter().map(|e| e.id.as_bytes()));
    for contender in Contender::MANY {
        let m = e2e::measure_many(contender, &urls, unique.len());
        assert_eq!(
            (m.received, m.fingerprint),
            (780, expected),
            "{}",
            contender.name()
        );
    }
}

#[test]
fn the_corpus_is_signed_varied_and_seeded() {
    let a = e2e::realistic_notes(300, 1);
    let b = e2e::realistic_notes(300, 1);
    assert!(a.iter().all(|e| e.verify().is_ok()));
    let content: Vec<&str> = a.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(
        content,
        b.iter().map(|e| e.content.as_str()).collect::<Vec<_>>()
    );
    let authors: std::collections::HashSet<_> = a.iter().map(|e| e.pubkey).collect();
    assert!(authors.len() > 100, "{} authors", authors.len());
    let replies = a.iter().filter(|e| !e.tags.is_empty()).count();
    assert!((100..250).contains(&replies), "{replies} tagged notes");
    let longest = a.iter().map(|e| e.content.len()).max().unwrap();
    assert!(longest > 500, "longest note {longest} bytes");
}
