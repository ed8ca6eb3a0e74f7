//! The names of a collection tree: where a collection's directory goes, what it is called
//! while written and once finished, what its raw files are called and what its exported
//! output is called. The one place these rules live: the profiler, `rlprof analyse`,
//! `rlprof report` and recovery all read them from here.
//!
//! Two layouts ([`Layout`], `global_profiler.rlprof.layout`). The default, [`Layout::Verl`],
//! puts everything where verl 0.9.1 puts it:
//!
//! ```text
//! npu / nsys, end-to-end:  {save_path}/train/{host}_{pid}_{ts17}_ascend_pt/
//! npu / nsys, discrete:    {save_path}/{stage}/{host}_{pid}_{ts17}_ascend_pt/
//! rollout collections:     {save_path}/agent_loop_rollout_replica_{rank}/...
//! torch:                   {save_path}/{basename}_torch_pt/          (the raw, a directory)
//!                          {save_path}/{basename}.json.gz            (the trace `analyse` writes)
//!   basename = {worker}_{train|stage}_step{N}_rank{R}-of-{W}_pid{P}_{ts17}, each part with
//!   runs outside [0-9A-Za-z.=+-] turned into `-` (verl's build_trace_basename):
//!   actor-rollout-ref_actor-update_step3_rank0-of-2_pid41_20260101120000123.json.gz
//!   a discrete update under a schedule: one collection per window, `{basename}_mb{a}_torch_pt`,
//!   and one trace per window, `{basename}_mb{a}-{b}.json.gz` (`_mb{a}` for one mini-batch),
//!   the windows of one call sharing the basename, as verl's `get_torch_profiler` names them
//! torch_memory:            {save_path}/{step{N}|steps{a}-{b}}/{host}_{pid}_{ts17}_torch_memory_pt/
//!                          {save_path}/{step{N}|steps{a}-{b}}/torch_memory_rank{R}_pid{P}.pickle
//! ```
//!
//! [`Layout::StepGrouped`] is rlprof's own grouping by step:
//!
//! ```text
//! {save_path}/step{N|A-B}/{e2e|<stage>}/{host}_{pid}_{ts17}_{tool}_pt/
//! ```
//!
//! In both, a collection directory holds its raw files, `rlprof_raw/rank_{rank}.rlraw`, and is
//! written under `{name}.tmp` ([`TMP_SUFFIX`]) and renamed when the collection stops. Where the
//! tool's exported output is a single file verl names (torch, torch_memory), its name is decided
//! when the collection starts ([`Place::export_name`]), recorded in the raw file's metadata and
//! written by `rlprof analyse` into the collection's parent, beside the collection, as verl
//! writes it; the step-grouped layout leaves the export's own names.
//!
//! - step directories: [`step_dir`] (`step5`, `step1-2` for a run of continuous steps);
//! - the collection directory: [`collection_name`] (`{host}_{pid}_{ts17}_{tool}_pt`, the
//!   17-digit [`timestamp17`] field msprof-analyze sorts by; bumped by one while the name is
//!   taken, so nothing is ever overwritten), written under `{name}`[`TMP_SUFFIX`] and renamed
//!   when the collection stops ([`is_unfinished`]);
//! - where a collection goes and what it and its output are called: [`place`];
//! - raw files: [`raw_file`] (`rlprof_raw/rank_{rank}.rlraw`), read back through
//!   [`rank_file`], the one reading shared by the decoder, `rlprof analyse` and `rlprof report`.

use crate::plan::{Layout, Role, Tool};
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

/// What a collection covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// A whole step (or run of steps): verl's `train` window.
    Train,
    /// One stage (role call), by its stage label (`actor_update`, ...).
    Stage(&'a str),
}

/// The stage label of rollout generation.
pub const ROLLOUT_STAGE: &str = "rollout_generate";

