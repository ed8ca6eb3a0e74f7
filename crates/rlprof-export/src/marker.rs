//! Writing the "parsed" marker of a collection ([`MARKER`], JSON; its read side, [`complete`],
//! is the raw format's, in `rlprof_profiler::raw::marker`) and the `partial` flag in the tool's
//! metadata.
//!
//! The marker is the analysis report plus `files`: every output, relative to the collection
//! directory (`../x.pt.trace.json.gz` for a trace written beside it). It is written last, so it
//! exists only once every output does; a marker that lists a missing file (outputs deleted, a
//! marker from an older build without `files`) does not count, and the collection is parsed
//! again.

use crate::ExportError;
use crate::staging::write_atomic;

pub use rlprof_profiler::raw::marker::{MARKER, complete};
/// Warnings about damaged or truncated raw data.
pub const WARNINGS: &str = "rlprof_warnings.txt";
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

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
/// as JSON plus `files`, every output (relative to `dir`) and the warnings file when there is one.
pub fn write(
    dir: &Path,
    report: &impl Serialize,
    outputs: &[&Path],
    warnings: bool,
) -> Result<(), ExportError> {
    let path = dir.join(MARKER);
    let json_err = |source| ExportError::Json {
        path: path.clone(),
        source,
    };
    let mut v = serde_json::to_value(report).map_err(json_err)?;
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

/// Adds `"partial": true` and the reasons to the tool's own metadata file when it has one
/// (`profiler_metadata.json` of the Ascend layout; the torch trace carries `rlprof_partial`).
pub fn mark_metadata_partial(dir: &Path, reasons: &[String]) -> Result<(), ExportError> {
    let path = dir.join("profiler_metadata.json");
    let Ok(text) = std::fs::read(&path) else {
        return Ok(());
    };
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(&text) else {
        return Ok(());
    };
    m.insert("partial".into(), true.into());
    m.insert("rlprof_partial_reasons".into(), reasons.to_vec().into());
    let text =
        serde_json::to_vec_pretty(&Value::Object(m)).map_err(|source| ExportError::Json {
            path: path.clone(),
            source,
        })?;
    write_atomic(&path, &text)
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
}
