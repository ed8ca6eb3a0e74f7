//! The settings of `global_profiler` and of each role's `profiler` block after validation,
//! before resolution into a plan (`None` = not set), and their inheritance.

use rlprof_profiler::plan::{
    Caps, Content, ExportType, Granularity, Layout, Level, NsysOptions, Schedule, Tool,
    TorchMemoryOptions,
};
use std::collections::BTreeMap;

/// Settings of `global_profiler` after validation.
pub(super) struct Global {
    pub(super) tool: Option<Tool>,
    /// `tool` was written (possibly invalid, already reported).
    pub(super) tool_given: bool,
    pub(super) steps: Vec<u64>,
    pub(super) continuous: bool,
    pub(super) save_path: String,
    pub(super) nsys: NsysOptions,
    pub(super) torch_memory: TorchMemoryOptions,
    pub(super) caps: Caps,
    /// `global_tool_config.schedule`: the default schedule of every role.
    pub(super) schedule: Option<Schedule>,
    /// verl's hook keys (inherited by every role).
    pub(super) hooks: Hooks,
    /// `tool: precision_debugger` was chosen.
    pub(super) precision_debugger: bool,
    /// `global_tool_config.precision_debugger`.
    pub(super) precision: super::precision::RawPrecision,
    /// `tool` names no tool (verl's no-op profiler: nothing collects).
    pub(super) unknown_tool: bool,
    /// `rlprof.layout`.
    pub(super) layout: Layout,
    /// `global_tool_config.nsys.worker_nsight_options` is written as null.
    pub(super) worker_nsight_null: bool,
    /// Findings verl accepts without a word, said at start-up.
    pub(super) warnings: Vec<String>,
}

/// verl's `relocate_results` and `finish_hook_*` keys; `None` = not set.
#[derive(Debug, Clone, Default)]
pub(super) struct Hooks {
    pub(super) relocate_results: Option<bool>,
    pub(super) cmd: Option<Option<String>>,
    pub(super) all_ranks: Option<bool>,
    pub(super) ranks: Option<Vec<u32>>,
}

impl Hooks {
    pub(super) fn over(&self, base: &Hooks) -> Hooks {
        Hooks {
            relocate_results: self.relocate_results.or(base.relocate_results),
            cmd: self.cmd.clone().or_else(|| base.cmd.clone()),
            all_ranks: self.all_ranks.or(base.all_ranks),
            ranks: self.ranks.clone().or_else(|| base.ranks.clone()),
        }
    }
}

/// What one role's `profiler` block sets; `None` = not set (inherit / default).
#[derive(Debug, Clone, Default)]
pub(super) struct RawRole {
    pub(super) tool: Option<Tool>,
    pub(super) enable: Option<bool>,
    pub(super) all_ranks: Option<bool>,
    pub(super) ranks: Option<Vec<u32>>,
    pub(super) save_path: Option<String>,
    pub(super) npu_level: Option<Level>,
    pub(super) npu_export_type: Option<ExportType>,
    pub(super) npu_contents: Option<Vec<Content>>,
    pub(super) npu_analysis: Option<bool>,
    pub(super) npu_discrete: Option<bool>,
    pub(super) torch_contents: Option<Vec<Content>>,
    pub(super) torch_step_start: Option<i64>,
    pub(super) torch_step_end: Option<i64>,
    pub(super) torch_discrete: Option<bool>,
    pub(super) nsys_discrete: Option<bool>,
    pub(super) tm_entries: Option<u64>,
    pub(super) tm_depth: Option<u32>,
    pub(super) tm_num_steps: Option<u64>,
    pub(super) max_events: Option<Option<u64>>,
    pub(super) max_bytes: Option<Option<u64>>,
    /// `tool_config.<tool>.schedule` / `granularity` per tool (not inherited: a schedule counts
    /// the iterations of its own role's calls).
    pub(super) schedules: BTreeMap<Tool, Schedule>,
    pub(super) granularity: BTreeMap<Tool, Granularity>,
    /// Tool names this block chose explicitly, with the YAML path that did (for inference).
    pub(super) written: Vec<(Tool, String)>,
    /// Tools whose schedule is a `profile_token_start/end` window (rollout decode steps).
    pub(super) token_window: std::collections::BTreeSet<Tool>,
    /// verl's hook keys.
    pub(super) hooks: Hooks,
    /// `tool_config.precision_debugger`.
    pub(super) precision: super::precision::RawPrecision,
    /// Findings verl accepts without a word, said at start-up.
    pub(super) warnings: Vec<String>,
}

impl RawRole {
    /// Keys set here win; keys not set take `base`'s value.
    pub(super) fn over(&self, base: &RawRole) -> RawRole {
        RawRole {
            tool: self.tool.or(base.tool),
            enable: self.enable.or(base.enable),
            all_ranks: self.all_ranks.or(base.all_ranks),
            ranks: self.ranks.clone().or_else(|| base.ranks.clone()),
            save_path: self.save_path.clone().or_else(|| base.save_path.clone()),
            npu_level: self.npu_level.or(base.npu_level),
            npu_export_type: self.npu_export_type.or(base.npu_export_type),
            npu_contents: self
                .npu_contents
                .clone()
                .or_else(|| base.npu_contents.clone()),
            npu_analysis: self.npu_analysis.or(base.npu_analysis),
            npu_discrete: self.npu_discrete.or(base.npu_discrete),
            torch_contents: self
                .torch_contents
                .clone()
                .or_else(|| base.torch_contents.clone()),
            torch_step_start: self.torch_step_start.or(base.torch_step_start),
            torch_step_end: self.torch_step_end.or(base.torch_step_end),
            torch_discrete: self.torch_discrete.or(base.torch_discrete),
            nsys_discrete: self.nsys_discrete.or(base.nsys_discrete),
            tm_entries: self.tm_entries.or(base.tm_entries),
            tm_depth: self.tm_depth.or(base.tm_depth),
            tm_num_steps: self.tm_num_steps.or(base.tm_num_steps),
            max_events: self.max_events.or(base.max_events),
            max_bytes: self.max_bytes.or(base.max_bytes),
            schedules: self.schedules.clone(),
            granularity: self.granularity.clone(),
            written: self.written.clone(),
            token_window: self.token_window.clone(),
            hooks: self.hooks.over(&base.hooks),
            precision: self.precision.over(&base.precision),
            warnings: self.warnings.clone(),
        }
    }
}
