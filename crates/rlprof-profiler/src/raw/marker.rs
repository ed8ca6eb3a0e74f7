//! The read side of a collection's "parsed" marker ([`MARKER`], JSON, written by
//! `rlprof-export` once every output is in place): which files the analysis wrote, so that
//! `analyse` knows a collection is done and `report` does not read a collection's own outputs a
//! second time beside its raw data. It lives with the raw format because a collection directory
//! is that format's unit and both readers depend on this crate; the writer is export's.
//!
//! The marker's `files` are relative to the collection directory: inside it, or beside it as
//! `../name` (a torch trace is written next to the collection, as verl names it).

use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// Marker written into a collection directory once it is parsed.
pub const MARKER: &str = "rlprof_analysis.json";

/// The files `dir`'s marker lists, resolved against `dir`; `None` without a readable marker
/// with a `files` list. Entries pointing anywhere but inside `dir` or beside it are dropped.
pub fn listed_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let text = std::fs::read(dir.join(MARKER)).ok()?;
    let v = serde_json::from_slice::<Value>(&text).ok()?;
    let files = v.get("files")?.as_array()?;
    Some(
        files
            .iter()
            .filter_map(|f| f.as_str().and_then(|f| inside_or_beside(dir, Path::new(f))))
            .collect(),
    )
}

/// Whether `dir` has a marker whose every listed file exists (a marker that lists a missing
/// file, or has no list, does not count: the collection is parsed again).
pub fn complete(dir: &Path) -> bool {
    listed_files(dir).is_some_and(|files| files.iter().all(|p| p.exists()))
}

/// `rel` resolved against `dir`, when it stays in `dir` or its parent (the only places outputs
/// are written); `None` for anything else a hand-edited marker might say.
fn inside_or_beside(dir: &Path, rel: &Path) -> Option<PathBuf> {
    let mut comps = rel.components().peekable();
    if comps.peek() == Some(&Component::ParentDir) {
        comps.next();
    }
    comps
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| dir.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_paths_cannot_point_elsewhere() {
        let d = Path::new("/s/c");
        assert!(inside_or_beside(d, Path::new("../x")).is_some());
        assert!(inside_or_beside(d, Path::new("../../x")).is_none());
        assert!(inside_or_beside(d, Path::new("/etc/passwd")).is_none());
    }

    #[test]
    fn listed_files_resolve_inside_and_beside() {
        let tmp = std::env::temp_dir().join(format!("rlprof-marker-{}", std::process::id()));
        let dir = tmp.join("c_torch_pt");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(listed_files(&dir), None);
        std::fs::write(
            dir.join(MARKER),
            r#"{"files": ["../t.pt.trace.json.gz", "rlprof_warnings.txt", "../../x"]}"#,
        )
        .unwrap();
        assert_eq!(
            listed_files(&dir).unwrap(),
            vec![
                dir.join("../t.pt.trace.json.gz"),
                dir.join("rlprof_warnings.txt")
            ]
        );
        assert!(!complete(&dir), "the listed files do not exist");
        std::fs::write(tmp.join("t.pt.trace.json.gz"), b"").unwrap();
        std::fs::write(dir.join("rlprof_warnings.txt"), b"").unwrap();
        assert!(complete(&dir));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
