//! rlprof-profiler: collect performance data from RL post-training jobs.
//!
//! Layers, with data flowing one way: [`config`] (YAML + overrides -> [`plan::ProfilePlan`]) ->
//! [`controller`] (which step/role/rank collects) -> [`recorder`] (fixed-size binary records in
//! thread-local buffers) -> [`raw`] (self-checking chunked raw files). Parsing and exporting live
//! in other crates; this crate is usable by any Rust program on its own.

pub mod config;
pub mod error;
pub mod plan;

pub use error::ProfilerError;
