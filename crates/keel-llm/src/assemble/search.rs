//! Provider-native web search blocks (Anthropic) and items (Responses) → `WebSearch` parts.
//!
//! Invariants:
//! - The provider's blocks/items are kept whole in `replay`, to be sent back unmodified.
//! - Sources are taken only from the structured search results (never from links in text);
//!   `sources_status` is computed once, here, by the URL rules of `keel_types::search`.

use keel_types::search::sources_status;
use keel_types::{AssistantPart, SearchSource, WebSearch};
use serde_json::Value;

fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// An Anthropic `server_tool_use` block (with its input assembled) starts a search.
pub fn anthropic_search_started(mut block: Value, input_json: &str) -> AssistantPart {
    if !input_json.is_empty()
        && let Ok(input) = serde_json::from_str::<Value>(input_json)
    {
        block["input"] = input;
    }
    let query = block
        .get("input")
        .map(|input| text_of(input, "query"))
        .unwrap_or_default();
    AssistantPart::WebSearch(WebSearch {
        query,
        sources: Vec::new(),
        sources_status: Some(sources_status(&[])),
        replay: vec![block],
    })
}

/// Attach an Anthropic `web_search_tool_result` block to the search it answers.
pub fn anthropic_search_result(parts: &mut Vec<AssistantPart>, block: Value) {
    let tool_use_id = text_of(&block, "tool_use_id");
    let sources: Vec<SearchSource> = block
        .get("content")
        .and_then(Value::as_array)
        .map(|results| {
            results
                .iter()
                .filter(|result| {
                    result.get("type").and_then(Value::as_str) == Some("web_search_result")
                })
                .map(|result| SearchSource {
                    url: text_of(result, "url"),
                    title: text_of(result, "title"),
                })
                .collect()
        })
        .unwrap_or_default();
    let target = parts.iter_mut().rev().find_map(|part| match part {
        AssistantPart::WebSearch(search)
            if search.replay.first().map(|b| text_of(b, "id")) == Some(tool_use_id.clone()) =>
        {
            Some(search)
        }
        AssistantPart::WebSearch(_)
        | AssistantPart::Reasoning { .. }
        | AssistantPart::Text { .. }
        | AssistantPart::ToolCall(_) => None,
    });
    let status = Some(sources_status(&sources));
    if let Some(search) = target {
        search.sources_status = status;
        search.sources = sources;
        search.replay.push(block);
    } else {
        // A result without its call is still kept, whole, for replay.
        parts.push(AssistantPart::WebSearch(WebSearch {
            query: String::new(),
            sources,
            sources_status: status,
            replay: vec![block],
        }));
    }
}

/// A Responses `web_search_call` item.
pub fn responses_search(item: Value) -> AssistantPart {
    let action = item.get("action").cloned().unwrap_or(Value::Null);
    let sources: Vec<SearchSource> = action
        .get("sources")
        .and_then(Value::as_array)
        .map(|sources| {
            sources
                .iter()
                .map(|source| SearchSource {
                    url: text_of(source, "url"),
                    title: text_of(source, "title"),
                })
                .collect()
        })
        .unwrap_or_default();
    AssistantPart::WebSearch(WebSearch {
        query: text_of(&action, "query"),
        sources_status: Some(sources_status(&sources)),
        sources,
        replay: vec![item],
    })
}
