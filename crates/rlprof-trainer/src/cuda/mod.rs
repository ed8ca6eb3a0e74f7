//! The CUDA device in collections (feature `cuda`; the engine runs on candle's CUDA backend):
//!
//! - [`timeline`]: each traced op is timed with a pair of CUDA events on the device's stream,
//!   recorded around the op and never waited for; at collection stop a background thread reads
//!   the pairs back and writes them as device kernel records on the host clock, mapped by a
//!   calibration at collection start and stop (see `rlprof_profiler::device`);
//! - [`capture`]: `cudaProfilerStart/Stop` capture ranges for `nsys
//!   --capture-range=cudaProfilerApi`, one per collection (a step group end-to-end, a role call
//!   in discrete mode), opened by the process's capture leader only;
//! - [`memory`]: candle's device allocations and frees as memory events.
//!
//! [`attach`] wires all of it to one rank on the calling (training) thread.

pub mod capture;
pub mod memory;
pub mod timeline;

use crate::error::Result;
use candle_core::Device;
use rlprof_profiler::RankProfiler;
use std::cell::RefCell;
use std::sync::Arc;
use timeline::CudaTimeline;

thread_local! {
    static CURRENT: RefCell<Option<Arc<CudaTimeline>>> = const { RefCell::new(None) };
}

/// Keeps the calling thread's ops timed on a rank's CUDA timeline; detaches on drop.
pub struct Attached {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// When `device` is a CUDA device: gives rank `rp` a CUDA timeline (op timing, capture ranges)
/// and times the ops of the calling thread on it; device allocations replace host ones as the
/// memory events. `ranks_here` are the ranks of this process (for the `nsys` capture leader).
/// None on other devices.
pub fn attach(rp: &RankProfiler, device: &Device, ranks_here: &[u32]) -> Result<Option<Attached>> {
    let Device::Cuda(dev) = device else {
        return Ok(None);
    };
    let leader = rlprof_profiler::nsys::capture_leader(rp.plan(), ranks_here) == Some(rp.rank());
    let timeline = Arc::new(CudaTimeline::new(dev, leader)?);
    rp.set_device_timeline(timeline.clone());
    rlprof_profiler::alloc::set_host_tracking(false);
    memory::enable();
    CURRENT.with(|c| *c.borrow_mut() = Some(timeline));
    Ok(Some(Attached {
        _not_send: std::marker::PhantomData,
    }))
}

/// The CUDA timeline of the calling thread's rank, if it runs on CUDA.
#[inline]
pub fn current() -> Option<Arc<CudaTimeline>> {
    CURRENT.with(|c| c.borrow().clone())
}
