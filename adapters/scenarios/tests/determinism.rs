//! The same seed and the same scripted relay give the same core transcript on tokio,
//! async-std and smol.

use tether_scenarios::determinism::{
    checkpoint_after_a_conversation, restored_transcript, transcript,
};
use tether_scenarios::harness::{AsyncStd, Smol, Tokio};
use tether_scenarios::Harness;

#[test]
fn one_transcript_on_tokio_async_std_and_smol() {
    let tokio = Tokio::run(transcript::<Tokio>(42));
    let async_std = AsyncStd::run(transcript::<AsyncStd>(42));
    let smol = Smol::run(transcript::<Smol>(42));
    // The script went where it was meant to: refusals, retries, a replay on a second socket.
    let text = tokio.join("\n");
    for expected in [
        "retrying, attempt 1",
        "relay got on 1: [\"REQ\"",
        "publish: Ok",
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
    assert_eq!(tokio, async_std, "tokio vs async-std");
    assert_eq!(tokio, smol, "tokio vs smol");
}

#[test]
fn a_checkpoint_taken_under_tokio_restores_to_one_transcript_on_every_runtime() {
    let checkpoint = Tokio::run(checkpoint_after_a_conversation::<Tokio>(7));
    let tokio = Tokio::run(restored_transcript::<Tokio>(8, &checkpoint));
    let async_std = AsyncStd::run(restored_transcript::<AsyncStd>(8, &checkpoint));
    let smol = Smol::run(restored_transcript::<Smol>(8, &checkpoint));
    let text = tokio.join("\n");
    // Only what reached the relay while no process ran, once per subscription.
    for name in ["a", "b", "c"] {
        let events = tokio
            .iter()
            .filter(|l| l.starts_with(&format!("{name}: event")))
            .count();
        assert_eq!(events, 2, "{name}: {text}");
    }
    assert_eq!(tokio, async_std, "tokio vs async-std");
    assert_eq!(tokio, smol, "tokio vs smol");
}
