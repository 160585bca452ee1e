//! `keel eval`: the reliability study (keel-eval) from the command line — the run, `--resume`,
//! `check` and `merge`.
//!
//! Invariants:
//! - Only the providers' profiles and accounts come from the user's config (the key variables
//!   by name); nothing else of it, and nothing of the workspace's, reaches a trial.
//! - Trials run in the enforced sandbox: without one keel eval refuses to start, unless
//!   `--sandbox off` says so (recorded in the manifest and the report).
//! - SIGINT stops admitting, settles the running trials and still writes the report
//!   (exit 130); a finished run exits 0 whatever its trials' outcomes.

use crate::cli::{CommonArgs, EvalAction, EvalArgs, SandboxModeArg};
use crate::{Outcome, UsageError};
use keel_eval::log::BinaryId;
use keel_eval::matrix::{MatrixSpec, Shard, Variant};
use keel_eval::run::{RunPlan, run};
use keel_eval::suite::Suite;
use keel_eval::trial::ProviderTarget;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub async fn run_command(common: &CommonArgs, args: EvalArgs) -> anyhow::Result<Outcome> {
    match args.action {
        Some(EvalAction::Check { suite, sandbox }) => {
            let common = CommonArgs {
                sandbox: sandbox.or(common.sandbox),
                ..common.clone()
            };
            check(&common, &suite)
        }
        Some(EvalAction::Merge { dirs, out, output }) => {
            merge(&common.clone().with_output(&output), &dirs, out.as_deref())
        }
        None => match args.resume.clone() {
            Some(dir) => resume(common, &dir).await,
            None => start(common, args).await,
        },
    }
}

fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The suite named `name` (`builtin`, or a directory), materialized into `into` when built in.
fn load_suite(name: &str, into: &Path) -> anyhow::Result<Suite> {
    if name == keel_eval::builtin::NAME {
        keel_eval::builtin::materialize(into)?;
        return Ok(Suite::load(into, name)?);
    }
    let dir = std::path::absolute(name)?;
    if !dir.is_dir() {
        return Err(usage(format!(
            "{name}: not a suite directory (or `builtin`, the suite that ships with keel)"
        )));
    }
    Ok(Suite::load(&dir, name)?)
}

/// The suite a run in `out` uses, copied to `out/suite` (checked, then read from there for the
/// whole run: a change to the original meanwhile reaches no trial) — unless the directory
/// already holds a run of another suite, whose copy is left as it is.
fn suite_for_run(name: &str, out: &Path) -> anyhow::Result<Suite> {
    let kept = out.join("suite");
    let fresh = out.join(".suite-new");
    let _ = std::fs::remove_dir_all(&fresh);
    let suite = if name == keel_eval::builtin::NAME {
        load_suite(name, &fresh)?
    } else {
        let original = load_suite(name, out)?;
        keel_eval::suite::copy_verbatim(&original.dir, &fresh)?;
        Suite::load(&fresh, name)?
    };
    if kept.exists() {
        let same = keel_eval::suite::digest(&kept).ok().as_deref() == Some(suite.sha256.as_str());
        std::fs::remove_dir_all(&fresh)?;
        if !same {
            return Err(usage(format!(
                "{} holds a run of another suite (or another keel's built-in one); use a new \
                 --out directory",
                out.display()
            )));
        }
    } else {
        std::fs::rename(&fresh, &kept)?;
    }
    Ok(Suite::load(&kept, name)?)
}

/// `dir` owner-only: made so, or tightened if it is the user's own and looser.
/// Refused unless it is a directory of the user's own (not a link, not another user's: the
/// run's transcripts go there).
fn keep_private(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    keel_types::private_files::create_private_dir(dir)?;
    keel_types::private_files::tighten(dir, keel_types::private_files::Entry::Dir)?;
    let meta = dir.symlink_metadata()?;
    if !meta.is_dir() || meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(usage(format!(
            "--out {}: not a directory of yours (a link, or another user's): the run's \
             transcripts go there; use a new directory",
            dir.display()
        )));
    }
    Ok(())
}

