//! The thread every confined command is spawned from.
//!
//! The kernel sends a child its parent-death signal when the *thread* that forked it ends,
//! not the process: a command spawned from a runtime's short-lived blocking thread would be
//! killed when that thread retires. This thread lives as long as keel (its channel is held by
//! a static and it never returns), so a confined command dies with keel and only with keel.
//!
//! Invariants:
//! - Jobs run one at a time, in order; a job that panics is caught and reported as an error,
//!   and the thread goes on.
//! - If the thread cannot be started, spawning fails with that error: nothing falls back to
//!   spawning from the caller's thread.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

static SPAWNER: OnceLock<Result<Mutex<mpsc::Sender<Job>>, String>> = OnceLock::new();

fn spawner() -> Result<&'static Mutex<mpsc::Sender<Job>>, std::io::Error> {
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("keel-sandbox-spawner".into())
            .spawn(move || {
                for job in receiver {
                    job();
                }
            })
            .map(|_| Mutex::new(sender))
            .map_err(|error| error.to_string())
    });
    spawner
        .as_ref()
        .map_err(|error| std::io::Error::other(format!("no spawner thread: {error}")))
}

/// Run `job` on the spawner thread and wait for its result.
pub fn on_lasting_thread<R: Send + 'static>(
    job: impl FnOnce() -> R + Send + 'static,
) -> std::io::Result<R> {
    let (reply, result) = mpsc::sync_channel(1);
    let wrapped: Job = Box::new(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let _ = reply.send(outcome);
    });
    spawner()?
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send(wrapped)
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    match result.recv() {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(std::io::Error::other("spawning a command panicked")),
        Err(_) => Err(std::io::Error::other("the spawner thread is gone")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_on_one_named_thread_that_survives_a_panic() {
        let name = on_lasting_thread(|| std::thread::current().name().map(str::to_string));
        assert_eq!(name.unwrap().as_deref(), Some("keel-sandbox-spawner"));
        #[allow(clippy::panic)]
        let failed = on_lasting_thread(|| -> u8 { panic!("boom") });
        assert!(failed.is_err());
        let first = on_lasting_thread(|| std::thread::current().id()).unwrap();
        let second = on_lasting_thread(|| std::thread::current().id()).unwrap();
        assert_eq!(first, second);
    }
}
