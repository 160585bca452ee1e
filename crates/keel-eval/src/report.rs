//! The report, computed from the attempts log alone: the seed's table (per effort and task
//! kind, per variant: successes/N, proposals, successful operations, requests, tokens, mean
//! latency), totals, pass@1 and pass^k, the paired McNemar test between two variants, the
//! honesty and recovery rows, and an estimated cost.
//!
//! Invariants:
//! - A trial counts once, by its last attempt; `infra_failed` is reported and kept out of
//!   every rate; a pass after an explicit recovery is its own column, never a pass@1.
//! - Tokens are the proxy's (what the provider reported); one unmeasured response makes a
//!   cell's tokens `unmeasured`, never zero. keel's own count is beside it, and a gap between
//!   the two is flagged.
//! - A gain is called stable only when the exact McNemar test says so (p < 0.05); otherwise
//!   the report says it is not — the seed's adoption rule.

use crate::log::{Attempt, Outcome, TrialResult};
use crate::matrix::Variant;
use crate::task::TaskKind;
use serde::Serialize;
use std::collections::BTreeMap;

/// One cell: one variant's trials of a row.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cell {
    /// Trials counted (all but `infra_failed`).
    pub trials: u32,
    pub passed: u32,
    /// Passed only after the harness's explicit recovery.
    pub recovered_passed: u32,
    pub false_completions: u32,
    pub infra_failed: u32,
    /// Kept from running by `--max-spend` (out of every rate, like `infra_failed`).
    pub not_run: u32,
    pub proposals: u32,
    pub successful_ops: u32,
    pub requests: u32,
    /// `None`: a response had no usage.
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub keel_input_tokens: u64,
    pub keel_output_tokens: u64,
    /// The proxy's and keel's input tokens over the trials keel reported usage for (a failed
    /// turn reports none), for the gap between the two counts.
    pub compared_proxy_input: u64,
    pub compared_keel_input: u64,
    pub latency_ms_total: u64,
    pub duplicate_call_ids: u32,
    pub repeated_ops: u32,
    /// Subagents and background jobs the trials started.
    pub subagents: u32,
    pub jobs: u32,
    /// What the tokens cost by the providers' published prices, by currency (an estimate:
    /// all input priced as cache misses); empty where no price is known (the mock).
    pub estimated_cost: BTreeMap<String, f64>,
    pub outcomes: BTreeMap<String, u32>,
}

impl Cell {
    fn add(&mut self, result: &TrialResult) {
        if let Some(cost) = &result.cost {
            *self
                .estimated_cost
                .entry(cost.currency.clone())
                .or_default() += cost.amount;
        }
        *self
            .outcomes
            .entry(result.outcome.name().to_string())
            .or_default() += 1;
        if result.never_ran() {
            self.not_run += 1;
            return;
        }
        if !result.is_counted() {
            self.infra_failed += 1;
            return;
        }
        if self.trials == 0 {
            self.input_tokens = Some(0);
            self.output_tokens = Some(0);
        }
        self.trials += 1;
        match (result.outcome, result.recovered) {
            (Outcome::Passed, false) => self.passed += 1,
            (Outcome::Passed, true) => self.recovered_passed += 1,
            _ => {}
        }
        self.false_completions += u32::from(result.false_completion);
        self.proposals += result.proposals;
        self.successful_ops += result.successful_ops;
        self.requests += result.metered.requests;
        self.input_tokens = self
            .input_tokens
            .zip(result.metered.input_tokens)
            .map(|(a, b)| a + b);
        self.output_tokens = self
            .output_tokens
            .zip(result.metered.output_tokens)
            .map(|(a, b)| a + b);
        self.keel_input_tokens += result.keel_input_tokens;
        self.keel_output_tokens += result.keel_output_tokens;
        if result.keel_input_tokens > 0 {
            self.compared_keel_input += result.keel_input_tokens;
            self.compared_proxy_input += result.metered.input_tokens.unwrap_or(0);
        }
        self.latency_ms_total += result.latency_ms;
        self.duplicate_call_ids += result.duplicate_call_ids;
        self.repeated_ops += result.repeated_ops;
        self.subagents += result.subagents;
        self.jobs += result.jobs;
    }

