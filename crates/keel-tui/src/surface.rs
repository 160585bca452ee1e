//! The live region on a real terminal: drawn inline below the terminal's own scrollback, with
//! finished lines written above it so that they scroll away natively.
//!
//! ratatui's `Viewport::Inline` keeps the height it was created with; the live region grows
//! and shrinks with what it shows (an approval, a multi-line input, running tools), so this
//! places the region itself and lets ratatui's buffers and crossterm backend do the drawing
//! (a diff of cells against what is on screen: no flicker, no full repaint per frame).
//!
//! Invariants:
//! - The region occupies the rows `top .. top + height`, all on screen; lines committed to the
//!   scrollback are written from `top` down (scrolling the screen when they reach its foot) and
//!   the region is drawn again below them.
//! - Every frame is written inside a synchronized update, so a terminal that supports it shows
//!   it at once.
//! - A frame (and the lines committed with it) reaches the writer in one write, when it is
//!   flushed: another thread writing to the same terminal (the key reader's queries) can only
//!   land between two frames, never inside an escape sequence.
//! - Only `keel_render` lines and ratatui cells are written: the text in them was made visible
//!   before, so the only escape sequences are the backend's and this module's own.

use crate::view::Frame;
use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::queue;
use crossterm::terminal::{BeginSynchronizedUpdate, Clear, ClearType, EndSynchronizedUpdate};
use keel_render::{Colors, Line, line_to_ansi};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use std::io::Write;

/// `line` as ratatui text, styled unless `colors` says none.
pub fn ratatui_line(line: &Line, colors: Colors) -> ratatui::text::Line<'static> {
    use ratatui::style::{Color as C, Modifier, Style as S};
    let spans: Vec<ratatui::text::Span<'static>> = line
        .spans
        .iter()
        .map(|span| {
            let mut style = S::default();
            if colors != Colors::None {
                let s = span.style;
                if let Some(color) = s.fg {
                    style = style.fg(match color {
                        keel_render::Color::Red => C::Red,
                        keel_render::Color::Green => C::Green,
                        keel_render::Color::Yellow => C::Yellow,
                        keel_render::Color::Blue => C::Blue,
                        keel_render::Color::Magenta => C::Magenta,
                        keel_render::Color::Cyan => C::Cyan,
                        keel_render::Color::Gray => C::DarkGray,
                    });
                }
                for (on, modifier) in [
                    (s.bold, Modifier::BOLD),
                    (s.dim, Modifier::DIM),
                    (s.italic, Modifier::ITALIC),
                    (s.underline, Modifier::UNDERLINED),
                    (s.crossed, Modifier::CROSSED_OUT),
                ] {
                    if on {
                        style = style.add_modifier(modifier);
                    }
                }
            }
            ratatui::text::Span::styled(span.text().to_string(), style)
        })
        .collect();
    ratatui::text::Line::from(spans)
}

/// `frame` drawn into a buffer covering `area`.
pub fn frame_buffer(frame: &Frame, area: Rect, colors: Colors) -> Buffer {
    let mut buffer = Buffer::empty(area);
    for (row, line) in frame
        .lines
        .iter()
        .enumerate()
        .take(usize::from(area.height))
    {
        let y = area.y + u16::try_from(row).unwrap_or(u16::MAX);
        buffer.set_line(area.x, y, &ratatui_line(line, colors), area.width);
    }
    buffer
}

/// Columns of row `y` of `buffer` up to its last visible character.
fn text_width(buffer: &Buffer, y: u16, width: u16) -> usize {
    (0..width.min(buffer.area.width))
        .rev()
        .find(|&x| {
            buffer
                .cell((buffer.area.x + x, y))
                .is_some_and(|cell| !cell.symbol().trim().is_empty())
        })
        .map_or(0, |x| usize::from(x) + 1)
}

pub struct InlineSurface<W: Write> {
    /// Buffered, so that each frame is handed over whole (see the invariants).
    backend: CrosstermBackend<std::io::BufWriter<W>>,
    width: u16,
    rows: u16,
    top: u16,
    /// What is on screen in the region, when it is known.
    shown: Option<Buffer>,
    /// The region's row the cursor was left on (the input's, or the region's first when the
    /// cursor is hidden), to find the region again after the terminal reflowed it.
    cursor_row: u16,
    colors: Colors,
}

