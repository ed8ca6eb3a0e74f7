//! The names of a collection tree: where a collection's directory goes, what it is called
//! while written and once finished, and what its raw files are called.
//!
//! ```text
//! {save_path}/step{N|A-B}/{e2e|<role>}/{host}_{pid}_{ts17}_{tool}_pt[.tmp]/rlprof_raw/rank_{rank}.rlraw
//! ```
//!
//! - step directories: [`step_dir`] (`step5`, `step1-2` for a run of continuous steps);
//! - the collection directory: [`collection_name`] (`{host}_{pid}_{ts17}_{tool}_pt`, the
//!   17-digit [`timestamp17`] field msprof-analyze sorts by; bumped by one while the name is
//!   taken, so nothing is ever overwritten), written under `{name}`[`TMP_SUFFIX`] and renamed
//!   when the collection stops ([`is_unfinished`]);
//! - raw files: [`raw_file`] (`rlprof_raw/rank_{rank}.rlraw`), read back through
//!   [`rank_file`], the one reading shared by the decoder, `rlprof analyse` and `rlprof report`.

use crate::plan::Tool;
use std::path::{Path, PathBuf};

/// The directory of a collection's raw files.
pub const RAW_DIR: &str = "rlprof_raw";

/// Suffix of a collection directory still in flight or interrupted.
pub const TMP_SUFFIX: &str = ".tmp";

/// The last field of a collection directory's name: `ascend_pt`, `torch_pt`, ...
pub fn tool_suffix(tool: Tool) -> &'static str {
    match tool {
        Tool::Npu => "ascend_pt",
        Tool::Torch => "torch_pt",
        Tool::TorchMemory => "torch_memory_pt",
        Tool::Nsys => "nsys_pt",
    }
}

/// `{host}_{pid}_{ts17}_{tool}_pt`: the final name of a collection directory.
pub fn collection_name(host: &str, pid: u32, ts17: u64, tool: Tool) -> String {
    format!("{host}_{pid}_{ts17}_{}", tool_suffix(tool))
}

/// `{name}.tmp`: the name a collection directory has while it is written.
pub fn unfinished_name(name: &str) -> String {
    format!("{name}{TMP_SUFFIX}")
}

/// Whether `dir` is named like an unfinished collection (`*.tmp`).
pub fn is_unfinished(dir: &Path) -> bool {
    dir.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(TMP_SUFFIX))
}

/// `step5` or `step1-2`: the directory of the collections of these steps.
pub fn step_dir(steps: &[u64]) -> String {
    format!("step{}", step_label(steps))
}

/// `5` or `1-2`.
pub fn step_label(steps: &[u64]) -> String {
    match (steps.first(), steps.last()) {
        (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
        (Some(a), _) => a.to_string(),
        _ => "0".into(),
    }
}

/// `{dir}/rlprof_raw/rank_{rank}.rlraw`: the raw file of `rank` in the collection `dir`.
pub fn raw_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(RAW_DIR).join(format!("rank_{rank}.rlraw"))
}

/// The host name (`localhost` when it cannot be read).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    if rc == 0 && !name.is_empty() {
        name
    } else {
        "localhost".into()
    }
}

/// `YYYYmmddHHMMSSfff` (UTC) as an integer — the 17-digit field msprof-analyze sorts by.
pub fn timestamp17(wall_ns: u64) -> u64 {
    let ms = wall_ns / 1_000_000;
    let (secs, milli) = (ms / 1000, ms % 1000);
    let (days, sod) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let (hh, mm, ss) = (sod / 3600, (sod % 3600) / 60, sod % 60);
    ((((y as u64 * 100 + m as u64) * 100 + d as u64) * 100 + hh) * 100 + mm) * 100_000
        + ss * 1000
        + milli
}

