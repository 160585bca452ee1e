//! The trial matrix: models × efforts × tasks × variants × repetitions, in one fixed order,
//! and the deterministic slice of it a shard runs.
//!
//! Invariants:
//! - The order depends only on the inputs, so every machine computes the same matrix. The
//!   variants of one pair (same model, effort, task and repetition) are adjacent, and a shard
//!   `I/N` takes whole pairs — those at pair positions `q` with `q % N == I - 1` — so both arms
//!   of a comparison always run on the same machine; the shards of one matrix are disjoint
//!   and together are all of it.
//! - A trial's id names its cell and repetition; ids are unique within a matrix and safe as a
//!   directory name.

use crate::EvalError;
use serde::{Deserialize, Serialize};

/// A prompt variant: the production prompt, or it with the model's action policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Base,
    Policy,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Base => "base",
            Variant::Policy => "policy",
        }
    }

    pub fn parse(name: &str) -> Result<Variant, EvalError> {
        match name {
            "base" => Ok(Variant::Base),
            "policy" => Ok(Variant::Policy),
            other => Err(EvalError::Usage(format!(
                "unknown variant `{other}`: the variants are base and policy"
            ))),
        }
    }
}

/// One trial's place in the matrix.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TrialKey {
    /// `mock`, or `PROVIDER/MODEL`.
    pub model: String,
    /// A `reasoning_effort` name; `None`: the provider's default.
    pub effort: Option<String>,
    pub task: String,
    pub variant: Variant,
    /// 1-based.
    pub rep: u32,
}

impl TrialKey {
    /// `model.effort.task.variant.rep`, with anything but letters, digits, `-` and `_` in the
    /// model written as `_`.
    pub fn id(&self) -> String {
        let model: String = self
            .model
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!(
            "{model}.{}.{}.{}.{}",
            self.effort.as_deref().unwrap_or("default"),
            self.task,
            self.variant.name(),
            self.rep
        )
    }

    /// The pair this trial belongs to when variants are compared (all but the variant).
    pub fn pair(&self) -> (String, Option<String>, String, u32) {
        (
            self.model.clone(),
            self.effort.clone(),
            self.task.clone(),
            self.rep,
        )
    }
}

/// What the matrix is made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixSpec {
    pub models: Vec<String>,
    pub efforts: Vec<Option<String>>,
    pub tasks: Vec<String>,
    pub variants: Vec<Variant>,
    pub reps: u32,
}

/// A shard: `index` of `count`, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// `I/N` with `1 <= I <= N`.
    pub fn parse(text: &str) -> Result<Shard, EvalError> {
        let bad = || {
            EvalError::Usage(format!(
                "--shard {text:?}: write I/N with 1 <= I <= N (e.g. 2/4)"
            ))
        };
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = index.trim().parse().map_err(|_| bad())?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    pub fn is_whole(self) -> bool {
        self.count == 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl MatrixSpec {
    /// Every trial, in the matrix's order.
    pub fn trials(&self) -> Vec<TrialKey> {
        let mut trials = Vec::new();
        for model in &self.models {
            for effort in &self.efforts {
                for task in &self.tasks {
                    for rep in 1..=self.reps {
                        for variant in &self.variants {
                            trials.push(TrialKey {
                                model: model.clone(),
                                effort: effort.clone(),
                                task: task.clone(),
                                variant: *variant,
                                rep,
                            });
                        }
                    }
                }
            }
        }
        trials
    }

    /// The trials `shard` runs.
    pub fn shard(&self, shard: Shard) -> Vec<TrialKey> {
        let per_pair = self.variants.len().max(1) as u64;
        self.trials()
            .into_iter()
            .enumerate()
            .filter(|(position, _)| {
                (*position as u64 / per_pair) % u64::from(shard.count) == u64::from(shard.index - 1)
            })
            .map(|(_, trial)| trial)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> MatrixSpec {
        MatrixSpec {
            models: vec!["mock".into(), "deepseek/deepseek-v4-flash".into()],
            efforts: vec![Some("low".into()), Some("max".into())],
            tasks: vec!["read".into(), "edit".into(), "verify".into()],
            variants: vec![Variant::Base, Variant::Policy],
            reps: 10,
        }
    }

    #[test]
    fn the_seeds_matrix_has_its_120_trials_per_model_with_unique_ids() {
        let trials = spec().trials();
        assert_eq!(trials.len(), 240);
        let ids: std::collections::BTreeSet<String> = trials.iter().map(TrialKey::id).collect();
        assert_eq!(ids.len(), 240);
        assert!(ids.contains("deepseek_deepseek-v4-flash.max.verify.policy.10"));
    }

    #[test]
    fn shards_are_disjoint_and_together_the_whole() {
        let whole: Vec<String> = spec().trials().iter().map(TrialKey::id).collect();
        for count in 1..=7 {
            let mut joined: Vec<String> = (1..=count)
                .flat_map(|index| spec().shard(Shard { index, count }))
                .map(|trial| trial.id())
                .collect();
            joined.sort();
            let mut expected = whole.clone();
            expected.sort();
            assert_eq!(joined, expected, "{count} shards");
        }
    }

    #[test]
    fn both_arms_of_a_pair_run_in_the_same_shard() {
        for index in 1..=2 {
            let shard = spec().shard(Shard { index, count: 2 });
            for trial in &shard {
                let arms = shard.iter().filter(|t| t.pair() == trial.pair()).count();
                assert_eq!(arms, 2, "{} lacks its pair in shard {index}/2", trial.id());
            }
        }
    }

    #[test]
    fn a_shard_is_written_i_of_n() {
        assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
        for bad in ["0/4", "5/4", "2", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
