//! `keel acp`: the Agent Client Protocol agent (`keel-acp`) on stdin/stdout, with sessions
//! built from the user's configuration as `keel run` builds them, in the directory the editor
//! names.
//!
//! Invariants:
//! - stdout carries protocol only; everything for people goes to stderr.
//! - When the editor closes stdin, running turns are cancelled and settled, and keel exits 0.
//! - When the editor offers `fs.readTextFile` and `fs.writeTextFile`, file tools read and write
//!   workspace files through it (after the same workspace guard).

use crate::Outcome;
use crate::cli::CommonArgs;
use crate::session_setup::{args_for, open_controller, open_host, prepare_on};
use keel_acp::AcpSessions;
use keel_agent::{AgentError, Approver, Controller, Host, SessionChoice};
use keel_tools::EditorFiles;
use std::path::Path;
use std::sync::Arc;

struct CliAcpSessions {
    common: CommonArgs,
    host: Host,
}

impl AcpSessions for CliAcpSessions {
    fn open(
        &self,
        choice: SessionChoice,
        cwd: &Path,
        approver: Arc<dyn Approver>,
        editor: Option<Arc<dyn EditorFiles>>,
        mcp_servers: Vec<keel_mcp::ServerConfig>,
    ) -> Result<Controller, String> {
        let mut common = args_for(&self.common, choice);
        common.cwd = Some(cwd.to_path_buf());
        prepare_on(&common, "keel acp", self.host.clone())
            .and_then(|mut setup| {
                setup.editor = editor;
                // The editor's servers join the configured ones (which win a name clash).
                for server in mcp_servers {
                    if !setup.mcp_servers.iter().any(|s| s.name == server.name) {
                        setup.mcp_servers.push(server);
                    }
                }
                open_controller(setup, approver)
            })
            .map_err(|error| match error.downcast_ref::<AgentError>() {
                Some(agent) => agent.to_string(),
                None => format!("{error:#}"),
            })
    }

    fn exists(&self, id: &str) -> bool {
        matches!(self.host.session(id), Ok(Some(_)))
    }

    fn fork(&self, source: &str, at: Option<u64>) -> Result<String, String> {
        self.host
            .fork(source, at)
            .map(|forked| forked.id)
            .map_err(|error| error.to_string())
    }
}

pub async fn run(common: &CommonArgs) -> anyhow::Result<Outcome> {
    if common.trust_workspace {
        // An editor opens any directory it likes: one flag must not trust them all.
        return Err(crate::UsageError(
            "--trust-workspace does not apply to `keel acp` (an editor opens any directory): run \
             `keel trust DIR` for each workspace you trust"
                .into(),
        )
        .into());
    }
    let sessions = Arc::new(CliAcpSessions {
        common: common.clone(),
        host: open_host()?,
    });
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    keel_acp::run(stdin, tokio::io::stdout(), sessions).await?;
    Ok(Outcome::Completed)
}
