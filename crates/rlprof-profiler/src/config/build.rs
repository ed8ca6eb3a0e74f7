//! Validation of the profiler sections and resolution into a [`ProfilePlan`].
//!
//! Only `global_profiler` and each role's `profiler` block are checked for unknown keys; every
//! other section of a verl document (`data`, `algorithm`, `trainer`, `actor_rollout_ref.model`,
//! ...) belongs to the trainer and passes through. All problems are collected and returned
//! together as [`ProfilerError::Config`].

use super::tree::{Map, Node};
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::Written;
use super::schema::*;
use super::values::Ctx;
use crate::error::ProfilerError;
use crate::plan::{
    Caps, Content, Contents, ExportType, FinishHook, Granularity, Level, NsysOptions, ProfilePlan,
    Role, RolePlan, Schedule, Tool, TorchMemoryOptions, VerlSettings,
};

/// Settings of `global_profiler` after validation.
struct Global {
    tool: Option<Tool>,
    /// `tool` was written (possibly invalid, already reported).
    tool_given: bool,
    steps: Vec<u64>,
    continuous: bool,
    save_path: String,
    nsys: NsysOptions,
    torch_memory: TorchMemoryOptions,
    caps: Caps,
    /// `global_tool_config.schedule`: the default schedule of every role.
    schedule: Option<Schedule>,
    /// verl's hook keys (inherited by every role).
    hooks: Hooks,
    /// `tool: precision_debugger` was chosen.
    precision_debugger: bool,
}

/// verl's `relocate_results` and `finish_hook_*` keys; `None` = not set.
#[derive(Debug, Clone, Default)]
struct Hooks {
    relocate_results: Option<bool>,
    cmd: Option<Option<String>>,
    all_ranks: Option<bool>,
    ranks: Option<Vec<u32>>,
}

