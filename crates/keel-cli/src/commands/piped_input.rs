//! What is piped into `keel run "PROMPT"`: `cat src/parse.rs | keel run "explain this"`
//! sends the file with the prompt.
//!
//! Invariants:
//! - Only a pipe (or socket) or a regular file counts; a terminal, `/dev/null` or any other
//!   device never does.
//! - keel never hangs on a stdin nobody writes to: a pipe that gives neither a byte nor its end
//!   within `PIPE_WAIT` is no input (a CI runner's stdin, inherited and left open), and one that
//!   stops for `PIPE_WAIT` before its end is an error that says so.
//! - A regular file is read from its start without moving its offset, and only when its offset
//!   is at the start: in `while read f; do keel run …; done < list` the loop's file is the
//!   loop's, neither consumed nor sent.
//! - At most `MOST_PIPED` bytes (more is refused, naming the limit); text only (a NUL byte or
//!   bytes that are not UTF-8 are refused); empty input is none.

use crate::UsageError;
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::time::Duration;

/// The most bytes of piped input (the prompt's own limit on stdin).
pub const MOST_PIPED: u64 = 4 * 1024 * 1024;

/// How long a pipe may stay silent: before its first byte (then it is no input) or between
/// two (then it is an error).
const PIPE_WAIT: Duration = Duration::from_secs(3);

/// The text piped into this process, if any (see the invariants).
pub fn piped_input() -> anyhow::Result<Option<String>> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let fd = stdin.as_fd().try_clone_to_owned()?;
    let file = std::fs::File::from(fd);
    let kind = file.metadata()?.file_type();
    use std::os::unix::fs::FileTypeExt;
    let bytes = if kind.is_fifo() || kind.is_socket() {
        read_pipe(file)?
    } else if kind.is_file() {
        read_file_from_start(&file)?
    } else {
        None
    };
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    if bytes.len() as u64 > MOST_PIPED {
        return Err(UsageError(format!(
            "the piped input is longer than {} MiB, the most keel adds to a prompt",
            MOST_PIPED / 1024 / 1024
        ))
        .into());
    }
    if bytes.contains(&0) {
        return Err(binary().into());
    }
    let text = String::from_utf8(bytes).map_err(|_| binary())?;
    Ok(Some(text).filter(|text| !text.trim().is_empty()))
}

fn binary() -> UsageError {
    UsageError("the piped input is not text (keel adds only UTF-8 text to a prompt)".into())
}

/// A regular file's bytes from its start (at most one more than `MOST_PIPED`), if its offset is
/// at the start; the offset is left where it was.
fn read_file_from_start(file: &std::fs::File) -> anyhow::Result<Option<Vec<u8>>> {
    use std::io::Seek;
    use std::os::unix::fs::FileExt;
    let mut handle = file;
    if handle.stream_position()? != 0 {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    let mut piece = vec![0u8; 64 * 1024];
    loop {
        let read = file.read_at(&mut piece, bytes.len() as u64)?;
        if read == 0 || bytes.len() as u64 > MOST_PIPED {
            break;
        }
        bytes.extend_from_slice(&piece[..read]);
    }
    Ok(Some(bytes))
}

/// A pipe's bytes until its end (at most one more than `MOST_PIPED`); `None` when it gives
/// nothing within `PIPE_WAIT`.
fn read_pipe(mut file: std::fs::File) -> anyhow::Result<Option<Vec<u8>>> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::io::Read;
    let wait = PollTimeout::try_from(PIPE_WAIT).unwrap_or(PollTimeout::MAX);
    let mut bytes = Vec::new();
    let mut piece = vec![0u8; 64 * 1024];
    loop {
        let ready = {
            let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, wait)?
        };
        if ready == 0 {
            if bytes.is_empty() {
                return Ok(None);
            }
            return Err(UsageError(format!(
                "the piped input stopped for {} s before its end (after {} bytes); keel does \
                 not wait on a pipe left open: close it, or give the input as a file",
                PIPE_WAIT.as_secs(),
                bytes.len()
            ))
            .into());
        }
        let read = file.read(&mut piece)?;
        if read == 0 {
            return Ok(Some(bytes));
        }
        bytes.extend_from_slice(&piece[..read]);
        if bytes.len() as u64 > MOST_PIPED {
            return Ok(Some(bytes));
        }
    }
}

/// `prompt` with `input` after it, in a fence longer than any run of backticks inside.
pub fn with_piped(prompt: &str, input: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in input.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let input = input.strip_suffix('\n').unwrap_or(input);
    format!("{prompt}\n\n{fence}\n{input}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_is_longer_than_any_backtick_run_inside() {
        assert_eq!(
            with_piped("explain", "fn a() {}\n"),
            "explain\n\n```\nfn a() {}\n```"
        );
        assert_eq!(
            with_piped("explain", "```rust\nx\n```\n"),
            "explain\n\n````\n```rust\nx\n```\n````"
        );
    }
}
