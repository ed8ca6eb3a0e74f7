//! Validation of the profiler sections and resolution into a [`ProfilePlan`].
//!
//! Only `global_profiler` and each role's `profiler` block are checked for unknown keys; every
//! other section of a verl document (`data`, `algorithm`, `trainer`, `actor_rollout_ref.model`,
//! ...) belongs to the trainer and passes through. All problems are collected and returned
//! together as [`ProfilerError::Config`].

use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::schema::*;
use super::values::{show, Ctx};
use crate::error::ProfilerError;
use crate::plan::{
    Caps, Content, Contents, Granularity, Level, NsysOptions, ProfilePlan, Role, RolePlan,
    Schedule, Tool, TorchMemoryOptions,
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
        }
    }
}

/// Validates the profiler sections of a merged document and resolves them into a plan.
pub fn build_plan(doc: &Value) -> Result<ProfilePlan, ProfilerError> {
    let mut cx = Ctx::default();
    let empty = Mapping::new();
    let root = match doc {
        Value::Null => &empty,
        Value::Mapping(m) => m,
        other => {
            return Err(ProfilerError::Config(vec![format!(
                "<document>: {} is not a mapping; expected a verl config with a global_profiler section",
                show(other)
            )]))
        }
    };

    let world_size = world_size(&mut cx, root);
    let global = parse_global(&mut cx, root);

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
        let raw = match cx.map(block, role.yaml_path()) {
            Some(m) => parse_role(&mut cx, m, role.yaml_path(), world_size),
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

    // Cross-field checks.
    if global.continuous {
        for (role, rp) in &roles {
            if rp.enable && rp.discrete {
                cx.err(
                    "global_profiler.profile_continuous_steps",
                    format!(
                        "true requires end-to-end mode (discrete: false), but {} is enabled in discrete mode (tool_config.{}.discrete: true); set profile_continuous_steps: false or discrete: false",
                        role.yaml_path(),
                        rp.tool.as_str()
                    ),
                );
            }
        }
    }

    if !cx.errors.is_empty() {
        return Err(ProfilerError::Config(cx.errors));
    }

    let mut warnings = Vec::new();
    for (role, rp) in &roles {
        if rp.enable && !rp.all_ranks && rp.ranks.is_empty() {
            let p = role.yaml_path();
            warnings.push(format!(
                "{p}: enable is true but no rank is selected (all_ranks: false, ranks: []), so {} collects nothing; select ranks with {p}.all_ranks=True or {p}.ranks=[0]",
                role.as_str()
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
    })
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

fn world_size(cx: &mut Ctx, root: &Mapping) -> u32 {
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
                        format!("{} is not valid; expected an integer > 0", show(v)),
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

fn parse_global(cx: &mut Ctx, root: &Mapping) -> Global {
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
    };
    let p = "global_profiler";
    let Some(m) = cx.map(root.get(p), p) else {
        return g;
    };
    cx.check_keys(m, p, GLOBAL_KEYS);
    g.tool = cx.tool(m, "tool", p);
    g.tool_given = Ctx::get(m, "tool").is_some();
    g.steps = parse_steps(cx, m.get("steps"));
    g.continuous = cx.bool(m, "profile_continuous_steps", p).unwrap_or(false);
    if let Some(s) = cx.string(m, "save_path", p) {
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
                        match (k.as_str(), serde_json::to_value(v)) {
                            (Some(k), Ok(j)) => {
                                target.insert(k.to_string(), j);
                            }
                            _ => cx.err(
                                &kp,
                                format!(
                                    "option {}: {} cannot be passed to nsys; expected string keys and scalar values",
                                    show(k),
                                    show(v)
                                ),
                            ),
                        }
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
        }
    }
    g
}

fn pos_u32(cx: &mut Ctx, m: &Mapping, key: &str, path: &str) -> Option<u32> {
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

fn parse_steps(cx: &mut Ctx, v: Option<&Value>) -> Vec<u64> {
    let p = "global_profiler.steps";
    let v = match v {
        None | Some(Value::Null) => return vec![],
        Some(v) if super::values::is_interp(v) => return vec![],
        Some(v) => v,
    };
    let Value::Sequence(seq) = v else {
        let example = match super::values::as_int(v) {
            Some(i) => format!("[{i}]"),
            None => "[1, 2, 5]".to_string(),
        };
        cx.err(
            p,
            format!(
                "{} is {}, but steps must be a list of 1-based step numbers or null; write steps: {example} (on the command line: global_profiler.steps={})",
                show(v),
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
                    show(item)
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn parse_ranks(cx: &mut Ctx, m: &Mapping, path: &str, world: u32) -> Option<Vec<u32>> {
    let v = Ctx::get(m, "ranks")?;
    let p = format!("{path}.ranks");
    let Value::Sequence(seq) = v else {
        cx.err(
            &p,
            format!(
                "{} is {}, expected a list of ranks in 0..{} (e.g. [0]) or all_ranks: true",
                show(v),
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
                    show(item),
                    world - 1
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Whether a tool_config block has at least one key set by the user (not `_target_`, not null
/// and not an interpolation).
fn block_written(m: &Mapping) -> bool {
    m.iter().any(|(k, v)| {
        k.as_str() != Some("_target_") && !v.is_null() && !super::values::is_interp(v)
    })
}

fn parse_role(cx: &mut Ctx, m: &Mapping, path: &str, world: u32) -> RawRole {
    cx.check_keys(m, path, ROLE_KEYS);
    let mut r = RawRole {
        tool: cx.tool(m, "tool", path),
        enable: cx.bool(m, "enable", path),
        all_ranks: cx.bool(m, "all_ranks", path),
        ranks: parse_ranks(cx, m, path, world),
        save_path: cx.string(m, "save_path", path),
        max_events: cx.cap(m, "max_events", path),
        max_bytes: cx.cap(m, "max_bytes", path),
        ..RawRole::default()
    };
    if let Some(t) = r.tool {
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
        r.npu_contents = cx.contents(b, "contents", &p, Tool::Npu);
        r.npu_analysis = cx.bool(b, "analysis", &p);
        r.npu_discrete = cx.bool(b, "discrete", &p);
        read_schedule(cx, b, &p, Tool::Npu, &mut r);
        if block_written(b) {
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
        read_schedule(cx, b, &p, Tool::Torch, &mut r);
        if block_written(b) {
            r.written.push((Tool::Torch, p.clone()));
        }
    }
    let p = format!("{tp}.nsys");
    if let Some(b) = cx.map(tc.get("nsys"), &p) {
        cx.check_keys(b, &p, NSYS_ROLE_KEYS);
        r.nsys_discrete = cx.bool(b, "discrete", &p);
        if block_written(b) {
            r.written.push((Tool::Nsys, p.clone()));
        }
    }
    let p = format!("{tp}.torch_memory");
    if let Some(b) = cx.map(tc.get("torch_memory"), &p) {
        cx.check_keys(b, &p, ROLE_TORCH_MEMORY_KEYS);
        read_schedule(cx, b, &p, Tool::TorchMemory, &mut r);
        r.tm_entries = cx.pos_int(b, "trace_alloc_max_entries", &p);
        r.tm_depth = pos_u32(cx, b, "stack_depth", &p);
        if block_written(b) {
            r.written.push((Tool::TorchMemory, p.clone()));
        }
    }
    r
}

/// Reads `schedule` / `granularity` of one tool block into `r`.
fn read_schedule(cx: &mut Ctx, b: &Mapping, path: &str, tool: Tool, r: &mut RawRole) {
    if let Some(s) = parse_schedule(cx, b, path) {
        r.schedules.insert(tool, s);
    }
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
fn parse_schedule(cx: &mut Ctx, m: &Mapping, parent: &str) -> Option<Schedule> {
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
