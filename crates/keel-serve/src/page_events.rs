//! Events as the page gets them: each SSE client's stream adds what keel's renderer makes of
//! them, so the page renders no markdown and no diff itself and never disagrees with the
//! terminal.
//!
//! Invariants:
//! - `llm/response` carries `html`: the renderer's sanitised HTML of the text the attempt
//!   streamed (what this client saw of it; the page's history reload shows the whole answer).
//! - While an answer streams, an `llm/text` carries `html` of the whole text so far at most
//!   every `PARTIAL_EVERY`, and only while the text is at most `LARGEST_PARTIAL` bytes (past
//!   that the page shows the raw text until the response completes): the page never shows raw
//!   `## ` or `|---|` for longer than that, and rendering stays a bounded share of the stream.
//! - `tool/preview` (a write or edit allowed without a question) carries `diff_html`: the
//!   renderer's diff of the exact change, line-numbered, as the terminal's card shows it. A
//!   `tool/call` of `edit_file` or `write_file` (and the same call in the history) carries the
//!   renderer's diff of its arguments, unnumbered (its place in the file is not known there).
//! - Everything added is HTML keel's renderer wrote from escaped text; no model, tool or
//!   provider text reaches the page as markup.

use serde_json::Value;
use std::time::{Duration, Instant};

/// The shortest time between two renderings of a streaming answer, for one client.
pub const PARTIAL_EVERY: Duration = Duration::from_millis(150);

/// The longest streaming text rendered as it arrives (bytes).
pub const LARGEST_PARTIAL: usize = 256 * 1024;

/// One client's view of the attempt that is streaming.
#[derive(Default)]
pub struct PageEvents {
    text: String,
    last_partial: Option<Instant>,
}

impl PageEvents {
    /// Add to `data` (an event as JSON) what the page shows of it.
    pub fn enrich(&mut self, data: &mut Value) {
        self.enrich_at(data, Instant::now());
    }

    fn enrich_at(&mut self, data: &mut Value, now: Instant) {
        match data["type"].as_str() {
            Some("llm/request" | "llm/retry") => {
                self.text.clear();
                self.last_partial = None;
            }
            Some("llm/text") => {
                if let Some(delta) = data["delta"].as_str() {
                    self.text.push_str(delta);
                }
                let due = self
                    .last_partial
                    .is_none_or(|last| now.duration_since(last) >= PARTIAL_EVERY);
                if due && !self.text.is_empty() && self.text.len() <= LARGEST_PARTIAL {
                    data["html"] = Value::String(keel_render::markdown_html(&self.text));
                    self.last_partial = Some(now);
                }
            }
            Some("llm/response") => {
                let text = std::mem::take(&mut self.text);
                self.last_partial = None;
                if !text.is_empty() {
                    data["html"] = Value::String(keel_render::markdown_html(&text));
                }
            }
            Some("tool/call") => {
                if let (Some(name), Some(arguments)) =
                    (data["name"].as_str(), data["arguments"].as_str())
                    && let Some(diff) = call_diff_html(name, arguments)
                {
                    data["diff_html"] = Value::String(diff);
                }
            }
            Some("tool/preview") => {
                if let Some(after) = data["after"].as_str() {
                    let before = data["before"].as_str().map(str::as_bytes);
                    let diff = keel_render::FileDiff::new(before, after.as_bytes()).html();
                    data["diff_html"] = Value::String(diff);
                }
            }
            _ => {}
        }
    }
}

