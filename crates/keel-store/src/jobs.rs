//! A session's background jobs (`bash` with `run_in_background`): each job's id, the call
//! that started it, its command and its process group, so a later load can stop jobs a dead
//! process left running, whatever the receipts say.
//!
//! Invariants:
//! - A job's row is written (fsync'd) right after its process starts, before the call's
//!   result is committed; it is never removed while the session lives, only marked ended
//!   (exit code or signal), so `/jobs` can list what ran.
//! - Job ids count per session (`job-1`, `job-2`, …) and are never reused, not even after a
//!   crash: the next id is one past the highest ever recorded.
//! - Rows hold identities only (pgid, the leader's start time, the boot id): the caller re-reads
//!   `/proc` before it kills anything.

use crate::sessions::to_u64;
use crate::{Store, StoreError};
use rusqlite::params;

/// One background job, as recorded when it started (and how it ended, once it did).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedJob {
    /// `job-N`.
    pub job: String,
    pub call_id: String,
    pub command: String,
    pub pgid: i32,
    pub start_ticks: u64,
    pub boot_id: String,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
    pub ended: Option<JobEnd>,
    /// The model was told how it ended.
    pub told: bool,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobEnd {
    pub at: i64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

impl Store {
    /// The id the session's next job takes: one past the highest ever recorded.
    pub fn next_job_id(&self, session: &str) -> Result<String, StoreError> {
        let highest: Option<i64> = self.connection().query_row(
            "SELECT max(CAST(substr(job, 5) AS INTEGER)) FROM jobs WHERE session_id = ?1",
            [session],
            |row| row.get(0),
        )?;
        Ok(format!("job-{}", to_u64(highest.unwrap_or(0)) + 1))
    }

    /// Record a job whose process just started.
    pub fn record_job(&self, session: &str, job: &RecordedJob) -> Result<(), StoreError> {
        let ticks = i64::try_from(job.start_ticks).unwrap_or(i64::MAX);
        self.write(|transaction| {
            transaction.execute(
                "INSERT INTO jobs (session_id, job, call_id, command, pgid, start_ticks, \
                 boot_id, started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    session,
                    job.job,
                    job.call_id,
                    job.command,
                    job.pgid,
                    ticks,
                    job.boot_id,
                    job.started_at
                ],
            )?;
            Ok(())
        })
    }

    /// Mark a job ended (the first end recorded stays).
    pub fn end_job(&self, session: &str, job: &str, end: JobEnd) -> Result<(), StoreError> {
        self.write(|transaction| {
            transaction.execute(
                "UPDATE jobs SET ended_at = ?3, exit_code = ?4, signal = ?5 \
                 WHERE session_id = ?1 AND job = ?2 AND ended_at IS NULL",
                params![session, job, end.at, end.exit_code, end.signal],
            )?;
            Ok(())
        })
    }

    /// Mark that the model was told how `job` ended.
    pub fn job_told(&self, session: &str, job: &str) -> Result<(), StoreError> {
        self.write(|transaction| {
            transaction.execute(
                "UPDATE jobs SET told = 1 WHERE session_id = ?1 AND job = ?2",
                params![session, job],
            )?;
            Ok(())
        })
    }

    /// The session's jobs, in the order they started.
    pub fn jobs(&self, session: &str) -> Result<Vec<RecordedJob>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT job, call_id, command, pgid, start_ticks, boot_id, started_at, ended_at, \
             exit_code, signal, told FROM jobs WHERE session_id = ?1 ORDER BY started_at, rowid",
        )?;
        let rows = statement.query_map([session], |row| {
            let ticks: i64 = row.get(4)?;
            let ended_at: Option<i64> = row.get(7)?;
            Ok(RecordedJob {
                job: row.get(0)?,
                call_id: row.get(1)?,
                command: row.get(2)?,
                pgid: row.get(3)?,
                start_ticks: u64::try_from(ticks).unwrap_or(0),
                boot_id: row.get(5)?,
                started_at: row.get(6)?,
                ended: match ended_at {
                    Some(at) => Some(JobEnd {
                        at,
                        exit_code: row.get(8)?,
                        signal: row.get(9)?,
                    }),
                    None => None,
                },
                told: row.get::<_, i64>(10)? != 0,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}
