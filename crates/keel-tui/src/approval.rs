//! What a person is shown before a call runs: the change a write or an edit makes, as a diff,
//! and the exact command, every line, with the question. The line mode and the live region
//! both build their prompt from here.
//!
//! Invariants:
//! - The subject is shown folded as on every surface (`approval_view`: blank runs counted, long
//!   lines cut with their length, nothing out of sight), each line with its control characters
//!   shown, and the head of the command with its line count next to the question.
//! - A diff longer than `LONGEST_DIFF_SHOWN` lines says how many lines were not shown.
//! - Running a command again outside the sandbox is asked as such ("UNCONFINED"), and has no
//!   "always". Elsewhere `a` says what "always" covers (`ApprovalRequest::always_label`, worded by the engine: the
//!   program and subcommand of each command for `bash`), and is not offered where nothing can
//!   be remembered (a line keel cannot read in full).
//! - A plan (`propose_plan` in plan mode) is shown as rendered markdown, and its keys say what
//!   each answer does: approve into `ask` or into `auto`, or keep planning (with a note). Its
//!   `a` is "auto", never an "always".

use keel_render::{FileDiff, Line, Span, Style, visible_line};
use keel_types::ApprovalRequest;
use keel_types::Preview;

/// The most diff lines shown at a question (the rest is counted).
pub const LONGEST_DIFF_SHOWN: usize = 400;

/// The change a write or an edit would make, as a diff with line numbers, indented by two.
pub fn change_lines(preview: Option<&Preview>, width: usize) -> Vec<Line> {
    let lines = match preview {
        None => return Vec::new(),
        Some(Preview::Unavailable(why)) => {
            return vec![Line::from_text(
                &format!("  (no diff to show: {})", visible_line(why)),
                Style::PLAIN,
            )];
        }
        Some(Preview::Change { before, after }) => {
            FileDiff::new(before.as_deref(), after).lines(width.saturating_sub(2))
        }
    };
    let mut shown: Vec<Line> = lines
        .iter()
        .take(LONGEST_DIFF_SHOWN)
        .map(|line| line.clone().prefixed(&[Span::plain("  ")]))
        .collect();
    if lines.len() > LONGEST_DIFF_SHOWN {
        shown.push(Line::from_text(
            &format!(
                "  … {} more lines of the diff not shown; say no unless you know them",
                lines.len() - LONGEST_DIFF_SHOWN
            ),
            Style::PLAIN,
        ));
    }
    shown
}

/// The question about one call, in its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// `? allow bash (3 lines):`, or the unconfined warning.
    pub title: String,
    /// The subject's lines, folded and made visible, indented by four.
    pub subject: Vec<String>,
    /// `bash: head (3 lines)`, with a warning when long lines were cut: what sits next to the
    /// keys.
    pub head: String,
    /// The tool's name, made visible.
    pub tool: String,
    /// What "always" covers, made visible; `None` where it is not offered.
    pub always: Option<String>,
    pub unconfined: bool,
    /// The plan of a `propose_plan` call (markdown), shown rendered instead of `subject`.
    pub plan: Option<String>,
    /// Why it is asked, where the subject alone does not say (keel's words, made visible).
    pub reason: Option<String>,
    /// The subject's lines as they are, made visible (not indented).
    pub lines: Vec<String>,
    /// A warning that long lines were cut.
    pub warning: Option<String>,
    /// `[tester agent, for “…”] `: a subagent's question says who asks (made visible).
    pub asked_by: Option<String>,
}

/// The typed answers to a plan, as the line mode asks them.
pub const PLAN_CHOICES: &str = "  plan — [y]es, then ask before changes / [a]uto: yes, then \
     change without asking / [n]o, keep planning / [N]o + note: ";

/// Whether `request` asks the person to approve a plan.
pub fn is_plan(request: &ApprovalRequest) -> bool {
    request.plan
}

