//! verl 0.9.1's fifth tool, `precision_debugger` (`verl/utils/profiler/precision_debugger_profile.py`,
//! `PrecisionDebuggerToolConfig`): its blocks (`global_profiler.global_tool_config.precision_debugger`,
//! and a role's `tool_config.precision_debugger`, which wins for that role's stages), the stage
//! list, and the msprobe `config.json` it names, resolved into a [`PrecisionPlan`].
//!
//! verl's behaviour kept: the window is `global_profiler.steps`; the deprecated `steps` key is
//! ignored with verl's warning; `rollout_generate` is dropped with verl's warning; an unknown
//! stage warns, or fails with `strict`; a stage dumps only when its role's profiler is enabled
//! (on every rank: msprobe's `rank` list filters); without `config_path` nothing is dumped
//! (verl returns before starting msprobe), which rlprof says as a warning.

use super::raw::RawRole;
use super::schema::PRECISION_DEBUGGER_KEYS;
use crate::tree::{Map, Node};
use crate::typed::{self, Reader};
use rlprof_profiler::plan::{
    MsprobeConfig, MsprobeLevel, MsprobeTask, PrecisionPlan, PrecisionStage, Role, RoleCall,
    RolePlan,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The tool name in `global_profiler.tool`.
pub(super) const PRECISION_DEBUGGER: &str = "precision_debugger";

/// The stages verl's precision debugger dumps (`_STAGE_TO_ROLE`), in the order of a step.
const STAGES: [RoleCall; 6] = [
    RoleCall::ComputeLogProb,
    RoleCall::ComputeRefLogProb,
    RoleCall::ComputeValues,
    RoleCall::UpdateCritic,
    RoleCall::UpdateActor,
    RoleCall::ComputeRmScore,
];

/// One `precision_debugger` block as written (`None` = not set).
#[derive(Debug, Clone, Default)]
pub(super) struct RawPrecision {
    /// The YAML path of the block that set each key (for messages).
    pub(super) path: Option<String>,
    pub(super) config_path: Option<Option<String>>,
    pub(super) stages: Option<Option<Vec<String>>>,
    pub(super) strict: Option<bool>,
    /// The deprecated `steps` was given (non-null).
    pub(super) steps_given: bool,
}

impl RawPrecision {
    /// Keys set here win; keys not set take `base`'s value.
    pub(super) fn over(&self, base: &RawPrecision) -> RawPrecision {
        RawPrecision {
            path: self.path.clone().or_else(|| base.path.clone()),
            config_path: self
                .config_path
                .clone()
                .or_else(|| base.config_path.clone()),
            stages: self.stages.clone().or_else(|| base.stages.clone()),
            strict: self.strict.or(base.strict),
            steps_given: self.steps_given || base.steps_given,
        }
    }
}

/// Reads one `precision_debugger` block (verl's dataclass checks: `config_path` a string,
/// `steps` and `stages` lists, `strict` a boolean).
pub(super) fn read_block(cx: &mut Reader, b: &Map, p: &str) -> RawPrecision {
    cx.check_keys(b, p, PRECISION_DEBUGGER_KEYS);
    let mut r = RawPrecision {
        path: Some(p.to_string()),
        ..RawPrecision::default()
    };
    r.config_path = match b.get("config_path") {
        None => None,
        Some(Node::Null) => Some(None),
        Some(_) => cx.str_in(b, "config_path", p).map(Some),
    };
    r.strict = cx.bool_in(b, "strict", p);
    for key in ["steps", "stages"] {
        let Some(v) = Reader::entry(b, key) else {
            if key == "stages" && matches!(b.get(key), Some(Node::Null)) {
                r.stages = Some(None);
            }
            continue;
        };
        let Some(items) = v.as_list() else {
            cx.err(
                &format!("{p}.{key}"),
                format!(
                    "{} is {}, expected a list or null",
                    v.show(),
                    typed::kind(v)
                ),
            );
            continue;
        };
        if key == "steps" {
            r.steps_given = true;
            continue;
        }
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => names.push(s.to_string()),
                None => cx.err(
                    &format!("{p}.stages[{i}]"),
                    format!("{} is not a stage name; expected a string", item.show()),
                ),
            }
        }
        r.stages = Some(Some(names));
    }
    r
}

