//! The suite that ships with keel (`crates/keel-eval/suite/`): the seed's read, edit and
//! fixed-verification kinds, an honesty task that cannot be done, a recovery task (an
//! opaque 400 on the tool replay), a read task two `explore` subagents answer together, and
//! one answered through a web server started as a background job, queried and killed.
//! Every task has a scripted model, so it runs with no key.
//!
//! Invariant: the files are compiled in and written out whole before a run (`materialize`),
//! so the built-in suite is a directory like any other and its digest covers every byte.

use crate::EvalError;
use std::path::Path;

/// The name the built-in suite is asked for by.
pub const NAME: &str = "builtin";

/// Every file of the built-in suite: path below the suite, contents.
const FILES: &[(&str, &str)] = &[
    (
        "delegate/mock.json",
        include_str!("../suite/delegate/mock.json"),
    ),
    (
        "delegate/reference/notes/a.txt",
        include_str!("../suite/delegate/reference/notes/a.txt"),
    ),
    (
        "delegate/reference/notes/b.txt",
        include_str!("../suite/delegate/reference/notes/b.txt"),
    ),
    (
        "delegate/task.toml",
        include_str!("../suite/delegate/task.toml"),
    ),
    (
        "delegate/verify.sh",
        include_str!("../suite/delegate/verify.sh"),
    ),
    (
        "delegate/workdir/notes/a.txt",
        include_str!("../suite/delegate/workdir/notes/a.txt"),
    ),
    (
        "delegate/workdir/notes/b.txt",
        include_str!("../suite/delegate/workdir/notes/b.txt"),
    ),
    ("edit/mock.json", include_str!("../suite/edit/mock.json")),
    (
        "edit/reference/config.ini",
        include_str!("../suite/edit/reference/config.ini"),
    ),
    ("edit/task.toml", include_str!("../suite/edit/task.toml")),
    ("edit/verify.sh", include_str!("../suite/edit/verify.sh")),
    (
        "edit/workdir/config.ini",
        include_str!("../suite/edit/workdir/config.ini"),
    ),
    (
        "honesty/mock.json",
        include_str!("../suite/honesty/mock.json"),
    ),
    (
        "honesty/task.toml",
        include_str!("../suite/honesty/task.toml"),
    ),
    (
        "honesty/verify.sh",
        include_str!("../suite/honesty/verify.sh"),
    ),
    (
        "honesty/workdir/README.md",
        include_str!("../suite/honesty/workdir/README.md"),
    ),
    ("read/mock.json", include_str!("../suite/read/mock.json")),
    (
        "read/reference/notes/code.txt",
        include_str!("../suite/read/reference/notes/code.txt"),
    ),
    ("read/task.toml", include_str!("../suite/read/task.toml")),
    ("read/verify.sh", include_str!("../suite/read/verify.sh")),
    (
        "read/workdir/notes/code.txt",
        include_str!("../suite/read/workdir/notes/code.txt"),
    ),
    (
        "recovery/mock.json",
        include_str!("../suite/recovery/mock.json"),
    ),
    (
        "recovery/reference/data.txt",
        include_str!("../suite/recovery/reference/data.txt"),
    ),
    (
        "recovery/task.toml",
        include_str!("../suite/recovery/task.toml"),
    ),
    (
        "recovery/verify.sh",
        include_str!("../suite/recovery/verify.sh"),
    ),
    (
        "recovery/workdir/data.txt",
        include_str!("../suite/recovery/workdir/data.txt"),
    ),
    ("serve/mock.json", include_str!("../suite/serve/mock.json")),
    (
        "serve/reference/status.txt",
        include_str!("../suite/serve/reference/status.txt"),
    ),
    ("serve/task.toml", include_str!("../suite/serve/task.toml")),
    ("serve/verify.sh", include_str!("../suite/serve/verify.sh")),
    (
        "serve/workdir/status.txt",
        include_str!("../suite/serve/workdir/status.txt"),
    ),
    (
        "verify/mock.json",
        include_str!("../suite/verify/mock.json"),
    ),
    (
        "verify/reference/check.sh",
        include_str!("../suite/verify/reference/check.sh"),
    ),
    (
        "verify/reference/status.txt",
        include_str!("../suite/verify/reference/status.txt"),
    ),
    (
        "verify/task.toml",
        include_str!("../suite/verify/task.toml"),
    ),
    (
        "verify/verify.sh",
        include_str!("../suite/verify/verify.sh"),
    ),
    (
        "verify/workdir/check.sh",
        include_str!("../suite/verify/workdir/check.sh"),
    ),
];

/// Write the built-in suite into `dir` (created; files already there are replaced).
pub fn materialize(dir: &Path) -> Result<(), EvalError> {
    for (relative, contents) in FILES {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| EvalError::io(parent, error))?;
        }
        std::fs::write(&path, contents).map_err(|error| EvalError::io(&path, error))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_suite_directory_is_compiled_in() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("suite");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    on_disk.push(path.strip_prefix(&root).unwrap().display().to_string());
                }
            }
        }
        on_disk.sort();
        let compiled: Vec<String> = FILES.iter().map(|(path, _)| path.to_string()).collect();
        assert_eq!(compiled, on_disk, "add new suite files to FILES");
    }
}
