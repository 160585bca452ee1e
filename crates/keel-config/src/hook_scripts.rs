//! The hook scripts a trusted project's hooks run, as one listing that trust is bound to
//! (docs/hooks.md#trust): an edit by the model or a `git pull` changes the listing, and the
//! workspace is asked about again.
//!
//! Invariants:
//! - The listing covers every regular file under `.keel/hooks/` and `.claude/hooks/` and every
//!   file a hook command names by a path that resolves inside the workspace
//!   (`$CLAUDE_PROJECT_DIR/…`, `./…`, `dir/…`), each with the SHA-256 of its bytes, sorted by
//!   path: the same files give the same listing.
//! - Bounded: at most `MAX_SCRIPTS` files of at most `MAX_SCRIPT_BYTES` are shown whole; a
//!   larger file or one past the count is listed by its digest alone (its bytes still count).
//! - Text is shown as written; what is not UTF-8 is described, never dumped.

use crate::digest::sha256_hex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The name trust records the listing under.
pub const HOOK_SCRIPTS: &str = "hook scripts";

/// The directories whose every file is a hook script.
const SCRIPT_DIRS: [&str; 2] = [".keel/hooks", ".claude/hooks"];

const MAX_SCRIPTS: usize = 256;
const MAX_SCRIPT_BYTES: usize = 256 * 1024;
/// How deep below a script directory files are found.
const MAX_DEPTH: usize = 4;

/// The listing of the workspace's hook scripts for hooks running `commands` (with the canonical
/// workspace), as trust records it under `HOOK_SCRIPTS`; `None` when there is no such file.
pub(crate) fn listing(workspace: &Path, commands: &[String]) -> Option<(PathBuf, String)> {
    let root = std::fs::canonicalize(workspace).ok()?;
    let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for dir in SCRIPT_DIRS {
        collect_dir(&root, &root.join(dir), 0, &mut files);
    }
    for command in commands {
        for word in path_words(command) {
            let path = root.join(&word);
            if let Ok(real) = std::fs::canonicalize(&path)
                && real.starts_with(&root)
                && real.is_file()
                && let Ok(relative) = real.strip_prefix(&root)
            {
                files.insert(relative.display().to_string(), real);
            }
        }
    }
    if files.is_empty() {
        return None;
    }
    let mut text = String::new();
    for (shown, (relative, path)) in files.iter().enumerate() {
        let Ok(bytes) = std::fs::read(path) else {
            text.push_str(&format!("# {relative}: cannot be read\n"));
            continue;
        };
        let digest = sha256_hex(&bytes);
        match std::str::from_utf8(&bytes) {
            Ok(script) if shown < MAX_SCRIPTS && bytes.len() <= MAX_SCRIPT_BYTES => {
                text.push_str(&format!("# {relative} (sha256 {digest})\n{script}"));
                if !script.ends_with('\n') {
                    text.push('\n');
                }
            }
            _ => text.push_str(&format!(
                "# {relative} (sha256 {digest}, {} bytes, not shown)\n",
                bytes.len()
            )),
        }
    }
    Some((root, text))
}

fn collect_dir(root: &Path, dir: &Path, depth: usize, files: &mut BTreeMap<String, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        if files.len() >= MAX_SCRIPTS * 4 {
            return;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < MAX_DEPTH {
            collect_dir(root, &path, depth + 1, files);
        } else if let Ok(real) = std::fs::canonicalize(&path)
            && real.is_file()
            && let Ok(relative) = path.strip_prefix(root)
        {
            // A link's content counts wherever it leads: it is what the hook runs.
            files.insert(relative.display().to_string(), real);
        }
    }
}

/// The words of `command` that may name a file in the workspace: with a `/` in them, the
/// project directory variable replaced by the workspace, quotes taken off.
fn path_words(command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|word| word.replace(['"', '\''], ""))
        .map(|word| {
            word.replace("${CLAUDE_PROJECT_DIR}", ".")
                .replace("$CLAUDE_PROJECT_DIR", ".")
        })
        .filter(|word| word.contains('/') && !word.starts_with('/') && !word.starts_with('~'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_named_by_commands_and_in_the_hook_dirs_are_listed_with_digests() {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path();
        std::fs::create_dir_all(root.join(".claude/hooks")).unwrap();
        std::fs::create_dir_all(root.join("tools")).unwrap();
        std::fs::write(root.join(".claude/hooks/guard.sh"), "exit 2\n").unwrap();
        std::fs::write(root.join("tools/check.py"), "print(1)\n").unwrap();
        let none = listing(root, &["echo hi".into()]);
        let with_dir = none.expect("the hook dir is listed without any command naming it");
        assert!(with_dir.1.contains(".claude/hooks/guard.sh"));
        assert!(!with_dir.1.contains("check.py"));
        let named = listing(
            root,
            &["python3 \"$CLAUDE_PROJECT_DIR\"/tools/check.py --x".into()],
        )
        .unwrap();
        assert!(named.1.contains("tools/check.py"), "{}", named.1);
        assert!(named.1.contains("print(1)"));
        // An edit changes the digest trust is bound to.
        std::fs::write(root.join("tools/check.py"), "print(2)\n").unwrap();
        let edited = listing(root, &["python3 tools/check.py".into()]).unwrap();
        assert_ne!(
            sha256_hex(edited.1.as_bytes()),
            sha256_hex(named.1.as_bytes())
        );
        // A path outside the workspace is not listed.
        let outside = tempfile::tempdir().unwrap();
        std::fs::remove_dir_all(root.join(".claude")).unwrap();
        std::fs::write(outside.path().join("x.sh"), "x").unwrap();
        let relative_out = format!(
            "../{}/x.sh",
            outside.path().file_name().unwrap().to_str().unwrap()
        );
        assert!(listing(root, &[format!("bash {relative_out}")]).is_none());
    }
}
