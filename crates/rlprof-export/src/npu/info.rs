//! `profiler_info_{rank}.json` and `profiler_metadata.json`, which both layouts write beside
//! `ASCEND_PROFILER_OUTPUT/`.

use super::matrix::Layout;
use crate::ExportError;
use crate::decode::Index;
use rlprof_profiler::collection::staging::write_atomic;
use rlprof_profiler::plan::{Content, Level};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `profiler_info_{rank}.json` and `profiler_metadata.json` (both layouts have them).
pub(crate) fn write_info_files(
    dir: &Path,
    idx: &Index,
    layout: Layout,
) -> Result<Vec<PathBuf>, ExportError> {
    let info = dir.join(format!("profiler_info_{}.json", idx.meta.rank));
    let mut v = profiler_info(idx);
    let db = layout == Layout::Db;
    v["config"]["experimental_config"]["export_type"] = json!([layout.as_str()]);
    v["config"]["experimental_config"]["_data_simplification"] = json!(db);
    write_json(&info, &v)?;
    let md = dir.join("profiler_metadata.json");
    write_json(&md, &profiler_metadata(idx))?;
    Ok(vec![info, md])
}

pub(super) fn write_json(path: &Path, v: &Value) -> Result<(), ExportError> {
    let text = serde_json::to_vec_pretty(v).map_err(|source| ExportError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(write_atomic(path, &text)?)
}

fn profiler_level_name(level: &str) -> &'static str {
    match level {
        "level_none" => "Level_none",
        "level1" => "Level1",
        "level2" => "Level2",
        _ => "Level0",
    }
}

/// `profiler_info_{rank}.json`.
pub fn profiler_info(idx: &Index) -> Value {
    let m = &idx.meta;
    let mut activities = Vec::new();
    if m.has(Content::Cpu) {
        activities.push("ProfilerActivity.CPU");
    }
    if m.has(Content::Npu) {
        activities.push("ProfilerActivity.NPU");
    }
    let end_wall = idx.steps.last().map_or(m.start_wall_ns, |s| s.end);
    json!({
        "config": {
            "common_config": {
                "activities": activities,
                "schedule": {"wait": 0, "warmup": 0, "active": 1, "repeat": 1, "skip_first": 0},
                "record_shapes": m.has(Content::Shapes),
                "profile_memory": m.has(Content::Memory),
                "with_stack": m.has(Content::Stack),
                "with_flops": m.level >= Level::Level1,
                "with_modules": m.has(Content::Module),
            },
            "experimental_config": {
                "_profiler_level": profiler_level_name(m.level.as_str()),
                "_aic_metrics": "",
                "_l2_cache": false,
                "_data_simplification": false,
                "record_op_args": false,
                "export_type": ["text"],
            }
        },
        "start_info": {
            "syscnt_enable": false,
            "freq": 1_000_000_000u64,
            "start_cnt": m.start_mono_ns,
            "start_monotonic": m.start_mono_ns,
            "collectionTimeBegin": m.start_wall_ns,
            "clockMonotonicRaw": m.start_mono_ns,
        },
        "end_info": {
            "collectionTimeEnd": end_wall,
            "MonotonicTimeEnd": (end_wall as i128 - m.wall_offset()).max(0) as u64,
        },
        "torch_npu_version": "",
        "cann_version": "",
        "rank_id": m.rank,
        "rlprof_version": env!("CARGO_PKG_VERSION"),
    })
}

/// `profiler_metadata.json`.
pub fn profiler_metadata(idx: &Index) -> Value {
    let m = &idx.meta;
    json!({
        "distributed_args": {"rank": m.rank, "world_size": m.world_size, "backend": "rlprof"},
        "rlprof": {
            "tool": m.tool, "level": m.level, "contents": m.contents,
            "steps": m.steps, "role_dir": m.role_dir, "discrete": m.discrete,
            "host": m.host, "pid": m.pid,
            "truncated": crate::truncation_json(idx),
        },
        "parallel_group_info": {},
    })
}
