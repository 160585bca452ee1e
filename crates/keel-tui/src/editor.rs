//! The multi-line input of the live region.
//!
//! Invariants:
//! - The text holds what the person typed or pasted, lines kept (`\r\n` and `\r` become `\n`),
//!   tabs kept; every other control character is dropped on the way in, so nothing typed or
//!   pasted can reach the terminal as a sequence when it is drawn.
//! - The cursor is a byte offset on a character boundary of the text.
//! - Laying out never loses a character: every row fits the width, long lines wrap.
//! - History: Up on the first row goes back, Down on the last row forward; the text being
//!   typed is kept as a draft and comes back after the newest entry.
//! - A paste of more than `FOLD_LINES` lines is one character in the text (a marker from a
//!   private-use range nothing typed or pasted can put there), drawn as `[pasted N lines]`,
//!   deleted whole, and replaced by the whole paste in what is sent (`submit`, `expanded`):
//!   what the person pasted is sent byte for byte as it was normalised on the way in.

use keel_render::{Line, Span, Style};
use unicode_width::UnicodeWidthChar;

/// Columns a tab takes in the input.
const TAB_COLUMNS: usize = 4;

/// A paste of more lines than this folds to one marker.
pub const FOLD_LINES: usize = 10;

/// The first marker of a folded paste (Supplementary Private Use Area-A); paste `i` is
/// `FIRST_MARKER + i`.
const FIRST_MARKER: u32 = 0xF_0000;
/// Markers go up to here; a character in the range is never taken in from outside.
const LAST_MARKER: u32 = 0xF_FFFD;

#[derive(Clone, Debug, Default)]
pub struct Editor {
    text: String,
    cursor: usize,
    history: Vec<String>,
    /// The history entry shown, while browsing.
    browsing: Option<usize>,
    /// What was typed before browsing started.
    draft: String,
    /// The folded pastes, by marker.
    pastes: Vec<String>,
}

/// The input laid out at a width: its rows and where the cursor is among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub rows: Vec<Line>,
    /// Column and row of the cursor.
    pub cursor: (u16, u16),
}

impl Editor {
    pub fn new(history: Vec<String>) -> Editor {
        Editor {
            history,
            ..Editor::default()
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// A history entry is shown (Up/Down), not something typed.
    pub fn is_browsing(&self) -> bool {
        self.browsing.is_some()
    }

    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// The text before the cursor.
    pub fn before_cursor(&self) -> &str {
        &self.text[..self.cursor]
    }

    /// Replace the text from byte `start` to the cursor with `with` (a completion).
    pub fn complete_with(&mut self, start: usize, with: &str) {
        let start = start.min(self.cursor);
        if !self.text.is_char_boundary(start) {
            return;
        }
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
        self.insert_str(with);
    }

    /// Replace the text, the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.text.clear();
        self.cursor = 0;
        self.insert_str(text);
        self.browsing = None;
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.pastes.clear();
        self.cursor = 0;
        self.browsing = None;
    }

    pub fn insert(&mut self, c: char) {
        if (c.is_control() && c != '\t' && c != '\n') || is_marker(c) {
            return;
        }
        self.text.insert(self.cursor, c);
        self.cursor += c.len_utf8();
    }

    /// Pasted or composed text: lines kept, other control characters dropped.
    pub fn insert_str(&mut self, text: &str) {
        let normalised = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in normalised.chars() {
            self.insert(c);
        }
    }

    /// Pasted text: folded to one marker when it has more than `FOLD_LINES` lines, else
    /// inserted as typed.
    pub fn paste(&mut self, text: &str) {
        let normalised: String = text
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .chars()
            .filter(|c| !((c.is_control() && *c != '\t' && *c != '\n') || is_marker(*c)))
            .collect();
        let marker = u32::try_from(self.pastes.len())
            .ok()
            .and_then(|index| FIRST_MARKER.checked_add(index))
            .filter(|code| *code <= LAST_MARKER)
            .and_then(char::from_u32);
        match marker {
            Some(marker) if normalised.lines().count() > FOLD_LINES => {
                self.pastes.push(normalised);
                self.text.insert(self.cursor, marker);
                self.cursor += marker.len_utf8();
            }
            _ => self.insert_str(&normalised),
        }
    }

    /// The text with every folded paste in full: what would be sent.
    pub fn expanded(&self) -> String {
        self.text
            .chars()
            .fold(String::with_capacity(self.text.len()), |mut out, c| {
                match self.paste_of(c) {
                    Some(paste) => out.push_str(paste),
                    None => out.push(c),
                }
                out
            })
    }

    /// The paste a marker stands for.
    fn paste_of(&self, c: char) -> Option<&str> {
        if !is_marker(c) {
            return None;
        }
        let index = usize::try_from(u32::from(c) - FIRST_MARKER).ok()?;
        self.pastes.get(index).map(String::as_str)
    }

    pub fn newline(&mut self) {
        self.insert('\n');
    }

    pub fn backspace(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    pub fn left(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
        }
    }

    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    /// Start of the line the cursor is on.
    pub fn home(&mut self) {
        self.cursor = self.line_start(self.cursor);
    }

    /// End of the line the cursor is on.
    pub fn end(&mut self) {
        self.cursor = self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |at| self.cursor + at);
    }

