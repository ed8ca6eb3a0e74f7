//! The resolved collection plan: what the validated configuration means, with inheritance
//! applied (rollout and ref follow the actor), ranks resolved and defaults filled in.
//!
//! The plan is the contract between the configuration layer (which builds it) and the
//! controller (which executes it). It holds no YAML and no strings that need parsing.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A collection tool, as named in `global_profiler.tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// Nsight Systems (CUDA builds only).
    Nsys,
    /// Ascend-layout output (`*_ascend_pt` directories).
    Npu,
    /// PyTorch profiler Chrome trace.
    Torch,
    /// PyTorch memory snapshot pickle.
    TorchMemory,
}

impl Tool {
    /// All tools, in the order the user document lists them.
    pub const ALL: [Tool; 4] = [Tool::Nsys, Tool::Npu, Tool::Torch, Tool::TorchMemory];

    /// The name used in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Tool::Nsys => "nsys",
            Tool::Npu => "npu",
            Tool::Torch => "torch",
            Tool::TorchMemory => "torch_memory",
        }
    }

    /// Parses a YAML tool name.
    pub fn parse(s: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// Collection level of the `npu` tool, as torch_npu's profiler levels: each level collects what
/// the one below it does and more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Only host/framework data per contents and range markers.
    LevelNone,
    /// Ranges + device kernels (default).
    Level0,
    /// Level0 + engine API layer, kernel metrics, communication details.
    Level1,
    /// Level1 + runtime layer records and host CPU metrics.
    Level2,
}

impl Level {
    /// All levels, lowest first.
    pub const ALL: [Level; 4] = [
        Level::LevelNone,
        Level::Level0,
        Level::Level1,
        Level::Level2,
    ];

    /// The name used in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::LevelNone => "level_none",
            Level::Level0 => "level0",
            Level::Level1 => "level1",
            Level::Level2 => "level2",
        }
    }

    /// Parses a YAML level name.
    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// Layout of the `npu` tool's parsed output (`tool_config.npu.export_type`, an rlprof
/// extension): torch_npu's SQLite DB (the default, as verl 0.9.1 asks for) or the text files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportType {
    /// `ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db` and `analysis.db`.
    #[default]
    Db,
    /// `trace_view.json`, CSVs and JSON files.
    Text,
}

impl ExportType {
    /// Both layouts.
    pub const ALL: [ExportType; 2] = [ExportType::Db, ExportType::Text];

    /// The name used in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportType::Db => "db",
            ExportType::Text => "text",
        }
    }

    /// Parses a YAML name.
    pub fn parse(s: &str) -> Option<ExportType> {
        ExportType::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// One kind of data a collection may contain (`tool_config.<tool>.contents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Content {
    /// Device-side data (kernels).
    Npu = 0,
    /// Host-side framework ops.
    Cpu = 1,
    /// Every allocation/free with op attribution.
    Memory = 2,
    /// Input shapes and dtypes.
    Shapes = 3,
    /// Module hierarchy (`model.layers.0.self_attn`).
    Module = 4,
    /// Native call stack.
    Stack = 5,
    /// Device ops for the `torch` tool (same data as `npu`).
    Cuda = 6,
}

impl Content {
    /// All content names.
    pub const ALL: [Content; 7] = [
        Content::Npu,
        Content::Cpu,
        Content::Memory,
        Content::Shapes,
        Content::Module,
        Content::Stack,
        Content::Cuda,
    ];

    /// The name used in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Content::Npu => "npu",
            Content::Cpu => "cpu",
            Content::Memory => "memory",
            Content::Shapes => "shapes",
            Content::Module => "module",
            Content::Stack => "stack",
            Content::Cuda => "cuda",
        }
    }

    /// Parses a YAML content name.
    pub fn parse(s: &str) -> Option<Content> {
        Content::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The valid content names for a tool.
    pub fn valid_for(tool: Tool) -> &'static [Content] {
        match tool {
            Tool::Torch => &[
                Content::Cuda,
                Content::Cpu,
                Content::Memory,
                Content::Shapes,
                Content::Stack,
            ],
            _ => &[
                Content::Npu,
                Content::Cpu,
                Content::Memory,
                Content::Shapes,
                Content::Module,
                Content::Stack,
            ],
        }
    }
}

/// A set of [`Content`] flags, stored as a bitmask so the hot path can test it cheaply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Contents(pub u32);

