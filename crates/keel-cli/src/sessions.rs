//! `keel sessions` and `keel session show`.
//!
//! Invariants:
//! - Both only read: no lease is taken and nothing is settled or written.
//! - A history row that cannot be decoded is shown as such, never hidden.

use crate::cli::CommonArgs;
use crate::session_setup::open_host;
use crate::terminal_text::{visible, visible_line};
use crate::{Outcome, UsageError, settings};
use keel_agent::{RecordState, StoredRecord};
use keel_types::{Item, ReceiptState};
use serde_json::json;

pub fn list(common: &CommonArgs) -> anyhow::Result<Outcome> {
    let workspace = settings::workspace(common)?;
    let host = open_host()?;
    let sessions = host.sessions_for_workspace(&workspace.display().to_string())?;
    if common.json {
        let rows: Vec<serde_json::Value> = sessions
            .iter()
            .map(|s| {
                json!({"id": s.id, "workspace": s.workspace, "model": format!("{}/{}", s.provider, s.model),
                       "provider": s.provider, "created_at": s.created_at, "updated_at": s.updated_at})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(Outcome::Completed);
    }
    if sessions.is_empty() {
        println!("no sessions in {}", workspace.display());
        return Ok(Outcome::Completed);
    }
    for session in sessions {
        let first_prompt = host
            .transcript(&session.id)?
            .items
            .into_iter()
            .find_map(|stored| match stored.item {
                Ok(Item::User { text }) => Some(text),
                Ok(_) | Err(_) => None,
            })
            .unwrap_or_default();
        let first_line: String = first_prompt
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        println!(
            "{}  {}/{}  {}",
            session.id,
            session.provider,
            session.model,
            visible_line(&first_line)
        );
    }
    Ok(Outcome::Completed)
}

pub fn show(common: &CommonArgs, id: &str) -> anyhow::Result<Outcome> {
    let host = open_host()?;
    if host.session(id)?.is_none() {
        return Err(UsageError(format!(
            "no session `{id}`: `keel sessions` lists this workspace's sessions"
        ))
        .into());
    }
    let keel_agent::Transcript {
        session,
        items,
        receipts,
    } = host.transcript(id)?;
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
            "items": items, "receipts": receipts});
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(Outcome::Completed);
    }
    println!(
        "session {} · {}/{} · {}",
        session.id, session.provider, session.model, session.workspace
    );
    for stored in &items {
        match &stored.item {
            Err(reason) => println!(
                "[history item {} cannot be read: {reason}]",
                stored.revision
            ),
            Ok(Item::User { text }) => println!("\nyou: {}", visible(text)),
            Ok(Item::Assistant(assistant)) => {
                let text = assistant.text();
                if !text.is_empty() {
                    println!("keel: {}", visible(&text));
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
                        println!("⌕ web search `{}` — {status}", visible_line(&search.query));
                    }
                }
                for call in assistant.tool_calls() {
                    println!(
                        "● {} {}",
                        visible_line(&call.name),
                        visible_line(&call.arguments)
                    );
                }
            }
            Ok(Item::ToolResult(result)) => {
                let first = result.content.lines().next().unwrap_or("");
                println!(
                    "  ⎿ {}{}",
                    if result.is_error { "error: " } else { "" },
                    visible_line(first)
                );
            }
        }
    }
    if !receipts.is_empty() {
        println!("\nreceipts:");
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
            println!(
                "  {} {} {}{note} {summary}",
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
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(Outcome::Completed);
    }
    match latest {
        None => println!("no recovery record in session {id}"),
        Some(StoredRecord::Known(record)) => {
            println!(
                "recovery {} · {} · turn {} · {} provider-visible messages",
                record.id,
                record.state.as_str(),
                record.run,
                record.prefix
            );
            if record.state == RecordState::Pending {
                println!(
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
            println!("recovery {record_id} cannot be used by this keel: {reason}");
        }
    }
    Ok(Outcome::Completed)
}