/// Who a collection is, for its names.
#[derive(Debug, Clone, Copy)]
pub struct CollectionId<'a> {
    /// The layout.
    pub layout: Layout,
    /// The tool.
    pub tool: Tool,
    /// What it covers.
    pub scope: Scope<'a>,
    /// The role whose settings made it (its worker names torch traces).
    pub role: Role,
    /// Steps it covers (a window for torch_memory).
    pub steps: &'a [u64],
    /// Host name.
    pub host: &'a str,
    /// Process id.
    pub pid: u32,
    /// Rank.
    pub rank: u32,
    /// World size.
    pub world_size: u32,
    /// For one window of a scheduled torch update (verl's discrete `actor_update` under a
    /// schedule writes one trace per window): the window's first mini-batch.
    pub window: Option<u64>,
}

/// Where a collection goes and what it and its exported output are called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The directory that holds the collection directory (created by the profiler).
    pub parent: PathBuf,
    /// The collection directory's final name.
    pub name: String,
    /// The name of the tool's exported file, written into `parent` by `rlprof analyse`
    /// (torch, torch_memory in the verl layout); `None`: the export's own names.
    pub export_name: Option<String>,
}

/// verl's worker name of a role (its `save_file_prefix`): rlprof's trainer is verl's hybrid
/// worker with a colocated reference, `actor_rollout_ref`; the critic is `critic`, the reward
/// model `rm`.
pub fn worker_prefix(role: Role) -> &'static str {
    match role {
        Role::Actor | Role::Rollout | Role::Ref => "actor_rollout_ref",
        Role::Critic => "critic",
        Role::RewardModel => "rm",
    }
}

/// verl's `build_trace_basename`:
/// `{worker}_{train|stage}_step{N}_rank{R}-of-{W}_pid{P}_{ts17}` (verl's timestamp is
/// `%Y%m%d%H%M%S%f` cut to milliseconds, 17 digits, as [`timestamp17`]).
pub fn trace_basename(id: &CollectionId<'_>, ts17: u64) -> String {
    let scope = match id.scope {
        Scope::Train => "train",
        Scope::Stage(s) => s,
    };
    let step = id.steps.first().copied().unwrap_or(0);
    format!(
        "{}_{}_step{}_rank{}-of-{}_pid{}_{ts17}",
        sanitize_part(worker_prefix(id.role)),
        sanitize_part(scope),
        step,
        id.rank,
        id.world_size.max(1),
        id.pid
    )
}

/// verl's `_sanitize_name_part`: runs of characters outside `[0-9A-Za-z.=+-]` become `-`,
/// leading and trailing `-` are dropped.
pub fn sanitize_part(text: &str) -> String {
    let mut out = String::new();
    let mut run = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '=' | '+' | '-') {
            out.push(c);
            run = false;
        } else if !run {
            out.push('-');
            run = true;
        }
    }
    out.trim_matches('-').to_string()
}

/// verl's torch_memory window directory: `step5`, or `steps1-2` for a window of several steps.
pub fn memory_window_dir(steps: &[u64]) -> String {
    match (steps.first(), steps.last()) {
        (Some(a), Some(b)) if a != b => format!("steps{a}-{b}"),
        _ => format!("step{}", steps.first().copied().unwrap_or(0)),
    }
}

/// verl's torch_memory snapshot name: `torch_memory_rank{R}_pid{P}.pickle`.
pub fn memory_snapshot_name(rank: u32, pid: u32) -> String {
    format!("torch_memory_rank{rank}_pid{pid}.pickle")
}

/// verl's directory of a rollout replica's traces: `agent_loop_rollout_replica_{rank}`.
pub fn rollout_dir(rank: u32) -> String {
    format!("agent_loop_rollout_replica_{rank}")
}

