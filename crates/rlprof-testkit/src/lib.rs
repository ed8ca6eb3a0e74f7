//! Test scaffolding shared by the rlprof crates' tests, benches and examples:
//!
//! - [`PlanBuilder`]: a [`ProfilePlan`](rlprof_profiler::ProfilePlan) (and its
//!   [`RolePlan`](rlprof_profiler::plan::RolePlan)) built by hand instead of from a config
//!   document;
//! - [`RawFileBuilder`]: a raw collection file written chunk by chunk with the profiler's
//!   [`RawWriter`](rlprof_profiler::raw::RawWriter), for crafted contents;
//! - [`Script`] and [`collect`]: a scripted run on N ranks made with the profiler's own API.
//!
//! It is a dev-dependency only; it depends on the profiler and never on the crates that test
//! with it.

mod plan;
mod raw;
mod script;

pub use plan::PlanBuilder;
pub use raw::{RawFileBuilder, T0, WALL0, calibration, raw_meta};
pub use script::{Script, busy, collect};
