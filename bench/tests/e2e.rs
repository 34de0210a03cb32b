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
        assert!(m.process_cpu >= m.client_cpu, "{}", contender.name());
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
