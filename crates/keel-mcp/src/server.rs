//! One server's start-up and tool list: connecting over stdio or streamable HTTP, listing its
//! tools, and why it is down when it is.
//!
//! Invariants:
//! - A server's environment is the minimal base (`PATH`, `HOME`, locale) plus what its
//!   declaration gives; keel's own environment (provider keys included) never reaches it.
//! - A server that cannot start (not installed, exits, garbage on stdout, no answer to
//!   `initialize` within the start-up timeout) is reported with the reason and the tail of its
//!   stderr.
//! - A tool whose name would not make a valid `mcp__server__tool` name or whose schema is not a
//!   JSON Schema object is left out and the reason recorded.
//! - A stdio server leads its own process group, killed whole when its connection goes.
//! - One server adds at most `MAX_TOOLS` tools, each with a description of at most
//!   `MAX_DESCRIPTION_CHARS` characters (cut deterministically) and a schema of at most
//!   `MAX_SCHEMA_BYTES`; what is left out is noted.

use crate::config::{ServerConfig, Transport, resolve_value};
use crate::types::{McpTool, PREFIX, StartOptions};
use rmcp::handler::client::ClientHandler;
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How much of a server's stderr is kept for messages.
const STDERR_TAIL: usize = 2000;

/// Bounds on what one server puts in every request keel sends: a server cannot make each
/// request (and its cost) grow without limit.
pub(crate) const MAX_TOOLS: usize = 100;
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 2000;
pub(crate) const MAX_SCHEMA_BYTES: usize = 16 * 1024;

/// Hears a server's notifications: a changed tool list is noted, to be listed again at the
/// next turn boundary. It lives as long as the connection, and so does the server's process
/// group.
#[derive(Clone)]
pub(crate) struct Listener {
    pub changed: Arc<AtomicBool>,
    pub group: Arc<ProcessGroup>,
}

/// The process group a stdio server leads (0 until it is spawned). When the last handle to the
/// connection goes — the session ends, or the server never finished starting — the whole group
/// is killed, so what `npx` or `sh -c` started for it does not outlive keel.
#[derive(Debug, Default)]
pub(crate) struct ProcessGroup(AtomicI32);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let leader = *self.0.get_mut();
        if leader > 0 {
            // The group exists while any of its processes does; an error means none is left.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(leader),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl ClientHandler for Listener {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }
}

pub(crate) type Client = RunningService<RoleClient, Listener>;

/// A started server: its client and tools, or why it is down.
pub(crate) enum Started {
    Running {
        client: Arc<Client>,
        tools: Vec<McpTool>,
        validators: Vec<Arc<jsonschema::Validator>>,
        notes: Option<String>,
    },
    Failed(String),
}

/// The end of a server's stderr, and whether it has closed.
struct StderrTail {
    text: Mutex<String>,
    closed: tokio::sync::watch::Sender<bool>,
}

/// Connect to `config` and list its tools, within `options.start_timeout` for each step.
pub(crate) async fn start(
    config: &ServerConfig,
    options: &StartOptions,
    listener: Listener,
) -> Started {
    let stderr_tail = Arc::new(StderrTail {
        text: Mutex::new(String::new()),
        closed: tokio::sync::watch::channel(false).0,
    });
    let mut closed = stderr_tail.closed.subscribe();
    let started = tokio::time::timeout(
        options.start_timeout,
        connect(config, options, stderr_tail.clone(), listener),
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
        Started::Failed(if tail.is_empty() {
            reason
        } else {
            format!("{reason}; its stderr ended with:\n{tail}")
        })
    };
    let client = match started {
        Err(_) => {
            return failed(format!(
                "it did not complete `initialize` within {} s",
                options.start_timeout.as_secs()
            ));
        }
        Ok(Err(reason)) => return failed(reason),
        Ok(Ok(client)) => Arc::new(client),
    };
    match list(&config.name, &client, options.start_timeout).await {
        Ok((tools, validators, notes)) => Started::Running {
            client,
            tools,
            validators,
            notes,
        },
        Err(reason) => failed(reason),
    }
}