fn sandbox_on(common: &CommonArgs) -> anyhow::Result<bool> {
    if matches!(common.sandbox, Some(SandboxModeArg::Off)) {
        return Ok(false);
    }
    if !keel_sandbox::meets_minimum(false) {
        return Err(usage(
            "keel eval runs its trials in the enforced sandbox, and this kernel does not \
             offer it (Landlock and seccomp); rerun with `--sandbox off` to run them \
             unconfined (the manifest and the report will say so)",
        ));
    }
    Ok(true)
}

fn check(common: &CommonArgs, name: &str) -> anyhow::Result<Outcome> {
    let scratch = tempfile::tempdir()?;
    let suite = load_suite(name, &scratch.path().join("suite"))?;
    let setup = keel_eval::check::CheckSetup {
        sandbox: sandbox_on(common)?,
        hidden: users_hidden()?,
    };
    let verdicts = keel_eval::check::check_suite(&suite, &scratch.path().join("work"), &setup)?;
    let mut refused = 0;
    for (task, verdict) in &verdicts {
        println!("{task}: {}", verdict.says());
        refused += usize::from(!verdict.is_ok());
    }
    if refused > 0 {
        eprintln!("{refused} grader(s) refused: fix them before running the suite");
        return Ok(Outcome::TurnFailed);
    }
    println!(
        "every grader of `{name}` is proved ({} tasks)",
        verdicts.len()
    );
    Ok(Outcome::Completed)
}

fn merge(common: &CommonArgs, dirs: &[PathBuf], out: Option<&Path>) -> anyhow::Result<Outcome> {
    let merged = keel_eval::merge::merge(dirs)?;
    for warning in &merged.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(out) = out {
        keep_private(out)?;
        std::fs::write(out.join("report.md"), &merged.markdown)?;
        std::fs::write(
            out.join("report.json"),
            serde_json::to_string_pretty(&merged.report)? + "\n",
        )?;
        std::fs::write(
            out.join("results.jsonl"),
            merged
                .results
                .iter()
                .map(|result| serde_json::to_string(result).map(|line| line + "\n"))
                .collect::<Result<String, _>>()?,
        )?;
    }
    print_report(common, &merged.report, &merged.markdown)?;
    Ok(Outcome::Completed)
}

fn print_report(
    common: &CommonArgs,
    report: &keel_eval::report::Report,
    markdown: &str,
) -> anyhow::Result<()> {
    if common.json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        print!("{markdown}");
    }
    Ok(())
}

/// The user's own configuration (no project's).
fn users_config() -> anyhow::Result<keel_config::KeelConfig> {
    let home = crate::settings::keel_home()?;
    Ok(keel_config::KeelConfig::load(
        &home.join("config.toml"),
        keel_config::WorkspaceFiles::default(),
        keel_config::WorkspaceTrust::Untrusted,
        keel_config::Overrides::default(),
    )?)
}

/// What the user's own keel hides that a trial's hermetic home would not, so that no trial
/// command or grader sees it either: the user's `$KEEL_HOME`, whole (config, every session's
/// transcript, input history, snapshots), and the user's `[sandbox] forbid_read`.
fn users_hidden() -> anyhow::Result<Vec<PathBuf>> {
    let keel_home = std::path::absolute(crate::settings::keel_home()?)?;
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let mut hidden = vec![keel_home];
    for entry in users_config()?.sandbox().settings.forbid_read {
        let path = match (entry.strip_prefix("~/"), &user_home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if entry == "~" => match &user_home {
                Some(home) => home.clone(),
                None => continue,
            },
            (Some(_), None) => continue,
            (None, _) => PathBuf::from(entry),
        };
        hidden.push(path);
    }
    Ok(hidden)
}

/// `users_hidden`, and the suite the run was started from (the run reads its copy; the
/// original's graders and references are no trial's either).
fn users_hidden_with_suite(suite: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut hidden = users_hidden()?;
    if suite != keel_eval::builtin::NAME {
        hidden.push(std::path::absolute(suite)?);
    }
    Ok(hidden)
}

