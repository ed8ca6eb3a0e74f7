//! The per-collection advisory lock (`flock` through `std::fs::File::lock`): whoever parses a
//! collection, or still writes it, holds [`COLLECTION_LOCK`] inside its directory exclusively.
//!
//! - The profiler takes it when it creates a collection's `.tmp` directory and keeps it until
//!   the directory has its final name, so a collection in flight is never mistaken for an
//!   interrupted one (a killed process's locks vanish with it).
//! - `analyse` and automatic analysis take it while they parse: a second parser waits, then
//!   finds the marker and does nothing.
//!
//! On a file system without `flock` the lock is skipped (with a debug log): parsing still
//! works, only the protection against concurrent runs is lost.

use super::safe_fs;
use crate::ProfilerError;
use std::fs::{File, TryLockError};
use std::path::Path;

/// The advisory lock file of a collection directory: the profiler holds it (exclusive `flock`)
/// from the creation of the `.tmp` directory until the final rename; analysers hold it while
/// they parse. A `.tmp` directory whose lock nobody holds was left by a process that died.
pub const COLLECTION_LOCK: &str = "rlprof_analysis.lock";

/// A held collection lock; released on drop.
#[derive(Debug)]
pub struct CollectionLock {
    _file: File,
}

/// The result of trying to lock a collection.
#[derive(Debug)]
pub enum Acquired {
    /// Locked: this process may parse (or recover) the collection.
    Locked(CollectionLock),
    /// Someone else holds it (a writer in flight or another parser) and `wait` was false.
    Busy,
    /// The directory no longer exists (another process renamed or removed it).
    Gone,
}

/// Locks the collection `dir`, waiting for other holders when `wait` is set.
pub fn lock_collection(dir: &Path, wait: bool) -> Result<Acquired, ProfilerError> {
    let path = dir.join(COLLECTION_LOCK);
    let io = |source| ProfilerError::Io {
        path: path.clone(),
        source,
    };
    // Never through a planted link (see `safe_fs`).
    let file = match safe_fs::open_or_create(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.is_dir() => {
            return Ok(Acquired::Gone);
        }
        Err(e) => return Err(io(e)),
    };
    let res = if wait {
        file.lock().map_err(TryLockError::Error)
    } else {
        file.try_lock()
    };
    match res {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(Acquired::Busy),
        Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
            tracing::debug!("{}: no file locking here ({e})", path.display());
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    // Locked through a path that another process renamed meanwhile: the lock is on the moved
    // directory, not on `dir`.
    if !dir.is_dir() {
        return Ok(Acquired::Gone);
    }
    Ok(Acquired::Locked(CollectionLock { _file: file }))
}

/// Takes the lock of a collection directory the profiler has just created (its lock file must
/// not exist yet). Without it (a file system without `flock`) the collection still proceeds:
/// `None`, with a debug log.
pub fn lock_new_collection(dir: &Path) -> Option<CollectionLock> {
    let path = dir.join(COLLECTION_LOCK);
    match safe_fs::create_new(&path).map(|f| f.try_lock().map(|()| f)) {
        Ok(Ok(f)) => Some(CollectionLock { _file: f }),
        Ok(Err(e)) => {
            tracing::debug!("{}: not locked ({e})", path.display());
            None
        }
        Err(e) => {
            tracing::debug!("{}: not locked ({e})", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_busy_until_the_first_drops() {
        let d = tempfile::tempdir().unwrap();
        let Acquired::Locked(first) = lock_collection(d.path(), false).unwrap() else {
            panic!("first lock")
        };
        assert!(matches!(
            lock_collection(d.path(), false).unwrap(),
            Acquired::Busy
        ));
        drop(first);
        assert!(matches!(
            lock_collection(d.path(), false).unwrap(),
            Acquired::Locked(_)
        ));
    }

    #[test]
    fn a_new_collection_is_locked_against_analysers() {
        let d = tempfile::tempdir().unwrap();
        let held = lock_new_collection(d.path()).expect("locked");
        assert!(matches!(
            lock_collection(d.path(), false).unwrap(),
            Acquired::Busy
        ));
        assert!(
            lock_new_collection(d.path()).is_none(),
            "the lock file exists"
        );
        drop(held);
        assert!(matches!(
            lock_collection(d.path(), false).unwrap(),
            Acquired::Locked(_)
        ));
    }

    #[test]
    fn missing_directory_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let gone = d.path().join("x");
        assert!(matches!(
            lock_collection(&gone, false).unwrap(),
            Acquired::Gone
        ));
    }
}
