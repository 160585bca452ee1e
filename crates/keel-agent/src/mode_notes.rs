//! The permission mode as the model hears of it: the note that tells it of a change, the
//! context block's line naming the starting mode, and reading back what it was last told.
//!
//! Invariants:
//! - Only keel's exact note, among the notes leading a user item, or the block's own line in
//!   its environment section (written last) count as told: text a file or a tool brings cannot
//!   pass for either.
//! - Pure: nothing here reads or writes anything but its arguments.

use keel_tools::PermissionMode;
use keel_types::Item;

/// The start of the note that tells the model of a mode the user chose.
const MODE_NOTE_START: &str = "[keel: the user switched the permission mode to ";

/// The context block's line naming the mode the session started in.
const BLOCK_MODE_LINE: &str = "permission mode at the start: ";

/// What the model is told, in a user item or a tool result, after the mode changed.
pub(crate) fn mode_note(mode: PermissionMode) -> String {
    format!("{MODE_NOTE_START}{}: {}.]", mode.as_str(), mode.meaning())
}

/// The line of the context block that states the starting mode.
pub(crate) fn block_mode_line(mode: PermissionMode) -> String {
    format!("{BLOCK_MODE_LINE}{}", mode.as_str())
}

/// The mode the model was last told of in `history` (see the module invariants); `None` when
/// it never was.
pub(crate) fn last_told(history: &[Item]) -> Option<PermissionMode> {
    history.iter().rev().find_map(|item| match item {
        Item::User { text } => text
            .lines()
            .take_while(|line| line.starts_with("[keel: "))
            .filter_map(|line| {
                PermissionMode::ALL
                    .into_iter()
                    .find(|mode| line == mode_note(*mode))
            })
            .last(),
        Item::Context(block) => {
            let environment = &block.text[block.text.rfind("<environment>\n")?..];
            PermissionMode::ALL.into_iter().find(|mode| {
                environment
                    .lines()
                    .any(|line| line == block_mode_line(*mode))
            })
        }
        _ => None,
    })
}

/// The permission mode in force, and the one the model was last told of (a change is told
/// inside the next user item, never by rewriting what was sent).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModeState {
    pub now: PermissionMode,
    pub told: PermissionMode,
    /// The mode to return to when a plan is approved without choosing one: the last mode
    /// before plan mode (`ask` for a session that started in it).
    pub before_plan: PermissionMode,
}
