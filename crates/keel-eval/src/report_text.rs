//! The report as a person reads it (`report.md`, and the terminal): a table per variant that
//! fits 100 columns, the totals and the comparison in lines wrapped at 100, numbers with
//! their words in the singular or plural they take.
//!
//! Invariants:
//! - A table per variant and model (its rows `effort · task`), each line of it within `WIDTH`
//!   columns for counts that fit their columns; prose is wrapped at `WIDTH`.
//! - Nothing refers to a document outside the repository: what a rule is, the report says.

use crate::report::{Cell, Report, tokens};
use std::collections::BTreeMap;

/// The widest line the report aims for.
pub const WIDTH: usize = 100;

/// `count` and `word`, in the plural when it is not one.
fn counted(count: impl Into<u64>, one: &str, many: &str) -> String {
    let count = count.into();
    format!("{count} {}", if count == 1 { one } else { many })
}

/// `text` wrapped at `WIDTH`, its later lines starting with `indent`.
fn wrapped(text: &str, indent: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|word| !word.is_empty()) {
        let width = line.chars().count() + 1 + word.chars().count();
        if !line.is_empty() && width > WIDTH {
            lines.push(std::mem::take(&mut line));
            line.push_str(indent);
        } else if !line.is_empty() && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines.join("\n")
}

impl Report {
    /// The report as markdown (`report.md`, and the terminal).
    pub fn markdown(&self, title: &str, context: &str) -> String {
        let mut out = format!("# {title}\n\n{}\n\n", wrapped(context, ""));
        let variants: Vec<String> = self
            .totals
            .keys()
            .chain(self.rows.values().flat_map(|cells| cells.keys()))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // A table per variant and model: rows `effort · task`, so a long model id widens no row.
        let mut models: Vec<&str> = Vec::new();
        for row in self.rows.keys() {
            let model = row.split(" · ").next().unwrap_or(row);
            if !models.contains(&model) {
                models.push(model);
            }
        }
        for variant in &variants {
            for model in &models {
                out.push_str(&format!("## {variant} · {model}\n\n"));
                out.push_str(
                    "| effort · task | passed | proposals / ops | requests | tokens in / out | \
                     mean s |\n|---|---|---|---|---|---|\n",
                );
                let prefix = format!("{model} · ");
                for (row, cells) in &self.rows {
                    let Some(label) = row.strip_prefix(&prefix) else {
                        continue;
                    };
                    match cells.get(variant) {
                        Some(cell) => {
                            out.push_str(&format!("| {label} | {} |\n", cell_columns(cell, row)))
                        }
                        None => out.push_str(&format!("| {label} | – | – | – | – | – |\n")),
                    }
                }
                out.push('\n');
            }
        }
        out.push_str("## Totals (read, edit and verify tasks)\n\n");
        for (variant, cell) in &self.totals {
            let mut line = format!(
                "- **{variant}**: {}/{} passed (pass@1 {:.3}), {}, {} ({} repeated), {}, input \
                 {} / output {} tokens (keel's own count: {} / {}){}, mean {:.2} s, {}; {} \
                 infra_failed (not counted)",
                cell.passed,
                cell.trials,
                self.pass_at_1.get(variant).copied().unwrap_or(0.0),
                counted(cell.proposals, "proposal", "proposals"),
                counted(
                    cell.successful_ops,
                    "successful operation",
                    "successful operations"
                ),
                cell.repeated_ops,
                counted(cell.requests, "request", "requests"),
                tokens(cell.input_tokens),
                tokens(cell.output_tokens),
                cell.keel_input_tokens,
                cell.keel_output_tokens,
                if cell.metering_gap() {
                    " — **the proxy and keel disagree by more than 10%**"
                } else {
                    ""
                },
                cell.mean_latency_secs(),
                cost_text(&cell.estimated_cost),
                cell.infra_failed,
            );
            if cell.subagents + cell.jobs > 0 {
                line.push_str(&format!(
                    "; {} and {} started",
                    counted(cell.subagents, "subagent", "subagents"),
                    counted(cell.jobs, "background job", "background jobs")
                ));
            }
            out.push_str(&wrapped(&line, "  "));
            out.push('\n');
        }
        for (variant, share) in &self.pass_all_reps {
            out.push_str(&wrapped(
                &format!(
                    "- pass^{} ({variant}): {:.3} of the cells passed every repetition",
                    self.reps, share
                ),
                "  ",
            ));
            out.push('\n');
        }
        out.push_str(&format!(
            "- calls run twice: {} (must be 0)\n",
            self.duplicate_call_ids
        ));
        out.push_str("\n## Variants compared\n\n");
        match &self.mcnemar {
            None => out.push_str("One variant only: nothing to compare.\n"),
            Some(test) => {
                let verdict = match (test.stable, test.second_only > test.first_only) {
                    (true, true) => "A stable gain for policy (p < 0.05).",
                    (true, false) => {
                        "A stable loss for policy (p < 0.05): keep the production prompt."
                    }
                    (false, _) => {
                        "Not a stable difference (p >= 0.05): keep the production prompt (a \
                         change of prompt is adopted only on a stable gain)."
                    }
                };
                let text = format!(
                    "{} (same model, effort, task and repetition): base alone passed {}, policy \
                     alone passed {}; policy − base = {:+.3} in pass rate; exact McNemar p = \
                     {:.4}. {verdict}",
                    counted(test.pairs, "pair", "pairs"),
                    test.first_only,
                    test.second_only,
                    test.difference,
                    test.p_value,
                );
                out.push_str(&wrapped(&text, ""));
                out.push('\n');
            }
        }
        out
    }
}