/// Where the collection `id` started at `ts17` goes, and its names.
pub fn place(save_path: &Path, id: &CollectionId<'_>, ts17: u64) -> Place {
    let host = sanitize_host(id.host);
    let dir_name = collection_name(&host, id.pid, ts17, id.tool);
    if id.layout == Layout::StepGrouped {
        let scope = match id.scope {
            Scope::Train => "e2e",
            Scope::Stage(s) => s,
        };
        return Place {
            parent: save_path.join(step_dir(id.steps)).join(scope),
            name: dir_name,
            export_name: None,
        };
    }
    let rollout = id.scope == Scope::Stage(ROLLOUT_STAGE);
    let base = if rollout {
        save_path.join(rollout_dir(id.rank))
    } else {
        save_path.to_path_buf()
    };
    match id.tool {
        Tool::Npu | Tool::Nsys => {
            let parent = match id.scope {
                _ if rollout => base,
                Scope::Train => base.join("train"),
                Scope::Stage(s) => base.join(s),
            };
            Place {
                parent,
                name: dir_name,
                export_name: None,
            }
        }
        Tool::Torch => {
            let basename = trace_basename(id, ts17);
            // A window's collection is named by its first mini-batch; its trace takes verl's
            // `_mb{a}[-{b}]` suffix from the mini-batches it recorded (`rlprof analyse`).
            let window = id.window.map(|a| format!("_mb{a}")).unwrap_or_default();
            Place {
                parent: base,
                name: format!("{basename}{window}_{}", tool_suffix(id.tool)),
                export_name: Some(format!("{basename}.json.gz")),
            }
        }
        Tool::TorchMemory => Place {
            parent: base.join(memory_window_dir(id.steps)),
            name: dir_name,
            export_name: Some(memory_snapshot_name(id.rank, id.pid)),
        },
    }
}

/// The export name recorded in a raw file's metadata, if it is one the profiler could have
/// written: a plain file name (`[A-Za-z0-9._=+-]`, no leading dot, at most 255 bytes) ending in
/// `.json.gz` or `.pickle`. Raw files are untrusted input: any other name (a path, `..`) is
/// refused and the export falls back to its own names, so an export never lands outside the
/// collection's parent.
pub fn checked_export_name(name: Option<&str>) -> Option<&str> {
    let n = name?;
    let ok = !n.is_empty()
        && n.len() <= 255
        && !n.starts_with('.')
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._=+-".contains(&b))
        && (n.ends_with(".json.gz") || n.ends_with(".pickle"));
    ok.then_some(n)
}

/// A host name fit for a directory name: `[A-Za-z0-9._-]` only (anything else becomes `_`), no
/// leading dot, never empty.
pub fn sanitize_host(host: &str) -> String {
    let mut s: String = host
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(64)
        .collect();
    if s.starts_with('.') {
        s.replace_range(..1, "_");
    }
    if s.is_empty() {
        s.push_str("localhost");
    }
    s
}

