//! MCP server declarations: `[mcp_servers.NAME]` in keel's config (built by keel-config) and a
//! workspace `.mcp.json` in the format other agents use.
//!
//! Invariants:
//! - A server name is `[A-Za-z0-9_-]+` and contains no `__`, so `mcp__<server>__<tool>` splits
//!   back into exactly one server and one tool.
//! - Values that may be secrets come from the environment: an `env` or `headers` value of the
//!   form `$NAME` or `${NAME}` is read from keel's environment when the server starts; a missing
//!   variable is an error naming it, never an empty value sent silently.
//! - Parsing never panics; an error names the file, the server and the field.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How keel reaches one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Variables added to the minimal base environment (values may be `$VAR`).
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One declared server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// Run tools the server marks `readOnlyHint` without asking.
    pub trust_read_only: bool,
    /// Where it was declared (a file), for messages.
    pub origin: String,
    /// Declared by the workspace (`.mcp.json`, which a cloned repository brings along) rather
    /// than by the user: started only with the user's consent, and `$VAR` values are not read
    /// from keel's environment (a repository never gets the user's secrets through it).
    pub from_workspace: bool,
    /// `$VAR` values are passed as written, never read from keel's environment (workspace
    /// files, and servers an ACP client declares).
    pub literal_values: bool,
    /// How a stdio server is confined (`mcp` unless the user's config says otherwise).
    pub sandbox: keel_sandbox::ServerConfinement,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
}

fn invalid(origin: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.to_string(),
        message: message.into(),
    }
}

/// Whether `name` may name a server (see the module invariants).
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains("__")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The servers of a `.mcp.json` (`{"mcpServers": {NAME: {command, args, env, cwd} |
/// {type: "http", url, headers}}}`), sorted by name.
pub fn parse_mcp_json(text: &str, path: &Path) -> Result<Vec<ServerConfig>, ConfigError> {
    let origin = path.display().to_string();
    let value: Value = serde_json::from_str(text)
        .map_err(|error| invalid(&origin, format!("not valid JSON: {error}")))?;
    let Some(servers) = value.get("mcpServers") else {
        return Ok(Vec::new());
    };
    let servers = servers
        .as_object()
        .ok_or_else(|| invalid(&origin, "`mcpServers` must be an object of servers"))?;
    let mut parsed = Vec::new();
    for (name, entry) in servers {
        let at = format!("{origin}: server `{name}`");
        if !valid_server_name(name) {
            return Err(invalid(
                &origin,
                format!("server name `{name}` must be letters, digits, `_` or `-`, without `__`"),
            ));
        }
        let entry = entry
            .as_object()
            .ok_or_else(|| invalid(&at, "must be an object"))?;
        let string = |key: &str| -> Result<Option<String>, ConfigError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(invalid(&at, format!("`{key}` must be a string"))),
            }
        };
        let map = |key: &str| -> Result<BTreeMap<String, String>, ConfigError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(BTreeMap::new()),
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(text) => Ok((k.clone(), text.clone())),
                        _ => Err(invalid(&at, format!("`{key}.{k}` must be a string"))),
                    })
                    .collect(),
                Some(_) => Err(invalid(
                    &at,
                    format!("`{key}` must be an object of strings"),
                )),
            }
        };
        let kind = string("type")?;
        let transport = match (kind.as_deref(), string("url")?, string("command")?) {
            (Some("http" | "streamable-http" | "streamableHttp"), Some(url), _)
            | (None, Some(url), None) => Transport::Http {
                url,
                headers: map("headers")?,
            },
            (None | Some("stdio"), None, Some(command)) => {
                let args = match entry.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|item| {
                            item.as_str()
                                .map(str::to_string)
                                .ok_or_else(|| invalid(&at, "`args` must be strings"))
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err(invalid(&at, "`args` must be an array of strings")),
                };
                Transport::Stdio {
                    command,
                    args,
                    env: map("env")?,
                    cwd: string("cwd")?.map(PathBuf::from),
                }
            }
            (Some(other), _, _)
                if !matches!(
                    other,
                    "stdio" | "http" | "streamable-http" | "streamableHttp"
                ) =>
            {
                return Err(invalid(
                    &at,
                    // A workspace's file: its value is not repeated.
                    "`type` is not known (use `stdio` or `http`)".to_string(),
                ));
            }
            _ => {
                return Err(invalid(
                    &at,
                    "needs `command` (a stdio server) or `url` (an HTTP server)",
                ));
            }
        };
        parsed.push(ServerConfig {
            name: name.clone(),
            transport,
            // Only the user's own config can trust a server's read-only hints.
            trust_read_only: false,
            origin: origin.clone(),
            from_workspace: true,
            literal_values: true,
            sandbox: keel_sandbox::ServerConfinement::default(),
        });
    }
    parsed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(parsed)
}

