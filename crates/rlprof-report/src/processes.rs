//! What a Chrome trace's processes and threads mean, applied once the whole trace is read
//! (process names come as metadata anywhere in the file).
//!
//! torch_npu's `trace_view.json` (read as MindStudio Insight and msprof-analyze read it):
//! - `Ascend Hardware`: device tasks, one thread per stream: compute kernels, HCCL tasks
//!   (`hcom_*`) and copies ([`crate::device_names::device_track`] decides which); stream
//!   synchronisation tasks (`EVENT_WAIT`, ...) stay as user ranges, not device work, and so do
//!   HCCL's transfer tasks (`SDMA`, ...) when the collectives have their own process;
//! - `Communication` / `HCCL`: collectives; threads named `Plane *` hold their sub-tasks (which
//!   repeat the collective's time), so only the other threads count as communication;
//! - `CANN`: the runtime API layer (`AscendCL@...`);
//! - `Overlap Analysis`: msprof's derived lanes (`Computing`, `Communication`, `Free`), not
//!   events: dropped.
//!
//! `process_labels` (`CPU`/`NPU`) is a label, not the process name.

use crate::model::{Event, Track};

/// msprof's derived overlap lanes.
pub const OVERLAP_ANALYSIS: &str = "Overlap Analysis";

/// Re-assigns the tracks of events on known device processes and drops the derived lanes.
/// `process(t)` / `thread(t)` name the process and thread of thread number `t`.
pub fn apply<'n>(
    events: &mut Vec<Event>,
    names: &[String],
    process: impl Fn(u32) -> &'n str,
    thread: impl Fn(u32) -> &'n str,
) {
    if events.iter().any(|e| process(e.thread) == OVERLAP_ANALYSIS) {
        events.retain(|e| process(e.thread) != OVERLAP_ANALYSIS);
    }
    // With the collectives on their own process, HCCL's transfer tasks on the device streams
    // are parts of them (as the DB folds them into their op), not collectives of their own.
    let collectives_apart = events
        .iter()
        .any(|e| matches!(process(e.thread), "Communication" | "HCCL"));
    // A trace whose stage ranges carry verl's stage labels (`actor_update`, ...: rlprof's, as
    // verl 0.9.1 names its stages) has its trainer phases under the function names: there,
    // `update_actor` is the phase around the `actor_update` call, not a second call.
    let name_of = |e: &Event| names.get(e.name as usize).map(String::as_str).unwrap_or("");
    let stage_labels = events
        .iter()
        .any(|e| e.track == Track::RoleCall && crate::roles::is_stage_label(name_of(e)));
    if stage_labels {
        for e in events.iter_mut() {
            if e.track == Track::RoleCall && crate::chrome_reader::PHASES.contains(&name_of(e)) {
                e.track = Track::Phase;
            }
        }
    }
    for e in events.iter_mut() {
        let name = names.get(e.name as usize).map(String::as_str).unwrap_or("");
        match process(e.thread) {
            "Ascend Hardware" => {
                e.track = if collectives_apart && crate::device_names::is_hccl_transfer(name) {
                    Track::User
                } else {
                    crate::device_names::device_track(name, None)
                }
            }
            "Communication" | "HCCL" => {
                e.track = if thread(e.thread).starts_with("Plane") {
                    Track::User
                } else {
                    Track::Comm
                }
            }
            "CANN" if e.track == Track::User => e.track = Track::Api,
            _ => {}
        }
    }
}
