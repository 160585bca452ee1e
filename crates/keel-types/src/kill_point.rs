//! Named kill points for crash tests: `KEEL_KILL_AT=NAME` (or `NAME#N`) makes the process abort
//! (as a SIGKILL would stop it: no destructors, no flush) when it reaches the point called NAME
//! (for the N-th time).
//!
//! Invariants:
//! - Without the variable this is one cached comparison; nothing else reads it.
//! - Points sit between durable steps, so a test can prove what a restart finds there.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Abort the process here when `KEEL_KILL_AT` names this point: `NAME` at its first passage,
/// `NAME#N` at its N-th (the second call of a round, say).
pub fn kill_point(name: &str) {
    static TARGET: OnceLock<Option<(String, usize)>> = OnceLock::new();
    static PASSED: AtomicUsize = AtomicUsize::new(0);
    let target = TARGET.get_or_init(|| {
        let wanted = std::env::var("KEEL_KILL_AT").ok()?;
        Some(match wanted.split_once('#') {
            Some((point, nth)) => (point.to_string(), nth.parse().unwrap_or(1)),
            None => (wanted, 1),
        })
    });
    if let Some((point, nth)) = target
        && point == name
        && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *nth
    {
        std::process::abort();
    }
}
