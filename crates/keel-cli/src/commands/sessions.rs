//! `keel sessions` and `keel session show`.
//!
//! Invariants:
//! - Both only read: no lease is taken and nothing is settled or written.
//! - A history row that cannot be decoded is shown as such, never hidden.
//! - A reader that closes the pipe early (`| head`) ends the output quietly, never a panic.

use crate::cli::CommonArgs;
use crate::session_setup::open_host;
use crate::{Outcome, UsageError, settings};
use keel_agent::{RecordState, SessionOverview, StoredRecord};
use keel_render::{visible, visible_line};
use keel_types::{Item, ReceiptState};
use serde_json::json;

/// `println!` for output that may go to a pipe: when the reader has gone (`| head`), stop
/// quietly instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            return Ok(Outcome::Completed);
        }
    }};
}

/// `keel sessions [--all]`: with `all`, each listed session's children (a subagent's sessions)
/// follow it.
pub fn list(common: &CommonArgs, all: bool) -> anyhow::Result<Outcome> {
    let workspace = settings::workspace(common)?;
    let host = open_host()?;
    // A session nobody typed into (a browser tab opened and left), or one that failed before
    // any answer and holds no offer to go on, is not worth listing.
    let mut sessions = listed(&host, &workspace.display().to_string())?;
    if all {
        sessions = with_children(&host, &workspace.display().to_string(), sessions)?;
    }
    if common.json {
        let rows: Vec<serde_json::Value> = sessions
            .iter()
            .map(keel_agent::SessionOverview::to_json)
            .collect();
        out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(Outcome::Completed);
    }
    if sessions.is_empty() {
        out!(
            "no sessions in {}",
            visible_line(&workspace.display().to_string())
        );
        return Ok(Outcome::Completed);
    }
    for row in rows(&sessions) {
        out!("{row}");
    }
    Ok(Outcome::Completed)
}

/// The sessions `keel sessions` (and `/sessions`) lists in `workspace`, newest first.
pub fn listed(host: &keel_agent::Host, workspace: &str) -> anyhow::Result<Vec<SessionOverview>> {
    Ok(host
        .session_overviews(workspace)?
        .into_iter()
        .filter(SessionOverview::listed)
        .collect())
}

/// `sessions` with each one's child sessions (those that ran a turn) right after it.
fn with_children(
    host: &keel_agent::Host,
    workspace: &str,
    sessions: Vec<SessionOverview>,
) -> anyhow::Result<Vec<SessionOverview>> {
    let every = host.session_overviews(workspace)?;
    let mut out = Vec::with_capacity(every.len());
    for session in sessions {
        let id = session.info.id.clone();
        out.push(session);
        let mut children: Vec<SessionOverview> = every
            .iter()
            .filter(|child| child.info.parent.as_deref() == Some(id.as_str()) && child.turns > 0)
            .cloned()
            .collect();
        children.sort_by_key(|child| child.info.created_at);
        out.extend(children);
    }
    Ok(out)
}

/// One line per session: id, age, turns, model, title (stored text: escaped); a child session
/// indented under its parent, with its agent.
pub fn rows(sessions: &[SessionOverview]) -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        });
    sessions
        .iter()
        .map(|overview| {
            let session = &overview.info;
            let ago = std::time::Duration::from_millis(
                u64::try_from(now.saturating_sub(session.updated_at)).unwrap_or(0),
            );
            let (indent, agent) = match (&session.parent, &session.agent) {
                (Some(_), Some(agent)) => ("  └ ", format!("[{}] ", visible_line(agent))),
                _ => ("", String::new()),
            };
            format!(
                "{indent}{}  {:>9}  {:>3} turn{}  {}  {agent}{}",
                session.id,
                format!("{} ago", humanize_roughly(ago)),
                overview.turns,
                if overview.turns == 1 { " " } else { "s" },
                visible_line(&format!("{}/{}", session.provider, session.model)),
                visible_line(&overview.title)
            )
        })
        .collect()
}

/// `keel session rm ID`.
pub fn remove(common: &CommonArgs, id: &str) -> anyhow::Result<Outcome> {
    let host = open_host()?;
    if host.session(id)?.is_none() {
        return Err(UsageError(format!(
            "no session `{}`: `keel sessions` lists this workspace's sessions",
            visible_line(id)
        ))
        .into());
    }
    let left = host.remove_session(id, &settings::keel_home()?)?;
    if common.json {
        out!("{}", json!({"removed": [id], "left_on_disk": left}));
    } else {
        out!("removed session {id}");
        for what in left {
            eprintln!("could not remove {}", visible_line(&what));
        }
    }
    Ok(Outcome::Completed)
}

