//! A new store starts as a copy of `fresh.db`: an empty database with keel's schema at
//! `CURRENT_VERSION`, already in WAL mode — what the migrations make, without the two
//! milliseconds of creating it (the first `keel run` in a new home, every `keel eval` trial).
//!
//! Invariants:
//! - The template is exactly what `schema::prepare` makes of an empty file (same tables,
//!   indexes, versions, page size and journal mode): a test compares the two, and says how to
//!   write the template again when the schema changes.
//! - It is written owner-only to a temp file beside the store, synced, then linked into place:
//!   an existing store (another keel made it meanwhile) is never replaced, and a power failure
//!   leaves either no store or the whole template, never a partial file.
//! - It holds no data: nothing of any session, home or machine is in it.

use std::path::Path;

/// The empty store, at `CURRENT_VERSION`.
pub(crate) const TEMPLATE: &[u8] = include_bytes!("fresh.db");

/// Put the template at `path` unless something is there already; whether it was placed.
///
/// A `-wal` or `-shm` file left without its database (a store moved away after a crash) is
/// moved aside first, never deleted: SQLite would replay an old log onto the new store. On a
/// file system without hard links, an empty owner-only file is made instead and the
/// migrations build the schema, as before the template.
pub(crate) fn place(path: &Path) -> std::io::Result<bool> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    for suffix in ["-wal", "-shm"] {
        let mut leftover = path.as_os_str().to_owned();
        leftover.push(suffix);
        let leftover = std::path::PathBuf::from(leftover);
        if leftover.symlink_metadata().is_ok() {
            let mut aside = leftover.clone().into_os_string();
            aside.push(format!(".orphaned-{stamp}"));
            std::fs::rename(&leftover, aside)?;
        }
    }
    match keel_types::private_files::place_private_file(path, TEMPLATE) {
        // EPERM or EOPNOTSUPP: the file system has no hard links.
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported
            ) =>
        {
            keel_types::private_files::create_private_file(path).map(|_| true)
        }
        placed => placed,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use rusqlite::Connection;

    /// What a database is, as far as keel's schema goes.
    fn shape(path: &Path) -> Vec<String> {
        let connection = Connection::open(path).unwrap();
        let mut shape: Vec<String> = connection
            .prepare("SELECT type, name, tbl_name, ifnull(sql, '') FROM sqlite_master ORDER BY type, name")
            .unwrap()
            .query_map([], |row| {
                Ok(format!(
                    "{} {} {} {}",
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?
                ))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for pragma in [
            "user_version",
            "journal_mode",
            "page_size",
            "application_id",
        ] {
            let value: String = connection
                .query_row(&format!("PRAGMA {pragma}"), [], |row| {
                    row.get::<_, rusqlite::types::Value>(0)
                        .map(|value| format!("{value:?}"))
                })
                .unwrap();
            shape.push(format!("{pragma} = {value}"));
        }
        let rows: i64 = connection
            .query_row(
                "SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM items)",
                [],
                |row| row.get(0),
            )
            .unwrap();
        shape.push(format!("rows = {rows}"));
        shape
    }

    /// The store the migrations make of an empty file, checkpointed into its main file.
    fn migrated(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("migrated.db");
        std::fs::File::create(&path).unwrap();
        let connection = Connection::open(&path).unwrap();
        crate::schema::prepare(&connection, &path).unwrap();
        connection
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
        drop(connection);
        path
    }

    #[test]
    fn the_template_is_what_the_migrations_make() {
        let dir = tempfile::tempdir().unwrap();
        let made = migrated(dir.path());
        if std::env::var_os("KEEL_WRITE_FRESH_TEMPLATE").is_some() {
            let bytes = std::fs::read(&made).unwrap();
            std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/src/fresh.db"), bytes).unwrap();
        }
        let placed = dir.path().join("state").join("keel.db");
        std::fs::create_dir_all(placed.parent().unwrap()).unwrap();
        assert!(place(&placed).unwrap());
        assert_eq!(
            shape(&placed),
            shape(&made),
            "src/fresh.db is not what the migrations make: write it again with \
             KEEL_WRITE_FRESH_TEMPLATE=1 cargo test -p keel-store fresh"
        );
    }

    #[test]
    fn a_log_left_without_its_store_is_moved_aside_not_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keel.db");
        std::fs::write(dir.path().join("keel.db-wal"), b"an old log").unwrap();
        std::fs::write(dir.path().join("keel.db-shm"), b"an old index").unwrap();
        let store = crate::Store::open(&path).unwrap();
        store.create_session("s", "/w", "p", "m").unwrap();
        let aside: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains(".orphaned-"))
            .collect();
        assert_eq!(aside.len(), 2, "{aside:?}");
        let kept = aside
            .iter()
            .find(|name| name.starts_with("keel.db-wal"))
            .unwrap();
        assert_eq!(std::fs::read(dir.path().join(kept)).unwrap(), b"an old log");
    }

    #[test]
    fn an_existing_store_is_never_replaced_and_the_copy_is_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keel.db");
        assert!(place(&path).unwrap());
        let mode = std::fs::metadata(&path).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        std::fs::write(&path, b"someone else's").unwrap();
        assert!(!place(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
        // No temp file is left beside it.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }
}
