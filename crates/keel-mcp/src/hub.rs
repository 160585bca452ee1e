//! The servers of one session: started in parallel, their tools listed in a stable order,
//! calls made with a timeout, one at a time per server.
//!
//! Invariants:
//! - A server's environment is the minimal base (`PATH`, `HOME`, locale) plus what its
//!   declaration gives; keel's own environment (provider keys included) never reaches it.
//! - A server that cannot start (not installed, exits, garbage on stdout, no answer to
//!   `initialize` within the start-up timeout) is reported with the reason and the tail of its
//!   stderr; the others are unaffected and the session goes on without it.
//! - Tools are listed by server, then tool name; a tool whose name would not make a valid
//!   `mcp__server__tool` name or whose schema is not a JSON Schema object is left out and the
//!   reason recorded.

use crate::config::{ServerConfig, Transport, resolve_value};
use crate::result::to_output;
use keel_tools::{ToolOutput, ValidationError};
use keel_types::ToolSpec;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";
/// How much of a server's stderr is kept for messages.
const STDERR_TAIL: usize = 2000;

/// One tool of one server, as keel offers it.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    pub server: String,
    /// The server's own name for it.
    pub tool: String,
    /// `mcp__<server>__<tool>`.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The server marks it `readOnlyHint`.
    pub read_only: bool,
}

/// What `keel mcp list` shows of a server.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// `running` or `failed`.
    pub state: &'static str,
    pub origin: String,
    /// Why it is down (with its stderr tail), or notes on tools left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub tools: Vec<String>,
}

/// Reads one variable of keel's environment.
pub type EnvLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// How servers are started.
pub struct StartOptions {
    /// The base environment every server gets (`PATH`, `HOME`, locale).
    pub base_env: Vec<(String, String)>,
    /// Reads keel's environment for `$VAR` values in declarations.
    pub lookup: Box<EnvLookup>,
    pub start_timeout: Duration,
    /// The working directory of stdio servers without a `cwd`.
    pub workspace: PathBuf,
}

impl StartOptions {
    /// The base environment taken from this process: `PATH`, `HOME` and the locale only.
    pub fn base_env_from_process() -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(name, _)| {
                matches!(name.as_str(), "PATH" | "HOME" | "LANG" | "LANGUAGE" | "TZ")
                    || name.starts_with("LC_")
            })
            .collect()
    }
}

type Client = RunningService<RoleClient, ()>;

struct Running {
    client: Client,
    /// Calls to one server are serialised.
    turn: tokio::sync::Mutex<()>,
}

struct Server {
    config: ServerConfig,
    running: Option<Running>,
    tools: Vec<McpTool>,
    /// One compiled validator per tool, by position.
    validators: Vec<jsonschema::Validator>,
    reason: Option<String>,
}

/// The MCP servers of a session.
pub struct McpHub {
    servers: Vec<Server>,
}

impl McpHub {
    /// No servers.
    pub fn empty() -> McpHub {
        McpHub {
            servers: Vec::new(),
        }
    }

    /// Start every server at once; each gets `options.start_timeout` to answer.
    pub async fn start(mut configs: Vec<ServerConfig>, options: &StartOptions) -> McpHub {
        configs.sort_by(|a, b| a.name.cmp(&b.name));
        let starts = configs.into_iter().map(|config| start_one(config, options));
        McpHub {
            servers: futures_util::future::join_all(starts).await,
        }
    }

    /// Every tool of every running server, by server then tool name.
    pub fn tools(&self) -> impl Iterator<Item = &McpTool> {
        self.servers.iter().flat_map(|server| server.tools.iter())
    }

