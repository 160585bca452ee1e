//! The live region drawn from the view's state: the attempt streaming now, running cards,
//! queued prompts, the approval or the input (with the slash menu, Tab's candidates or the
//! chips), a notice and the status line.
//!
//! Invariant: the frame never has more lines than the screen has rows, and every line fits the
//! width; what does not fit goes from the top (the answer's tail first), the foot stays.

use super::*;

impl LiveView {
    /// What the region shows at `now`.
    pub fn frame(&mut self, now: Instant) -> Frame {
        let width = self.width;
        let mut foot: Vec<Line> = Vec::new();
        let mut cursor = None;
        foot.push(Line::from_text(&"─".repeat(width), Style::PLAIN.dim()));
        let block_room = self.rows.saturating_sub(3).max(4);
        if let Some((preview, made_for, lines)) = &mut self.asked_change
            && *made_for != width
        {
            *lines = change_lines(Some(&*preview), width);
            *made_for = width;
        }
        match (&self.approval, &self.note) {
            (Some(question), None) => {
                let change = self
                    .asked_change
                    .as_ref()
                    .map_or(&[][..], |(_, _, lines)| &lines[..]);
                foot.extend(question.block_lines(change, width, block_room));
            }
            (Some(_), Some(note)) => {
                let layout = note.layout("note for the model › ", width);
                cursor = Some((layout.cursor.0, layout.cursor.1 + len16(&foot)));
                foot.extend(layout.rows);
            }
            (None, _) if self.search.is_some() => {
                let (query, found) = self.search.clone().unwrap_or_default();
                let mut shown = Editor::default();
                shown.set(found.and_then(|at| self.editor.entry(at)).unwrap_or(""));
                let prompt = if found.is_some() || query.is_empty() {
                    format!("history `{}` › ", crate::rows::cut(&query, width / 3))
                } else {
                    format!(
                        "history `{}` (no match) › ",
                        crate::rows::cut(&query, width / 3)
                    )
                };
                let layout = shown.layout(&prompt, width);
                cursor = Some((layout.cursor.0, layout.cursor.1 + len16(&foot)));
                foot.extend(layout.rows);
            }
            (None, _) => {
                let layout = self.editor.layout("› ", width);
                cursor = Some((layout.cursor.0, layout.cursor.1 + len16(&foot)));
                foot.extend(layout.rows);
                // The menu takes at most a third of the screen.
                let menu = self.menu.lines(
                    self.editor.text(),
                    self.cursor_at_end(),
                    width,
                    self.rows / 3,
                );
                if !menu.is_empty() {
                    foot.extend(menu);
                } else if let Some((for_text, shown)) = &self.completions
                    && for_text == self.editor.text()
                {
                    foot.extend(wrapped(shown, width, Style::PLAIN.dim()));
                } else if !self.chips.is_empty() {
                    foot.push(fit(self.chip_line(), width));
                }
            }
        }
        if let Some(notice) = &self.notice {
            foot.extend(wrapped(notice, width, Style::fg(Color::Yellow)));
        }
        let working = self.turn.map(|(since, reported)| Working {
            elapsed: now.saturating_duration_since(since),
            output_estimate: reported + self.attempt_tokens,
            input_holds_text: !self.editor.is_empty(),
            asking: self.approval.is_some(),
        });
        let status = Status {
            working,
            ..self.status.clone()
        };
        foot.push(status.line(width));

        let mut middle: Vec<Line> = Vec::new();
        if let Some((since, attempt)) = self.waiting {
            let elapsed = now.saturating_duration_since(since);
            let spin = SPINNER[(elapsed.as_millis() / 100) as usize % SPINNER.len()];
            let attempt = if attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            };
            middle.push(Line::new(vec![
                Span::new(spin, Style::fg(Color::Cyan)),
                Span::plain(&format!(
                    " waiting for the model{attempt} · {:.1} s · Esc stops",
                    elapsed.as_secs_f64()
                )),
            ]));
        }
        // A call waiting for its answer is the approval's block, not a card as well.
        for running in self.running.iter().filter(|running| !running.asked) {
            let elapsed = now.saturating_duration_since(running.since);
            middle.extend(cards::running(
                &running.call,
                elapsed,
                running.asked,
                &running.recent,
                width,
            ));
        }
        for text in self.queued.iter().take(QUEUED_SHOWN) {
            let first = text.lines().next().unwrap_or("");
            let more = if text.lines().count() > 1 { " …" } else { "" };
            middle.push(fit(
                Line::new(vec![
                    Span::new("queued › ", Style::fg(Color::Cyan).dim()),
                    Span::plain(&format!("{first}{more}")),
                ]),
                width,
            ));
        }
        if self.queued.len() > QUEUED_SHOWN {
            middle.push(Line::from_text(
                &format!("… and {} more queued", self.queued.len() - QUEUED_SHOWN),
                Style::PLAIN.dim(),
            ));
        }
        if !self.queued.is_empty() {
            middle.push(Line::from_text(
                "sent when this turn ends · Up takes the last back · Esc Esc cancels it",
                Style::PLAIN.dim(),
            ));
        }
        let middle: Vec<Line> = middle.into_iter().map(|line| fit(line, width)).collect();

        let limit = self.rows.saturating_sub(1).max(2);
        let room = limit.saturating_sub(foot.len() + middle.len());
        let mut top: Vec<Line> = Vec::new();
        if room > 0 {
            if !self.reasoning.trim().is_empty() {
                let reasoning = wrapped(
                    self.reasoning.trim_end(),
                    width,
                    Style::PLAIN.dim().italic(),
                );
                let shown = REASONING_SHOWN.min(room);
                top.extend(
                    reasoning[reasoning.len().saturating_sub(shown)..]
                        .iter()
                        .cloned(),
                );
            }
            let answer_room = room.saturating_sub(top.len()).min(self.rows / ANSWER_SHARE);
            if answer_room > 0 && !self.answer.is_empty() {
                top.extend(self.answer.tail(answer_room));
            }
        }
        let mut lines = top;
        lines.extend(middle);
        let offset = len16(&lines);
        lines.extend(foot);
        // Too many rows even without the answer: the top goes first (the foot stays).
        let excess = lines.len().saturating_sub(limit);
        let lines: Vec<Line> = lines.into_iter().skip(excess).collect();
        let cursor = cursor.and_then(|(column, row): (u16, u16)| {
            let row = usize::from(row) + usize::from(offset);
            row.checked_sub(excess)
                .and_then(|row| u16::try_from(row).ok())
                .map(|row| (column, row))
        });
        Frame { lines, cursor }
    }
}

fn len16(lines: &[Line]) -> u16 {
    u16::try_from(lines.len()).unwrap_or(u16::MAX)
}
