//! Programs the live TUI hands the terminal to: `$VISUAL`/`$EDITOR` to compose a prompt
//! (Ctrl-G) and `$PAGER` for the transcript (Ctrl-T, `/transcript`).
//!
//! Invariants:
//! - The program gets a private temporary file (`tempfile_path`) and the terminal in line mode
//!   (the region put away, the key reader paused, keel's keyboard flags popped); keel takes the
//!   terminal back after it, whatever it did, and removes the file.
//! - The program line is the person's own setting, run by `sh -c` with the file as `$1`: the
//!   file's name never goes through the shell's parsing.

use super::Session;
use crate::terminal::raw_terminal::tempfile_path;

impl Session {
    /// Run `program` on a private file holding `text`, with the terminal handed over: whether
    /// it succeeded and the file's text after (`None`: no file could be made).
    fn run_on_file(&mut self, program: &str, name: &str, text: &str) -> Option<(bool, String)> {
        let file = tempfile_path().ok()?;
        std::fs::write(&file, text).ok()?;
        self.suspend();
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{program} \"$1\""))
            .arg(name)
            .arg(&file)
            .status();
        self.resume();
        let after = std::fs::read_to_string(&file).unwrap_or_default();
        let _ = std::fs::remove_file(&file);
        Some((status.is_ok_and(|status| status.success()), after))
    }

    /// Compose the prompt in `$VISUAL`/`$EDITOR` (the text so far to start from).
    pub(super) fn external_editor(&mut self) {
        let editor = std::env::var("VISUAL")
            .or_else(|_| std::env::var("EDITOR"))
            .unwrap_or_else(|_| "vi".into());
        let text = self.view.editor.expanded();
        match self.run_on_file(&editor, "keel-editor", &text) {
            None => {}
            Some((true, composed)) => self.view.editor.set(composed.trim_end_matches('\n')),
            Some((false, _)) => self.view.set_notice(Some(format!(
                "the editor (`{}`) did not finish cleanly: the input is as it was",
                keel_render::visible_line(&editor)
            ))),
        }
    }

    /// Every answer, card and reasoning block of the session, in a pager.
    /// `d` at an approval: all it is about (the whole diff, every line of the command) in the
    /// pager; the question still waits when it closes.
    pub(super) fn question_in_pager(&mut self) {
        let Some(lines) = self.view.asked_in_full() else {
            return;
        };
        let text = keel_render::to_ansi(&lines, self.colors);
        let pager = std::env::var("PAGER").unwrap_or_else(|_| "less -R".into());
        let _ = self.run_on_file(&pager, "keel-question", &text);
    }

    pub(super) fn transcript(&mut self) {
        let Some(controller) = self.controller() else {
            return;
        };
        let text =
            match crate::terminal::session_driver::transcript_lines(&controller, self.view.width())
            {
                Ok(lines) => keel_render::to_ansi(&lines, self.colors),
                Err(error) => {
                    self.view
                        .set_notice(Some(format!("cannot read the transcript: {error}")));
                    return;
                }
            };
        let pager = std::env::var("PAGER").unwrap_or_else(|_| "less -R".into());
        let _ = self.run_on_file(&pager, "keel-pager", &text);
    }
}
