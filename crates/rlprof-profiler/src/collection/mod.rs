//! The on-disk contract of a collection: everything the profiler (which writes collections),
//! `rlprof analyse` (`rlprof-export`, which parses them) and `rlprof report` (which reads them)
//! must agree on about a collection tree lives here, and only here.
//!
//! ```text
//! {save_path}/step{N}/{e2e|<role>}/{host}_{pid}_{ts17}_{tool}_pt[.tmp]/
//!     rlprof_raw/rank_{rank}.rlraw    raw data (format: `crate::raw`, docs/raw-format.md)
//!     rlprof_analysis.lock            the collection's lock
//!     rlprof_analysis.json            the "parsed" marker, written last
//!     rlprof_warnings.txt             damage found while parsing
//!     rlprof_recovered.json           set when an interrupted `.tmp` collection was recovered
//!     {output}.{pid}-{seq}.tmp        an output being written (staging)
//! ```
//!
//! - [`names`]: directory naming (step directories, `{tool}_pt` collection names, the `.tmp`
//!   name of a collection in flight) and raw-file names (`rlprof_raw/rank_N.rlraw`, written by
//!   [`names::raw_file`], read by [`names::rank_file`]);
//! - [`lock`]: [`lock::COLLECTION_LOCK`], taken by the profiler when it creates a collection and
//!   by analysers while they parse one;
//! - [`staging`]: staging names and atomic writes (write under a unique name, then rename);
//! - [`marker`]: the "parsed" marker, written and read;
//! - [`recover`]: giving an interrupted `.tmp` collection its final name;
//! - [`safe_fs`]: how rlprof opens the files it creates in a collection tree (never through a
//!   symbolic link);
//! - [`mmap`]: the one memory-mapping wrapper (raw files, and the traces `report` reads).

pub mod lock;
pub mod marker;
pub mod mmap;
pub mod names;
pub mod recover;
pub mod safe_fs;
pub mod staging;