/// The server's tools as keel offers them (sorted, validators by position), and notes on the
/// ones left out.
pub(crate) async fn list(
    server: &str,
    client: &Client,
    timeout: Duration,
) -> Result<
    (
        Vec<McpTool>,
        Vec<Arc<jsonschema::Validator>>,
        Option<String>,
    ),
    String,
> {
    let listed = match tokio::time::timeout(timeout, client.peer().list_all_tools()).await {
        Err(_) => return Err("it did not answer `tools/list` in time".into()),
        Ok(Err(error)) => return Err(format!("`tools/list` failed: {error}")),
        Ok(Ok(tools)) => tools,
    };
    let mut notes = Vec::new();
    let mut tools: Vec<McpTool> = Vec::new();
    for tool in listed {
        let value = serde_json::to_value(&tool).unwrap_or_default();
        match described(server, &value) {
            Ok(tool) => tools.push(tool),
            Err(note) => notes.push(note),
        }
    }
    tools.sort_by(|a, b| a.tool.cmp(&b.tool));
    tools.dedup_by(|a, b| a.name == b.name);
    keep_first_tools(&mut tools, &mut notes);
    // `described` compiled each schema already; a tool without a validator is never offered.
    let mut validators = Vec::new();
    tools.retain(|tool| match jsonschema::validator_for(&tool.input_schema) {
        Ok(validator) => {
            validators.push(Arc::new(validator));
            true
        }
        Err(_) => false,
    });
    Ok((
        tools,
        validators,
        (!notes.is_empty()).then(|| notes.join("; ")),
    ))
}

/// A declared value as the server gets it: `$VAR` read from keel's environment for the user's
/// own declarations; as written for a workspace file's.
fn configured_value(
    config: &ServerConfig,
    value: &str,
    options: &StartOptions,
) -> Result<String, String> {
    if config.from_workspace || config.literal_values {
        Ok(value.to_string())
    } else {
        resolve_value(value, &*options.lookup)
    }
}

/// At most `MAX_TOOLS` tools (the first by name); a note says how many were left out.
fn keep_first_tools(tools: &mut Vec<McpTool>, notes: &mut Vec<String>) {
    if tools.len() > MAX_TOOLS {
        notes.push(format!(
            "{} tools past the first {MAX_TOOLS} (by name) are left out",
            tools.len() - MAX_TOOLS
        ));
        tools.truncate(MAX_TOOLS);
    }
}

/// A description as the model sees it: at most `MAX_DESCRIPTION_CHARS` characters, cut the
/// same way every time (the request prefix stays stable).
fn capped_description(description: &str) -> String {
    match description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        None => description.to_string(),
        Some((cut, _)) => format!(
            "{}… (cut by keel at {MAX_DESCRIPTION_CHARS} characters)",
            &description[..cut]
        ),
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
    // Measured before anything compiles it.
    let schema_bytes = schema.to_string().len();
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(format!(
            "tool `{name}` has an input schema of {schema_bytes} bytes (keel's limit is \
             {MAX_SCHEMA_BYTES})"
        ));
    }
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
        description: capped_description(
            tool.get("description")
                .and_then(Value::as_str)
                .unwrap_or(""),
        ),
        read_only: tool
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        input_schema: schema,
        name: full,
    })
}

/// Start a stdio server's process, confined by its `sandbox` setting when the hub has a
/// sandbox (spawned from the sandbox's spawner thread, so that it dies with keel).
fn spawn_stdio(
    mut process: tokio::process::Command,
    config: &ServerConfig,
    options: &StartOptions,
) -> Result<(TokioChildProcess, Option<tokio::process::ChildStderr>), String> {
    let policy = options.sandbox.as_ref().and_then(|sandbox| {
        let identity = format!("{}\0{}\0{:?}", config.name, config.origin, config.transport);
        Some((sandbox, sandbox.server_policy(config.sandbox, &identity)?))
    });
    let Some((sandbox, policy)) = policy else {
        keel_sandbox::keep_file_limit(process.as_std_mut());
        return TokioChildProcess::builder(process)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|error| error.to_string());
    };
    let network_on = policy.network == keel_sandbox::Network::On;
    if !keel_sandbox::meets_minimum(network_on) {
        return Err(format!(
            "keel sandbox: this machine cannot confine it (missing: {}); keel starts no server \
             unconfined on its own say: set `sandbox = \"off\"` in its [mcp_servers] table of \
             your config to run it unconfined",
            keel_sandbox::detected().missing(network_on).join("; ")
        ));
    }
    let confinement = sandbox
        .confine_policy(process.as_std_mut(), &policy)
        .map_err(|error| error.to_string())?;
    let runtime = tokio::runtime::Handle::current();
    keel_sandbox::on_lasting_thread(move || {
        let _entered = runtime.enter();
        TokioChildProcess::builder(process)
            .stderr(std::process::Stdio::piped())
            .spawn()
    })
    .and_then(|spawned| spawned)
    .map_err(|error| confinement.explain(error).to_string())
}