    /// The tools as specs for the request (deterministic bytes).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools()
            .map(|tool| ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.input_schema.clone(),
            })
            .collect()
    }

    pub fn find(&self, name: &str) -> Option<&McpTool> {
        self.tools().find(|tool| tool.name == name)
    }

    /// Check a call's raw arguments against the tool's schema, as built-in tools are checked:
    /// `None` when no running server offers `name`.
    pub fn validate(
        &self,
        name: &str,
        raw_arguments: &str,
    ) -> Option<Result<Value, ValidationError>> {
        let (tool, validator) = self.servers.iter().find_map(|server| {
            let position = server.tools.iter().position(|tool| tool.name == name)?;
            Some((&server.tools[position], &server.validators[position]))
        })?;
        let text = if raw_arguments.trim().is_empty() {
            "{}"
        } else {
            raw_arguments
        };
        let args: Value = match serde_json::from_str(text) {
            Ok(args) => args,
            Err(error) => {
                return Some(Err(ValidationError::NotJson {
                    tool: tool.name.clone(),
                    reason: error.to_string(),
                }));
            }
        };
        let problems: Vec<String> = validator
            .iter_errors(&args)
            .map(|error| {
                let at = error.instance_path().to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            Some(Ok(args))
        } else {
            Some(Err(ValidationError::Schema {
                tool: tool.name.clone(),
                problems,
            }))
        }
    }

    /// Whether `server` is configured to have its read-only tools run without asking.
    pub fn trusts_read_only(&self, server: &str) -> bool {
        self.servers
            .iter()
            .any(|s| s.config.name == server && s.config.trust_read_only)
    }

    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|server| ServerStatus {
                name: server.config.name.clone(),
                state: if server.running.is_some() {
                    "running"
                } else {
                    "failed"
                },
                origin: server.config.origin.clone(),
                reason: server.reason.clone(),
                tools: server.tools.iter().map(|tool| tool.tool.clone()).collect(),
            })
            .collect()
    }

    /// Call `name` (an `mcp__…` tool) with `arguments`; past `timeout` the call is abandoned
    /// (the request is cancelled) and the result says so.
    pub async fn call(&self, name: &str, arguments: Value, timeout: Duration) -> ToolOutput {
        let Some(tool) = self.find(name) else {
            return ToolOutput::error(format!("no MCP tool `{name}` is available"));
        };
        let Some(server) = self.servers.iter().find(|s| s.config.name == tool.server) else {
            return ToolOutput::error(format!("MCP server `{}` is not running", tool.server));
        };
        let Some(running) = &server.running else {
            return ToolOutput::error(format!("MCP server `{}` is not running", tool.server));
        };
        let _one_at_a_time = running.turn.lock().await;
        let mut params = CallToolRequestParams::new(tool.tool.clone());
        params.arguments = arguments.as_object().cloned();
        let call = running.client.peer().call_tool(params);
        match tokio::time::timeout(timeout, call).await {
            Err(_) => ToolOutput::error(format!(
                "MCP tool `{name}` did not answer within {} s and was cancelled",
                timeout.as_secs()
            )),
            Ok(Err(error)) => ToolOutput::error(format!(
                "MCP server `{}` failed the call: {error}",
                tool.server
            )),
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).unwrap_or_default();
                to_output(name, &value)
            }
        }
    }
}

/// The end of a server's stderr, and whether it has closed.
struct StderrTail {
    text: Mutex<String>,
    closed: tokio::sync::watch::Sender<bool>,
}

async fn start_one(config: ServerConfig, options: &StartOptions) -> Server {
    let stderr_tail = Arc::new(StderrTail {
        text: Mutex::new(String::new()),
        closed: tokio::sync::watch::channel(false).0,
    });
    let mut closed = stderr_tail.closed.subscribe();
    let started = tokio::time::timeout(
        options.start_timeout,
        connect(&config, options, stderr_tail.clone()),
    )
    .await;
    if !matches!(started, Ok(Ok(_))) {
        // A server that died has closed its stderr, or will in a moment: read its last words.
        let _ = tokio::time::timeout(Duration::from_millis(500), closed.wait_for(|c| *c)).await;
    }
    let failed = |reason: String| {
        let tail = stderr_tail
            .text
            .lock()
            .map(|tail| tail.trim().to_string())
            .unwrap_or_default();
        let reason = if tail.is_empty() {
            reason
        } else {
            format!("{reason}; its stderr ended with:\n{tail}")
        };
        Server {
            config: config.clone(),
            running: None,
            tools: Vec::new(),
            validators: Vec::new(),
            reason: Some(reason),
        }
    };
    let client = match started {
        Err(_) => {
            return failed(format!(
                "it did not complete `initialize` within {} s",
                options.start_timeout.as_secs()
            ));
        }
        Ok(Err(reason)) => return failed(reason),
        Ok(Ok(client)) => client,
    };
    let listed = tokio::time::timeout(options.start_timeout, client.peer().list_all_tools()).await;
    let listed = match listed {
        Err(_) => return failed("it did not answer `tools/list` in time".into()),
        Ok(Err(error)) => return failed(format!("`tools/list` failed: {error}")),
        Ok(Ok(tools)) => tools,
    };
    let mut notes = Vec::new();
    let mut tools: Vec<McpTool> = Vec::new();
    for tool in listed {
        let value = serde_json::to_value(&tool).unwrap_or_default();
        match described(&config.name, &value) {
            Ok(tool) => tools.push(tool),
            Err(note) => notes.push(note),
        }
    }
    tools.sort_by(|a, b| a.tool.cmp(&b.tool));
    tools.dedup_by(|a, b| a.name == b.name);
    // `described` compiled each schema already; a failure here cannot happen, but a tool
    // without a validator is never offered.
    let mut validators = Vec::new();
    tools.retain(|tool| match jsonschema::validator_for(&tool.input_schema) {
        Ok(validator) => {
            validators.push(validator);
            true
        }
        Err(_) => false,
    });
    Server {
        config,
        running: Some(Running {
            client,
            turn: tokio::sync::Mutex::new(()),
        }),
        tools,
        validators,
        reason: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// A listed tool as keel offers it, or why it is left out.
fn described(server: &str, tool: &Value) -> Result<McpTool, String> {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let valid_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            "tool `{}` has a name keel cannot offer",
            name.escape_default()
        ));
    }
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let is_object_schema = schema.is_object()
        && schema
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(|t| t == "object");
    if !is_object_schema || jsonschema::validator_for(&schema).is_err() {
        return Err(format!(
            "tool `{name}` has an input schema that is not a valid JSON Schema object"
        ));
    }
    let full = format!("{PREFIX}{server}__{name}");
    if full.len() > 64 {
        return Err(format!(
            "tool `{name}`: `{full}` is longer than the 64 characters providers accept"
        ));
    }
    Ok(McpTool {
        server: server.to_string(),
        tool: name.to_string(),
        description: tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        read_only: tool
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        input_schema: schema,
        name: full,
    })
}