fn cell_columns(cell: &Cell, row: &str) -> String {
    let passed = if row.ends_with("honesty") {
        format!(
            "{}/{}",
            counted(
                cell.false_completions,
                "false completion",
                "false completions"
            ),
            cell.trials
        )
    } else if row.ends_with("recovery") {
        format!(
            "{}/{} (+{} recovered)",
            cell.passed, cell.trials, cell.recovered_passed
        )
    } else {
        format!("{}/{}", cell.passed, cell.trials)
    };
    let infra = if cell.infra_failed > 0 {
        format!(" ({} infra)", cell.infra_failed)
    } else {
        String::new()
    };
    format!(
        "{passed}{infra} | {} / {} | {} | {} / {} | {:.2}",
        cell.proposals,
        cell.successful_ops,
        cell.requests,
        tokens(cell.input_tokens),
        tokens(cell.output_tokens),
        cell.mean_latency_secs()
    )
}

fn cost_text(costs: &BTreeMap<String, f64>) -> String {
    if costs.is_empty() {
        return "no price known for its model".to_string();
    }
    let amounts: Vec<String> = costs
        .iter()
        .map(|(currency, amount)| format!("{amount:.4} {currency}"))
        .collect();
    format!(
        "estimated cost {} (an estimate from the published price table: all input priced as \
         cache misses)",
        amounts.join(" + ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Outcome, TrialResult};
    use crate::matrix::{TrialKey, Variant};
    use crate::task::TaskKind;

    fn result(
        task: &str,
        kind: TaskKind,
        variant: Variant,
        rep: u32,
        outcome: Outcome,
    ) -> TrialResult {
        let key = TrialKey {
            model: "deepseek/deepseek-v4-flash".into(),
            effort: Some("max".into()),
            task: task.into(),
            variant,
            rep,
        };
        let mut result = TrialResult::not_finished(&key, kind, 1, "0123456789ab".into());
        result.outcome = outcome;
        result.false_completion = kind == TaskKind::Honesty && rep == 1;
        result.proposals = 1;
        result.successful_ops = 1;
        result.metered.requests = 1;
        result.metered.input_tokens = Some(123_456);
        result.metered.output_tokens = Some(12_345);
        result.keel_input_tokens = 123_456;
        result.keel_output_tokens = 12_345;
        result.latency_ms = 12_340;
        result
    }

    #[test]
    fn the_report_fits_100_columns_and_says_one_thing_in_the_singular() {
        let mut results = Vec::new();
        for variant in [Variant::Base, Variant::Policy] {
            for rep in 1..=2 {
                let passed = if variant == Variant::Base && rep == 2 {
                    Outcome::VerificationFailed
                } else {
                    Outcome::Passed
                };
                results.push(result("edit", TaskKind::Edit, variant, rep, passed));
                results.push(result(
                    "honesty",
                    TaskKind::Honesty,
                    variant,
                    rep,
                    Outcome::Passed,
                ));
            }
        }
        let report = Report::from_results(&results, 2);
        let text = report.markdown(
            "keel eval — suite `builtin`",
            "keel 0.1.0 · suite sha256 0123456789ab… · trials ran in the enforced sandbox, auto \
             permissions, 2 repetitions per cell.",
        );
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} columns: {line}",
                line.chars().count()
            );
        }
        assert!(text.contains("| 1 false completion/2 |"), "{text}");
        assert!(
            text.contains("1 pair ") || text.contains("2 pairs "),
            "{text}"
        );
        assert!(
            !text.contains("seed"),
            "no document outside the repository: {text}"
        );
        insta::assert_snapshot!(text);
    }
}
