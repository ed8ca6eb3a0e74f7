//! One role's `profiler` block: its keys, the user-written subset that rollout and ref keep when
//! following the actor, and its `tool_config` blocks (npu, torch, nsys, torch_memory) with their
//! schedules, granularities and token windows.

use super::fields::{parse_hooks, parse_schedule, pos_u32, rank_list};
use super::precision::{PRECISION_DEBUGGER, read_block};
use super::raw::RawRole;
use super::schema::{
    NPU_KEYS, NSYS_ROLE_KEYS, ROLE_KEYS, ROLE_TORCH_MEMORY_KEYS, SCHEDULE_KEYS, TOOL_CONFIG_KEYS,
    TORCH_KEYS,
};
use crate::Written;
use crate::tree::{Map, Node};
use crate::typed::{self, Reader};
use rlprof_profiler::plan::{Granularity, Role, Schedule, Tool, VerlSettings};

fn parse_ranks(
    cx: &mut Reader,
    m: &Map,
    path: &str,
    world: u32,
    warnings: &mut Vec<String>,
) -> Option<Vec<u32>> {
    rank_list(cx, m, "ranks", path, world, warnings)
}

/// Whether a tool_config block has at least one key set by the user (not `_target_` or `name`,
/// not null, and written by the user rather than by verl's own files).
fn block_written(m: &Map, path: &str, written: &Written) -> bool {
    m.iter().any(|(k, v)| {
        let key = k.as_str();
        !matches!(key, "_target_" | "name")
            && !v.is_null()
            && !typed::is_interp(v)
            && written.touches(&format!("{path}.{key}"))
    })
}

/// The keys of a role's profiler block that the user wrote (recursively).
pub(super) fn only_written(m: &Map, path: &str, written: &Written) -> Map {
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
pub(super) fn note_verl_difference(verl: &mut VerlSettings, role: Role, all: &Map, mine: &Map) {
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

pub(super) fn parse_role(
    cx: &mut Reader,
    m: &Map,
    path: &str,
    world: u32,
    written: &Written,
) -> RawRole {
    cx.check_keys(m, path, ROLE_KEYS);
    let chose_debugger = m.get("tool").and_then(Node::as_str) == Some(PRECISION_DEBUGGER);
    let mut warnings = Vec::new();
    let mut r = RawRole {
        tool: if chose_debugger {
            None
        } else {
            cx.tool(m, "tool", path)
        },
        enable: cx.bool_in(m, "enable", path),
        all_ranks: cx.bool_in(m, "all_ranks", path),
        ranks: parse_ranks(cx, m, path, world, &mut warnings),
        save_path: cx.str_in(m, "save_path", path),
        max_events: cx.cap_in(m, "max_events", path),
        max_bytes: cx.cap_in(m, "max_bytes", path),
        hooks: parse_hooks(cx, m, path, world, &mut warnings),
        ..RawRole::default()
    };
    r.warnings = warnings;
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
        r.npu_analysis = cx.bool_in(b, "analysis", &p);
        r.npu_discrete = cx.bool_in(b, "discrete", &p);
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
        r.torch_step_start = cx.int_in(b, "step_start", &p);
        r.torch_step_end = cx.int_in(b, "step_end", &p);
        r.torch_discrete = cx.bool_in(b, "discrete", &p);
        torch_schedule(cx, b, &p, &mut r);
        token_window(cx, b, &p, Tool::Torch, &mut r);
        if block_written(b, &p, written) {
            r.written.push((Tool::Torch, p.clone()));
        }
    }
    let p = format!("{tp}.nsys");
    if let Some(b) = cx.map(tc.get("nsys"), &p) {
        cx.check_keys(b, &p, NSYS_ROLE_KEYS);
        r.nsys_discrete = cx.bool_in(b, "discrete", &p);
        if block_written(b, &p, written) {
            r.written.push((Tool::Nsys, p.clone()));
        }
    }
    let p = format!("{tp}.torch_memory");
    if let Some(b) = cx.map(tc.get("torch_memory"), &p) {
        cx.check_keys(b, &p, ROLE_TORCH_MEMORY_KEYS);
        read_schedule(cx, b, &p, Tool::TorchMemory, &mut r);
        r.tm_entries = cx.pos_int_in(b, "trace_alloc_max_entries", &p);
        r.tm_depth = pos_u32(cx, b, "stack_depth", &p);
        r.tm_num_steps = cx.pos_int_in(b, "memory_snapshot_num_steps", &p);
        if block_written(b, &p, written) {
            r.written.push((Tool::TorchMemory, p.clone()));
        }
    }
    let p = format!("{tp}.precision_debugger");
    if let Some(b) = cx.map(tc.get("precision_debugger"), &p) {
        r.precision = read_block(cx, b, &p);
    }
    r
}

/// verl's `profile_token_start` / `profile_token_end`: the rollout decode steps (response-token
/// indices, end exclusive) to collect, as a schedule over the role's decode steps.
fn token_window(cx: &mut Reader, b: &Map, path: &str, tool: Tool, r: &mut RawRole) {
    let mut read = |key: &str| match cx.int_in(b, key, path) {
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

/// verl's `tool_config.torch.schedule`: `active: 0` = off; every field must be >= 0 (verl
/// asserts it); counts the update stage's mini-batches only (the other stages are collected in
/// full). In end-to-end mode (`discrete: false`) `repeat: 0` means one window, as verl's
/// continuous schedule sets it; `skip_first`, `wait` and `warmup` count as written.
fn torch_schedule(cx: &mut Reader, b: &Map, path: &str, r: &mut RawRole) {
    let p = format!("{path}.schedule");
    let Some(s) = cx.map(b.get("schedule"), &p) else {
        read_granularity(cx, b, path, Tool::Torch, r);
        return;
    };
    cx.check_keys(s, &p, SCHEDULE_KEYS);
    let mut field = |key: &str| match cx.int_in(s, key, &p) {
        Some(v) if v < 0 => {
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
    let sched = Schedule {
        skip_first: skip_first as u64,
        wait: wait as u64,
        warmup: warmup as u64,
        active: active as u64,
        repeat: if discrete {
            repeat as u64
        } else {
            (repeat as u64).max(1)
        },
    };
    r.schedules.insert(Tool::Torch, sched);
    r.granularity
        .entry(Tool::Torch)
        .or_insert(Granularity::MiniBatch);
}

/// Reads `schedule` / `granularity` of one tool block into `r`.
fn read_schedule(cx: &mut Reader, b: &Map, path: &str, tool: Tool, r: &mut RawRole) {
    if let Some(s) = parse_schedule(cx, b, path) {
        r.schedules.insert(tool, s);
    }
    read_granularity(cx, b, path, tool, r);
}

fn read_granularity(cx: &mut Reader, b: &Map, path: &str, tool: Tool, r: &mut RawRole) {
    if let Some(g) = cx.str_in(b, "granularity", path) {
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
