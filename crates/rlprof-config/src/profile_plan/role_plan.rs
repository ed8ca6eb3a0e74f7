//! Resolution of a role's validated settings into its [`RolePlan`] (defaults from
//! `global_profiler` and the chosen tool), and of its verl finish hook.

use super::raw::{Global, RawRole};
use crate::typed::Reader;
use rlprof_profiler::plan::{
    Caps, Content, Contents, FinishHook, Level, Role, RolePlan, ScheduleScope, Tool,
    TorchMemoryOptions, VerlSettings,
};
use std::path::PathBuf;

/// A role's finish hook: its command and ranks (verl: `finish_hook_all_ranks`, else
/// `finish_hook_ranks`, else the profiled ranks).
pub(super) fn resolve_hooks(
    cx: &mut Reader,
    verl: &mut VerlSettings,
    role: Role,
    raw: &RawRole,
    g: &Global,
    rp: Option<&RolePlan>,
    world: u32,
) {
    let h = raw.hooks.over(&g.hooks);
    verl.relocate_results
        .insert(role, h.relocate_results.unwrap_or(false));
    let Some(Some(cmd)) = h.cmd else { return };
    if cmd.trim().is_empty() {
        cx.err(
            &format!("{}.finish_hook_cmd", role.yaml_path()),
            "'' is empty; give a shell command or null",
        );
        return;
    }
    let Some(rp) = rp.filter(|r| r.enable) else {
        return;
    };
    let ranks = if h.all_ranks == Some(true) {
        (0..world).collect()
    } else {
        match &h.ranks {
            Some(r) if !r.is_empty() => r.clone(),
            _ => rp.ranks.clone(),
        }
    };
    verl.finish_hooks.insert(role, FinishHook { cmd, ranks });
}

pub(super) fn resolve(raw: &RawRole, g: &Global, plan_tool: Option<Tool>, world: u32) -> RolePlan {
    // Without any tool (no steps listed) a role still needs one in the plan; npu is the
    // user document's tool. Such a plan never collects.
    let tool = raw.tool.or(plan_tool).unwrap_or(Tool::Npu);
    let all_ranks = raw.all_ranks.unwrap_or(false);
    let ranks = if all_ranks {
        (0..world).collect()
    } else {
        raw.ranks.clone().unwrap_or_default()
    };
    let nonempty = |c: &Option<Vec<Content>>, dflt: [Content; 2]| -> Contents {
        match c {
            Some(v) if !v.is_empty() => v.iter().copied().collect(),
            _ => dflt.into_iter().collect(),
        }
    };
    // npu: `[]` is CPU only, as verl 0.9.1 collects it (the user document is silent on `[]`);
    // a list is taken as written (the user document: `npu` selects device data, `cpu` host data).
    // torch: CPU always, as verl 0.9.1 (its stage markers are CPU-side), CUDA for `[]` too.
    let contents = match tool {
        Tool::Npu => match &raw.npu_contents {
            Some(v) if !v.is_empty() => v.iter().copied().collect(),
            _ => [Content::Cpu].into_iter().collect(),
        },
        Tool::Torch => {
            let mut c = nonempty(&raw.torch_contents, [Content::Cuda, Content::Cpu]);
            c.insert(Content::Cpu);
            c
        }
        Tool::TorchMemory => [Content::Memory].into_iter().collect(),
        Tool::Nsys => [Content::Npu, Content::Cpu].into_iter().collect(),
    };
    let level = if tool == Tool::Npu {
        raw.npu_level.unwrap_or(Level::Level0)
    } else {
        Level::Level0
    };
    let analysis = if tool == Tool::Npu {
        raw.npu_analysis.unwrap_or(true)
    } else {
        true
    };
    let discrete = match tool {
        Tool::Npu => raw.npu_discrete.unwrap_or(false),
        Tool::Torch => raw.torch_discrete.unwrap_or(false),
        Tool::Nsys => raw.nsys_discrete.unwrap_or(g.nsys.discrete),
        Tool::TorchMemory => false,
    };
    let (schedule, schedule_scope) = match raw.schedules.get(&tool) {
        Some(s) if raw.token_window.contains(&tool) => (Some(*s), ScheduleScope::RolloutDiscrete),
        Some(s) if tool == Tool::Torch => (Some(*s), ScheduleScope::Update),
        Some(s) => (Some(*s), ScheduleScope::EveryCall),
        None => (g.schedule, ScheduleScope::EveryCall),
    };
    RolePlan {
        enable: raw.enable.unwrap_or(false),
        all_ranks,
        ranks,
        tool,
        level,
        export_type: raw.npu_export_type.unwrap_or_default(),
        contents,
        analysis,
        discrete,
        save_path: PathBuf::from(raw.save_path.clone().unwrap_or_else(|| g.save_path.clone())),
        torch_step_start: raw.torch_step_start.unwrap_or(0),
        torch_step_end: raw.torch_step_end.unwrap_or(-1),
        torch_memory: TorchMemoryOptions {
            trace_alloc_max_entries: raw
                .tm_entries
                .unwrap_or(g.torch_memory.trace_alloc_max_entries),
            stack_depth: raw.tm_depth.unwrap_or(g.torch_memory.stack_depth),
            snapshot_num_steps: raw
                .tm_num_steps
                .unwrap_or(g.torch_memory.snapshot_num_steps),
        },
        caps: Caps {
            max_events: raw.max_events.unwrap_or(g.caps.max_events),
            max_bytes: raw.max_bytes.unwrap_or(g.caps.max_bytes),
        },
        schedule,
        granularity: raw.granularity.get(&tool).copied().unwrap_or_default(),
        schedule_scope,
    }
}
