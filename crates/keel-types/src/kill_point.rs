//! Named kill points for crash tests: `KEEL_KILL_AT=NAME` makes the process abort (as a
//! SIGKILL would stop it: no destructors, no flush) when it reaches the point called NAME.
//!
//! Invariants:
//! - Without the variable this is one cached comparison; nothing else reads it.
//! - Points sit between durable steps, so a test can prove what a restart finds there.

use std::sync::OnceLock;

/// Abort the process here when `KEEL_KILL_AT` names this point.
pub fn kill_point(name: &str) {
    static TARGET: OnceLock<Option<String>> = OnceLock::new();
    let target = TARGET.get_or_init(|| std::env::var("KEEL_KILL_AT").ok());
    if target.as_deref() == Some(name) {
        std::process::abort();
    }
}
