//! The process groups running tools' commands were started in (`tool_processes`), so that a
//! restart after keel died can stop exactly what it left running.
//!
//! Invariants:
//! - A row is written (fsync'd) right after its command starts and removed once the call's
//!   result is committed, so the rows of a session are the commands that may still run.
//! - Rows hold identities only (pgid, start time, boot id): the store decides nothing; the
//!   caller re-reads `/proc` before it kills anything.

use crate::{Store, StoreError};
use rusqlite::params;

/// One command's process group, as recorded when it started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedProcess {
    pub call_id: String,
    pub pgid: i32,
    pub start_ticks: u64,
    pub boot_id: String,
}

impl Store {
    pub fn record_tool_process(
        &self,
        session: &str,
        process: &RecordedProcess,
    ) -> Result<(), StoreError> {
        let ticks = i64::try_from(process.start_ticks).unwrap_or(i64::MAX);
        self.write(|transaction| {
            transaction.execute(
                "INSERT OR REPLACE INTO tool_processes \
                 (session_id, call_id, pgid, start_ticks, boot_id) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    session,
                    process.call_id,
                    process.pgid,
                    ticks,
                    process.boot_id
                ],
            )?;
            Ok(())
        })
    }

    /// The recorded process groups of `session`.
    pub fn tool_processes(&self, session: &str) -> Result<Vec<RecordedProcess>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT call_id, pgid, start_ticks, boot_id FROM tool_processes \
             WHERE session_id = ?1 ORDER BY call_id, pgid",
        )?;
        let rows = statement.query_map([session], |row| {
            let ticks: i64 = row.get(2)?;
            Ok(RecordedProcess {
                call_id: row.get(0)?,
                pgid: row.get(1)?,
                start_ticks: u64::try_from(ticks).unwrap_or(0),
                boot_id: row.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Forget the groups of one call, or (`None`) of the whole session.
    pub fn forget_tool_processes(
        &self,
        session: &str,
        call_id: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write_deferred(|transaction| {
            match call_id {
                Some(call_id) => transaction.execute(
                    "DELETE FROM tool_processes WHERE session_id = ?1 AND call_id = ?2",
                    params![session, call_id],
                )?,
                None => transaction.execute(
                    "DELETE FROM tool_processes WHERE session_id = ?1",
                    params![session],
                )?,
            };
            Ok(())
        })
    }
}
