//! The reasoning effort a request asks for, read the way a provider reads it, so tests (and
//! `keel eval`) can check what was really sent.
//!
//! Invariant: read from the body alone, in keel's names (`off`, `low`, `medium`, `high`,
//! `max`); a thinking budget with no named effort reads as `budget:N`, thinking switched on
//! with neither as `on`. A request that says nothing reads as `None`.

use serde_json::Value;

/// The effort a request body says, in keel's names (what the mock records): `None` when it
/// says none. A thinking budget reads as `budget:N`.
pub fn effort_in_request(body: &Value) -> Option<String> {
    if let Some(effort) = body.get("reasoning_effort").and_then(Value::as_str) {
        return Some(effort.to_string());
    }
    if let Some(effort) = body.pointer("/reasoning/effort").and_then(Value::as_str) {
        return Some(if effort == "none" { "off" } else { effort }.to_string());
    }
    if let Some(effort) = body
        .pointer("/output_config/effort")
        .and_then(Value::as_str)
    {
        return Some(effort.to_string());
    }
    match body.pointer("/thinking/type").and_then(Value::as_str) {
        Some("disabled") => Some("off".into()),
        Some("enabled") => Some(
            body.pointer("/thinking/budget_tokens")
                .and_then(Value::as_u64)
                .map_or_else(|| "on".to_string(), |budget| format!("budget:{budget}")),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_protocols_spelling_reads_as_keels_name() {
        let read = |body: Value| effort_in_request(&body);
        assert_eq!(
            read(json!({"reasoning_effort": "max", "thinking": {"type": "enabled"}})).as_deref(),
            Some("max")
        );
        assert_eq!(
            read(json!({"thinking": {"type": "disabled"}})).as_deref(),
            Some("off")
        );
        assert_eq!(
            read(json!({"reasoning": {"effort": "none"}})).as_deref(),
            Some("off")
        );
        assert_eq!(
            read(json!({"reasoning": {"effort": "low"}})).as_deref(),
            Some("low")
        );
        assert_eq!(
            read(json!({"thinking": {"type": "enabled", "budget_tokens": 2048}, "output_config": {"effort": "low"}})).as_deref(),
            Some("low")
        );
        assert_eq!(
            read(json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})).as_deref(),
            Some("budget:2048")
        );
        assert_eq!(read(json!({"model": "m"})), None);
    }
}