impl Contents {
    /// The empty set.
    pub const EMPTY: Contents = Contents(0);

    /// Whether `c` is in the set. Device data asked as `npu` or `cuda` are the same thing.
    pub fn has(self, c: Content) -> bool {
        let mask = match c {
            Content::Npu | Content::Cuda => {
                (1 << Content::Npu as u32) | (1 << Content::Cuda as u32)
            }
            other => 1 << other as u32,
        };
        self.0 & mask != 0
    }

    /// Adds `c` to the set.
    pub fn insert(&mut self, c: Content) {
        self.0 |= 1 << c as u32;
    }

    /// The contents in the set, in declaration order.
    pub fn to_vec(self) -> Vec<Content> {
        Content::ALL
            .into_iter()
            .filter(|c| self.0 & (1 << *c as u32) != 0)
            .collect()
    }
}

impl FromIterator<Content> for Contents {
    fn from_iter<I: IntoIterator<Item = Content>>(iter: I) -> Self {
        let mut s = Contents::EMPTY;
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl Serialize for Contents {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.to_vec())
    }
}

impl<'de> Deserialize<'de> for Contents {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<Content>::deserialize(d)?.into_iter().collect())
    }
}

/// A role of the RL job that has a `profiler` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `actor_rollout_ref.actor`
    Actor,
    /// `actor_rollout_ref.rollout`
    Rollout,
    /// `actor_rollout_ref.ref`
    Ref,
    /// `critic`
    Critic,
    /// `reward_model`
    RewardModel,
}

impl Role {
    /// Name used in YAML and in `config check --json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Actor => "actor",
            Role::Rollout => "rollout",
            Role::Ref => "ref",
            Role::Critic => "critic",
            Role::RewardModel => "reward_model",
        }
    }

    /// YAML path of the role's `profiler` block.
    pub fn yaml_path(self) -> &'static str {
        match self {
            Role::Actor => "actor_rollout_ref.actor.profiler",
            Role::Rollout => "actor_rollout_ref.rollout.profiler",
            Role::Ref => "actor_rollout_ref.ref.profiler",
            Role::Critic => "critic.profiler",
            Role::RewardModel => "reward_model.profiler",
        }
    }
}

/// A call into a role's worker, as the reference system annotates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum RoleCall {
    /// Rollout generation.
    GenerateSequences,
    /// Old log-probs under the actor.
    ComputeLogProb,
    /// Log-probs under the frozen reference policy.
    ComputeRefLogProb,
    /// PPO update of the actor.
    UpdateActor,
    /// Critic values.
    ComputeValues,
    /// Critic update.
    UpdateCritic,
    /// Reward-model scores.
    ComputeRmScore,
}

impl RoleCall {
    /// All role calls.
    pub const ALL: [RoleCall; 7] = [
        RoleCall::GenerateSequences,
        RoleCall::ComputeLogProb,
        RoleCall::ComputeRefLogProb,
        RoleCall::UpdateActor,
        RoleCall::ComputeValues,
        RoleCall::UpdateCritic,
        RoleCall::ComputeRmScore,
    ];

    /// The function name (`generate_sequences`, ...), used as the range marker name.
    pub fn function_name(self) -> &'static str {
        match self {
            RoleCall::GenerateSequences => "generate_sequences",
            RoleCall::ComputeLogProb => "compute_log_prob",
            RoleCall::ComputeRefLogProb => "compute_ref_log_prob",
            RoleCall::UpdateActor => "update_actor",
            RoleCall::ComputeValues => "compute_values",
            RoleCall::UpdateCritic => "update_critic",
            RoleCall::ComputeRmScore => "compute_rm_score",
        }
    }

    /// The annotated role name (`rollout_generate`, ...), used as the discrete-mode directory.
    pub fn annotated_name(self) -> &'static str {
        match self {
            RoleCall::GenerateSequences => "rollout_generate",
            RoleCall::ComputeLogProb => "actor_compute_log_prob",
            RoleCall::ComputeRefLogProb => "ref_compute_log_prob",
            RoleCall::UpdateActor => "actor_update",
            RoleCall::ComputeValues => "compute_values",
            RoleCall::UpdateCritic => "critic_update",
            RoleCall::ComputeRmScore => "compute_rm_score",
        }
    }

    /// The role whose `profiler` block governs this call.
    pub fn role(self) -> Role {
        match self {
            RoleCall::GenerateSequences => Role::Rollout,
            RoleCall::ComputeLogProb | RoleCall::UpdateActor => Role::Actor,
            RoleCall::ComputeRefLogProb => Role::Ref,
            RoleCall::ComputeValues | RoleCall::UpdateCritic => Role::Critic,
            RoleCall::ComputeRmScore => Role::RewardModel,
        }
    }
}

