//! The signals that stop keel: Ctrl-C (SIGINT), SIGTERM and SIGHUP.
//!
//! Invariants:
//! - All three are registered before anything is sent, so from then on none of them kills keel
//!   outright: each cancels the running turn the same way (its tools' process groups killed,
//!   receipts settled, nothing committed late), and only then does keel exit.
//! - The exit code says which signal stopped keel: 130, 143 or 129 (128 + the signal number).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// A signal that asks keel to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
    Hangup,
}

impl Stop {
    pub fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => 130,
            Stop::Terminate => 143,
            Stop::Hangup => 129,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "interrupt",
            Stop::Terminate => "SIGTERM",
            Stop::Hangup => "SIGHUP",
        }
    }
}

pub struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl StopSignals {
    pub fn register() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Forget Ctrl-Cs that arrived while nothing was running, so they cannot cancel the next
    /// turn the moment it starts.
    pub async fn forget_interrupts(&mut self) {
        while let Ok(Some(())) =
            tokio::time::timeout(std::time::Duration::ZERO, self.interrupt.recv()).await
        {}
    }

    /// The next SIGTERM or SIGHUP (Ctrl-C is left to the line editor at the prompt).
    pub async fn next_terminating(&mut self) -> Stop {
        self.next_of(Interrupts::Ignore).await
    }

    /// The next stop signal.
    pub async fn next(&mut self) -> Stop {
        self.next_of(Interrupts::Include).await
    }

    async fn next_of(&mut self, interrupts: Interrupts) -> Stop {
        tokio::select! {
            Some(()) = self.interrupt.recv(), if interrupts == Interrupts::Include => {
                Stop::Interrupt
            }
            Some(()) = self.terminate.recv() => Stop::Terminate,
            Some(()) = self.hangup.recv() => Stop::Hangup,
            else => std::future::pending().await,
        }
    }
}

/// Whether Ctrl-C counts as a stop signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interrupts {
    Include,
    Ignore,
}
