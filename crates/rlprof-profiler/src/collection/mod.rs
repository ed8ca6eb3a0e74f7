//! The on-disk contract of a collection: everything the profiler (which writes collections),
//! `rlprof analyse` (`rlprof-export`, which parses them) and `rlprof report` (which reads them)
//! must agree on about a collection tree lives here, and only here.
//!
//! Where a collection directory goes is the layout's ([`names::place`]): by default verl 0.9.1's
//! places and names, with rlprof's step-grouped layout on request
//! (`global_profiler.rlprof.layout`):
//!
//! ```text
//! verl:          {save_path}/train/{host}_{pid}_{ts17}_ascend_pt/          npu / nsys, end-to-end
//!                {save_path}/{stage}/{host}_{pid}_{ts17}_ascend_pt/        npu / nsys, discrete
//!                {save_path}/agent_loop_rollout_replica_{rank}/...         rollout collections
//!                {save_path}/{basename}_torch_pt/ + {basename}.json.gz     torch (raw + trace)
//!                {save_path}/{step{N}|steps{a}-{b}}/..._torch_memory_pt/
//!                    + torch_memory_rank{R}_pid{P}.pickle                  torch_memory window
//! step_grouped:  {save_path}/step{N|A-B}/{e2e|<stage>}/{host}_{pid}_{ts17}_{tool}_pt/
//! ```
//!
//! A torch trace and a torch_memory snapshot are what `rlprof analyse` exports from the raw data;
//! their verl names are recorded in the raw file when the collection starts and the files land
//! beside the collection, where verl writes them. Every collection directory holds:
//!
//! ```text
//! {collection}[.tmp]/
//!     rlprof_raw/rank_{rank}.rlraw    raw data (format: `crate::raw`, docs/raw-format.md)
//!     rlprof_analysis.lock            the collection's lock
//!     rlprof_analysis.json            the "parsed" marker, written last
//!     rlprof_warnings.txt             damage found while parsing
//!     rlprof_recovered.json           set when an interrupted `.tmp` collection was recovered
//!     {output}.{pid}-{seq}.tmp        an output being written (staging)
//! ```
//!
//! - [`names`]: where a collection goes in either layout and what it and its export are called
//!   ([`names::place`]), which run and group a found collection belongs to
//!   ([`names::run_dir`], [`names::collection_group`]), directory naming (step directories,
//!   `{tool}_pt` collection names, the `.tmp` name of a collection in flight) and raw-file names (`rlprof_raw/rank_N.rlraw`, written by
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
