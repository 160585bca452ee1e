//! A suite: a directory of task directories, and its digest.
//!
//! Invariants:
//! - Everything in a suite is a plain file or a directory (`task::only_plain_files`): a link
//!   anywhere in it is refused with its path before any task is read.
//! - Tasks are loaded in name order, every one or none (the first bad task is the error).
//! - The digest covers every file's relative path and bytes, so any change to a task — its
//!   prompt, seed, grader or script — makes another suite.

use crate::EvalError;
use crate::task::Task;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Suite {
    pub name: String,
    pub dir: PathBuf,
    pub tasks: Vec<Task>,
    pub sha256: String,
}

impl Suite {
    pub fn load(dir: &Path, name: &str) -> Result<Suite, EvalError> {
        // The suite's own directory is the user's to name (a link is fine); nothing in it is.
        for entry in std::fs::read_dir(dir).map_err(|error| EvalError::io(dir, error))? {
            let entry = entry.map_err(|error| EvalError::io(dir, error))?;
            crate::task::only_plain_files(&entry.path())?;
        }
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|error| EvalError::io(dir, error))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_dir() && path.join("task.toml").is_file())
            .collect();
        dirs.sort();
        if dirs.is_empty() {
            return Err(EvalError::Task {
                path: dir.to_path_buf(),
                message: "no tasks here (a task is a directory with a task.toml)".into(),
            });
        }
        let tasks = dirs
            .iter()
            .map(|task| Task::load(task))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Suite {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            tasks,
            sha256: digest(dir)?,
        })
    }

    pub fn task(&self, name: &str) -> Option<&Task> {
        self.tasks.iter().find(|task| task.name == name)
    }
}

/// Copy the suite in `from` into `to` (made) as it is: directories and plain files, their modes
/// kept, nothing followed (a link or any other special file is refused, naming it). A run goes
/// on from such a copy, so a change to the original while it runs (a directory swapped for a
/// link) reaches no trial.
pub fn copy_verbatim(from: &Path, to: &Path) -> Result<(), EvalError> {
    crate::task::copy_plain_tree(from, to, None)
}

/// SHA-256 over every file below `dir`: relative path, a zero byte, length, bytes.
pub fn digest(dir: &Path) -> Result<String, EvalError> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    for relative in files {
        let bytes = crate::task::read_plain(&dir.join(&relative))?;
        hasher.update(relative.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<String>) -> Result<(), EvalError> {
    for entry in std::fs::read_dir(dir).map_err(|error| EvalError::io(dir, error))? {
        let entry = entry.map_err(|error| EvalError::io(dir, error))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|error| EvalError::io(&path, error))?;
        if kind.is_dir() {
            collect(root, &path, files)?;
        } else if kind.is_file()
            && let Ok(relative) = path.strip_prefix(root)
        {
            files.push(relative.to_string_lossy().into_owned());
        }
    }
    Ok(())
}
