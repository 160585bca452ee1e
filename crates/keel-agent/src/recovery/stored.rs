//! Recovery records as the store holds them: loaded (decoded, damaged ones kept as such),
//! saved under their id, and expired when new input makes them stale.
//!
//! Invariant: every record goes through `record::encode`/`decode`; nothing else writes them.

use super::record::{self, RecordState, RecoveryRecord, StoredRecord};
use crate::agent::Agent;
use crate::error::AgentError;
use keel_types::EventBody;

pub(crate) fn load_records(agent: &Agent) -> Result<Vec<StoredRecord>, AgentError> {
    Ok(agent
        .services
        .store
        .recovery_records(&agent.session.id)?
        .into_iter()
        .map(|(id, raw)| record::decode(&id, &raw))
        .collect())
}

/// New user input: every pending record expires.
pub(crate) fn expire_pending(agent: &Agent, turn: u64) -> Result<(), AgentError> {
    for stored in load_records(agent)? {
        if let StoredRecord::Known(mut record) = stored
            && record.state == RecordState::Pending
        {
            record.state = RecordState::Expired;
            save(agent, &record)?;
            agent.emit(
                Some(turn),
                EventBody::RecoveryExpired {
                    recovery_id: record.id,
                },
            );
        }
    }
    Ok(())
}

/// Write a record (insert or replace) under its id.
pub(crate) fn save(agent: &Agent, record: &RecoveryRecord) -> Result<(), AgentError> {
    let raw = record::encode(record).map_err(keel_store::StoreError::from)?;
    Ok(agent
        .services
        .store
        .put_recovery_record(&agent.session.id, &record.id, &raw)?)
}
