//! The status line at the foot of the live region: model · mode · running jobs · context % ·
//! cache-hit % · tokens · cost of the session; while a turn runs, also its elapsed time, an estimate of the
//! output tokens so far (`≈`) and what Esc does.
//!
//! Invariants:
//! - It fits the width: the model loses its provider first (`deepseek-v4-flash`), then parts
//!   are dropped least-important first (tokens, then cache, then cost, then context), never
//!   cut mid-word; the model and the mode always stay.
//! - Money is shown only where a price is known: no price, no figure (never a guess).
//! - A turn's parts come right after the mode and go after the model and mode only: elapsed
//!   time last of them, the Esc hint before it, the estimate first. An estimate always says
//!   `≈`.

use keel_render::{Color, Line, Span, Style, visible_line};
use std::time::Duration;

/// A turn running now, as the status line says it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Working {
    /// Since the turn started.
    pub elapsed: Duration,
    /// Output tokens so far: what the provider reported for this turn's finished requests,
    /// plus an estimate of what is streaming now.
    pub output_estimate: u64,
    /// The input holds text (so Esc first clears it).
    pub input_holds_text: bool,
    /// An approval is on screen: Esc answers no there, and its block says so.
    pub asking: bool,
}

/// Roughly how many tokens `text` is: a token per four ASCII characters, one per other
/// character (CJK text is about a token a character). A display estimate only.
pub fn estimate_tokens(text: &str) -> u64 {
    let (ascii, other) = text.chars().fold((0u64, 0u64), |(ascii, other), c| {
        if c.is_ascii() {
            (ascii + 1, other)
        } else {
            (ascii, other + 1)
        }
    });
    ascii.div_ceil(4) + other
}

/// What the status line shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// `provider/model`.
    pub model: String,
    /// The permission mode (`read-only`, `ask`, `auto`).
    pub mode: String,
    /// How full the context window is, when known.
    pub context_percent: Option<u8>,
    /// The session's cache-hit share of input tokens, when the provider reports it.
    pub cache_hit_percent: Option<u8>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The session's cost, displayed (`$0.0123`), when a price is known.
    pub cost: Option<String>,
    /// The turn running now, if any.
    pub working: Option<Working>,
    /// How many background jobs run now.
    pub jobs: usize,
}

/// Tokens in a few characters: `950`, `12.3k`, `4.1M`.
pub fn short_count(count: u64) -> String {
    match count {
        0..=999 => count.to_string(),
        1_000..=999_999 => format!("{:.1}k", count as f64 / 1_000.0),
        _ => format!("{:.1}M", count as f64 / 1_000_000.0),
    }
}

