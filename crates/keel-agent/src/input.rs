//! What a surface hands the controller: the `Input` of a turn, and the parsing of a typed line
//! (slash commands included), so no surface parses commands itself.
//!
//! Invariants:
//! - A line is a slash command only when it starts with `/`; anything else is a prompt, sent
//!   as typed.
//! - `/recover-context [ID] [guidance]`: the first word is the recovery id only when it looks
//!   like one (`r-` and 16 hex digits); guidance is plain text, never parsed further.
//! - Parsing never fails: an unknown command is returned as such for the surface to report.

use crate::custom_commands::CustomCommands;
use crate::recovery::{parse_command, parse_continue_command};

/// The input of one turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Text from the user.
    Prompt(String),
    /// The explicit protocol recovery; without an id, the pending one is bound at admission.
    ProtocolRecovery {
        recovery_id: Option<String>,
        guidance: Option<String>,
    },
    /// "Continue checks" after a turn that ended not ready.
    FinalReadinessRecovery { recovery_id: Option<String> },
    /// `/compact [focus]`: the recovery after a context-limit rejection when one is pending
    /// (or named by `recovery_id`), else a compaction by hand.
    Compact {
        recovery_id: Option<String>,
        focus: Option<String>,
    },
}

impl From<&str> for Input {
    /// A prompt, sent as typed (no command parsing: see `Line::parse`).
    fn from(text: &str) -> Input {
        Input::Prompt(text.to_string())
    }
}

/// A slash command that belongs to the surface (the controller has nothing to run for it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SurfaceCommand {
    Help,
    Quit,
    Cost,
    Sessions,
    /// `/model [PROVIDER/ID]`: show, or switch to, a model.
    Model(Option<String>),
    /// `/resume ID`
    Resume(Option<String>),
    /// `/mcp`: the session's MCP servers and their tools.
    Mcp,
    /// `/agents`: the agents a `task` may start, where each comes from.
    Agents,
    /// `/jobs [kill JOB]`: the session's background jobs (or stop one); runs during a turn too.
    Jobs(Option<String>),
    /// `/skills`: the skills the model can load, where each comes from.
    Skills,
    /// `/transcript`: every answer, tool output and reasoning block of the session.
    Transcript,
    /// `/context`: the session's project instructions (which files, how many tokens).
    Context,
    /// `/reload-context`: read the instruction files and the environment again.
    ReloadContext,
    /// `/plan [PROMPT]`: switch to plan mode (and send PROMPT in it).
    Plan(Option<String>),
    /// `/fork [TURN]`: continue in a new session sharing this one's history (up to TURN).
    Fork(Option<u64>),
    /// `/clear`: a new session in this workspace (the old one kept).
    Clear,
    /// `/status`: model, endpoint, mode, sandbox, session, context, spend.
    Status,
    /// `/permissions`: the mode and the rules in force, each with its source.
    Permissions,
    /// `/diff`: what this session's turns changed in the workspace.
    Diff,
    /// `/undo` (the last turn, files and conversation) and `/rewind [TURN] [--code |
    /// --conversation] [--force]`.
    Rewind {
        to: Option<u64>,
        code: bool,
        conversation: bool,
        force: bool,
        /// `/rewind` without a turn: the surface lets the person pick one.
        pick: bool,
    },
}

/// The names of the built-in commands, which no custom command may take.
pub fn builtin_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = SLASH_COMMANDS
        .iter()
        .filter_map(|(usage, _)| usage.split_whitespace().next())
        .collect();
    names.extend(["/exit", "/recover-context", "/continue-checks"]);
    names
}

/// The prompt `/init` sends: a survey of the repository and a starter `AGENTS.md`, written
/// through the file tools like any other write (so approved like any other).
pub const INIT_PROMPT: &str = "Survey this repository and write a starter AGENTS.md at the \
     workspace root: the instructions a coding agent needs to work here. Look with read-only \
     tools first (the layout, the README, the build and test setup, CI files, the style of the \
     code). Keep it short and concrete: what the project is, how to build, test and lint it \
     (exact commands), where things are, the conventions a change must follow, and what to \
     avoid. If AGENTS.md exists already, improve it instead of starting over and keep what is \
     still right. Write only that file.";

/// What a typed line means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A turn to submit.
    Input(Input),
    Command(SurfaceCommand),
    /// A slash command nobody knows (its name, with the slash).
    Unknown(String),
    /// Nothing but whitespace.
    Empty,
}