/// Days since 1970-01-01 to (year, month, day). Written out because it is the only date
/// arithmetic this crate needs (Howard Hinnant's civil-from-days algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// What a file name in a collection's `rlprof_raw/` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankFile {
    /// Not named `rank_*.rlraw`: not a rank file, ignored by `rlprof analyse` and `rlprof report`.
    Other,
    /// `rank_N.rlraw` with `N` a rank (a decimal `u32`, written as the profiler writes it).
    Rank(u32),
    /// Named `rank_*.rlraw`, but `*` is not a rank (negative, too large for a rank, not a
    /// decimal number, or with leading zeros): the file is refused, with this reason.
    Invalid(String),
}

/// The rank of a raw file from its name: `rank_3.rlraw` -> [`RankFile::Rank`]`(3)`. The one
/// reading of rank file names, shared by the decoder, `rlprof analyse` and `rlprof report`.
pub fn rank_file(path: &Path) -> RankFile {
    let Some(name) = path.file_name() else {
        return RankFile::Other;
    };
    let name = name.to_string_lossy();
    let Some(n) = name
        .strip_prefix("rank_")
        .and_then(|n| n.strip_suffix(".rlraw"))
    else {
        return RankFile::Other;
    };
    let invalid = |why: &str| {
        RankFile::Invalid(format!(
            "the file name's rank `{n}` {why} (ranks are written as decimal numbers from 0 to {})",
            u32::MAX
        ))
    };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return if n.starts_with('-') && n.len() > 1 {
            invalid("is negative")
        } else {
            invalid("is not a number")
        };
    }
    if n.len() > 1 && n.starts_with('0') {
        return invalid("has leading zeros");
    }
    match n.parse::<u32>() {
        Ok(r) => RankFile::Rank(r),
        Err(_) => invalid("is out of range"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_has_17_digits_and_known_value() {
        // 2025-08-14 12:34:56.789 UTC
        let ns = 1_755_174_896_789_000_000u64;
        assert_eq!(timestamp17(ns), 20250814123456789);
        assert_eq!(timestamp17(ns).to_string().len(), 17);
    }

    #[test]
    fn step_labels() {
        assert_eq!(step_label(&[5]), "5");
        assert_eq!(step_label(&[1, 2]), "1-2");
        assert_eq!(step_dir(&[1, 2]), "step1-2");
    }

    #[test]
    fn directory_and_raw_file_names() {
        let name = collection_name("h", 12, 20260101000000000, Tool::Npu);
        assert_eq!(name, "h_12_20260101000000000_ascend_pt");
        assert!(is_unfinished(Path::new(&unfinished_name(&name))));
        assert!(!is_unfinished(Path::new(&name)));
        let raw = raw_file(Path::new("/c"), 3);
        assert_eq!(raw, Path::new("/c/rlprof_raw/rank_3.rlraw"));
        assert_eq!(rank_file(&raw), RankFile::Rank(3));
    }

    #[test]
    fn rank_file_names() {
        let r = |n: &str| rank_file(Path::new(n));
        assert_eq!(r("rank_0.rlraw"), RankFile::Rank(0));
        assert_eq!(r("/x/rlprof_raw/rank_17.rlraw"), RankFile::Rank(17));
        assert_eq!(r("rank_4294967295.rlraw"), RankFile::Rank(u32::MAX));
        assert_eq!(r("rank_0.rlraw.tmp"), RankFile::Other);
        assert_eq!(r("other.rlraw"), RankFile::Other);
        assert_eq!(r("rank_3.json"), RankFile::Other);
        for (bad, why) in [
            ("rank_4294967296.rlraw", "out of range"),
            ("rank_-1.rlraw", "negative"),
            ("rank_+1.rlraw", "not a number"),
            ("rank_.rlraw", "not a number"),
            ("rank_1e3.rlraw", "not a number"),
            ("rank_007.rlraw", "leading zeros"),
        ] {
            match r(bad) {
                RankFile::Invalid(m) => assert!(m.contains(why), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
