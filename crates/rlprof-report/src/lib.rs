//! rlprof-report: one view of where the time and memory of an RL post-training step go.
//!
//! Data flows one way: inputs, each read by a module named for what it reads ([`raw_input`] for
//! our raw files, [`chrome_reader`] for PyTorch Chrome traces, [`ascend_text_reader`] for Ascend
//! profiler output directories in the text layout, [`ascend_db_reader`] for the DB layout), found
//! by [`discover`] ->
//! the [`model`] (profiles of timeline events and memory events) -> [`summary`] (the numbers:
//! per-step breakdown, top ops, memory peak, communication, comparison) -> renderers
//! ([`render_text`], [`render_json`], [`html`]).
//!
//! ```no_run
//! let loaded = rlprof_report::load(std::path::Path::new("outputs/profile"), &Default::default()).unwrap();
//! let report = rlprof_report::summary::summarise(&loaded);
//! println!("{}", rlprof_report::render_text(&report));
//! ```

pub mod ascend_db_reader;
pub mod ascend_text_reader;
pub mod chrome_reader;
#[cfg(test)]
mod chrome_reference;
pub mod cluster;
pub mod coverage;
pub mod device;
pub mod device_names;
pub mod discover;
pub mod error;
mod exact_time;
pub mod html;
pub mod intervals;
pub mod jobs;
mod json_reader;
pub mod model;
pub mod precision_compare;
pub mod processes;
pub mod raw_input;
pub mod roles;
pub mod sqlite_values;
pub mod summary;
mod text_render;
pub use html::{HtmlOptions, render_html, write_html};

pub use chrome_reader::Limits;
pub use discover::load;
pub use error::ReportError;
pub use summary::{Report, compare, summarise};
pub use text_render::render_text;

/// The report as pretty JSON (the same numbers as the text and HTML forms).
pub fn render_json(report: &Report) -> Result<String, ReportError> {
    Ok(serde_json::to_string_pretty(report)?)
}