/// Resolves the precision debugger: `None` when it dumps nothing (with the warning that says
/// why). `global` is `global_tool_config.precision_debugger`; `roles` the effective role blocks.
pub(super) fn resolve(
    cx: &mut Reader,
    global: &RawPrecision,
    raws: &[(Role, RawRole)],
    plans: &BTreeMap<Role, RolePlan>,
    save_path: &str,
    steps: &[u64],
    warnings: &mut Vec<String>,
) -> Option<PrecisionPlan> {
    let mut said = std::collections::BTreeSet::new();
    let mut stages = Vec::new();
    let mut no_config: Vec<&str> = Vec::new();
    let mut configs: BTreeMap<String, Option<MsprobeConfig>> = BTreeMap::new();
    for call in STAGES {
        let role = call.role();
        let Some(rp) = plans.get(&role).filter(|r| r.enable) else {
            continue;
        };
        let _ = rp;
        let raw = raws
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, raw)| raw.precision.over(global))
            .unwrap_or_else(|| global.clone());
        let path = raw
            .path
            .clone()
            .unwrap_or_else(|| "global_profiler.global_tool_config.precision_debugger".into());
        if raw.steps_given && said.insert(format!("steps:{path}")) {
            // verl's words (`PrecisionDebuggerProfiler.__init__`).
            warnings.push(format!(
                "{path}.steps: `precision_debugger.steps` is deprecated and ignored. Use `global_profiler.steps` to control profiling steps."
            ));
        }
        let strict = raw.strict.unwrap_or(false);
        let wanted = match &raw.stages {
            Some(Some(list)) => {
                check_stages(cx, list, &path, strict, &mut said, warnings);
                list.iter().any(|s| s == call.annotated_name())
            }
            _ => true,
        };
        if !wanted {
            continue;
        }
        let Some(Some(cfg_path)) = &raw.config_path else {
            no_config.push(call.annotated_name());
            continue;
        };
        let key = format!("{path}.config_path");
        let cfg = configs
            .entry(cfg_path.clone())
            .or_insert_with(|| read_msprobe_config(cx, Path::new(cfg_path), &key))
            .clone();
        if let Some(msprobe) = cfg {
            stages.push(PrecisionStage { call, msprobe });
        }
    }
    if !no_config.is_empty() {
        warnings.push(format!(
            "global_profiler.global_tool_config.precision_debugger.config_path: not set, so stages {} dump nothing (verl 0.9.1 returns before starting msprobe without it); set it to an msprobe config.json, e.g. {{\"task\": \"statistics\", \"level\": \"L1\"}}",
            no_config.join(", ")
        ));
    }
    if stages.is_empty() {
        return None;
    }
    if steps.is_empty() {
        warnings.push(
            "global_profiler.steps: no steps listed, so the precision debugger dumps nothing (its window is global_profiler.steps)".to_string(),
        );
    }
    Some(PrecisionPlan {
        save_path: PathBuf::from(save_path),
        steps: steps.to_vec(),
        stages,
    })
}

/// verl's `_normalize_stages`: `rollout_generate` is dropped with a warning, an unknown stage
/// warns (or fails with `strict`).
fn check_stages(
    cx: &mut Reader,
    list: &[String],
    path: &str,
    strict: bool,
    said: &mut std::collections::BTreeSet<String>,
    warnings: &mut Vec<String>,
) {
    if !said.insert(format!("stages:{path}")) {
        return;
    }
    let valid: Vec<&str> = STAGES.iter().map(|c| c.annotated_name()).collect();
    let mut skipped: Vec<&str> = list
        .iter()
        .map(String::as_str)
        .filter(|s| *s == "rollout_generate")
        .collect();
    skipped.dedup();
    if !skipped.is_empty() {
        warnings.push(format!(
            "{path}.stages: Ignoring precision_debugger stages: ['rollout_generate'] (verl 0.9.1 does not dump rollout generation)"
        ));
    }
    let mut unknown: Vec<&str> = list
        .iter()
        .map(String::as_str)
        .filter(|s| *s != "rollout_generate" && !valid.contains(s))
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    if unknown.is_empty() {
        return;
    }
    let names: Vec<String> = unknown.iter().map(|s| format!("'{s}'")).collect();
    let msg = format!(
        "Unknown precision_debugger stages: [{}]; the stages are {}",
        names.join(", "),
        valid.join(", ")
    );
    if strict {
        cx.err(&format!("{path}.stages"), format!("{msg} (strict: true)"));
    } else {
        warnings.push(format!("{path}.stages: {msg}"));
    }
}