/// `global_tool_config.torch_memory` / `tool_config.torch_memory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TorchMemoryOptions {
    /// Maximum device-trace entries in a snapshot.
    pub trace_alloc_max_entries: u64,
    /// Frames kept per trace entry.
    pub stack_depth: u32,
    /// `memory_snapshot_num_steps`: profiled steps per snapshot window (verl dumps one snapshot
    /// when a window holds this many profiled steps).
    #[serde(default = "one")]
    pub snapshot_num_steps: u64,
}

fn one() -> u64 {
    1
}

impl Default for TorchMemoryOptions {
    fn default() -> Self {
        TorchMemoryOptions {
            trace_alloc_max_entries: 100_000,
            stack_depth: 32,
            snapshot_num_steps: 1,
        }
    }
}

/// Where a job's collections go (`global_profiler.rlprof.layout`, rlprof's own key).
///
/// The names themselves are [`crate::collection::names`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// verl 0.9.1's places and names (the default): `save_path/train/` for end-to-end npu
    /// collections, `save_path/<stage>/` for discrete ones, flat torch traces named as verl's
    /// `build_trace_basename` names them, torch_memory `step{N}` / `steps{a}-{b}` windows.
    #[default]
    Verl,
    /// rlprof's step-grouped layout: `save_path/step{N}/{e2e|<stage>}/...`.
    StepGrouped,
}

impl Layout {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Verl => "verl",
            Layout::StepGrouped => "step_grouped",
        }
    }
}

/// Which role calls a role's schedule sub-samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleScope {
    /// rlprof's own `schedule` (npu, torch_memory, `global_tool_config.schedule`): every call of
    /// the role, counting its inner iterations.
    #[default]
    EveryCall,
    /// verl's `tool_config.torch.schedule`: only the update stage (`actor_update`,
    /// `critic_update`), counting mini-batches; every other stage is collected in full.
    Update,
    /// verl's `profile_token_start` / `profile_token_end`: only rollout generation, in discrete
    /// mode (verl hands the window to the rollout engine's profiler).
    RolloutDiscrete,
}

/// Per-collection size caps, so that no single stage can write without bound: a collection that
/// reaches one keeps what fits, drops the rest and records an explicit truncation marker. `None`
/// means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// Maximum number of recorded events per collection.
    pub max_events: Option<u64>,
    /// Maximum raw bytes per collection.
    pub max_bytes: Option<u64>,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_events: Some(50_000_000),
            max_bytes: Some(2 << 30),
        }
    }
}

/// Which inner iterations of a role call are recorded, with `torch.profiler.schedule`
/// semantics: the first `skip_first` iterations are skipped, then cycles of `wait` skipped,
/// `warmup` run-but-dropped and `active` recorded iterations follow, `repeat` times
/// (0 = cycles without end). Iterations are counted from 0 within each role call: decode steps
/// of `generate_sequences`, micro-batches of `compute_log_prob` / `compute_ref_log_prob`, and
/// micro- or mini-batches of `update_actor` (see [`Granularity`]).
///
/// ```
/// use rlprof_profiler::plan::{Schedule, IterAction};
/// // decode steps 30..=70 only
/// let s = Schedule { skip_first: 30, wait: 0, warmup: 0, active: 41, repeat: 1 };
/// assert_eq!(s.action(29), IterAction::Skip);
/// assert_eq!(s.action(30), IterAction::Record);
/// assert_eq!(s.action(70), IterAction::Record);
/// assert_eq!(s.action(71), IterAction::Skip);
/// assert_eq!(s.recorded_in(100), (30..=70).collect::<Vec<_>>());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Iterations skipped before the first cycle.
    pub skip_first: u64,
    /// Skipped iterations at the start of each cycle.
    pub wait: u64,
    /// Iterations run with the recorder on but their records dropped.
    pub warmup: u64,
    /// Recorded iterations per cycle (>= 1).
    pub active: u64,
    /// Number of cycles; 0 = unlimited.
    pub repeat: u64,
}

