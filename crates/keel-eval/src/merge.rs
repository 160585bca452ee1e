//! `keel eval merge DIR…`: the shards of one matrix, run anywhere, as one report.
//!
//! Invariants:
//! - Only shards of the same run merge: the same suite digest, matrix, faults, sandbox and
//!   settings, distinct shards of the same count. A different keel binary (by digest) is a
//!   warning, since a rebuilt binary may still be the same commit.
//! - Merged, the results are the union of the shards' final results: equal, trial for trial,
//!   to the unsharded run's outcomes and counts (markers and latencies differ).

use crate::EvalError;
use crate::log::{AttemptsLog, Manifest, TrialResult};
use crate::report::{Report, final_results};
use std::path::PathBuf;

/// The merged report and what to warn about.
pub struct Merged {
    pub report: Report,
    pub markdown: String,
    pub results: Vec<TrialResult>,
    pub warnings: Vec<String>,
}

pub fn merge(dirs: &[PathBuf]) -> Result<Merged, EvalError> {
    let mut manifests = Vec::new();
    for dir in dirs {
        let manifest = Manifest::read(dir)?.ok_or_else(|| {
            EvalError::Usage(format!(
                "{} is not a keel eval directory (no manifest.json)",
                dir.display()
            ))
        })?;
        manifests.push((dir, manifest));
    }
    let Some((first_dir, first)) = manifests.first() else {
        return Err(EvalError::Usage(
            "name the shard directories to merge".into(),
        ));
    };
    let mut warnings = Vec::new();
    let mut shards = std::collections::BTreeSet::new();
    for (dir, manifest) in &manifests {
        let mut differ: Vec<&str> = first
            .differences(manifest)
            .into_iter()
            .filter(|what| *what != "the shard")
            .collect();
        if differ.contains(&"the keel binary") {
            differ.retain(|what| *what != "the keel binary");
            warnings.push(format!(
                "{} ran another keel binary ({} {} vs {} {})",
                dir.display(),
                manifest.binary.version,
                manifest.binary.commit.as_deref().unwrap_or("?"),
                first.binary.version,
                first.binary.commit.as_deref().unwrap_or("?"),
            ));
        }
        if !differ.is_empty() {
            return Err(EvalError::Usage(format!(
                "{} is not a shard of the same run as {}: {} differ",
                dir.display(),
                first_dir.display(),
                differ.join(", ")
            )));
        }
        if manifest.shard.count != first.shard.count || !shards.insert(manifest.shard.index) {
            return Err(EvalError::Usage(format!(
                "{}: shard {} does not fit with the others (each of 1..{} once)",
                dir.display(),
                manifest.shard,
                first.shard.count
            )));
        }
    }
    if shards.len() as u32 != first.shard.count {
        warnings.push(format!(
            "{} of {} shards merged: the report covers part of the matrix",
            shards.len(),
            first.shard.count
        ));
    }
    let mut results = Vec::new();
    for (dir, manifest) in &manifests {
        let shard = final_results(&AttemptsLog::read_only(dir)?);
        let expected = manifest.matrix.shard(manifest.shard).len();
        if shard.len() < expected {
            warnings.push(format!(
                "{}: {} of its {expected} trials finished (resume it to finish the rest)",
                dir.display(),
                shard.len()
            ));
        }
        results.extend(shard);
    }
    results.sort_by(|a, b| a.trial.cmp(&b.trial));
    let report = Report::from_results(&results, first.matrix.reps);
    let markdown = report.markdown(
        &format!(
            "keel eval — suite `{}`, {} shard(s) merged",
            first.suite,
            shards.len()
        ),
        &crate::run::context_line(first),
    );
    Ok(Merged {
        report,
        markdown,
        results,
        warnings,
    })
}
