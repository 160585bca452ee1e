//! The approval prompt of the interactive session.
//!
//! Invariants:
//! - The prompt shows the exact subject of the call (every line, control characters visible,
//!   blank runs folded, a line count in the header): what the person approves is what runs.
//! - Anything but `y`/`yes`/`a`/`always` is a decline, and the model is told the user declined;
//!   `N` declines with the person's note, which the model is given. "Always" lasts for this
//!   session only and is never written to a file.
//! - Running a command again outside the sandbox is asked as such ("UNCONFINED"), every time:
//!   it has no "always".
//! - A prompt abandoned by a cancelled turn stops reading at once: it never takes the line the
//!   person types next at the session's prompt.

use keel_agent::{Approval, ApprovalRequest, Approver};
use keel_render::{Colors, FileDiff, visible_line};
use keel_tools::Preview;
use std::collections::HashSet;
use std::future::Future;
use std::io::Write;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Sets its flag when dropped.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A line from stdin, unless `stop` is set first; checks every 100 ms.
fn read_answer(stop: &AtomicBool) -> String {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let stdin = std::io::stdin();
    while !stop.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(100u8)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            // Abandoned while the person typed: the line is for the session's prompt.
            Ok(_) if stop.load(Ordering::SeqCst) => break,
            Ok(_) => {
                let mut line = String::new();
                return stdin.read_line(&mut line).map(|_| line).unwrap_or_default();
            }
            Err(_) => return String::new(),
        }
    }
    String::new()
}

/// Asks on the terminal; "always" remembers the tool for the rest of the session.
pub struct TerminalApprover {
    pub always: Mutex<HashSet<String>>,
}

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            // An unconfined run is asked about every time.
            if !request.unconfined
                && self
                    .always
                    .lock()
                    .map(|set| set.contains(&request.tool))
                    .unwrap_or(false)
            {
                return Approval::Allow;
            }
            let question = approval_question(request);
            // If the turn is cancelled while we wait, this future is dropped: the flag tells
            // the reader to stop before it takes a line meant for the next prompt.
            let abandoned = AbandonOnDrop(Arc::new(AtomicBool::new(false)));
            let stop = abandoned.0.clone();
            let asked = move |question: String| {
                let stop = stop.clone();
                tokio::task::spawn_blocking(move || {
                    eprint!("{question}");
                    let _ = std::io::stderr().flush();
                    read_answer(&stop)
                })
            };
            let answer = asked(question.clone()).await.unwrap_or_default();
            // `N` denies with a note for the model: on the same line (`N use the other file`)
            // or asked for next.
            if let Some(rest) = answer.trim().strip_prefix('N')
                && (rest.is_empty() || rest.starts_with([' ', ':']))
            {
                let mut note = rest.trim_start_matches([' ', ':']).trim().to_string();
                if note.is_empty() {
                    note = asked("  note for the model: ".into())
                        .await
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                }
                drop(abandoned);
                return if note.is_empty() {
                    Approval::Declined
                } else {
                    Approval::DeclinedWithNote(note)
                };
            }
            drop(abandoned);
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Approval::Allow,
                "a" | "always" if !request.unconfined => {
                    if let Ok(mut set) = self.always.lock() {
                        set.insert(request.tool.clone());
                    }
                    Approval::Allow
                }
                _ => Approval::Declined,
            }
        })
    }
}

/// The approval prompt: the subject folded as on every surface (`approval_view`: blank runs
/// counted, long lines cut with their length, nothing out of sight), each line with its control
/// characters shown, and the command's head with its line count again next to the question.
fn approval_question(request: &ApprovalRequest) -> String {
    let mut question = change_shown(request, crate::render::terminal_width(), colors());
    question.push_str(&ask(request));
    question
}

/// Styles on stderr only where it is a terminal that shows them.
fn colors() -> Colors {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        Colors::from_env()
    } else {
        Colors::None
    }
}

/// The most diff lines shown at a question (the rest is counted).
const LONGEST_DIFF_SHOWN: usize = 400;

/// The change a write or an edit would make, as a diff with line numbers, before the question.
fn change_shown(request: &ApprovalRequest, width: usize, colors: Colors) -> String {
    let lines = match &request.preview {
        None => return String::new(),
        Some(Preview::Unavailable(why)) => {
            return format!("  (no diff to show: {})\n", visible_line(why));
        }
        Some(Preview::Change { before, after }) => {
            FileDiff::new(before.as_deref(), after).lines(width.saturating_sub(2))
        }
    };
    let shown: Vec<_> = lines
        .iter()
        .take(LONGEST_DIFF_SHOWN)
        .map(|line| line.clone().prefixed(&[keel_render::Span::plain("  ")]))
        .collect();
    let mut out = keel_render::to_ansi(&shown, colors);
    if lines.len() > LONGEST_DIFF_SHOWN {
        out.push_str(&format!(
            "  … {} more lines of the diff not shown; say no unless you know them\n",
            lines.len() - LONGEST_DIFF_SHOWN
        ));
    }
    out
}

