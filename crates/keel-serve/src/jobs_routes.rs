//! A session's background jobs over the serve API (docs/serve-api.md#routes): the list the
//! browser's jobs panel shows, and stopping one. `routes.rs` opens the session and hands its
//! controller here.
//!
//! Invariants:
//! - Both routes answer during a turn: they never wait for it (the jobs are the controller's,
//!   read without the turn's state).
//! - What a job printed is shown as people see it: redacted of keel's secrets, its last line
//!   only; the model reads a job's output with `job_output`, never through here.
//! - An unknown job is 404, stopping a job that already ended is 200 saying so.

use crate::error::ApiError;
use axum::response::{IntoResponse, Response};
use keel_agent::Controller;
use serde_json::{Value, json};

/// `GET /api/sessions/{id}/jobs`, for the session `controller` drives.
pub(crate) fn list(controller: &Controller) -> Response {
    let jobs: Vec<Value> = controller
        .jobs()
        .into_iter()
        .map(|job| {
            json!({
                "job": job.job,
                "call_id": job.call_id,
                "command": job.command,
                "running": job.ending.is_none(),
                "elapsed_ms": job.elapsed.map(|elapsed| elapsed.as_millis()),
                "last_line": job.last_line,
                "exit_code": job.ending.and_then(|ending| ending.exit_code),
                "signal": job.ending.and_then(|ending| ending.signal),
                "ended": job.ending.map(|ending| ending.describe()),
            })
        })
        .collect();
    axum::Json(json!({ "jobs": jobs })).into_response()
}

/// `POST /api/sessions/{id}/jobs/{job}/kill`, for session `id`, which `controller` drives.
pub(crate) async fn kill(
    controller: &Controller,
    id: &str,
    job: &str,
) -> Result<Response, ApiError> {
    if !controller.jobs().iter().any(|known| known.job == job) {
        return Err(ApiError::not_found(format!(
            "session `{id}` has no job `{}`",
            job.escape_debug()
        )));
    }
    match controller.kill_job(job).await {
        Ok(said) => Ok(axum::Json(json!({ "job": job, "said": said })).into_response()),
        Err(why) => Err(ApiError::internal(why)),
    }
}