/// The providers a run talks to: `mock`, or PROVIDER/MODEL resolved from the user's config.
fn targets(models: &[String]) -> anyhow::Result<Vec<ProviderTarget>> {
    let config = users_config()?;
    let mut targets = Vec::new();
    for model in models {
        if model == "mock" {
            targets.push(ProviderTarget::mock());
            continue;
        }
        let Some((provider, id)) = model
            .split_once('/')
            .filter(|(p, m)| !p.is_empty() && !m.is_empty())
        else {
            return Err(usage(format!(
                "--models {model}: write `mock` or PROVIDER/MODEL (e.g. deepseek/deepseek-v4-flash)"
            )));
        };
        let resolved = config.provider(provider)?;
        targets.push(ProviderTarget {
            name: model.clone(),
            provider: provider.to_string(),
            model: id.to_string(),
            protocol: resolved.protocol.value.as_str().to_string(),
            reasoning_protocol: resolved.reasoning_protocol.value.as_str().to_string(),
            base_url: Some(resolved.base_url.value.clone()),
            key_variables: resolved
                .accounts
                .value
                .iter()
                .map(|account| account.api_key_env.clone())
                .collect(),
            max_output_tokens: Some(resolved.max_output_tokens.value),
            context_window: resolved.context_window.value,
        });
    }
    Ok(targets)
}

/// This binary, by version, commit (when the build says) and digest.
fn binary() -> anyhow::Result<(PathBuf, BinaryId)> {
    let path = std::env::current_exe()?;
    let bytes = std::fs::read(&path)?;
    let sha256 = Sha256::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Ok((
        path,
        BinaryId {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: option_env!("KEEL_COMMIT").map(str::to_string),
            sha256,
        },
    ))
}

