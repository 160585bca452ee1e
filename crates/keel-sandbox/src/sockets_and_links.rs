//! What is found by walking the file system once per session: the directories that hold unix
//! sockets (a socket cannot be kept from a command but by hiding it), and where the links in
//! the credential stores lead.
//!
//! Invariants:
//! - Every walk is bounded (levels and entries looked at) and follows no link while walking.
//! - Nothing found here may hide a directory holding the home (or `/`): the callers keep the
//!   roots out too.

use crate::paths::{canonical, expand};
use crate::policy::{HOME_SECRETS, Places, SandboxSettings};
use std::path::{Path, PathBuf};

/// Directories under `home` (at most `depth` levels down, at most `budget` entries looked at)
/// that hold a unix socket: an agent's, a VM's, a desktop's. `skip` (the workspace) is not
/// entered.
pub fn socket_dirs_in(home: &Path, skip: &[PathBuf], depth: usize, budget: usize) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut found = Vec::new();
    let mut queue = vec![(home.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((dir, level)) = queue.pop() {
        let Ok(children) = std::fs::read_dir(&dir) else {
            continue;
        };
        for child in children.flatten() {
            seen += 1;
            if seen > budget {
                return found;
            }
            let Ok(kind) = child.file_type() else {
                continue;
            };
            let path = child.path();
            if kind.is_socket() {
                if !found.contains(&dir) {
                    found.push(dir.clone());
                }
            } else if kind.is_dir() && level < depth && !skip.iter().any(|kept| &path == kept) {
                queue.push((path, level + 1));
            }
        }
    }
    found
}

/// Stores whose links are their own business (browser profiles: lock files, huge trees).
const NOT_WALKED: &[&str] = &[
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
];

/// Where the links inside the credential stores (the user's `forbid_read` and
/// `referenced_files` first, then the home's) lead, outside the store: a key kept in a
/// dotfiles repository and linked into `~/.ssh` would otherwise be read at its real path. At
/// most `budget` entries looked at in each store, three levels down; a target holding the home
/// directory (or `/`) is left out.
pub fn secret_link_targets(
    settings: &SandboxSettings,
    places: &Places,
    budget: usize,
) -> Vec<PathBuf> {
    let home = places.home.as_deref();
    let home_canonical = home.and_then(canonical);
    let stores: Vec<PathBuf> = settings
        .forbid_read
        .iter()
        .filter_map(|entry| expand(entry, home))
        .chain(places.referenced_files.iter().cloned())
        .chain(home.into_iter().flat_map(|home| {
            HOME_SECRETS
                .iter()
                .filter(|name| !NOT_WALKED.contains(name))
                .map(move |name| home.join(name))
        }))
        .filter_map(|store| canonical(&store))
        .collect();
    let mut targets = Vec::new();
    for store in &stores {
        let mut queue = vec![(store.clone(), 0)];
        let mut seen = 0;
        'store: while let Some((dir, level)) = queue.pop() {
            let Ok(children) = std::fs::read_dir(&dir) else {
                continue;
            };
            for child in children.flatten() {
                seen += 1;
                if seen > budget {
                    break 'store;
                }
                let Ok(kind) = child.file_type() else {
                    continue;
                };
                if kind.is_dir() && level < 3 {
                    queue.push((child.path(), level + 1));
                } else if kind.is_symlink()
                    && let Some(target) = canonical(&child.path())
                    && !target.starts_with(store)
                    && target.parent().is_some()
                    && !home_canonical
                        .as_ref()
                        .is_some_and(|home| home.starts_with(&target))
                    && !targets.contains(&target)
                {
                    targets.push(target);
                }
            }
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_out_of_a_credential_store_are_found_but_never_one_holding_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".ssh/deeper")).unwrap();
        std::fs::create_dir_all(root.join("dotfiles")).unwrap();
        std::fs::write(root.join("dotfiles/key"), "k").unwrap();
        std::fs::write(home.join(".ssh/inside"), "k").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, home.join(".ssh").join(name)).unwrap();
        };
        link(&root.join("dotfiles/key"), "deeper/id");
        link(&home.join(".ssh/inside"), "same-store");
        link(&home, "home");
        link(Path::new("/"), "root");
        link(&root, "above-home");
        let places = Places {
            home: Some(home.clone()),
            ..Places::default()
        };
        let found = secret_link_targets(&SandboxSettings::default(), &places, 1_000);
        assert_eq!(found, vec![root.join("dotfiles/key")]);
        // The budget bounds each store's walk; a user's own entry is walked whatever the home
        // holds (its stores come after it).
        assert!(secret_link_targets(&SandboxSettings::default(), &places, 1).is_empty());
        std::fs::create_dir_all(root.join("vault")).unwrap();
        std::os::unix::fs::symlink(root.join("dotfiles/key"), root.join("vault/key")).unwrap();
        let settings = SandboxSettings {
            forbid_read: vec![root.join("vault").display().to_string()],
            ..SandboxSettings::default()
        };
        assert_eq!(
            secret_link_targets(&settings, &places, 1),
            vec![root.join("dotfiles/key")]
        );
    }
}