impl Status {
    /// The line at `width` columns.
    pub fn line(&self, width: usize) -> Line {
        let mode_color = match self.mode.as_str() {
            "auto" => Color::Red,
            "read-only" => Color::Blue,
            "plan" => Color::Cyan,
            _ => Color::Green,
        };
        // (priority: lower is dropped first, text, style)
        let mut parts: Vec<(u8, String, Style)> = vec![
            (
                9,
                visible_line(&self.model).into_owned(),
                Style::PLAIN.bold(),
            ),
            (9, self.mode.clone(), Style::fg(mode_color)),
        ];
        if let Some(working) = &self.working {
            parts.push((
                8,
                format!("{:.1} s", working.elapsed.as_secs_f64()),
                Style::fg(Color::Cyan),
            ));
            parts.push((
                6,
                format!("≈{} tokens", short_count(working.output_estimate)),
                Style::PLAIN,
            ));
            let escape = if working.input_holds_text {
                "Esc Esc clears the input, then Esc stops"
            } else {
                "Esc stops"
            };
            if !working.asking {
                parts.push((7, escape.to_string(), Style::PLAIN.dim()));
            }
        }
        if self.jobs > 0 {
            parts.push((
                6,
                format!(
                    "⚙ {} job{}",
                    self.jobs,
                    if self.jobs == 1 { "" } else { "s" }
                ),
                Style::fg(Color::Magenta),
            ));
        }
        if let Some(percent) = self.context_percent {
            let style = if percent >= 80 {
                Style::fg(Color::Yellow)
            } else {
                Style::PLAIN
            };
            parts.push((5, format!("ctx {percent}%"), style));
        }
        if let Some(percent) = self.cache_hit_percent {
            parts.push((2, format!("cache {percent}%"), Style::PLAIN));
        }
        if self.tokens_in + self.tokens_out > 0 {
            parts.push((
                1,
                format!(
                    "↑{} ↓{}",
                    short_count(self.tokens_in),
                    short_count(self.tokens_out)
                ),
                Style::PLAIN,
            ));
        }
        if let Some(cost) = &self.cost {
            parts.push((3, cost.clone(), Style::PLAIN));
        }
        const SEPARATOR: &str = " · ";
        let total = |parts: &[(u8, String, Style)]| -> usize {
            parts
                .iter()
                .map(|(_, text, _)| unicode_width::UnicodeWidthStr::width(text.as_str()))
                .sum::<usize>()
                + 3 * parts.len().saturating_sub(1)
        };
        if total(&parts) > width
            && let Some((_, id)) = self.model.rsplit_once('/')
        {
            parts[0].1 = visible_line(id).into_owned();
        }
        for priority in 0..9 {
            if total(&parts) <= width {
                break;
            }
            parts.retain(|(p, _, _)| *p > priority);
        }
        let mut line = Line::empty();
        for (index, (_, text, style)) in parts.iter().enumerate() {
            if index > 0 {
                line.push(Span::new(SEPARATOR, Style::PLAIN.dim()));
            }
            line.push(Span::new(text, *style));
        }
        if line.width() > width {
            // Only the model and the mode are left and still too wide: cut the model.
            let plain = crate::rows::cut(&line.plain(), width);
            return Line::from_text(&plain, Style::PLAIN);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> Status {
        Status {
            model: "deepseek/deepseek-v4-flash".into(),
            mode: "ask".into(),
            context_percent: Some(12),
            cache_hit_percent: Some(87),
            tokens_in: 12_345,
            tokens_out: 678,
            cost: Some("$0.0042".into()),
            working: None,
            jobs: 0,
        }
    }

    #[test]
    fn running_jobs_are_counted_after_the_mode_and_outlast_the_token_counts() {
        let mut with_jobs = status();
        with_jobs.jobs = 2;
        assert_eq!(
            with_jobs.line(200).plain(),
            "deepseek/deepseek-v4-flash · ask · ⚙ 2 jobs · ctx 12% · cache 87% · ↑12.3k ↓678 · \
             $0.0042"
        );
        with_jobs.jobs = 1;
        let narrow = with_jobs.line(50).plain();
        assert!(
            narrow.contains("⚙ 1 job") && !narrow.contains('↑'),
            "{narrow}"
        );
        assert!(!status().line(200).plain().contains('⚙'));
    }

    #[test]
    fn a_running_turn_says_its_time_its_estimate_and_what_esc_does() {
        let mut running = status();
        running.working = Some(Working {
            elapsed: Duration::from_millis(12_340),
            output_estimate: 1_234,
            input_holds_text: false,
            asking: false,
        });
        assert_eq!(
            running.line(200).plain(),
            "deepseek/deepseek-v4-flash · ask · 12.3 s · ≈1.2k tokens · Esc stops · ctx 12% · \
             cache 87% · ↑12.3k ↓678 · $0.0042"
        );
        // Narrow: the session's figures go first, the turn's stay longest.
        assert_eq!(
            running.line(50).plain(),
            "deepseek-v4-flash · ask · 12.3 s · Esc stops"
        );
        running.working = Some(Working {
            input_holds_text: true,
            asking: false,
            ..Working::default()
        });
        assert!(
            running
                .line(120)
                .plain()
                .contains("Esc Esc clears the input, then Esc stops")
        );
        // While an approval is on screen, Esc answers it: the line does not say Esc stops.
        running.working = Some(Working {
            asking: true,
            ..Working::default()
        });
        assert!(!running.line(120).plain().contains("Esc"));
        assert_eq!(estimate_tokens("abcdefgh"), 2);
        assert_eq!(estimate_tokens("配置文件"), 4);
    }

    #[test]
    fn everything_fits_at_120_and_parts_drop_in_order_when_narrow() {
        assert_eq!(
            status().line(120).plain(),
            "deepseek/deepseek-v4-flash · ask · ctx 12% · cache 87% · ↑12.3k ↓678 · $0.0042"
        );
        // Narrower: the model without its provider first, then the least important parts.
        assert_eq!(
            status().line(60).plain(),
            "deepseek-v4-flash · ask · ctx 12% · cache 87% · $0.0042"
        );
        assert_eq!(
            status().line(36).plain(),
            "deepseek-v4-flash · ask · ctx 12%"
        );
        assert_eq!(status().line(20).plain(), "deepseek-v4-flash ·…");
        for width in [10, 20, 40, 60, 80, 120] {
            assert!(status().line(width).width() <= width);
        }
    }

    #[test]
    fn no_price_no_money() {
        let mut unknown = status();
        unknown.cost = None;
        assert!(!unknown.line(200).plain().contains('$'));
        assert_eq!(short_count(999), "999");
        assert_eq!(short_count(4_100_000), "4.1M");
    }
}
