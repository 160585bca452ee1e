//! The terminal under the live TUI: raw mode and its restoring guard, the one thread that reads
//! the terminal, the size, desktop notifications, the shared history file and private
//! temporary files for `$EDITOR` and the pager.
//!
//! Invariants:
//! - `RawMode` puts the terminal back (raw mode off, bracketed paste off, cursor shown, the
//!   keyboard protocol popped) when dropped; the key reader is the only reader of the terminal,
//!   and stops reading while paused (another program has the terminal).
//! - While a slash command prints, keys stay raw (`CommandOutput`): what is typed meanwhile
//!   reaches the input after it, Enter included, and is never echoed into the command's output.
//!   A question's answer is read key by key (`answer_line`), never a byte past its Enter.
//! - Modified keys (Shift+Enter) are asked for only from a terminal that says it has the
//!   keyboard protocol (the key reader asks, so the first frame waits for no answer), and only
//!   while keel has the terminal: `plain_keys` before another program gets it.
//! - Notifications carry fixed text only: nothing from the model reaches an OSC sequence.

use crossterm::event::Event as TermEvent;
use nix::sys::termios::{OutputFlags, SetArg, Termios, tcgetattr, tcsetattr};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// The terminal said it has the keyboard protocol (kitty's; asked once by the key reader).
static KEYBOARD_PROTOCOL: AtomicBool = AtomicBool::new(false);
/// keel pushed its keyboard flags, and has not popped them.
static KEYS_ENHANCED: AtomicBool = AtomicBool::new(false);

/// Ask a terminal with the keyboard protocol to report modified keys (Shift+Enter), with
/// escape codes no key can be mistaken for.
pub(crate) fn enhanced_keys() {
    if KEYBOARD_PROTOCOL.load(Ordering::SeqCst) && !KEYS_ENHANCED.swap(true, Ordering::SeqCst) {
        let _ = crossterm::execute!(
            std::io::stdout(),
            crossterm::event::PushKeyboardEnhancementFlags(
                crossterm::event::KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES
            )
        );
    }
}

/// Back to the keys the terminal sends by default (before another program gets it, and at
/// the end).
pub(crate) fn plain_keys() {
    if KEYS_ENHANCED.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(
            std::io::stdout(),
            crossterm::event::PopKeyboardEnhancementFlags
        );
    }
}

/// Puts the terminal back when dropped.
pub(crate) struct RawMode;

