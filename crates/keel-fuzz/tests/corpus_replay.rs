//! Every input in the committed fuzz corpus (`fuzz/corpus/TARGET/`), replayed through the same
//! target functions libFuzzer runs, on the stable toolchain; plus a differential property test
//! of the SSE framer against `eventsource-stream` on generated event streams.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_fuzz::TARGETS;
use proptest::prelude::*;
use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn every_corpus_input_passes_its_target() {
    for (name, target) in TARGETS {
        let dir = corpus_dir(name);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect::<Vec<_>>();
        assert!(
            entries.len() >= 10,
            "{name}: the corpus has only {} inputs",
            entries.len()
        );
        for path in entries {
            let input = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&input));
            assert!(outcome.is_ok(), "{name}: {} fails", path.display());
        }
    }
}

/// Streams built from the pieces event streams are made of, so most inputs mean something.
fn event_stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just("data".to_string()),
        Just("event".to_string()),
        Just("id".to_string()),
        Just("retry".to_string()),
        Just(":".to_string()),
        Just(" ".to_string()),
        Just("\n".to_string()),
        Just("\r".to_string()),
        Just("\r\n".to_string()),
        Just("\u{feff}".to_string()),
        Just("\0".to_string()),
        Just("é".to_string()),
        "[a-z0-9{}\"]{0,6}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_framer_agrees_with_the_oracle_on_any_split(
        stream in event_stream(),
        first in any::<u8>(),
        second in any::<u8>(),
    ) {
        let input = [&[first, second][..], &stream].concat();
        keel_fuzz::sse_framer(&input);
    }

    #[test]
    fn every_protocol_assembles_generated_streams_the_same_on_any_split(
        stream in event_stream(),
        choice in any::<u8>(),
        first in any::<u8>(),
        second in any::<u8>(),
    ) {
        let input = [&[choice, first, second][..], &stream].concat();
        keel_fuzz::assembler(&input);
    }
}
