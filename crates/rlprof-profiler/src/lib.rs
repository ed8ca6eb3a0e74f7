//! rlprof-profiler: collect performance data from RL post-training jobs.
//!
//! Layers, with data flowing one way: a [`plan::ProfilePlan`] (built from the verl YAML and
//! overrides by the `rlprof-config` crate, or by hand) -> [`controller`] (which step/role/rank
//! collects, end-to-end or discrete) -> [`recorder`] (fixed-size binary [`record::Record`]s in
//! thread-local buffers, TSC timestamps) -> [`raw`] (self-checking chunked raw files).
//! [`collection`] owns the on-disk contract of a collection tree (names, locks, staging, the
//! parsed marker, recovery, memory mapping), shared with the readers. Config parsing, parsing of
//! the collected data and exporting live in other crates; this crate is usable by any Rust
//! program on its own and depends on no trainer.
//!
//! ```
//! use rlprof_profiler::{Profiler, plan::{ProfilePlan, RoleCall}, phase, op, name, NameId};
//! let profiler = Profiler::new(ProfilePlan::disabled(1));
//! let rank = profiler.rank(0);
//! let _bound = rank.bind_thread();
//! let _step = rank.step(1);
//! let _call = rank.role_call(RoleCall::UpdateActor);
//! let _ph = phase("update_actor");
//! let _op = op(name!("matmul"), NameId::NONE);
//! ```

pub mod alloc;
pub mod api;
pub mod clock;
pub mod collection;
pub mod controller;
pub mod device;
pub mod error;
pub mod finish_hook;
pub mod intern;
pub mod metrics;
pub mod nsys;
pub mod nvtx;
pub mod plan;
pub mod raw;
pub mod record;
pub mod recorder;
pub mod tracing_layer;

pub use api::{
    CommGuard, IterationGuard, OpGuard, PhaseGuard, RangeGuard, comm, counter, instant, iteration,
    kernel, mem_alloc, mem_free, now, op, phase, scope, wants,
};
pub use controller::{CompletedCollection, Profiler, RankProfiler, RoleCallGuard, StepGuard};
pub use error::ProfilerError;
pub use intern::{NameId, intern, intern_shapes, resolve};
pub use plan::{Content, ProfilePlan, Role, RoleCall, Tool};
pub use recorder::ThreadBinding;
pub use tracing_layer::RlprofLayer;
