//! Named kill points for crash tests: `KEEL_KILL_AT=NAME` (or `NAME#N`) makes the process abort
//! (as a SIGKILL would stop it: no destructors, no flush) when it reaches the point called NAME
//! (for the N-th time). `KEEL_KILL_AT=panic:NAME` panics there instead, to test that a bug in a
//! turn still ends the turn (`turn/failed`) and leaves the session usable.
//!
//! Invariants:
//! - Without the variable this is one cached comparison; nothing else reads it.
//! - Points sit between durable steps, so a test can prove what a restart finds there.

use std::sync::OnceLock;

/// How a kill point stops the process.
#[derive(Clone, Copy, Debug)]
enum Stop {
    Abort,
    Panic,
}
use std::sync::atomic::{AtomicUsize, Ordering};

/// Abort the process here when `KEEL_KILL_AT` names this point: `NAME` at its first passage,
/// `NAME#N` at its N-th (the second call of a round, say).
pub fn kill_point(name: &str) {
    static TARGET: OnceLock<Option<(String, usize, Stop)>> = OnceLock::new();
    static PASSED: AtomicUsize = AtomicUsize::new(0);
    let target = TARGET.get_or_init(|| {
        let wanted = std::env::var("KEEL_KILL_AT").ok()?;
        let (stop, wanted) = match wanted.strip_prefix("panic:") {
            Some(rest) => (Stop::Panic, rest.to_string()),
            None => (Stop::Abort, wanted),
        };
        Some(match wanted.split_once('#') {
            Some((point, nth)) => (point.to_string(), nth.parse().unwrap_or(1), stop),
            None => (wanted, 1, stop),
        })
    });
    if let Some((point, nth, stop)) = target
        && point == name
        && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *nth
    {
        match stop {
            Stop::Abort => std::process::abort(),
            #[allow(clippy::panic)] // the point of a panic point, reached only when asked for
            Stop::Panic => panic!("panic point {name} reached (KEEL_KILL_AT)"),
        }
    }
}
