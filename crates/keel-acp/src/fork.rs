//! `session/fork` (ACP's unstable method): a new session that starts with another's history,
//! all of it or up to the turn in `_meta["keel/at"]`, byte for byte (the provider's cache
//! serves it). Opened like `session/load`: the client gets the inherited history as updates.
//!
//! Invariant: the source session is never changed; files are as they are now.

use crate::rpc::{RpcError, code};
use crate::{Agent, string_param};
use serde_json::{Value, json};
use std::sync::Arc;

impl Agent {
    pub(crate) fn fork_session(self: &Arc<Self>, params: &Value) -> Result<Value, RpcError> {
        let source = string_param(params, "sessionId")?;
        let at = params
            .get("_meta")
            .and_then(|meta| meta.get("keel/at"))
            .and_then(Value::as_u64);
        let id = self
            .sessions_factory
            .fork(source, at)
            .map_err(|message| RpcError::new(code::REFUSED, message))?;
        let mut load = params.clone();
        load["sessionId"] = Value::String(id.clone());
        let mut loaded = self.load_session(&load)?;
        loaded["sessionId"] = json!(id);
        Ok(loaded)
    }
}
