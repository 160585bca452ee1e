//! Session leases: one writing process per session.
//!
//! Invariants:
//! - Taking a lease is one immediate transaction: check the holder, then claim.
//! - A lease whose holder process no longer exists is stale and may be taken over; a live
//!   holder's lease is refused with an error that names it.
//! - A `Lease` releases itself when dropped (a crashed holder is detected as dead instead).

use crate::{Store, StoreError, now_ms};
use rusqlite::{OptionalExtension, params};

#[derive(Debug)]
pub struct Lease {
    store: Store,
    session: String,
    pid: u32,
}

fn process_is_alive(pid: u32) -> bool {
    // Linux: a live process has /proc/PID. Elsewhere, assume alive (refuse rather than clash).
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

impl Store {
    /// Whether a live process holds `session` now.
    pub fn lease_is_held(&self, session: &str) -> Result<bool, StoreError> {
        let pid: Option<i64> = self
            .connection()
            .query_row(
                "SELECT pid FROM leases WHERE session_id = ?1",
                [session],
                |row| row.get(0),
            )
            .optional()?;
        Ok(pid
            .and_then(|pid| u32::try_from(pid).ok())
            .is_some_and(process_is_alive))
    }

    /// Claim `session` for this process. `holder` describes us (e.g. `keel run`).
    pub fn acquire_lease(&self, session: &str, holder: &str) -> Result<Lease, StoreError> {
        self.acquire_lease_as(session, holder, std::process::id())
    }

    /// Claim `session` as process `pid` (tests stand in for another keel with it).
    pub fn acquire_lease_as(
        &self,
        session: &str,
        holder: &str,
        pid: u32,
    ) -> Result<Lease, StoreError> {
        // A lease is void after a restart anyway: no fsync of its own.
        self.write_deferred(|transaction| {
            let existing: Option<(String, i64, i64)> = transaction
                .query_row(
                    "SELECT holder, pid, acquired_at FROM leases WHERE session_id = ?1",
                    [session],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()?;
            if let Some((existing_holder, existing_pid, since)) = existing {
                let existing_pid = u32::try_from(existing_pid).unwrap_or(0);
                if existing_pid != pid && process_is_alive(existing_pid) {
                    return Err(StoreError::LeaseHeld {
                        session: session.to_string(),
                        holder: format!("{existing_holder} (pid {existing_pid})"),
                        since_ms: since,
                    });
                }
            }
            transaction.execute(
                "INSERT INTO leases (session_id, holder, pid, acquired_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (session_id) DO UPDATE SET holder = ?2, pid = ?3, acquired_at = ?4",
                params![session, holder, i64::from(pid), now_ms()],
            )?;
            Ok(())
        })?;
        Ok(Lease {
            store: self.clone(),
            session: session.to_string(),
            pid,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = self.store.connection().execute(
            "DELETE FROM leases WHERE session_id = ?1 AND pid = ?2",
            params![self.session, i64::from(self.pid)],
        );
    }
}
