//! The servers of one session: started in parallel, their tools listed in a stable order,
//! calls made with a timeout, one at a time per server.
//!
//! Invariants:
//! - A session's first request waits for its servers at most `StartOptions::first_wait` after
//!   they were launched (`first_start`); `start` waits there too, `launch` does not, so a
//!   screen can be drawn first. A server still starting then keeps starting in the
//!   background, and its tools join the list when it is up.
//! - The tool list changes only through `refresh` (a late server came up, or a server sent
//!   `notifications/tools/list_changed`), which the agent calls at turn boundaries, so a turn's
//!   requests always offer the same tools.
//! - Tools are listed by server, then tool name (`server` documents how each list is built).
//! - Dropping a call (a timeout, a cancelled turn) cancels it at the server: the SDK sends
//!   `notifications/cancelled`. Dropping the hub stops a server still starting.

use crate::config::ServerConfig;
use crate::result::to_output;
use crate::server::{Client, Listener, Started, list, start};
pub use crate::types::{EnvLookup, McpTool, PREFIX, ServerStatus, StartOptions};
use keel_tools::{ToolOutput, ValidationError};
use keel_types::ToolSpec;
use rmcp::model::CallToolRequestParams;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How long a turn boundary waits for a changed tool list.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    client: Option<Arc<Client>>,
    tools: Vec<McpTool>,
    validators: Vec<Arc<jsonschema::Validator>>,
    reason: Option<String>,
    starting: bool,
}

struct Server {
    config: ServerConfig,
    /// Set by `notifications/tools/list_changed`.
    changed: Arc<AtomicBool>,
    /// Calls to one server are serialised.
    turn: tokio::sync::Mutex<()>,
    state: RwLock<State>,
}

impl Server {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The connection closed (the server exited): no client, no tools, and why.
    fn went_away(&self) {
        let mut state = self.write();
        state.client = None;
        state.tools.clear();
        state.validators.clear();
        state.reason = Some("it exited (its connection closed)".into());
    }

    fn settle(&self, started: Started) {
        let mut state = self.write();
        state.starting = false;
        match started {
            Started::Running {
                client,
                tools,
                validators,
                notes,
            } => {
                state.client = Some(client);
                state.tools = tools;
                state.validators = validators;
                state.reason = notes;
            }
            Started::Failed(reason) => state.reason = Some(reason),
        }
    }
}

/// Counts a server's first start as settled when dropped: after `settle`, or when its start
/// task ended any other way (a panic), then with the server marked failed.
struct Settling {
    server: Arc<Server>,
    count: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Drop for Settling {
    fn drop(&mut self) {
        if self.server.read().starting {
            self.server
                .settle(Started::Failed("its start failed inside keel".into()));
        }
        self.count
            .send_modify(|count| *count = count.saturating_sub(1));
    }
}

/// The MCP servers of a session.
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    start_timeout: Duration,
    /// The servers' sandbox, kept as long as they run: its temp dir is their `/tmp`, and
    /// removing it would pull the mounts of their sandbox from under them.
    _sandbox: Option<Arc<keel_sandbox::Sandbox>>,
    /// How many servers' first start has not settled yet…
    unsettled: tokio::sync::watch::Receiver<usize>,
    /// …and until when the first request waits for them.
    first_deadline: tokio::time::Instant,
    /// The servers' start tasks: a hub dropped while one still starts (its session was
    /// replaced) stops it, and the process it started with it.
    starts: Vec<tokio::task::AbortHandle>,
}

impl Drop for McpHub {
    fn drop(&mut self) {
        for start in &self.starts {
            start.abort();
        }
    }
}

impl McpHub {
    /// No servers.
    pub fn empty() -> McpHub {
        McpHub {
            servers: Vec::new(),
            start_timeout: Duration::from_secs(1),
            _sandbox: None,
            unsettled: tokio::sync::watch::channel(0).1,
            first_deadline: tokio::time::Instant::now(),
            starts: Vec::new(),
        }
    }

    /// Start every server at once and wait for them at most `options.first_wait`; the slow
    /// ones go on starting in the background.
    pub async fn start(configs: Vec<ServerConfig>, options: &StartOptions) -> McpHub {
        let hub = McpHub::launch(configs, options);
        hub.first_start().await;
        hub
    }

    /// Wait until every server's first start settled (up or failed), or `first_wait` after
    /// the launch passed, whichever comes first.
    pub async fn first_start(&self) {
        let mut unsettled = self.unsettled.clone();
        let settled = unsettled.wait_for(|count| *count == 0);
        let _ = tokio::time::timeout_at(self.first_deadline, settled).await;
    }

    /// Whether `first_start` would still wait.
    pub fn first_start_pending(&self) -> bool {
        *self.unsettled.borrow() > 0 && tokio::time::Instant::now() < self.first_deadline
    }

