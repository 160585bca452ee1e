//! The menu of slash commands under the input: open while the input is a `/` and the first
//! word being typed, filtered as it grows, gone as soon as it no longer applies.
//!
//! Invariants:
//! - It applies only while the text starts with `/`, has no whitespace and the cursor is at its
//!   end: a prompt, a command's arguments or a second line never show it.
//! - Entries match by prefix first, then by containing what is typed; each keeps its order
//!   within those two groups (the built-in list's order, then custom commands by name).
//! - Descriptions are files' text for custom commands: they are escaped and cut to one row,
//!   so nothing in them reaches the terminal as a sequence or wraps the menu.
//! - Esc closes it for the text typed; typing changes the text and opens it again.

use crate::rows::fit;
use keel_render::{Color, Line, Span, Style};

/// The most entries shown at once.
pub const MENU_ROWS: usize = 8;

/// One command in the menu.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MenuEntry {
    /// With its slash: `/status`.
    pub name: String,
    /// What follows the name in its usage (`[PROVIDER/ID]`), empty when it takes nothing.
    pub arguments: String,
    pub about: String,
}

impl MenuEntry {
    /// An entry from a usage line (`/model [PROVIDER/ID]`) and its description.
    pub fn from_usage(usage: &str, about: &str) -> MenuEntry {
        let (name, arguments) = usage.split_once(' ').unwrap_or((usage, ""));
        MenuEntry {
            name: name.to_string(),
            arguments: arguments.to_string(),
            about: about.to_string(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct SlashMenu {
    entries: Vec<MenuEntry>,
    selected: usize,
    /// The text the menu was closed for with Esc.
    closed_for: Option<String>,
    /// The text the selection was made for (a new text starts at the first entry again).
    selected_for: String,
}

impl SlashMenu {
    pub fn new(entries: Vec<MenuEntry>) -> SlashMenu {
        SlashMenu {
            entries,
            ..SlashMenu::default()
        }
    }

    /// The entries that match `text` (the input), when the menu applies to it.
    pub fn matches(&self, text: &str, cursor_at_end: bool) -> Option<Vec<&MenuEntry>> {
        if !text.starts_with('/')
            || text.chars().any(char::is_whitespace)
            || !cursor_at_end
            || self.closed_for.as_deref() == Some(text)
        {
            return None;
        }
        let typed = text.to_lowercase();
        let prefixed = self
            .entries
            .iter()
            .filter(|entry| entry.name.to_lowercase().starts_with(&typed));
        let containing = self.entries.iter().filter(|entry| {
            let name = entry.name.to_lowercase();
            !name.starts_with(&typed) && name.contains(&typed[1..])
        });
        let found: Vec<&MenuEntry> = prefixed.chain(containing).collect();
        (!found.is_empty()).then_some(found)
    }

    /// Whether `name` (with its slash) is one of the commands.
    pub fn knows(&self, name: &str) -> bool {
        self.entries.iter().any(|entry| entry.name == name)
    }

    /// The selected entry for `text`, when the menu is open.
    pub fn selected(&self, text: &str, cursor_at_end: bool) -> Option<&MenuEntry> {
        let found = self.matches(text, cursor_at_end)?;
        let index = if self.selected_for == text {
            self.selected
        } else {
            0
        };
        found.get(index.min(found.len() - 1)).copied()
    }

    /// Move the selection by `step` (wrapping) among what matches `text`.
    pub fn step(&mut self, text: &str, step: isize) {
        let Some(count) = self.matches(text, true).map(|found| found.len()) else {
            return;
        };
        let current = if self.selected_for == text {
            self.selected.min(count - 1)
        } else {
            0
        };
        let count = count as isize;
        self.selected = (current as isize + step).rem_euclid(count) as usize;
        self.selected_for = text.to_string();
    }

    /// Esc: closed until the text changes.
    pub fn close(&mut self, text: &str) {
        self.closed_for = Some(text.to_string());
    }

    /// The menu's rows at `width` for `text`, at most `room` of them: the selected entry
    /// marked, at most `MENU_ROWS` entries (a window that keeps the selection in view), a count
    /// of the rest and the keys. Nothing when fewer than two rows fit.
    pub fn lines(&self, text: &str, cursor_at_end: bool, width: usize, room: usize) -> Vec<Line> {
        let Some(found) = self.matches(text, cursor_at_end) else {
            return Vec::new();
        };
        let shown = MENU_ROWS.min(room.saturating_sub(1));
        if shown == 0 {
            return Vec::new();
        }
        let selected = self
            .selected(text, cursor_at_end)
            .and_then(|chosen| found.iter().position(|entry| *entry == chosen))
            .unwrap_or(0);
        let first = selected.saturating_sub(shown - 1);
        let name_width = found
            .iter()
            .map(|entry| entry.name.chars().count())
            .max()
            .unwrap_or(0)
            .min(24);
        let mut lines: Vec<Line> = found
            .iter()
            .enumerate()
            .skip(first)
            .take(shown)
            .map(|(index, entry)| {
                let chosen = index == selected;
                let name_style = if chosen {
                    Style::fg(Color::Cyan).bold()
                } else {
                    Style::fg(Color::Cyan)
                };
                let name = keel_render::visible_line(&entry.name);
                let about = keel_render::visible_line(&entry.about);
                fit(
                    Line::new(vec![
                        Span::plain(if chosen { "▸ " } else { "  " }),
                        Span::new(&format!("{name:<name_width$}"), name_style),
                        Span::new(&format!("  {about}"), Style::PLAIN.dim()),
                    ]),
                    width,
                )
            })
            .collect();
        let hidden = found.len().saturating_sub(first + shown) + first;
        let hint = if hidden > 0 {
            format!("  … {hidden} more · ↑↓ choose · Tab completes · Esc closes")
        } else {
            "  ↑↓ choose · Tab completes · Esc closes".to_string()
        };
        lines.push(fit(Line::from_text(&hint, Style::PLAIN.dim()), width));
        lines
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn menu() -> SlashMenu {
        SlashMenu::new(vec![
            MenuEntry::from_usage("/help", "this list"),
            MenuEntry::from_usage("/model [PROVIDER/ID]", "show or switch the model"),
            MenuEntry::from_usage("/status", "model, endpoint, mode"),
            MenuEntry::from_usage("/sessions", "sessions of this workspace"),
            MenuEntry::from_usage("/fix-lint", "custom \u{1b}[31mred\u{1b}[0m"),
        ])
    }

    fn names(found: Option<Vec<&MenuEntry>>) -> Vec<String> {
        found
            .unwrap_or_default()
            .iter()
            .map(|entry| entry.name.clone())
            .collect()
    }

    #[test]
    fn it_opens_on_a_slash_and_filters_by_prefix_then_by_content() {
        let menu = menu();
        assert_eq!(names(menu.matches("/", true)).len(), 5);
        assert_eq!(names(menu.matches("/s", true)), ["/status", "/sessions"]);
        assert_eq!(names(menu.matches("/st", true)), ["/status"]);
        // Containing comes after the prefixed ones.
        assert_eq!(
            names(menu.matches("/e", true)),
            ["/help", "/model", "/sessions"]
        );
        assert!(menu.matches("/zzz", true).is_none());
    }

    #[test]
    fn it_is_gone_when_no_longer_relevant() {
        let mut menu = menu();
        assert!(menu.matches("fix the /s", true).is_none());
        assert!(menu.matches("/model deepseek", true).is_none());
        assert!(menu.matches("/st", false).is_none());
        menu.close("/s");
        assert!(menu.matches("/s", true).is_none());
        assert!(menu.matches("/se", true).is_some());
    }

    #[test]
    fn the_selection_moves_wraps_and_starts_over_for_a_new_text() {
        let mut menu = menu();
        assert_eq!(menu.selected("/s", true).unwrap().name, "/status");
        menu.step("/s", 1);
        assert_eq!(menu.selected("/s", true).unwrap().name, "/sessions");
        menu.step("/s", 1);
        assert_eq!(menu.selected("/s", true).unwrap().name, "/status");
        menu.step("/s", -1);
        assert_eq!(menu.selected("/s", true).unwrap().name, "/sessions");
        assert_eq!(menu.selected("/se", true).unwrap().name, "/sessions");
        assert_eq!(menu.selected("/", true).unwrap().name, "/help");
    }

    #[test]
    fn rows_fit_the_width_and_never_carry_a_sequence() {
        let menu = menu();
        for width in [12, 40, 100] {
            for line in menu.lines("/", true, width, 20) {
                assert!(line.width() <= width, "{}", line.plain());
                assert!(!line.plain().contains('\u{1b}'), "{:?}", line.plain());
            }
        }
        let shown: Vec<String> = menu
            .lines("/st", true, 80, 20)
            .iter()
            .map(Line::plain)
            .collect();
        assert!(shown[0].starts_with("▸ /status"), "{shown:?}");
        assert!(shown[0].contains("model, endpoint, mode"), "{shown:?}");
        // Within the room given: three rows, two entries and the keys.
        let tight = menu.lines("/", true, 80, 3);
        assert_eq!(tight.len(), 3);
        assert!(tight[2].plain().contains("3 more"), "{}", tight[2].plain());
        assert!(menu.lines("/", true, 80, 1).is_empty());
    }
}
