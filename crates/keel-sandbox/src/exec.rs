//! What a command that joins a session's namespaces execs itself: its program's path, its
//! arguments and its whole environment, made before the spawn. Its process runs on a stack of
//! its own (sharing the outer process's memory until it execs, see `confine::joined`), so it
//! cannot return into std's exec: it execs with these.
//!
//! Invariants:
//! - The same program, arguments and environment std would exec, as the command stands when
//!   it is confined (`Sandbox::confine` says: change nothing after): keel's environment with
//!   the command's changes (a command confined this way is never `env_clear`ed: std does not
//!   say whether it was), the program found on the `PATH` the command gets (its absolute
//!   entries: a relative one would mean the workspace), as `execvp` finds it (in keel's view: a
//!   program in a directory the sandbox hides fails to start, where `execvp` would go on to
//!   the next entry); none found is an error, never a file of that name in the working
//!   directory.
//! - The pointer arrays are null-terminated and point into strings this value owns (their
//!   bytes never move: moving a `CString` moves only its handle).

use crate::SandboxError;
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[derive(Debug)]
pub(crate) struct Exec {
    pub path: CString,
    /// Addresses of the argument strings, then 0.
    pub argv: Vec<usize>,
    /// Addresses of the `NAME=value` strings, then 0.
    pub envp: Vec<usize>,
    _strings: Vec<CString>,
}

fn c_string(bytes: &[u8], what: &str) -> Result<CString, SandboxError> {
    CString::new(bytes).map_err(|_| SandboxError::Path {
        path: Path::new(OsStr::from_bytes(bytes)).to_path_buf(),
        reason: format!("the command's {what} contains a NUL byte"),
    })
}

/// The file `execvp` would run for `program` with `search` as the `PATH` (glibc's default
/// without one); `None` when there is none, where `execvp` fails too (never a file of that
/// name in the working directory).
fn found_on_path(program: &OsStr, search: Option<&OsStr>) -> Option<OsString> {
    if program.as_bytes().contains(&b'/') {
        return Some(program.to_os_string());
    }
    let search = search.unwrap_or(OsStr::new("/bin:/usr/bin"));
    std::env::split_paths(search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|found| found.is_file() && found.permissions().mode() & 0o111 != 0)
        })
        .map(OsString::from)
}

impl Exec {
    pub(crate) fn of(command: &std::process::Command) -> Result<Exec, SandboxError> {
        let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
        for (name, value) in command.get_envs() {
            match value {
                Some(value) => env.insert(name.to_os_string(), value.to_os_string()),
                None => env.remove(name),
            };
        }
        let search = env.get(OsStr::new("PATH")).map(|path| path.as_os_str());
        let program =
            found_on_path(command.get_program(), search).ok_or_else(|| SandboxError::Path {
                path: Path::new(command.get_program()).to_path_buf(),
                reason: "no such program on the command's PATH".into(),
            })?;
        let path = c_string(program.as_bytes(), "program")?;
        let mut strings = Vec::new();
        for argument in std::iter::once(command.get_program()).chain(command.get_args()) {
            strings.push(c_string(argument.as_bytes(), "argument")?);
        }
        let arguments = strings.len();
        for (name, value) in &env {
            let mut entry = name.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            strings.push(c_string(&entry, "environment")?);
        }
        let address = |string: &CString| string.as_ptr() as usize;
        let argv = strings[..arguments]
            .iter()
            .map(address)
            .chain(std::iter::once(0))
            .collect();
        let envp = strings[arguments..]
            .iter()
            .map(address)
            .chain(std::iter::once(0))
            .collect();
        Ok(Exec {
            path,
            argv,
            envp,
            _strings: strings,
        })
    }
}
