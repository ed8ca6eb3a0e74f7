//! Profiles grouped into jobs: figures are never summed or compared across jobs.
//!
//! A job is what the producers' metadata says belongs together:
//! - rlprof collections: the run (the directory above the `step*` directories, or the
//!   collection itself);
//! - foreign traces (PyTorch, Ascend): the same format and declared world size
//!   (`distributedInfo.world_size`, Ascend's `profiler_info`), and then either recorded by the
//!   same process (host and pid: several traces of one rank over time) or, for different ranks,
//!   over overlapping time windows (absolute times: `baseTimeNanoseconds` plus the events'),
//!   or, for Ascend rank directories (`*_ascend_pt`), side by side in one directory (as
//!   msprof-analyze's cluster analysis takes a directory). Two traces of the same rank from
//!   different processes are never one job.
//!
//! The world size of a job is the declared one, or the number of ranks found.

use crate::model::{Profile, SourceFormat};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One job: its profiles (indices into the loaded profiles, in load order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobGroup {
    /// `job1`, `job2`, ... in the order of their first profile.
    pub id: String,
    /// The producers' format.
    pub format: SourceFormat,
    /// Declared world size, or the number of distinct ranks found.
    pub world_size: u32,
    /// Whether `world_size` was declared by the producer (else counted).
    pub world_size_declared: bool,
    /// What identifies it (the run, or host/pid and time window of its traces).
    pub key: String,
    /// Profile indices.
    pub profiles: Vec<usize>,
}

/// Groups profiles into jobs; returns the jobs and each profile's job index.
pub fn group(profiles: &[Profile]) -> (Vec<JobGroup>, Vec<usize>) {
    let refs: Vec<&Profile> = profiles.iter().collect();
    let extents: Vec<(i64, i64)> = profiles.iter().map(Profile::extent).collect();
    group_light(&refs, &extents)
}

/// [`group`] of profiles given with their [`Profile::extent`]s: the grouping reads only the
/// profiles' metadata, so their events may have been dropped
/// ([`crate::summary::digest::Digest::light`]).
pub fn group_light(profiles: &[&Profile], extents: &[(i64, i64)]) -> (Vec<JobGroup>, Vec<usize>) {
    let n = profiles.len();
    let info: Vec<Info> = profiles
        .iter()
        .zip(extents)
        .map(|(p, &e)| Info::of(p, e))
        .collect();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for a in 0..n {
        for b in a + 1..n {
            if same_job(profiles[a], &info[a], profiles[b], &info[b]) {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
    }
    let mut job_of = vec![usize::MAX; n];
    let mut jobs: Vec<JobGroup> = Vec::new();
    let mut root_job: Vec<usize> = vec![usize::MAX; n];
    for i in 0..n {
        let r = root(&mut parent, i);
        if root_job[r] == usize::MAX {
            root_job[r] = jobs.len();
            jobs.push(JobGroup {
                id: format!("job{}", jobs.len() + 1),
                format: profiles[i].format,
                world_size: 0,
                world_size_declared: false,
                key: info[i].key.clone(),
                profiles: Vec::new(),
            });
        }
        job_of[i] = root_job[r];
        jobs[root_job[r]].profiles.push(i);
    }
    for j in &mut jobs {
        let declared = j.profiles.iter().find_map(|&i| profiles[i].meta.world_size);
        let mut ranks: Vec<u32> = j.profiles.iter().map(|&i| profiles[i].rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        j.world_size_declared = declared.is_some();
        j.world_size = declared.unwrap_or(ranks.len() as u32);
    }
    (jobs, job_of)
}

/// What the grouping looks at, per profile.
struct Info {
    /// rlprof: the run directory.
    run: Option<PathBuf>,
    /// Absolute time window (ns), when the profile has events.
    window: Option<(i128, i128)>,
    key: String,
}

impl Info {
    fn of(p: &Profile, (lo, hi): (i64, i64)) -> Info {
        let run = (p.format == SourceFormat::RlprofRaw).then(|| rlprof_run(&p.source));
        let window = (lo != 0 || hi != 0).then(|| {
            (
                p.origin_ns as i128 + lo as i128,
                p.origin_ns as i128 + hi as i128,
            )
        });
        let key = match &run {
            Some(r) => format!("rlprof run {}", r.display()),
            None => {
                let m = &p.meta;
                let mut k = format!("{:?}", p.format);
                if let Some(w) = m.world_size {
                    k.push_str(&format!(" world size {w}"));
                }
                if let Some(h) = &m.host {
                    k.push_str(&format!(" host {h}"));
                }
                if let Some(pid) = &m.pid {
                    k.push_str(&format!(" pid {pid}"));
                }
                k
            }
        };
        Info { run, window, key }
    }
}

/// The run of a collection's raw file `{run}/step*/{role}/{collection}/rlprof_raw/rank_N.rlraw`:
/// the directory above the first `step*` ancestor, or the collection directory.
fn rlprof_run(raw: &Path) -> PathBuf {
    // raw = {collection}/rlprof_raw/rank_N.rlraw; the run is the collection's save_path, in
    // either layout (the collection module's rule).
    let collection = raw.parent().and_then(Path::parent).unwrap_or(raw);
    rlprof_profiler::collection::names::run_dir(collection)
}

fn same_job(a: &Profile, ia: &Info, b: &Profile, ib: &Info) -> bool {
    if a.format != b.format {
        return false;
    }
    if let (Some(x), Some(y)) = (&ia.run, &ib.run) {
        return x == y;
    }
    if a.meta.world_size != b.meta.world_size {
        return false;
    }
    let same_process = a.meta.pid.is_some()
        && a.meta.pid == b.meta.pid
        && a.meta.host == b.meta.host
        && a.rank == b.rank;
    if same_process {
        return true;
    }
    if a.rank == b.rank {
        return false;
    }
    let overlap = match (ia.window, ib.window) {
        (Some((s1, e1)), Some((s2, e2))) => s1 <= e2 && s2 <= e1,
        _ => false,
    };
    // Rank directories side by side under one directory, declaring one world size, are one
    // job, as msprof-analyze's cluster analysis takes them: a rank with no timeline (only
    // CANN's tables) or whose window does not overlap (a pipeline stage profiled later) too.
    let siblings = a.format == SourceFormat::Ascend
        && a.meta.world_size.is_some()
        && cluster_dir(&a.source).is_some()
        && cluster_dir(&a.source) == cluster_dir(&b.source);
    overlap || siblings
}

/// The directory holding an Ascend rank directory (`{dir}/{name}_ascend_pt/...`).
fn cluster_dir(source: &Path) -> Option<&Path> {
    source
        .ancestors()
        .find(|a| {
            a.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_ascend_pt"))
        })
        .and_then(Path::parent)
}