/// What happens to one inner iteration under a [`Schedule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IterAction {
    /// Not recorded (the recorder is paused).
    Skip,
    /// Recorded and then dropped (warms caches and buffers; nothing is written).
    Warmup,
    /// Recorded.
    Record,
}

impl Schedule {
    /// The action for iteration `i` (0-based).
    pub fn action(&self, i: u64) -> IterAction {
        if i < self.skip_first {
            return IterAction::Skip;
        }
        let cycle = self.wait + self.warmup + self.active;
        let j = i - self.skip_first;
        if cycle == 0 || (self.repeat > 0 && j / cycle >= self.repeat) {
            return IterAction::Skip;
        }
        match j % cycle {
            k if k < self.wait => IterAction::Skip,
            k if k < self.wait + self.warmup => IterAction::Warmup,
            _ => IterAction::Record,
        }
    }

    /// Whether iteration `i` is the first recorded iteration of a window (a cycle's run of
    /// recorded iterations; verl's discrete torch update writes one trace per window).
    pub fn starts_window(&self, i: u64) -> bool {
        let cycle = self.wait + self.warmup + self.active;
        self.action(i) == IterAction::Record
            && cycle > 0
            && (i - self.skip_first) % cycle == self.wait + self.warmup
    }

    /// The first recorded iteration (the first window's first), if any is.
    pub fn first_recorded(&self) -> Option<u64> {
        let i = self.skip_first + self.wait + self.warmup;
        (self.action(i) == IterAction::Record).then_some(i)
    }

    /// The iterations recorded out of the first `n`.
    pub fn recorded_in(&self, n: u64) -> Vec<u64> {
        (0..n)
            .filter(|&i| self.action(i) == IterAction::Record)
            .collect()
    }
}

/// The unit a schedule counts for `update_actor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// Each micro-batch (forward + backward of `ppo_micro_batch_size_per_gpu` samples).
    #[default]
    MicroBatch,
    /// Each mini-batch (one optimizer step).
    MiniBatch,
}

impl Granularity {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::MicroBatch => "micro_batch",
            Granularity::MiniBatch => "mini_batch",
        }
    }
}

/// A kind of inner iteration that instrumented code marks with [`crate::iteration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IterKind {
    /// One decode step of `generate_sequences` (the prefill is not an iteration).
    DecodeStep,
    /// One micro-batch.
    MicroBatch,
    /// One mini-batch.
    MiniBatch,
}

impl IterKind {
    /// The name of the iteration's marker range (`decode_step`, `micro_batch`, `mini_batch`).
    pub fn as_str(self) -> &'static str {
        match self {
            IterKind::DecodeStep => "decode_step",
            IterKind::MicroBatch => "micro_batch",
            IterKind::MiniBatch => "mini_batch",
        }
    }

    /// The iteration kind a schedule counts for `call` under `granularity`.
    pub fn counted_for(call: RoleCall, granularity: Granularity) -> Option<IterKind> {
        match call {
            RoleCall::GenerateSequences => Some(IterKind::DecodeStep),
            RoleCall::UpdateActor | RoleCall::UpdateCritic => Some(match granularity {
                Granularity::MicroBatch => IterKind::MicroBatch,
                Granularity::MiniBatch => IterKind::MiniBatch,
            }),
            RoleCall::ComputeLogProb
            | RoleCall::ComputeRefLogProb
            | RoleCall::ComputeValues
            | RoleCall::ComputeRmScore => Some(IterKind::MicroBatch),
        }
    }
}

/// The effective settings of one role after inheritance and validation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolePlan {
    /// `profiler.enable`.
    pub enable: bool,
    /// `profiler.all_ranks`.
    pub all_ranks: bool,
    /// Ranks that collect, resolved (`all_ranks` expanded); empty = none.
    pub ranks: Vec<u32>,
    /// Tool of this role.
    pub tool: Tool,
    /// `tool_config.npu.level` (level0 for other tools).
    pub level: Level,
    /// `tool_config.npu.export_type` (db for other tools, where it has no effect).
    pub export_type: ExportType,
    /// Resolved contents: never empty when enabled (`[]` means `[npu, cpu]`).
    pub contents: Contents,
    /// Parse automatically after each collection.
    pub analysis: bool,
    /// One collection per role call instead of per step.
    pub discrete: bool,
    /// Root directory for this role's collections.
    pub save_path: PathBuf,
    /// `tool_config.torch.step_start` / `step_end` (informational; steps come from the global list).
    pub torch_step_start: i64,
    /// See `torch_step_start`.
    pub torch_step_end: i64,
    /// torch_memory options.
    pub torch_memory: TorchMemoryOptions,
    /// Size caps.
    pub caps: Caps,
    /// Inner-iteration schedule of this role's calls (None = every iteration).
    pub schedule: Option<Schedule>,
    /// What the schedule counts in `update_actor`.
    pub granularity: Granularity,
    /// Which calls the schedule sub-samples.
    pub schedule_scope: ScheduleScope,
}

