//! Scenarios: the scripted steps the fake provider answers with
//! (docs/mock.md#scenario-steps).
//!
//! Invariants:
//! - Each model request consumes exactly one step, in order; a request the mock rejects on its
//!   own (DeepSeek's reasoning-replay check, a request over `context_window`) consumes none,
//!   and a summarising request consumes a step only when the next one is a `compact` step.
//! - Conversations are scripted apart (docs/mock.md#conversations): a request whose messages
//!   hold a conversation's marker takes that conversation's next step (the first such
//!   conversation), any other request the default steps; each script keeps its own place.
//! - A step's `delay_ms` holds its answer back that long before any header, so concurrent
//!   requests can be made to overlap.
//! - A scenario that cannot be parsed is an error naming the step and what is wrong.

use crate::render::ScriptedAnswer;
pub use crate::render::ScriptedCall;
use crate::stage::Stage;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub steps: Vec<Step>,
    /// Answer with a plain JSON body even when the request asked for a stream.
    pub ignore_stream: bool,
    /// Reject Chat requests that replay tool calls without `reasoning_content`, as DeepSeek does.
    pub require_reasoning_replay: bool,
    /// Pause between streamed chunks (for demos; 0 in tests).
    pub chunk_delay: Duration,
    /// The model's window: a request of more tokens (bytes of system, tools and messages / 4)
    /// gets DeepSeek's context-length 400 and consumes no step.
    pub context_window: Option<u64>,
    /// How long a default step (by its 0-based index) waits before answering.
    pub delays: BTreeMap<usize, Duration>,
    /// Conversations scripted apart, the first whose marker a request holds answering it.
    pub conversations: Vec<Conversation>,
}

/// Steps for the requests whose messages contain `marker` (e.g. a subagent's delegated
/// prompt), answered in order apart from every other request.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    pub marker: String,
    pub steps: Vec<Step>,
    /// How long a step (by its 0-based index) waits before answering.
    pub delays: BTreeMap<usize, Duration>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A final answer, optionally preceded by reasoning.
    Say {
        text: String,
        reason: Option<String>,
        finish_reason: Option<String>,
        /// Sent verbatim as the answer's usage object (chat's final chunk, Anthropic's
        /// `message_delta`, Responses' `response.completed`): malformed numbers included.
        usage: Option<Value>,
    },
    /// A provider-native web search (Anthropic, Responses) with these source URLs, then a
    /// final answer. Chat has no native search and answers with the text only.
    Search {
        query: String,
        sources: Vec<String>,
        text: String,
    },
    /// One or more tool calls (more than one is a parallel call).
    Tools {
        calls: Vec<ScriptedCall>,
        reason: Option<String>,
        finish_reason: Option<String>,
    },
    Fault(Fault),
    /// The answer to a summarising request (keel's compaction). A summarising request takes
    /// the next step only if it is this one; an ordinary request that meets it gets its text.
    /// With `fault`, the summarising request gets that fault instead; with `finish_reason`,
    /// the summary ends with it (`length`: cut off at the output limit).
    Compact {
        text: String,
        fault: Option<Fault>,
        finish_reason: Option<String>,
    },
}

