//! Which track an event belongs to (kernel, op, communication, role call, phase, user) from
//! its category and name, and the few name rules the Ascend reader shares.

use super::PHASES;
use crate::device_names::is_comm_name;
use crate::model::Track;
use crate::roles::is_role_call;

/// c10's `DeviceType` of the CPU, as written in `[memory]` events' `Device Type`.
pub(super) const HOST_DEVICE_TYPE: i64 = 0;

/// Whether an event is the profiler's own whole-trace span (category `Trace`, e.g.
/// `PyTorch Profiler (0)`): not an op, and dropped so it does not squeeze the timeline.
pub(crate) fn is_whole_trace(cat: Option<&str>) -> bool {
    cat.is_some_and(|c| c.eq_ignore_ascii_case("trace"))
}

/// Track of an event from its category and name. Categories are matched case-insensitively,
/// with every kineto schema's names: current (`cpu_op`, `kernel`, `gpu_memcpy`, `cuda_runtime`,
/// ...), 2021's (`Operator`, `Kernel`, `Memcpy`, `Memset`, `Runtime`), and other accelerators'
/// (`mtia_ccp_events` kernels, `xpu_runtime` and the like). `ProfilerStep#N`
/// is a step whatever its category (torch_npu writes it as a `cpu_op`).
pub fn classify(cat: Option<&str>, name: &str) -> Track {
    let cat = cat.unwrap_or("");
    // Today's names first, as written (the common case: no case folding).
    match cat {
        "kernel" => return kernel_track(name),
        "cpu_op" => return op_track(name),
        "cuda_runtime" | "cuda_driver" => return Track::Api,
        "gpu_memcpy" | "gpu_memset" => return Track::Memcpy,
        _ => {}
    }
    let is = |c: &str| cat.eq_ignore_ascii_case(c);
    if is_step_name(name) && !is_device_category(cat) {
        Track::Step
    } else if is("cpu_op") || is("operator") {
        Track::Op
    } else if is("user_annotation") || is("mstx") || is("MsTx") {
        // verl's ranges: NVTX/record_function as `user_annotation`, torch_npu's mstx ranges.
        if is_role_call(name) {
            Track::RoleCall
        } else if PHASES.contains(&name) {
            Track::Phase
        } else {
            Track::User
        }
    } else if is("runtime") || is("driver") || is_runtime_category(cat) {
        Track::Api
    } else if is("kernel") || is("mtia_ccp_events") {
        kernel_track(name)
    } else if is("gpu_memcpy") || is("gpu_memset") || is("memcpy") || is("memset") {
        Track::Memcpy
    } else if is("python_function") || is("python") {
        Track::Span
    } else if is("enqueue") || is("dequeue") {
        // torch_npu's task queue (its DB's `queue` API type).
        Track::Runtime
    } else {
        Track::User
    }
}

/// Host-side runtime and driver calls of any accelerator kineto knows (`cuda_runtime`,
/// `xpu_driver`, `mtia_runtime`, `privateuse1_runtime`, `gcu_runtime`, ...).
fn is_runtime_category(cat: &str) -> bool {
    let c = cat.as_bytes();
    let ends =
        |s: &str| c.len() > s.len() && c[c.len() - s.len()..].eq_ignore_ascii_case(s.as_bytes());
    ends("_runtime") || ends("_driver")
}

/// A kernel: a collective by name, else a compute kernel.
pub(super) fn kernel_track(name: &str) -> Track {
    if is_comm_name(name) {
        Track::Comm
    } else {
        Track::Kernel
    }
}

/// A host op, or the step when it is `ProfilerStep#N` (torch_npu writes steps as `cpu_op`).
pub(super) fn op_track(name: &str) -> Track {
    if is_step_name(name) {
        Track::Step
    } else {
        Track::Op
    }
}

/// The name prefix of the RL step in rlprof's torch traces (`rlprof_step#N`), where
/// `ProfilerStep#k` marks update mini-batches as verl's torch profiler writes them
/// (`super::merge` reads such a trace's steps from `rlprof_step#N`).
pub(super) const RL_STEP: &str = "rlprof_step#";

/// A step's name: `ProfilerStep#N`, or rlprof's `rlprof_step#N`.
pub(super) fn is_step_name(name: &str) -> bool {
    name.starts_with("ProfilerStep#") || name.starts_with(RL_STEP)
}

/// Categories of device activity (a `ProfilerStep#N` there is the step's GPU-side mirror,
/// `gpu_user_annotation`, not the step).
pub(super) fn is_device_category(cat: &str) -> bool {
    [
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "memcpy",
        "memset",
        "gpu_user_annotation",
        "mtia_ccp_events",
    ]
    .iter()
    .any(|c| cat.eq_ignore_ascii_case(c))
}

/// A role-call annotation inside one of the same name on the same thread is the trainer's
/// phase of that name, not a second call (`update_actor` is both verl's role call and its
/// trainer's timer; rlprof's torch trace writes both as `user_annotation`s, the phase inside
/// the call): it becomes [`Track::Phase`], so the call is counted once.
pub(crate) fn demote_nested_role_calls(events: &mut [crate::model::Event]) {
    let mut calls: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].track == Track::RoleCall)
        .collect();
    calls.sort_by_key(|&i| {
        let e = &events[i];
        (e.thread, e.name, e.start, std::cmp::Reverse(e.dur))
    });
    let mut outer: Option<usize> = None;
    for i in calls {
        match outer {
            Some(o)
                if (events[o].thread, events[o].name) == (events[i].thread, events[i].name)
                    && events[i].start + events[i].dur <= events[o].start + events[o].dur =>
            {
                events[i].track = Track::Phase;
            }
            _ => outer = Some(i),
        }
    }
}