/// The slash commands, for help texts and editor completion.
pub const SLASH_COMMANDS: &[(&str, &str)] = &[
    ("/help", "this list"),
    (
        "/clear",
        "start a new session here (this one is kept: /resume)",
    ),
    (
        "/status",
        "model, endpoint, mode, sandbox, session, context and spend",
    ),
    (
        "/permissions",
        "the mode and the rules in force, with their sources",
    ),
    (
        "/diff",
        "what this session changed in the workspace, file by file",
    ),
    (
        "/model [PROVIDER/ID]",
        "show or switch the model (the session continues)",
    ),
    ("/sessions", "sessions of this workspace"),
    ("/resume ID", "continue another session"),
    ("/cost", "tokens used in this session so far"),
    ("/mcp", "the MCP servers of this session and their tools"),
    (
        "/agents",
        "the subagents defined here, where each comes from, and which share the cache",
    ),
    (
        "/skills",
        "the skills the model can load (and you can send as /NAME), where each comes from",
    ),
    (
        "/jobs [kill JOB]",
        "background jobs: command, time, last line, how each ended; kill one (during a turn too)",
    ),
    (
        "/context",
        "what fills the model's window (system, tools, instructions, history, tool results)",
    ),
    (
        "/plan [PROMPT]",
        "plan mode: the model researches and proposes a plan; nothing changes until you approve it",
    ),
    (
        "/undo",
        "undo the last turn: its file edits and the conversation",
    ),
    (
        "/rewind [TURN] [--code|--conversation] [--force]",
        "files and/or conversation as before TURN (the last one by default)",
    ),
    (
        "/fork [TURN]",
        "continue in a new session with this one's history (up to TURN)",
    ),
    (
        "/init [guidance]",
        "survey the repository and write a starter AGENTS.md (approved like any write)",
    ),
    (
        "/reload-context",
        "read AGENTS.md and the environment again (the prompt prefix changes once)",
    ),
    (
        "/transcript",
        "every answer, tool output and reasoning of the session (Ctrl-T)",
    ),
    (
        "/recover-context [ID] [guidance]",
        "recover from a rejected replay, from valid history",
    ),
    (
        "/continue-checks [ID]",
        "continue a turn that ended with open work",
    ),
    (
        "/compact [focus]",
        "summarise the history to free context (the recovery after a context-limit rejection)",
    ),
    ("/quit", "leave (Ctrl-D too)"),
];

impl Line {
    /// A typed line, with no custom command (see `parse_with`).
    pub fn parse(text: &str) -> Line {
        Line::parse_with(text, &CustomCommands::default())
    }