/// Room for the largest frame with its commits (a full screen of styled cells is far less).
const FRAME_BUFFER: usize = 1 << 20;

impl<W: Write> InlineSurface<W> {
    /// A surface whose region starts at `cursor_row` on a screen of `size` (columns, rows).
    pub fn new(writer: W, size: (u16, u16), cursor_row: u16, colors: Colors) -> Self {
        InlineSurface {
            backend: CrosstermBackend::new(std::io::BufWriter::with_capacity(FRAME_BUFFER, writer)),
            width: size.0.max(1),
            rows: size.1.max(1),
            top: cursor_row.min(size.1.saturating_sub(1)),
            shown: None,
            cursor_row: 0,
            colors,
        }
    }

    pub fn size(&self) -> (u16, u16) {
        (self.width, self.rows)
    }

    /// The terminal changed size (and reflowed what it shows): the region is found again from
    /// where the terminal now says the cursor is (`cursor_now`, when it could be asked), given
    /// that each row of the region above the cursor takes as many rows at the new width as its
    /// text needs, and drawn again in full from there.
    pub fn resize(&mut self, size: (u16, u16), cursor_now: Option<u16>) {
        let old_width = self.width;
        self.width = size.0.max(1);
        self.rows = size.1.max(1);
        let height = self.shown.as_ref().map_or(1, |shown| shown.area.height);
        let top = match (cursor_now, &self.shown) {
            (Some(row), Some(shown)) => {
                let above: u16 = (0..self.cursor_row.min(shown.area.height))
                    .map(|offset| {
                        let used = text_width(shown, shown.area.y + offset, old_width);
                        u16::try_from(used.div_ceil(usize::from(self.width)).max(1))
                            .unwrap_or(u16::MAX)
                    })
                    .fold(0u16, u16::saturating_add);
                row.saturating_sub(above)
            }
            _ => self.top,
        };
        self.top = top.min(self.rows.saturating_sub(height));
        self.shown = None;
    }

    /// Write `commits` into the scrollback, then show `frame` in the region.
    pub fn draw(&mut self, commits: &[Line], frame: &Frame) -> std::io::Result<()> {
        let writer = &mut self.backend;
        queue!(writer, BeginSynchronizedUpdate)?;
        if !commits.is_empty() {
            queue!(
                writer,
                MoveTo(0, self.top),
                Clear(ClearType::FromCursorDown)
            )?;
            let mut row = self.top;
            for line in commits {
                write!(writer, "{}\r\n", line_to_ansi(line, self.colors))?;
                row = (row + 1).min(self.rows - 1);
            }
            self.top = row;
            self.shown = None;
        }
        let height = u16::try_from(frame.lines.len())
            .unwrap_or(u16::MAX)
            .clamp(1, self.rows);
        if self.top + height > self.rows {
            let scroll = self.top + height - self.rows;
            queue!(writer, MoveTo(0, self.rows - 1))?;
            for _ in 0..scroll {
                writer.write_all(b"\n")?;
            }
            self.top -= scroll;
            self.shown = None;
        }
        let area = Rect::new(0, self.top, self.width, height);
        if self.shown.as_ref().is_some_and(|shown| shown.area != area) {
            self.shown = None;
        }
        let writer = &mut self.backend;
        let blank = if self.shown.is_none() {
            queue!(
                writer,
                MoveTo(0, self.top),
                Clear(ClearType::FromCursorDown)
            )?;
            Some(Buffer::empty(area))
        } else {
            None
        };
        let next = frame_buffer(frame, area, self.colors);
        let before = self.shown.as_ref().or(blank.as_ref());
        if let Some(before) = before {
            self.backend.draw(before.diff(&next).into_iter())?;
        }
        let writer = &mut self.backend;
        match frame.cursor {
            Some((column, row)) if row < height => {
                self.cursor_row = row;
                queue!(
                    writer,
                    MoveTo(column.min(self.width - 1), self.top + row),
                    Show
                )?
            }
            _ => {
                // Parked at the region's first row: where a resize looks for it.
                self.cursor_row = 0;
                queue!(writer, MoveTo(0, self.top), Hide)?
            }
        }
        queue!(writer, EndSynchronizedUpdate)?;
        self.shown = Some(next);
        Backend::flush(&mut self.backend)
    }

