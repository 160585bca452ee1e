//! `keel acp`: an Agent Client Protocol v1 agent over stdio (newline-delimited JSON-RPC 2.0)
//! that drives keel's controller — the same admission, receipts and recovery as every other
//! surface.
//!
//! Invariants:
//! - stdout carries protocol only (one JSON object per line, through `rpc::Connection`).
//! - Every request gets exactly one answer; a malformed line gets a `-32700` error and the
//!   agent keeps serving; nothing but `initialize` is served before `initialize`.
//! - A prompt is admitted by the controller before it runs (a stale recovery id or a busy
//!   session is an error answer, and nothing is sent to the provider); its updates are written
//!   before its answer; `session/cancel` makes it answer `cancelled`.
//! - When stdin closes, running turns are cancelled (receipts settle) and `run` returns.

mod client_calls;
mod fork;
mod outcome;
mod rewind;
mod rpc;
mod updates;

pub use rpc::RpcError;

use client_calls::{AcpApprover, AcpEditor};
use keel_agent::{
    AgentError, Approver, Controller, Input, Line, RecoveryRefusal, SessionChoice, SurfaceCommand,
    TurnOutcome,
};
use keel_tools::{EditorFiles, PermissionMode};
use keel_types::EventBody;
use rpc::{Connection, code};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line accepted from the client (a larger prompt is refused, not buffered).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What the agent needs from the binary: controllers built from the user's configuration.
pub trait AcpSessions: Send + Sync + 'static {
    /// A controller for a new or resumed session working in `cwd` (in the configured permission
    /// mode: `session/set_mode` changes it on the controller).
    fn open(
        &self,
        choice: SessionChoice,
        cwd: &Path,
        approver: Arc<dyn Approver>,
        editor: Option<Arc<dyn EditorFiles>>,
        mcp_servers: Vec<keel_mcp::ServerConfig>,
    ) -> Result<Controller, String>;
    /// Whether session `id` exists.
    fn exists(&self, id: &str) -> bool;
    /// A new session with `source`'s history up to turn `at` (all of it when `None`): its id.
    fn fork(&self, source: &str, at: Option<u64>) -> Result<String, String>;
}

const MODES: [(&str, &str, &str); 4] = [
    (
        "read-only",
        "Read only",
        "Tools may read the workspace; nothing is changed",
    ),
    (
        "plan",
        "Plan",
        "The agent researches and proposes a plan; nothing is changed until you approve it",
    ),
    ("ask", "Ask", "Changes and commands need your approval"),
    (
        "auto",
        "Auto",
        "Changes inside the workspace and commands run without asking",
    ),
];

struct Session {
    controller: Controller,
    cwd: PathBuf,
}

struct Agent {
    connection: Connection,
    sessions_factory: Arc<dyn AcpSessions>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    initialized: Mutex<bool>,
    /// Whether the client reads and writes files for us (`fs.readTextFile` and `writeTextFile`).
    editor_files: Mutex<bool>,
    prompts: Mutex<Vec<JoinHandle<()>>>,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serve the protocol on `input`/`output` until the client closes `input`.
pub async fn run<R, W>(input: R, output: W, sessions: Arc<dyn AcpSessions>) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut lines) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = lines.recv().await {
            if output.write_all(line.as_bytes()).await.is_err()
                || output.write_all(b"\n").await.is_err()
                || output.flush().await.is_err()
            {
                break;
            }
        }
    });
    let agent = Arc::new(Agent {
        connection: Connection::new(out),
        sessions_factory: sessions,
        sessions: Mutex::new(HashMap::new()),
        initialized: Mutex::new(false),
        editor_files: Mutex::new(false),
        prompts: Mutex::new(Vec::new()),
    });
    let mut input = input;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            break;
        }
        if line.len() > MAX_LINE_BYTES && !line.ends_with(b"\n") {
            agent.connection.respond(
                Value::Null,
                Err(RpcError::new(
                    code::INVALID_REQUEST,
                    format!("a message longer than {MAX_LINE_BYTES} bytes was refused"),
                )),
            );
            skip_line(&mut input).await?;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        agent.clone().receive(text.trim());
    }
    // The client went away: cancel what runs, let it settle, then stop.
    for session in lock(&agent.sessions).values() {
        session.controller.cancel();
    }
    agent.connection.abandon_requests();
    let prompts: Vec<JoinHandle<()>> = lock(&agent.prompts).drain(..).collect();
    for prompt in prompts {
        let _ = prompt.await;
    }
    // The editor's sessions end with it, and their background jobs.
    for session in lock(&agent.sessions).values() {
        session.controller.end_jobs();
    }
    drop(agent);
    let _ = writer.await;
    Ok(())
}

