//! Why an explicit recovery action was refused: one variant per admission check, so surfaces
//! and tests tell them apart without reading messages.
//!
//! Invariant: each message names the record (or the session) and says what is wrong; none
//! carries a secret.

/// An admission refusal. `noun` is "recovery" or "continue-checks offer".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryRefusal {
    #[error("a turn is running in this session; wait for it to end or cancel it")]
    TurnRunning,
    #[error("there is no recovery record `{id}` in session {session}")]
    NoSuchRecord { id: String, session: String },
    #[error("no {noun} is pending in session {session}{}", latest_note(latest))]
    NonePending {
        noun: &'static str,
        session: String,
        /// The latest record and its state, if there is one.
        latest: Option<(String, String)>,
    },
    #[error("recovery record `{id}` cannot be used: {reason}")]
    Unreadable { id: String, reason: String },
    #[error("record `{id}` is not a {noun}")]
    WrongAction { id: String, noun: &'static str },
    #[error("`{id}` was already used; this incident's budget is spent")]
    AlreadyUsed { id: String },
    #[error("`{id}` has expired (new input, or tools ran, since it was offered)")]
    Expired { id: String },
    #[error("`{id}` was recorded for another provider, endpoint or model; switch back to use it")]
    OtherScope { id: String },
    #[error("the history changed since `{id}` was recorded")]
    HistoryChanged { id: String },
    #[error(
        "tools ran since `{id}` was recorded, so it no longer matches the session; it is not valid any more (its budget is not refunded)"
    )]
    ReceiptsChanged { id: String },
    #[error("could not record `{id}` as consumed ({reason}); nothing was sent")]
    NotPersisted { id: String, reason: String },
    #[error("cannot prepare the request: {0}")]
    CannotPrepare(String),
}

fn latest_note(latest: &Option<(String, String)>) -> String {
    match latest {
        Some((id, state)) => format!(" (the latest, `{id}`, {state})"),
        None => String::new(),
    }
}
