//! `keel` on a terminal: the interactive session in line mode (`line_mode`) or as the live TUI
//! (`live`, drawn by `keel_tui`), and what both need from the terminal: the approval prompt,
//! completion, answers read at a question, the raw terminal under the live region.
//!
//! Invariant: the terminal is always given back as it was found (raw mode, bracketed paste,
//! the keyboard protocol, the cursor), whatever ends the session.

pub(crate) mod answer_line;
pub(crate) mod approval_prompt;
pub(crate) mod completion;
pub(crate) mod line_mode;
pub(crate) mod live;
pub(crate) mod live_answer;
pub(crate) mod raw_terminal;
pub(crate) mod session_driver;
pub(crate) mod shown;
pub(crate) mod start_prompt;