impl RolePlan {
    /// Whether this role collects on `rank`.
    pub fn collects_on(&self, rank: u32) -> bool {
        self.enable && self.ranks.contains(&rank)
    }

    /// The schedule that gates `call` (one of this role's calls) and what it counts, if any:
    /// verl's torch schedule only for the update stage, verl's token window only for discrete
    /// rollout generation, rlprof's own schedule for every call.
    pub fn schedule_for(&self, call: RoleCall) -> Option<(Schedule, IterKind)> {
        let s = self.schedule?;
        let applies = match self.schedule_scope {
            ScheduleScope::EveryCall => true,
            ScheduleScope::Update => matches!(call, RoleCall::UpdateActor | RoleCall::UpdateCritic),
            ScheduleScope::RolloutDiscrete => self.discrete && call == RoleCall::GenerateSequences,
        };
        if !applies {
            return None;
        }
        Some((s, IterKind::counted_for(call, self.granularity)?))
    }
}

/// nsys global options (`global_profiler.global_tool_config.nsys`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NsysOptions {
    /// `discrete`.
    pub discrete: bool,
    /// `controller_nsight_options` as given.
    pub controller_nsight_options: BTreeMap<String, serde_json::Value>,
    /// `worker_nsight_options` as given.
    pub worker_nsight_options: BTreeMap<String, serde_json::Value>,
}

/// The whole collection plan of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfilePlan {
    /// The chosen tool (None only when nothing collects).
    pub tool: Option<Tool>,
    /// Why this tool was chosen (`global_profiler.tool`, or inferred from a tool_config block).
    pub tool_source: String,
    /// Listed steps, sorted, deduplicated, 1-based.
    pub steps: Vec<u64>,
    /// `profile_continuous_steps`.
    pub profile_continuous_steps: bool,
    /// `global_profiler.save_path`.
    pub save_path: PathBuf,
    /// `trainer.nnodes * trainer.n_gpus_per_node`.
    pub world_size: u32,
    /// Steps grouped into collections: `[[1,2],[5]]` when continuous, `[[1],[2],[5]]` otherwise;
    /// for `torch_memory`, windows of `memory_snapshot_num_steps` profiled steps.
    pub step_groups: Vec<Vec<u64>>,
    /// Where collections go (`global_profiler.rlprof.layout`).
    pub layout: Layout,
    /// Effective settings per role present in the job.
    pub roles: BTreeMap<Role, RolePlan>,
    /// nsys global options.
    pub nsys: NsysOptions,
    /// Global torch_memory options.
    pub torch_memory: TorchMemoryOptions,
    /// Non-fatal findings to print at start-up (one line each).
    pub warnings: Vec<String>,
    /// verl 0.9.1 settings beyond the user document, and where verl would behave differently.
    pub verl: VerlSettings,
}

/// verl 0.9.1's profiler keys that the user document does not have
/// (`verl/utils/profiler/config.py`), resolved per role.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct VerlSettings {
    /// `relocate_results` per role (accepted; rlprof writes every collection under save_path,
    /// so there is nothing to move).
    pub relocate_results: BTreeMap<Role, bool>,
    /// `finish_hook_cmd` per role that has one, with the ranks that run it.
    pub finish_hooks: BTreeMap<Role, FinishHook>,
    /// Problems that stop `train` before any work but not `config check` (a tool rlprof cannot
    /// collect with yet).
    pub start_errors: Vec<String>,
    /// Where verl 0.9.1 would behave differently from this plan (the user document wins).
    pub differences: Vec<String>,
    /// `global_profiler.tool: precision_debugger`: what msprobe-layout dumps to write (None: the
    /// tool is not chosen, or it dumps nothing, as verl does without a `config_path`).
    pub precision: Option<PrecisionPlan>,
}