async fn connect(
    config: &ServerConfig,
    options: &StartOptions,
    stderr_tail: Arc<StderrTail>,
    listener: Listener,
) -> Result<Client, String> {
    match &config.transport {
        Transport::Http { url, headers } => {
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                let value = configured_value(config, value, options)
                    .map_err(|why| format!("`headers.{name}`: {why}"))?;
                let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("`headers.{name}` is not a valid header name"))?;
                let value = reqwest::header::HeaderValue::from_str(&value)
                    .map_err(|_| format!("`headers.{name}` has a value that cannot be sent"))?;
                custom.insert(header, value);
            }
            // Installing fails only if a provider is already installed, which is what we want.
            let _ = rustls::crypto::ring::default_provider().install_default();
            // No redirects: a redirect to another host would carry the declared headers along.
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            listener
                .serve(transport)
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
                // Relative to the workspace, not to wherever keel was started.
                .current_dir(match cwd {
                    Some(cwd) => options.workspace.join(cwd),
                    None => options.workspace.clone(),
                })
                // Its own process group: Ctrl-C at keel's terminal is for keel, which cancels
                // the call; it must not kill the server.
                .process_group(0)
                .kill_on_drop(true);
            for (name, value) in env {
                let value = configured_value(config, value, options)
                    .map_err(|why| format!("`env.{name}`: {why}"))?;
                process.env(name, value);
            }
            let (transport, stderr) = spawn_stdio(process, config, options)
                .map_err(|error| format!("`{command}` could not be started: {error}"))?;
            if let Some(leader) = transport.id().and_then(|pid| i32::try_from(pid).ok()) {
                listener.group.0.store(leader, Ordering::SeqCst);
            }
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
            listener.serve(transport).await.map_err(|error| {
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
    fn a_server_cannot_grow_every_request_without_bound() {
        let long = "é".repeat(MAX_DESCRIPTION_CHARS + 50);
        let tool = described(
            "s",
            &json!({"name": "t", "description": long, "inputSchema": {"type": "object"}}),
        )
        .unwrap();
        assert_eq!(
            tool.description.chars().count(),
            MAX_DESCRIPTION_CHARS + "… (cut by keel at 2000 characters)".chars().count()
        );
        let again = described(
            "s",
            &json!({"name": "t", "description": long, "inputSchema": {"type": "object"}}),
        )
        .unwrap();
        assert_eq!(
            tool.description, again.description,
            "cut the same way each time"
        );
        let properties: serde_json::Map<String, Value> = (0..2000)
            .map(|n| (format!("field_{n}"), json!({"type": "string"})))
            .collect();
        let huge =
            json!({"name": "t", "inputSchema": {"type": "object", "properties": properties}});
        assert!(described("s", &huge).unwrap_err().contains("keel's limit"));
        let mut tools: Vec<McpTool> = (0..MAX_TOOLS + 7)
            .map(|n| {
                described("s", &json!({"name": format!("t{n:03}"), "inputSchema": {}})).unwrap()
            })
            .collect();
        let mut notes = Vec::new();
        keep_first_tools(&mut tools, &mut notes);
        assert_eq!(tools.len(), MAX_TOOLS);
        assert_eq!(tools.last().unwrap().tool, "t099");
        assert_eq!(notes, ["7 tools past the first 100 (by name) are left out"]);
    }

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
