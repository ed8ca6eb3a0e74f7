//! The schema of the profiler sections: the valid keys at each level.
//!
//! Used by validation (unknown keys) and by overrides: a plain `a.b.c=value` override may set a
//! profiler key the file does not write, because in verl's full `ppo_trainer.yaml` every such key
//! exists (Hydra would accept it there). Keys outside this schema need `+`.

/// Valid keys of `global_profiler`.
pub(crate) const GLOBAL_KEYS: &[&str] = &[
    "_target_",
    "tool",
    "steps",
    "profile_continuous_steps",
    "save_path",
    "global_tool_config",
    "max_events",
    "max_bytes",
    "relocate_results",
    "finish_hook_cmd",
    "finish_hook_all_ranks",
    "finish_hook_ranks",
    "rlprof",
];
/// Valid keys of `global_profiler.rlprof`, rlprof's own node.
pub(crate) const RLPROF_KEYS: &[&str] = &["layout"];
/// Valid keys of `global_profiler.global_tool_config`.
pub(crate) const GLOBAL_TOOL_KEYS: &[&str] = &[
    "_target_",
    "nsys",
    "torch_memory",
    "schedule",
    "precision_debugger",
];
/// Valid keys of a `schedule` block (`torch.profiler.schedule` names; verl's
/// `TorchProfilerScheduleConfig` adds `_target_` and `name`).
pub(crate) const SCHEDULE_KEYS: &[&str] = &[
    "_target_",
    "name",
    "skip_first",
    "wait",
    "warmup",
    "active",
    "repeat",
];
/// Valid keys of a `precision_debugger` block (verl's `PrecisionDebuggerToolConfig`).
pub(crate) const PRECISION_DEBUGGER_KEYS: &[&str] = &[
    "_target_",
    "name",
    "config_path",
    "steps",
    "stages",
    "strict",
];
/// Valid keys of `global_profiler.global_tool_config.nsys`.
/// `all_ranks` and `ranks` are written by verl-recipe's gkd config and accepted by verl 0.9.1;
/// the ranks collected are the roles' (`<role>.profiler.all_ranks` / `ranks`), so they are
/// accepted and ignored.
pub(crate) const NSYS_GLOBAL_KEYS: &[&str] = &[
    "_target_",
    "discrete",
    "all_ranks",
    "ranks",
    "controller_nsight_options",
    "worker_nsight_options",
];
/// Valid keys of a `torch_memory` block (global or per role); verl's `context`, `stacks`, `kw_args` are accepted and ignored.
pub(crate) const TORCH_MEMORY_KEYS: &[&str] = &[
    "_target_",
    "trace_alloc_max_entries",
    "stack_depth",
    "context",
    "stacks",
    "kw_args",
    "memory_snapshot_num_steps",
    "name",
];
/// Valid keys of a role's `tool_config.torch_memory` (the global ones plus the schedule).
pub(crate) const ROLE_TORCH_MEMORY_KEYS: &[&str] = &[
    "_target_",
    "trace_alloc_max_entries",
    "stack_depth",
    "context",
    "stacks",
    "kw_args",
    "memory_snapshot_num_steps",
    "name",
    "schedule",
    "granularity",
];
/// Valid keys of a role's `profiler` block.
pub(crate) const ROLE_KEYS: &[&str] = &[
    "_target_",
    "tool",
    "enable",
    "all_ranks",
    "ranks",
    "save_path",
    "tool_config",
    "max_events",
    "max_bytes",
    "global_tool_config",
    "relocate_results",
    "finish_hook_cmd",
    "finish_hook_all_ranks",
    "finish_hook_ranks",
];
/// Valid keys of a role's `profiler.tool_config`.
pub(crate) const TOOL_CONFIG_KEYS: &[&str] = &[
    "_target_",
    "nsys",
    "npu",
    "torch",
    "torch_memory",
    "precision_debugger",
];
/// Valid keys of `tool_config.npu`.
pub(crate) const NPU_KEYS: &[&str] = &[
    "_target_",
    "level",
    "export_type",
    "contents",
    "analysis",
    "discrete",
    "schedule",
    "granularity",
    "profile_token_start",
    "profile_token_end",
    "name",
];
/// Valid keys of `tool_config.torch`.
pub(crate) const TORCH_KEYS: &[&str] = &[
    "_target_",
    "contents",
    "step_start",
    "step_end",
    "discrete",
    "schedule",
    "granularity",
    "profile_token_start",
    "profile_token_end",
    "name",
];
/// Valid keys of `tool_config.nsys`.
pub(crate) const NSYS_ROLE_KEYS: &[&str] = &["_target_", "discrete", "name"];

