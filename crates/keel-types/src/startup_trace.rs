//! Start-up trace for `bench/startup.sh`: with `KEEL_STARTUP_TRACE=1`, keel notes how long after
//! `main()` each start-up phase ended, and prints them once, as one JSON line on stderr
//! (`keel startup: {...}`), when the first request to a provider goes out.
//!
//! Invariants:
//! - Without the variable every call is one cached check; nothing is recorded or printed.
//! - The line holds phase names and milliseconds, nothing else.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

struct Trace {
    started: Instant,
    phases: Vec<(&'static str, f64)>,
    reported: bool,
}

fn trace() -> Option<&'static Mutex<Trace>> {
    static TRACE: OnceLock<Option<Mutex<Trace>>> = OnceLock::new();
    TRACE
        .get_or_init(|| {
            std::env::var_os("KEEL_STARTUP_TRACE").map(|_| {
                Mutex::new(Trace {
                    started: Instant::now(),
                    phases: Vec::new(),
                    reported: false,
                })
            })
        })
        .as_ref()
}

/// Start the clock (first thing in `main`).
pub fn begin() {
    let _ = trace();
}

/// The phase called `name` ends now.
pub fn mark(name: &'static str) {
    if let Some(trace) = trace()
        && let Ok(mut trace) = trace.lock()
        && !trace.reported
    {
        let elapsed = trace.started.elapsed().as_secs_f64() * 1000.0;
        trace.phases.push((name, elapsed));
    }
}

/// The first request is going out: mark it and print the trace (once).
pub fn first_request() {
    mark("request sent");
    if let Some(trace) = trace()
        && let Ok(mut trace) = trace.lock()
        && !trace.reported
    {
        trace.reported = true;
        let fields: Vec<String> = trace
            .phases
            .iter()
            .map(|(name, ms)| format!("\"{name}\":{ms:.3}"))
            .collect();
        eprintln!("keel startup: {{{}}}", fields.join(","));
    }
}
