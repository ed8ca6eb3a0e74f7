//! Rendering a [`ProfilePlan`]: the `rlprof config check --json` object and the plan in words.

use serde_json::{Value, json};

use rlprof_profiler::plan::{
    Caps, Contents, IterKind, ProfilePlan, Role, RoleCall, RolePlan, Schedule, Tool,
};

fn caps_json(c: &Caps) -> Value {
    json!({ "max_events": c.max_events, "max_bytes": c.max_bytes })
}

fn role_json(r: &RolePlan) -> Value {
    json!({
        "enable": r.enable,
        "all_ranks": r.all_ranks,
        "ranks": r.ranks,
        "discrete": r.discrete,
        "tool": r.tool.as_str(),
        "level": r.level.as_str(),
        "contents": r.contents.to_vec().iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "analysis": r.analysis,
        "save_path": r.save_path.display().to_string(),
        "torch_step_start": r.torch_step_start,
        "torch_step_end": r.torch_step_end,
        "torch_memory": {
            "trace_alloc_max_entries": r.torch_memory.trace_alloc_max_entries,
            "stack_depth": r.torch_memory.stack_depth,
        },
        "caps": caps_json(&r.caps),
        "schedule": r.schedule,
        "schedule_scope": r.schedule_scope,
        "granularity": r.granularity.as_str(),
    })
}

/// What a schedule counts for a role, in words (`decode steps of rollout_generate`), by stage
/// label and only for the calls the schedule gates.
fn counted_words(role: Role, r: &RolePlan) -> String {
    let calls: Vec<String> = RoleCall::ALL
        .iter()
        .filter(|c| c.role() == role)
        .filter_map(|c| {
            let (_, kind) = r.schedule_for(*c)?;
            let unit = match kind {
                IterKind::DecodeStep => "decode steps",
                IterKind::MicroBatch => "micro-batches",
                IterKind::MiniBatch => "mini-batches",
            };
            Some(format!("{unit} of {}", c.annotated_name()))
        })
        .collect();
    calls.join(", ")
}

/// A schedule in words: which iteration ids are recorded.
fn schedule_words(s: &Schedule) -> String {
    let cycle = s.wait + s.warmup + s.active;
    let first = s.skip_first + s.wait + s.warmup;
    let window = if s.active == 1 {
        format!("iteration {first}")
    } else {
        format!("iterations {first}-{}", first + s.active - 1)
    };
    let rep = match s.repeat {
        0 => format!(", then every {cycle} without end"),
        1 => String::new(),
        n => format!(", repeated every {cycle}, {n} times"),
    };
    let warm = if s.warmup > 0 {
        format!(
            " (each after {} warmup iteration(s) whose records are dropped)",
            s.warmup
        )
    } else {
        String::new()
    };
    format!("records {window}{rep}{warm}, counted from 0 in each call")
}

/// The `rlprof config check --json` object.
///
/// Keys: `tool` (name or null), `tool_source`, `save_path`, `world_size`, `steps`,
/// `step_groups`, `profile_continuous_steps`, `roles` (by role name: `enable`, `all_ranks`,
/// `ranks`, `discrete`, `tool`, `level`, `contents`, `analysis`, `save_path`, torch fields,
/// `caps`), `nsys`, `torch_memory`, `warnings`.
pub(crate) fn plan_json(plan: &ProfilePlan) -> Value {
    let roles: serde_json::Map<String, Value> = plan
        .roles
        .iter()
        .map(|(role, rp)| (role.as_str().to_string(), role_json(rp)))
        .collect();
    json!({
        "tool": plan.tool.map(Tool::as_str),
        "tool_source": plan.tool_source,
        "save_path": plan.save_path.display().to_string(),
        "world_size": plan.world_size,
        "steps": plan.steps,
        "step_groups": plan.step_groups,
        "profile_continuous_steps": plan.profile_continuous_steps,
        "layout": plan.layout.as_str(),
        "roles": roles,
        "nsys": {
            "discrete": plan.nsys.discrete,
            "controller_nsight_options": plan.nsys.controller_nsight_options,
            "worker_nsight_options": plan.nsys.worker_nsight_options,
        },
        "torch_memory": {
            "trace_alloc_max_entries": plan.torch_memory.trace_alloc_max_entries,
            "stack_depth": plan.torch_memory.stack_depth,
            "memory_snapshot_num_steps": plan.torch_memory.snapshot_num_steps,
        },
        "warnings": plan.warnings,
        "verl": plan.verl,
    })
}

fn contents_words(c: Contents) -> String {
    c.to_vec()
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join("+")
}