/// verl 0.9.1's `precision_debugger` tool, resolved: msprobe-layout dumps of the listed stages
/// in the steps of `global_profiler.steps`, under `save_path/step_{global_step}/{stage}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrecisionPlan {
    /// The dump root (`global_profiler.save_path`).
    pub save_path: PathBuf,
    /// The steps whose stages are dumped (`global_profiler.steps`).
    pub steps: Vec<u64>,
    /// The stages dumped, each with the msprobe configuration its role resolved to.
    pub stages: Vec<PrecisionStage>,
}

/// One dumped stage (verl's annotated role name) and its msprobe configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrecisionStage {
    /// The role call dumped.
    pub call: RoleCall,
    /// Its msprobe `config.json`, read and checked.
    pub msprobe: MsprobeConfig,
}

/// What rlprof honours of msprobe's `config.json` (mindstudio-probe 26.2, PyTorch dumper).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MsprobeConfig {
    /// The file it was read from.
    pub path: PathBuf,
    /// `task`: `statistics` (per-tensor Max/Min/Mean/Norm) or `tensor` (statistics plus the data).
    pub task: MsprobeTask,
    /// `level`: `L0` (modules), `L1` (APIs) or `mix` (both).
    pub level: MsprobeLevel,
    /// `rank`: ranks that dump (empty: all).
    pub ranks: Vec<u32>,
    /// `step`: msprobe's own step numbers that dump (empty: all). verl never advances msprobe's
    /// step, so every dump is msprobe step 0.
    pub steps: Vec<u32>,
    /// `<task>.scope`: a `[first, last]` range of full API or module names (empty: no range).
    pub scope: Vec<String>,
    /// `<task>.list`: name fragments, one of which a dumped name must contain (empty: all).
    pub list: Vec<String>,
    /// `<task>.data_mode`: `all`, or some of `forward`, `backward`, `input`, `output`.
    pub data_mode: Vec<String>,
    /// `<task>.summary_mode`: `statistics` (the only one rlprof writes).
    pub summary_mode: String,
}

/// msprobe's `task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MsprobeTask {
    /// Statistics of every input and output tensor.
    Statistics,
    /// Statistics plus every tensor's data under `dump_tensor_data/`.
    Tensor,
}

/// msprobe's `level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MsprobeLevel {
    /// Modules (layers, attention, MLP).
    L0,
    /// APIs (functional and tensor ops).
    L1,
    /// Modules and APIs.
    #[serde(rename = "mix")]
    Mix,
}

impl MsprobeLevel {
    /// As `config.json` and `dump.json` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            MsprobeLevel::L0 => "L0",
            MsprobeLevel::L1 => "L1",
            MsprobeLevel::Mix => "mix",
        }
    }
}

impl MsprobeTask {
    /// As `config.json` and `dump.json` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            MsprobeTask::Statistics => "statistics",
            MsprobeTask::Tensor => "tensor",
        }
    }
}

/// verl's `finish_hook_cmd`: a shell command run once after the last profiled step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FinishHook {
    /// The command (`sh -c`).
    pub cmd: String,
    /// Ranks that run it (`finish_hook_all_ranks`, `finish_hook_ranks`, else the profiled ranks).
    pub ranks: Vec<u32>,
}

impl ProfilePlan {
    /// A plan that never collects (for programs that do not profile).
    pub fn disabled(world_size: u32) -> ProfilePlan {
        ProfilePlan {
            tool: None,
            tool_source: "no steps listed".into(),
            steps: vec![],
            profile_continuous_steps: false,
            save_path: PathBuf::from("outputs/profile"),
            world_size,
            step_groups: vec![],
            layout: Layout::default(),
            roles: BTreeMap::new(),
            nsys: NsysOptions::default(),
            torch_memory: TorchMemoryOptions::default(),
            warnings: vec![],
            verl: VerlSettings::default(),
        }
    }

    /// The step group containing `step`, if it is profiled.
    pub fn group_of(&self, step: u64) -> Option<&[u64]> {
        self.step_groups
            .iter()
            .find(|g| g.contains(&step))
            .map(|g| g.as_slice())
    }

    /// The settings of `role`, if the role is present.
    pub fn role(&self, role: Role) -> Option<&RolePlan> {
        self.roles.get(&role)
    }
}
