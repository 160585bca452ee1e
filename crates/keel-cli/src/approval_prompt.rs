//! The approval prompt of the interactive session.
//!
//! Invariants:
//! - The prompt shows the exact subject of the call (every line, control characters visible,
//!   blank runs folded, a line count in the header): what the person approves is what runs.
//! - Anything but `y`/`yes`/`a`/`always` is a decline, and the model is told the user declined.
//! - A prompt abandoned by a cancelled turn stops reading at once: it never takes the line the
//!   person types next at the session's prompt.

use crate::terminal_text::{visible, visible_line};
use keel_agent::{Approval, ApprovalRequest, Approver};
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
            if self
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
            let answer = tokio::task::spawn_blocking(move || {
                eprint!("{question}");
                let _ = std::io::stderr().flush();
                read_answer(&stop)
            })
            .await
            .unwrap_or_default();
            drop(abandoned);
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Approval::Allow,
                "a" | "always" => {
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

/// The approval prompt: the exact subject of the call, every line of it, with every control
/// character shown, so what the person approves is exactly what runs. The header counts the
/// lines and runs of blank lines are folded, so nothing can be scrolled out of sight.
fn approval_question(request: &ApprovalRequest) -> String {
    let tool = visible_line(&request.tool);
    let subject = if request.subject.is_empty() {
        "(no arguments)"
    } else {
        request.subject.as_str()
    };
    let lines: Vec<&str> = subject.split('\n').collect();
    let mut question = if lines.len() > 1 {
        format!("? allow {tool} ({} lines):\n", lines.len())
    } else {
        format!("? allow {tool}:\n")
    };
    let mut index = 0;
    while index < lines.len() {
        let blanks = lines[index..]
            .iter()
            .take_while(|line| line.trim().is_empty())
            .count();
        if blanks >= 2 {
            question.push_str(&format!("    ⋮ ({blanks} blank lines)\n"));
            index += blanks;
            continue;
        }
        question.push_str(&format!("    {}\n", visible(lines[index])));
        index += 1;
    }
    question.push_str(&format!("  [y]es / [n]o / [a]lways for {tool}: "));
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
        })
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
    }

    #[test]
    fn one_line_commands_are_shown_whole_and_visible() {
        assert_eq!(
            question("rm -rf x\r"),
            "? allow bash:\n    rm -rf x␍\n  [y]es / [n]o / [a]lways for bash: "
        );
    }
}
