//! Validation of the profiler sections and resolution into a [`ProfilePlan`].
//!
//! Only `global_profiler` and each role's `profiler` block are checked for unknown keys; every
//! other section of a verl document (`data`, `algorithm`, `trainer`, `actor_rollout_ref.model`,
//! ...) belongs to the trainer and passes through. All problems are collected and returned
//! together as [`ConfigError::Invalid`]. [`schema`] lists the keys each profiler block takes (the
//! override applier asks it too), [`describe`] renders a plan.

pub(crate) mod describe;
mod fields;
mod global;
mod precision;
mod raw;
mod role;
mod role_plan;
pub(crate) mod schema;
mod values;
pub(crate) mod verl_diff;

use self::global::{parse_global, world_size};
use self::raw::RawRole;
use self::role::{note_verl_difference, only_written, parse_role};
use self::role_plan::{resolve, resolve_hooks};
use crate::Written;
use crate::error::ConfigError;
use crate::tree::{Map, Node};
use crate::typed::{self, Reader};
use rlprof_profiler::plan::{ProfilePlan, Role, Tool, VerlSettings};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Validates the profiler sections of a merged document and resolves them into a plan;
/// `written` says which keys the user wrote (rollout and ref follow the actor on the others).
pub(crate) fn build_plan(doc: &Node, written: &Written) -> Result<ProfilePlan, ConfigError> {
    let mut cx = Reader::new(doc);
    let mut verl = VerlSettings::default();
    let empty = Map::new();
    let root = match doc {
        Node::Null => &empty,
        Node::Map(m) => m,
        other => {
            return Err(ConfigError::Invalid(vec![format!(
                "<document>: {} is not a mapping; expected a verl config with a global_profiler section",
                other.show()
            )]));
        }
    };

    let world_size = world_size(&mut cx, root);
    let global = parse_global(&mut cx, root, world_size);

    // Role blocks.
    let arr = cx
        .map(root.get("actor_rollout_ref"), "actor_rollout_ref")
        .unwrap_or(&empty);
    let mut raws: Vec<(Role, RawRole)> = Vec::new();
    for (role, section, key) in [
        (Role::Actor, Some(arr), "actor"),
        (Role::Rollout, Some(arr), "rollout"),
        (Role::Ref, Some(arr), "ref"),
        (Role::Critic, None, "critic"),
        (Role::RewardModel, None, "reward_model"),
    ] {
        let (parent, sect_path) = match section {
            Some(m) => (m, format!("actor_rollout_ref.{key}")),
            None => (root, key.to_string()),
        };
        let sect = cx.map(parent.get(key), &sect_path);
        let block = sect.and_then(|s| s.get("profiler"));
        let present_optional = block.is_some_and(|b| !b.is_null());
        if matches!(role, Role::Critic | Role::RewardModel) && !present_optional {
            continue;
        }
        let follows_actor = matches!(role, Role::Rollout | Role::Ref);
        let raw = match cx.map(block, role.yaml_path()) {
            Some(m) if follows_actor => {
                // Keys verl's own files supply (not the user) do not stop rollout and ref from
                // following the actor, as the user document promises.
                let mine = only_written(m, role.yaml_path(), written);
                note_verl_difference(&mut verl, role, m, &mine);
                parse_role(&mut cx, &mine, role.yaml_path(), world_size, written)
            }
            Some(m) => parse_role(&mut cx, m, role.yaml_path(), world_size, written),
            None => RawRole::default(),
        };
        raws.push((role, raw));
    }

    // Inheritance: rollout and ref follow the actor.
    let actor_raw = raws
        .iter()
        .find(|(r, _)| *r == Role::Actor)
        .map(|(_, raw)| raw.clone())
        .unwrap_or_default();
    let effective: Vec<(Role, RawRole)> = raws
        .iter()
        .map(|(role, raw)| match role {
            Role::Rollout | Role::Ref => (*role, raw.over(&actor_raw)),
            _ => (*role, raw.clone()),
        })
        .collect();

    // Tool choice.
    let (tool, tool_source) = if let Some(t) = global.tool {
        (Some(t), "global_profiler.tool".to_string())
    } else if global.precision_debugger {
        (
            None,
            "global_profiler.tool (precision_debugger: msprobe-layout dumps, no trace)".to_string(),
        )
    } else if global.unknown_tool {
        (
            None,
            "global_profiler.tool (not a tool: nothing collects, as in verl 0.9.1)".to_string(),
        )
    } else if global.steps.is_empty() || global.tool_given {
        (None, "no steps listed".to_string())
    } else {
        let mut written: Vec<(Tool, String)> = Vec::new();
        for (_, raw) in &raws {
            written.extend(raw.written.iter().cloned());
        }
        let mut distinct: Vec<Tool> = written.iter().map(|(t, _)| *t).collect();
        distinct.sort();
        distinct.dedup();
        let valid = Tool::ALL.map(Tool::as_str).join(", ");
        match distinct.len() {
            1 => (Some(distinct[0]), format!("inferred from {}", written[0].1)),
            0 => {
                cx.err(
                    "global_profiler.tool",
                    format!(
                        "not set, and no role's profiler writes a tool_config block to infer it from; set global_profiler.tool to one of {valid}"
                    ),
                );
                (None, "not set".to_string())
            }
            _ => {
                let list: Vec<String> = written.iter().map(|(_, p)| p.clone()).collect();
                cx.err(
                    "global_profiler.tool",
                    format!(
                        "not set, and several tools are configured ({}); set global_profiler.tool to one of {valid}",
                        list.join(", ")
                    ),
                );
                (None, "not set".to_string())
            }
        }
    };

    let mut roles = BTreeMap::new();
    for (role, raw) in &effective {
        roles.insert(*role, resolve(raw, &global, tool, world_size));
    }

    let mut warnings = misspelt_sections(root);
    warnings.extend(global.warnings.iter().cloned());
    if global.precision_debugger {
        verl.precision = precision::resolve(
            &mut cx,
            &global.precision,
            &effective,
            &roles,
            &global.save_path,
            &global.steps,
            &mut warnings,
        );
    }
    for (_, raw) in &raws {
        warnings.extend(raw.warnings.iter().cloned());
    }
    if global.worker_nsight_null && tool == Some(Tool::Nsys) && !global.steps.is_empty() {
        cx.err(
            "global_profiler.global_tool_config.nsys.worker_nsight_options",
            "null, but the nsys tool needs the worker's nsys options (verl 0.9.1 refuses this too: worker_nsight_options must be set when using nsys with profile_steps); remove the null to use the defaults",
        );
    }
    // Cross-field checks.
    if global.continuous {
        let discrete: Vec<&str> = roles
            .iter()
            .filter(|(_, rp)| rp.enable && rp.discrete)
            .map(|(role, _)| role.as_str())
            .collect();
        if !discrete.is_empty() {
            warnings.push(format!(
                "global_profiler.profile_continuous_steps: true has no effect on {}, which collect in discrete mode (tool_config.<tool>.discrete: true): each role call is its own collection (verl accepts this combination too)",
                discrete.join(", ")
            ));
        }
    }
    for (role, raw) in &effective {
        resolve_hooks(
            &mut cx,
            &mut verl,
            *role,
            raw,
            &global,
            roles.get(role),
            world_size,
        );
    }

    if !cx.is_clean() {
        return Err(ConfigError::Invalid(cx.into_messages()));
    }

    for (role, rp) in &roles {
        if rp.enable && !rp.all_ranks && rp.ranks.is_empty() {
            let p = role.yaml_path();
            warnings.push(format!(
                "{p}: enable is true but no rank is selected (all_ranks: false, ranks: []), so {} collects nothing; select ranks with {p}.all_ranks=True or {p}.ranks=[0]",
                role.as_str()
            ));
            verl.differences.push(format!(
                "{p}: ranks: [] collects nothing here, as the user document says; verl 0.9.1 would profile rank 0"
            ));
        }
    }
    if !global.steps.is_empty() && !roles.values().any(|r| r.enable) {
        warnings.push(format!(
            "global_profiler.steps: steps {:?} are listed but no role is enabled, so nothing is collected; enable one, e.g. actor_rollout_ref.actor.profiler.enable=True",
            global.steps
        ));
    }

    cross_role_warnings(&roles, &mut warnings);
    // precision_debugger dumps through its own plan (`verl.precision`), never a trace.
    let step_groups = if global.unknown_tool || global.precision_debugger {
        Vec::new()
    } else if tool == Some(Tool::TorchMemory) {
        let n = roles
            .values()
            .find(|r| r.enable)
            .map_or(global.torch_memory.snapshot_num_steps, |r| {
                r.torch_memory.snapshot_num_steps
            });
        memory_windows(&global.steps, n)
    } else {
        group_steps(&global.steps, global.continuous)
    };
    let mut plan = ProfilePlan {
        tool,
        tool_source,
        steps: global.steps,
        profile_continuous_steps: global.continuous,
        save_path: PathBuf::from(global.save_path),
        world_size,
        step_groups,
        layout: global.layout,
        roles,
        nsys: global.nsys,
        torch_memory: global.torch_memory,
        warnings,
        verl,
    };
    let rows = verl_diff::applying(&plan);
    plan.verl.differences.extend(rows.iter().map(|r| {
        format!(
            "[{}] verl 0.9.1: {} rlprof: {} Why: {} (docs/verl-differences.md; pinned by {})",
            r.id, r.verl, r.rlprof, r.why, r.test
        )
    }));
    Ok(plan)
}