    /// Start every server at once, in the background, without waiting (must be called inside
    /// a tokio runtime).
    pub fn launch(mut configs: Vec<ServerConfig>, options: &StartOptions) -> McpHub {
        let first_deadline = tokio::time::Instant::now() + options.first_wait;
        configs.sort_by(|a, b| a.name.cmp(&b.name));
        let servers: Vec<Arc<Server>> = configs
            .into_iter()
            .map(|config| {
                Arc::new(Server {
                    config,
                    changed: Arc::new(AtomicBool::new(false)),
                    turn: tokio::sync::Mutex::new(()),
                    state: RwLock::new(State {
                        starting: true,
                        ..State::default()
                    }),
                })
            })
            .collect();
        let (count, unsettled) = tokio::sync::watch::channel(servers.len());
        let mut starts = Vec::with_capacity(servers.len());
        let count = Arc::new(count);
        for server in &servers {
            let (options, server) = (options.clone(), server.clone());
            let settling = Settling {
                server: server.clone(),
                count: count.clone(),
            };
            let task = tokio::spawn(async move {
                let listener = Listener {
                    changed: server.changed.clone(),
                    group: Arc::default(),
                };
                let started = start(&server.config, &options, listener).await;
                server.settle(started);
                drop(settling);
            });
            starts.push(task.abort_handle());
        }
        McpHub {
            servers,
            start_timeout: options.start_timeout,
            _sandbox: options.sandbox.clone(),
            unsettled,
            first_deadline,
            starts,
        }
    }

    /// List again, in parallel and briefly (`REFRESH_TIMEOUT`), the tools of every running
    /// server that said its list changed; mark a server whose connection closed as failed.
    /// Returns whether any list was read again.
    pub async fn refresh(&self) -> bool {
        let relists = self.servers.iter().map(|server| async move {
            let client = server.read().client.clone()?;
            if client.is_closed() {
                server.went_away();
                return None;
            }
            if !server.changed.swap(false, Ordering::SeqCst) {
                return None;
            }
            let timeout = REFRESH_TIMEOUT.min(self.start_timeout);
            match list(&server.config.name, &client, timeout).await {
                Ok((tools, validators, notes)) => {
                    let mut state = server.write();
                    state.tools = tools;
                    state.validators = validators;
                    state.reason = notes;
                }
                Err(reason) => {
                    // Keep the old list; try again at the next boundary.
                    server.changed.store(true, Ordering::SeqCst);
                    server.write().reason = Some(reason);
                }
            }
            Some(())
        });
        futures_util::future::join_all(relists)
            .await
            .iter()
            .any(Option::is_some)
    }

    /// The servers that said their tool list changed since it was last read: the next
    /// `refresh` lists them again.
    pub fn announced_changes(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|server| server.changed.load(Ordering::SeqCst))
            .map(|server| server.config.name.clone())
            .collect()
    }

    /// Every tool of every running server, by server then tool name.
    pub fn tools(&self) -> Vec<McpTool> {
        self.servers
            .iter()
            .flat_map(|server| server.read().tools.clone())
            .collect()
    }

    /// The tools as specs for the request (deterministic bytes).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools()
            .into_iter()
            .map(|tool| ToolSpec {
                name: tool.name,
                description: tool.description,
                parameters: tool.input_schema,
            })
            .collect()
    }

    pub fn find(&self, name: &str) -> Option<McpTool> {
        self.servers.iter().find_map(|server| {
            server
                .read()
                .tools
                .iter()
                .find(|tool| tool.name == name)
                .cloned()
        })
    }

    /// Check a call's raw arguments against the tool's schema, as built-in tools are checked:
    /// `None` when no running server offers `name`.
    pub fn validate(
        &self,
        name: &str,
        raw_arguments: &str,
    ) -> Option<Result<Value, ValidationError>> {
        let validator = self.servers.iter().find_map(|server| {
            let state = server.read();
            let position = state.tools.iter().position(|tool| tool.name == name)?;
            state.validators.get(position).cloned()
        })?;
        Some(keel_tools::check_arguments(name, &validator, raw_arguments))
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
            .map(|server| {
                let state = server.read();
                ServerStatus {
                    name: server.config.name.clone(),
                    state: if state.client.is_some() {
                        "running"
                    } else if state.starting {
                        "starting"
                    } else {
                        "failed"
                    },
                    origin: server.config.origin.clone(),
                    reason: state.reason.clone(),
                    tools: state.tools.iter().map(|tool| tool.tool.clone()).collect(),
                }
            })
            .collect()
    }

    /// Call `name` (an `mcp__…` tool) with `arguments`; past `timeout` the call is abandoned
    /// (the request is cancelled) and the result says so.
    pub async fn call(&self, name: &str, arguments: Value, timeout: Duration) -> ToolOutput {
        self.call_redacted(name, arguments, timeout, &keel_types::Secrets::default())
            .await
    }

    /// `call`, with `secrets` redacted from the result before it is cut or summarised.
    pub async fn call_redacted(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        secrets: &keel_types::Secrets,
    ) -> ToolOutput {
        let Some(tool) = self.find(name) else {
            return ToolOutput::error(format!("no MCP tool `{name}` is available"));
        };
        let Some(server) = self.servers.iter().find(|s| s.config.name == tool.server) else {
            return ToolOutput::error(format!("MCP server `{}` is not running", tool.server));
        };
        let Some(client) = server.read().client.clone() else {
            return ToolOutput::error(format!("MCP server `{}` is not running", tool.server));
        };
        let mut params = CallToolRequestParams::new(tool.tool.clone());
        params.arguments = arguments.as_object().cloned();
        // Waiting for the server's previous call counts toward this call's time.
        let call = async {
            let _one_at_a_time = server.turn.lock().await;
            client.peer().call_tool(params).await
        };
        let answer = tokio::time::timeout(timeout, call).await;
        if client.is_closed() {
            server.went_away();
        }
        match answer {
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
                to_output(name, &value, secrets)
            }
        }
    }
}
