//! A collection's "parsed" marker ([`MARKER`], JSON): which files the analysis wrote, so that
//! `analyse` knows a collection is done and `report` does not read a collection's own outputs a
//! second time beside its raw data. Both sides live here: [`write()`] (called by `rlprof-export`
//! once every output is in place) and [`listed_files`] / [`complete`] (`analyse`, `report`).
//!
//! The marker is the analysis report (a JSON object the caller passes in) plus `files`: every
//! output, relative to the collection directory: inside it, or beside it as `../name` (a torch
//! trace is written next to the collection, as verl names it). It is written last, so it exists
//! only once every output does; a marker that lists a missing file (outputs deleted, a marker
//! from an older build without `files`) does not count, and the collection is parsed again.

use super::staging::write_atomic;
use crate::ProfilerError;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// Marker written into a collection directory once it is parsed.
pub const MARKER: &str = "rlprof_analysis.json";
/// Warnings about damaged or truncated raw data, beside the marker (listed in it when written).
pub const WARNINGS: &str = "rlprof_warnings.txt";

/// `path` relative to the collection directory `dir`.
fn relative(dir: &Path, path: &Path) -> String {
    if let Ok(r) = path.strip_prefix(dir) {
        return r.to_string_lossy().into_owned();
    }
    match (path.parent(), dir.parent(), path.file_name()) {
        (Some(a), Some(b), Some(name)) if a == b => format!("../{}", name.to_string_lossy()),
        _ => path.to_string_lossy().into_owned(),
    }
}

/// Writes the marker of a parsed collection (call after every output is in place): `report`
/// (serialized as a JSON object; anything else is wrapped as `{"report": ...}`) plus `files`,
/// every output (relative to `dir`) and the warnings file when there is one.
pub fn write(
    dir: &Path,
    report: &impl serde::Serialize,
    outputs: &[&Path],
    warnings: bool,
) -> Result<(), ProfilerError> {
    let path = dir.join(MARKER);
    let json_err = |e: serde_json::Error| ProfilerError::Io {
        path: path.clone(),
        source: e.into(),
    };
    let mut v = match serde_json::to_value(report).map_err(json_err)? {
        Value::Object(m) => Value::Object(m),
        other => serde_json::json!({ "report": other }),
    };
    let mut files: Vec<String> = outputs.iter().map(|p| relative(dir, p)).collect();
    if warnings {
        files.push(WARNINGS.to_string());
    }
    files.sort();
    files.dedup();
    v["files"] = files.into();
    let text = serde_json::to_vec_pretty(&v).map_err(json_err)?;
    write_atomic(&path, &text)
}

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
    fn relative_names_inside_and_beside() {
        let d = Path::new("/s/step1/e2e/c_ascend_pt");
        assert_eq!(
            relative(d, &d.join("ASCEND_PROFILER_OUTPUT/a.csv")),
            "ASCEND_PROFILER_OUTPUT/a.csv"
        );
        assert_eq!(
            relative(d, Path::new("/s/step1/e2e/t.pt.trace.json.gz")),
            "../t.pt.trace.json.gz"
        );
    }

    #[test]
    fn written_marker_is_complete_once_its_files_exist() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("c_torch_pt");
        std::fs::create_dir(&dir).unwrap();
        let trace = d.path().join("t.pt.trace.json.gz");
        std::fs::write(&trace, b"").unwrap();
        write(&dir, &serde_json::json!({"events": 3}), &[&trace], true).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(dir.join(MARKER)).unwrap()).unwrap();
        assert_eq!(v["events"], 3);
        assert_eq!(
            v["files"],
            serde_json::json!(["../t.pt.trace.json.gz", WARNINGS])
        );
        assert!(!complete(&dir), "the warnings file is missing");
        std::fs::write(dir.join(WARNINGS), b"").unwrap();
        assert!(complete(&dir));
    }

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
