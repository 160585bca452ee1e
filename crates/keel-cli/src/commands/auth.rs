//! `keel auth login [PROVIDER]` and `keel auth logout [PROVIDER]`: a provider's key kept by
//! keel (keel-llm's `key_store`), for people who would rather not export it in every shell.
//!
//! Invariants:
//! - A key is never taken from the command line (it would be in the shell's history and in
//!   `/proc/*/cmdline`): it is typed on the terminal with echo off, or given as one line on
//!   stdin. Nothing of it is ever printed; only its length is said.
//! - The terminal's settings are put back however the reading ends (Enter, Ctrl-C, Ctrl-D, an
//!   error): Ctrl-C and Ctrl-Z are read as keys while echo is off, and a SIGTERM or SIGHUP
//!   from outside puts the terminal back before keel exits with the signal's code.
//! - A malformed key is refused before anything is stored; a key file keel cannot read is
//!   never overwritten (the store refuses and says what to do).
//! - The key is stored for the variable the provider's first account reads: the environment,
//!   when that variable is set, still wins, and the user is told so.
//!
//! Hand-written rather than `rpassword`: that crate reads in canonical mode with signals on,
//! so a Ctrl-C while it waits ends keel with the terminal's echo still off.

use crate::cli::CommonArgs;
use crate::{Outcome, UsageError, settings};
use keel_llm::{KeyOrigin, KeyStore, key_problem};
use std::io::{IsTerminal, Read, Write};

/// The longest key keel accepts: provider keys are tens of characters.
const MAX_KEY_BYTES: usize = 4096;

pub fn login(common: &CommonArgs, provider: Option<&str>) -> anyhow::Result<Outcome> {
    let (provider, variable) = provider_variable(common, provider)?;
    let home = settings::keel_home()?;
    // Refused before the key is asked for when the store cannot be written safely.
    let mut store = KeyStore::open(&home).map_err(|error| UsageError(error.to_string()))?;
    let key = if std::io::stdin().is_terminal() {
        eprint!(
            "The key of provider `{provider}` (stored for ${variable}; what you type is not \
             shown; Ctrl-C cancels): "
        );
        let _ = std::io::stderr().flush();
        match read_hidden_line()? {
            Some(key) => key,
            None => {
                eprintln!("\nnothing stored");
                return Ok(Outcome::Cancelled);
            }
        }
    } else {
        read_piped_line()?
    };
    let key = key.trim().to_string();
    if key.is_empty() {
        return Err(UsageError("no key was given: nothing stored".into()).into());
    }
    if let Some(problem) = key_problem(&key) {
        return Err(UsageError(format!("the key {problem}: nothing stored")).into());
    }
    store
        .save(&variable, &key)
        .map_err(|error| UsageError(error.to_string()))?;
    eprintln!(
        "stored a key of {} characters for provider `{provider}` in {} (yours only; the sandbox \
         hides it from commands); keel uses it when ${variable} is not set",
        key.chars().count(),
        store.path().display()
    );
    if keel_llm::HomeKeys::new(store).origin(&variable) == Some(KeyOrigin::Environment) {
        eprintln!(
            "note: ${variable} is set in this environment, and it wins over the stored key \
             (unset it to use the stored one)"
        );
    }
    Ok(Outcome::Completed)
}

pub fn logout(common: &CommonArgs, provider: Option<&str>) -> anyhow::Result<Outcome> {
    let (provider, variable) = provider_variable(common, provider)?;
    let home = settings::keel_home()?;
    let mut store = KeyStore::open(&home).map_err(|error| UsageError(error.to_string()))?;
    let removed = store
        .remove(&variable)
        .map_err(|error| UsageError(error.to_string()))?;
    if removed {
        eprintln!("removed the stored key of provider `{provider}` (${variable})");
    } else {
        eprintln!("no key of provider `{provider}` (${variable}) was stored: nothing to remove");
    }
    if std::env::var_os(&variable).is_some_and(|value| !value.is_empty()) {
        eprintln!("note: ${variable} is still set in this environment");
    }
    Ok(Outcome::Completed)
}

/// The provider named (or the configured model's) and the variable its first account reads.
fn provider_variable(
    common: &CommonArgs,
    provider: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let workspace = settings::workspace(common)?;
    let config = settings::load_config(common, &workspace)?;
    let name = match provider {
        Some(name) => name.to_string(),
        None => config.model()?.provider,
    };
    let profile = config.profile(&name)?;
    let Some(account) = profile.accounts.first() else {
        return Err(UsageError(format!("provider `{name}` has no account")).into());
    };
    Ok((name, account.api_key_env.clone()))
}

/// One line from the terminal with echo off, read key by key: Enter ends it, Backspace and
/// Ctrl-U edit it, Ctrl-C and Ctrl-D (on an empty line) cancel (`None`).
fn read_hidden_line() -> anyhow::Result<Option<String>> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin)?;
    let mut quiet = saved.clone();
    quiet
        .local_flags
        .remove(LocalFlags::ECHO | LocalFlags::ICANON | LocalFlags::ISIG | LocalFlags::IEXTEN);
    // A SIGTERM or SIGHUP while echo is off: the terminal back first, then the exit the
    // signal asks for.
    let on_signal = {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let saved = saved.clone();
        tokio::spawn(async move {
            let code = tokio::select! {
                _ = terminate.recv() => 143,
                _ = hangup.recv() => 129,
            };
            let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &saved);
            eprintln!("\nnothing stored");
            std::process::exit(code);
        })
    };
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet)?;
    // Put back whatever happens below.
    struct Restore<'a>(
        &'a std::io::Stdin,
        nix::sys::termios::Termios,
        tokio::task::JoinHandle<()>,
    );
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = tcsetattr(self.0, SetArg::TCSANOW, &self.1);
            self.2.abort();
        }
    }
    let _restore = Restore(&stdin, saved, on_signal);
    let mut line: Vec<u8> = Vec::new();
    let mut byte = [0u8; 1];
    let mut input = stdin.lock();
    loop {
        if input.read(&mut byte)? == 0 {
            return Ok(None);
        }
        match byte[0] {
            b'\r' | b'\n' => break,
            0x03 => return Ok(None),
            0x04 if line.is_empty() => return Ok(None),
            0x7f | 0x08 => {
                // A whole character: drop continuation bytes, then its first.
                while line.pop().is_some_and(|last| last & 0xc0 == 0x80) {}
            }
            0x15 => line.clear(),
            other if line.len() < MAX_KEY_BYTES => line.push(other),
            _ => {}
        }
    }
    eprintln!();
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// One line from a pipe (`printenv KEY | keel auth login`): more than one line is refused.
fn read_piped_line() -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_KEY_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_KEY_BYTES {
        return Err(UsageError(format!(
            "more than {MAX_KEY_BYTES} bytes on stdin: a key is one short line"
        ))
        .into());
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| UsageError("stdin is not text: a key is one line of ASCII".into()))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.contains('\n') {
        return Err(UsageError("stdin has more than one line: a key is one line".into()).into());
    }
    Ok(text.to_string())
}