    /// Leave the terminal as a shell expects it: the region cleared, the cursor at its top.
    pub fn finish(&mut self) -> std::io::Result<()> {
        let writer = &mut self.backend;
        queue!(
            writer,
            MoveTo(0, self.top),
            Clear(ClearType::FromCursorDown),
            Show
        )?;
        self.shown = None;
        Backend::flush(&mut self.backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.borrow_mut())).unwrap_or_default()
        }
    }

    fn frame(lines: &[&str]) -> Frame {
        Frame {
            lines: lines
                .iter()
                .map(|text| Line::from_text(text, keel_render::Style::PLAIN))
                .collect(),
            cursor: Some((2, 0)),
        }
    }

    #[test]
    fn a_frame_drawn_again_writes_only_what_changed_and_commits_go_above() {
        let out = Shared::default();
        let mut surface = InlineSurface::new(out.clone(), (20, 10), 3, Colors::None);
        surface
            .draw(&[], &frame(&["› hello", "status"]))
            .unwrap_or_default();
        let first = out.take();
        assert!(
            first.contains("hello") && first.contains("status"),
            "{first:?}"
        );
        // The same frame again: no text is written.
        surface
            .draw(&[], &frame(&["› hello", "status"]))
            .unwrap_or_default();
        let again = out.take();
        assert!(
            !again.contains("hello") && !again.contains("status"),
            "{again:?}"
        );
        // One changed cell: only it.
        surface
            .draw(&[], &frame(&["› hellp", "status"]))
            .unwrap_or_default();
        let changed = out.take();
        assert!(
            changed.contains('p') && !changed.contains("hell"),
            "{changed:?}"
        );
        // A commit is written from the region's top, then the region again below it.
        let committed = Line::from_text("answer", keel_render::Style::PLAIN);
        surface
            .draw(&[committed], &frame(&["› hellp", "status"]))
            .unwrap_or_default();
        let written = out.take();
        let answer = written.find("answer\r\n").unwrap_or(usize::MAX);
        let region = written.find("status").unwrap_or(0);
        assert!(answer < region, "{written:?}");
        assert_eq!(surface.top, 4);
    }

    /// A writer that counts the writes it is handed.
    #[derive(Clone, Default)]
    struct Counted(Rc<RefCell<(usize, Vec<u8>)>>);

    impl Write for Counted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut seen = self.0.borrow_mut();
            seen.0 += 1;
            seen.1.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_and_its_commits_reach_the_terminal_in_one_write() {
        let out = Counted::default();
        let mut surface = InlineSurface::new(out.clone(), (40, 10), 3, Colors::Ansi);
        let commits: Vec<Line> = (0..30)
            .map(|n| Line::from_text(&format!("committed {n}"), keel_render::Style::PLAIN.dim()))
            .collect();
        surface
            .draw(&commits, &frame(&["› hello", "status · ask"]))
            .unwrap_or_default();
        let (writes, bytes) = out.0.borrow().clone();
        assert_eq!(writes, 1, "{}", String::from_utf8_lossy(&bytes));
        assert!(String::from_utf8_lossy(&bytes).contains("committed 29"));
    }

    #[test]
    fn the_region_never_leaves_the_screen() {
        let out = Shared::default();
        let mut surface = InlineSurface::new(out.clone(), (20, 5), 4, Colors::None);
        surface
            .draw(&[], &frame(&["a", "b", "c"]))
            .unwrap_or_default();
        // Three rows from row 4 of 5: the screen scrolled by two.
        assert_eq!(surface.top, 2);
        let lines: Vec<Line> = (0..8)
            .map(|n| Line::from_text(&format!("line {n}"), keel_render::Style::PLAIN))
            .collect();
        surface
            .draw(&lines, &frame(&["a", "b", "c"]))
            .unwrap_or_default();
        assert_eq!(surface.top, 2);
        // After a shrink the region is drawn again in full, still on screen.
        surface.resize((10, 3), None);
        assert_eq!(surface.top, 0);
        out.take();
        surface
            .draw(&[], &frame(&["a", "b", "c"]))
            .unwrap_or_default();
        assert!(out.take().contains('a'));
        // Found again from the cursor: it was parked on the region's first row.
        surface.resize((10, 3), Some(1));
        assert_eq!(surface.top, 0);
    }
}
