//! Paths as a policy names them: `~` expanded against the home, and the canonical form of one
//! that exists.
//!
//! Invariant: pure but for one `lstat` and a canonicalisation; nothing is created or followed
//! beyond what resolving the path itself reads.

use std::path::{Path, PathBuf};

/// `~/x` against `home`; other paths as they are.
pub(crate) fn expand(entry: &str, home: Option<&Path>) -> Option<PathBuf> {
    match (entry.strip_prefix("~/"), entry == "~", home) {
        (Some(rest), _, Some(home)) => Some(home.join(rest)),
        (None, true, Some(home)) => Some(home.to_path_buf()),
        (Some(_), _, None) | (None, true, None) => None,
        (None, false, _) => Some(PathBuf::from(entry)),
    }
}

/// The canonical form of `path`, if it exists. Most paths asked about do not (the credential
/// stores of tools a user never installed): one `lstat` says so, where resolving the path
/// would read every link on its way first.
pub(crate) fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::symlink_metadata(path).ok()?;
    path.canonicalize().ok()
}
