//! `/undo` and `/rewind` over ACP: a prompt that is one of them runs no model turn; it
//! rewinds the session and answers with what was restored, as the agent's message.
//!
//! Invariant: what could not be restored (conflicts, commands, files not kept) is always in
//! the answer; a refusal is the prompt's error.

use keel_agent::{AgentError, Controller, Line, RewindScope, SurfaceCommand};

/// Whether `text` is `/undo` or `/rewind …`.
pub(crate) fn is_rewind(controller: &Controller, text: &str) -> bool {
    matches!(
        controller.parse_line(text),
        Line::Command(SurfaceCommand::Rewind { .. })
    )
}

/// The answer to `text`, `/undo` or `/rewind …` (anything else: nothing to do). Called on a
/// blocking thread: restoring a file the editor has open goes through the editor.
pub(crate) fn rewind_reply(controller: &Controller, text: &str) -> Result<String, AgentError> {
    let Line::Command(SurfaceCommand::Rewind {
        to,
        code,
        conversation,
        force,
        // No picker over ACP: without a turn, the last one.
        pick: _,
    }) = controller.parse_line(text)
    else {
        return Ok("Nothing to do: not /undo or /rewind.".to_string());
    };
    {
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
    }
}
