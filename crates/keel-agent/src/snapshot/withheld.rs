//! What keel keeps out of its snapshot store, and the record of it a rewind reads.
//!
//! Invariants:
//! - Only what git would newly hash is looked at (files it does not track, and tracked files
//!   changed since this session's index): what the repository already holds is borrowed, never
//!   copied into keel's store.
//! - A file of those whose bytes hold one of keel's secrets (a provider key in a `deploy.sh`)
//!   is never added: its snapshot keeps what the index had, and the path is recorded as
//!   withheld at the snapshot's batch (`withheld-<session>` in the store), so a rewind names it
//!   as not restorable instead of restoring a stale copy.
//! - An untracked file larger than `MOST_UNTRACKED` is left out too (a downloaded model or
//!   dataset would be copied at every command); the rewind says so of all of them at once.

use super::{MOST_UNTRACKED, Snapshots};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

/// What one snapshot leaves out.
#[derive(Debug, Default)]
pub(super) struct LeftOut {
    /// Pathspecs that exclude them from `git add`.
    pub pathspecs: Vec<OsString>,
    /// The paths (relative to the repository root) that hold a secret.
    pub withheld: Vec<Vec<u8>>,
}

impl Snapshots {
    /// The files git would newly hash that must stay out of the store.
    pub(super) fn left_out(&self) -> LeftOut {
        let mut list = vec![
            "ls-files",
            "-t",
            "--others",
            "--modified",
            "--exclude-standard",
            "-z",
            "--",
        ];
        list.push(&self.scope);
        list.extend(self.excluded.iter().map(String::as_str));
        let Ok(listed) = self.run(&list) else {
            return LeftOut::default();
        };
        let mut left = LeftOut::default();
        let mut seen = BTreeSet::new();
        for entry in listed.split(|byte| *byte == 0) {
            // `? path` (not tracked) or `C path` (changed); anything else is not hashed.
            let (untracked, path) = match entry {
                [b'?', b' ', path @ ..] => (true, path),
                [b'C', b' ', path @ ..] => (false, path),
                _ => continue,
            };
            if path.is_empty() || !seen.insert(path.to_vec()) {
                continue;
            }
            let on_disk = self.path_of(path);
            let Ok(meta) = on_disk.symlink_metadata() else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let too_big = untracked && meta.len() > MOST_UNTRACKED;
            let secret = !too_big && self.secrets.held_in_file(&on_disk);
            if too_big || secret {
                let mut spec = OsString::from(":(exclude,top,literal)");
                spec.push(OsStr::from_bytes(path));
                left.pathspecs.push(spec);
            }
            if secret {
                left.withheld.push(path.to_vec());
            }
        }
        left
    }

    fn withheld_record(&self) -> std::path::PathBuf {
        self.store.join(format!("withheld-{}", self.session))
    }

    /// Record that the snapshot of the batch from receipt `first` on left `paths` out.
    pub(super) fn record_withheld(&self, first: u64, paths: &[Vec<u8>]) -> std::io::Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        let mut record = Vec::new();
        for path in paths {
            record.extend_from_slice(format!("{first}\0").as_bytes());
            record.extend_from_slice(path);
            record.push(0);
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.withheld_record())?;
        file.write_all(&record)
    }

    /// The paths a snapshot of a batch from receipt `first` on left out for holding a secret.
    pub(crate) fn withheld_since(&self, first: u64) -> BTreeSet<Vec<u8>> {
        let Ok(record) = std::fs::read(self.withheld_record()) else {
            return BTreeSet::new();
        };
        let fields: Vec<&[u8]> = record.split(|byte| *byte == 0).collect();
        fields
            .chunks(2)
            .filter_map(|pair| match pair {
                [at, path] if !path.is_empty() => {
                    let at: u64 = std::str::from_utf8(at).ok()?.parse().ok()?;
                    (at >= first).then(|| path.to_vec())
                }
                _ => None,
            })
            .collect()
    }
}