/// An edit's or a write's change as its arguments say it (see the module invariants).
pub fn call_diff_html(name: &str, arguments: &str) -> Option<String> {
    let change = keel_tools::stated_change(name, arguments)?;
    let before = change.replaced.as_deref().map(str::as_bytes);
    let diff = keel_render::FileDiff::new(before, change.with.as_bytes());
    let caption = match &change.replaced {
        Some(_) => format!("{} (the replaced text)", diff.summary()),
        None => {
            let lines = change.with.lines().count();
            format!("writes {lines} line{}", if lines == 1 { "" } else { "s" })
        }
    };
    Some(diff.html_unplaced(&caption))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(delta: &str) -> Value {
        json!({"type": "llm/text", "delta": delta})
    }

    #[test]
    fn a_streaming_answer_is_rendered_at_most_every_interval_and_whole_at_the_end() {
        let mut page = PageEvents::default();
        let start = Instant::now();
        let mut first = text("## Plan\n\n| a |");
        page.enrich_at(&mut first, start);
        assert!(first["html"].as_str().unwrap().contains("<h2>"), "{first}");
        // Soon after: raw delta only.
        let mut soon = text("\n|---|\n| 1 |\n");
        page.enrich_at(&mut soon, start + Duration::from_millis(10));
        assert!(soon.get("html").is_none(), "{soon}");
        // Later: the whole text so far, the table rendered.
        let mut later = text("\nmore");
        page.enrich_at(&mut later, start + PARTIAL_EVERY * 2);
        let html = later["html"].as_str().unwrap();
        assert!(html.contains("<table") && !html.contains("|---|"), "{html}");
        let mut done = json!({"type": "llm/response"});
        page.enrich_at(&mut done, start + PARTIAL_EVERY * 2);
        assert!(done["html"].as_str().unwrap().contains("more"), "{done}");
        // A new attempt starts from nothing.
        page.enrich_at(
            &mut json!({"type": "llm/request"}),
            start + PARTIAL_EVERY * 3,
        );
        let mut again = text("x");
        page.enrich_at(&mut again, start + PARTIAL_EVERY * 3);
        assert_eq!(again["html"].as_str().unwrap().trim(), "<p>x</p>");
    }

    #[test]
    fn a_long_streaming_answer_is_left_raw_until_it_completes() {
        let mut page = PageEvents::default();
        let mut big = text(&"word ".repeat(LARGEST_PARTIAL / 5 + 1));
        page.enrich_at(&mut big, Instant::now());
        assert!(big.get("html").is_none());
        let mut done = json!({"type": "llm/response"});
        page.enrich(&mut done);
        assert!(done["html"].is_string());
    }

    #[test]
    fn streamed_markup_is_escaped() {
        let mut page = PageEvents::default();
        let mut hostile = text("<script>alert(1)</script> <img src=x onerror=y>");
        page.enrich(&mut hostile);
        let html = hostile["html"].as_str().unwrap();
        assert!(
            !html.contains("<script") && !html.contains("<img"),
            "{html}"
        );
    }

    #[test]
    fn an_edit_call_carries_the_diff_of_its_arguments_unnumbered() {
        let mut page = PageEvents::default();
        let mut call = json!({"type": "tool/call", "call_id": "c", "name": "edit_file",
            "arguments": "{\"path\":\"a\",\"old_string\":\"x\\ny\",\"new_string\":\"x\\n<z>\"}"});
        page.enrich(&mut call);
        let diff = call["diff_html"].as_str().unwrap();
        assert!(
            diff.contains("<caption>+1 −1 (the replaced text)</caption>"),
            "{diff}"
        );
        assert!(diff.contains("<tr class=\"add\"><td class=\"no\"></td><td class=\"no\"></td><td class=\"text\">+ &lt;z&gt;"), "{diff}");
        let write =
            call_diff_html("write_file", "{\"path\":\"n\",\"content\":\"a\\nb\\n\"}").unwrap();
        assert!(
            write.contains("<caption>writes 2 lines</caption>"),
            "{write}"
        );
        assert_eq!(call_diff_html("bash", "{\"command\":\"ls\"}"), None);
        assert_eq!(call_diff_html("edit_file", "not json"), None);
    }

    #[test]
    fn a_preview_carries_the_renderers_diff() {
        let mut page = PageEvents::default();
        let mut preview = json!({"type": "tool/preview", "call_id": "c",
            "before": "a\nb\n", "after": "a\nc\n"});
        page.enrich(&mut preview);
        let diff = preview["diff_html"].as_str().unwrap();
        assert!(
            diff.contains("<tr class=\"del\"><td class=\"no\">2</td>"),
            "{diff}"
        );
        assert!(
            diff.contains("<tr class=\"add\"><td class=\"no\"></td><td class=\"no\">2</td>"),
            "{diff}"
        );
    }
}
