//! verl's `finish_hook_cmd`: a shell command run once, after the last profiled step, on the
//! selected ranks, with verl's environment variables (`VERL_PROFILE_SAVE_PATH`,
//! `VERL_PROFILE_TOOL`, `VERL_PROFILE_RANK`, `VERL_PROFILE_PID`, `VERL_PROFILE_ROLE`). A failing
//! hook is logged and training goes on.

use std::collections::BTreeMap;
use std::process::Command;

use crate::plan::{ProfilePlan, Role};

/// One command to run on this rank, with the roles that asked for it.
struct Due<'a> {
    cmd: &'a str,
    roles: Vec<Role>,
}

/// Runs the finish hooks due on `rank` once `step` (just finished) is the last listed step.
/// Returns how many commands ran (whatever their exit status).
pub fn after_step(plan: &ProfilePlan, rank: u32, step: u64) -> usize {
    if plan.steps.last() != Some(&step) {
        return 0;
    }
    let mut due: BTreeMap<&str, Due> = BTreeMap::new();
    for (role, hook) in &plan.verl.finish_hooks {
        if hook.ranks.contains(&rank) {
            due.entry(hook.cmd.as_str())
                .or_insert(Due {
                    cmd: &hook.cmd,
                    roles: Vec::new(),
                })
                .roles
                .push(*role);
        }
    }
    for d in due.values() {
        run(plan, rank, d);
    }
    due.len()
}

fn run(plan: &ProfilePlan, rank: u32, d: &Due) {
    let first = d.roles[0];
    let role_plan = plan.role(first);
    let save_path = role_plan.map_or(plan.save_path.clone(), |r| r.save_path.clone());
    let tool = role_plan.map_or("none", |r| r.tool.as_str());
    let roles: Vec<&str> = d.roles.iter().map(|r| r.as_str()).collect();
    let status = Command::new("sh")
        .arg("-c")
        .arg(d.cmd)
        .env("VERL_PROFILE_SAVE_PATH", &save_path)
        .env("VERL_PROFILE_TOOL", tool)
        .env("VERL_PROFILE_RANK", rank.to_string())
        .env("VERL_PROFILE_PID", std::process::id().to_string())
        .env("VERL_PROFILE_ROLE", roles.join(","))
        .status();
    match status {
        Ok(s) if s.success() => {
            tracing::info!("finish_hook_cmd on rank {rank} finished: {}", d.cmd)
        }
        Ok(s) => tracing::warn!(
            "finish_hook_cmd on rank {rank} failed ({s}); training goes on: {}",
            d.cmd
        ),
        Err(e) => tracing::warn!(
            "finish_hook_cmd on rank {rank} could not start ({e}); training goes on: {}",
            d.cmd
        ),
    }
}