fn bytes_words(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

fn cap_words(c: &Caps) -> String {
    let events = match c.max_events {
        Some(n) => format!("{n} events"),
        None => "unlimited events".to_string(),
    };
    let bytes = match c.max_bytes {
        Some(n) => bytes_words(n),
        None => "unlimited bytes".to_string(),
    };
    format!("{events}, {bytes}")
}

fn groups_words(groups: &[Vec<u64>]) -> String {
    groups
        .iter()
        .map(|g| match (g.first(), g.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan in words, for `rlprof config check` and the start-up log (multi-line, no trailing
/// newline). First line: tool and why; second: steps and collections; then one line per role;
/// then one `warning:` line per warning.
pub(crate) fn describe(plan: &ProfilePlan) -> String {
    let mut lines = Vec::new();
    match plan.tool {
        Some(t) => lines.push(format!("tool {} ({})", t.as_str(), plan.tool_source)),
        None => lines.push(format!("tool none ({})", plan.tool_source)),
    }
    if let Some(p) = &plan.verl.precision {
        lines.push(precision_words(p));
    }
    if plan.steps.is_empty() {
        lines.push(format!(
            "steps none -> nothing is collected; world size {}",
            plan.world_size
        ));
    } else if plan.step_groups.is_empty() && plan.verl.precision.is_some() {
        lines.push(format!(
            "steps {:?} -> no trace collections (the precision debugger dumps instead); world size {}",
            plan.steps, plan.world_size
        ));
    } else {
        let n = plan.step_groups.len();
        lines.push(format!(
            "steps {:?} -> {n} collection{} per selected rank ({}){}; world size {}; save_path {}",
            plan.steps,
            if n == 1 { "" } else { "s" },
            groups_words(&plan.step_groups),
            if plan.profile_continuous_steps {
                ", consecutive steps share one collection"
            } else {
                ""
            },
            plan.world_size,
            plan.save_path.display()
        ));
        lines.push(match plan.layout {
            rlprof_profiler::plan::Layout::Verl => "layout verl (as verl 0.9.1: {save_path}/train/ end-to-end, {save_path}/<stage>/ discrete, flat torch traces, torch_memory step{N}/steps{a}-{b}; global_profiler.rlprof.layout=step_grouped for {save_path}/step{N}/...)".to_string(),
            rlprof_profiler::plan::Layout::StepGrouped => "layout step_grouped ({save_path}/step{N}/{e2e|<stage>}/...)".to_string(),
        });
    }
    for (role, r) in &plan.roles {
        if !r.enable {
            lines.push(format!("{}: disabled", role.as_str()));
            continue;
        }
        let ranks = if r.ranks.is_empty() {
            "no ranks (collects nothing)".to_string()
        } else if r.all_ranks {
            format!("all ranks {:?}", r.ranks)
        } else {
            format!("ranks {:?}", r.ranks)
        };
        let mode = if r.discrete {
            "discrete (one collection per role call)"
        } else {
            "end-to-end (role calls marked inside one collection per step)"
        };
        let mut line = format!(
            "{}: {ranks}, tool {}, {mode}",
            role.as_str(),
            r.tool.as_str()
        );
        match r.tool {
            Tool::Npu => line.push_str(&format!(
                ", {}, contents {}, analysis {}",
                r.level.as_str(),
                contents_words(r.contents),
                if r.analysis { "on" } else { "off" }
            )),
            Tool::Torch => line.push_str(&format!(", contents {}", contents_words(r.contents))),
            Tool::TorchMemory => line.push_str(&format!(
                ", trace_alloc_max_entries {}, stack_depth {}",
                r.torch_memory.trace_alloc_max_entries, r.torch_memory.stack_depth
            )),
            Tool::Nsys => {}
        }
        line.push_str(&format!(
            ", save_path {}, caps {}",
            r.save_path.display(),
            cap_words(&r.caps)
        ));
        if let Some(s) = &r.schedule {
            line.push_str(&format!(
                "; schedule over {}: {}",
                counted_words(*role, r),
                schedule_words(s)
            ));
        }
        lines.push(line);
    }
    for (role, hook) in &plan.verl.finish_hooks {
        lines.push(format!(
            "{}: finish_hook_cmd runs once after the last profiled step on ranks {:?}: {}",
            role.as_str(),
            hook.ranks,
            hook.cmd
        ));
    }
    for d in &plan.verl.differences {
        lines.push(format!("verl 0.9.1 would differ: {d}"));
    }
    for e in &plan.verl.start_errors {
        lines.push(format!("train will refuse to start: {e}"));
    }
    for w in &plan.warnings {
        lines.push(format!("warning: {w}"));
    }
    lines.join("\n")
}

/// The precision debugger's dumps in one line.
fn precision_words(p: &rlprof_profiler::plan::PrecisionPlan) -> String {
    let stages: Vec<String> = p
        .stages
        .iter()
        .map(|s| {
            let m = &s.msprobe;
            let mut w = format!(
                "{} ({} {} from {}",
                s.call.annotated_name(),
                m.task.as_str(),
                m.level.as_str(),
                m.path.display()
            );
            if !m.ranks.is_empty() {
                w.push_str(&format!(", ranks {:?}", m.ranks));
            }
            if !m.scope.is_empty() {
                w.push_str(&format!(", scope {:?}", m.scope));
            }
            if !m.list.is_empty() {
                w.push_str(&format!(", list {:?}", m.list));
            }
            if m.data_mode != ["all"] {
                w.push_str(&format!(", data_mode {:?}", m.data_mode));
            }
            w.push(')');
            w
        })
        .collect();
    format!(
        "precision_debugger: msprobe dumps of steps {:?} -> {}/step_{{global_step}}/{{stage}}/step0/rank{{R}}/dump.json, stack.json, construct.json; stages {}",
        p.steps,
        p.save_path.display(),
        stages.join("; ")
    )
}
