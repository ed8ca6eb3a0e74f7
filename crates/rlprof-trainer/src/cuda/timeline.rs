//! One rank's CUDA timeline: event pairs around ops, calibration markers, and the read-back at
//! collection stop (see `rlprof_profiler::device` for the mapping and the bookkeeping).
//!
//! Calibration markers are recorded on a stream of their own, which is idle: a marker executes
//! as soon as the device sees it, a few microseconds after the host ticks it is paired with,
//! whatever work the compute stream has queued. So neither collection start nor stop waits for
//! the device; only the background read-back does.

use super::capture;
use crate::error::{Result, TrainerError};
use candle_core::cuda::CudaDevice;
use candle_core::cuda::cudarc::driver::sys::CUevent_flags;
use candle_core::cuda::cudarc::driver::{CudaEvent, CudaStream};
use candle_core::{DType, Tensor};
use rlprof_profiler::device::{DeviceCalibration, DeviceFinish, DeviceTimeline, PendingOps};
use rlprof_profiler::{NameId, Tool, intern, now, resolve};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Stream id given to the compute stream's kernels (PyTorch's traces give the default stream 7).
pub const STREAM_ID: u16 = 7;

/// A marker event and the host ticks it was recorded at.
struct Marker {
    event: CudaEvent,
    ticks: u64,
}

#[derive(Default)]
struct State {
    /// The ops of the active collection, from its start marker.
    ops: Option<PendingOps<CudaEvent>>,
    start_ticks: u64,
    /// Device kernel names by (op name, dtype).
    names: HashMap<(u32, DType), NameId>,
    /// Whether an event failure was already logged.
    warned: bool,
}

/// See the module docs.
pub struct CudaTimeline {
    stream: Arc<CudaStream>,
    markers: Arc<CudaStream>,
    capture_leader: bool,
    state: Mutex<State>,
}

fn cuda_err(e: impl std::fmt::Debug) -> TrainerError {
    TrainerError::Engine(candle_core::Error::Msg(format!("CUDA: {e:?}")))
}

impl CudaTimeline {
    /// The timeline of `dev`'s compute stream; `capture_leader`: this rank opens the process's
    /// `nsys` capture ranges.
    pub fn new(dev: &CudaDevice, capture_leader: bool) -> Result<CudaTimeline> {
        let stream = dev.cuda_stream();
        let markers = stream.context().new_stream().map_err(cuda_err)?;
        Ok(CudaTimeline {
            stream,
            markers,
            capture_leader,
            state: Mutex::new(State::default()),
        })
    }

    fn timing_event(stream: &CudaStream) -> Option<CudaEvent> {
        stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .ok()
    }

    fn marker(&self) -> Option<Marker> {
        let t0 = now();
        let event = Self::timing_event(&self.markers)?;
        let t1 = now();
        Some(Marker {
            event,
            ticks: t0 + (t1 - t0) / 2,
        })
    }

    fn warn_once(&self, what: &str) {
        let mut st = self.state.lock().expect("cuda timeline");
        if !std::mem::replace(&mut st.warned, true) {
            tracing::warn!(
                "CUDA op timing: {what}; ops are not timed on the device for this collection"
            );
        }
    }

    /// Runs `f` (one op named `op` on this device) between two events when a collection is
    /// timing ops; `flops` as for the CPU kernel record. Never waits for the device.
    pub fn time_op(
        &self,
        op: NameId,
        flops: u64,
        f: impl FnOnce() -> candle_core::Result<Tensor>,
    ) -> candle_core::Result<Tensor> {
        if self.state.lock().expect("cuda timeline").ops.is_none() {
            return f();
        }
        let Some(start) = Self::timing_event(&self.stream) else {
            self.warn_once("cannot record a CUDA event");
            return f();
        };
        let out = f()?;
        let Some(end) = Self::timing_event(&self.stream) else {
            self.warn_once("cannot record a CUDA event");
            return Ok(out);
        };
        let bytes = (out.elem_count() * out.dtype().size_in_bytes()) as u64;
        let mut st = self.state.lock().expect("cuda timeline");
        let name = kernel_name(&mut st.names, op, out.dtype());
        if let Some(ops) = st.ops.as_mut() {
            ops.push(name, flops, bytes, STREAM_ID, start, end);
        }
        Ok(out)
    }
}

/// `cuda_<op>_<dtype>`: one device record per op, covering every kernel the op launched.
fn kernel_name(names: &mut HashMap<(u32, DType), NameId>, op: NameId, dtype: DType) -> NameId {
    *names.entry((op.0, dtype)).or_insert_with(|| {
        let op = resolve(op).unwrap_or_else(|| "op".into());
        intern(&format!("cuda_{op}_{}", dtype.as_str()))
    })
}

impl DeviceTimeline for CudaTimeline {
    fn collection_started(&self, tool: Tool) {
        if tool == Tool::Nsys && self.capture_leader {
            capture::start();
        }
        let marker = self.marker();
        let mut st = self.state.lock().expect("cuda timeline");
        match marker {
            Some(m) => {
                st.start_ticks = m.ticks;
                st.ops = Some(PendingOps::new(m.event));
            }
            None => {
                st.ops = None;
                drop(st);
                self.warn_once("cannot record the calibration event");
            }
        }
    }

    fn collection_stopping(&self, tool: Tool) -> Option<DeviceFinish> {
        if tool == Tool::Nsys && self.capture_leader {
            capture::stop();
        }
        let (ops, start_ticks) = {
            let mut st = self.state.lock().expect("cuda timeline");
            (st.ops.take()?, st.start_ticks)
        };
        if ops.is_empty() {
            return None;
        }
        let Some(stop) = self.marker() else {
            self.warn_once("cannot record the calibration event");
            return None;
        };
        Some(Box::new(move || read_back(ops, start_ticks, stop)))
    }
}

/// Waits for the collection's events (background thread) and maps them to host ticks.
fn read_back(
    ops: PendingOps<CudaEvent>,
    start_ticks: u64,
    stop: Marker,
) -> Vec<rlprof_profiler::record::Record> {
    let ns = |a: &CudaEvent, b: &CudaEvent| a.elapsed_ms(b).ok().map(|ms| ms as f64 * 1e6);
    let Some(span) = ns(ops.marker(), &stop.event) else {
        tracing::warn!(
            "CUDA op timing: the calibration events cannot be read; device kernels of this collection are left out"
        );
        return Vec::new();
    };
    let cal = DeviceCalibration::new(start_ticks, stop.ticks, span);
    ops.resolve(&cal, ns)
}
