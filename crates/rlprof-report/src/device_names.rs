//! Name rules for device activity that more than one reader applies: which kernels are
//! collectives (NCCL/HCCL/LCCL by name) and which track an Ascend device task belongs to. They
//! sit below the readers (`chrome`, `ascend`, `ascend_db`) and `processes`, which all use them.

use crate::model::Track;

/// NCCL/HCCL collectives by name (`nccl*`, `hcom*`, `hccl*`, `lccl*`, `lcoc*`, or `allreduce`
/// anywhere, case-insensitive).
pub fn is_comm_name(name: &str) -> bool {
    // Case-insensitive without lower-casing a copy (this runs for every kernel).
    let b = name.as_bytes();
    let starts = |p: &[u8]| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p);
    starts(b"nccl")
        || starts(b"hcom")
        || starts(b"hccl")
        || starts(b"lccl")
        || starts(b"lcoc")
        || b.windows(9).any(|w| w.eq_ignore_ascii_case(b"allreduce"))
}

pub use rlprof_profiler::metrics::is_sync_task;

/// The tasks HCCL moves a collective's data with, as torch_npu's `trace_view.json` names them
/// on the collective's stream (`SDMA`, `RDMA`, `RDMASend`, `Reduce_Inline`, `Reduce_TBE`): part
/// of the communication, not kernels.
pub fn is_hccl_transfer(name: &str) -> bool {
    ["SDMA", "RDMA", "RDMASend", "Reduce_Inline", "Reduce_TBE"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

/// The track of an Ascend device task from its name and, when known, its task type /
/// accelerator core (`AI_CORE`, `AI_VECTOR_CORE`, `HCCL`, `COMMUNICATION`, `MEMCPY_ASYNC`, ...):
/// collectives as msprof-analyze tells them (`HCCL`/`COMMUNICATION` tasks, names starting with
/// `hcom`, `hccl`, `lccl`, `lcoc`), copies, compute kernels, or, for stream synchronisation
/// ([`is_sync_task`], by name or type: torch_npu names such tasks by their type), a user range
/// that stays on the timeline but is not device work.
pub fn device_track(name: &str, task_type: Option<&str>) -> Track {
    let ty = task_type.unwrap_or("");
    let upper_has = |s: &str, w: &str| s.to_ascii_uppercase().contains(w);
    if is_sync_task(name) || is_sync_task(ty) {
        Track::User
    } else if ty.eq_ignore_ascii_case("HCCL")
        || ty.eq_ignore_ascii_case("COMMUNICATION")
        || is_comm_name(name)
        || is_hccl_transfer(name)
    {
        Track::Comm
    } else if upper_has(ty, "MEMCPY")
        || upper_has(ty, "MEMSET")
        || ["MEMCPY", "MEMSET"]
            .iter()
            // By bytes: a name's first bytes may end inside a multi-byte character.
            .any(|p| {
                name.as_bytes()
                    .get(..p.len())
                    .is_some_and(|b| b.eq_ignore_ascii_case(p.as_bytes()))
            })
    {
        Track::Memcpy
    } else {
        Track::Kernel
    }
}
