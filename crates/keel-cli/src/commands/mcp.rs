//! `keel mcp list [--json]`: start every declared MCP server as a session would, and show
//! whether it runs, its tools, or why it is down.
//!
//! Invariants:
//! - The same declarations, environment rules and start-up timeout as a session; nothing is
//!   written, no key is needed, and every server is stopped before the command returns.
//! - Server-written text (reasons, stderr tails, tool names) is shown through `visible`, so it
//!   cannot drive the terminal.

use crate::cli::CommonArgs;
use crate::session_setup::{MCP_START_TIMEOUT, mcp_servers, start_mcp};
use crate::{Outcome, settings};
use keel_render::{visible, visible_line};

pub async fn list(common: &CommonArgs) -> anyhow::Result<Outcome> {
    let workspace = settings::workspace(common)?;
    let config = settings::load_config(common, &workspace)?;
    // The same rules as a session: a project's servers start in a trusted workspace only.
    let declared = mcp_servers(&config)?;
    for notice in &declared.notices {
        eprintln!("note: {}", keel_render::visible(notice));
    }
    for value in config
        .ignored()
        .iter()
        .filter(|value| value.key.starts_with("mcp"))
    {
        eprintln!(
            "note: not started (untrusted workspace; `keel trust` trusts it): {}",
            crate::commands::trust::describe(value)
        );
    }
    let servers = declared.trusted;
    // A listing waits for every server as long as a server may take.
    let secret_names = crate::session_setup::secrets(&config, Some(&crate::settings::keys()?))
        .env_names()
        .to_vec();
    let setup = crate::settings::sandbox_setup(&config)?;
    let sandbox = crate::session_setup::mcp_sandbox(Some(&setup), &workspace, &[])?;
    let hub = start_mcp(
        servers,
        workspace.clone(),
        MCP_START_TIMEOUT,
        secret_names,
        sandbox,
    )
    .await;
    let statuses = hub.statuses();
    if common.json {
        println!("{}", serde_json::to_string_pretty(&statuses)?);
        return Ok(Outcome::Completed);
    }
    if statuses.is_empty() {
        println!(
            "no MCP servers: declare them as [mcp_servers.NAME] in keel.toml or in {}",
            workspace.join(".mcp.json").display()
        );
        return Ok(Outcome::Completed);
    }
    for status in &statuses {
        println!(
            "{}  {}  ({})",
            visible_line(&status.name),
            status.state,
            visible_line(&status.origin)
        );
        if !status.tools.is_empty() {
            let names: Vec<String> = status
                .tools
                .iter()
                .map(|tool| format!("mcp__{}__{}", status.name, tool))
                .collect();
            println!("  tools: {}", visible_line(&names.join(", ")));
        }
        if let Some(reason) = &status.reason {
            for line in visible(reason).lines() {
                println!("  {line}");
            }
        }
    }
    Ok(Outcome::Completed)
}
