//! The Meta chunk: what a collection is, in the plan's own types. The controller writes it and
//! every reader decodes it with this one type (serde), so the two sides cannot drift apart.
//!
//! Reading is lenient about *missing* fields (each takes the profiler's default, so files from
//! older builds still decode) and strict about *wrong* ones: an unknown tool, level or content
//! name makes the chunk unreadable, like any other damaged chunk.

use crate::plan::{
    Caps, Content, Contents, Granularity, Level, Schedule, Tool, TorchMemoryOptions,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schedule of one collecting role, as recorded in the Meta chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleSchedule {
    /// Which inner iterations are recorded.
    pub schedule: Schedule,
    /// What an iteration of `update_actor` is.
    #[serde(default)]
    pub granularity: Granularity,
}

/// A collection's metadata (one per raw file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CollectionMeta {
    /// Raw format version of the writer.
    pub format_version: u32,
    /// The collection tool.
    pub tool: Tool,
    /// The `npu` tool's level.
    pub level: Level,
    /// The `npu` tool's output layout; absent in collections made before the key existed, which
    /// only knew the text layout.
    pub export_type: Option<crate::plan::ExportType>,
    /// What was collected (empty: the default `[npu, cpu]`).
    pub contents: Contents,
    /// Automatic analysis requested.
    pub analysis: bool,
    /// Rank as the writer saw it (readers use the file name's rank, see [`crate::collection::names::rank_file`]).
    pub rank: u32,
    /// World size (at least 1 once decoded).
    pub world_size: u32,
    /// Host name, as recorded: readers sanitise it before building file names from it.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Steps the collection covers.
    pub steps: Vec<u64>,
    /// `e2e` or the role-call directory name.
    pub role_dir: String,
    /// Discrete mode.
    pub discrete: bool,
    /// Size caps of the collection.
    pub caps: Caps,
    /// Memory-snapshot options.
    pub torch_memory: TorchMemoryOptions,
    /// Schedules of the roles collecting on this rank, by role name.
    pub schedules: BTreeMap<String, RoleSchedule>,
    /// Wall-clock ns at the start calibration.
    pub start_wall_ns: u64,
    /// `CLOCK_MONOTONIC` ns at the start calibration.
    pub start_mono_ns: u64,
    /// The writer's clock rate (ns per tick), used when the file has a single calibration
    /// point; absent in files of older builds.
    pub ns_per_tick: Option<f64>,
    /// The layout the collection was placed in (absent in files of older builds, which only
    /// knew the step-grouped layout).
    pub layout: Option<crate::plan::Layout>,
    /// The name of the tool's exported file, decided when the collection started
    /// ([`crate::collection::names::Place::export_name`]): verl's trace name for torch, its
    /// snapshot name for torch_memory; written into the collection's parent. Absent: the
    /// export's own names.
    pub export_name: Option<String>,
    /// One window of a scheduled torch update: its trace takes verl's `_mb{a}[-{b}]` suffix,
    /// from the first and last mini-batch it recorded, before `.json.gz`.
    pub mini_batch_window: bool,
}

impl Default for CollectionMeta {
    fn default() -> Self {
        CollectionMeta {
            format_version: super::FORMAT_VERSION,
            tool: Tool::Npu,
            level: Level::Level0,
            export_type: None,
            contents: Contents::EMPTY,
            analysis: false,
            rank: 0,
            world_size: 1,
            host: "localhost".into(),
            pid: 0,
            steps: Vec::new(),
            role_dir: "e2e".into(),
            discrete: false,
            caps: Caps::default(),
            torch_memory: TorchMemoryOptions::default(),
            schedules: BTreeMap::new(),
            start_wall_ns: 0,
            start_mono_ns: 0,
            ns_per_tick: None,
            layout: None,
            export_name: None,
            mini_batch_window: false,
        }
    }
}

impl CollectionMeta {
    /// Decodes a Meta chunk's JSON; counts that must be positive are raised to 1.
    pub fn from_json(v: &serde_json::Value) -> Result<CollectionMeta, serde_json::Error> {
        let mut m = CollectionMeta::deserialize(v)?;
        m.world_size = m.world_size.max(1);
        m.torch_memory.trace_alloc_max_entries = m.torch_memory.trace_alloc_max_entries.max(1);
        m.torch_memory.stack_depth = m.torch_memory.stack_depth.max(1);
        Ok(m)
    }

    /// Whether `content` was collected (device data asked as `npu` or `cuda` are the same; an
    /// empty set means the default `[npu, cpu]`).
    pub fn has(&self, content: Content) -> bool {
        if self.contents == Contents::EMPTY {
            return matches!(content, Content::Npu | Content::Cuda | Content::Cpu);
        }
        self.contents.has(content)
    }

    /// Offset to add to monotonic ns to get wall-clock ns.
    pub fn wall_offset(&self) -> i128 {
        self.start_wall_ns as i128 - self.start_mono_ns as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_defaults_and_wrong_ones_fail() {
        let m =
            CollectionMeta::from_json(&serde_json::json!({"rank": 3, "world_size": 0})).unwrap();
        assert_eq!(
            (m.rank, m.world_size, m.tool, m.level),
            (3, 1, Tool::Npu, Level::Level0)
        );
        assert!(m.has(Content::Cpu) && !m.has(Content::Memory));
        assert!(CollectionMeta::from_json(&serde_json::json!({"tool": "perf"})).is_err());
        assert!(CollectionMeta::from_json(&serde_json::json!({"contents": ["gpu"]})).is_err());
    }

    #[test]
    fn round_trips_through_json() {
        let mut m = CollectionMeta {
            tool: Tool::Torch,
            level: Level::Level2,
            contents: [Content::Cuda, Content::Stack].into_iter().collect(),
            ns_per_tick: Some(0.25),
            ..CollectionMeta::default()
        };
        m.schedules.insert(
            "actor".into(),
            RoleSchedule {
                schedule: Schedule {
                    skip_first: 1,
                    wait: 0,
                    warmup: 1,
                    active: 2,
                    repeat: 1,
                },
                granularity: Granularity::MiniBatch,
            },
        );
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["tool"], "torch");
        assert_eq!(v["contents"], serde_json::json!(["stack", "cuda"]));
        assert_eq!(CollectionMeta::from_json(&v).unwrap(), m);
    }
}