/// `keel sessions --prune AGE`: remove this workspace's sessions not used for `age`.
pub fn prune(common: &CommonArgs, age: &str) -> anyhow::Result<Outcome> {
    let age = parse_age(age)?;
    let workspace = settings::workspace(common)?;
    let host = open_host()?;
    let keel_home = settings::keel_home()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        });
    let cutoff = now.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    for session in host.sessions_for_workspace(&workspace.display().to_string())? {
        // A child session goes with its parent, never on its own.
        if session.updated_at >= cutoff || session.parent.is_some() {
            continue;
        }
        match host.remove_session(&session.id, &keel_home) {
            Ok(_) => removed.push(session.id),
            Err(error) => kept.push((session.id, error.to_string())),
        }
    }
    if common.json {
        out!(
            "{}",
            json!({"removed": removed, "kept": kept.iter().map(|(id, why)| json!({"id": id, "why": why})).collect::<Vec<_>>()})
        );
        return Ok(Outcome::Completed);
    }
    out!(
        "removed {} session(s) not used for {}",
        removed.len(),
        humanize(age)
    );
    for (id, why) in kept {
        out!("kept {id}: {}", visible_line(&why));
    }
    Ok(Outcome::Completed)
}

/// `30d`, `12h`, `90m`, `2w`, `45s`.
fn parse_age(text: &str) -> Result<std::time::Duration, UsageError> {
    let bad = || {
        UsageError(format!(
            "--prune {}: write an age such as 30d, 12h, 90m or 2w",
            visible_line(text)
        ))
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    Ok(std::time::Duration::from_secs(
        number.saturating_mul(seconds),
    ))
}

/// An age in the largest unit it fills (`3d`, `5h`, `12m`, `now`).
fn humanize_roughly(age: std::time::Duration) -> String {
    let seconds = age.as_secs();
    for (unit, size) in [("w", 7 * 86_400), ("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds >= size {
            return format!("{}{unit}", seconds / size);
        }
    }
    "<1m".to_string()
}

/// An age in the largest whole unit.
fn humanize(age: std::time::Duration) -> String {
    let seconds = age.as_secs();
    for (unit, size) in [("w", 7 * 86_400), ("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds >= size && seconds.is_multiple_of(size) {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// `keel session show ID --saved PATH`: what PATH held before a rewind of the session wrote
/// it back — its exact bytes on stdout (the newest version kept), or every version as JSON.
pub fn show_saved(common: &CommonArgs, id: &str, path: &str) -> anyhow::Result<Outcome> {
    use std::io::Write as _;
    let host = open_host()?;
    let Some(session) = host.session(id)? else {
        return Err(UsageError(format!(
            "no session `{id}`: `keel sessions` lists this workspace's sessions"
        ))
        .into());
    };
    let versions = host.saved_versions(id)?;
    // As the rewind named it, or relative to the session's workspace.
    let absolute = std::path::Path::new(&session.workspace)
        .join(path)
        .display()
        .to_string();
    let matching: Vec<_> = versions
        .iter()
        .filter(|(version, _)| version.path == path || version.path == absolute)
        .collect();
    if matching.is_empty() {
        let kept: Vec<String> = versions
            .iter()
            .map(|(version, _)| visible_line(&version.path).into_owned())
            .collect();
        return Err(UsageError(if kept.is_empty() {
            format!("session `{id}` kept no file's earlier version")
        } else {
            format!(
                "session `{id}` kept no version of {}; it kept: {}",
                visible_line(path),
                kept.join(", ")
            )
        })
        .into());
    }
    if common.json {
        let listed: Vec<serde_json::Value> = matching
            .iter()
            .map(|(version, bytes)| {
                serde_json::json!({
                    "number": version.number,
                    "path": version.path,
                    "sha256": version.hash,
                    "bytes": bytes.len(),
                    "text": String::from_utf8(bytes.clone()).ok(),
                    "rewound_to_turn": version.turn,
                    "saved_at_ms": version.saved_at_ms,
                })
            })
            .collect();
        println!("{}", serde_json::to_string(&listed)?);
    } else if let Some((_, bytes)) = matching.last() {
        use std::io::IsTerminal as _;
        let mut stdout = std::io::stdout().lock();
        if stdout.is_terminal() {
            // A person reads it: what a command may have written there reaches no terminal
            // as control sequences.
            writeln!(stdout, "{}", visible(&String::from_utf8_lossy(bytes)))?;
            eprintln!("(control characters shown as symbols; `> FILE` gets the exact bytes back)");
        } else {
            // The exact bytes: `> file` gets the file back as it was.
            stdout.write_all(bytes)?;
        }
        stdout.flush()?;
    }
    Ok(Outcome::Completed)
}

pub fn show(common: &CommonArgs, id: &str, revision: Option<u64>) -> anyhow::Result<Outcome> {
    let host = open_host()?;
    if host.session(id)?.is_none() {
        return Err(UsageError(format!(
            "no session `{id}`: `keel sessions` lists this workspace's sessions"
        ))
        .into());
    }
    let transcript = match revision {
        Some(revision) => host
            .transcript_at(id, revision)
            .map_err(|error| match error {
                keel_agent::AgentError::Store(store_error) if error_is_revision(&store_error) => {
                    anyhow::Error::from(UsageError(store_error.to_string()))
                }
                other => other.into(),
            })?,
        None => host.transcript(id)?,
    };
    let keel_agent::Transcript {
        session,
        items,
        receipts,
        revision,
        revisions,
    } = transcript;
    if common.json {
        let items: Vec<serde_json::Value> = items
            .iter()
            .map(|stored| match &stored.item {
                Ok(item) => serde_json::to_value(item).unwrap_or_default(),
                Err(reason) => json!({"revision": stored.revision, "undecodable": reason}),
            })
            .collect();
        let value = json!({"id": session.id, "workspace": session.workspace,
            "model": format!("{}/{}", session.provider, session.model),
            "revision": revision, "revisions": revisions,
            "items": items, "receipts": receipts});
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(Outcome::Completed);
    }
    out!(
        "session {} · {}/{} · {}",
        session.id,
        session.provider,
        session.model,
        session.workspace
    );
    if revisions.len() > 1 {
        out!("history revisions (this is {revision}):");
        for info in &revisions {
            let how = match info.revision {
                1 => "the start".to_string(),
                _ => format!(
                    "{}: {} items compacted, about {} → {} tokens",
                    info.reason, info.replaced, info.tokens_before, info.tokens_after
                ),
            };
            out!("  {} · {} items · {how}", info.revision, info.items);
        }
        out!(
            "  (keel session show {} --revision N shows one)",
            session.id
        );
    }
    for stored in &items {
        match &stored.item {
            Err(reason) => out!(
                "[history item {} cannot be read: {reason}]",
                stored.revision
            ),
            Ok(Item::User { text }) => out!("\nyou: {}", visible(text)),
            Ok(Item::Summary(summary)) => out!("\n⟲ {}", visible(&summary.text)),
            Ok(Item::Context(block)) => out!(
                "\n⌂ context: {} instruction file(s), environment",
                block
                    .sources
                    .iter()
                    .filter(|source| source.kept > 0)
                    .count()
            ),
            Ok(Item::Assistant(assistant)) => {
                let text = assistant.text();
                if !text.is_empty() {
                    out!("keel: {}", visible(&text));
                }
                for part in &assistant.parts {
                    if let keel_types::AssistantPart::WebSearch(search) = part {
                        let status =
                            search
                                .sources_status
                                .map_or("sources status not recorded", |status| match status {
                                    keel_types::SourcesStatus::Available => "sources available",
                                    keel_types::SourcesStatus::NotProvided => {
                                        "no structured sources"
                                    }
                                });
                        out!("⌕ web search `{}` — {status}", visible_line(&search.query));
                    }
                }
                for call in assistant.tool_calls() {
                    out!(
                        "● {} {}",
                        visible_line(&call.name),
                        visible_line(&call.arguments)
                    );
                }
            }
            Ok(Item::ToolResult(result)) => {
                let first = result.content.lines().next().unwrap_or("");
                out!(
                    "  ⎿ {}{}",
                    if result.is_error { "error: " } else { "" },
                    visible_line(first)
                );
            }
        }
    }
    if !receipts.is_empty() {
        out!("\ntool calls:");
        for receipt in &receipts {
            let note = match receipt.state {
                ReceiptState::Unknown => " — keel stopped while it ran; it was not run again",
                ReceiptState::Started => " — running now",
                ReceiptState::NotStarted => " — never started",
                ReceiptState::Pending
                | ReceiptState::Completed
                | ReceiptState::Failed
                | ReceiptState::Denied
                | ReceiptState::Cancelled => "",
            };
            let summary = visible_line(receipt.summary.as_deref().unwrap_or("")).into_owned();
            let sandbox = receipt
                .sandbox
                .as_deref()
                .map(|mode| format!(" [sandbox {}]", visible_line(mode)))
                .unwrap_or_default();
            out!(
                "  {} {} {}{note}{sandbox} {summary}",
                visible_line(&receipt.call_id),
                visible_line(&receipt.tool),
                receipt.state
            );
        }
    }
    Ok(Outcome::Completed)
}

pub fn recovery(common: &CommonArgs, id: &str) -> anyhow::Result<Outcome> {
    let host = open_host()?;
    if host.session(id)?.is_none() {
        return Err(UsageError(format!(
            "no session `{id}`: `keel sessions` lists this workspace's sessions"
        ))
        .into());
    }
    let latest = host.latest_recovery(id)?;
    if common.json {
        let value = latest.map_or(serde_json::Value::Null, |record| record.to_json());
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(Outcome::Completed);
    }
    match latest {
        None => out!("no recovery record in session {id}"),
        Some(StoredRecord::Known(record)) => {
            out!(
                "recovery {} · {} · turn {} · {} provider-visible messages",
                record.id,
                record.state.as_str(),
                record.run,
                record.prefix
            );
            if record.state == RecordState::Pending {
                out!(
                    "recover with: keel run --session {id} \"/recover-context {}\"",
                    record.id
                );
            }
        }
        Some(StoredRecord::Unrecoverable {
            id: record_id,
            reason,
            ..
        }) => {
            out!("recovery {record_id} cannot be used by this keel: {reason}");
        }
    }
    Ok(Outcome::Completed)
}

fn error_is_revision(error: &keel_agent::StoreError) -> bool {
    matches!(error, keel_agent::StoreError::NoSuchRevision { .. })
}
