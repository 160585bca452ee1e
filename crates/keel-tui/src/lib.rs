//! keel's interactive terminal: the live region at the foot of the screen (the attempt
//! streaming now, running tool cards, queued prompts, the approval or the multi-line input, and
//! a status line), drawn inline so that finished answers and cards go into the terminal's own
//! scrollback (native scroll, select, copy and search; no alternate screen).
//!
//! Invariants:
//! - Everything but `surface` is pure: state in, lines out, tested without a terminal.
//! - Text from the model, tools and providers reaches the screen only through `keel_render`
//!   lines (made visible), so no control sequence of theirs is written.
//! - The line mode (`--plain`, no TTY, `TERM=dumb`) builds its approval question, tool cards
//!   and notices from the same functions, so the two modes say the same things.

pub mod answer;
pub mod approval;
pub mod cards;
pub mod editor;
pub mod keymap;
pub mod notices;
pub mod resumed;
pub mod rows;
pub mod slash_menu;
pub mod status;
pub mod surface;
pub mod transcript;
pub mod view;

pub use approval::Question;
pub use editor::Editor;
pub use keymap::{Action, Focus, action};
pub use notices::{notice, usage_line};
pub use rows::wrapped;
pub use slash_menu::{MenuEntry, SlashMenu};
pub use status::Status;
pub use surface::{InlineSurface, frame_buffer, ratatui_line};
pub use transcript::transcript_lines;
pub use view::{Frame, LiveView};
