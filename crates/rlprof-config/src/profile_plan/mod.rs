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
mod raw;
mod role;
mod role_plan;
pub(crate) mod schema;
mod values;

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
    if global.precision_debugger {
        verl.start_errors.push(
            "global_profiler.tool: 'precision_debugger' (verl's msprobe precision debugger) is accepted in the config, but rlprof cannot collect with it yet; choose one of nsys, npu, torch, torch_memory".to_string(),
        );
    }
    let (tool, tool_source) = if let Some(t) = global.tool {
        (Some(t), "global_profiler.tool".to_string())
    } else if global.precision_debugger {
        (
            None,
            "global_profiler.tool (precision_debugger: not collectable yet)".to_string(),
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

    let step_groups = group_steps(&global.steps, global.continuous);
    Ok(ProfilePlan {
        tool,
        tool_source,
        steps: global.steps,
        profile_continuous_steps: global.continuous,
        save_path: PathBuf::from(global.save_path),
        world_size,
        step_groups,
        roles,
        nsys: global.nsys,
        torch_memory: global.torch_memory,
        warnings,
        verl,
    })
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
