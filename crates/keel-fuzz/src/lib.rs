//! keel's fuzz targets, as plain functions of the fuzzer's bytes. `fuzz/` (cargo-fuzz, libFuzzer)
//! runs them; `tests/corpus_replay.rs` replays the committed corpus through the same functions
//! on the stable toolchain, so every input the fuzzer kept is checked by `cargo test`.
//!
//! Invariants:
//! - A target panics only when keel breaks a property: a panic inside keel, a result that
//!   depends on how the bytes were split into reads, a framer that disagrees with the
//!   `eventsource-stream` oracle, a record or config that does not survive its own round trip.
//! - A target never touches the network, the file system outside a temporary path, or the
//!   process environment.
//! - The first bytes of an input choose how the rest is split (and, where there is a choice,
//!   the protocol or the tool), so the fuzzer explores splits as well as contents.
#![allow(clippy::panic, clippy::expect_used)]

mod framing;

pub use framing::{assembler, sse_framer};

use keel_agent::{StoredRecord, decode_record as decode, encode_record as encode};
use keel_config::{KeelConfig, Overrides, WorkspaceFile, WorkspaceFiles, WorkspaceTrust};
use keel_tools::{BuiltinTool, ToolRegistry};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A fuzz target: it panics when keel breaks a property on `data`.
pub type Target = fn(&[u8]);

/// The names of the targets, as `fuzz/fuzz_targets/NAME.rs` and `fuzz/corpus/NAME/` know them.
pub const TARGETS: [(&str, Target); 5] = [
    ("sse_framer", sse_framer),
    ("assembler", assembler),
    ("recovery_record", recovery_record),
    ("config", config),
    ("tool_arguments", tool_arguments),
];

/// Reads of alternating sizes taken from the two parameter bytes (0..=255 bytes each: empty
/// reads included, never two empty sizes).
pub(crate) fn reads(stream: &[u8], first: u8, second: u8) -> Vec<&[u8]> {
    let sizes = match (usize::from(first), usize::from(second)) {
        (0, 0) => [0, 1],
        sizes => [sizes.0, sizes.1],
    };
    let mut reads = Vec::new();
    let mut rest = stream;
    let mut turn = 0;
    while !rest.is_empty() {
        let (read, tail) = rest.split_at(sizes[turn % 2].min(rest.len()));
        reads.push(read);
        rest = tail;
        turn += 1;
    }
    reads
}

/// A stored recovery record: decoding never panics, an unrecoverable one keeps its raw text
/// byte for byte, and a known one survives encode → decode unchanged.
pub fn recovery_record(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match decode("rec_fuzz", text) {
        StoredRecord::Unrecoverable { raw, reason, .. } => {
            assert_eq!(raw, text, "an unrecoverable record is kept as it came");
            assert!(!reason.is_empty(), "an unrecoverable record says why");
        }
        StoredRecord::Known(record) => {
            let encoded = encode(&record).expect("a decoded record encodes");
            match decode("rec_fuzz", &encoded) {
                StoredRecord::Known(again) => assert_eq!(again, record, "round trip"),
                StoredRecord::Unrecoverable { reason, .. } => {
                    panic!("a record keel wrote does not decode: {reason}")
                }
            }
        }
    }
}

/// A project `keel.toml` and a workspace `.mcp.json` of arbitrary text: loading never panics,
/// a rejected file gets a message, and an accepted one resolves or fails with a message.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    match keel_mcp::config::parse_mcp_json(&text, Path::new(".mcp.json")) {
        Ok(_) => {}
        Err(error) => assert!(!error.to_string().is_empty()),
    }
    let loaded = KeelConfig::from_texts(
        vec![(PathBuf::from("keel.toml"), text.clone())],
        Overrides::default(),
    );
    let config = match loaded {
        Ok(config) => config,
        Err(error) => {
            assert!(!error.to_string().is_empty(), "a rejected config says why");
            return;
        }
    };
    let _ = config
        .resolve()
        .map_err(|error| assert!(!error.to_string().is_empty()));
    let _ = config.permission_policy();
    let _ = config.max_rounds();
    let _ = config.compact_at();
    let _ = config.mcp_servers();
    // The same text as an untrusted project's keel.toml and .mcp.json: restricting it never
    // panics, and every value it is refused names a line of the file.
    let project = WorkspaceFiles {
        keel_toml: Some(WorkspaceFile::from_text(
            Path::new("keel.toml"),
            keel_config::PROJECT_CONFIG_FILE,
            text.clone(),
        )),
        mcp_json: Some(WorkspaceFile::from_text(
            Path::new(".mcp.json"),
            keel_config::SHARED_MCP_FILE,
            text.clone(),
        )),
        // The same text as a Claude Code settings file: its hooks are reported, never run.
        claude_settings: Some(WorkspaceFile::from_text(
            Path::new(".claude/settings.json"),
            keel_config::CLAUDE_PROJECT_SETTINGS,
            text.clone(),
        )),
        hook_scripts: None,
    };
    if let Ok(untrusted) = KeelConfig::from_parts(
        None,
        project,
        WorkspaceTrust::Untrusted,
        Overrides::default(),
    ) {
        let lines = text.matches('\n').count() + 1;
        for value in untrusted.ignored() {
            assert!((1..=lines).contains(&value.line), "{value:?}");
        }
        let _ = untrusted.resolve();
        let _ = untrusted.mcp_servers();
    }
}

/// A built-in tool's raw arguments, as a model might send them: validation never panics, and
/// what it accepts is a JSON object.
pub fn tool_arguments(data: &[u8]) {
    static REGISTRY: OnceLock<ToolRegistry> = OnceLock::new();
    let registry = REGISTRY.get_or_init(|| ToolRegistry::new().expect("the built-in schemas"));
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let tools = BuiltinTool::ALL;
    let name = match tools.get(usize::from(choice)) {
        Some(tool) => tool.name(),
        // Past the built-ins: a name the registry must refuse.
        None => "not_a_tool",
    };
    let raw = String::from_utf8_lossy(rest);
    match registry.validate(name, &raw) {
        Ok(call) => assert!(call.args.is_object(), "accepted arguments are an object"),
        Err(error) => assert!(!error.to_string().is_empty(), "a refusal says why"),
    }
}
