//! A tool result as the model sees it: text and structured content, images and audio as a
//! short note, resource links listed, size-capped with middle truncation like `bash`.
//!
//! Invariants:
//! - Read from the result's wire form (MCP's `content` blocks), so any server's result, in any
//!   protocol version, becomes text; an unknown block type is named, never dropped silently.
//! - Binary payloads (images, audio, blobs) never reach the model as base64.
//! - The content never exceeds `OUTPUT_CAP` characters (middle truncation says what was cut).
//! - keel's secrets are redacted from the whole text before it is cut or summarised, so no cut
//!   leaves part of one (and nothing shown depends on whether cut bytes belong to one).

use keel_tools::ToolOutput;
use keel_tools::output::{OUTPUT_CAP, truncate_middle};
use serde_json::Value;

/// The model's view of a `tools/call` result (its JSON wire form).
pub fn to_output(tool: &str, result: &Value, secrets: &keel_types::Secrets) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        parts.push(block_text(block));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        // The text blocks usually repeat it; show it once, as JSON, when nothing else did.
        let json = serde_json::to_string_pretty(structured).unwrap_or_default();
        if !parts.iter().any(|part| part.contains(json.trim())) {
            parts.push(format!("structured content:\n{json}"));
        }
    }
    let content = if parts.is_empty() {
        "(the tool returned nothing)".to_string()
    } else {
        parts.join("\n")
    };
    let content = truncate_middle(&secrets.redact(&content), OUTPUT_CAP);
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let first = content
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(100)
        .collect::<String>();
    let summary = if is_error {
        format!("{tool} failed: {first}")
    } else {
        first
    };
    ToolOutput {
        content,
        is_error,
        summary,
    }
}

fn block_text(block: &Value) -> String {
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        "image" | "audio" => format!(
            "[{} ({}, {} bytes of base64) — not shown to the model]",
            field("type"),
            if field("mimeType").is_empty() {
                "unknown type"
            } else {
                field("mimeType")
            },
            field("data").len()
        ),
        "resource_link" => format!(
            "[resource link: {}{}]",
            field("uri"),
            match field("name") {
                "" => String::new(),
                name => format!(" ({name})"),
            }
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or_default();
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[resource {uri}: binary content, not shown to the model]"),
            }
        }
        other => format!("[a `{other}` block keel does not show]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::Secrets;
    use serde_json::json;

    #[test]
    fn every_kind_of_block_becomes_text() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
            {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAAA"}},
            {"type": "hologram"}
        ], "structuredContent": {"sum": 3}});
        let output = to_output("mcp__s__t", &result, &Secrets::default());
        assert!(!output.is_error);
        let c = &output.content;
        assert!(
            c.starts_with("hello\n[image (image/png, 8 bytes of base64)"),
            "{c}"
        );
        assert!(c.contains("[resource link: file:///a.txt (a)]"));
        assert!(c.contains("[resource file:///b.txt]\nbee"));
        assert!(c.contains("c.bin: binary content"));
        assert!(c.contains("`hologram`"));
        assert!(c.contains("\"sum\": 3") && !c.contains("aGVsbG8="));
        assert_eq!(output.summary, "hello");
    }

    #[test]
    fn errors_and_huge_results_are_kept_honest_and_small() {
        let failed = to_output(
            "t",
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
            &Secrets::default(),
        );
        assert!(failed.is_error && failed.summary == "t failed: boom");
        let huge = to_output(
            "t",
            &json!({"content": [{"type": "text", "text": "x".repeat(200_000)}]}),
            &Secrets::default(),
        );
        assert!(
            huge.content.chars().count() <= OUTPUT_CAP + 200,
            "{}",
            huge.content.len()
        );
        assert_eq!(
            to_output("t", &json!({}), &Secrets::default()).content,
            "(the tool returned nothing)"
        );
    }
}
