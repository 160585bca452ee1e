//! The routes of the serve API (docs/serve-api.md#routes).
//!
//! Invariants:
//! - Status codes are exactly the contract's: 400 for a malformed or contradictory body, 401
//!   and 403 from `access`, 404 for an unknown (or malformed) session id, 409 for a busy
//!   session, a stale recovery id or a decision on a call that is not waiting, 413 past
//!   `MAX_BODY_BYTES`. Every error body is `{error: {code, message}}`.
//! - A session id is 16 lowercase hex digits; anything else (path traversal included) is 404
//!   before any lookup.

use crate::approvals::Decision;
use crate::error::ApiError;
use crate::page_events::PageEvents;
use crate::{AppState, CLIENT_BUFFER, MAX_BODY_BYTES, OpenSession, access, ui};
use axum::Router;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures_util::Stream;
use keel_agent::{Input, Line, SessionChoice, SurfaceCommand};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;

pub(crate) fn router(state: Arc<AppState>, access: Arc<access::Access>) -> Router {
    Router::new()
        .route("/", get(ui::index))
        .route("/app.js", get(ui::script))
        .route("/app.css", get(ui::style))
        .route("/api/sessions", post(create_session).get(list_sessions))
        .route("/api/sessions/{id}", get(session_status))
        .route("/api/sessions/{id}/submit", post(submit))
        .route("/api/sessions/{id}/cancel", post(cancel))
        .route("/api/sessions/{id}/rewind", post(rewind))
        .route("/api/sessions/{id}/fork", post(fork))
        .route("/api/sessions/{id}/history", get(history))
        .route("/api/sessions/{id}/recovery", get(recovery))
        .route("/api/sessions/{id}/events", get(events))
        .route("/api/sessions/{id}/approvals/{call_id}", post(approve))
        .route("/api/sessions/{id}/model", post(switch_model))
        .route("/api/sessions/{id}/jobs", get(jobs))
        .route("/api/sessions/{id}/jobs/{job}/kill", post(kill_job))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(access, access::check))
        .with_state(state)
}

/// The session's background jobs (`jobs_routes.rs`).
async fn jobs(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let open = session(&state, &id).await?;
    Ok(crate::jobs_routes::list(&open.controller))
}

/// Stop one of the session's background jobs (`jobs_routes.rs`).
async fn kill_job(
    State(state): State<Arc<AppState>>,
    Path((id, job)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let open = session(&state, &id).await?;
    crate::jobs_routes::kill(&open.controller, &id, &job).await
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// The body as JSON of type `T`: 413 past the limit, 400 when it is not that JSON.
fn json_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("the body is larger than {MAX_BODY_BYTES} bytes"),
            )
        } else {
            ApiError::bad_request(format!("cannot read the body: {rejection}"))
        }
    })?;
    serde_json::from_slice(&bytes).map_err(|error| {
        ApiError::bad_request(format!("the body is not the expected JSON: {error}"))
    })
}

fn valid_id(id: &str) -> Result<(), ApiError> {
    if id.len() == 16
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "no session `{}`",
            id.escape_default()
        )))
    }
}

/// The open session `id`, opening (resuming) it if this server does not hold it yet.
async fn session(state: &AppState, id: &str) -> Result<Arc<OpenSession>, ApiError> {
    valid_id(id)?;
    if let Some(open) = state.sessions.lock().await.get(id) {
        return Ok(open.clone());
    }
    let _opening = state.opening.lock().await;
    // Another request may have opened it while this one waited.
    if let Some(open) = state.sessions.lock().await.get(id) {
        return Ok(open.clone());
    }
    if !state.factory.exists(id)? {
        return Err(ApiError::not_found(format!("no session `{id}`")));
    }
    // Opening may wait for MCP servers: the other sessions are served meanwhile.
    let open = open_session(state, SessionChoice::Resume(id.to_string()), None)?;
    state
        .sessions
        .lock()
        .await
        .insert(id.to_string(), open.clone());
    Ok(open)
}

fn open_session(
    state: &AppState,
    choice: SessionChoice,
    model: Option<String>,
) -> Result<Arc<OpenSession>, ApiError> {
    let approver = state.approvals.approver();
    let controller = state
        .factory
        .open(choice, model, approver.clone())
        .map_err(|error| match error {
            crate::OpenError::Agent(agent) => ApiError::from(agent),
            crate::OpenError::Refused(message) => ApiError::bad_request(message),
        })?;
    approver.set_session(&controller.session().id);
    Ok(Arc::new(OpenSession { controller }))
}