    /// A typed line; a `/NAME` no built-in command takes is `commands`' prompt, if it has one.
    pub fn parse_with(text: &str, commands: &CustomCommands) -> Line {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Line::Empty;
        }
        if !trimmed.starts_with('/') {
            return Line::Input(Input::Prompt(text.to_string()));
        }
        let (name, rest) = match trimmed.split_once(char::is_whitespace) {
            Some((name, rest)) => (name, rest.trim()),
            None => (trimmed, ""),
        };
        let first = rest.split_whitespace().next().map(str::to_string);
        if let Some((recovery_id, guidance)) = parse_command(trimmed) {
            return Line::Input(Input::ProtocolRecovery {
                recovery_id,
                guidance,
            });
        }
        if let Some(recovery_id) = parse_continue_command(trimmed) {
            return Line::Input(Input::FinalReadinessRecovery { recovery_id });
        }
        match name {
            "/compact" => Line::Input(Input::Compact {
                recovery_id: None,
                focus: (!rest.is_empty()).then(|| rest.to_string()),
            }),
            "/init" => Line::Input(Input::Prompt(if rest.is_empty() {
                INIT_PROMPT.to_string()
            } else {
                format!("{INIT_PROMPT}\n\nUser guidance: {rest}")
            })),
            "/help" => Line::Command(SurfaceCommand::Help),
            "/clear" => Line::Command(SurfaceCommand::Clear),
            "/status" => Line::Command(SurfaceCommand::Status),
            "/permissions" => Line::Command(SurfaceCommand::Permissions),
            "/diff" => Line::Command(SurfaceCommand::Diff),
            "/quit" | "/exit" => Line::Command(SurfaceCommand::Quit),
            "/cost" => Line::Command(SurfaceCommand::Cost),
            "/sessions" => Line::Command(SurfaceCommand::Sessions),
            "/mcp" => Line::Command(SurfaceCommand::Mcp),
            "/agents" => Line::Command(SurfaceCommand::Agents),
            "/skills" => Line::Command(SurfaceCommand::Skills),
            "/jobs" => match rest.split_whitespace().collect::<Vec<_>>()[..] {
                [] => Line::Command(SurfaceCommand::Jobs(None)),
                ["kill", job] => Line::Command(SurfaceCommand::Jobs(Some(job.to_string()))),
                _ => Line::Unknown(format!("/jobs {rest}")),
            },
            "/transcript" => Line::Command(SurfaceCommand::Transcript),
            "/context" => Line::Command(SurfaceCommand::Context),
            "/fork" => match rest {
                "" => Line::Command(SurfaceCommand::Fork(None)),
                turn => match turn.parse() {
                    Ok(turn) => Line::Command(SurfaceCommand::Fork(Some(turn))),
                    Err(_) => Line::Unknown(format!("/fork {turn}")),
                },
            },
            "/undo" => Line::Command(SurfaceCommand::Rewind {
                to: None,
                code: true,
                conversation: true,
                force: false,
                pick: false,
            }),
            "/rewind" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                // A word it does not know (a misspelt flag) is no rewind at all.
                let known = |word: &&str| {
                    word.parse::<u64>().is_ok()
                        || ["--code", "--conversation", "--both", "--force"].contains(word)
                };
                if let Some(unknown) = words.iter().find(|word| !known(word)) {
                    return Line::Unknown(format!("/rewind {unknown}"));
                }
                let flag = |name: &str| words.contains(&name);
                let (code_only, conversation_only) = (flag("--code"), flag("--conversation"));
                let to = words.iter().find_map(|word| word.parse().ok());
                Line::Command(SurfaceCommand::Rewind {
                    to,
                    code: !conversation_only || code_only,
                    conversation: !code_only || conversation_only,
                    force: flag("--force"),
                    pick: to.is_none(),
                })
            }
            "/reload-context" => Line::Command(SurfaceCommand::ReloadContext),
            "/plan" => Line::Command(SurfaceCommand::Plan(
                (!rest.is_empty()).then(|| rest.to_string()),
            )),
            "/model" => Line::Command(SurfaceCommand::Model(first)),
            "/resume" => Line::Command(SurfaceCommand::Resume(first)),
            other => match commands.expand(other, rest) {
                Some(prompt) => Line::Input(Input::Prompt(prompt)),
                None => Line::Unknown(other.to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "r-0123456789abcdef";

    #[test]
    fn recovery_commands_bind_an_id_only_when_it_looks_like_one() {
        assert_eq!(
            Line::parse(&format!("/recover-context {ID} check the build first")),
            Line::Input(Input::ProtocolRecovery {
                recovery_id: Some(ID.into()),
                guidance: Some("check the build first".into()),
            })
        );
        assert_eq!(
            Line::parse("/recover-context /continue-checks please"),
            Line::Input(Input::ProtocolRecovery {
                recovery_id: None,
                guidance: Some("/continue-checks please".into()),
            }),
            "guidance is never parsed as a command"
        );
        assert_eq!(
            Line::parse(&format!("/recover-context {ID}")),
            Line::Input(Input::ProtocolRecovery {
                recovery_id: Some(ID.into()),
                guidance: None,
            })
        );
        assert_eq!(
            Line::parse("/continue-checks"),
            Line::Input(Input::FinalReadinessRecovery { recovery_id: None })
        );
    }

    #[test]
    fn prompts_surface_commands_and_unknown_ones() {
        assert_eq!(
            Line::parse("fix the bug"),
            Line::Input(Input::Prompt("fix the bug".into()))
        );
        assert_eq!(Line::parse("   "), Line::Empty);
        assert_eq!(
            Line::parse("/model deepseek/x"),
            Line::Command(SurfaceCommand::Model(Some("deepseek/x".into())))
        );
        assert_eq!(Line::parse("/exit"), Line::Command(SurfaceCommand::Quit));
        assert_eq!(
            Line::parse("/rewind 3 --code --force"),
            Line::Command(SurfaceCommand::Rewind {
                to: Some(3),
                code: true,
                conversation: false,
                force: true,
                pick: false,
            })
        );
        assert!(matches!(
            Line::parse("/rewind --code"),
            Line::Command(SurfaceCommand::Rewind {
                to: None,
                pick: true,
                ..
            })
        ));
        assert!(matches!(
            Line::parse("/undo"),
            Line::Command(SurfaceCommand::Rewind {
                to: None,
                pick: false,
                ..
            })
        ));
        assert_eq!(
            Line::parse("/rewind --conversaton"),
            Line::Unknown("/rewind --conversaton".into())
        );
        assert_eq!(
            Line::parse("/init"),
            Line::Input(Input::Prompt(INIT_PROMPT.into()))
        );
        assert_eq!(
            Line::parse("/init mention the fuzz targets"),
            Line::Input(Input::Prompt(format!(
                "{INIT_PROMPT}\n\nUser guidance: mention the fuzz targets"
            )))
        );
        assert_eq!(
            Line::parse("/frobnicate now"),
            Line::Unknown("/frobnicate".into())
        );
        assert_eq!(
            Line::parse("/recover-contextual"),
            Line::Unknown("/recover-contextual".into())
        );
    }
}
