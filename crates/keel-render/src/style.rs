//! Styled lines: what the renderer produces for a terminal, and how they become bytes.
//!
//! Invariants:
//! - A `Span`'s text holds no control character, newline or tab (`Span::new` shows them
//!   visibly), so a line's width is the sum of its spans' display widths.
//! - `to_ansi` emits only the SGR sequences it chooses itself (`ESC [ … m`), then the text; with
//!   `Colors::None` nothing but the text and newlines.

use crate::text::visible_span;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The columns `c` adds after `previous`: a variation selector can widen the character
/// before it (`❤` is one column, `❤️` two), so pairs are measured together.
pub(crate) fn added_width(previous: Option<char>, c: char) -> usize {
    let Some(previous) = previous else {
        return c.width().unwrap_or(0);
    };
    let mut buffer = [0u8; 8];
    let first = previous.encode_utf8(&mut buffer).len();
    let second = c.encode_utf8(&mut buffer[first..]).len();
    let pair = std::str::from_utf8(&buffer[..first + second]).unwrap_or("");
    pair.width().saturating_sub(previous.width().unwrap_or(0))
}

/// The columns `text` takes, measured as the wrapper measures it (`added_width`).
pub(crate) fn text_width(text: &str) -> usize {
    let mut previous = None;
    let mut width = 0;
    for c in text.chars() {
        width += added_width(previous, c);
        previous = Some(c);
    }
    width
}

/// A colour: one of the terminal's own (so the user's theme decides what it looks like, on a
/// dark or a light background alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Color {
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
    Cyan,
    Gray,
}

/// How a span looks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Style {
    pub fg: Option<Color>,
    pub bold: bool,
    pub dim: bool,
    pub italic: bool,
    pub underline: bool,
    pub crossed: bool,
}

impl Style {
    pub const PLAIN: Style = Style {
        fg: None,
        bold: false,
        dim: false,
        italic: false,
        underline: false,
        crossed: false,
    };

    pub fn fg(color: Color) -> Style {
        Style {
            fg: Some(color),
            ..Style::PLAIN
        }
    }

    pub fn with_fg(self, color: Color) -> Style {
        Style {
            fg: Some(color),
            ..self
        }
    }

    pub fn bold(self) -> Style {
        Style { bold: true, ..self }
    }

    pub fn dim(self) -> Style {
        Style { dim: true, ..self }
    }

    pub fn italic(self) -> Style {
        Style {
            italic: true,
            ..self
        }
    }

    pub fn underline(self) -> Style {
        Style {
            underline: true,
            ..self
        }
    }

    pub fn crossed(self) -> Style {
        Style {
            crossed: true,
            ..self
        }
    }
}

/// Text in one style, on one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    text: String,
    pub style: Style,
}

impl Span {
    /// `text` made safe for one line (see the module's invariants).
    pub fn new(text: &str, style: Style) -> Span {
        Span {
            text: visible_span(text).into_owned(),
            style,
        }
    }

    /// `text` added at the end, made safe like `new` does.
    pub fn extend(&mut self, text: &str) {
        self.text.push_str(&visible_span(text));
    }

    pub fn plain(text: &str) -> Span {
        Span::new(text, Style::PLAIN)
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn width(&self) -> usize {
        text_width(&self.text)
    }
}

/// One line on screen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    pub spans: Vec<Span>,
}

impl Line {
    pub fn new(spans: Vec<Span>) -> Line {
        Line { spans }
    }

    pub fn from_text(text: &str, style: Style) -> Line {
        Line {
            spans: vec![Span::new(text, style)],
        }
    }

    pub fn empty() -> Line {
        Line::default()
    }

    pub fn width(&self) -> usize {
        self.spans.iter().map(Span::width).sum()
    }

    /// The line's text without styles.
    pub fn plain(&self) -> String {
        self.spans.iter().map(Span::text).collect()
    }

    pub fn push(&mut self, span: Span) {
        if !span.text.is_empty() {
            self.spans.push(span);
        }
    }

    /// This line after `prefix`.
    pub fn prefixed(mut self, prefix: &[Span]) -> Line {
        let mut spans = prefix.to_vec();
        spans.append(&mut self.spans);
        Line { spans }
    }
}