/// verl 0.9.1's torch_memory windows: `n` profiled steps per snapshot, in order; the last
/// window may hold fewer (verl never dumps it; rlprof does, see `verl_diff`).
pub(crate) fn memory_windows(steps: &[u64], n: u64) -> Vec<Vec<u64>> {
    steps
        .chunks(n.max(1) as usize)
        .map(<[u64]>::to_vec)
        .collect()
}

/// Warnings for settings of one role that another role's setting keeps from taking effect,
/// each naming both keys.
fn cross_role_warnings(
    roles: &BTreeMap<Role, rlprof_profiler::plan::RolePlan>,
    out: &mut Vec<String>,
) {
    use rlprof_profiler::plan::ScheduleScope;
    let key = |role: Role, r: &rlprof_profiler::plan::RolePlan| {
        format!(
            "{}.tool_config.{}.discrete",
            role.yaml_path(),
            r.tool.as_str()
        )
    };
    let e2e = [Role::Actor, Role::Ref, Role::Critic, Role::RewardModel]
        .into_iter()
        .find_map(|r| {
            Some((
                r,
                roles
                    .get(&r)
                    .filter(|p| p.enable && !p.discrete && !p.ranks.is_empty())?,
            ))
        });
    if let Some((er, ep)) = e2e {
        for (role, p) in roles {
            if !(p.enable && p.discrete) {
                continue;
            }
            let shared: Vec<u32> = p
                .ranks
                .iter()
                .copied()
                .filter(|x| ep.ranks.contains(x))
                .collect();
            if shared.is_empty() {
                continue;
            }
            out.push(format!(
                "{}: true cannot take effect on ranks {shared:?}: {}: false makes one end-to-end collection per step there, which holds {}'s calls as ranges instead of collections of their own (verl 0.9.1 profiles each worker apart); make both discrete or both end-to-end to choose",
                key(*role, p),
                key(er, ep),
                role.as_str()
            ));
        }
    }
    for (role, p) in roles {
        if !p.enable || p.schedule_scope != ScheduleScope::RolloutDiscrete {
            continue;
        }
        let tk = format!(
            "{}.tool_config.{}.profile_token_start/profile_token_end",
            role.yaml_path(),
            p.tool.as_str()
        );
        if *role != Role::Rollout {
            out.push(format!(
                "{tk} has no effect on {}: verl 0.9.1 applies the token window to the rollout engine only; set it under {}.tool_config.{}",
                role.as_str(),
                Role::Rollout.yaml_path(),
                p.tool.as_str()
            ));
        } else if !p.discrete {
            out.push(format!(
                "{tk} has no effect while {}: false: verl 0.9.1 applies the token window in discrete mode only",
                key(*role, p)
            ));
        }
    }
}

