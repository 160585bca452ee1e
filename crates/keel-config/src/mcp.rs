//! MCP servers: `[mcp_servers.NAME]` tables of the config files and the workspace's
//! `.mcp.json`.
//!
//! Invariants:
//! - A name declared in several places is taken from the highest-precedence one only:
//!   `$KEEL_HOME/config.toml`, then `./keel.toml`, then `.mcp.json` (the user's own file
//!   decides, the file other agents share is the fallback).
//! - A project's servers (`./keel.toml`, `.mcp.json`) start only in a trusted workspace; in an
//!   untrusted one each is an `IgnoredValue`, never started and never silent.
//! - In keel's files, `env` and `headers` values name environment variables (`$NAME`): a
//!   secret never has to be written into a config file. A literal is an error naming the
//!   file, the line and the key.
//! - Servers come out sorted by name, so the tool list built from them is stable.

use crate::config::KeelConfig;
use crate::error::ConfigError;
use crate::layer::LayerKind;
use crate::trust::WorkspaceTrust;
use keel_mcp::{ServerConfig, Transport, parse_mcp_json, valid_server_name};
use std::collections::BTreeMap;

impl KeelConfig {
    /// Every MCP server this configuration may start — the user's, and a project's only in a
    /// trusted workspace (an untrusted project's are in `ignored()`) — and what was wrong with
    /// a `.mcp.json` that could not be read (the session goes on without it).
    pub fn mcp_servers(&self) -> Result<(Vec<ServerConfig>, Vec<String>), ConfigError> {
        let mut servers: BTreeMap<String, ServerConfig> = BTreeMap::new();
        let mut problems = Vec::new();
        // The user's own file first: it wins a name clash with the project's.
        let mut layers: Vec<_> = self.layers.iter().collect();
        layers.sort_by_key(|layer| layer.kind == LayerKind::Project);
        for layer in layers {
            let from_project = layer.kind == LayerKind::Project;
            for (name, spanned) in &layer.raw.mcp_servers {
                if servers.contains_key(name) {
                    continue;
                }
                let fail = |message: String| layer.error(spanned.span(), message);
                if !valid_server_name(name) {
                    return Err(fail(format!(
                        "server name `{name}` must be letters, digits, `_` or `-`, without `__`"
                    )));
                }
                let raw = spanned.get_ref();
                for (kind, map) in [("env", &raw.env), ("headers", &raw.headers)] {
                    if let Some((key, _)) = map.iter().find(|(_, value)| !value.starts_with('$')) {
                        return Err(fail(format!(
                            "`{kind}.{key}` must name an environment variable (`\"$NAME\"`): \
                             values come from the environment, never from the file"
                        )));
                    }
                }
                let transport = match (&raw.command, &raw.url) {
                    (Some(command), None) => Transport::Stdio {
                        command: command.clone(),
                        args: raw.args.clone(),
                        env: raw.env.clone(),
                        cwd: raw.cwd.as_ref().map(|cwd| cwd.into()),
                    },
                    (None, Some(url)) => Transport::Http {
                        url: url.clone(),
                        headers: raw.headers.clone(),
                    },
                    (Some(_), Some(_)) => {
                        return Err(fail(
                            "give `command` (stdio) or `url` (HTTP), not both".into(),
                        ));
                    }
                    (None, None) => {
                        return Err(fail(
                            "needs `command` (a stdio server) or `url` (an HTTP server)".into(),
                        ));
                    }
                };
                servers.insert(
                    name.clone(),
                    ServerConfig {
                        name: name.clone(),
                        transport,
                        // A project's file comes with the repository: like a `.mcp.json`, it
                        // cannot trust hints.
                        trust_read_only: raw.trust_read_only && !from_project,
                        origin: layer.path.display().to_string(),
                        from_workspace: from_project,
                        literal_values: from_project,
                        sandbox: raw.sandbox.unwrap_or_default(),
                    },
                );
            }
        }
        if self.trust == WorkspaceTrust::Trusted
            && let Some(shared) = &self.project.mcp_json
        {
            match parse_mcp_json(&shared.text, &shared.path) {
                Ok(declared) => {
                    for server in declared {
                        servers.entry(server.name.clone()).or_insert(server);
                    }
                }
                Err(error) => problems.push(format!(
                    "{}: its MCP servers were not read: {error}",
                    shared.path.display()
                )),
            }
        }
        Ok((servers.into_values().collect(), problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkspaceFile;
    use crate::config::Overrides;
    use std::path::{Path, PathBuf};

    fn config(text: &str) -> Result<KeelConfig, ConfigError> {
        KeelConfig::from_texts(
            vec![(PathBuf::from("/home/keel.toml"), text.to_string())],
            Overrides::default(),
        )
    }

    const SHARED: &str = r#"{"mcpServers": {"files": {"command": "other"},
 "docs": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}"#;

    fn with_shared(trust: WorkspaceTrust) -> KeelConfig {
        let shared = WorkspaceFile::from_text(
            Path::new("/w/.mcp.json"),
            crate::workspace_files::SHARED_MCP_FILE,
            SHARED.into(),
        );
        KeelConfig::from_parts(
            Some((
                PathBuf::from("/home/keel.toml"),
                "[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = { TOKEN = \"$TOKEN\" }\ntrust_read_only = true\n".into(),
            )),
            crate::WorkspaceFiles {
                keel_toml: None,
                mcp_json: Some(shared),
                ..crate::WorkspaceFiles::default()
            },
            trust,
            Overrides::default(),
        )
        .unwrap()
    }

    #[test]
    fn an_untrusted_workspace_file_starts_nothing_and_says_so_by_line() {
        let config = with_shared(WorkspaceTrust::Untrusted);
        let (servers, _) = config.mcp_servers().unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["files"], "only the user's own server");
        let ignored: Vec<(usize, &str)> = config
            .ignored()
            .iter()
            .map(|value| (value.line, value.key.as_str()))
            .collect();
        assert_eq!(ignored, [(2, "mcpServers.docs"), (1, "mcpServers.files")]);
        assert!(config.ignored()[0].value.contains("127.0.0.1:1"));
    }

    #[test]
    fn servers_come_from_the_files_and_the_workspace_file_in_that_order() {
        let config = with_shared(WorkspaceTrust::Trusted);
        assert!(config.ignored().is_empty());
        let (servers, _) = config.mcp_servers().unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["docs", "files"]);
        assert!(
            matches!(&servers[1].transport, Transport::Stdio { command, .. } if command == "npx")
        );
        assert!(servers[1].trust_read_only);
        assert_eq!(servers[1].origin, "/home/keel.toml");
    }

    #[test]
    fn literal_secrets_and_bad_tables_are_refused_with_file_and_line() {
        let error =
            config("\n[mcp_servers.gh]\ncommand = \"x\"\nenv = { GITHUB_TOKEN = \"ghp_123\" }\n")
                .unwrap()
                .mcp_servers()
                .unwrap_err()
                .to_string();
        assert!(error.contains("/home/keel.toml:2"), "{error}");
        assert!(
            error.contains("`env.GITHUB_TOKEN` must name an environment variable"),
            "{error}"
        );
        assert!(!error.contains("ghp_123"), "the value is never repeated");
        for (text, wanted) in [
            ("[mcp_servers.a]\n", "needs `command`"),
            (
                "[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://x\"\n",
                "not both",
            ),
            ("[mcp_servers.a__b]\ncommand = \"x\"\n", "without `__`"),
        ] {
            let error = config(text).unwrap().mcp_servers().unwrap_err().to_string();
            assert!(error.contains(wanted), "{error}");
        }
        let unknown = config("[mcp_servers.a]\ncommand = \"x\"\nbogus = 1\n").unwrap_err();
        assert!(unknown.to_string().contains("bogus"), "{unknown}");
    }
}