    pub(crate) fn mean_latency_secs(&self) -> f64 {
        if self.trials == 0 {
            0.0
        } else {
            self.latency_ms_total as f64 / 1000.0 / f64::from(self.trials)
        }
    }

    /// The proxy's input tokens differ from keel's own count by more than 10% (over the
    /// trials keel reported usage for).
    pub(crate) fn metering_gap(&self) -> bool {
        let (proxy, keel) = (self.compared_proxy_input, self.compared_keel_input);
        self.input_tokens.is_some() && proxy.abs_diff(keel) * 10 > proxy.max(keel)
    }
}

/// The paired comparison of two variants.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McNemar {
    pub pairs: u32,
    /// Passed in the first variant only, and in the second only.
    pub first_only: u32,
    pub second_only: u32,
    pub p_value: f64,
    pub stable: bool,
    /// The second variant's pass rate minus the first's, over the pairs.
    pub difference: f64,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Rows keyed "model · effort · kind", each with its cells by variant.
    pub rows: BTreeMap<String, BTreeMap<String, Cell>>,
    pub totals: BTreeMap<String, Cell>,
    pub pass_at_1: BTreeMap<String, f64>,
    /// Share of (model, effort, task) cells whose every repetition passed, per variant.
    pub pass_all_reps: BTreeMap<String, f64>,
    pub reps: u32,
    pub mcnemar: Option<McNemar>,
    pub trials: u32,
    pub duplicate_call_ids: u32,
}

/// The last finished attempt of each trial in `attempts`.
pub fn final_results(attempts: &[Attempt]) -> Vec<TrialResult> {
    let mut last: BTreeMap<String, TrialResult> = BTreeMap::new();
    for attempt in attempts {
        if let Attempt::Finished(result) = attempt {
            let keep = last
                .get(&result.trial)
                .is_none_or(|kept| kept.attempt <= result.attempt);
            if keep {
                last.insert(result.trial.clone(), (**result).clone());
            }
        }
    }
    last.into_values().collect()
}

impl Report {
    pub fn from_results(results: &[TrialResult], reps: u32) -> Report {
        let mut rows: BTreeMap<String, BTreeMap<String, Cell>> = BTreeMap::new();
        let mut totals: BTreeMap<String, Cell> = BTreeMap::new();
        for result in results {
            let key = &result.key;
            let row = format!(
                "{} · {} · {}",
                key.model,
                key.effort.as_deref().unwrap_or("default"),
                result.kind.name()
            );
            let variant = key.variant.name().to_string();
            rows.entry(row)
                .or_default()
                .entry(variant.clone())
                .or_default()
                .add(result);
            if seed_kind(result.kind) {
                totals.entry(variant).or_default().add(result);
            }
        }
        let pass_at_1 = totals
            .iter()
            .map(|(variant, cell)| {
                let rate = if cell.trials == 0 {
                    0.0
                } else {
                    f64::from(cell.passed) / f64::from(cell.trials)
                };
                (variant.clone(), rate)
            })
            .collect();
        Report {
            pass_all_reps: pass_all_reps(results, reps),
            mcnemar: mcnemar(results),
            duplicate_call_ids: results.iter().map(|r| r.duplicate_call_ids).sum(),
            trials: results.len() as u32,
            rows,
            totals,
            pass_at_1,
            reps,
        }
    }
}

pub(crate) fn tokens(count: Option<u64>) -> String {
    count.map_or_else(|| "unmeasured".to_string(), |count| count.to_string())
}

/// The seed's three kinds: what pass@1 and the comparison are about.
fn seed_kind(kind: TaskKind) -> bool {
    matches!(kind, TaskKind::Read | TaskKind::Edit | TaskKind::Verify)
}