impl Question {
    pub fn new(request: &ApprovalRequest) -> Question {
        let tool = visible_line(&request.tool).into_owned();
        let subject = if request.subject.is_empty() {
            "(no arguments)"
        } else {
            request.subject.as_str()
        };
        let view = keel_types::approval_view(subject);
        let plan = is_plan(request).then(|| request.subject.clone());
        // Why it is asked, where the subject alone does not say (keel's own words).
        let because = request
            .reason
            .as_deref()
            .map(|reason| format!(" — {}", visible_line(reason)))
            .unwrap_or_default();
        let title = match (request.unconfined, view.line_count) {
            _ if plan.is_some() => {
                "? the model proposes this plan (nothing has changed yet):".to_string()
            }
            (true, _) => format!(
                "? the command failed inside keel's sandbox, and its output suggests the sandbox \
                 refused something (the output is the command's own: keel cannot verify it). Run \
                 it again OUTSIDE the sandbox — unconfined, with your full access, running the \
                 workspace's code as the sandboxed run may have left it ({} line{}):",
                view.line_count,
                if view.line_count == 1 { "" } else { "s" }
            ),
            (false, 1) => format!("? allow {tool}{because}:"),
            (false, lines) => format!("? allow {tool} ({lines} lines){because}:"),
        };
        // A subagent's question says which agent asks, and for what (the description is the
        // model's words: escaped, cut, and quoted so it cannot pass for keel's).
        let asked_by = request.asked_by.as_ref().map(|by| {
            let description: String = by.description.chars().take(60).collect();
            format!(
                "[{} agent, for “{}”] ",
                visible_line(&by.agent),
                visible_line(&description)
            )
        });
        let title = match &asked_by {
            Some(by) => title.replacen("? ", &format!("? {by}"), 1),
            None => title,
        };
        let lines = match view.line_count {
            1 => String::new(),
            n => format!(" ({n} lines)"),
        };
        let hidden = match view.hidden_chars {
            0 => String::new(),
            n => {
                format!(" — ⚠ {n} characters of long lines not shown; say no unless you know them")
            }
        };
        Question {
            asked_by,
            reason: request
                .reason
                .as_deref()
                .map(|r| visible_line(r).into_owned()),
            lines: view
                .lines
                .iter()
                .map(|line| visible_line(line).into_owned())
                .collect(),
            warning: (view.hidden_chars > 0).then(|| {
                format!(
                    "⚠ {} characters of long lines not shown; say no unless you know them",
                    view.hidden_chars
                )
            }),
            subject: view
                .lines
                .iter()
                .map(|line| format!("    {}", visible_line(line)))
                .collect(),
            head: match &plan {
                Some(_) => format!("the plan above{lines}"),
                None => format!("{tool}: {}{lines}{hidden}", visible_line(&view.head)),
            },
            title,
            tool,
            always: request
                .always_label
                .as_deref()
                .map(|label| visible_line(label).into_owned()),
            unconfined: request.unconfined,
            plan,
        }
    }

    /// The plan rendered for a terminal `width` wide, indented by two (empty for other calls).
    pub fn plan_lines(&self, width: usize) -> Vec<Line> {
        let Some(plan) = &self.plan else {
            return Vec::new();
        };
        keel_render::markdown_lines(plan, width.saturating_sub(2))
            .into_iter()
            .map(|line| line.prefixed(&[Span::plain("  ")]))
            .collect()
    }

    /// The question as the line mode asks it (typed answer, then Enter).
    pub fn typed(&self) -> String {
        self.typed_with_change("")
    }

    /// The question as the line mode asks it, with the change (a diff, as terminal text) under
    /// the subject it changes: the file's name first.
    pub fn typed_with_change(&self, change: &str) -> String {
        let mut question = format!("{}\n", self.title);
        if self.plan.is_some() {
            question.push_str(PLAN_CHOICES);
            return question;
        }
        for line in &self.subject {
            question.push_str(line);
            question.push('\n');
        }
        question.push_str(change);
        let choices = match (&self.always, self.unconfined) {
            (_, true) => "run it UNCONFINED? [y]es / [n]o".to_string(),
            (Some(always), false) => {
                format!("[y]es / [n]o / [N]o + note / [a]lways for {always} (session)")
            }
            (None, false) => "[y]es / [n]o / [N]o + note".to_string(),
        };
        question.push_str(&format!("  {} — {choices}: ", self.head));
        question
    }

    /// What the question is about in one line: `edit_file notes.txt`, `bash cargo test`,
    /// `bash (3 lines)`, `the plan`.
    pub fn about(&self) -> String {
        if self.plan.is_some() {
            return "the plan".to_string();
        }
        match self.lines.as_slice() {
            [only] => format!("{} {only}", self.tool),
            lines => format!("{} ({} lines)", self.tool, lines.len()),
        }
    }

