//! Styled text filled into lines of a width.
//!
//! Invariants:
//! - Every line is at most `width` columns wide (width counted with `unicode-width`), for any
//!   `width ≥ 1`: a word longer than the width is broken between characters; a character wider
//!   than the width gets a line of its own.
//! - A word is kept whole across style changes (`**keel**'s` is one word); runs of spaces
//!   between words become one space, as a browser shows them.
//! - Greedy fill, hand-written rather than `textwrap`: words here are runs of styled spans
//!   and the result is styled lines, which textwrap's string API does not carry.

use crate::style::{Line, Span, Style, added_width};

/// One piece of inline text in its style, or a forced line break.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Piece {
    Text(String, Style),
    Break,
}

/// A word: spans with no space between them, and the style of the space before it (so an
/// underlined link or a code span stays one run across its spaces).
#[derive(Default)]
struct Word {
    spans: Vec<Span>,
    width: usize,
    space: Style,
}

impl Word {
    fn push(&mut self, text: &str, style: Style) {
        let span = Span::new(text, style);
        self.width += span.width();
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.extend(span.text()),
            _ => self.spans.push(span),
        }
    }
}

/// Tokens of the text: words and forced breaks.
enum Token {
    Word(Word),
    Break,
}

fn tokens(pieces: &[Piece]) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word = Word::default();
    let mut space = Style::PLAIN;
    for piece in pieces {
        match piece {
            Piece::Break => {
                if !word.spans.is_empty() {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                }
                tokens.push(Token::Break);
            }
            Piece::Text(text, style) => {
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    match rest.find(char::is_whitespace) {
                        Some(0) => {
                            if !word.spans.is_empty() {
                                tokens.push(Token::Word(std::mem::take(&mut word)));
                            }
                            space = *style;
                            let skipped = rest
                                .find(|c: char| !c.is_whitespace())
                                .unwrap_or(rest.len());
                            rest = &rest[skipped..];
                        }
                        Some(at) => {
                            if word.spans.is_empty() {
                                word.space = space;
                            }
                            word.push(&rest[..at], *style);
                            rest = &rest[at..];
                        }
                        None => {
                            if word.spans.is_empty() {
                                word.space = space;
                            }
                            word.push(rest, *style);
                            rest = "";
                        }
                    }
                }
            }
        }
    }
    if !word.spans.is_empty() {
        tokens.push(Token::Word(word));
    }
    tokens
}

/// `pieces` filled into lines at most `width` wide.
pub(crate) fn wrap(pieces: &[Piece], width: usize) -> Vec<Line> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = Line::empty();
    let mut used = 0usize;
    for token in tokens(pieces) {
        let word = match token {
            Token::Break => {
                lines.push(std::mem::take(&mut line));
                used = 0;
                continue;
            }
            Token::Word(word) => word,
        };
        if used > 0 && used + 1 + word.width <= width {
            line.push(Span::new(" ", word.space));
            used += 1;
        } else if used > 0 {
            lines.push(std::mem::take(&mut line));
            used = 0;
        }
        if word.width <= width.saturating_sub(used) {
            used += word.width;
            line.spans.extend(word.spans);
            continue;
        }
        // Longer than a line: broken between characters.
        for span in word.spans {
            break_span(&span, width, &mut line, &mut used, &mut lines);
        }
    }
    if !line.spans.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Break one line of code (no wrapping at spaces: code keeps its spacing) into lines at most
/// `width` wide.
pub(crate) fn break_line(spans: Vec<Span>, width: usize) -> Vec<Line> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = Line::empty();
    let mut used = 0usize;
    for span in spans {
        break_span(&span, width, &mut line, &mut used, &mut lines);
    }
    lines.push(line);
    lines
}

/// Add `span` to `line` (`used` columns of `width` taken), starting new lines between its
/// characters where it does not fit.
fn break_span(span: &Span, width: usize, line: &mut Line, used: &mut usize, lines: &mut Vec<Line>) {
    let mut chunk = String::new();
    let mut previous = None;
    for c in span.text().chars() {
        let w = added_width(previous, c);
        if *used + w > width && *used > 0 {
            line.push(Span::new(&chunk, span.style));
            chunk.clear();
            lines.push(std::mem::take(line));
            *used = 0;
            previous = None;
        }
        chunk.push(c);
        *used += added_width(previous, c);
        previous = Some(c);
    }
    line.push(Span::new(&chunk, span.style));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line]) -> Vec<String> {
        lines.iter().map(Line::plain).collect()
    }

    fn text(s: &str) -> Piece {
        Piece::Text(s.into(), Style::PLAIN)
    }

    #[test]
    fn words_fill_greedily_and_never_pass_the_width() {
        let lines = wrap(&[text("the quick brown fox jumps over the lazy dog")], 10);
        assert_eq!(
            plain(&lines),
            ["the quick", "brown fox", "jumps over", "the lazy", "dog"]
        );
    }

    #[test]
    fn a_word_across_styles_stays_whole_and_long_words_break() {
        let bold = Style::PLAIN.bold();
        let lines = wrap(
            &[
                text("a "),
                Piece::Text("keel".into(), bold),
                text("'s abcdefghijkl"),
            ],
            6,
        );
        assert_eq!(plain(&lines), ["a", "keel's", "abcdef", "ghijkl"]);
        assert_eq!(lines[1].spans[0].style, bold);
    }

    #[test]
    fn wide_characters_count_two_columns() {
        let lines = wrap(&[text("漢字漢字漢字")], 5);
        assert!(
            lines.iter().all(|line| line.width() <= 5),
            "{:?}",
            plain(&lines)
        );
        assert_eq!(plain(&lines).concat(), "漢字漢字漢字");
    }

    #[test]
    fn a_variation_selector_widening_a_character_is_counted() {
        let hearts = "❤\u{fe0f}".repeat(40);
        let lines = break_line(vec![Span::plain(&hearts)], 40);
        assert_eq!(lines.len(), 2, "{:?}", plain(&lines));
        assert!(lines.iter().all(|line| line.width() <= 40));
    }

    #[test]
    fn breaks_are_kept_and_empty_text_is_one_empty_line() {
        assert_eq!(
            plain(&wrap(&[text("a"), Piece::Break, text("b")], 10)),
            ["a", "b"]
        );
        assert_eq!(plain(&wrap(&[], 10)), [""]);
    }
}
