//! The description of a tool as offered to the model.
//!
//! Invariant: a tool list is serialized in the order given, and each schema keeps its key order
//! (serde_json maps are ordered), so the tool part of a request is byte-stable.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the arguments.
    pub parameters: serde_json::Value,
}
