//! How rlprof creates the files it owns inside a collection tree (raw files, locks, markers,
//! staging files, parsed outputs): never through a symbolic link. A tree can be written by
//! others (a shared `save_path`), so a planted `rlprof_analysis.lock -> /elsewhere/X` must not
//! make `analyse` create or truncate `/elsewhere/X`. Every open here adds `O_NOFOLLOW` (the
//! last path component is never followed: a link there fails with `ELOOP`) and `O_CLOEXEC`.
//! `create_new` opens (`O_EXCL`) already refuse an existing link; the opens that may reuse or
//! truncate a file need the flag.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Options with `O_NOFOLLOW | O_CLOEXEC` on Unix.
fn no_follow() -> OpenOptions {
    let mut o = File::options();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    o
}

/// Creates or truncates `path` for writing; fails if `path` is a symbolic link.
pub fn create(path: &Path) -> io::Result<File> {
    no_follow()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

/// Creates `path`, which must not exist (nor be a link), for writing.
pub fn create_new(path: &Path) -> io::Result<File> {
    no_follow().write(true).create_new(true).open(path)
}

/// Opens `path` for reading and writing, creating it if missing and never truncating it (a lock
/// file); fails if `path` is a symbolic link or not a regular file.
pub fn open_or_create(path: &Path) -> io::Result<File> {
    let f = no_follow()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// `std::fs::write` that never follows a link at `path`.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create(path)?.write_all(bytes)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_is_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        let link = d.path().join("rlprof_analysis.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(open_or_create(&link).is_err());
        assert!(create(&link).is_err());
        assert!(create_new(&link).is_err());
        assert!(write(&link, b"x").is_err());
        assert!(!target.exists(), "the link's target was created");
        // A plain file works.
        let plain = d.path().join("plain");
        write(&plain, b"ab").unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"ab");
        open_or_create(&plain).unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"ab", "not truncated");
    }

    #[test]
    fn a_fifo_is_not_a_lock_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // O_RDWR on a FIFO does not block on Linux; it is refused as not a regular file.
        assert!(open_or_create(&p).is_err());
    }
}