/// Top-level keys of msprobe's `config.json` that rlprof reads, and those it accepts without
/// effect on what is written.
const TOP_KEYS: &[&str] = &[
    "task",
    "dump_path",
    "rank",
    "step",
    "level",
    "extra_info",
    "async_dump",
    "precision",
    "statistics",
    "tensor",
    "acc_check",
    "diff_check",
    "structure",
    "nan_check",
    "overflow_check",
    "free_benchmark",
    "grad_probe",
];

/// Keys of the task block (`statistics` / `tensor`) rlprof honours.
const TASK_KEYS: &[&str] = &["scope", "list", "data_mode", "summary_mode"];

/// Reads and checks an msprobe `config.json` (mindstudio-probe 26.2's `CommonConfig` and task
/// configs): every key is honoured or is a clear error, never silently ignored.
pub(super) fn read_msprobe_config(
    cx: &mut Reader,
    file: &Path,
    key: &str,
) -> Option<MsprobeConfig> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            cx.err(
                key,
                format!(
                    "'{}' cannot be read ({e}); give the path of an msprobe config.json",
                    file.display()
                ),
            );
            return None;
        }
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            cx.err(key, format!("'{}' is not valid JSON ({e})", file.display()));
            return None;
        }
    };
    let Some(top) = doc.as_object() else {
        cx.err(key, format!("'{}' is not a JSON object", file.display()));
        return None;
    };
    let at = |k: &str| format!("{key} ('{}'): {k}", file.display());
    let before = cx.issues().len();
    for k in top.keys() {
        if !TOP_KEYS.contains(&k.as_str()) {
            cx.err(
                &at(k),
                format!(
                    "msprobe key '{k}' is not honoured by rlprof's precision debugger; remove it (rlprof reads {})",
                    TOP_KEYS.join(", ")
                ),
            );
        }
    }
    let task = match top.get("task") {
        None | Some(Value::Null) => MsprobeTask::Statistics,
        Some(Value::String(s)) if s == "statistics" => MsprobeTask::Statistics,
        Some(Value::String(s)) if s == "tensor" => MsprobeTask::Tensor,
        Some(v) => {
            cx.err(
                &at("task"),
                format!(
                    "{v} is not a task rlprof dumps; use \"statistics\" or \"tensor\" (msprobe's acc_check, overflow_check, free_benchmark, structure, diff_check and nan_check are not available)"
                ),
            );
            MsprobeTask::Statistics
        }
    };
    let level = match top.get("level") {
        None | Some(Value::Null) => MsprobeLevel::L1,
        Some(Value::String(s)) if s == "L1" => MsprobeLevel::L1,
        Some(Value::String(s)) if s == "L0" => MsprobeLevel::L0,
        Some(Value::String(s)) if s == "mix" => MsprobeLevel::Mix,
        Some(v) => {
            cx.err(
                &at("level"),
                format!(
                    "{v} is not a level rlprof dumps; use \"L0\" (modules), \"L1\" (APIs) or \"mix\" (msprobe's L2 kernel dump and debug level are not available)"
                ),
            );
            MsprobeLevel::L1
        }
    };
    let ranks = int_list(cx, top.get("rank"), &at("rank"));
    let steps = int_list(cx, top.get("step"), &at("step"));
    for (k, ok) in [
        (
            "extra_info",
            top.get("extra_info")
                .is_none_or(|v| v == &Value::Bool(true)),
        ),
        (
            "async_dump",
            top.get("async_dump").is_none_or(Value::is_boolean),
        ),
        (
            "precision",
            top.get("precision")
                .is_none_or(|v| v == "low" || v == "high"),
        ),
        (
            "dump_path",
            top.get("dump_path")
                .is_none_or(|v| v.is_string() || v.is_null()),
        ),
    ] {
        if !ok {
            let want = match k {
                "extra_info" => "true (rlprof always writes the extra info: requires_grad)",
                "async_dump" => "a boolean",
                "precision" => "\"low\" or \"high\" (statistics are accumulated in f64 either way)",
                _ => "a string (verl replaces it with save_path/step_{global_step}/{stage})",
            };
            cx.err(&at(k), format!("{} is not valid; expected {want}", top[k]));
        }
    }
    let empty = serde_json::Map::new();
    let block_key = task.as_str();
    let block = match top.get(block_key) {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(v) => {
            cx.err(&at(block_key), format!("{v} is not an object"));
            &empty
        }
    };
    for (k, v) in block {
        let harmless = v.is_null() || v.as_array().is_some_and(Vec::is_empty);
        if !TASK_KEYS.contains(&k.as_str()) && !harmless {
            cx.err(
                &at(&format!("{block_key}.{k}")),
                format!(
                    "msprobe key '{k}' is not honoured by rlprof's precision debugger; remove it (rlprof reads {})",
                    TASK_KEYS.join(", ")
                ),
            );
        }
    }
    let scope = str_list(cx, block.get("scope"), &at(&format!("{block_key}.scope")));
    let list = str_list(cx, block.get("list"), &at(&format!("{block_key}.list")));
    if !scope.is_empty() && scope.len() != 2 {
        cx.err(
            &at(&format!("{block_key}.scope")),
            format!(
                "{} names, but a scope is a [first, last] pair of full names (msprobe's rule), e.g. [\"Functional.linear.0.forward\", \"Tensor.__add__.3.forward\"]",
                scope.len()
            ),
        );
    }
    if let Some(bad) = list.iter().find(|s| s.starts_with("name-regex(")) {
        cx.err(
            &at(&format!("{block_key}.list")),
            format!(
                "'{bad}': name-regex(...) entries are not honoured by rlprof; list name fragments"
            ),
        );
    }
    let mut data_mode = str_list(
        cx,
        block.get("data_mode"),
        &at(&format!("{block_key}.data_mode")),
    );
    if data_mode.is_empty() {
        data_mode.push("all".into());
    }
    let modes = ["all", "forward", "backward", "input", "output"];
    for m in &data_mode {
        if !modes.contains(&m.as_str()) {
            cx.not_one_of(&at(&format!("{block_key}.data_mode")), m, &modes);
        }
    }
    if data_mode.len() > 1 && data_mode.iter().any(|m| m == "all") {
        cx.err(
            &at(&format!("{block_key}.data_mode")),
            "'all' cannot be combined with other options (msprobe's rule)",
        );
    }
    let summary_mode = match block.get("summary_mode") {
        None | Some(Value::Null) => "statistics".to_string(),
        Some(Value::String(s)) if s == "statistics" => s.clone(),
        Some(v) => {
            cx.err(
                &at(&format!("{block_key}.summary_mode")),
                format!(
                    "{v} is not honoured by rlprof; use \"statistics\" (Max, Min, Mean, Norm; msprobe's md5 and xor checksums are not written)"
                ),
            );
            String::new()
        }
    };
    if task == MsprobeTask::Tensor {
        cx.err(
            &at("task"),
            "\"tensor\" is not written by rlprof yet (it needs PyTorch .pt files under dump_tensor_data/); use \"statistics\"",
        );
    }
    if level != MsprobeLevel::L1 {
        cx.err(
            &at("level"),
            format!(
                "\"{}\" is not written by rlprof yet (module-level dumps); use \"L1\" (APIs)",
                level.as_str()
            ),
        );
    }
    if cx.issues().len() != before {
        return None;
    }
    Some(MsprobeConfig {
        path: file.to_path_buf(),
        task,
        level,
        ranks,
        steps,
        scope,
        list,
        data_mode,
        summary_mode,
    })
}

fn int_list(cx: &mut Reader, v: Option<&Value>, path: &str) -> Vec<u32> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        cx.err(path, format!("{v} is not a list of integers"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => out.push(n),
            None => cx.err(
                path,
                format!("{item} is not an integer >= 0 (msprobe's \"4-6\" ranges are not honoured; list the numbers)"),
            ),
        }
    }
    out
}

fn str_list(cx: &mut Reader, v: Option<&Value>, path: &str) -> Vec<String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let Some(items) = v.as_array() else {
        cx.err(path, format!("{v} is not a list of strings"));
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str() {
            Some(s) => out.push(s.to_string()),
            None => cx.err(path, format!("{item} is not a string")),
        }
    }
    out
}
