//! Keys saved by `keel auth login`: one file, `$KEEL_HOME/state/keys.json`, mapping the
//! variable a provider's account reads (`DEEPSEEK_API_KEY`) to its key.
//!
//! Invariants:
//! - The environment wins: a variable that is set (and not blank) is used and the stored key
//!   is not (`HomeKeys`).
//! - The file is written whole, owner-only, created exclusively and renamed into place, never
//!   through a link (`keel_types::private_files::write_private_file`); it is read only if it
//!   is the user's own regular file that no other user can read.
//! - A file keel cannot understand is an error naming the file and the fix, and is never
//!   rewritten: a login or logout over it refuses rather than lose what it holds.
//! - No key ever appears in an error, a `Debug` output or a message: parse errors are reported
//!   by position only (serde's own messages may quote the text).
//! - `$KEEL_HOME/state` is hidden from every command keel runs (keel-sandbox's policy).

use crate::dispatch::{EnvKeys, KeySource, key_problem};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file's name under `$KEEL_HOME/state`.
pub const KEY_FILE: &str = "keys.json";

/// A key file is small: anything larger is not one keel wrote.
const MAX_BYTES: u64 = 64 * 1024;

/// Why the stored keys could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("cannot read the stored keys ({path}): {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the stored keys ({path}) are not in the form keel writes ({why}); nothing was changed: \
         move the file away and run `keel auth login` again"
    )]
    Unreadable { path: PathBuf, why: String },
    #[error("cannot save the stored keys ({path}): {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The stored keys of one `$KEEL_HOME`.
#[derive(Clone)]
pub struct KeyStore {
    path: PathBuf,
    keys: BTreeMap<String, String>,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore")
            .field("path", &self.path)
            .field("variables", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct KeyFile {
    version: u32,
    keys: BTreeMap<String, String>,
}

impl KeyStore {
    /// The keys stored in `keel_home` (none when there is no file).
    pub fn open(keel_home: &Path) -> Result<KeyStore, KeyStoreError> {
        let path = keel_home.join("state").join(KEY_FILE);
        let bytes =
            keel_types::private_files::read_private_file(&path, MAX_BYTES).map_err(|source| {
                KeyStoreError::Read {
                    path: path.clone(),
                    source,
                }
            })?;
        let Some(bytes) = bytes else {
            return Ok(KeyStore {
                path,
                keys: BTreeMap::new(),
            });
        };
        let unreadable = |why: String| KeyStoreError::Unreadable {
            path: path.clone(),
            why,
        };
        let file: KeyFile = serde_json::from_slice(&bytes).map_err(|error| {
            unreadable(format!(
                "not valid at line {} column {}",
                error.line(),
                error.column()
            ))
        })?;
        if file.version != 1 {
            return Err(unreadable(format!("version {}", file.version)));
        }
        for (variable, key) in &file.keys {
            if !is_variable_name(variable) {
                return Err(unreadable("a name that is not a variable's".into()));
            }
            if key_problem(key).is_some() || key.is_empty() {
                return Err(unreadable(format!("the key for {variable} is malformed")));
            }
        }
        Ok(KeyStore {
            path,
            keys: file.keys,
        })
    }

    /// No stored keys (a key file that could not be read is left alone).
    pub fn empty(keel_home: &Path) -> KeyStore {
        KeyStore {
            path: keel_home.join("state").join(KEY_FILE),
            keys: BTreeMap::new(),
        }
    }

    /// Where the keys are kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored key for `variable`.
    pub fn get(&self, variable: &str) -> Option<&str> {
        self.keys.get(variable).map(String::as_str)
    }

    /// The variables with a stored key.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Store `key` for `variable` (replacing one stored before) and save the file.
    pub fn save(&mut self, variable: &str, key: &str) -> Result<(), KeyStoreError> {
        self.keys.insert(variable.to_string(), key.to_string());
        self.write()
    }

    /// Forget the key for `variable` and save; whether there was one. The file goes when the
    /// last key does.
    pub fn remove(&mut self, variable: &str) -> Result<bool, KeyStoreError> {
        if self.keys.remove(variable).is_none() {
            return Ok(false);
        }
        if self.keys.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Ok(()) => Ok(true),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(true),
                Err(source) => Err(KeyStoreError::Write {
                    path: self.path.clone(),
                    source,
                }),
            };
        }
        self.write()?;
        Ok(true)
    }

    fn write(&self) -> Result<(), KeyStoreError> {
        let failed = |source| KeyStoreError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            keel_types::private_files::create_private_dir(dir).map_err(failed)?;
        }
        let file = KeyFile {
            version: 1,
            keys: self.keys.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file)
            .map_err(|error| failed(std::io::Error::other(error.to_string())))?;
        bytes.push(b'\n');
        keel_types::private_files::write_private_file(&self.path, &bytes).map_err(failed)
    }
}

/// Where an account's key comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrigin {
    Environment,
    Stored,
}

/// keel's keys: the environment first, then what `keel auth login` stored.
#[derive(Clone, Debug)]
pub struct HomeKeys {
    stored: KeyStore,
}

impl HomeKeys {
    pub fn new(stored: KeyStore) -> HomeKeys {
        HomeKeys { stored }
    }

    /// The keys for `keel_home`.
    pub fn open(keel_home: &Path) -> Result<HomeKeys, KeyStoreError> {
        Ok(HomeKeys::new(KeyStore::open(keel_home)?))
    }

    /// Where the key for `variable` comes from, if there is one.
    pub fn origin(&self, variable: &str) -> Option<KeyOrigin> {
        if EnvKeys.key(variable).is_some() {
            Some(KeyOrigin::Environment)
        } else if self.stored.get(variable).is_some() {
            Some(KeyOrigin::Stored)
        } else {
            None
        }
    }

    /// The variables with a stored key (their keys are secrets too).
    pub fn stored_variables(&self) -> Vec<String> {
        self.stored.variables().map(str::to_string).collect()
    }

    /// Every stored key with its variable, used or not (a set variable wins over it, but it
    /// is still a secret).
    pub fn stored_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.stored
            .variables()
            .filter_map(|variable| Some((variable, self.stored.get(variable)?)))
    }
}

impl KeySource for HomeKeys {
    fn key(&self, env_var: &str) -> Option<String> {
        EnvKeys
            .key(env_var)
            .or_else(|| self.stored.get(env_var).map(str::to_string))
    }
}

/// An environment variable's name: what a provider's `api_key_env` may be.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[path = "key_store_tests.rs"]
mod tests;