/// verl 0.9.1's top-level sections (`ppo_trainer` and the experimental trainers) and rlprof's.
const KNOWN_SECTIONS: &[&str] = &[
    "actor_rollout_ref",
    "algorithm",
    "async_training",
    "critic",
    "custom_reward_function",
    "data",
    "distillation",
    "global_profiler",
    "model_engine",
    "ray_kwargs",
    "reward",
    "reward_model",
    "rollout",
    "sandbox_fusion",
    "skip",
    "trainer",
    "transfer_queue",
];

/// The sections whose misspelling silently changes what is profiled.
const PROFILER_SECTIONS: &[&str] = &[
    "global_profiler",
    "actor_rollout_ref",
    "critic",
    "reward_model",
    "trainer",
];

/// A warning for each top-level key that looks like a misspelt profiler section
/// (`global_profilr:` would otherwise turn profiling off silently).
fn misspelt_sections(root: &Map) -> Vec<String> {
    root.keys()
        .map(String::as_str)
        .filter(|k| !KNOWN_SECTIONS.contains(k))
        .filter_map(|k| {
            typed::suggest(k, PROFILER_SECTIONS).map(|s| {
                format!("{k}: not a section rlprof or verl reads (ignored); did you mean '{s}'?")
            })
        })
        .collect()
}

/// Groups sorted, deduplicated steps: consecutive runs when `continuous`, else singletons.
pub fn group_steps(steps: &[u64], continuous: bool) -> Vec<Vec<u64>> {
    let mut groups: Vec<Vec<u64>> = Vec::new();
    for &s in steps {
        match groups.last_mut() {
            Some(g) if continuous && g.last().is_some_and(|&l| l + 1 == s) => g.push(s),
            _ => groups.push(vec![s]),
        }
    }
    groups
}
