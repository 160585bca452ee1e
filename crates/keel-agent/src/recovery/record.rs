//! Versioned local recovery records (docs/recovery.md).
//!
//! Invariants:
//! - A record decodes only if `version` is 1, `id` and `fingerprint` are non-empty, `prefix`
//!   is above 0 and `state` is known; anything else is kept as raw text and is never
//!   recoverable.
//! - Unknown fields of a version-1 record are kept and written back unchanged; a record of an
//!   unknown version is never re-encoded at all (its raw text is stored as it came).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const RECORD_VERSION: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    Pending,
    Consumed,
    Expired,
}

impl RecordState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Consumed => "consumed",
            Self::Expired => "expired",
        }
    }
}

/// A version-1 recovery record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    pub version: u64,
    pub id: String,
    pub state: RecordState,
    /// Binds session, provider, endpoint and model.
    pub scope: String,
    /// Hash of the provider-visible history of the failed request.
    pub fingerprint: String,
    /// Number of provider-visible messages of the failed request (> 0).
    pub prefix: u64,
    /// How many failed requests this incident saw.
    pub count: u64,
    /// Hash of the last provider-visible item of the failed request.
    pub anchor: String,
    /// The turn that failed.
    pub run: u64,
    /// Hash of the tool receipts when the incident was recorded.
    pub evidence: String,
    /// Whether the repaired projection is in force (set when consumed).
    pub projected: bool,
    /// `final_readiness_recovery` for a "continue checks" offer; absent for protocol recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<keel_types::InputKind>,
    /// Why a turn was not ready (readiness offers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The estimated tokens of the request a provider rejected as longer than its window
    /// (compaction offers only): what keel knows of the window, across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_tokens: Option<u64>,
    /// Fields this keel does not know, kept for the keel that wrote them.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
}

/// A stored record as read back.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredRecord {
    Known(RecoveryRecord),
    /// Unknown version or invalid: kept byte for byte, never recoverable.
    Unrecoverable {
        id: String,
        raw: String,
        reason: String,
    },
}

impl StoredRecord {
    pub fn id(&self) -> &str {
        match self {
            Self::Known(record) => &record.id,
            Self::Unrecoverable { id, .. } => id,
        }
    }

    /// The JSON shown by `keel session recovery` (raw text for records we cannot read).
    pub fn to_json(&self) -> Value {
        match self {
            Self::Known(record) => serde_json::to_value(record).unwrap_or(Value::Null),
            Self::Unrecoverable { raw, .. } => {
                serde_json::from_str(raw).unwrap_or(Value::String(raw.clone()))
            }
        }
    }
}

/// Decode with the seed's validation.
pub fn decode(id: &str, raw: &str) -> StoredRecord {
    let unrecoverable = |reason: String| StoredRecord::Unrecoverable {
        id: id.to_string(),
        raw: raw.to_string(),
        reason,
    };
    let value: Value = match serde_json::from_str(raw) {
        Ok(value) => value,
        Err(error) => return unrecoverable(format!("not JSON ({error})")),
    };
    match value.get("version").and_then(Value::as_u64) {
        Some(RECORD_VERSION) => {}
        Some(other) => return unrecoverable(format!("version {other} is not known to this keel")),
        None => return unrecoverable("it has no version".into()),
    }
    let record: RecoveryRecord = match serde_json::from_value(value) {
        Ok(record) => record,
        Err(error) => return unrecoverable(format!("it does not decode ({error})")),
    };
    if record.id.is_empty() {
        return unrecoverable("its id is empty".into());
    }
    if record.fingerprint.is_empty() {
        return unrecoverable("its fingerprint is empty".into());
    }
    if record.prefix == 0 {
        return unrecoverable("its prefix is 0".into());
    }
    StoredRecord::Known(record)
}

pub fn encode(record: &RecoveryRecord) -> Result<String, serde_json::Error> {
    serde_json::to_string(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> Value {
        serde_json::json!({"version": 1, "id": "r1", "state": "pending", "scope": "s", "fingerprint": "f",
            "prefix": 3, "count": 1, "anchor": "a", "run": 2, "evidence": "e", "projected": false})
    }

    #[test]
    fn valid_records_decode_and_unknown_fields_round_trip() {
        let mut value = valid();
        value["future"] = serde_json::json!({"nested": [1, 2, {"z": true}]});
        let raw = value.to_string();
        let StoredRecord::Known(record) = decode("r1", &raw) else {
            panic!("should decode")
        };
        assert_eq!(record.state, RecordState::Pending);
        let back: Value = serde_json::from_str(&encode(&record).unwrap()).unwrap();
        assert_eq!(back, value, "unknown fields survive a load and save");
    }

    #[test]
    fn validation_follows_the_seed() {
        let cases: [(&str, Value); 7] = [
            ("version", serde_json::json!(2)),
            ("version", Value::Null),
            ("id", serde_json::json!("")),
            ("fingerprint", serde_json::json!("")),
            ("prefix", serde_json::json!(0)),
            ("state", serde_json::json!("haunted")),
            ("prefix", serde_json::json!(-1)),
        ];
        for (field, bad) in cases {
            let mut value = valid();
            value[field] = bad.clone();
            let raw = value.to_string();
            match decode("r1", &raw) {
                StoredRecord::Unrecoverable { raw: kept, .. } => {
                    assert_eq!(kept, raw, "kept byte for byte")
                }
                StoredRecord::Known(_) => panic!("{field} = {bad} must not decode"),
            }
        }
        assert!(matches!(
            decode("x", "{not json"),
            StoredRecord::Unrecoverable { .. }
        ));
    }
}
