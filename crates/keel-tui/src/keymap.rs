//! Which key does what, by what the live region is showing.
//!
//! Invariants (the decisions of the terminal issue):
//! - At an approval one key answers, no Enter: `y` allows, `n` or `Esc` denies, `N` asks for
//!   a note and denies with it, `a` allows for the rest of the session (not for an unconfined
//!   run). Every other key is ignored there, so a stray keystroke never answers.
//! - `Esc` while typing clears the input on the second press; while a turn runs it stops the
//!   turn. Ctrl-C stops a running turn, clears a typed line, and on an empty prompt quits on
//!   the second press; Ctrl-D on an empty prompt quits.
//! - Enter sends; Alt+Enter, Shift+Enter (where the terminal reports it) and Ctrl-J insert a
//!   newline.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What the live region is asking for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    /// The input (a turn may be running: typing then queues the next prompt).
    Input,
    /// An approval waits for one key.
    Approval,
    /// The note for a denial is being typed.
    Note,
    /// Ctrl-R: the history is searched for what is typed.
    Search,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Insert(char),
    Newline,
    Submit,
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    Up,
    Down,
    KillToStart,
    Complete,
    /// Esc at the input: clears it on the second press.
    Escape,
    /// Ctrl-C: stop the turn, clear the input, or (twice, empty) quit.
    Interrupt,
    /// Ctrl-D on an empty input.
    Quit,
    Allow,
    Deny,
    DenyWithNote,
    Always,
    /// `d` at an approval: everything it is about, in the pager.
    ShowAll,
    Transcript,
    /// Ctrl-R: start searching the history, or find the next older match.
    HistorySearch,
    CycleMode,
    ExternalEditor,
    Ignore,
}

