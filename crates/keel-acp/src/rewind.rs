//! `/undo` and `/rewind` over ACP: a prompt that is one of them runs no model turn; it
//! rewinds the session and answers with what was restored, as the agent's message.
//!
//! Invariant: what could not be restored (conflicts, commands, files not kept) is always in
//! the answer; a refusal is the prompt's error.

use keel_agent::{AgentError, Controller, Line, RewindScope, SurfaceCommand};

/// The answer to `text` if it is `/undo` or `/rewind …`; `None` for anything else.
pub(crate) fn rewind_reply(
    controller: &Controller,
    text: &str,
) -> Option<Result<String, AgentError>> {
    let Line::Command(SurfaceCommand::Rewind {
        to,
        code,
        conversation,
        force,
        // No picker over ACP: without a turn, the last one.
        pick: _,
    }) = controller.parse_line(text)
    else {
        return None;
    };
    Some((|| {
        let to = match to {
            Some(to) => to,
            None => match controller.last_turn_in_history()? {
                Some(last) => last,
                None => return Ok("Nothing to undo: the conversation holds no turn.".to_string()),
            },
        };
        let report = controller.rewind(to, RewindScope { code, conversation }, force)?;
        let mut lines = vec![format!("Rewound to before turn {to}.")];
        lines.extend(
            report
                .restored
                .iter()
                .map(|path| format!("- restored {path}")),
        );
        lines.extend(
            report
                .conflicts
                .iter()
                .map(|(path, why)| format!("- conflict {path}: {why}")),
        );
        lines.extend(
            report
                .not_restorable
                .iter()
                .map(|what| format!("- not restored: {what}")),
        );
        lines.push(match report.revision {
            Some(revision) => format!("The conversation is history revision {revision}."),
            None => "The conversation is unchanged.".to_string(),
        });
        Ok(lines.join("\n"))
    })())
}
