//! A background job's output spool: what the job printed, redacted, on disk in keel's private
//! state (never in the sandbox's `/tmp`, where the job could rewrite it), bounded.
//!
//! Invariants:
//! - Only redacted bytes are written (the job's reader redacts before it appends).
//! - The spool holds at most two segments of `SEGMENT_BYTES`: when the current one is full it
//!   becomes the previous one (replacing the older), so a job that prints for ever uses at most
//!   `2 × SEGMENT_BYTES` of disk. Offsets are absolute (bytes ever written), so a reader that
//!   fell behind is told exactly how much it missed.
//! - A read never ends inside a UTF-8 character: an incomplete one waits for the next read.
//! - A write that fails (a full disk) is counted as missed output, never an error for the job.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The size of one of the spool's two segments.
pub const SEGMENT_BYTES: u64 = 512 * 1024;

/// One job's spool.
#[derive(Debug)]
pub struct Spool {
    path: PathBuf,
    state: Mutex<SpoolState>,
}

#[derive(Debug)]
struct SpoolState {
    current: Option<std::fs::File>,
    /// Bytes ever appended (written or lost).
    written: u64,
    /// The absolute offset of the current segment's first byte.
    current_start: u64,
    /// The absolute offset of the previous segment's first byte, when there is one.
    previous_start: Option<u64>,
}

/// What a read found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SpoolRead {
    pub text: String,
    /// Bytes between the asked offset and `text` that are no longer kept (or were cut to fit).
    pub missed: u64,
    /// Where the next read starts.
    pub next: u64,
}