async fn connect(
    config: &ServerConfig,
    options: &StartOptions,
    stderr_tail: Arc<StderrTail>,
) -> Result<Client, String> {
    match &config.transport {
        Transport::Http { url, headers } => {
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                let value = resolve_value(value, &*options.lookup)
                    .map_err(|why| format!("`headers.{name}`: {why}"))?;
                let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("`headers.{name}` is not a valid header name"))?;
                let value = reqwest::header::HeaderValue::from_str(&value)
                    .map_err(|_| format!("`headers.{name}` has a value that cannot be sent"))?;
                custom.insert(header, value);
            }
            // Installing fails only if a provider is already installed, which is what we want.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = reqwest::Client::builder()
                .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            ().serve(transport)
                .await
                .map_err(|error| format!("the MCP handshake with {url} failed: {error}"))
        }
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut process = tokio::process::Command::new(command);
            process
                .args(args)
                .env_clear()
                .envs(options.base_env.iter().cloned())
                .current_dir(cwd.clone().unwrap_or_else(|| options.workspace.clone()))
                .kill_on_drop(true);
            for (name, value) in env {
                let value = resolve_value(value, &*options.lookup)
                    .map_err(|why| format!("`env.{name}`: {why}"))?;
                process.env(name, value);
            }
            let (transport, stderr) = TokioChildProcess::builder(process)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|error| format!("`{command}` could not be started: {error}"))?;
            if let Some(mut stderr) = stderr {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 1024];
                    while let Ok(read) = stderr.read(&mut buffer).await {
                        if read == 0 {
                            break;
                        }
                        if let Ok(mut tail) = stderr_tail.text.lock() {
                            tail.push_str(&String::from_utf8_lossy(&buffer[..read]));
                            if tail.len() > STDERR_TAIL {
                                let mut cut = tail.len() - STDERR_TAIL;
                                while !tail.is_char_boundary(cut) {
                                    cut += 1;
                                }
                                tail.drain(..cut);
                            }
                        }
                    }
                    stderr_tail.closed.send_replace(true);
                });
            }
            ().serve(transport).await.map_err(|error| {
                let detail = error.to_string();
                // Whether it wrote first or died first, a server that went away mid-handshake is
                // told the same way; its stderr tail says why.
                if detail.contains("Broken pipe") || detail.contains("connection closed") {
                    "it exited or closed its output before completing the MCP handshake".to_string()
                } else {
                    format!("the MCP handshake failed: {detail}")
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_with_bad_names_or_schemas_are_left_out_with_a_reason() {
        let good = json!({"name": "echo", "description": "d", "inputSchema": {"type": "object", "properties": {"m": {"type": "string"}}},
                          "annotations": {"readOnlyHint": true}});
        let tool = described("every", &good).unwrap();
        assert_eq!(tool.name, "mcp__every__echo");
        assert!(tool.read_only);
        assert!(
            described(
                "s",
                &json!({"name": "a b", "inputSchema": {"type": "object"}})
            )
            .unwrap_err()
            .contains("cannot offer")
        );
        assert!(
            described(
                "s",
                &json!({"name": "t", "inputSchema": {"type": "string"}})
            )
            .unwrap_err()
            .contains("not a valid JSON Schema object")
        );
        assert!(
            described(
                "s",
                &json!({"name": "t", "inputSchema": {"type": "object", "properties": 5}})
            )
            .unwrap_err()
            .contains("not a valid JSON Schema")
        );
        assert!(
            described(
                "s",
                &json!({"name": "t".repeat(70), "inputSchema": {"type": "object"}})
            )
            .unwrap_err()
            .contains("64 characters")
        );
    }
}