    /// Delete from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let start = self.line_start(self.cursor);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    fn line_start(&self, at: usize) -> usize {
        self.text[..at].rfind('\n').map_or(0, |i| i + 1)
    }

    /// Up a line, or back in history from the first line.
    pub fn up(&mut self) {
        let start = self.line_start(self.cursor);
        if start == 0 {
            self.history_back();
            return;
        }
        let column = self.text[start..self.cursor].chars().count();
        let previous = self.line_start(start - 1);
        self.cursor = advance(&self.text, previous, column, start - 1);
    }

    /// Down a line, or forward in history from the last line.
    pub fn down(&mut self) {
        let Some(newline) = self.text[self.cursor..].find('\n').map(|i| self.cursor + i) else {
            self.history_forward();
            return;
        };
        let column = self.text[self.line_start(self.cursor)..self.cursor]
            .chars()
            .count();
        let next = newline + 1;
        let next_end = self.text[next..]
            .find('\n')
            .map_or(self.text.len(), |i| next + i);
        self.cursor = advance(&self.text, next, column, next_end);
    }

    fn history_back(&mut self) {
        let index = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(index) => index - 1,
        };
        self.browsing = Some(index);
        self.text = self.history[index].clone();
        self.cursor = self.text.len();
    }

    fn history_forward(&mut self) {
        let Some(index) = self.browsing else {
            return;
        };
        if index + 1 < self.history.len() {
            self.browsing = Some(index + 1);
            self.text = self.history[index + 1].clone();
        } else {
            self.browsing = None;
            self.text = std::mem::take(&mut self.draft);
        }
        self.cursor = self.text.len();
    }

    /// The newest history entry older than `before` (all of them when `None`) that contains
    /// `query`, case-insensitively.
    pub fn search(&self, query: &str, before: Option<usize>) -> Option<usize> {
        let query = query.to_lowercase();
        let end = before.unwrap_or(self.history.len()).min(self.history.len());
        self.history[..end]
            .iter()
            .rposition(|entry| entry.to_lowercase().contains(&query))
    }

    /// The history entry at `index`.
    pub fn entry(&self, index: usize) -> Option<&str> {
        self.history.get(index).map(String::as_str)
    }

    /// The text, taken for sending (folded pastes in full); it joins the history (once, not
    /// twice in a row).
    pub fn submit(&mut self) -> String {
        let text = self.expanded();
        self.text.clear();
        self.pastes.clear();
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    /// The input at `width` columns after `prompt` (continuation rows indented as deep).
    pub fn layout(&self, prompt: &str, width: usize) -> Layout {
        let indent = " ".repeat(unicode_width::UnicodeWidthStr::width(prompt));
        let width = width.max(indent.len() + 2);
        let mut rows = Vec::new();
        let mut row = String::from(prompt);
        let mut used = indent.len();
        let mut cursor = None;
        for (at, c) in self.text.char_indices().chain([(self.text.len(), '\0')]) {
            if at == self.cursor && cursor.is_none() {
                if used >= width {
                    rows.push(std::mem::replace(&mut row, indent.clone()));
                    used = indent.len();
                }
                cursor = Some((used, rows.len()));
            }
            if at == self.text.len() {
                break;
            }
            if c == '\n' {
                rows.push(std::mem::replace(&mut row, indent.clone()));
                used = indent.len();
                continue;
            }
            let (shown, columns) = if c == '\t' {
                (" ".repeat(TAB_COLUMNS), TAB_COLUMNS)
            } else if let Some(paste) = self.paste_of(c) {
                let label = format!("[pasted {} lines]", paste.lines().count());
                // Never wider than a row.
                let label = crate::rows::cut(&label, width - indent.len());
                let columns = unicode_width::UnicodeWidthStr::width(label.as_str());
                (label, columns)
            } else {
                (c.to_string(), c.width().unwrap_or(0))
            };
            if used + columns > width {
                rows.push(std::mem::replace(&mut row, indent.clone()));
                used = indent.len();
            }
            row.push_str(&shown);
            used += columns;
        }
        rows.push(row);
        let (column, row_index) = cursor.unwrap_or((used, rows.len() - 1));
        Layout {
            rows: rows
                .iter()
                .map(|row| Line::new(vec![Span::new(row, Style::PLAIN)]))
                .collect(),
            cursor: (
                u16::try_from(column).unwrap_or(u16::MAX),
                u16::try_from(row_index).unwrap_or(u16::MAX),
            ),
        }
    }
}

/// Whether `c` is in the range of folded-paste markers.
fn is_marker(c: char) -> bool {
    (FIRST_MARKER..=LAST_MARKER).contains(&u32::from(c))
}

