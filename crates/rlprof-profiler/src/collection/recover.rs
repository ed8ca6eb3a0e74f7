//! Recovery of interrupted collections.
//!
//! The profiler writes a collection under `{name}.tmp` and renames it when the collection stops.
//! A process that dies first (SIGKILL, a crash, a full disk at the rename) leaves the `.tmp`
//! directory behind, with a raw file whose self-checking chunks hold everything flushed before
//! the end. Once nobody holds the collection's lock (see [`super::lock`]), [`finish`] gives such
//! a directory a final name, never one that exists, and records where it came from in
//! [`RECOVERED`]; the analysis then marks it `partial`.

use super::names::TMP_SUFFIX;
use super::staging::write_atomic;
use crate::ProfilerError;
use std::path::{Path, PathBuf};

/// Written into a recovered collection: `{"recovered_from": "<name>.tmp"}`.
pub const RECOVERED: &str = "rlprof_recovered.json";

/// Where an earlier recovery found this collection (`None`: it finished normally).
pub fn recovered_from(dir: &Path) -> Option<String> {
    let text = std::fs::read(dir.join(RECOVERED)).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v.get("recovered_from")?.as_str().map(str::to_string)
}

/// Gives the unfinished collection `tmp_dir` a final name and returns it. The caller holds the
/// collection's lock. The name is the one the profiler would have used; when that exists the
/// timestamp field is bumped (as the profiler does), so no data is ever renamed over.
pub fn finish(tmp_dir: &Path) -> Result<PathBuf, ProfilerError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ProfilerError::Io { path, source }
    };
    let name = tmp_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = name.strip_suffix(TMP_SUFFIX).unwrap_or(&name).to_string();
    let parent = tmp_dir.parent().unwrap_or(Path::new("."));
    if recovered_from(tmp_dir).is_none() {
        let note = serde_json::json!({ "recovered_from": name });
        write_atomic(&tmp_dir.join(RECOVERED), note.to_string().as_bytes())?;
    }
    for candidate in candidates(&base).take(10_000) {
        let target = parent.join(&candidate);
        // Claim the name atomically; the rename then replaces only our own empty directory.
        match std::fs::create_dir(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&target)(e)),
        }
        return match std::fs::rename(tmp_dir, &target) {
            Ok(()) => Ok(target),
            Err(e) => {
                let _ = std::fs::remove_dir(&target);
                Err(io(tmp_dir)(e))
            }
        };
    }
    Err(io(tmp_dir)(std::io::Error::other(
        "no free final name for the recovered collection",
    )))
}

/// Final names to try: `base`, then `base` with its 17-digit timestamp field bumped (or, for a
/// name without one, `base_recovered{N}`).
fn candidates(base: &str) -> impl Iterator<Item = String> + '_ {
    let fields: Vec<&str> = base.split('_').collect();
    let ts_at = fields
        .iter()
        .rposition(|f| f.len() == 17 && f.bytes().all(|b| b.is_ascii_digit()));
    let ts: Option<u64> = ts_at.and_then(|i| fields[i].parse().ok());
    (0u64..).map(move |n| match (n, ts_at, ts) {
        (0, _, _) => base.to_string(),
        (n, Some(i), Some(t)) => {
            let mut f: Vec<String> = base.split('_').map(str::to_string).collect();
            f[i] = (t + n).to_string();
            f.join("_")
        }
        (n, _, _) => format!("{base}_recovered{n}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_bump_the_timestamp_field() {
        let c: Vec<String> = candidates("h_12_20260101000000000_ascend_pt")
            .take(3)
            .collect();
        assert_eq!(
            c,
            [
                "h_12_20260101000000000_ascend_pt",
                "h_12_20260101000000001_ascend_pt",
                "h_12_20260101000000002_ascend_pt"
            ]
        );
        let c: Vec<String> = candidates("odd").take(2).collect();
        assert_eq!(c, ["odd", "odd_recovered1"]);
    }

    #[test]
    fn finish_never_renames_over_existing_data() {
        let d = tempfile::tempdir().unwrap();
        let tmp = d.path().join("h_1_20260101000000000_ascend_pt.tmp");
        std::fs::create_dir_all(tmp.join("rlprof_raw")).unwrap();
        std::fs::write(tmp.join("rlprof_raw/rank_0.rlraw"), b"new").unwrap();
        let taken = d.path().join("h_1_20260101000000000_ascend_pt");
        std::fs::create_dir_all(taken.join("rlprof_raw")).unwrap();
        std::fs::write(taken.join("rlprof_raw/rank_0.rlraw"), b"old").unwrap();
        let got = finish(&tmp).unwrap();
        assert_eq!(
            got,
            d.path().join("h_1_20260101000000001_ascend_pt"),
            "the timestamp field is bumped"
        );
        assert_eq!(
            std::fs::read(taken.join("rlprof_raw/rank_0.rlraw")).unwrap(),
            b"old"
        );
        assert_eq!(
            std::fs::read(got.join("rlprof_raw/rank_0.rlraw")).unwrap(),
            b"new"
        );
        assert_eq!(
            recovered_from(&got).as_deref(),
            Some("h_1_20260101000000000_ascend_pt.tmp")
        );
        assert!(!tmp.exists());
    }
}
