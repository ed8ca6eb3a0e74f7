//! The `nsys` tool: how a job re-launches itself under `nsys profile`, and how many capture
//! ranges it will open so that the report is finalised after the last one.
//!
//! The process opens `cudaProfilerStart/Stop` ranges (capture leader: the lowest collecting rank
//! of the process, so several in-process ranks on one device open one range, not one each):
//! one per profiled step group end-to-end, one per collected role call in discrete mode. The
//! reference system leaves `capture-range-end` to the user, and a count that never completes
//! leaves the report unfinished; here the count is computed from the plan
//! (`repeat-shutdown:N`) unless the user set one explicitly.
//!
//! ```
//! use rlprof_profiler::nsys::{capture_ranges, profile_command};
//! use rlprof_profiler::plan::{ProfilePlan, RoleCall};
//! let plan = ProfilePlan::disabled(1);
//! assert_eq!(capture_ranges(&plan, 0, &[RoleCall::GenerateSequences]), 0);
//! ```

use crate::plan::{ProfilePlan, Role, RoleCall, Tool};
use std::path::Path;

/// Environment variable set on the re-launched child so it does not re-launch again.
pub const UNDER_NSYS_ENV: &str = "RLPROF_UNDER_NSYS";

/// Whether this process already runs under `nsys` (our marker or nsys's own session variable).
pub fn running_under_nsys() -> bool {
    std::env::var_os(UNDER_NSYS_ENV).is_some()
        || std::env::var_os("NSYS_PROFILING_SESSION_ID").is_some()
}

/// The lowest rank among `ranks_here` that collects for any nsys role: the process's capture
/// leader.
pub fn capture_leader(plan: &ProfilePlan, ranks_here: &[u32]) -> Option<u32> {
    ranks_here
        .iter()
        .copied()
        .filter(|&r| {
            plan.roles
                .values()
                .any(|p| p.tool == Tool::Nsys && p.collects_on(r))
        })
        .min()
}

/// Number of capture ranges the leader `rank` opens over the run: one per step group
/// end-to-end, one per (profiled step, collected call in `calls_per_step`) in discrete mode.
pub fn capture_ranges(plan: &ProfilePlan, rank: u32, calls_per_step: &[RoleCall]) -> u64 {
    let roles: Vec<_> = plan
        .roles
        .iter()
        .filter(|(_, p)| p.tool == Tool::Nsys && p.collects_on(rank))
        .collect();
    if roles.is_empty() {
        return 0;
    }
    if roles.iter().any(|(_, p)| !p.discrete) {
        return plan.step_groups.len() as u64;
    }
    let collected: Vec<Role> = roles.iter().map(|(r, _)| **r).collect();
    let per_step = calls_per_step
        .iter()
        .filter(|c| collected.contains(&c.role()))
        .count() as u64;
    plan.steps.len() as u64 * per_step
}

/// Renders one nsight option as a command-line argument (`--key=value`); null values are left
/// out, booleans are `true`/`false`.
fn option_arg(key: &str, v: &serde_json::Value) -> Option<String> {
    let s = match v {
        serde_json::Value::Null => return None,
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(format!("--{key}={s}"))
}

/// The `nsys profile ...` command line that runs `exe args` with the plan's
/// `worker_nsight_options`, the capture-range end computed from `ranges` (when the user did not
/// set one), `-o` under `{save_path}/nsys/{host}_{pid}_{ts}` and `kill: none`.
pub fn profile_command(
    plan: &ProfilePlan,
    ranges: u64,
    output_stem: &Path,
    exe: &Path,
    args: &[String],
) -> Vec<String> {
    let mut cmd = vec!["nsys".to_string(), "profile".to_string()];
    let mut opts = plan.nsys.worker_nsight_options.clone();
    let end_given = opts.get("capture-range-end").is_some_and(|v| !v.is_null());
    if !end_given && ranges > 0 {
        opts.insert(
            "capture-range-end".into(),
            serde_json::Value::String(format!("repeat-shutdown:{ranges}")),
        );
    }
    opts.entry("capture-range".to_string())
        .or_insert_with(|| "cudaProfilerApi".into());
    opts.entry("kill".to_string())
        .or_insert_with(|| "none".into());
    opts.remove("o");
    opts.remove("output");
    for (k, v) in &opts {
        cmd.extend(option_arg(k, v));
    }
    cmd.push("-o".into());
    cmd.push(output_stem.display().to_string());
    cmd.push(exe.display().to_string());
    cmd.extend(args.iter().cloned());
    cmd
}