async fn start(common: &CommonArgs, args: EvalArgs) -> anyhow::Result<Outcome> {
    let out = args
        .out
        .clone()
        .ok_or_else(|| usage("keel eval needs --out DIR (where the run's log and report go)"))?;
    // Absolute: the trials' sandbox hides parts of it by path.
    let out = std::path::absolute(out)?;
    if args.reps == 0 {
        return Err(usage("--reps must be at least 1"));
    }
    refuse_inside_a_repository(&out)?;
    let variants = args
        .variants
        .iter()
        .map(|name| Variant::parse(name))
        .collect::<Result<Vec<_>, _>>()?;
    let efforts = args
        .efforts
        .iter()
        .map(|name| match name.as_str() {
            "default" => Ok(None),
            other if keel_llm::ReasoningEffort::parse(other).is_some() => {
                Ok(Some(other.to_string()))
            }
            other => Err(usage(format!(
                "--efforts {other}: use off, low, medium, high, max or default"
            ))),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    keel_eval::faults::FaultPlan::parse(&args.faults)?;
    let targets = targets(&args.models)?;
    refuse_unsayable_efforts(&targets, &efforts)?;
    let shard = args
        .shard
        .as_deref()
        .map(Shard::parse)
        .transpose()?
        .unwrap_or(Shard::WHOLE);
    let sandbox = sandbox_on(common)?;
    // Written into the run's directory only once every argument is known good. The directory
    // is the user's alone: trials' transcripts and answers are in it (what is inside trial
    // workspaces keeps the modes the trials gave it).
    keep_private(&out)?;
    let suite = suite_for_run(&args.suite, &out)?;
    let (keel, binary) = binary()?;
    let keys_from = stored_keys_home(&targets)?;
    let plan = RunPlan {
        matrix: MatrixSpec {
            models: args.models.clone(),
            efforts,
            tasks: suite.tasks.iter().map(|task| task.name.clone()).collect(),
            variants,
            reps: args.reps,
        },
        targets,
        suite,
        shard,
        concurrency: args.concurrency.max(1),
        faults: args.faults.clone(),
        sandbox,
        max_spend: args.max_spend,
        seed: args.seed,
        keel,
        binary,
        out,
        users_hidden: users_hidden_with_suite(&args.suite)?,
        keys_from,
    };
    execute(common, plan).await
}

/// An effort a model's protocol cannot say is refused before anything runs (each trial's keel
/// would refuse it, and every trial would fail the same way).
fn refuse_unsayable_efforts(
    targets: &[ProviderTarget],
    efforts: &[Option<String>],
) -> anyhow::Result<()> {
    for target in targets {
        let protocol: keel_types::WireProtocol =
            serde_json::from_value(serde_json::Value::String(target.protocol.clone()))?;
        let reasoning: keel_types::ReasoningProtocol =
            serde_json::from_value(serde_json::Value::String(target.reasoning_protocol.clone()))?;
        for effort in efforts.iter().flatten() {
            let why = keel_llm::ReasoningEffort::parse(effort)
                .and_then(|effort| effort.unsupported(protocol, reasoning));
            if let Some(why) = why {
                return Err(usage(format!(
                    "--efforts {effort} for {}: {why}",
                    target.name
                )));
            }
        }
    }
    Ok(())
}

/// Trials under a git repository would read its `AGENTS.md` files and carry its status in
/// their prompts: not hermetic, so refused.
fn refuse_inside_a_repository(out: &Path) -> anyhow::Result<()> {
    let absolute = std::path::absolute(out)?;
    let repository = absolute.ancestors().find(|dir| dir.join(".git").exists());
    if let Some(repository) = repository {
        return Err(usage(format!(
            "--out {}: it is inside the git repository {}, whose AGENTS.md files and status \
             would reach every trial's prompt; put the run outside any repository (e.g. \
             --out /tmp/keel-eval-run)",
            out.display(),
            repository.display()
        )));
    }
    Ok(())
}

async fn resume(common: &CommonArgs, dir: &Path) -> anyhow::Result<Outcome> {
    let dir = &std::path::absolute(dir)?;
    keep_private(dir)?;
    let manifest = keel_eval::log::Manifest::read(dir)?.ok_or_else(|| {
        usage(format!(
            "{}: no manifest.json, nothing to resume",
            dir.display()
        ))
    })?;
    let suite = Suite::load(&dir.join("suite"), &manifest.suite).or_else(|_| {
        // A suite run from its own directory is read from there again.
        Suite::load(Path::new(&manifest.suite), &manifest.suite)
    })?;
    let targets: Vec<ProviderTarget> = serde_json::from_value(manifest.settings["targets"].clone())
        .map_err(|error| {
            usage(format!(
                "{}: the manifest's targets: {error}",
                dir.display()
            ))
        })?;
    let (keel, binary) = binary()?;
    let keys_from = stored_keys_home(&targets)?;
    let plan = RunPlan {
        suite,
        targets,
        matrix: manifest.matrix.clone(),
        shard: manifest.shard,
        concurrency: manifest.concurrency,
        faults: manifest.faults.clone(),
        sandbox: manifest.sandbox == "enforced",
        max_spend: manifest.max_spend,
        seed: manifest.settings["seed"].as_u64(),
        keel,
        binary,
        out: dir.to_path_buf(),
        users_hidden: users_hidden_with_suite(&manifest.suite)?,
        keys_from,
    };
    execute(common, plan).await
}

/// The home whose stored keys a real model's trials may get; a key file keel cannot read is
/// said before any trial runs (a mock-only run needs no key).
fn stored_keys_home(targets: &[ProviderTarget]) -> anyhow::Result<Option<PathBuf>> {
    if targets.iter().all(ProviderTarget::is_mock) {
        return Ok(None);
    }
    crate::settings::keys()?;
    Ok(Some(crate::settings::keel_home()?))
}

async fn execute(common: &CommonArgs, plan: RunPlan) -> anyhow::Result<Outcome> {
    // SIGINT (a person) and SIGTERM (a job runner cancelling) stop the run the same way.
    let (stop_sender, stop) = tokio::sync::watch::channel(false);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        let _ = stop_sender.send(true);
    });
    let total = plan.matrix.shard(plan.shard).len() as u64;
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} trials · {msg} · {elapsed_precise}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let out = plan.out.clone();
    let finished = run(plan, stop, |progress| {
        bar.set_position(u64::from(progress.done));
        bar.set_message(format!(
            "{} not passed · spend ≈ {:.4}",
            progress.failures, progress.spend
        ));
    })
    .await?;
    bar.finish_and_clear();
    print_report(common, &finished.report, &finished.markdown)?;
    eprintln!(
        "report: {} (log: {})",
        out.join("report.md").display(),
        out.join(keel_eval::log::AttemptsLog::FILE).display()
    );
    if finished.interrupted {
        eprintln!(
            "interrupted: `keel eval --resume {}` finishes the run",
            out.display()
        );
        return Ok(Outcome::Cancelled);
    }
    Ok(Outcome::Completed)
}