/// The offset `columns` characters after `start`, not past `limit`.
fn advance(text: &str, start: usize, columns: usize, limit: usize) -> usize {
    text[start..limit]
        .char_indices()
        .nth(columns)
        .map_or(limit, |(i, _)| start + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasted_lines_are_kept_and_control_characters_dropped() {
        let mut editor = Editor::default();
        editor.insert_str("one\r\ntwo\rthree\u{1b}[2J\tend");
        assert_eq!(editor.text(), "one\ntwo\nthree[2J\tend");
    }

    #[test]
    fn the_cursor_moves_between_lines_and_history_wraps_the_draft() {
        let mut editor = Editor::new(vec!["old one".into(), "old two".into()]);
        editor.insert_str("abc\nde");
        editor.up();
        editor.insert('X');
        assert_eq!(editor.text(), "abXc\nde");
        editor.down();
        editor.insert('Y');
        assert_eq!(editor.text(), "abXc\ndeY");
        editor.home();
        editor.up();
        editor.up();
        assert_eq!(editor.text(), "old two");
        editor.up();
        assert_eq!(editor.text(), "old one");
        editor.down();
        editor.down();
        assert_eq!(editor.text(), "abXc\ndeY");
        assert_eq!(editor.submit(), "abXc\ndeY");
        assert_eq!(
            editor.history().last().map(String::as_str),
            Some("abXc\ndeY")
        );
        assert!(editor.is_empty());
    }

    #[test]
    fn layout_wraps_and_places_the_cursor() {
        let mut editor = Editor::default();
        editor.insert_str("abcdefgh\nxy");
        let layout = editor.layout("› ", 6);
        let rows: Vec<String> = layout.rows.iter().map(Line::plain).collect();
        assert_eq!(rows, ["› abcd", "  efgh", "  xy"]);
        assert_eq!(layout.cursor, (4, 2));
        editor.home();
        assert_eq!(editor.layout("› ", 6).cursor, (2, 2));
        let mut full = Editor::default();
        full.insert_str("abcd");
        // The cursor after a full row starts the next one.
        assert_eq!(full.layout("› ", 6).cursor, (2, 1));
        for row in full.layout("› ", 6).rows {
            assert!(row.width() <= 6);
        }
    }

    #[test]
    fn history_search_finds_the_newest_match_then_older_ones() {
        let editor = Editor::new(vec![
            "cargo build".into(),
            "git status".into(),
            "Cargo test --release".into(),
        ]);
        assert_eq!(editor.search("cargo", None), Some(2));
        assert_eq!(editor.search("cargo", Some(2)), Some(0));
        assert_eq!(editor.search("cargo", Some(0)), None);
        assert_eq!(editor.search("", None), Some(2));
        assert_eq!(editor.search("nothing", None), None);
        assert_eq!(editor.entry(1), Some("git status"));
    }

    #[test]
    fn a_long_paste_folds_to_one_label_and_is_sent_whole() {
        let mut editor = Editor::default();
        let long: String = (1..=200).map(|n| format!("line {n}\r\n")).collect();
        editor.insert_str("look: ");
        editor.paste(&long);
        editor.insert_str(" thanks");
        let rows: Vec<String> = editor
            .layout("› ", 80)
            .rows
            .iter()
            .map(Line::plain)
            .collect();
        assert_eq!(rows, ["› look: [pasted 200 lines] thanks"]);
        let expected = format!("look: {} thanks", long.replace("\r\n", "\n"));
        assert_eq!(editor.expanded(), expected);
        assert_eq!(editor.submit(), expected);
        assert_eq!(editor.history().last(), Some(&expected));
        // Ten lines are not folded; a narrow screen cuts the label, never the row's width.
        let ten: String = (1..=10).map(|n| format!("{n}\n")).collect();
        editor.paste(&ten);
        assert_eq!(editor.text(), ten);
        editor.clear();
        editor.paste(&long);
        for row in editor.layout("› ", 8).rows {
            assert!(row.width() <= 8, "{}", row.plain());
        }
        // Deleted whole, with one key.
        editor.backspace();
        assert!(editor.is_empty());
        assert_eq!(editor.submit(), "");
    }

    #[test]
    fn a_marker_cannot_come_in_from_outside() {
        let mut editor = Editor::default();
        editor.paste(&(1..=20).map(|n| format!("{n}\n")).collect::<String>());
        let marker = editor.text().to_string();
        let mut other = Editor::default();
        other.insert_str(&format!("a{marker}b"));
        other.paste(&format!("c{marker}d"));
        assert_eq!(other.text(), "abcd");
        assert_eq!(other.submit(), "abcd");
    }

    #[test]
    fn backspace_and_delete_work_on_characters() {
        let mut editor = Editor::default();
        editor.insert_str("añb");
        editor.left();
        editor.backspace();
        assert_eq!(editor.text(), "ab");
        editor.delete();
        assert_eq!(editor.text(), "a");
        editor.kill_to_start();
        assert!(editor.is_empty());
    }
}