impl ScriptedAnswer {
    /// `None` for a fault step.
    pub fn of(step: &Step) -> Option<ScriptedAnswer> {
        match step {
            Step::Search {
                query,
                sources,
                text,
            } => Some(ScriptedAnswer {
                search: Some((query.clone(), sources.clone())),
                reason: None,
                text: Some(text.clone()),
                calls: Vec::new(),
                finish_reason: None,
                usage: None,
            }),
            Step::Say {
                text,
                reason,
                finish_reason,
                usage,
            } => Some(ScriptedAnswer {
                search: None,
                reason: reason.clone(),
                text: Some(text.clone()),
                calls: Vec::new(),
                finish_reason: finish_reason.clone(),
                usage: usage.clone(),
            }),
            Step::Tools {
                calls,
                reason,
                finish_reason,
            } => Some(ScriptedAnswer {
                search: None,
                reason: reason.clone(),
                text: None,
                calls: calls.clone(),
                finish_reason: finish_reason.clone(),
                usage: None,
            }),
            Step::Compact {
                text,
                finish_reason,
                ..
            } => Some(ScriptedAnswer {
                search: None,
                reason: None,
                text: Some(text.clone()),
                calls: Vec::new(),
                finish_reason: finish_reason.clone(),
                usage: None,
            }),
            Step::Fault(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// An HTTP error answer.
    Http {
        status: u16,
        body: String,
        headers: BTreeMap<String, String>,
    },
    /// Stream part of the next step's answer, then cut the connection.
    DropAfterContent,
    /// Send the start of a stream, then go silent for this long, then cut the connection.
    Stall(Duration),
    /// Send a valid chunk, then one that is not JSON.
    BadJsonChunk,
    /// One of the three stream faults at a chosen place of a full answer (`"at"`).
    Staged { fault: StreamFault, at: Stage },
}

/// What goes wrong in a stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamFault {
    /// The connection is cut.
    Drop,
    /// Silence for this long, then the connection is cut.
    Stall(Duration),
    /// A chunk that is not JSON, then the end of the body.
    BadJson,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScenarioError {
    #[error("scenario is not valid JSON: {0}")]
    Json(String),
    #[error("scenario must be an object with a `steps` array")]
    Shape,
    #[error("`context_window` must be a positive number of tokens")]
    ContextWindow,
    #[error("step {index}: {message}")]
    Step { index: usize, message: String },
    #[error("conversation {conversation}: {message}")]
    Conversation {
        conversation: usize,
        message: String,
    },
    #[error("unknown built-in scenario `{0}` (built-ins: {1})")]
    UnknownBuiltin(String, String),
}

impl Scenario {
    pub fn from_steps(steps: Vec<Step>) -> Scenario {
        Scenario {
            steps,
            ignore_stream: false,
            require_reasoning_replay: true,
            chunk_delay: Duration::ZERO,
            context_window: None,
            delays: BTreeMap::new(),
            conversations: Vec::new(),
        }
    }

    /// The steps and delays of the default script (`None`) or of a conversation.
    pub fn script(&self, conversation: Option<usize>) -> (&[Step], &BTreeMap<usize, Duration>) {
        match conversation.and_then(|index| self.conversations.get(index)) {
            Some(conversation) => (&conversation.steps, &conversation.delays),
            None => (&self.steps, &self.delays),
        }
    }

    /// The first conversation whose marker `messages` (the request's message text) holds.
    pub fn conversation_of(&self, messages: &str) -> Option<usize> {
        self.conversations
            .iter()
            .position(|conversation| messages.contains(&conversation.marker))
    }

    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| ScenarioError::Json(error.to_string()))?;
        let steps = value
            .get("steps")
            .and_then(Value::as_array)
            .ok_or(ScenarioError::Shape)?;
        let (steps, delays) = parse_steps(steps)
            .map_err(|(index, message)| ScenarioError::Step { index, message })?;
        let mut scenario = Scenario::from_steps(steps);
        scenario.delays = delays;
        scenario.conversations = match value.get("conversations") {
            None => Vec::new(),
            Some(Value::Array(conversations)) => conversations
                .iter()
                .enumerate()
                .map(|(index, conversation)| {
                    parse_conversation(conversation).map_err(|message| {
                        ScenarioError::Conversation {
                            conversation: index + 1,
                            message,
                        }
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(ScenarioError::Conversation {
                    conversation: 0,
                    message: "`conversations` must be an array".into(),
                });
            }
        };
        scenario.ignore_stream = value
            .get("ignore_stream")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        scenario.require_reasoning_replay = value
            .get("require_reasoning_replay")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        scenario.context_window = match value.get("context_window") {
            None | Some(Value::Null) => None,
            Some(window) => Some(
                window
                    .as_u64()
                    .filter(|window| *window > 0)
                    .ok_or(ScenarioError::ContextWindow)?,
            ),
        };
        scenario.chunk_delay = Duration::from_millis(
            value
                .get("chunk_delay_ms")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        );
        Ok(scenario)
    }
}

/// How long each step (by its 0-based index) waits before answering.
pub type Delays = BTreeMap<usize, Duration>;

/// The longest a step may wait before answering.
const MOST_DELAY_MS: u64 = 600_000;

/// Steps and their delays; an error names the 1-based step.
fn parse_steps(steps: &[Value]) -> Result<(Vec<Step>, Delays), (usize, String)> {
    let mut parsed = Vec::with_capacity(steps.len());
    let mut delays = BTreeMap::new();
    for (index, step) in steps.iter().enumerate() {
        parsed.push(parse_step(step).map_err(|message| (index + 1, message))?);
        match step.get("delay_ms") {
            None => {}
            Some(delay) => {
                let delay = delay.as_u64().filter(|ms| *ms <= MOST_DELAY_MS).ok_or((
                    index + 1,
                    format!(
                        "`delay_ms` must be a whole number of milliseconds up to {MOST_DELAY_MS}"
                    ),
                ))?;
                delays.insert(index, Duration::from_millis(delay));
            }
        }
    }
    Ok((parsed, delays))
}

/// `{"when": {"contains": MARKER}, "steps": [...]}`.
fn parse_conversation(conversation: &Value) -> Result<Conversation, String> {
    let marker = conversation
        .get("when")
        .and_then(|when| when.get("contains"))
        .and_then(Value::as_str)
        .filter(|marker| !marker.is_empty())
        .ok_or("needs `\"when\": {\"contains\": TEXT}` (a non-empty marker)")?;
    let steps = conversation
        .get("steps")
        .and_then(Value::as_array)
        .ok_or("needs a `steps` array")?;
    let (steps, delays) =
        parse_steps(steps).map_err(|(index, message)| format!("step {index}: {message}"))?;
    Ok(Conversation {
        marker: marker.to_string(),
        steps,
        delays,
    })
}

fn optional_text(step: &Value, key: &str) -> Result<Option<String>, String> {
    match step.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

fn parse_call(name: &Value, args: Option<&Value>) -> Result<ScriptedCall, String> {
    let name = name
        .as_str()
        .ok_or("`tool` must be a string naming the tool")?;
    let arguments = match args {
        None => "{}".to_string(),
        Some(args @ Value::Object(_)) => args.to_string(),
        Some(_) => return Err("`args` must be an object".into()),
    };
    Ok(ScriptedCall {
        name: name.to_string(),
        arguments,
    })
}

fn parse_step(step: &Value) -> Result<Step, String> {
    if !step.is_object() {
        return Err("must be an object".into());
    }
    let reason = optional_text(step, "reason")?;
    let finish_reason = optional_text(step, "finish_reason")?;
    if let Some(query) = step.get("search") {
        let query = query
            .as_str()
            .ok_or("`search` must be a string (the query)")?;
        let sources = match step.get("sources") {
            None => Vec::new(),
            Some(Value::Array(urls)) => urls
                .iter()
                .map(|url| {
                    url.as_str()
                        .map(String::from)
                        .ok_or("`sources` must be strings")
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err("`sources` must be an array of URLs".into()),
        };
        let text = step
            .get("say")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        return Ok(Step::Search {
            query: query.to_string(),
            sources,
            text,
        });
    }
    if let Some(text) = step.get("say") {
        let text = text.as_str().ok_or("`say` must be a string")?;
        return Ok(Step::Say {
            text: text.to_string(),
            reason,
            finish_reason,
            usage: step.get("usage").cloned(),
        });
    }
    if let Some(raw) = step.get("tool_args_raw") {
        let raw = raw.as_str().ok_or("`tool_args_raw` must be a string")?;
        let name = step
            .get("tool")
            .and_then(Value::as_str)
            .unwrap_or("write_file");
        let call = ScriptedCall {
            name: name.to_string(),
            arguments: raw.to_string(),
        };
        return Ok(Step::Tools {
            calls: vec![call],
            reason,
            finish_reason,
        });
    }
    if let Some(name) = step.get("tool") {
        let call = parse_call(name, step.get("args"))?;
        return Ok(Step::Tools {
            calls: vec![call],
            reason,
            finish_reason,
        });
    }
    if let Some(calls) = step.get("tools") {
        let calls = calls
            .as_array()
            .ok_or("`tools` must be an array of {tool, args}")?;
        let calls = calls
            .iter()
            .map(|call| {
                let name = call
                    .get("tool")
                    .ok_or("each entry of `tools` needs `tool`")?;
                parse_call(name, call.get("args"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if calls.is_empty() {
            return Err("`tools` must not be empty".into());
        }
        return Ok(Step::Tools {
            calls,
            reason,
            finish_reason,
        });
    }
    if let Some(text) = step.get("compact") {
        let text = text
            .as_str()
            .ok_or("`compact` must be a string (the summary)")?;
        let fault = match step.get("fault") {
            Some(fault) => Some(parse_fault(step, fault)?),
            None => None,
        };
        return Ok(Step::Compact {
            text: text.to_string(),
            fault,
            finish_reason,
        });
    }
    if let Some(fault) = step.get("fault") {
        return parse_fault(step, fault).map(Step::Fault);
    }
    Err("expected one of `say`, `tool`, `tools`, `tool_args_raw`, `fault`, `compact`".into())
}

fn parse_fault(step: &Value, fault: &Value) -> Result<Fault, String> {
    let legacy = parse_unstaged_fault(step, fault)?;
    let Some(at) = step.get("at") else {
        return Ok(legacy);
    };
    let at = at
        .as_str()
        .and_then(Stage::parse)
        .ok_or_else(|| format!("`at` must be one of {}", Stage::names()))?;
    let fault = match legacy {
        Fault::DropAfterContent => StreamFault::Drop,
        Fault::Stall(duration) => StreamFault::Stall(duration),
        Fault::BadJsonChunk => StreamFault::BadJson,
        Fault::Http { .. } | Fault::Staged { .. } => {
            return Err("`at` goes with drop_after_content, stall or bad_json_chunk".into());
        }
    };
    Ok(Fault::Staged { fault, at })
}

fn parse_unstaged_fault(step: &Value, fault: &Value) -> Result<Fault, String> {
    match fault {
        Value::String(name) => match name.as_str() {
            "drop_after_content" => Ok(Fault::DropAfterContent),
            "bad_json_chunk" => Ok(Fault::BadJsonChunk),
            "stall" => {
                let seconds = step
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(3600.0);
                if !(seconds.is_finite() && seconds >= 0.0) {
                    return Err("`seconds` must be a non-negative number".into());
                }
                Ok(Fault::Stall(Duration::from_secs_f64(seconds)))
            }
            // The scenario may be someone else's file: its value is not repeated.
            _ => Err(
                "unknown fault (use drop_after_content, stall, bad_json_chunk or an \
                      object with a status)"
                    .into(),
            ),
        },
        Value::Object(map) => {
            let status = map
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|status| u16::try_from(status).ok())
                .filter(|status| (100..=599).contains(status))
                .ok_or("a fault object needs `status` between 100 and 599")?;
            let body = match map.get("body") {
                None => String::new(),
                Some(Value::String(body)) => body.clone(),
                Some(other) => other.to_string(),
            };
            let mut headers = BTreeMap::new();
            if let Some(given) = map.get("headers") {
                let given = given.as_object().ok_or("`headers` must be an object")?;
                for (name, value) in given {
                    let value = match value {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    headers.insert(name.clone(), value);
                }
            }
            Ok(Fault::Http {
                status,
                body,
                headers,
            })
        }
        _ => Err("`fault` must be a string or an object".into()),
    }
}

pub const BUILTIN_NAMES: [&str; 12] = [
    "basic",
    "tool-loop-N",
    "transient-500",
    "opaque-400-on-replay",
    "midstream-drop",
    "retry-after-429",
    "quota-402",
    "invalid-args-then-fix",
    "stop-with-tool-calls",
    "bad-json-chunk",
    "stall",
    "always-500",
];

fn say(text: &str, reason: Option<&str>) -> Step {
    Step::Say {
        text: text.into(),
        reason: reason.map(String::from),
        finish_reason: None,
        usage: None,
    }
}

fn tool(name: &str, args: Value, reason: Option<&str>) -> Step {
    Step::Tools {
        calls: vec![ScriptedCall {
            name: name.into(),
            arguments: args.to_string(),
        }],
        reason: reason.map(String::from),
        finish_reason: None,
    }
}

fn http_fault(status: u16, body: &str, headers: &[(&str, &str)]) -> Step {
    Step::Fault(Fault::Http {
        status,
        body: body.into(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Result<Scenario, ScenarioError> {
    const ANSWER: &str = "The answer is 42, computed by the keel mock provider.";
    let steps = match name {
        "basic" => vec![say(ANSWER, Some("The user wants a short answer."))],
        "transient-500" => vec![
            http_fault(
                500,
                r#"{"error":{"message":"internal error","type":"server_error"}}"#,
                &[],
            ),
            say(ANSWER, Some("Retrying worked.")),
        ],
        "always-500" => (0..16)
            .map(|_| {
                http_fault(
                    500,
                    r#"{"error":{"message":"down","type":"server_error"}}"#,
                    &[],
                )
            })
            .collect(),
        "opaque-400-on-replay" => vec![
            tool(
                "list_dir",
                serde_json::json!({"path": "."}),
                Some("Look around first."),
            ),
            http_fault(400, "", &[]),
            say("Recovered from valid history.", None),
        ],
        "midstream-drop" => vec![Step::Fault(Fault::DropAfterContent), say(ANSWER, None)],
        "bad-json-chunk" => vec![Step::Fault(Fault::BadJsonChunk), say(ANSWER, None)],
        "stall" => vec![
            Step::Fault(Fault::Stall(Duration::from_secs(3600))),
            say(ANSWER, None),
        ],
        "retry-after-429" => vec![
            http_fault(
                429,
                r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#,
                &[("Retry-After", "2")],
            ),
            say(ANSWER, None),
        ],
        "quota-402" => vec![
            http_fault(
                402,
                r#"{"error":{"message":"Insufficient Balance","type":"unknown_error"}}"#,
                &[("x-request-id", "mock-quota-1")],
            ),
            say("Answered by the next account.", None),
        ],
        "invalid-args-then-fix" => vec![
            Step::Tools {
                calls: vec![ScriptedCall {
                    name: "write_file".into(),
                    arguments: r#"{"path": 12, "content": "fixed\n"#.into(),
                }],
                reason: Some("Write the file.".into()),
                finish_reason: None,
            },
            tool(
                "write_file",
                serde_json::json!({"path": "fixed.txt", "content": "fixed\n"}),
                Some("Correct the arguments."),
            ),
            say("The file is written.", None),
        ],
        "stop-with-tool-calls" => vec![
            Step::Tools {
                calls: vec![ScriptedCall {
                    name: "list_dir".into(),
                    arguments: r#"{"path":"."}"#.into(),
                }],
                reason: None,
                finish_reason: Some("stop".into()),
            },
            say("Listed the directory.", None),
        ],
        other => match other
            .strip_prefix("tool-loop-")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(rounds) if rounds > 0 && rounds <= 10_000 => {
                let mut steps: Vec<Step> = (1..=rounds)
                    .map(|round| {
                        tool(
                            "bash",
                            serde_json::json!({"command": format!("echo round-{round} >> loop.log")}),
                            Some(&format!("Round {round}.")),
                        )
                    })
                    .collect();
                steps.push(say(&format!("Finished {rounds} rounds."), None));
                steps
            }
            Some(_) | None => {
                return Err(ScenarioError::UnknownBuiltin(
                    other.to_string(),
                    BUILTIN_NAMES.join(", "),
                ));
            }
        },
    };
    Ok(Scenario::from_steps(steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_step_forms_parse() {
        let text = r#"{"steps": [
            {"say": "hi", "reason": "r"},
            {"tool": "bash", "args": {"command": "ls"}, "finish_reason": "stop"},
            {"fault": {"status": 429, "body": "x", "headers": {"Retry-After": 2}}},
            {"fault": "drop_after_content"},
            {"fault": "stall", "seconds": 1.5},
            {"fault": "bad_json_chunk"},
            {"tool_args_raw": "{bad"},
            {"tools": [{"tool": "a"}, {"tool": "b", "args": {"k": 1}}]}
        ]}"#;
        let scenario = Scenario::parse(text).unwrap();
        assert_eq!(scenario.steps.len(), 8);
        assert_eq!(
            scenario.steps[2],
            Step::Fault(Fault::Http {
                status: 429,
                body: "x".into(),
                headers: [("Retry-After".to_string(), "2".to_string())].into(),
            })
        );
        assert_eq!(
            scenario.steps[4],
            Step::Fault(Fault::Stall(Duration::from_millis(1500)))
        );
        match &scenario.steps[6] {
            Step::Tools { calls, .. } => assert_eq!(calls[0].arguments, "{bad"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_scenarios_name_the_step() {
        assert_eq!(Scenario::parse("[]"), Err(ScenarioError::Shape));
        assert!(matches!(Scenario::parse("{"), Err(ScenarioError::Json(_))));
        let error = Scenario::parse(r#"{"steps":[{"say":"a"},{"fault":"meteor"}]}"#).unwrap_err();
        assert!(
            error.to_string().starts_with("step 2: unknown fault (use"),
            "{error}"
        );
        let error = Scenario::parse(r#"{"steps":[{"fault":{"status":1000}}]}"#).unwrap_err();
        assert!(error.to_string().contains("status"), "{error}");
        let error = Scenario::parse(r#"{"steps":[{"nothing":1}]}"#).unwrap_err();
        assert!(error.to_string().contains("expected one of"), "{error}");
    }

    #[test]
    fn conversations_and_delays_parse_and_bad_ones_are_named() {
        let text = r#"{"steps": [{"say": "parent", "delay_ms": 5}],
            "conversations": [
                {"when": {"contains": "MARK-A"}, "steps": [{"say": "a1", "delay_ms": 300}, {"say": "a2"}]},
                {"when": {"contains": "MARK"}, "steps": [{"say": "any"}]}
            ]}"#;
        let scenario = Scenario::parse(text).unwrap();
        assert_eq!(scenario.delays[&0], Duration::from_millis(5));
        assert_eq!(scenario.conversation_of("x MARK-A y"), Some(0));
        assert_eq!(scenario.conversation_of("x MARK y"), Some(1));
        assert_eq!(scenario.conversation_of("plain"), None);
        let (steps, delays) = scenario.script(Some(0));
        assert_eq!(steps.len(), 2);
        assert_eq!(delays[&0], Duration::from_millis(300));
        assert_eq!(scenario.script(None).0.len(), 1);
        let error = Scenario::parse(
            r#"{"steps": [], "conversations": [{"when": {"contains": "m"}, "steps": [{"say": "x", "delay_ms": -1}]}]}"#,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "conversation 1: step 1: `delay_ms` must be a whole number of milliseconds up to 600000"
        );
        let error =
            Scenario::parse(r#"{"steps": [], "conversations": [{"steps": []}]}"#).unwrap_err();
        assert!(error.to_string().contains("a non-empty marker"), "{error}");
    }

    #[test]
    fn builtins_exist() {
        for name in BUILTIN_NAMES {
            let name = name.replace('N', "3");
            assert!(builtin(&name).is_ok(), "{name}");
        }
        assert_eq!(builtin("tool-loop-20").unwrap().steps.len(), 21);
        assert!(matches!(
            builtin("nope"),
            Err(ScenarioError::UnknownBuiltin(..))
        ));
        assert!(builtin("tool-loop-0").is_err());
    }
}
