//! The collection metadata of a raw file's Meta chunk, read leniently: a missing field takes
//! the profiler's default so that files from older builds still parse.

use serde_json::Value;

/// What the Meta chunk says about a collection.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// `npu`, `torch`, `torch_memory` or `nsys`.
    pub tool: String,
    /// `level_none`, `level0`, `level1`, `level2`.
    pub level: String,
    /// Content names (`npu`, `cpu`, `memory`, `shapes`, `module`, `stack`, `cuda`).
    pub contents: Vec<String>,
    /// Automatic analysis requested.
    pub analysis: bool,
    /// Rank.
    pub rank: u32,
    /// World size.
    pub world_size: u32,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Steps covered.
    pub steps: Vec<u64>,
    /// `e2e` or the role-call directory name.
    pub role_dir: String,
    /// Discrete mode.
    pub discrete: bool,
    /// `torch_memory.trace_alloc_max_entries`.
    pub trace_alloc_max_entries: u64,
    /// `torch_memory.stack_depth`.
    pub stack_depth: u32,
    /// Wall-clock ns at the start calibration.
    pub start_wall_ns: u64,
    /// Monotonic ns at the start calibration.
    pub start_mono_ns: u64,
    /// The whole JSON, for fields not modelled here.
    pub raw: Value,
}

/// The npu level as a number: -1 = level_none, 0..=2.
pub fn level_rank(level: &str) -> i32 {
    match level {
        "level_none" => -1,
        "level1" => 1,
        "level2" => 2,
        _ => 0,
    }
}

impl Meta {
    /// Reads the fields of a Meta chunk.
    pub fn from_json(v: &Value) -> Meta {
        let s = |k: &str, d: &str| v.get(k).and_then(Value::as_str).unwrap_or(d).to_string();
        let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let tm = v.get("torch_memory");
        let tmu = |k: &str, d: u64| {
            tm.and_then(|t| t.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(d)
        };
        Meta {
            tool: s("tool", "npu"),
            level: s("level", "level0"),
            contents: v
                .get("contents")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            analysis: v.get("analysis").and_then(Value::as_bool).unwrap_or(false),
            rank: u("rank") as u32,
            world_size: u("world_size").max(1) as u32,
            host: s("host", "localhost"),
            pid: u("pid") as u32,
            steps: v
                .get("steps")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default(),
            role_dir: s("role_dir", "e2e"),
            discrete: v.get("discrete").and_then(Value::as_bool).unwrap_or(false),
            trace_alloc_max_entries: tmu("trace_alloc_max_entries", 100_000).max(1),
            stack_depth: tmu("stack_depth", 32).max(1) as u32,
            start_wall_ns: u("start_wall_ns"),
            start_mono_ns: u("start_mono_ns"),
            raw: v.clone(),
        }
    }

    /// Whether a content was collected (`npu` and `cuda` are the same device data; an empty
    /// list means the default `[npu, cpu]`).
    pub fn has(&self, content: &str) -> bool {
        if self.contents.is_empty() {
            return matches!(content, "npu" | "cuda" | "cpu");
        }
        let device = |c: &str| c == "npu" || c == "cuda";
        self.contents
            .iter()
            .any(|c| c == content || (device(c) && device(content)))
    }

    /// The npu level as a number (see [`level_rank`]).
    pub fn level_rank(&self) -> i32 {
        level_rank(&self.level)
    }

    /// Offset to add to monotonic ns to get wall-clock ns.
    pub fn wall_offset(&self) -> i128 {
        self.start_wall_ns as i128 - self.start_mono_ns as i128
    }
}