    /// The block the live region shows while it waits: what it is about (the file's name over
    /// its diff, or the whole command), why it asks where the subject alone does not say, the
    /// change, and the keys; at most `room` lines, the middle cut with a count and `d` offered
    /// when it does not fit (`all_lines` has everything).
    pub fn block_lines(&self, change: &[Line], width: usize, room: usize) -> Vec<Line> {
        let (head, body) = self.head_and_body(change, width);
        let keys = self.keys(width);
        let fixed = head.len() + keys.len();
        let body_room = room.saturating_sub(fixed);
        let mut lines = head;
        if body.len() <= body_room {
            lines.extend(body);
        } else {
            let shown = body_room.saturating_sub(1);
            let hidden = body.len() - shown;
            lines.extend(body.into_iter().take(shown));
            let said = Line::new(vec![
                Span::plain(&format!(
                    "  … {hidden} more line{} not shown: ",
                    if hidden == 1 { "" } else { "s" }
                )),
                Span::new("d", Style::PLAIN.bold()),
                Span::plain(" shows them all"),
            ]);
            // A narrow screen gets the short form; the key is always in it.
            let said = if said.width() <= width {
                said
            } else {
                Line::new(vec![
                    Span::plain(&format!("  … +{hidden} ")),
                    Span::new("d", Style::PLAIN.bold()),
                ])
            };
            lines.push(crate::rows::fit(said, width));
        }
        lines.extend(keys);
        lines
    }

    /// Everything `block_lines` shows, never cut (for a pager).
    pub fn all_lines(&self, change: &[Line], width: usize) -> Vec<Line> {
        let (mut lines, body) = self.head_and_body(change, width);
        lines.extend(body);
        lines
    }

    /// The block's head (what it is about, why) and its body (the subject's lines, the plan,
    /// the change).
    fn head_and_body(&self, change: &[Line], width: usize) -> (Vec<Line>, Vec<Line>) {
        let asked = Style::fg(keel_render::Color::Yellow).bold();
        let mut head = Vec::new();
        let mut body = Vec::new();
        if self.plan.is_some() || self.unconfined {
            head.extend(crate::rows::wrapped(
                self.title.trim_end_matches(':'),
                width,
                asked,
            ));
        } else {
            head.extend(crate::rows::wrapped(
                &format!(
                    "? {}{}",
                    self.asked_by.as_deref().unwrap_or(""),
                    self.about()
                ),
                width,
                asked,
            ));
        }
        if let Some(reason) = &self.reason {
            head.extend(crate::rows::wrapped(
                &format!("  asks because {reason}"),
                width,
                Style::PLAIN,
            ));
        }
        if let Some(warning) = &self.warning {
            head.extend(crate::rows::wrapped(
                &format!("  {warning}"),
                width,
                Style::fg(keel_render::Color::Yellow),
            ));
        }
        if self.plan.is_some() {
            body.extend(self.plan_lines(width));
        } else if self.lines.len() > 1 || self.unconfined {
            for line in &self.subject {
                body.extend(crate::rows::wrapped(line, width, Style::PLAIN));
            }
        }
        body.extend(change.iter().cloned());
        (head, body)
    }