/// What `key` does when the region shows `focus`.
pub fn action(key: &KeyEvent, focus: Focus, input_empty: bool, unconfined: bool) -> Action {
    if key.kind == KeyEventKind::Release {
        return Action::Ignore;
    }
    let control = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    if control && key.code == KeyCode::Char('c') {
        return if focus == Focus::Approval {
            Action::Deny
        } else {
            Action::Interrupt
        };
    }
    if focus == Focus::Approval {
        return match key.code {
            KeyCode::Char('y') if !control && !alt => Action::Allow,
            KeyCode::Char('n') if !control && !alt => Action::Deny,
            KeyCode::Esc => Action::Deny,
            KeyCode::Char('N') if !control && !alt => Action::DenyWithNote,
            KeyCode::Char('a') if !control && !alt && !unconfined => Action::Always,
            KeyCode::Char('d') if !control && !alt => Action::ShowAll,
            KeyCode::Char('t') if control => Action::Transcript,
            _ => Action::Ignore,
        };
    }
    if focus == Focus::Search {
        return match key.code {
            KeyCode::Char('r') if control => Action::HistorySearch,
            KeyCode::Char('g') if control => Action::Escape,
            KeyCode::Char(c) if !control && !alt => Action::Insert(c),
            KeyCode::Backspace => Action::Backspace,
            KeyCode::Enter => Action::Submit,
            KeyCode::Esc => Action::Escape,
            _ => Action::Ignore,
        };
    }
    match key.code {
        KeyCode::Char('r') if control && focus == Focus::Input => Action::HistorySearch,
        KeyCode::Enter if alt || shift || control => Action::Newline,
        KeyCode::Enter => Action::Submit,
        KeyCode::Char('j') if control => Action::Newline,
        KeyCode::Char('d') if control && input_empty && focus == Focus::Input => Action::Quit,
        KeyCode::Char('d') if control => Action::Delete,
        KeyCode::Char('t') if control => Action::Transcript,
        KeyCode::Char('g') if control && focus == Focus::Input => Action::ExternalEditor,
        KeyCode::Char('a') if control => Action::Home,
        KeyCode::Char('e') if control => Action::End,
        KeyCode::Char('u') if control => Action::KillToStart,
        KeyCode::Char(_) if control || alt => Action::Ignore,
        KeyCode::Char(c) => Action::Insert(c),
        KeyCode::Tab if focus == Focus::Input => Action::Complete,
        KeyCode::BackTab if focus == Focus::Input => Action::CycleMode,
        KeyCode::Backspace => Action::Backspace,
        KeyCode::Delete => Action::Delete,
        KeyCode::Left => Action::Left,
        KeyCode::Right => Action::Right,
        KeyCode::Home => Action::Home,
        KeyCode::End => Action::End,
        KeyCode::Up => Action::Up,
        KeyCode::Down => Action::Down,
        KeyCode::Esc => Action::Escape,
        _ => Action::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn an_approval_takes_one_key_and_ignores_the_rest() {
        let at = |code, modifiers| action(&key(code, modifiers), Focus::Approval, true, false);
        assert_eq!(at(KeyCode::Char('y'), KeyModifiers::NONE), Action::Allow);
        assert_eq!(at(KeyCode::Char('n'), KeyModifiers::NONE), Action::Deny);
        assert_eq!(at(KeyCode::Esc, KeyModifiers::NONE), Action::Deny);
        assert_eq!(
            at(KeyCode::Char('N'), KeyModifiers::SHIFT),
            Action::DenyWithNote
        );
        assert_eq!(at(KeyCode::Char('a'), KeyModifiers::NONE), Action::Always);
        assert_eq!(at(KeyCode::Enter, KeyModifiers::NONE), Action::Ignore);
        assert_eq!(at(KeyCode::Char('Y'), KeyModifiers::SHIFT), Action::Ignore);
        assert_eq!(at(KeyCode::Char('c'), KeyModifiers::CONTROL), Action::Deny);
        // No "always" for a run outside the sandbox.
        assert_eq!(
            action(
                &key(KeyCode::Char('a'), KeyModifiers::NONE),
                Focus::Approval,
                true,
                true
            ),
            Action::Ignore
        );
    }

    #[test]
    fn enter_sends_and_its_modified_forms_insert_a_newline() {
        let at = |code, modifiers| action(&key(code, modifiers), Focus::Input, false, false);
        assert_eq!(at(KeyCode::Enter, KeyModifiers::NONE), Action::Submit);
        assert_eq!(at(KeyCode::Enter, KeyModifiers::ALT), Action::Newline);
        assert_eq!(at(KeyCode::Enter, KeyModifiers::SHIFT), Action::Newline);
        assert_eq!(
            at(KeyCode::Char('j'), KeyModifiers::CONTROL),
            Action::Newline
        );
        assert_eq!(at(KeyCode::BackTab, KeyModifiers::SHIFT), Action::CycleMode);
        assert_eq!(
            at(KeyCode::Char('t'), KeyModifiers::CONTROL),
            Action::Transcript
        );
        assert_eq!(
            at(KeyCode::Char('d'), KeyModifiers::CONTROL),
            Action::Delete
        );
        assert_eq!(
            action(
                &key(KeyCode::Char('d'), KeyModifiers::CONTROL),
                Focus::Input,
                true,
                false
            ),
            Action::Quit
        );
        assert_eq!(
            at(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Interrupt
        );
        assert_eq!(at(KeyCode::Esc, KeyModifiers::NONE), Action::Escape);
        assert_eq!(
            at(KeyCode::Char('r'), KeyModifiers::CONTROL),
            Action::HistorySearch
        );
        let searching = |code, modifiers| action(&key(code, modifiers), Focus::Search, true, false);
        assert_eq!(
            searching(KeyCode::Char('r'), KeyModifiers::CONTROL),
            Action::HistorySearch
        );
        assert_eq!(
            searching(KeyCode::Char('x'), KeyModifiers::NONE),
            Action::Insert('x')
        );
        assert_eq!(
            searching(KeyCode::Enter, KeyModifiers::NONE),
            Action::Submit
        );
        assert_eq!(searching(KeyCode::Esc, KeyModifiers::NONE), Action::Escape);
        assert_eq!(searching(KeyCode::Tab, KeyModifiers::NONE), Action::Ignore);
    }
}
