//! Workspace trust for the command line: deciding it for a run, `keel trust [DIR] [--list]
//! [--revoke]`, and the interactive session's question.
//!
//! Invariants:
//! - Trust is the user's: only `keel trust`, a "y" typed at the interactive question, or
//!   `--trust-workspace` (this run only, nothing recorded) make a workspace trusted. A model,
//!   a tool or a project file cannot: the record lives in `$KEEL_HOME`, bound to the hash of
//!   the exact bytes shown.
//! - What is recorded is what was shown: the digests of the files as read for the listing.
//! - A trust store that cannot be read trusts nothing (a warning says so); it is never
//!   overwritten.
//! - Every string from a project file (path, key, value) is shown escaped.

use crate::cli::{CommonArgs, TrustArgs};
use crate::{Outcome, UsageError, settings};
use keel_config::{
    IgnoredValue, KeelConfig, RecordState, TrustStore, WorkspaceFiles, WorkspaceTrust, state_of,
};
use keel_render::visible_line;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

/// One value a project file asked for, for a person: `file:line: key = value — why`.
pub fn describe(value: &IgnoredValue) -> String {
    format!(
        "{}:{}: {} = {} — {}",
        visible_line(&value.file.display().to_string()),
        value.line,
        visible_line(&value.key),
        visible_line(&value.value),
        value.why
    )
}

/// `keel trust`: show what the workspace's project files ask for, then trust them.
pub fn run(common: &CommonArgs, args: &TrustArgs) -> anyhow::Result<Outcome> {
    let home = settings::keel_home()?;
    let store = TrustStore::in_home(&home);
    if args.list {
        return list(&store);
    }
    let workspace = match &args.dir {
        Some(dir) => {
            let dir = std::env::current_dir()?.join(dir);
            if !dir.is_dir() {
                return Err(UsageError(format!("{}: no such directory", dir.display())).into());
            }
            dir
        }
        None => settings::workspace(common)?,
    };
    let shown = visible_line(&workspace.display().to_string()).into_owned();
    if args.revoke {
        if store.revoke(&workspace)? {
            println!("{shown}: no longer trusted; its project files may only tighten settings");
        } else {
            println!("{shown} was not trusted");
        }
        return Ok(Outcome::Completed);
    }
    let files = settings::workspace_files(&workspace)?;
    if files.is_empty() {
        println!("{shown} has no keel.toml, .mcp.json or project hooks: nothing to trust");
        return Ok(Outcome::Completed);
    }
    let asked = untrusted_view(common, &home, files)?;
    print_asked(&shown, asked.ignored());
    print_files(asked.workspace_files());
    store.record(&workspace, asked.workspace_files())?;
    let names: Vec<&str> = asked.workspace_files().present().map(|f| f.name).collect();
    println!(
        "trusted {shown} for these exact contents of {} (a change to them asks again; \
         `keel trust --revoke` undoes this)",
        names.join(" and ")
    );
    Ok(Outcome::Completed)
}

/// The configuration as an untrusted workspace sees it: what its files ask for and do not get.
fn untrusted_view(
    common: &CommonArgs,
    home: &Path,
    files: WorkspaceFiles,
) -> anyhow::Result<KeelConfig> {
    Ok(KeelConfig::load(
        &home.join("config.toml"),
        files,
        WorkspaceTrust::Untrusted,
        settings::overrides(common),
    )?)
}

/// The most lines of a project file shown before trusting it.
const SHOWN_LINES: usize = 400;

/// Every line of each file, numbered and escaped: trusting a file applies all of it (a table's
/// command and arguments, values your settings allow today and would not tomorrow), so all of
/// it is shown, not only what loosens your settings now.
fn print_files(files: &WorkspaceFiles) {
    for file in files.present() {
        let lines: Vec<&str> = file.text.lines().collect();
        let shown = if file.name == keel_config::HOOK_SCRIPTS {
            format!("the hook scripts in {}", file.path.display())
        } else {
            file.path.display().to_string()
        };
        println!(
            "── {} ({} lines, all of it applies once trusted) ──",
            visible_line(&shown),
            lines.len()
        );
        for (number, line) in lines.iter().take(SHOWN_LINES).enumerate() {
            println!("{:>5} │ {}", number + 1, visible_line(line));
        }
        if lines.len() > SHOWN_LINES {
            println!(
                "      │ … {} more lines not shown: read the file before you trust it",
                lines.len() - SHOWN_LINES
            );
        }
    }
}

fn print_asked(workspace: &str, asked: &[IgnoredValue]) {
    if asked.is_empty() {
        println!("{workspace}: its project files ask for nothing beyond your own settings");
        return;
    }
    println!("{workspace}: its project files ask for what your own settings do not give:");
    for value in asked {
        println!("  {}", describe(value));
    }
}

fn list(store: &TrustStore) -> anyhow::Result<Outcome> {
    let records = store.list()?;
    if records.is_empty() {
        println!("no workspace is trusted");
    }
    for (path, record) in records {
        let state = match settings::workspace_files(&path) {
            Ok(files) => match state_of(&record, &files) {
                RecordState::Current => "trusted",
                RecordState::Changed => "changed since trusted (asks again)",
            },
            Err(_) => "cannot be read",
        };
        let names: Vec<&str> = record.files.keys().map(String::as_str).collect();
        println!(
            "{}  [{}]  {state}",
            visible_line(&path.display().to_string()),
            names.join(", ")
        );
    }
    Ok(Outcome::Completed)
}

/// The interactive session's question: when the workspace's project files ask for more than
/// the user's settings give, show it and ask once (default no). Records trust on "y".
/// Whether it asked.
pub fn ask_at_start(common: &CommonArgs, workspace: &Path) -> anyhow::Result<bool> {
    if common.trust_workspace || !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    let home = settings::keel_home()?;
    let files = settings::workspace_files(workspace)?;
    if files.is_empty()
        || settings::decide_trust(common, &home, workspace, &files) == WorkspaceTrust::Trusted
    {
        return Ok(false);
    }
    let asked = untrusted_view(common, &home, files)?;
    if asked.ignored().is_empty() {
        return Ok(false);
    }
    let shown = visible_line(&workspace.display().to_string()).into_owned();
    print_asked(&shown, asked.ignored());
    print_files(asked.workspace_files());
    print!("Trust this workspace and apply these files? They came with the repository. [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        TrustStore::in_home(&home).record(workspace, asked.workspace_files())?;
        println!("trusted (for these exact contents; `keel trust --revoke` undoes it)");
    } else {
        println!("not trusted: the session runs on your own settings");
    }
    Ok(true)
}