/// Discard the rest of the current line without holding it in memory.
async fn skip_line<R: AsyncBufRead + Unpin>(input: &mut R) -> std::io::Result<()> {
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|byte| *byte == b'\n') {
            Some(end) => {
                input.consume(end + 1);
                return Ok(());
            }
            None => {
                let length = buffer.len();
                input.consume(length);
            }
        }
    }
}

impl Agent {
    fn receive(self: Arc<Self>, text: &str) {
        let message: Value = match serde_json::from_str(text) {
            Ok(message) => message,
            Err(error) => {
                self.connection.respond(
                    Value::Null,
                    Err(RpcError::new(
                        code::PARSE_ERROR,
                        format!("not JSON: {error}"),
                    )),
                );
                return;
            }
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            // Answered in order, before anything read after it is handled.
            (Some(method), Some(id)) if method == "initialize" => {
                let answer = self.initialize(&params);
                self.connection.respond(id, Ok(answer));
            }
            // Admitted here, in read order: a `session/cancel` read next finds the turn.
            (Some(method), Some(id)) if method == "session/prompt" && *lock(&self.initialized) => {
                if let Some(answer) = self.local_command(&params) {
                    // Off the reader: a rewind may ask the editor for its files.
                    let agent = self.clone();
                    let handle = tokio::spawn(async move {
                        let answer = answer.await;
                        agent.connection.respond(id, answer);
                    });
                    self.keep(handle);
                    return;
                }
                match self.begin_prompt(&params) {
                    Err(error) => self.connection.respond(id, Err(error)),
                    Ok(started) => {
                        let agent = self.clone();
                        let handle = tokio::spawn(async move {
                            let result = agent.finish_prompt(started).await;
                            agent.connection.respond(id, result);
                        });
                        self.keep(handle);
                    }
                }
            }
            // Judged in read order too: a request read before `initialize` is refused even if
            // `initialize` (read after it) is handled before its task runs.
            (Some(_), Some(id)) if !*lock(&self.initialized) => self.connection.respond(
                id,
                Err(RpcError::new(
                    code::INVALID_REQUEST,
                    "call `initialize` first",
                )),
            ),
            (Some(method), Some(id)) => {
                let agent = self.clone();
                let handle = tokio::spawn(async move {
                    let result = agent.request(&method, params).await;
                    let created = (method == "session/new")
                        .then(|| {
                            result
                                .as_ref()
                                .ok()?
                                .get("sessionId")?
                                .as_str()
                                .map(str::to_string)
                        })
                        .flatten();
                    agent.connection.respond(id, result);
                    // After the answer, so the client knows the session.
                    if let Some(session) = created {
                        agent.announce_commands(&session);
                        agent.announce_untrusted(&session);
                    }
                });
                self.keep(handle);
            }
            (Some(method), None) => self.notification(&method, &params),
            (None, Some(_)) => self.connection.answer(&message),
            (None, None) => self.connection.respond(
                Value::Null,
                Err(RpcError::new(
                    code::INVALID_REQUEST,
                    "neither a request nor a response",
                )),
            ),
        }
    }

    /// Keep a request's task (to wait for it at the end), forgetting finished ones.
    fn keep(&self, handle: JoinHandle<()>) {
        let mut prompts = lock(&self.prompts);
        prompts.retain(|task| !task.is_finished());
        prompts.push(handle);
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "session/cancel"
            && let Some(id) = params.get("sessionId").and_then(Value::as_str)
            && let Some(session) = lock(&self.sessions).get(id)
        {
            session.controller.cancel();
        }
    }

