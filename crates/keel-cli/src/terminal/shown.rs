//! What a slash command has to show, as a value: the session driver fills it, and each
//! terminal surface draws it its own way — line mode prints it on stderr, the live TUI commits
//! it to the scrollback through its view (wrapped to the width, in its colours).
//!
//! Invariants:
//! - Every text put here is already made visible (`keel_render::visible_line`) where it holds
//!   outside words (paths, model names, a provider's message); a `Line` cannot carry a control
//!   sequence anyway.
//! - Line mode prints exactly the words it printed when commands wrote to stderr themselves:
//!   one line per `say`, styled lines through `keel_render::to_ansi`.
//! - A question (a picker's list and its prompt) is not answered here: the surface asks it
//!   and hands the answer back (`Reply::Ask`).

use keel_render::{Color, Colors, Line, Style};

/// How a line of words is meant: the TUI colours it, line mode prints the words alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tone {
    Plain,
    Error,
}

impl Tone {
    /// The style the TUI draws a line of this tone in.
    pub(crate) fn style(self) -> Style {
        match self {
            Tone::Plain => Style::PLAIN,
            Tone::Error => Style::fg(Color::Red),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    /// Words, one or more lines; wrapped by the TUI.
    Words(String, Tone),
    /// Lines keel-render styled already (a diff, a transcript), sized for the terminal.
    Lines(Vec<Line>),
}

/// What to show, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Shown {
    parts: Vec<Part>,
}

impl Shown {
    pub(crate) fn new() -> Shown {
        Shown::default()
    }

    /// One line of plain words (a `\n` in it starts another line).
    pub(crate) fn say(&mut self, text: impl Into<String>) {
        self.parts.push(Part::Words(text.into(), Tone::Plain));
    }

    /// `error: WHAT`.
    pub(crate) fn error(&mut self, what: impl std::fmt::Display) {
        self.parts
            .push(Part::Words(format!("error: {what}"), Tone::Error));
    }

    /// Lines styled already.
    pub(crate) fn lines(&mut self, lines: Vec<Line>) {
        self.parts.push(Part::Lines(lines));
    }

    /// Everything `other` shows, after what this shows.
    pub(crate) fn append(&mut self, other: Shown) {
        self.parts.extend(other.parts);
    }

    /// As terminal text for line mode: each line ended by a newline.
    pub(crate) fn to_text(&self, colors: Colors) -> String {
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Words(words, _) => {
                    text.push_str(words);
                    text.push('\n');
                }
                Part::Lines(lines) => text.push_str(&keel_render::to_ansi(lines, colors)),
            }
        }
        text
    }

    /// Line mode: print it on stderr.
    pub(crate) fn print(&self, colors: Colors) {
        eprint!("{}", self.to_text(colors));
    }

    /// The parts for a view that wraps words itself: `Ok` words with their tone, `Err` lines
    /// styled already.
    pub(crate) fn parts(&self) -> impl Iterator<Item = Result<(&str, Tone), &[Line]>> {
        self.parts.iter().map(|part| match part {
            Part::Words(words, tone) => Ok((words.as_str(), *tone)),
            Part::Lines(lines) => Err(lines.as_slice()),
        })
    }
}

/// A question a command asks before it can go on: what to show first (a list to pick from),
/// the prompt, and what the answer means. The surface reads the answer (`None`: none came,
/// e.g. Ctrl-C) and calls `answered`.
pub(crate) struct Question {
    pub(crate) shown: Shown,
    pub(crate) prompt: String,
    answered: Meaning,
}

/// What a question's answer means, as a function of it.
type Meaning = Box<dyn FnOnce(Option<&str>) -> Answered + Send>;

/// What an answer leads to: another command to run, or only something to show.
pub(crate) enum Answered {
    Run(keel_agent::SurfaceCommand),
    Show(Shown),
}

impl Question {
    pub(crate) fn new(
        shown: Shown,
        prompt: String,
        answered: impl FnOnce(Option<&str>) -> Answered + Send + 'static,
    ) -> Question {
        Question {
            shown,
            prompt,
            answered: Box::new(answered),
        }
    }

    pub(crate) fn answer(self, answer: Option<&str>) -> Answered {
        (self.answered)(answer)
    }

    /// Ask it on the terminal: what it shows and its prompt on stderr, the answer read key by
    /// key up to its Enter (the caller has the keys raw and nothing else drawing).
    pub(crate) fn ask_on_terminal(self, colors: Colors) -> Answered {
        self.shown.print(colors);
        eprint!("{}", self.prompt);
        let answer = crate::terminal::answer_line::read_answer_line();
        self.answer(answer.as_deref())
    }
}

/// What running a slash command returns to the surface.
pub(crate) enum Reply {
    /// Done: what to show, and how keel ends if it should.
    Done(Shown, Option<crate::Outcome>),
    /// What to show, then a turn to run (`/plan PROMPT`).
    Turn(Shown, keel_agent::Input),
    /// A question to ask first (what was shown before it comes with it).
    Ask(Question),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_mode_text_is_each_line_then_the_styled_lines() {
        let mut shown = Shown::new();
        shown.say("model: a/b");
        shown.error("cannot read it");
        shown.lines(vec![Line::new(vec![keel_render::Span::plain("+ added")])]);
        shown.say("two\nlines");
        assert_eq!(
            shown.to_text(Colors::None),
            "model: a/b\nerror: cannot read it\n+ added\ntwo\nlines\n"
        );
    }

    #[test]
    fn a_question_hands_its_answer_to_what_it_means() {
        let question = Question::new(Shown::new(), "pick: ".into(), |answer| match answer {
            Some("1") => Answered::Run(keel_agent::SurfaceCommand::Help),
            _ => {
                let mut shown = Shown::new();
                shown.say("kept");
                Answered::Show(shown)
            }
        });
        assert!(matches!(
            question.answer(Some("1")),
            Answered::Run(keel_agent::SurfaceCommand::Help)
        ));
    }
}