/// Whether the terminal shows styles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colors {
    /// No styles at all (`NO_COLOR`, a pipe, `TERM=dumb`).
    None,
    /// Styles and the terminal's own colours.
    Ansi,
}

impl Colors {
    /// What a terminal with these settings shows: `NO_COLOR` (any non-empty value) or
    /// `TERM=dumb` mean no styles.
    pub fn from_settings(no_color: Option<&str>, term: Option<&str>) -> Colors {
        if no_color.is_some_and(|value| !value.is_empty()) || term == Some("dumb") {
            Colors::None
        } else {
            Colors::Ansi
        }
    }

    /// `from_settings` with this process's environment.
    pub fn from_env() -> Colors {
        let var = |name: &str| std::env::var(name).ok();
        Colors::from_settings(var("NO_COLOR").as_deref(), var("TERM").as_deref())
    }
}

fn color_code(color: Color) -> &'static str {
    match color {
        Color::Red => "31",
        Color::Green => "32",
        Color::Yellow => "33",
        Color::Blue => "34",
        Color::Magenta => "35",
        Color::Cyan => "36",
        Color::Gray => "90",
    }
}

/// The SGR sequence for `style`, or nothing for the plain style.
fn sgr(style: Style) -> String {
    let mut codes: Vec<&str> = Vec::new();
    if style.bold {
        codes.push("1");
    }
    if style.dim {
        codes.push("2");
    }
    if style.italic {
        codes.push("3");
    }
    if style.underline {
        codes.push("4");
    }
    if style.crossed {
        codes.push("9");
    }
    if let Some(color) = style.fg {
        codes.push(color_code(color));
    }
    if codes.is_empty() {
        String::new()
    } else {
        format!("\u{1b}[{}m", codes.join(";"))
    }
}

/// One line as terminal bytes (no newline); every style is reset at its end.
pub fn line_to_ansi(line: &Line, colors: Colors) -> String {
    let mut out = String::new();
    let mut index = 0;
    while index < line.spans.len() {
        let style = line.spans[index].style;
        // Neighbours in one style are one run.
        let run = line.spans[index..]
            .iter()
            .take_while(|span| span.style == style)
            .count();
        let styled = colors != Colors::None && style != Style::PLAIN;
        if styled {
            out.push_str(&sgr(style));
        }
        for span in &line.spans[index..index + run] {
            out.push_str(&span.text);
        }
        if styled {
            out.push_str("\u{1b}[0m");
        }
        index += run;
    }
    out
}

/// Lines as terminal bytes, each ended by a newline.
pub fn to_ansi(lines: &[Line], colors: Colors) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&line_to_ansi(line, colors));
        out.push('\n');
    }
    out
}

/// Lines as plain text, each ended by a newline.
pub fn to_plain(lines: &[Line]) -> String {
    to_ansi(lines, Colors::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_cannot_carry_a_control_sequence() {
        let span = Span::plain("a\u{1b}[2Jb\tc\nd");
        assert_eq!(span.text(), "a␛[2Jb c␊d");
        let line = Line::new(vec![span]);
        assert!(!line_to_ansi(&line, Colors::Ansi).contains('\u{1b}'));
    }

    #[test]
    fn styles_become_sgr_and_reset_and_nothing_without_colours() {
        let line = Line::new(vec![
            Span::new("bold", Style::PLAIN.bold().with_fg(Color::Cyan)),
            Span::plain(" plain"),
        ]);
        assert_eq!(
            line_to_ansi(&line, Colors::Ansi),
            "\u{1b}[1;36mbold\u{1b}[0m plain"
        );
        assert_eq!(line_to_ansi(&line, Colors::None), "bold plain");
    }

    #[test]
    fn no_color_and_dumb_terminals_get_no_styles() {
        assert_eq!(Colors::from_settings(Some("1"), None), Colors::None);
        assert_eq!(Colors::from_settings(Some(""), None), Colors::Ansi);
        assert_eq!(Colors::from_settings(None, Some("dumb")), Colors::None);
        assert_eq!(
            Colors::from_settings(None, Some("xterm-256color")),
            Colors::Ansi
        );
    }
}