    /// A request of an initialized connection (checked in read order by the caller).
    async fn request(self: &Arc<Self>, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(self.initialize(&params)),
            "session/new" => self.new_session(&params),
            "session/load" => self.load_session(&params),
            "session/fork" => self.fork_session(&params),
            "session/prompt" => {
                if let Some(answer) = self.local_command(&params) {
                    return answer.await;
                }
                let started = self.begin_prompt(&params)?;
                self.finish_prompt(started).await
            }
            "session/set_mode" => self.set_mode(&params),
            "authenticate" => Ok(json!({})),
            other => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("keel does not implement `{other}`"),
            )),
        }
    }

    fn initialize(&self, params: &Value) -> Value {
        *lock(&self.initialized) = true;
        let fs = &params["clientCapabilities"]["fs"];
        *lock(&self.editor_files) =
            fs["readTextFile"] == Value::Bool(true) && fs["writeTextFile"] == Value::Bool(true);
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "sessionCapabilities": {"fork": {}},
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false},
            },
            "authMethods": [],
            "agentInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    fn session(&self, params: &Value) -> Result<Arc<Session>, RpcError> {
        let id = string_param(params, "sessionId")?;
        lock(&self.sessions).get(id).cloned().ok_or_else(|| {
            RpcError::new(
                code::RESOURCE_NOT_FOUND,
                format!("no session `{}` in this agent", id.escape_default()),
            )
        })
    }

    fn open(
        self: &Arc<Self>,
        choice: SessionChoice,
        params: &Value,
    ) -> Result<Arc<Session>, RpcError> {
        let cwd = PathBuf::from(string_param(params, "cwd")?);
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(RpcError::invalid_params(format!(
                "`cwd` must be an existing absolute directory: {}",
                cwd.display()
            )));
        }
        let mcp_params = params.get("mcpServers").cloned().unwrap_or(json!([]));
        let mcp_servers = match &mcp_params {
            Value::Null => Vec::new(),
            servers => keel_mcp::parse_acp_servers(servers)
                .map_err(|error| RpcError::invalid_params(error.to_string()))?,
        };
        let approver = Arc::new(AcpApprover {
            connection: self.connection.clone(),
            session: Mutex::new(None),
            cwd: cwd.clone(),
            always: keel_agent::AlwaysAllowed::default(),
            never: Mutex::new(Vec::new()),
        });
        let editor = (*lock(&self.editor_files)).then(|| {
            Arc::new(AcpEditor {
                connection: self.connection.clone(),
                session: Mutex::new(None),
                runtime: tokio::runtime::Handle::current(),
            })
        });
        let controller = self
            .sessions_factory
            .open(
                choice,
                &cwd,
                approver.clone(),
                editor.clone().map(|e| e as Arc<dyn EditorFiles>),
                mcp_servers,
            )
            .map_err(|message| RpcError::new(code::INTERNAL, message))?;
        let id = controller.session().id.clone();
        *lock(&approver.session) = Some(id.clone());
        if let Some(editor) = &editor {
            *lock(&editor.session) = Some(id.clone());
        }
        let session = Arc::new(Session { controller, cwd });
        lock(&self.sessions).insert(id, session.clone());
        Ok(session)
    }

    fn modes(mode: PermissionMode) -> Value {
        let available: Vec<Value> = MODES
            .iter()
            .map(|(id, name, description)| json!({"id": id, "name": name, "description": description}))
            .collect();
        json!({"currentModeId": mode.as_str(), "availableModes": available})
    }

    fn update(&self, session: &str, update: Value) {
        self.connection.notify(
            "session/update",
            json!({"sessionId": session, "update": update}),
        );
    }

    fn announce_commands(&self, session: &str) {
        self.announce_commands_with(session, &outcome::Offered::default());
    }

    /// The session's commands, with `offered`'s open recovery on the command that runs it.
    fn announce_commands_with(&self, session: &str, offered: &outcome::Offered) {
        // The session's custom commands (prompts from `.keel/commands/` and the user's).
        let custom: Vec<Value> = lock(&self.sessions)
            .get(session)
            .map(|open| {
                open.controller
                    .services()
                    .commands()
                    .list()
                    .map(|command| {
                        json!({"name": command.name,
                            "description": command.description.clone().unwrap_or_else(|| format!("custom command ({})", command.path.display())),
                            "input": {"hint": "arguments"}})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut commands: Vec<Value> = keel_agent::SLASH_COMMANDS
            .iter()
            .filter(|(usage, _)| {
                usage.starts_with("/recover-context")
                    || usage.starts_with("/continue-checks")
                    || usage.starts_with("/compact")
                    || usage.starts_with("/init")
                    || usage.starts_with("/undo")
                    || usage.starts_with("/rewind")
            })
            .map(|(usage, what)| {
                let name = usage
                    .trim_start_matches('/')
                    .split_whitespace()
                    .next()
                    .unwrap_or("");
                let hint = usage.split_once(' ').map(|(_, rest)| rest).unwrap_or("");
                json!({"name": name, "description": what, "input": {"hint": hint}})
            })
            .collect();
        commands.extend(custom);
        self.update(
            session,
            json!({"sessionUpdate": "available_commands_update",
            "availableCommands": offered.on_commands(commands)}),
        );
    }

    /// Say once, at session start, what the workspace's untrusted project files asked for.
    fn announce_untrusted(&self, session: &str) {
        let Some(open) = lock(&self.sessions).get(session).cloned() else {
            return;
        };
        let ignored = &open.controller.settings().untrusted;
        if !ignored.is_empty() {
            self.update(
                session,
                json!({"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": updates::untrusted_note(ignored)}}),
            );
        }
    }

    fn new_session(self: &Arc<Self>, params: &Value) -> Result<Value, RpcError> {
        let session = self.open(SessionChoice::New, params)?;
        let id = session.controller.session().id.clone();
        let mode = session.controller.permission_mode();
        Ok(json!({"sessionId": id, "modes": Agent::modes(mode)}))
    }

    fn load_session(self: &Arc<Self>, params: &Value) -> Result<Value, RpcError> {
        let id = string_param(params, "sessionId")?.to_string();
        let open = lock(&self.sessions).get(&id).cloned();
        let session = match open {
            Some(session) if session.controller.is_busy() => {
                return Err(RpcError::new(
                    code::REFUSED,
                    "a turn is running in this session; load it when the turn ends",
                ));
            }
            Some(session) => session,
            None => {
                if !self.sessions_factory.exists(&id) {
                    return Err(RpcError::new(
                        code::RESOURCE_NOT_FOUND,
                        format!("no session `{}`", id.escape_default()),
                    ));
                }
                self.open(SessionChoice::Resume(id.clone()), params)?
            }
        };
        let transcript = session
            .controller
            .transcript()
            .map_err(|error| RpcError::new(code::INTERNAL, error.to_string()))?;
        let items: Vec<_> = transcript
            .items
            .into_iter()
            .filter_map(|stored| stored.item.ok())
            .collect();
        for update in updates::replay(&session.cwd, &items, &transcript.receipts) {
            self.update(&id, update);
        }
        self.announce_commands(&id);
        self.announce_untrusted(&id);
        Ok(json!({"modes": Agent::modes(session.controller.permission_mode())}))
    }

    fn set_mode(self: &Arc<Self>, params: &Value) -> Result<Value, RpcError> {
        let session = self.session(params)?;
        let mode_id = string_param(params, "modeId")?;
        let Some(mode) = PermissionMode::parse(mode_id) else {
            return Err(RpcError::invalid_params(format!(
                "unknown mode `{}`: use read-only, plan, ask or auto",
                mode_id.escape_default()
            )));
        };
        // Later calls are decided under it; a running turn's model is told with its next tool
        // result, else with the next prompt.
        session.controller.set_permission_mode(mode);
        let id = session.controller.session().id.clone();
        self.update(
            &id,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.as_str()}),
        );
        Ok(json!({}))
    }

    /// A prompt that is `/undo` or `/rewind`: no model turn; its report is the agent's
    /// message. Recognised now (in read order); done on a blocking thread, since restoring a
    /// file open in the editor goes through the editor, whose answers the reader must read.
    fn local_command(
        self: &Arc<Self>,
        params: &Value,
    ) -> Option<impl std::future::Future<Output = Result<Value, RpcError>> + use<>> {
        let text: String = params
            .get("prompt")
            .and_then(Value::as_array)?
            .iter()
            .map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Option<String>>()?;
        // An unknown session is the prompt's error either way.
        let prepared = match self.session(params) {
            Err(error) => Err(error),
            Ok(session) => {
                let ask = rewind::rewind_ask(&session.controller, &text)?;
                // Held now, in read order: a prompt read after this one waits its turn.
                let lease = session.controller.hold_between_turns();
                Ok((session, ask, lease))
            }
        };
        let agent = self.clone();
        Some(async move {
            let (session, ask, lease) = prepared?;
            let lease = lease.map_err(refusal)?;
            let controller = session.controller.clone();
            let answer =
                tokio::task::spawn_blocking(move || rewind::rewind_reply(&controller, lease, ask))
                    .await
                    .map_err(|error| {
                        RpcError::new(code::INTERNAL, format!("the rewind stopped: {error}"))
                    })?;
            let message = answer.map_err(refusal)?;
            let id = session.controller.session().id.clone();
            agent.update(
                &id,
                json!({"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": message}}),
            );
            Ok(json!({"stopReason": "end_turn"}))
        })
    }

    /// Admit a prompt's turn (synchronously, in read order) and subscribe to its events.
    fn begin_prompt(&self, params: &Value) -> Result<StartedPrompt, RpcError> {
        let session = self.session(params)?;
        let (input, plan) = prompt_input(params, &session.controller)?;
        let events = session.controller.subscribe();
        let admitted = session.controller.begin(input).map_err(refusal)?;
        if plan {
            let mode = PermissionMode::Plan;
            session.controller.set_permission_mode(mode);
            let id = session.controller.session().id.clone();
            self.update(
                &id,
                json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.as_str()}),
            );
        }
        Ok(StartedPrompt {
            turn: tokio::spawn(admitted.run()),
            events,
            session,
        })
    }

    /// Forward a running prompt's updates, then its stop reason.
    async fn finish_prompt(&self, started: StartedPrompt) -> Result<Value, RpcError> {
        let StartedPrompt {
            mut turn,
            mut events,
            session,
        } = started;
        let id = session.controller.session().id.clone();
        let mut translator =
            updates::Translator::new(session.controller.settings().profile.context_window)
                .for_session(&id);
        let mut offered = outcome::Offered::default();
        let forward = |event: &keel_types::Event,
                       translator: &mut updates::Translator,
                       offered: &mut outcome::Offered| {
            for update in translator.updates(&session.cwd, event) {
                self.update(&id, update);
            }
            // A job that ended shows what it printed last, with how it ended.
            if let EventBody::JobExited { job, call_id, .. } = &event.body
                && event.session_id == id
                && let Some(tail) = session.controller.job_tail(job)
            {
                self.update(
                    &id,
                    json!({"sessionUpdate": "tool_call_update",
                        "toolCallId": updates::job_call_id(call_id, job),
                        "content": [{"type": "content",
                            "content": {"type": "text", "text": tail}}]}),
                );
            }
            // A recovery offered, used or expired: the command that runs it says so.
            if offered.see(&event.body) {
                self.announce_commands_with(&id, offered);
            }
            // An approved plan left plan mode: the editor's mode picker follows.
            if matches!(&event.body, EventBody::ToolResult { name, .. }
                if name == keel_tools::BuiltinTool::ProposePlan.name())
            {
                let mode = session.controller.permission_mode();
                self.update(
                    &id,
                    json!({"sessionUpdate": "current_mode_update", "currentModeId": mode.as_str()}),
                );
            }
        };
        let outcome = loop {
            tokio::select! {
                result = &mut turn => break result,
                Some(event) = events.recv() => forward(&event, &mut translator, &mut offered),
            }
        };
        // Everything the turn emitted before it ended is in the channel now.
        while let Ok(event) = events.try_recv() {
            forward(&event, &mut translator, &mut offered);
        }
        let outcome = outcome
            .map_err(|error| RpcError::new(code::INTERNAL, format!("the turn stopped: {error}")))?
            .map_err(|error| RpcError::new(code::INTERNAL, error.to_string()))?;
        offered.answer(outcome)
    }
}