fn file_name(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// `step5`, `step1-2` (rlprof's step directories) and `steps1-2` (verl's torch_memory windows).
fn is_step_dir(name: &str) -> bool {
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = name
        .strip_prefix("steps")
        .or_else(|| name.strip_prefix("step"))
    else {
        return false;
    };
    match rest.split_once('-') {
        Some((a, b)) => digits(a) && digits(b),
        None => digits(rest),
    }
}

/// The run directory (the job's `save_path`) of the collection directory `dir`, in either
/// layout: the parent of its `step{N}` directory in the step-grouped layout; in the verl layout
/// the directory the tool writes into (`train`, a stage, a rollout replica's directory, a
/// torch_memory window) is skipped, and a flat torch collection's parent is the run itself.
pub fn run_dir(dir: &Path) -> PathBuf {
    let name = file_name(dir).trim_end_matches(TMP_SUFFIX);
    let parent = dir.parent().unwrap_or(dir);
    let grand = parent.parent().unwrap_or(parent);
    // Step-grouped: {run}/step{N}/{e2e|stage}/{collection}.
    if is_step_dir(file_name(grand)) && !file_name(grand).starts_with("steps") {
        return grand.parent().unwrap_or(grand).to_path_buf();
    }
    if name.ends_with(&format!("_{}", tool_suffix(Tool::Torch)))
        && !file_name(parent).starts_with("agent_loop_rollout_replica_")
    {
        return parent.to_path_buf();
    }
    grand.to_path_buf()
}

/// The collection group of the collection directory `dir`, for readers that list collections
/// (`rlprof report`): the directory that holds it, relative to its [`run_dir`]: `step1/e2e` in
/// the step-grouped layout; `train`, `actor_update`, `step3` or `.` (flat torch traces) in the
/// verl layout, whose collections of several steps share a group and are told apart by their
/// steps.
pub fn collection_group(dir: &Path) -> String {
    let run = run_dir(dir);
    let parent = dir.parent().unwrap_or(dir);
    match parent.strip_prefix(&run) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        Ok(_) => ".".into(),
        Err(_) => file_name(parent).to_string(),
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
    fn verl_places() {
        let id = |tool, scope, steps: &'static [u64]| CollectionId {
            layout: Layout::Verl,
            tool,
            scope,
            role: Role::Actor,
            steps,
            host: "h/x",
            pid: 7,
            rank: 1,
            world_size: 2,
            window: None,
        };
        let s = Path::new("/s");
        let ts = 20260101000000123;
        let p = place(s, &id(Tool::Npu, Scope::Train, &[3]), ts);
        assert_eq!(p.parent, Path::new("/s/train"));
        assert_eq!(p.name, "h_x_7_20260101000000123_ascend_pt");
        let p = place(s, &id(Tool::Npu, Scope::Stage("actor_update"), &[3]), ts);
        assert_eq!(p.parent, Path::new("/s/actor_update"));
        let p = place(s, &id(Tool::Npu, Scope::Stage(ROLLOUT_STAGE), &[3]), ts);
        assert_eq!(p.parent, Path::new("/s/agent_loop_rollout_replica_1"));
        let p = place(s, &id(Tool::Torch, Scope::Train, &[3]), ts);
        assert_eq!(p.parent, Path::new("/s"));
        assert_eq!(
            p.export_name.as_deref(),
            Some("actor-rollout-ref_train_step3_rank1-of-2_pid7_20260101000000123.json.gz")
        );
        assert_eq!(
            p.name,
            "actor-rollout-ref_train_step3_rank1-of-2_pid7_20260101000000123_torch_pt"
        );
        let p = place(s, &id(Tool::TorchMemory, Scope::Train, &[1, 2]), ts);
        assert_eq!(p.parent, Path::new("/s/steps1-2"));
        assert_eq!(
            p.export_name.as_deref(),
            Some("torch_memory_rank1_pid7.pickle")
        );
        let mut old = id(Tool::Torch, Scope::Train, &[1, 2]);
        old.layout = Layout::StepGrouped;
        let p = place(s, &old, ts);
        assert_eq!(p.parent, Path::new("/s/step1-2/e2e"));
        assert_eq!(p.export_name, None);
        assert_eq!(sanitize_part("a b//c_d-"), "a-b-c-d");
        assert_eq!(
            checked_export_name(Some("a_b-1.json.gz")),
            Some("a_b-1.json.gz")
        );
        for bad in ["../x.json.gz", "a/b.pickle", ".x.pickle", "x.txt", ""] {
            assert_eq!(checked_export_name(Some(bad)), None, "{bad}");
        }
        for (dir, run, group) in [
            ("/s/train/h_1_2_ascend_pt", "/s", "train"),
            ("/s/actor_update/h_1_2_ascend_pt.tmp", "/s", "actor_update"),
            ("/s/a_train_step1_rank0-of-1_pid1_2_torch_pt", "/s", "."),
            (
                "/s/agent_loop_rollout_replica_0/x_torch_pt",
                "/s",
                "agent_loop_rollout_replica_0",
            ),
            ("/s/steps1-2/h_1_2_torch_memory_pt", "/s", "steps1-2"),
            ("/s/step3/h_1_2_torch_memory_pt", "/s", "step3"),
            ("/s/step1-2/e2e/h_1_2_torch_pt", "/s", "step1-2/e2e"),
            (
                "/s/step1/actor_update/h_1_2_ascend_pt",
                "/s",
                "step1/actor_update",
            ),
        ] {
            assert_eq!(run_dir(Path::new(dir)), Path::new(run), "{dir}");
            assert_eq!(collection_group(Path::new(dir)), group, "{dir}");
        }
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
