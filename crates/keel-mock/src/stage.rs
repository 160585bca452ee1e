//! Where in a stream a fault strikes: `{"fault": "drop_after_content" | "stall" |
//! "bad_json_chunk", "at": STAGE}` cuts a full answer (reasoning, text and a tool call, in the
//! protocol's own frames) at STAGE and applies the fault there. The fault matrix test runs every
//! fault at every stage.
//!
//! Invariants:
//! - A stage is found by what the frames carry, not by position, so it means the same in every
//!   protocol: `mid_*` is after the first delta of that kind and before the second.
//! - `after_last_chunk` sends the whole answer, end marker included, before the fault;
//!   `in_usage` sends everything before the frame carrying the usage and half of that frame.
//! - `before_headers`: a drop closes the connection before any byte of the response is flushed;
//!   a stall keeps the headers back for its duration; a bad chunk cannot come before headers, so
//!   there it is the first frame of the body (no opening frame). `after_headers` is the headers
//!   and the opening frame.

use crate::render::{self, Frame, MockUsage, Protocol, ScriptedAnswer, ScriptedCall};

/// The places a stream fault can strike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    BeforeHeaders,
    AfterHeaders,
    MidReasoning,
    MidText,
    MidToolArguments,
    AfterLastChunk,
    InUsage,
}

impl Stage {
    pub const ALL: [(&'static str, Stage); 7] = [
        ("before_headers", Stage::BeforeHeaders),
        ("after_headers", Stage::AfterHeaders),
        ("mid_reasoning", Stage::MidReasoning),
        ("mid_text", Stage::MidText),
        ("mid_tool_arguments", Stage::MidToolArguments),
        ("after_last_chunk", Stage::AfterLastChunk),
        ("in_usage", Stage::InUsage),
    ];

    pub fn parse(name: &str) -> Option<Stage> {
        Self::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, stage)| *stage)
    }

    pub fn names() -> String {
        Self::ALL.map(|(name, _)| name).join(", ")
    }
}

/// The answer a staged fault cuts: every kind of delta, several of each, and a call with an
/// effect (it appends a line to `staged.log` in the workspace), so a test can tell whether a cut
/// answer was ever acted on.
fn full_answer() -> ScriptedAnswer {
    ScriptedAnswer {
        search: None,
        reason: Some("Reading the workspace before answering, step by step.".into()),
        text: Some("A partial answer that must never be shown twice.".into()),
        calls: vec![ScriptedCall {
            name: "bash".into(),
            arguments: r#"{"command": "echo staged >> staged.log"}"#.into(),
        }],
        finish_reason: None,
        usage: None,
    }
}

/// Whether `frame` carries a delta of the kind `stage` cuts in (or the usage, for `in_usage`).
fn carries(protocol: Protocol, frame: &str, stage: Stage) -> bool {
    // A non-empty JSON string value of `key` (the opening chunk sends empty ones).
    let non_empty = |key: &str| {
        frame.contains(&format!("\"{key}\":\"")) && !frame.contains(&format!("\"{key}\":\"\""))
    };
    match (protocol, stage) {
        (Protocol::Chat, Stage::MidReasoning) => non_empty("reasoning_content"),
        (Protocol::Chat, Stage::MidText) => non_empty("content"),
        (Protocol::Chat, Stage::MidToolArguments) => non_empty("arguments"),
        (Protocol::Chat, Stage::InUsage) => frame.contains("\"usage\":"),
        (Protocol::Anthropic, Stage::MidReasoning) => frame.contains("thinking_delta"),
        (Protocol::Anthropic, Stage::MidText) => frame.contains("text_delta"),
        (Protocol::Anthropic, Stage::MidToolArguments) => frame.contains("input_json_delta"),
        (Protocol::Anthropic, Stage::InUsage) => frame.contains("\"message_delta\""),
        (Protocol::Responses, Stage::MidReasoning) => {
            frame.contains("reasoning_summary_text.delta")
        }
        (Protocol::Responses, Stage::MidText) => frame.contains("output_text.delta"),
        (Protocol::Responses, Stage::MidToolArguments) => {
            frame.contains("function_call_arguments.delta")
        }
        (Protocol::Responses, Stage::InUsage) => frame.contains("\"response.completed\""),
        (_, Stage::BeforeHeaders | Stage::AfterHeaders | Stage::AfterLastChunk) => false,
    }
}

/// The frames sent before a fault at `stage`.
pub fn frames_before(protocol: Protocol, stage: Stage, request_number: usize) -> Vec<Frame> {
    let answer = full_answer();
    let frames = render::stream_frames(
        protocol,
        &answer.answer(request_number),
        MockUsage {
            prompt: 100,
            completion: 20,
            reasoning: 5,
            cache_hit: 0,
        },
    );
    let text = |frame: &Frame| match frame {
        Frame::Bytes(bytes) => bytes.clone(),
        Frame::Sleep(_) | Frame::Abort => String::new(),
    };
    let positions: Vec<usize> = frames
        .iter()
        .enumerate()
        .filter(|(_, frame)| carries(protocol, &text(frame), stage))
        .map(|(index, _)| index)
        .collect();
    let cut = match stage {
        Stage::BeforeHeaders => 0,
        Stage::AfterHeaders => 1,
        Stage::AfterLastChunk => frames.len(),
        Stage::MidReasoning | Stage::MidText | Stage::MidToolArguments => {
            // After the first delta of the kind, before the second.
            positions.get(1).or(positions.first()).copied().unwrap_or(1)
        }
        Stage::InUsage => positions.first().copied().unwrap_or(frames.len()),
    };
    let mut sent: Vec<Frame> = frames.iter().take(cut).cloned().collect();
    if stage == Stage::InUsage
        && let Some(Frame::Bytes(usage)) = frames.get(cut)
    {
        let half = (0..=usage.len() / 2)
            .rev()
            .find(|index| usage.is_char_boundary(*index))
            .unwrap_or(0);
        sent.push(Frame::Bytes(usage[..half].to_string()));
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(protocol: Protocol, stage: Stage) -> Vec<String> {
        frames_before(protocol, stage, 1)
            .into_iter()
            .map(|frame| match frame {
                Frame::Bytes(bytes) => bytes,
                Frame::Sleep(_) | Frame::Abort => String::new(),
            })
            .collect()
    }

    #[test]
    fn each_stage_cuts_where_its_name_says_in_every_protocol() {
        for protocol in [Protocol::Chat, Protocol::Anthropic, Protocol::Responses] {
            assert!(sent(protocol, Stage::BeforeHeaders).is_empty());
            assert_eq!(sent(protocol, Stage::AfterHeaders).len(), 1);
            for stage in [Stage::MidReasoning, Stage::MidText, Stage::MidToolArguments] {
                let frames = sent(protocol, stage);
                let of_kind = frames
                    .iter()
                    .filter(|frame| carries(protocol, frame, stage))
                    .count();
                assert_eq!(
                    of_kind, 1,
                    "{protocol:?} {stage:?}: one delta of the kind sent"
                );
            }
            let whole = sent(protocol, Stage::AfterLastChunk);
            let in_usage = sent(protocol, Stage::InUsage);
            let cut = in_usage.last().unwrap();
            assert!(in_usage.len() <= whole.len(), "{protocol:?}");
            assert!(
                whole
                    .iter()
                    .any(|frame| frame.starts_with(cut.as_str()) && frame != cut),
                "{protocol:?}: the usage frame is cut in half"
            );
        }
    }
}
