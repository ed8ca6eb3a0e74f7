//! `rlprof._native`, the Rust half of the `rlprof` Python package (`pip install .`).
//!
//! Deliberately thin: three functions over [`rlprof_cli`], which is the `rlprof` command
//! itself, so that the wheel's command and module are the very program `cargo build` gives.
//!
//! - `run` ([`rlprof_cli::run`]): the `rlprof` console script (`rlprof._cli:main`) calls it with `sys.argv`;
//! - `report_json` ([`rlprof_cli::report_json`]): `rlprof report PATH --format json`'s text, which `rlprof.load` parses and
//!   reshapes into pandas DataFrames on the Python side (one analysis: nothing is computed in
//!   Python);
//! - `report_html` ([`rlprof_cli::report_html`]): `rlprof report PATH -o OUT`, for
//!   `rlprof.report`.
//!
//! The Python side (`python/rlprof/`) holds the tables, their docstrings and the type stubs.
//! Each call releases the GIL while Rust works.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// As in the `rlprof` binary: tensor memory of the CPU engine is heap memory, recorded through
/// this allocator when `rlprof train` collects `memory` (one relaxed load per allocation
/// otherwise).
#[global_allocator]
static GLOBAL: rlprof_profiler::alloc::TrackingAllocator =
    rlprof_profiler::alloc::TrackingAllocator::system();

/// Runs the `rlprof` command line with `argv` (the program name first) and returns its exit
/// code. For the console script; it sets process-wide state (logging, signal dispositions).
#[pyfunction]
fn run(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| rlprof_cli::run(argv))
}

/// The JSON text `rlprof report PATH --format json` prints. Raises `RuntimeError` with the
/// command's message when the path cannot be read.
#[pyfunction]
fn report_json(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| rlprof_cli::report_json(&path))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Writes the HTML page of `rlprof report PATH -o OUT [--force] [--ranks R,...]`.
#[pyfunction]
#[pyo3(signature = (path, out, force = false, ranks = Vec::new()))]
fn report_html(
    py: Python<'_>,
    path: PathBuf,
    out: PathBuf,
    force: bool,
    ranks: Vec<u32>,
) -> PyResult<()> {
    py.detach(|| rlprof_cli::report_html(&path, &out, force, ranks))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The native half of the `rlprof` package; use `rlprof` itself.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(report_json, m)?)?;
    m.add_function(wrap_pyfunction!(report_html, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