    /// The keys of the live region's question (one key, no Enter), packed into lines of the
    /// width; a choice never cut (what "always" means stays said), only wrapped when a single
    /// one is wider than the screen.
    pub fn keys(&self, width: usize) -> Vec<Line> {
        let choice = |key: &str, what: &str, style: Style| {
            Line::new(vec![
                Span::new(key, Style::PLAIN.bold()),
                Span::new(what, style),
            ])
        };
        let mut choices = if self.plan.is_some() {
            vec![
                choice("y", " approve, then ask before changes", Style::PLAIN),
                choice("a", " approve, then auto", Style::PLAIN),
                choice("n", "/", Style::PLAIN),
                choice("N", " keep planning + note", Style::PLAIN),
            ]
        } else {
            vec![
                choice("y", " yes", Style::PLAIN),
                choice("n", "/", Style::PLAIN),
                choice("N", " no + note", Style::PLAIN),
            ]
        };
        let deny = if self.plan.is_some() { 2 } else { 1 };
        // `n/Esc no` as one choice.
        choices[deny].push(Span::new("Esc", Style::PLAIN.bold()));
        choices[deny].push(Span::plain(if self.plan.is_some() {
            " keep planning"
        } else {
            " no"
        }));
        if self.unconfined {
            choices[2] = Line::new(vec![Span::new(
                "runs UNCONFINED",
                Style::fg(keel_render::Color::Red),
            )]);
        } else if let (None, Some(always)) = (&self.plan, &self.always) {
            choices.push(choice(
                "a",
                &format!(" always for {always} (this session, never saved)"),
                Style::PLAIN,
            ));
        }
        let mut lines: Vec<Line> = Vec::new();
        for choice in choices {
            match lines.last_mut() {
                Some(line) if line.width() + 3 + choice.width() <= width => {
                    line.push(Span::plain(" · "));
                    line.spans.extend(choice.spans);
                }
                _ if choice.width() <= width => lines.push(choice),
                _ => lines.extend(crate::rows::wrapped(&choice.plain(), width, Style::PLAIN)),
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The question for a `bash` call of `subject`, "always" worded as the engine words it.
    fn question(subject: &str, always: &str) -> String {
        Question::new(&ApprovalRequest {
            call_id: "call_1".into(),
            tool: "bash".into(),
            subject: subject.into(),
            arguments: String::new(),
            unconfined: false,
            plan: false,
            reason: None,
            preview: None,
            always_label: Some(always.into()),
            asked_by: None,
        })
        .typed()
    }

    #[test]
    fn an_edit_is_asked_with_its_diff_and_line_numbers() {
        let change = Preview::Change {
            before: Some(b"fn a() {}\nfn b() {}\n".to_vec()),
            after: b"fn a() {}\nfn b() { todo() }\n".to_vec(),
        };
        let shown = keel_render::to_plain(&change_lines(Some(&change), 80));
        assert_eq!(
            shown,
            "  +1 −1\n  @@ -1,2 +1,2 @@\n  1 1   fn a() {}\n  2   - fn b() {}\n    2 + fn b() { todo() }\n"
        );
        let unavailable = Preview::Unavailable("the file is 9 bytes, too large".into());
        assert_eq!(
            keel_render::to_plain(&change_lines(Some(&unavailable), 80)),
            "  (no diff to show: the file is 9 bytes, too large)\n"
        );
        let long = Preview::Change {
            before: None,
            after: "x\n".repeat(500).into_bytes(),
        };
        let lines = change_lines(Some(&long), 80);
        assert_eq!(lines.len(), LONGEST_DIFF_SHOWN + 1);
        assert!(
            lines[LONGEST_DIFF_SHOWN]
                .plain()
                .contains("more lines of the diff not shown")
        );
    }

    #[test]
    fn blank_lines_cannot_scroll_the_dangerous_line_away() {
        let hidden = format!("touch PWNED{}echo harmless", "\n".repeat(200));
        let shown = question(&hidden, "touch PWNED, echo harmless");
        assert!(
            shown.starts_with("? allow bash (201 lines):\n    touch PWNED\n"),
            "{shown}"
        );
        assert!(shown.contains("⋮ (199 blank lines)"), "{shown}");
        assert!(shown.lines().count() < 6, "{shown}");
        assert!(
            shown.ends_with(
                "bash: touch PWNED (201 lines) — [y]es / [n]o / [N]o + note / [a]lways for \
                 touch PWNED, echo harmless (session): "
            ),
            "{shown}"
        );
    }

    #[test]
    fn a_read_outside_the_workspace_says_so_in_the_question() {
        let question = Question::new(&ApprovalRequest {
            call_id: "call_1".into(),
            tool: "read_file".into(),
            subject: "/etc/hosts".into(),
            arguments: String::new(),
            unconfined: false,
            plan: false,
            reason: Some("it reads outside the workspace".into()),
            preview: None,
            always_label: None,
            asked_by: None,
        });
        assert_eq!(
            question.title,
            "? allow read_file — it reads outside the workspace:"
        );
    }

    #[test]
    fn a_subagents_question_says_which_agent_asks_and_for_what() {
        let question = Question::new(&ApprovalRequest {
            call_id: "call_1".into(),
            tool: "bash".into(),
            subject: "cargo test".into(),
            arguments: String::new(),
            unconfined: false,
            plan: false,
            reason: None,
            preview: None,
            always_label: None,
            asked_by: Some(keel_types::AskedBy {
                session_id: "c1".into(),
                agent: "tester".into(),
                description: "run the tests\x1b[2J".into(),
            }),
        });
        assert_eq!(
            question.title,
            "? [tester agent, for “run the tests␛[2J”] allow bash:"
        );
        // The live region's question says it too.
        let drawn = keel_render::to_plain(&question.block_lines(&[], 80, 10));
        assert!(
            drawn.starts_with("? [tester agent, for “run the tests␛[2J”] bash cargo test"),
            "{drawn}"
        );
    }

    #[test]
    fn one_line_commands_are_shown_whole_and_visible() {
        assert_eq!(
            question("rm -rf x\r", "rm -rf 'x\r'"),
            "? allow bash:\n    rm -rf x␍\n  bash: rm -rf x␍ — [y]es / [n]o / [N]o + note / \
             [a]lways for rm -rf 'x␍' (session): "
        );
    }

    #[test]
    fn a_run_of_spaces_cannot_hide_the_command_at_the_question() {
        let shown = question(
            &format!("touch PWNED;{}echo harmless", " ".repeat(9000)),
            "touch PWNED, echo harmless",
        );
        assert!(shown.len() < 300, "{shown}");
        assert!(
            shown.contains("touch PWNED;⟨9,000 spaces⟩echo harmless"),
            "{shown}"
        );
        let last = shown.lines().last().unwrap_or_default();
        assert!(
            last.contains("bash: touch PWNED;"),
            "next to the question: {last}"
        );
    }
}