fn passed_first_time(result: &TrialResult) -> bool {
    result.outcome == Outcome::Passed && !result.recovered
}

/// Per variant, the share of (model, effort, task) cells that passed in every one of `reps`
/// repetitions (a cell missing a counted repetition did not).
fn pass_all_reps(results: &[TrialResult], reps: u32) -> BTreeMap<String, f64> {
    let mut groups: BTreeMap<(String, String, Option<String>, String), u32> = BTreeMap::new();
    for result in results.iter().filter(|r| seed_kind(r.kind)) {
        let key = (
            result.key.variant.name().to_string(),
            result.key.model.clone(),
            result.key.effort.clone(),
            result.key.task.clone(),
        );
        let passes = groups.entry(key).or_insert(0);
        *passes += u32::from(result.is_counted() && passed_first_time(result));
    }
    let mut shares: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for ((variant, ..), passes) in groups {
        let entry = shares.entry(variant).or_default();
        entry.0 += u32::from(passes == reps);
        entry.1 += 1;
    }
    shares
        .into_iter()
        .map(|(variant, (all, groups))| (variant, f64::from(all) / f64::from(groups)))
        .collect()
}

fn mcnemar(results: &[TrialResult]) -> Option<McNemar> {
    let mut pairs: BTreeMap<_, [Option<bool>; 2]> = BTreeMap::new();
    for result in results.iter().filter(|r| seed_kind(r.kind)) {
        if !result.is_counted() {
            continue;
        }
        let side = match result.key.variant {
            Variant::Base => 0,
            Variant::Policy => 1,
        };
        pairs.entry(result.key.pair()).or_default()[side] = Some(passed_first_time(result));
    }
    let complete: Vec<(bool, bool)> = pairs
        .values()
        .filter_map(|[base, policy]| Some(((*base)?, (*policy)?)))
        .collect();
    if complete.is_empty() {
        return None;
    }
    let first_only = complete.iter().filter(|(b, p)| *b && !*p).count() as u32;
    let second_only = complete.iter().filter(|(b, p)| !*b && *p).count() as u32;
    let p_value = exact_mcnemar(first_only, second_only);
    let rate = |passed: usize| passed as f64 / complete.len() as f64;
    let difference = rate(complete.iter().filter(|(_, p)| *p).count())
        - rate(complete.iter().filter(|(b, _)| *b).count());
    Some(McNemar {
        difference,
        pairs: complete.len() as u32,
        first_only,
        second_only,
        p_value,
        stable: p_value < 0.05,
    })
}

/// The exact two-sided McNemar test: the binomial probability, at p = 1/2 over the
/// discordant pairs, of a split at least as uneven as `b` : `c`.
pub fn exact_mcnemar(b: u32, c: u32) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let smaller = b.min(c);
    // Sum C(n, i) / 2^n for i <= smaller, in logs so large n stays finite.
    let ln_half_n = f64::from(n) * 0.5f64.ln();
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut tail = 0.0;
    for i in 0..=smaller {
        if i > 0 {
            ln_choose += (f64::from(n - i + 1)).ln() - f64::from(i).ln();
        }
        tail += (ln_choose + ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_mcnemar_test_matches_the_binomial_by_hand() {
        assert_eq!(exact_mcnemar(0, 0), 1.0);
        // The seed: one saved failure out of one discordant pair is no evidence at all.
        assert_eq!(exact_mcnemar(0, 1), 1.0);
        // 0 vs 6: 2 * (1/2)^6 = 0.03125.
        assert!((exact_mcnemar(0, 6) - 0.03125).abs() < 1e-12);
        // 1 vs 9: 2 * (1 + 10) / 1024.
        assert!((exact_mcnemar(9, 1) - 22.0 / 1024.0).abs() < 1e-12);
        assert!(exact_mcnemar(300, 320) <= 1.0);
    }
}
