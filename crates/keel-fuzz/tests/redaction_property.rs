//! No tool output carries a piece of a secret that the original output did not carry besides
//! the secret: for random outputs holding a secret at random places (partial prefixes of it
//! scattered around, as a probing model would write them) and random cut points, through the
//! real `bash` and `read_file` tools and the redact-then-cut every other tool uses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_tools::output::{OUTPUT_CAP, truncate_middle};
use keel_tools::{ToolRegistry, ToolServices, WorkspaceGuard};
use keel_types::Secrets;
use proptest::prelude::*;

const NAME: &str = "PROBE_KEY";

/// Every substring of at least 4 bytes of `secret` that `output` shows must be found in the
/// original without the secret, or in keel's own markers.
fn assert_no_piece_leaks(secret: &str, original: &str, output: &str) {
    let allowed: Vec<&str> = original
        .split(secret)
        .chain([
            "[redacted $PROBE_KEY]",
            "bytes cut from the middle of",
            "[binary output",
        ])
        .collect();
    for start in 0..secret.len() {
        for end in start + 4..=secret.len() {
            let piece = &secret[start..end];
            if output.contains(piece) {
                assert!(
                    allowed.iter().any(|part| part.contains(piece)),
                    "{piece:?} of the secret leaked"
                );
            }
        }
    }
}

fn filler(seed: &[u8], len: usize, secret: &str) -> String {
    // Letters, with prefixes of the secret (a model's guesses) sprinkled in; no newlines, so
    // a file of it is one line and the cut points are where the test puts them.
    let mut text = String::new();
    let mut index = 0;
    while text.len() < len {
        let byte = seed[index % seed.len()];
        index += 1;
        if byte.is_multiple_of(7) {
            let cut = (byte as usize % secret.len()).clamp(4, secret.len() - 1);
            text.push_str(&secret[..cut]);
        } else {
            text.push(char::from(b'a' + byte % 26));
        }
    }
    text.truncate(len);
    text
}

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// `before` bytes, the secret, `after` bytes.
fn around(seed: &[u8], secret: &str, before: usize, after: usize) -> String {
    format!(
        "{}{secret}{}",
        filler(seed, before, secret),
        filler(&seed[1..], after, secret)
    )
}

/// What `tool` shows of a file holding `original`.
fn through_tool(secrets: &Secrets, tool: &str, original: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("out.txt"), original).unwrap();
    let guard = WorkspaceGuard::new(dir.path(), &[]).unwrap();
    let ctx = ToolServices {
        secrets: secrets.clone(),
        ..ToolServices::new(guard)
    };
    let args = match tool {
        "bash" => serde_json::json!({"command": "cat out.txt"}),
        _ => serde_json::json!({"path": "out.txt"}),
    };
    let call = ToolRegistry::new()
        .unwrap()
        .validate(tool, &args.to_string())
        .unwrap();
    let output = run(call.run(&ctx));
    (output.content, output.summary)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_cut_shows_a_piece_of_a_secret(
        tail in "[0-9a-f]{13,25}",
        seed in proptest::collection::vec(2u8..=255, 2..64),
        // Where the cut falls inside the secret (0: just before it).
        into in 0usize..29,
        cap in 16usize..400,
        extra in 0usize..3_000,
    ) {
        let secret = format!("sk-{tail}");
        let into = into % secret.len();
        let secrets = Secrets::from_names([NAME.to_string()], |_| Some(secret.clone()));
        let half = OUTPUT_CAP / 2;
        // redact-then-cut (search, read_file, web_fetch, MCP): the head cut inside the secret.
        let original = around(&seed, &secret, (cap / 2).saturating_sub(into), cap + extra);
        let cut = truncate_middle(&secrets.redact(&original), cap);
        assert_no_piece_leaks(&secret, &original, &cut);
        // bash, the head cut inside the secret; then the tail's start inside it.
        let original = around(&seed, &secret, half - into, half + extra);
        let (content, summary) = through_tool(&secrets, "bash", &original);
        assert_no_piece_leaks(&secret, &original, &content);
        assert_no_piece_leaks(&secret, &original, &summary);
        let after = half + into - secret.len();
        let original = around(&seed, &secret, half + 5_000 + extra, after);
        let (content, _) = through_tool(&secrets, "bash", &original);
        assert_no_piece_leaks(&secret, &original, &content);
        // read_file: one line, numbered (`     1\t`), cut in the middle at the secret.
        let original = around(&seed, &secret, half - 7 - into, half + extra);
        let (content, _) = through_tool(&secrets, "read_file", &original);
        assert_no_piece_leaks(&secret, &original, &content);
    }
}