/// The servers an ACP client declares in `session/new` (`mcpServers`: `{name, command, args,
/// env: [{name, value}]}` or `{type: "http", name, url, headers: [{name, value}]}`), sorted by
/// name. Their values are literal.
pub fn parse_acp_servers(servers: &Value) -> Result<Vec<ServerConfig>, ConfigError> {
    let origin = "the ACP client's `mcpServers`";
    let Some(servers) = servers.as_array() else {
        return Err(invalid(origin, "must be an array"));
    };
    let mut parsed = Vec::new();
    for entry in servers {
        let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
        if !valid_server_name(name) {
            return Err(invalid(
                origin,
                format!(
                    "server name `{}` must be letters, digits, `_` or `-`, without `__`",
                    name.escape_default()
                ),
            ));
        }
        let at = format!("{origin}: server `{name}`");
        let pairs = |key: &str| -> Result<BTreeMap<String, String>, ConfigError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(BTreeMap::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        let name = item.get("name").and_then(Value::as_str);
                        let value = item.get("value").and_then(Value::as_str);
                        match (name, value) {
                            (Some(name), Some(value)) => Ok((name.to_string(), value.to_string())),
                            _ => Err(invalid(
                                &at,
                                format!("`{key}` items need `name` and `value`"),
                            )),
                        }
                    })
                    .collect(),
                Some(_) => Err(invalid(&at, format!("`{key}` must be an array"))),
            }
        };
        let transport = match entry.get("type").and_then(Value::as_str) {
            Some("http") => Transport::Http {
                url: entry
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid(&at, "an http server needs `url`"))?
                    .to_string(),
                headers: pairs("headers")?,
            },
            Some("sse") => {
                return Err(invalid(
                    &at,
                    "SSE servers are not supported; use streamable HTTP",
                ));
            }
            Some("stdio") | None => Transport::Stdio {
                command: entry
                    .get("command")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid(&at, "a stdio server needs `command`"))?
                    .to_string(),
                args: entry
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|args| {
                        args.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                env: pairs("env")?,
                cwd: None,
            },
            Some(other) => {
                return Err(invalid(
                    &at,
                    format!("`type` `{}` is not known", other.escape_default()),
                ));
            }
        };
        parsed.push(ServerConfig {
            name: name.to_string(),
            transport,
            trust_read_only: false,
            origin: origin.to_string(),
            from_workspace: false,
            literal_values: true,
            sandbox: keel_sandbox::ServerConfinement::default(),
        });
    }
    parsed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(parsed)
}

/// A configured value: `$NAME` / `${NAME}` read from `lookup`, anything else as written.
pub fn resolve_value(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let name = value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .or_else(|| value.strip_prefix('$'));
    match name {
        Some(name) if !name.is_empty() => {
            lookup(name).ok_or_else(|| format!("the environment variable `{name}` is not set"))
        }
        Some(_) | None => Ok(value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_other_agents_use_is_read() {
        let text = r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": {"DEBUG": "1"}},
            "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "$TOKEN"}}
        }}"#;
        let servers = parse_mcp_json(text, Path::new("/w/.mcp.json")).unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "files");
        assert!(
            matches!(&servers[0].transport, Transport::Stdio { command, args, .. }
            if command == "npx" && args.len() == 3)
        );
        assert!(
            matches!(&servers[1].transport, Transport::Http { url, .. } if url.ends_with("/mcp"))
        );
    }

    #[test]
    fn bad_declarations_name_the_file_and_the_server() {
        let cases = [
            (
                r#"{"mcpServers": {"a__b": {"command": "x"}}}"#,
                "must be letters",
            ),
            (
                r#"{"mcpServers": {"s": {"args": []}}}"#,
                "server `s`: needs `command`",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "x", "args": "no"}}}"#,
                "`args` must be an array",
            ),
            (
                r#"{"mcpServers": {"s": {"type": "ws", "url": "x"}}}"#,
                "`type` is not known",
            ),
            (r#"{"mcpServers": [1]}"#, "must be an object of servers"),
            ("{nope", "not valid JSON"),
        ];
        for (text, wanted) in cases {
            let error = parse_mcp_json(text, Path::new("/w/.mcp.json")).unwrap_err();
            let message = error.to_string();
            assert!(
                message.starts_with("/w/.mcp.json") && message.contains(wanted),
                "{message}"
            );
        }
        assert_eq!(parse_mcp_json("{}", Path::new("x")).unwrap(), Vec::new());
    }

    #[test]
    fn an_acp_clients_servers_are_read_with_literal_values() {
        let servers = serde_json::json!([
            {"name": "files", "command": "npx", "args": ["-y", "x"], "env": [{"name": "A", "value": "$HOME"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": []}
        ]);
        let parsed = parse_acp_servers(&servers).unwrap();
        assert_eq!(parsed.len(), 2);
        assert!(parsed.iter().all(|s| s.literal_values && !s.from_workspace));
        assert!(
            matches!(&parsed[0].transport, Transport::Stdio { env, .. } if env["A"] == "$HOME")
        );
        for (bad, wanted) in [
            (
                serde_json::json!([{"name": "a__b", "command": "x"}]),
                "without `__`",
            ),
            (
                serde_json::json!([{"name": "s", "type": "sse", "url": "x"}]),
                "not supported",
            ),
            (serde_json::json!([{"name": "s"}]), "needs `command`"),
            (serde_json::json!({}), "must be an array"),
        ] {
            let error = parse_acp_servers(&bad).unwrap_err().to_string();
            assert!(error.contains(wanted), "{error}");
        }
    }

    #[test]
    fn secrets_come_from_the_environment() {
        let lookup = |name: &str| (name == "TOKEN").then(|| "t0k".to_string());
        assert_eq!(resolve_value("$TOKEN", &lookup), Ok("t0k".into()));
        assert_eq!(resolve_value("${TOKEN}", &lookup), Ok("t0k".into()));
        assert_eq!(resolve_value("plain", &lookup), Ok("plain".into()));
        assert!(
            resolve_value("$MISSING", &lookup)
                .unwrap_err()
                .contains("`MISSING` is not set")
        );
    }
}