impl RawMode {
    pub(crate) fn enter() -> std::io::Result<RawMode> {
        crossterm::terminal::enable_raw_mode()?;
        let _ = crossterm::execute!(std::io::stdout(), crossterm::event::EnableBracketedPaste);
        Ok(RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        plain_keys();
        let _ = crossterm::execute!(
            std::io::stdout(),
            crossterm::event::DisableBracketedPaste,
            crossterm::cursor::Show
        );
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// The terminal while a slash command prints: keys stay raw (not echoed, Enter kept as Enter,
/// read by the key reader when it resumes, so type-ahead lands in the input whole), output as
/// in line mode (`\n` starts a new line). Puts the raw settings back when dropped.
pub(crate) struct CommandOutput {
    raw: Option<Termios>,
}

impl CommandOutput {
    pub(crate) fn begin() -> CommandOutput {
        let raw = tcgetattr(std::io::stdin()).ok();
        if let Some(raw) = &raw {
            let mut printing = raw.clone();
            printing.output_flags |= OutputFlags::OPOST | OutputFlags::ONLCR;
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSADRAIN, &printing);
        }
        CommandOutput { raw }
    }
}

impl Drop for CommandOutput {
    fn drop(&mut self) {
        if let Some(raw) = &self.raw {
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSADRAIN, raw);
        }
    }
}

/// What the terminal said: an event, and for a resize where the cursor is now (asked by the
/// reader itself, the one thread that reads the terminal, so no typed key is lost to it).
pub(crate) type Said = (TermEvent, Option<u16>);

/// Reads the terminal's input on a thread of its own, unless paused (while `$EDITOR`, a pager
/// or a slash command has the terminal).
pub(crate) fn read_keys(paused: Arc<AtomicBool>) -> mpsc::UnboundedReceiver<Said> {
    let (sender, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        // Asked here, by the one reader, so the first frame waits for no answer.
        if crossterm::terminal::supports_keyboard_enhancement().unwrap_or(false) {
            KEYBOARD_PROTOCOL.store(true, Ordering::SeqCst);
            if !paused.load(Ordering::SeqCst) {
                enhanced_keys();
                // Paused meanwhile (another program took the terminal): its keys stay plain.
                if paused.load(Ordering::SeqCst) {
                    plain_keys();
                }
            }
        }
        loop {
            if paused.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            match crossterm::event::poll(Duration::from_millis(40)) {
                Ok(true) => match crossterm::event::read() {
                    Ok(event) => {
                        let cursor = matches!(event, TermEvent::Resize(..))
                            .then(|| crossterm::cursor::position().ok().map(|(_, row)| row))
                            .flatten();
                        if sender.send((event, cursor)).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                Ok(false) => {}
                Err(_) => return,
            }
        }
    });
    receiver
}

/// The history file shared with the line mode, read by the line editor's own history type
/// and written in its format (`#V2`, a line per entry with `\` and newlines escaped) by keel,
/// owner-only: the editor's own writer changes the process umask while it writes, which a
/// command started meanwhile would inherit.
pub(crate) fn load_history(path: &std::path::Path) -> Vec<String> {
    use rustyline::history::{FileHistory, History};
    let mut history = FileHistory::new();
    if history.load(path).is_err() {
        return Vec::new();
    }
    history.iter().cloned().collect()
}

pub(crate) fn save_history(path: &std::path::Path, entries: &[String]) {
    if entries.is_empty() {
        return;
    }
    let kept = &entries[entries.len().saturating_sub(HISTORY_KEPT)..];
    let mut text = String::from("#V2\n");
    for entry in kept {
        text.push_str(&entry.replace('\\', "\\\\").replace('\n', "\\n"));
        text.push('\n');
    }
    let _ = keel_types::private_files::write_private_file(path, text.as_bytes());
}

/// Entries the history file keeps (the line editor's own default).
const HISTORY_KEPT: usize = 100;

/// The terminal's columns and rows (80 × 24 when it cannot say, or says 0, as a
/// pseudo-terminal nobody sized does).
pub(crate) fn screen_size() -> (u16, u16) {
    match crossterm::terminal::size() {
        Ok((columns, rows)) if columns > 0 && rows > 0 => (columns, rows),
        _ => (80, 24),
    }
}

/// The desktop notification for a waiting approval (OSC 9).
pub(crate) const OSC9_APPROVAL: &str =
    "\u{1b}]9;keel: a tool call is waiting for your approval\u{7}";

/// Whether the terminal shows OSC 9 notifications (iTerm2, WezTerm, Ghostty, kitty); others
/// could print it, so it is sent only to those.
pub(crate) fn osc9_supported() -> bool {
    shows_osc9(
        &std::env::var("TERM_PROGRAM").unwrap_or_default(),
        &std::env::var("TERM").unwrap_or_default(),
    )
}

fn shows_osc9(program: &str, term: &str) -> bool {
    matches!(program, "iTerm.app" | "WezTerm" | "ghostty") || term.contains("kitty")
}

/// A fresh file for `$EDITOR` or the pager, private to this user.
pub(crate) fn tempfile_path() -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    for attempt in 0..100u32 {
        let path = dir.join(format!("keel-{}-{attempt}.md", std::process::id()));
        // Only this user may read it: it holds the conversation.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut file) => {
                file.flush()?;
                return Ok(path);
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc9_goes_only_to_terminals_that_show_it() {
        assert!(shows_osc9("WezTerm", "xterm-256color"));
        assert!(shows_osc9("", "xterm-kitty"));
        assert!(!shows_osc9("", "xterm-256color"));
        assert!(!shows_osc9("tmux", "screen"));
        // One sequence, ours: the text has no control character of its own.
        let text = &OSC9_APPROVAL[4..OSC9_APPROVAL.len() - 1];
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }
}