impl Hooks {
    fn over(&self, base: &Hooks) -> Hooks {
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
struct RawRole {
    tool: Option<Tool>,
    enable: Option<bool>,
    all_ranks: Option<bool>,
    ranks: Option<Vec<u32>>,
    save_path: Option<String>,
    npu_level: Option<Level>,
    npu_export_type: Option<ExportType>,
    npu_contents: Option<Vec<Content>>,
    npu_analysis: Option<bool>,
    npu_discrete: Option<bool>,
    torch_contents: Option<Vec<Content>>,
    torch_step_start: Option<i64>,
    torch_step_end: Option<i64>,
    torch_discrete: Option<bool>,
    nsys_discrete: Option<bool>,
    tm_entries: Option<u64>,
    tm_depth: Option<u32>,
    max_events: Option<Option<u64>>,
    max_bytes: Option<Option<u64>>,
    /// `tool_config.<tool>.schedule` / `granularity` per tool (not inherited: a schedule counts
    /// the iterations of its own role's calls).
    schedules: BTreeMap<Tool, Schedule>,
    granularity: BTreeMap<Tool, Granularity>,
    /// Tool names this block chose explicitly, with the YAML path that did (for inference).
    written: Vec<(Tool, String)>,
    /// Tools whose schedule is a `profile_token_start/end` window (rollout decode steps).
    token_window: std::collections::BTreeSet<Tool>,
    /// verl's hook keys.
    hooks: Hooks,
}

impl RawRole {
    /// Keys set here win; keys not set take `base`'s value.
    fn over(&self, base: &RawRole) -> RawRole {
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
            max_events: self.max_events.or(base.max_events),
            max_bytes: self.max_bytes.or(base.max_bytes),
            schedules: self.schedules.clone(),
            granularity: self.granularity.clone(),
            written: self.written.clone(),
            token_window: self.token_window.clone(),
            hooks: self.hooks.over(&base.hooks),
        }
    }
}

/// Validates the profiler sections of a merged document and resolves them into a plan;
/// `written` says which keys the user wrote (rollout and ref follow the actor on the others).
pub(super) fn build_plan(doc: &Node, written: &Written) -> Result<ProfilePlan, ProfilerError> {
    let mut cx = Ctx::default();
    let mut verl = VerlSettings::default();
    let empty = Map::new();
    let root = match doc {
        Node::Null => &empty,
        Node::Map(m) => m,
        other => {
            return Err(ProfilerError::Config(vec![format!(
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

    if !cx.errors.is_empty() {
        return Err(ProfilerError::Config(cx.errors));
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
            super::values::suggest(k, PROFILER_SECTIONS).map(|s| {
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

fn world_size(cx: &mut Ctx, root: &Map) -> u32 {
    let Some(trainer) = cx.map(root.get("trainer"), "trainer") else {
        return 1;
    };
    let mut read = |key: &str| -> u32 {
        match Ctx::get(trainer, key) {
            None => 1,
            Some(v) => match super::values::as_int(v) {
                Some(i) if i > 0 && i <= u32::MAX as i64 => i as u32,
                _ => {
                    cx.err(
                        &format!("trainer.{key}"),
                        format!("{} is not valid; expected an integer > 0", v.show()),
                    );
                    1
                }
            },
        }
    };
    let n = read("nnodes");
    let g = read("n_gpus_per_node");
    n.saturating_mul(g)
}

fn parse_global(cx: &mut Ctx, root: &Map, world: u32) -> Global {
    let mut g = Global {
        tool: None,
        tool_given: false,
        steps: vec![],
        continuous: false,
        save_path: "outputs/profile".into(),
        nsys: default_nsys(),
        torch_memory: TorchMemoryOptions::default(),
        caps: Caps::default(),
        schedule: None,
        hooks: Hooks::default(),
        precision_debugger: false,
    };
    let p = "global_profiler";
    let Some(m) = cx.map(root.get(p), p) else {
        return g;
    };
    cx.check_keys(m, p, GLOBAL_KEYS);
    g.precision_debugger = m.get("tool").and_then(Node::as_str) == Some(PRECISION_DEBUGGER);
    g.tool = if g.precision_debugger {
        None
    } else {
        cx.tool(m, "tool", p)
    };
    g.hooks = parse_hooks(cx, m, p, world);
    g.tool_given = Ctx::get(m, "tool").is_some();
    g.steps = parse_steps(cx, m.get("steps"));
    g.continuous = cx.bool(m, "profile_continuous_steps", p).unwrap_or(false);
    if let Some(s) = cx.string(m, "save_path", p) {
        if s.trim().is_empty() {
            cx.err(
                "global_profiler.save_path",
                "'' is empty; give the directory that receives the collections (default outputs/profile)",
            );
        }
        g.save_path = s;
    }
    if let Some(c) = cx.cap(m, "max_events", p) {
        g.caps.max_events = c;
    }
    if let Some(c) = cx.cap(m, "max_bytes", p) {
        g.caps.max_bytes = c;
    }
    let gp = "global_profiler.global_tool_config";
    if let Some(gtc) = cx.map(m.get("global_tool_config"), gp) {
        cx.check_keys(gtc, gp, GLOBAL_TOOL_KEYS);
        g.schedule = parse_schedule(cx, gtc, gp);
        let np = format!("{gp}.nsys");
        if let Some(n) = cx.map(gtc.get("nsys"), &np) {
            cx.check_keys(n, &np, NSYS_GLOBAL_KEYS);
            if let Some(d) = cx.bool(n, "discrete", &np) {
                g.nsys.discrete = d;
            }
            for (key, target) in [
                (
                    "controller_nsight_options",
                    &mut g.nsys.controller_nsight_options,
                ),
                ("worker_nsight_options", &mut g.nsys.worker_nsight_options),
            ] {
                let kp = format!("{np}.{key}");
                if let Some(opts) = cx.map(n.get(key), &kp) {
                    for (k, v) in opts {
                        target.insert(k.clone(), v.to_json());
                    }
                }
            }
        }
        let tp = format!("{gp}.torch_memory");
        if let Some(t) = cx.map(gtc.get("torch_memory"), &tp) {
            cx.check_keys(t, &tp, TORCH_MEMORY_KEYS);
            if let Some(e) = cx.pos_int(t, "trace_alloc_max_entries", &tp) {
                g.torch_memory.trace_alloc_max_entries = e;
            }
            if let Some(d) = pos_u32(cx, t, "stack_depth", &tp) {
                g.torch_memory.stack_depth = d;
            }
            cx.pos_int(t, "memory_snapshot_num_steps", &tp);
        }
        let pp = format!("{gp}.precision_debugger");
        if let Some(b) = cx.map(gtc.get("precision_debugger"), &pp) {
            check_precision_debugger(cx, b, &pp);
        }
    }
    g
}

/// The tool name verl 0.9.1 has and rlprof cannot collect with yet.
const PRECISION_DEBUGGER: &str = "precision_debugger";

fn check_precision_debugger(cx: &mut Ctx, b: &Map, p: &str) {
    cx.check_keys(b, p, PRECISION_DEBUGGER_KEYS);
    cx.string(b, "config_path", p);
    cx.bool(b, "strict", p);
    for key in ["steps", "stages"] {
        if let Some(v) = Ctx::get(b, key)
            && v.as_list().is_none()
        {
            cx.err(
                &format!("{p}.{key}"),
                format!(
                    "{} is {}, expected a list or null",
                    v.show(),
                    super::values::kind(v)
                ),
            );
        }
    }
}

/// verl's `relocate_results`, `finish_hook_cmd`, `finish_hook_all_ranks`, `finish_hook_ranks`.
fn parse_hooks(cx: &mut Ctx, m: &Map, path: &str, world: u32) -> Hooks {
    let cmd = match m.get("finish_hook_cmd") {
        None => None,
        Some(Node::Null) => Some(None),
        Some(_) => cx.string(m, "finish_hook_cmd", path).map(Some),
    };
    Hooks {
        relocate_results: cx.bool(m, "relocate_results", path),
        cmd,
        all_ranks: cx.bool(m, "finish_hook_all_ranks", path),
        ranks: rank_list(cx, m, "finish_hook_ranks", path, world),
    }
}

/// A role's finish hook: its command and ranks (verl: `finish_hook_all_ranks`, else
/// `finish_hook_ranks`, else the profiled ranks).
fn resolve_hooks(
    cx: &mut Ctx,
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

fn pos_u32(cx: &mut Ctx, m: &Map, key: &str, path: &str) -> Option<u32> {
    let v = cx.pos_int(m, key, path)?;
    match u32::try_from(v) {
        Ok(v) => Some(v),
        Err(_) => {
            cx.err(
                &format!("{path}.{key}"),
                format!(
                    "{v} is too large; expected an integer between 1 and {}",
                    u32::MAX
                ),
            );
            None
        }
    }
}

fn default_nsys() -> NsysOptions {
    let s = |v: &str| serde_json::Value::String(v.to_string());
    let mut controller = BTreeMap::new();
    controller.insert("trace".to_string(), s("cuda,nvtx,cublas,ucx"));
    controller.insert("cuda-memory-usage".to_string(), s("true"));
    controller.insert("cuda-graph-trace".to_string(), s("graph"));
    let mut worker = controller.clone();
    worker.insert("capture-range".to_string(), s("cudaProfilerApi"));
    worker.insert("capture-range-end".to_string(), serde_json::Value::Null);
    worker.insert("kill".to_string(), s("none"));
    NsysOptions {
        discrete: false,
        controller_nsight_options: controller,
        worker_nsight_options: worker,
    }
}

fn parse_steps(cx: &mut Ctx, v: Option<&Node>) -> Vec<u64> {
    let p = "global_profiler.steps";
    let v = match v {
        None | Some(Node::Null) => return vec![],
        Some(v) if super::values::is_interp(v) => return vec![],
        Some(v) => v,
    };
    let Node::List(seq) = v else {
        let example = match super::values::as_int(v) {
            Some(i) => format!("[{i}]"),
            None => "[1, 2, 5]".to_string(),
        };
        cx.err(
            p,
            format!(
                "{} is {}, but steps must be a list of 1-based step numbers or null; write steps: {example} (on the command line: global_profiler.steps={})",
                v.show(),
                super::values::kind(v),
                example.replace(' ', "")
            ),
        );
        return vec![];
    };
    let mut out = Vec::new();
    for (i, item) in seq.iter().enumerate() {
        match super::values::as_int(item) {
            Some(s) if s >= 1 => out.push(s as u64),
            _ => cx.err(
                &format!("{p}[{i}]"),
                format!(
                    "{} is not a valid step; steps are integers >= 1 (the trainer counts steps from 1)",
                    item.show()
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn parse_ranks(cx: &mut Ctx, m: &Map, path: &str, world: u32) -> Option<Vec<u32>> {
    rank_list(cx, m, "ranks", path, world)
}

/// A list of ranks below the world size (`ranks`, `finish_hook_ranks`).
fn rank_list(cx: &mut Ctx, m: &Map, key: &str, path: &str, world: u32) -> Option<Vec<u32>> {
    let v = Ctx::get(m, key)?;
    let p = format!("{path}.{key}");
    let Node::List(seq) = v else {
        cx.err(
            &p,
            format!(
                "{} is {}, expected a list of ranks in 0..{} (e.g. [0]) or all_ranks: true",
                v.show(),
                super::values::kind(v),
                world.saturating_sub(1)
            ),
        );
        return None;
    };
    let mut out = Vec::new();
    for (i, item) in seq.iter().enumerate() {
        let ip = format!("{p}[{i}]");
        match super::values::as_int(item) {
            Some(r) if r >= 0 && r < world as i64 => out.push(r as u32),
            Some(r) if r >= 0 => cx.err(
                &ip,
                format!(
                    "rank {r} is >= world size {world} (trainer.nnodes * trainer.n_gpus_per_node); valid ranks are 0..{}",
                    world - 1
                ),
            ),
            _ => cx.err(
                &ip,
                format!(
                    "{} is not a valid rank; valid ranks are integers 0..{} (world size {world})",
                    item.show(),
                    world - 1
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Whether a tool_config block has at least one key set by the user (not `_target_` or `name`,
/// not null, and written by the user rather than by verl's own files).
fn block_written(m: &Map, path: &str, written: &Written) -> bool {
    m.iter().any(|(k, v)| {
        let key = k.as_str();
        !matches!(key, "_target_" | "name")
            && !v.is_null()
            && !super::values::is_interp(v)
            && written.touches(&format!("{path}.{key}"))
    })
}

/// The keys of a role's profiler block that the user wrote (recursively).
fn only_written(m: &Map, path: &str, written: &Written) -> Map {
    let mut out = Map::new();
    for (k, v) in m {
        let p = format!("{path}.{k}");
        if !written.touches(&p) {
            continue;
        }
        match v {
            Node::Map(inner) => {
                out.insert(k.clone(), Node::Map(only_written(inner, &p, written)));
            }
            other => {
                out.insert(k.clone(), other.clone());
            }
        }
    }
    out
}

/// Records where verl 0.9.1 would not let rollout/ref follow the actor (its files set
/// `enable`/`all_ranks`/`ranks` of ref, which the user did not write).
fn note_verl_difference(verl: &mut VerlSettings, role: Role, all: &Map, mine: &Map) {
    for key in ["enable", "all_ranks", "ranks"] {
        if mine.contains_key(key) {
            continue;
        }
        if let Some(v) = all.get(key).filter(|v| !v.is_null())
            && role == Role::Ref
        {
            verl.differences.push(format!(
                    "{}.{key}: follows the actor here, as the user document says; verl 0.9.1 would use its own {}",
                    role.yaml_path(),
                    v.show()
                ));
        }
    }
}

fn parse_role(cx: &mut Ctx, m: &Map, path: &str, world: u32, written: &Written) -> RawRole {
    cx.check_keys(m, path, ROLE_KEYS);
    let chose_debugger = m.get("tool").and_then(Node::as_str) == Some(PRECISION_DEBUGGER);
    let mut r = RawRole {
        tool: if chose_debugger {
            None
        } else {
            cx.tool(m, "tool", path)
        },
        enable: cx.bool(m, "enable", path),
        all_ranks: cx.bool(m, "all_ranks", path),
        ranks: parse_ranks(cx, m, path, world),
        save_path: cx.string(m, "save_path", path),
        max_events: cx.cap(m, "max_events", path),
        max_bytes: cx.cap(m, "max_bytes", path),
        hooks: parse_hooks(cx, m, path, world),
        ..RawRole::default()
    };
    if let Some(s) = &r.save_path
        && s.trim().is_empty()
    {
        cx.err(
            &format!("{path}.save_path"),
            "'' is empty; give a directory or leave it unset",
        );
    }
    if let Some(t) = r.tool
        && written.touches(&format!("{path}.tool"))
    {
        r.written.push((t, format!("{path}.tool")));
    }
    let tp = format!("{path}.tool_config");
    let Some(tc) = cx.map(m.get("tool_config"), &tp) else {
        return r;
    };
    cx.check_keys(tc, &tp, TOOL_CONFIG_KEYS);

    let p = format!("{tp}.npu");
    if let Some(b) = cx.map(tc.get("npu"), &p) {
        cx.check_keys(b, &p, NPU_KEYS);
        r.npu_level = cx.level(b, "level", &p);
        r.npu_export_type = cx.export_type(b, "export_type", &p);
        r.npu_contents = cx.contents(b, "contents", &p, Tool::Npu);
        r.npu_analysis = cx.bool(b, "analysis", &p);
        r.npu_discrete = cx.bool(b, "discrete", &p);
        read_schedule(cx, b, &p, Tool::Npu, &mut r);
        token_window(cx, b, &p, Tool::Npu, &mut r);
        if block_written(b, &p, written) {
            r.written.push((Tool::Npu, p.clone()));
        }
    }
    let p = format!("{tp}.torch");
    if let Some(b) = cx.map(tc.get("torch"), &p) {
        cx.check_keys(b, &p, TORCH_KEYS);
        r.torch_contents = cx.contents(b, "contents", &p, Tool::Torch);
        r.torch_step_start = cx.int(b, "step_start", &p);
        r.torch_step_end = cx.int(b, "step_end", &p);
        r.torch_discrete = cx.bool(b, "discrete", &p);
        torch_schedule(cx, b, &p, &mut r);
        token_window(cx, b, &p, Tool::Torch, &mut r);
        if block_written(b, &p, written) {
            r.written.push((Tool::Torch, p.clone()));
        }
    }
    let p = format!("{tp}.nsys");
    if let Some(b) = cx.map(tc.get("nsys"), &p) {
        cx.check_keys(b, &p, NSYS_ROLE_KEYS);
        r.nsys_discrete = cx.bool(b, "discrete", &p);
        if block_written(b, &p, written) {
            r.written.push((Tool::Nsys, p.clone()));
        }
    }
    let p = format!("{tp}.torch_memory");
    if let Some(b) = cx.map(tc.get("torch_memory"), &p) {
        cx.check_keys(b, &p, ROLE_TORCH_MEMORY_KEYS);
        read_schedule(cx, b, &p, Tool::TorchMemory, &mut r);
        r.tm_entries = cx.pos_int(b, "trace_alloc_max_entries", &p);
        r.tm_depth = pos_u32(cx, b, "stack_depth", &p);
        cx.pos_int(b, "memory_snapshot_num_steps", &p);
        if block_written(b, &p, written) {
            r.written.push((Tool::TorchMemory, p.clone()));
        }
    }
    let p = format!("{tp}.precision_debugger");
    if let Some(b) = cx.map(tc.get("precision_debugger"), &p) {
        check_precision_debugger(cx, b, &p);
    }
    r
}

/// verl's `profile_token_start` / `profile_token_end`: the rollout decode steps (response-token
/// indices, end exclusive) to collect, as a schedule over the role's decode steps.
fn token_window(cx: &mut Ctx, b: &Map, path: &str, tool: Tool, r: &mut RawRole) {
    let mut read = |key: &str| match cx.int(b, key, path) {
        Some(v) if v < 0 => {
            cx.err(
                &format!("{path}.{key}"),
                format!("{v} is negative; give a token index >= 0 or null"),
            );
            None
        }
        other => other.map(|v| v as u64),
    };
    let start = read("profile_token_start");
    let end = read("profile_token_end");
    if start.is_none() && end.is_none() {
        return;
    }
    if let (Some(s), Some(e)) = (start, end)
        && e <= s
    {
        cx.err(
            &format!("{path}.profile_token_end"),
            format!("{e} is not after profile_token_start {s}; the window is [start, end)"),
        );
        return;
    }
    let skip = start.unwrap_or(0);
    let active = end.map_or(u64::MAX - skip, |e| e - skip);
    r.schedules.insert(
        tool,
        Schedule {
            skip_first: skip,
            wait: 0,
            warmup: 0,
            active,
            repeat: 1,
        },
    );
    r.token_window.insert(tool);
}

/// verl's `tool_config.torch.schedule`: `active <= 0` = off; counts update mini-batches; in
/// end-to-end mode (`discrete: false`) only `active` counts (skip_first, wait, warmup and
/// repeat are ignored, as verl ignores them).
fn torch_schedule(cx: &mut Ctx, b: &Map, path: &str, r: &mut RawRole) {
    let p = format!("{path}.schedule");
    let Some(s) = cx.map(b.get("schedule"), &p) else {
        read_granularity(cx, b, path, Tool::Torch, r);
        return;
    };
    cx.check_keys(s, &p, SCHEDULE_KEYS);
    let mut field = |key: &str| match cx.int(s, key, &p) {
        Some(v) if v < 0 && key != "active" => {
            cx.err(
                &format!("{p}.{key}"),
                format!("{v} is negative; give a count >= 0"),
            );
            0
        }
        Some(v) => v,
        None => 0,
    };
    let (skip_first, wait, warmup, active, repeat) = (
        field("skip_first"),
        field("wait"),
        field("warmup"),
        field("active"),
        field("repeat"),
    );
    read_granularity(cx, b, path, Tool::Torch, r);
    if active <= 0 {
        return;
    }
    let discrete = r.torch_discrete.unwrap_or(false);
    let sched = if discrete {
        Schedule {
            skip_first: skip_first as u64,
            wait: wait as u64,
            warmup: warmup as u64,
            active: active as u64,
            repeat: repeat as u64,
        }
    } else {
        Schedule {
            skip_first: 0,
            wait: 0,
            warmup: 0,
            active: active as u64,
            repeat: 1,
        }
    };
    r.schedules.insert(Tool::Torch, sched);
    r.granularity
        .entry(Tool::Torch)
        .or_insert(Granularity::MiniBatch);
}

/// Reads `schedule` / `granularity` of one tool block into `r`.
fn read_schedule(cx: &mut Ctx, b: &Map, path: &str, tool: Tool, r: &mut RawRole) {
    if let Some(s) = parse_schedule(cx, b, path) {
        r.schedules.insert(tool, s);
    }
    read_granularity(cx, b, path, tool, r);
}

fn read_granularity(cx: &mut Ctx, b: &Map, path: &str, tool: Tool, r: &mut RawRole) {
    if let Some(g) = cx.string(b, "granularity", path) {
        match g.as_str() {
            "micro_batch" => {
                r.granularity.insert(tool, Granularity::MicroBatch);
            }
            "mini_batch" => {
                r.granularity.insert(tool, Granularity::MiniBatch);
            }
            other => cx.err(
                &format!("{path}.granularity"),
                format!("unknown granularity {other:?}; valid: micro_batch, mini_batch"),
            ),
        }
    }
}

/// Parses `m.schedule` (absent or null = none). `active` must be >= 1.
fn parse_schedule(cx: &mut Ctx, m: &Map, parent: &str) -> Option<Schedule> {
    let p = format!("{parent}.schedule");
    let s = cx.map(m.get("schedule"), &p)?;
    cx.check_keys(s, &p, SCHEDULE_KEYS);
    let mut field = |key: &str, dflt: u64| match cx.int(s, key, &p) {
        Some(v) if v < 0 => {
            cx.err(
                &format!("{p}.{key}"),
                format!("{v} is negative; give a count >= 0"),
            );
            dflt
        }
        Some(v) => v as u64,
        None => dflt,
    };
    let sched = Schedule {
        skip_first: field("skip_first", 0),
        wait: field("wait", 0),
        warmup: field("warmup", 0),
        active: field("active", 1),
        repeat: field("repeat", 1),
    };
    if sched.active == 0 {
        cx.err(
            &format!("{p}.active"),
            "0 would record nothing; give the number of iterations to record (>= 1)",
        );
        return None;
    }
    Some(sched)
}

fn resolve(raw: &RawRole, g: &Global, plan_tool: Option<Tool>, world: u32) -> RolePlan {
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
    let contents = match tool {
        Tool::Npu => nonempty(&raw.npu_contents, [Content::Npu, Content::Cpu]),
        Tool::Torch => nonempty(&raw.torch_contents, [Content::Cuda, Content::Cpu]),
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
        },
        caps: Caps {
            max_events: raw.max_events.unwrap_or(g.caps.max_events),
            max_bytes: raw.max_bytes.unwrap_or(g.caps.max_bytes),
        },
        schedule: raw.schedules.get(&tool).copied().or(g.schedule),
        granularity: raw.granularity.get(&tool).copied().unwrap_or_default(),
    }
}