impl Spool {
    /// A new, empty spool at `path` (its directory is made, owner-only).
    pub fn create(path: PathBuf) -> std::io::Result<Spool> {
        if let Some(parent) = path.parent() {
            keel_types::private_files::create_private_dir(parent)?;
        }
        let current = open_new(&path)?;
        let _ = std::fs::remove_file(previous_path(&path));
        Ok(Spool {
            path,
            state: Mutex::new(SpoolState {
                current: Some(current),
                written: 0,
                current_start: 0,
                previous_start: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SpoolState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Append redacted bytes.
    pub fn append(&self, bytes: &[u8]) {
        let mut state = self.lock();
        let mut rest = bytes;
        while !rest.is_empty() {
            let used = state.written - state.current_start;
            if used >= SEGMENT_BYTES {
                // The current segment becomes the previous one; a new one starts. A segment
                // that could not be kept is forgotten, never read as someone else's bytes.
                let kept = state.current.is_some()
                    && std::fs::rename(&self.path, previous_path(&self.path)).is_ok();
                if !kept {
                    let _ = std::fs::remove_file(previous_path(&self.path));
                }
                state.current = open_new(&self.path).ok();
                state.previous_start = kept.then_some(state.current_start);
                state.current_start = state.written;
                continue;
            }
            let room = usize::try_from(SEGMENT_BYTES - used).unwrap_or(usize::MAX);
            let (now, later) = rest.split_at(rest.len().min(room));
            if let Some(file) = state.current.as_mut()
                && file.write_all(now).is_err()
            {
                // Counted as written: the read says it is missing.
                state.current = None;
            }
            state.written += now.len() as u64;
            rest = later;
        }
    }

    /// Bytes ever appended.
    pub fn written(&self) -> u64 {
        self.lock().written
    }

    /// What was appended from `from` on, at most `max` bytes (the newest, when there is more).
    pub fn read_from(&self, from: u64, max: usize) -> SpoolRead {
        let state = self.lock();
        let oldest = state.previous_start.unwrap_or(state.current_start);
        let mut start = from.max(oldest);
        let mut missed = start - from.min(start);
        let end = state.written;
        let cut = end.saturating_sub(start) > max as u64;
        if cut {
            missed += end - start - max as u64;
            start = end - max as u64;
        }
        let mut bytes = Vec::new();
        if start < state.current_start
            && let Some(previous) = state.previous_start
        {
            let wanted = state.current_start - start;
            if read_range(
                &previous_path(&self.path),
                start - previous,
                wanted,
                &mut bytes,
            )
            .is_err()
            {
                missed += wanted;
            }
            start = state.current_start;
        }
        if start < end
            && read_range(
                &self.path,
                start - state.current_start,
                end - start,
                &mut bytes,
            )
            .is_err()
        {
            missed += end - start;
        }
        drop(state);
        // A cut never starts inside a character: its continuation bytes count as missed.
        if cut {
            let inside = bytes
                .iter()
                .take(3)
                .take_while(|byte| (**byte & 0xC0) == 0x80)
                .count();
            bytes.drain(..inside);
            missed += inside as u64;
        }
        // An incomplete character at the end waits for the next read.
        let held = incomplete_end(&bytes);
        bytes.truncate(bytes.len() - held);
        let held = held as u64;
        SpoolRead {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            missed,
            next: end - held,
        }
    }

    /// Remove the spool's files (the job's session is gone).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(previous_path(&self.path));
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How many bytes at the end of `bytes` begin a UTF-8 character that is not complete yet
/// (whatever comes before them).
fn incomplete_end(bytes: &[u8]) -> usize {
    // The last lead byte among the last three: a character is at most four bytes long.
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let length = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if length > back { back } else { 0 };
    }
    0
}

fn previous_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

fn open_new(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

fn read_range(path: &Path, offset: u64, length: u64, into: &mut Vec<u8>) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let before = into.len();
    let read = file.take(length).read_to_end(into);
    if read.is_err() || ((into.len() - before) as u64) < length {
        // Counted as missed whole: no partial bytes stay behind.
        into.truncate(before);
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_return_what_is_new_and_say_what_a_slow_reader_missed() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::create(dir.path().join("jobs/job-1.log")).unwrap();
        spool.append(b"hello\nwor");
        let first = spool.read_from(0, 1 << 20);
        assert_eq!((first.text.as_str(), first.missed), ("hello\nwor", 0));
        spool.append(b"ld\n");
        let second = spool.read_from(first.next, 1 << 20);
        assert_eq!(second.text, "ld\n");
        // Three segments' worth: the oldest is gone, and a reader from 0 is told how much.
        let block = vec![b'x'; 1024];
        for _ in 0..(3 * SEGMENT_BYTES / 1024) {
            spool.append(&block);
        }
        let late = spool.read_from(second.next, usize::MAX);
        let kept = late.text.len() as u64;
        assert!(kept <= 2 * SEGMENT_BYTES, "{kept}");
        assert!(kept >= SEGMENT_BYTES, "{kept}");
        assert_eq!(late.missed + kept, 3 * SEGMENT_BYTES);
        assert_eq!(late.next, spool.written());
        // Asked for at most 10 bytes: the newest 10, the rest counted as missed.
        let tail = spool.read_from(0, 10);
        assert_eq!(tail.text, "xxxxxxxxxx");
        assert_eq!(tail.missed, spool.written() - 10);
        let on_disk = std::fs::metadata(spool.path()).unwrap().len()
            + std::fs::metadata(previous_path(spool.path()))
                .unwrap()
                .len();
        assert!(on_disk <= 2 * SEGMENT_BYTES, "{on_disk}");
    }

    #[test]
    fn a_character_split_between_writes_is_never_split_in_a_read() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::create(dir.path().join("job-2.log")).unwrap();
        let snow = "雪".as_bytes();
        spool.append(&[b'a', snow[0], snow[1]]);
        let first = spool.read_from(0, 100);
        assert_eq!((first.text.as_str(), first.next), ("a", 1));
        spool.append(&snow[2..]);
        assert_eq!(spool.read_from(first.next, 100).text, "雪");
        // An invalid byte earlier does not hide an incomplete character at the end.
        spool.append(&[0xFF, b'b', snow[0]]);
        let read = spool.read_from(first.next + 3, 100);
        assert_eq!(read.text, "\u{FFFD}b");
        spool.append(&snow[1..]);
        assert_eq!(spool.read_from(read.next, 100).text, "雪");
        // A read cut to its newest bytes never starts inside a character.
        let tail = spool.read_from(0, 3);
        assert_eq!(tail.text, "雪");
        assert_eq!(tail.missed, spool.written() - 3);
        let inside = spool.read_from(0, 2);
        assert_eq!((inside.text.as_str(), inside.missed), ("", spool.written()));
    }
}