async fn create_session(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let empty = body
        .as_ref()
        .map(|bytes| bytes.trim_ascii().is_empty())
        .unwrap_or(false);
    if !empty {
        let _: serde_json::Map<String, Value> = json_body(body)?;
    }
    let open = open_session(&state, SessionChoice::New, None)?;
    let id = open.controller.session().id.clone();
    open.controller.announce();
    state.sessions.lock().await.insert(id.clone(), open);
    Ok((StatusCode::CREATED, axum::Json(json!({ "id": id }))).into_response())
}

async fn list_sessions(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let sessions: Vec<Value> = state
        .factory
        .sessions()?
        .iter()
        .map(keel_agent::SessionOverview::to_json)
        .collect();
    Ok(axum::Json(sessions).into_response())
}

/// The slash commands a submit's `input` may start with: name and what it does.
fn commands(custom: &keel_agent::CustomCommands) -> Vec<serde_json::Value> {
    let built_in = keel_agent::SLASH_COMMANDS.iter().filter(|(usage, _)| {
        [
            "/compact",
            "/init",
            "/plan",
            "/recover-context",
            "/continue-checks",
        ]
        .iter()
        .any(|name| usage.split_whitespace().next() == Some(name))
    });
    built_in
        .map(|(usage, what)| json!({"name": usage, "description": what}))
        .chain(custom.list().map(|command| {
            json!({
                "name": format!("/{} [arguments]", command.name),
                "description": command.description.clone().unwrap_or_else(|| "custom command".into()),
            })
        }))
        .collect()
}

