//! The approval prompt of the interactive session: asked on the line (`TerminalApprover`) or
//! sent to the live TUI's region over a channel, answered there by one key (`TuiApprover`).
//!
//! Invariants:
//! - The prompt shows the exact subject of the call (every line, control characters visible,
//!   blank runs folded, a line count in the header): what the person approves is what runs.
//! - Anything but `y`/`yes`/`a`/`always` is a decline, and the model is told the user declined;
//!   `N` declines with the person's note, which the model is given. "Always" lasts for this
//!   session only and is never written to a file; for `bash` it covers the program and
//!   subcommand (`keel_tools::always`), and where nothing can be remembered `a` is a plain yes.
//! - Running a command again outside the sandbox is asked as such ("UNCONFINED"), every time:
//!   it has no "always".
//! - A prompt abandoned by a cancelled turn stops reading at once: it never takes the line the
//!   person types next at the session's prompt.

use keel_agent::{AlwaysAllowed, Approval, ApprovalRequest, Approver};
use keel_tui::Question;
use keel_tui::approval::change_lines;
use std::future::Future;
use std::io::Write;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Asks on the terminal; "always" is remembered for the rest of the session.
pub struct TerminalApprover {
    pub always: AlwaysAllowed,
}

impl Approver for TerminalApprover {
    fn forget_always(&self) {
        self.always.forget();
    }

    fn answers_without_asking(&self, request: &ApprovalRequest) -> bool {
        self.always.covers(request)
    }

    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            if self.always.covers(request) {
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
            if keel_tui::approval::is_plan(request) {
                return plan_answer(&answer);
            }
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Approval::Allow,
                "a" | "always" if !request.unconfined => {
                    match self.always.remember(request) {
                        Some(covered) => eprintln!(
                            "  allowed; {} allowed for the rest of this session (never saved)",
                            keel_render::visible_line(&covered)
                        ),
                        None => eprintln!(
                            "  allowed once: keel cannot read this command line in full, so \
                             it is not remembered"
                        ),
                    }
                    Approval::Allow
                }
                _ => Approval::Declined,
            }
        })
    }
}

/// What a typed answer to a plan means: `y` approve (then `ask`), `a` approve (then `auto`),
/// anything else keeps planning.
fn plan_answer(answer: &str) -> Approval {
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Approval::AllowSwitching(keel_tools::PermissionMode::Ask),
        "a" | "auto" => Approval::AllowSwitching(keel_tools::PermissionMode::Auto),
        _ => Approval::Declined,
    }
}

/// The approval prompt: the diff of a write or an edit, then the question (`keel_tui`'s, the
/// same words as the live region's).
fn approval_question(request: &ApprovalRequest) -> String {
    let diff = change_lines(request.preview.as_ref(), crate::render::terminal_width());
    let diff = keel_render::to_ansi(&diff, crate::render::stderr_colors());
    let asked = Question::new(request);
    if asked.plan.is_none() {
        // What it is about (the file's name), then its diff, then the answers.
        return asked.typed_with_change(&diff);
    }
    let mut question = diff;
    {
        // The title, the plan rendered, then the answers.
        question.push_str(&format!("{}\n", asked.title));
        let width = crate::render::terminal_width();
        let plan = asked.plan_lines(width);
        question.push_str(&keel_render::to_ansi(&plan, crate::render::stderr_colors()));
        question.push_str(keel_tui::approval::PLAN_CHOICES);
    }
    question
}

/// A question for the person, and where the answer goes.
pub(crate) type Asked = (ApprovalRequest, tokio::sync::oneshot::Sender<Approval>);

/// Sends each question to the live region; "always" is remembered for this session only.
pub(crate) struct TuiApprover {
    pub(crate) always: AlwaysAllowed,
    pub(crate) questions: tokio::sync::mpsc::UnboundedSender<Asked>,
}

impl Approver for TuiApprover {
    fn forget_always(&self) {
        self.always.forget();
    }

    fn answers_without_asking(&self, request: &ApprovalRequest) -> bool {
        self.always.covers(request)
    }

    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            if self.always.covers(request) {
                return Approval::Allow;
            }
            let (answer, answered) = tokio::sync::oneshot::channel();
            if self.questions.send((request.clone(), answer)).is_err() {
                return Approval::Declined;
            }
            answered.await.unwrap_or(Approval::Declined)
        })
    }
}