/// The question itself, after any diff.
fn ask(request: &ApprovalRequest) -> String {
    let tool = visible_line(&request.tool);
    let subject = if request.subject.is_empty() {
        "(no arguments)"
    } else {
        request.subject.as_str()
    };
    let view = keel_types::approval_view(subject);
    let mut question = match (request.unconfined, view.line_count) {
        (true, _) => format!(
            "? the command failed inside keel's sandbox, and its output suggests the sandbox \
             refused something (the output is the command's own: keel cannot verify it). Run \
             it again OUTSIDE the sandbox — unconfined, with your full access, running the \
             workspace's code as the sandboxed run may have left it ({} line{}):\n",
            view.line_count,
            if view.line_count == 1 { "" } else { "s" }
        ),
        (false, 1) => format!("? allow {tool}:\n"),
        (false, lines) => format!("? allow {tool} ({lines} lines):\n"),
    };
    for line in &view.lines {
        question.push_str(&format!("    {}\n", visible_line(line)));
    }
    let lines = match view.line_count {
        1 => String::new(),
        n => format!(" ({n} lines)"),
    };
    let hidden = match view.hidden_chars {
        0 => String::new(),
        n => format!(" — ⚠ {n} characters of long lines not shown; say no unless you know them"),
    };
    let choices = if request.unconfined {
        "run it UNCONFINED? [y]es / [n]o".to_string()
    } else {
        format!("[y]es / [n]o / [N]o + note / [a]lways for {tool} (session)")
    };
    question.push_str(&format!(
        "  {tool}: {}{lines}{hidden} — {choices}: ",
        visible_line(&view.head)
    ));
    question
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(subject: &str) -> String {
        approval_question(&ApprovalRequest {
            call_id: "call_1".into(),
            tool: "bash".into(),
            subject: subject.into(),
            arguments: String::new(),
            unconfined: false,
            preview: None,
        })
    }

    #[test]
    fn an_edit_is_asked_with_its_diff_and_line_numbers() {
        let request = ApprovalRequest {
            call_id: "call_1".into(),
            tool: "edit_file".into(),
            subject: "src/lib.rs".into(),
            arguments: String::new(),
            unconfined: false,
            preview: Some(Preview::Change {
                before: Some(b"fn a() {}\nfn b() {}\n".to_vec()),
                after: b"fn a() {}\nfn b() { todo() }\n".to_vec(),
            }),
        };
        let shown = change_shown(&request, 80, Colors::None);
        assert_eq!(
            shown,
            "  +1 −1\n  @@ -1,2 +1,2 @@\n  1 1   fn a() {}\n  2   - fn b() {}\n    2 + fn b() { todo() }\n"
        );
        let unavailable = ApprovalRequest {
            preview: Some(Preview::Unavailable(
                "the file is 9 bytes, too large".into(),
            )),
            ..request
        };
        assert_eq!(
            change_shown(&unavailable, 80, Colors::None),
            "  (no diff to show: the file is 9 bytes, too large)\n"
        );
    }

    #[test]
    fn blank_lines_cannot_scroll_the_dangerous_line_away() {
        let hidden = format!("touch PWNED{}echo harmless", "\n".repeat(200));
        let shown = question(&hidden);
        assert!(
            shown.starts_with("? allow bash (201 lines):\n    touch PWNED\n"),
            "{shown}"
        );
        assert!(shown.contains("⋮ (199 blank lines)"), "{shown}");
        assert!(shown.lines().count() < 6, "{shown}");
        assert!(
            shown.ends_with(
                "bash: touch PWNED (201 lines) — [y]es / [n]o / [N]o + note / [a]lways for \
                 bash (session): "
            ),
            "{shown}"
        );
    }

    #[test]
    fn one_line_commands_are_shown_whole_and_visible() {
        assert_eq!(
            question("rm -rf x\r"),
            "? allow bash:\n    rm -rf x␍\n  bash: rm -rf x␍ — [y]es / [n]o / [N]o + note / \
             [a]lways for bash (session): "
        );
    }

    #[test]
    fn a_run_of_spaces_cannot_hide_the_command_at_the_question() {
        let shown = question(&format!("touch PWNED;{}echo harmless", " ".repeat(9000)));
        assert!(shown.len() < 300, "{shown}");
        assert!(
            shown.contains("touch PWNED;⟨9,000 spaces⟩echo harmless"),
            "{shown}"
        );
        let last = shown.lines().last().unwrap();
        assert!(
            last.contains("bash: touch PWNED;"),
            "next to the question: {last}"
        );
    }
}
