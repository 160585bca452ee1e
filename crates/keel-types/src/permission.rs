//! Permission modes (CONTRACT.md `permission_mode`).
//!
//! Invariant: the serialized names are part of the config contract.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// No tool may change anything.
    ReadOnly,
    /// Changes need the user's approval; headless runs fail closed.
    Ask,
    /// Changes inside the workspace run without asking.
    Auto,
}

impl PermissionMode {
    pub fn parse(name: &str) -> Option<PermissionMode> {
        match name {
            "read-only" => Some(Self::ReadOnly),
            "ask" => Some(Self::Ask),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::Ask => "ask",
            Self::Auto => "auto",
        }
    }
}