async fn session_status(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let open = session(&state, &id).await?;
    let controller = &open.controller;
    let settings = controller.settings();
    let pending = controller
        .pending_action()
        .map(|pending| json!({"recoveryId": pending.recovery_id, "action": pending.action}));
    // The session's own totals, its earlier processes' turns included.
    let spend = controller.session_usage()?;
    let usage = spend.usage;
    Ok(axum::Json(json!({
        "id": id,
        "workspace": settings.workspace.display().to_string(),
        "model": format!("{}/{}", settings.profile.name, settings.model),
        "busy": controller.is_busy(),
        // The permission mode in force (`/plan PROMPT` and an approval's `mode` change it).
        "mode": controller.permission_mode().as_str(),
        "pending": pending,
        "waiting": state.approvals.waiting(&id),
        "usage": usage,
        "cache_hit_ratio": usage.cache_hit_ratio(),
        "cost_display": spend.cost_display(),
        "cost": spend.cost,
        // Some of `usage` has no price in `cost` (another model or currency).
        "cost_partial": spend.partial,
        "context": controller.window_use(),
        // What the workspace's untrusted project files asked for and did not get.
        "untrusted": settings.untrusted,
        // The slash commands `input` takes here: keel's, then the session's custom ones.
        "commands": commands(controller.services().commands()),
        // The latest turn the conversation holds (what an undo undoes), if any.
        "last_turn": controller.last_turn_in_history().ok().flatten(),
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    /// The last turn the fork keeps (all of them when absent).
    at: Option<u64>,
}

/// `POST /api/sessions/{id}/fork`: a new session of this workspace with the history up to a
/// turn (its requests begin with the very bytes the original sent); 201 with its id.
async fn fork(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    valid_id(&id)?;
    let body: ForkBody = json_body(body)?;
    if !state.factory.exists(&id)? {
        return Err(ApiError::not_found(format!("no session `{id}`")));
    }
    let forked = state.factory.fork(&id, body.at)?;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({"id": forked.id, "forked_from": id, "at": body.at})),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RewindBody {
    /// The first turn to undo (the conversation's latest when absent: an undo).
    to: Option<u64>,
    code: Option<bool>,
    conversation: Option<bool>,
    force: Option<bool>,
}

/// `POST /api/sessions/{id}/rewind`: files and/or conversation as before a turn; what could
/// not be restored is in the answer (a conflict is not an error: it is listed).
async fn rewind(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    valid_id(&id)?;
    let body: RewindBody = json_body(body)?;
    session(&state, &id).await?;
    let sessions = state.sessions.lock().await;
    let open = sessions
        .get(&id)
        .ok_or_else(|| ApiError::not_found(format!("no session `{id}`")))?;
    let to = match body.to {
        Some(to) => to,
        None => open.controller.last_turn_in_history()?.ok_or_else(|| {
            ApiError::conflict(
                "cannot_rewind",
                "nothing to undo: the conversation holds no turn",
            )
        })?,
    };
    let scope = keel_agent::RewindScope {
        code: body.code.unwrap_or(true),
        conversation: body.conversation.unwrap_or(true),
    };
    let report = open
        .controller
        .rewind(to, scope, body.force.unwrap_or(false))?;
    let conflicts: Vec<serde_json::Value> = report
        .conflicts
        .iter()
        .map(|(path, why)| json!({"path": path, "why": why}))
        .collect();
    let saved: Vec<serde_json::Value> = report
        .saved
        .iter()
        .map(|(path, retrieve)| json!({"path": path, "retrieve": retrieve}))
        .collect();
    Ok(axum::Json(json!({
        "to": to,
        "restored": report.restored,
        "saved": saved,
        "conflicts": conflicts,
        "not_restored": report.not_restorable,
        "revision": report.revision,
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitBody {
    input: Option<String>,
    action: Option<String>,
    #[serde(rename = "recoveryId")]
    recovery_id: Option<String>,
    format: Option<String>,
}

/// The turn a submit body asks for (docs/serve-api.md#submitting-a-turn),
/// and whether it is `/plan PROMPT` (the session goes into plan mode once it is admitted).
fn input_of(
    body: SubmitBody,
    controller: &keel_agent::Controller,
) -> Result<(Input, bool), ApiError> {
    let Some(action) = body.action else {
        let text = body.input.unwrap_or_default();
        return match controller.parse_line(&text) {
            Line::Input(input) => Ok((input, false)),
            Line::Command(SurfaceCommand::Plan(Some(prompt))) => Ok((Input::Prompt(prompt), true)),
            Line::Command(SurfaceCommand::Plan(None)) => {
                Err(ApiError::bad_request("say what to plan: /plan PROMPT"))
            }
            Line::Empty => Err(ApiError::bad_request(
                "`input` is empty: say what keel should do",
            )),
            Line::Command(_) | Line::Unknown(_) => Err(ApiError::bad_request(
                "slash commands other than /recover-context, /continue-checks, /compact and \
                 /plan PROMPT are not available here",
            )),
        };
    };
    if body.format.is_some() {
        return Err(ApiError::bad_request(
            "`format` cannot be combined with an action",
        ));
    }
    let Some(recovery_id) = body.recovery_id else {
        return Err(ApiError::bad_request(format!(
            "the action `{action}` needs `recoveryId` (the id from GET …/recovery)"
        )));
    };
    let input = match action.as_str() {
        "protocol_recovery" => Ok(Input::ProtocolRecovery {
            recovery_id: Some(recovery_id),
            guidance: body.input.filter(|text| !text.trim().is_empty()),
        }),
        "final_readiness_recovery" => Ok(Input::FinalReadinessRecovery {
            recovery_id: Some(recovery_id),
        }),
        "context_recovery" => Ok(Input::Compact {
            recovery_id: Some(recovery_id),
            focus: body.input.filter(|text| !text.trim().is_empty()),
        }),
        other => Err(ApiError::bad_request(format!(
            "unknown action `{}`: use `protocol_recovery`, `final_readiness_recovery` or \
             `context_recovery`",
            other.escape_default()
        ))),
    };
    input.map(|input| (input, false))
}

async fn submit(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    valid_id(&id)?;
    let body = json_body(body)?;
    session(&state, &id).await?;
    // Admitted under the sessions lock: a model switch (which takes the same lock) sees the
    // turn as running, or the submit sees the switched controller; never half of each.
    let admitted = {
        let sessions = state.sessions.lock().await;
        let open = sessions
            .get(&id)
            .ok_or_else(|| ApiError::not_found(format!("no session `{id}`")))?;
        let (input, plan) = input_of(body, &open.controller)?;
        let admitted = open.controller.begin(input)?;
        if plan {
            open.controller
                .set_permission_mode(keel_tools::PermissionMode::Plan);
        }
        admitted
    };
    let turn = tokio::spawn(async move {
        // The outcome reaches clients as events; a failure of the store is one too.
        let _ = admitted.run().await;
    });
    let mut turns = state.lock_turns();
    turns.retain(|running| !running.is_finished());
    turns.push(turn);
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({"status": "started"})),
    )
        .into_response())
}

async fn cancel(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let open = session(&state, &id).await?;
    let running = open.controller.is_busy();
    open.controller.cancel();
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({"cancelled": running})),
    )
        .into_response())
}

async fn history(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    valid_id(&id)?;
    // A subagent's session is read, never opened: its items and receipts only.
    if let Some(transcript) = state.factory.child_transcript(&id)? {
        let items: Vec<Value> = transcript
            .items
            .iter()
            .map(|stored| {
                let mut value = stored.item.as_ref().map_or(Value::Null, |item| {
                    serde_json::to_value(item).unwrap_or(Value::Null)
                });
                with_html(&mut value);
                value
            })
            .collect();
        return Ok(axum::Json(json!({
            "id": id,
            "parent": transcript.session.parent,
            "agent": transcript.session.agent,
            "items": items,
            "receipts": transcript.receipts,
        }))
        .into_response());
    }
    let open = session(&state, &id).await?;
    let last_event_id = open.controller.last_event_id()?;
    let transcript = open.controller.transcript()?;
    let items: Vec<Value> = transcript
        .items
        .iter()
        .map(|stored| {
            let mut value = match &stored.item {
                Ok(item) => serde_json::to_value(item).unwrap_or(Value::Null),
                Err(reason) => json!({"revision": stored.revision, "undecodable": reason}),
            };
            if let Some(object) = value.as_object_mut() {
                object.insert("turn".into(), json!(stored.turn));
            }
            with_html(&mut value);
            value
        })
        .collect();
    // How each turn ended, from the stored events: what a reloaded page shows under it.
    let endings: Vec<Value> = open
        .controller
        .events_after(0)?
        .into_iter()
        .filter(|event| {
            matches!(
                event.body,
                keel_types::EventBody::TurnCompleted { .. }
                    | keel_types::EventBody::TurnFailed { .. }
            ) && event.id.is_some_and(|id| id <= last_event_id)
        })
        .map(|event| serde_json::to_value(&event).unwrap_or(Value::Null))
        .collect();
    Ok(axum::Json(json!({
        "id": id,
        "model": format!("{}/{}", transcript.session.provider, transcript.session.model),
        "items": items,
        "receipts": transcript.receipts,
        "turn_endings": endings,
        "last_event_id": last_event_id,
    }))
    .into_response())
}

async fn recovery(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let open = session(&state, &id).await?;
    let latest = open.controller.latest_recovery()?;
    Ok(axum::Json(latest.map_or(Value::Null, |record| record.to_json())).into_response())
}

/// The renderer's HTML next to every text the page shows as markdown (an answer's text parts,
/// a summary): the page renders no markdown itself, so it and the terminal never disagree.
fn with_html(item: &mut Value) {
    if item["role"] == "summary"
        && let Some(text) = item["text"].as_str()
    {
        let html = keel_render::markdown_html(text);
        item["html"] = Value::String(html);
    }
    if let Some(parts) = item.get_mut("parts").and_then(Value::as_array_mut) {
        for part in parts {
            if part["type"] == "text"
                && let Some(text) = part["text"].as_str()
            {
                let html = keel_render::markdown_html(text);
                part["html"] = Value::String(html);
            }
            if part["type"] == "tool_call"
                && let (Some(name), Some(arguments)) =
                    (part["name"].as_str(), part["arguments"].as_str())
                && let Some(diff) = crate::page_events::call_diff_html(name, arguments)
            {
                part["diff_html"] = Value::String(diff);
            }
        }
    }
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    after: Option<u64>,
}

async fn events(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    query: Result<Query<EventsQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(query) = query.map_err(|rejection| {
        ApiError::bad_request(format!("bad query: {rejection}; use ?after=EVENT_ID"))
    })?;
    let open = session(&state, &id).await?;
    let after = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .or(query.after)
        .unwrap_or(0);
    let receiver = open
        .controller
        .subscribe_after_bounded(after, CLIENT_BUFFER)?;
    let stopping = state.shutting_down.clone();
    let approvals = state.approvals.clone();
    let stream = futures_util::stream::unfold(
        (receiver, stopping, PageEvents::default()),
        move |(mut receiver, mut stopping, mut attempt)| {
            let approvals = approvals.clone();
            let session = id.clone();
            async move {
                let event = tokio::select! {
                    event = receiver.recv() => event?,
                    _ = stopping.wait_for(|stop| *stop) => return None,
                };
                let mut data = serde_json::to_value(&event).unwrap_or(Value::Null);
                // The answer rendered so far is this session's own (a subagent's text, under
                // its own session id, is never folded into it).
                if event.session_id == session {
                    attempt.enrich(&mut data);
                }
                // The change a waiting write or edit would make, or the plan to approve, for
                // its card (asked before announced, so the call is waiting by now).
                // A subagent's call waits under its own session id (the event's).
                let asking = data["session_id"].as_str().unwrap_or(&session).to_string();
                if data["type"] == "approval/requested"
                    && let Some(call) = data["call_id"]
                        .as_str()
                        .and_then(|call_id| approvals.waiting_call(&asking, call_id))
                {
                    if let Some(always) = call.always {
                        data["always"] = Value::String(always);
                    }
                    if let Some(diff) = call.diff_html {
                        data["diff_html"] = Value::String(diff);
                    }
                    if let Some(plan) = call.plan_html {
                        data["plan_html"] = Value::String(plan);
                    }
                }
                let kind = data["type"].as_str().unwrap_or("message").to_string();
                let mut sse = SseEvent::default().event(kind).data(data.to_string());
                if let Some(id) = event.id {
                    sse = sse.id(id.to_string());
                }
                Some((Ok(sse), (receiver, stopping, attempt)))
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalBody {
    decision: String,
    /// With `deny`: a note for the model (what to do instead).
    note: Option<String>,
    /// With `allow` of a plan: the mode to carry it out in (`ask` or `auto`).
    mode: Option<String>,
}

async fn approve(
    State(state): State<Arc<AppState>>,
    Path((id, call_id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    valid_id(&id)?;
    let body: ApprovalBody = json_body(body)?;
    let Some(mut decision) = Decision::parse(&body.decision) else {
        return Err(ApiError::bad_request(
            "`decision` must be \"allow\", \"deny\" or \"always\"",
        ));
    };
    if let Some(note) = body.note.filter(|note| !note.trim().is_empty()) {
        if decision != Decision::Deny(None) {
            return Err(ApiError::bad_request("`note` goes with \"deny\" only"));
        }
        if note.chars().count() > keel_agent::LONGEST_NOTE {
            return Err(ApiError::bad_request(format!(
                "`note` is longer than {} characters",
                keel_agent::LONGEST_NOTE
            )));
        }
        decision = Decision::Deny(Some(note));
    }
    if let Some(name) = &body.mode {
        use keel_tools::PermissionMode;
        let Some(mode) = PermissionMode::parse(name).filter(|mode| !mode.only_reads()) else {
            return Err(ApiError::bad_request(
                "`mode` must be \"ask\" or \"auto\": the mode to carry the plan out in",
            ));
        };
        let is_plan = state
            .approvals
            .waiting_call(&id, &call_id)
            .is_some_and(|call| call.plan_html.is_some());
        if decision != Decision::Allow(None) || !is_plan {
            return Err(ApiError::bad_request(
                "`mode` goes with \"allow\" of a plan only",
            ));
        }
        decision = Decision::Allow(Some(mode));
    }
    // A subagent's call waits under its child session's id, which this server does not open
    // as a session of its own: the waiting call is what makes the id known here.
    if state.approvals.waiting_call(&id, &call_id).is_none() {
        session(&state, &id).await?;
    }
    state
        .approvals
        .decide(&id, &call_id, decision)
        .map_err(|error| ApiError::conflict("not_waiting", error.to_string()))?;
    Ok(axum::Json(json!({"decided": body.decision})).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelBody {
    model: String,
}

async fn switch_model(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    valid_id(&id)?;
    let body: ModelBody = json_body(body)?;
    session(&state, &id).await?;
    let mut sessions = state.sessions.lock().await;
    let busy = sessions
        .get(&id)
        .is_none_or(|open| open.controller.is_busy());
    if busy {
        return Err(ApiError::conflict(
            "busy",
            "a turn is running in this session; wait for it or cancel it",
        ));
    }
    // Release this process's hold on the session before the new controller takes it; its
    // background jobs are kept for the new one.
    let _kept_jobs = sessions.get(&id).map(|open| open.controller.keep_jobs());
    sessions.remove(&id);
    match reopen(&state, &id, Some(body.model)).await {
        Ok(switched) => {
            let settings = switched.controller.settings();
            let model = format!("{}/{}", settings.profile.name, settings.model);
            sessions.insert(id, switched);
            Ok(axum::Json(json!({ "model": model })).into_response())
        }
        Err(error) => {
            if let Ok(previous) = reopen(&state, &id, None).await {
                sessions.insert(id, previous);
            }
            Err(error)
        }
    }
}

/// Open session `id` again once the previous controller is gone; a request that still holds
/// it briefly (a status read) is waited for, a little.
async fn reopen(
    state: &AppState,
    id: &str,
    model: Option<String>,
) -> Result<Arc<OpenSession>, ApiError> {
    let mut tries = 0;
    loop {
        match open_session(state, SessionChoice::Resume(id.to_string()), model.clone()) {
            Err(error) if error.code == "busy" && tries < 50 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            result => return result,
        }
    }
}
