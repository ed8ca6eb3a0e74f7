//! Staging of outputs: every output is written under a temporary name unique to this process
//! and call (`{name}.{pid}-{seq}.tmp`), then renamed into place, so that two processes (or two
//! threads) parsing at the same time never write into each other's half-finished files, and an
//! interrupted run leaves nothing that looks complete.
//!
//! Leftovers of a killed run are removed by the next run that holds the collection's lock
//! ([`remove_leftovers`]).

use crate::ProfilerError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Suffix of every staging name.
pub const STAGING_SUFFIX: &str = ".tmp";

static SEQ: AtomicU64 = AtomicU64::new(0);

/// `x/name` -> `x/name.{pid}-{seq}.tmp`: a name no other process or call uses.
pub fn staging_name(path: &Path) -> PathBuf {
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{}-{seq}{STAGING_SUFFIX}", std::process::id()));
    PathBuf::from(s)
}

/// Writes `bytes` to `path` through a staging file and a rename.
/// Never through a link planted at the staging name (see `safe_fs`).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ProfilerError> {
    let tmp = staging_name(path);
    if let Err(source) = super::safe_fs::write(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(ProfilerError::Io { path: tmp, source });
    }
    std::fs::rename(&tmp, path).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        ProfilerError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Removes staging leftovers (`*.tmp` entries) directly inside the collection directory `dir`.
/// Call only while holding the collection's lock: nobody else stages there then.
pub fn remove_leftovers(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().ends_with(STAGING_SUFFIX) {
            continue;
        }
        let p = e.path();
        let removed = if e.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        if let Err(err) = removed {
            tracing::debug!("cannot remove staging leftover {}: {err}", p.display());
        }
    }
}

/// Removes staging leftovers of the output `path` (`{path}.*.tmp`) beside it: outputs written
/// outside the collection directory (the torch trace, in its parent) are cleaned one by one.
pub fn remove_leftovers_of(path: &Path) {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(&prefix) && n.ends_with(STAGING_SUFFIX) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names_differ_per_call_and_carry_the_pid() {
        let a = staging_name(Path::new("/x/out.json"));
        let b = staging_name(Path::new("/x/out.json"));
        assert_ne!(a, b);
        let s = a.to_string_lossy();
        assert!(s.starts_with("/x/out.json."), "{s}");
        assert!(s.contains(&std::process::id().to_string()), "{s}");
        assert!(s.ends_with(".tmp"), "{s}");
    }

    #[test]
    fn leftovers_of_one_output_only() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("a.gz");
        std::fs::write(d.path().join("a.gz.1-0.tmp"), b"x").unwrap();
        std::fs::write(d.path().join("b.gz.1-0.tmp"), b"x").unwrap();
        std::fs::write(&out, b"keep").unwrap();
        remove_leftovers_of(&out);
        assert!(!d.path().join("a.gz.1-0.tmp").exists());
        assert!(d.path().join("b.gz.1-0.tmp").exists());
        assert!(out.exists());
    }
}
