#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use std::os::unix::fs::PermissionsExt;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_saved_key_is_read_back_owner_only_and_the_last_removal_removes_the_file() {
    let home = tempfile::tempdir().unwrap();
    let mut store = KeyStore::open(home.path()).unwrap();
    assert_eq!(store.get("KEEL_T_KEY_A"), None);
    store.save("KEEL_T_KEY_A", "sk-stored-aaaa").unwrap();
    store.save("KEEL_T_KEY_B", "sk-stored-bbbb").unwrap();
    let path = home.path().join("state/keys.json");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&home.path().join("state")), 0o700);
    let again = KeyStore::open(home.path()).unwrap();
    assert_eq!(again.get("KEEL_T_KEY_A"), Some("sk-stored-aaaa"));
    // Never the key in a Debug output.
    assert!(!format!("{again:?}").contains("sk-stored"));
    let mut again = again;
    assert!(again.remove("KEEL_T_KEY_A").unwrap());
    assert!(!again.remove("KEEL_T_KEY_A").unwrap());
    assert!(path.exists());
    assert!(again.remove("KEEL_T_KEY_B").unwrap());
    assert!(!path.exists());
}

#[test]
fn the_environment_wins_over_a_stored_key() {
    let home = tempfile::tempdir().unwrap();
    let mut store = KeyStore::open(home.path()).unwrap();
    // PATH is always set: the environment's value is the one used.
    store.save("PATH", "sk-stored-path").unwrap();
    store
        .save("KEEL_T_KEY_UNSET_XYZ", "sk-stored-only")
        .unwrap();
    let keys = HomeKeys::open(home.path()).unwrap();
    assert_eq!(keys.key("PATH"), std::env::var("PATH").ok());
    assert_eq!(keys.origin("PATH"), Some(KeyOrigin::Environment));
    assert_eq!(
        keys.key("KEEL_T_KEY_UNSET_XYZ").as_deref(),
        Some("sk-stored-only")
    );
    assert_eq!(keys.origin("KEEL_T_KEY_UNSET_XYZ"), Some(KeyOrigin::Stored));
    assert_eq!(keys.origin("KEEL_T_KEY_NOWHERE"), None);
}

#[test]
fn a_file_others_can_read_or_a_link_is_refused_and_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let mut store = KeyStore::open(home.path()).unwrap();
    store.save("KEEL_T_KEY_A", "sk-stored-aaaa").unwrap();
    let path = home.path().join("state/keys.json");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let error = KeyStore::open(home.path()).unwrap_err().to_string();
    assert!(error.contains("other users can read it"), "{error}");
    assert!(error.contains("keys.json"), "{error}");
    assert!(!error.contains("sk-stored"), "{error}");
    // A link at the name is never followed.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = home.path().join("elsewhere.json");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let error = KeyStore::open(home.path()).unwrap_err().to_string();
    assert!(error.contains("link"), "{error}");
}

#[test]
fn a_file_keel_cannot_understand_names_where_without_quoting_it() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("state")).unwrap();
    let path = home.path().join("state/keys.json");
    for (text, said) in [
        (r#"{"version": 1, "keys": {"K": "sk-secret-one" "#, "line 1"),
        (r#"{"version": 1, "keys": "sk-secret-two"}"#, "line 1"),
        (r#"{"version": 2, "keys": {}}"#, "version 2"),
        (
            r#"{"version": 1, "keys": {"A B": "sk-secret-3"}}"#,
            "variable",
        ),
        (
            r#"{"version": 1, "keys": {"K": "sk secret 4"}}"#,
            "malformed",
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = KeyStore::open(home.path()).unwrap_err().to_string();
        assert!(error.contains(said), "{text}: {error}");
        assert!(error.contains("keys.json"), "{error}");
        assert!(!error.contains("secret"), "{text}: {error}");
        // Nothing was rewritten.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}