/// What a schema level allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Children {
    /// Exactly these keys.
    Keys(&'static [&'static str]),
    /// Any key (pass-through option maps such as `worker_nsight_options`).
    Any,
}

/// The role sections that always exist in a verl job (`critic` and `reward_model` exist only
/// when the document has them).
const ROOT_KEYS: &[&str] = &["global_profiler", "actor_rollout_ref", "trainer"];

/// The schema children of the mapping at `path`, or `None` when the path is not governed by the
/// profiler schema.
pub(crate) fn children(path: &[&str]) -> Option<Children> {
    use Children::{Any, Keys};
    // Strip a role prefix down to its `profiler` block.
    let role_rest = match path {
        ["actor_rollout_ref", "actor" | "rollout" | "ref", rest @ ..] => Some(rest),
        ["critic" | "reward_model", rest @ ..] => Some(rest),
        _ => None,
    };
    if let Some(rest) = role_rest {
        return match rest {
            [] => Some(Keys(&["profiler"])),
            ["profiler"] => Some(Keys(ROLE_KEYS)),
            ["profiler", "tool_config"] => Some(Keys(TOOL_CONFIG_KEYS)),
            ["profiler", "tool_config", "npu"] => Some(Keys(NPU_KEYS)),
            ["profiler", "tool_config", "torch"] => Some(Keys(TORCH_KEYS)),
            ["profiler", "tool_config", "nsys"] => Some(Keys(NSYS_ROLE_KEYS)),
            ["profiler", "tool_config", "torch_memory"] => Some(Keys(ROLE_TORCH_MEMORY_KEYS)),
            ["profiler", "tool_config", "precision_debugger"] => {
                Some(Keys(PRECISION_DEBUGGER_KEYS))
            }
            ["profiler", "global_tool_config"] => Some(Any),
            [
                "profiler",
                "tool_config",
                "npu" | "torch" | "torch_memory",
                "schedule",
            ] => Some(Keys(SCHEDULE_KEYS)),
            _ => None,
        };
    }
    match path {
        [] => Some(Keys(ROOT_KEYS)),
        ["actor_rollout_ref"] => Some(Keys(&["actor", "rollout", "ref"])),
        ["trainer"] => Some(Keys(&["nnodes", "n_gpus_per_node"])),
        ["global_profiler"] => Some(Keys(GLOBAL_KEYS)),
        ["global_profiler", "global_tool_config"] => Some(Keys(GLOBAL_TOOL_KEYS)),
        ["global_profiler", "rlprof"] => Some(Keys(RLPROF_KEYS)),
        ["global_profiler", "global_tool_config", "nsys"] => Some(Keys(NSYS_GLOBAL_KEYS)),
        ["global_profiler", "global_tool_config", "torch_memory"] => Some(Keys(TORCH_MEMORY_KEYS)),
        ["global_profiler", "global_tool_config", "nsys", _] => Some(Any),
        ["global_profiler", "global_tool_config", "schedule"] => Some(Keys(SCHEDULE_KEYS)),
        [
            "global_profiler",
            "global_tool_config",
            "precision_debugger",
        ] => Some(Keys(PRECISION_DEBUGGER_KEYS)),
        [
            "global_profiler",
            "global_tool_config",
            "torch_memory",
            "kw_args",
        ] => Some(Any),
        _ => None,
    }
}

/// The schema keys under `parent` (empty when not governed), for suggestions.
pub(crate) fn keys_under(parent: &[&str]) -> &'static [&'static str] {
    match children(parent) {
        Some(Children::Keys(k)) => k,
        _ => &[],
    }
}