fn string_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("`{key}` (a string) is required")))
}

/// The turn a prompt asks for: a recovery action from `_meta`, or the prompt's text (with
/// embedded resources), parsed like a typed line.
/// A prompt's turn, and whether it is `/plan PROMPT` (plan mode once the turn is admitted).
fn prompt_input(params: &Value, controller: &Controller) -> Result<(Input, bool), RpcError> {
    let blocks = params
        .get("prompt")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            RpcError::invalid_params("`prompt` (an array of content blocks) is required")
        })?;
    let mut text = String::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                match resource.get("text").and_then(Value::as_str) {
                    Some(body) => text.push_str(&format!(
                        "\n\n<resource uri=\"{uri}\">\n{body}\n</resource>\n"
                    )),
                    None => text.push_str(&format!("\n\n[binary resource {uri} not included]\n")),
                }
            }
            Some("resource_link") => {
                let uri = block.get("uri").and_then(Value::as_str).unwrap_or("");
                text.push_str(&format!("\n[linked: {uri}]\n"));
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "keel takes text and embedded text resources (no images or audio)",
                ));
            }
        }
    }
    let meta = params.get("_meta");
    let action = meta
        .and_then(|m| m.get("keel/action"))
        .and_then(Value::as_str);
    let recovery_id = meta
        .and_then(|m| m.get("keel/recoveryId"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let input = match action {
        Some("protocol_recovery") => Ok(Input::ProtocolRecovery {
            recovery_id,
            guidance: Some(text.trim().to_string()).filter(|t| !t.is_empty()),
        }),
        Some("final_readiness_recovery") => Ok(Input::FinalReadinessRecovery { recovery_id }),
        Some("context_recovery") => Ok(Input::Compact {
            recovery_id,
            focus: Some(text.trim().to_string()).filter(|t| !t.is_empty()),
        }),
        Some(other) => Err(RpcError::invalid_params(format!(
            "unknown keel/action `{}`",
            other.escape_default()
        ))),
        None => match controller.parse_line(&text) {
            Line::Input(input) => Ok(input),
            Line::Command(SurfaceCommand::Plan(Some(prompt))) => {
                return Ok((Input::Prompt(prompt), true));
            }
            Line::Command(SurfaceCommand::Plan(None)) => Err(RpcError::invalid_params(
                "say what to plan: /plan PROMPT (or choose the Plan mode)",
            )),
            Line::Empty => Err(RpcError::invalid_params("the prompt is empty")),
            Line::Command(_) | Line::Unknown(_) => Err(RpcError::invalid_params(
                "this slash command is for the terminal; keel acp knows /recover-context, /continue-checks, /compact, /init, /plan, /undo and /rewind (a fork is the editor's session/fork)",
            )),
        },
    };
    input.map(|input| (input, false))
}

fn refusal(error: AgentError) -> RpcError {
    match &error {
        AgentError::Busy(_) | AgentError::RecoveryRefused(RecoveryRefusal::TurnRunning) => {
            RpcError::new(code::REFUSED, error.to_string())
        }
        AgentError::RecoveryRefused(_) | AgentError::CannotCompact(_) => {
            RpcError::new(code::REFUSED, error.to_string())
        }
        _ => RpcError::new(code::INTERNAL, error.to_string()),
    }
}

/// A prompt whose turn was admitted and runs.
struct StartedPrompt {
    turn: JoinHandle<Result<TurnOutcome, AgentError>>,
    events: mpsc::UnboundedReceiver<keel_types::Event>,
    session: Arc<Session>,
}
