//! `handler backup PATH`: an online copy of the embedded store, taken while the service runs.
//!
//! SQLite's backup API copies the database page by page from a read transaction on the live
//! file. All pages are copied in one step, so the copy is one consistent snapshot: it holds every
//! write committed before the step began (an acknowledged write is committed), and none half
//! written. In WAL mode the service's writers are not blocked meanwhile.
//!
//! The copy is written next to `PATH` first and renamed into place only once it passed SQLite's
//! integrity check, so `PATH` is either absent or a complete database. It is a single file in
//! rollback-journal mode (no `-wal` to carry along); the store switches it back to WAL when it
//! opens it. How to restore it is in `docs/operations.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// What was copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupInfo {
    pub path: PathBuf,
    pub bytes: u64,
    /// Items in all containers (leases included).
    pub items: u64,
}

/// How long to wait, in all, for a moment when the source can be read (a writer holding an
/// exclusive lock, e.g. during a WAL checkpoint that truncates).
const BUSY_WAIT: Duration = Duration::from_secs(30);

/// Copy the database at `source` to `target`, which must not exist. Blocking: call it from a
/// blocking thread.
pub fn backup(source: &Path, target: &Path) -> anyhow::Result<BackupInfo> {
    if !source.is_file() {
        bail!("no embedded store at {}", source.display());
    }
    if target.exists() {
        bail!("{} exists already; choose a new path", target.display());
    }
    let partial = partial_path(target);
    let _ = std::fs::remove_file(&partial);
    let result = copy(source, &partial).and_then(|items| {
        std::fs::rename(&partial, target)
            .with_context(|| format!("cannot move the copy to {}", target.display()))?;
        Ok(items)
    });
    let items = match result {
        Ok(items) => items,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let bytes = std::fs::metadata(target)?.len();
    Ok(BackupInfo {
        path: target.to_path_buf(),
        bytes,
        items,
    })
}

fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    target.with_file_name(name)
}

/// Copy, check and return the number of items of the copy.
fn copy(source: &Path, to: &Path) -> anyhow::Result<u64> {
    crate::store::embedded::memory::install();
    // Read-write without create: a WAL database is read through its shared-memory index, which a
    // read-only connection may not be allowed to set up; nothing is written to it.
    let src = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open {}", source.display()))?;
    src.busy_timeout(BUSY_WAIT)?;
    let mut dst =
        Connection::open(to).with_context(|| format!("cannot create {}", to.display()))?;
    {
        let backup = Backup::new(&src, &mut dst)?;
        let deadline = std::time::Instant::now() + BUSY_WAIT;
        loop {
            // -1: every page in one step, i.e. one read transaction, one snapshot.
            match backup.step(-1).context("backup step failed")? {
                StepResult::Done => break,
                // More (cannot happen with -1), Busy, Locked: wait for the lock.
                _ => {
                    if std::time::Instant::now() > deadline {
                        bail!("the database stayed locked for {BUSY_WAIT:?}");
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
    dst.pragma_update(None, "journal_mode", "DELETE")?;
    let check: String = dst.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    if check != "ok" {
        bail!("the copy failed its integrity check: {check}");
    }
    let items: i64 = dst
        .query_row("SELECT COUNT(*) FROM items", [], |r| r.get(0))
        .context("the copy has no items table: is the source a blog database?")?;
    dst.close().map_err(|(_, e)| e)?;
    std::fs::File::open(to)?.sync_all()?;
    Ok(items as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_missing_source_and_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.db");
        let err = backup(&missing, &dir.path().join("b.db")).unwrap_err();
        assert!(err.to_string().contains("no embedded store"), "{err}");

        let src = dir.path().join("src.db");
        Connection::open(&src)
            .unwrap()
            .execute_batch("CREATE TABLE items (x); INSERT INTO items VALUES (1);")
            .unwrap();
        let taken = dir.path().join("taken.db");
        std::fs::write(&taken, b"keep me").unwrap();
        let err = backup(&src, &taken).unwrap_err();
        assert!(err.to_string().contains("exists"), "{err}");
        assert_eq!(std::fs::read(&taken).unwrap(), b"keep me");

        let out = dir.path().join("copy.db");
        let info = backup(&src, &out).unwrap();
        assert_eq!(info.items, 1);
        assert!(!partial_path(&out).exists());
    }
}
