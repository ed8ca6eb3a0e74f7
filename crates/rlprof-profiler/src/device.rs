//! Device timelines: how a compute backend with its own clock (CUDA) puts its kernels into a
//! collection without slowing the training thread.
//!
//! The backend times each op with a pair of device events (recorded on its stream before and
//! after the op, never waited for), keeps the pairs in a [`PendingOps`] list, and at collection
//! stop hands the controller a [`DeviceFinish`]: work that runs on a background thread, waits for
//! the device, reads each pair's times and returns them as kernel records on the host clock. The
//! controller writes those records, then finishes the collection (end marker, rename, analysis).
//!
//! Device times become host ticks through a [`DeviceCalibration`]: one marker event recorded at
//! collection start and one at stop, each paired with the host ticks of the moment it was
//! recorded on an idle stream. A kernel at device offset `d` from the start marker is at host
//! ticks `start + d * (host span / device span)`, which also absorbs drift between the clocks.
//!
//! ```
//! use rlprof_profiler::device::{DeviceCalibration, PendingOps};
//! use rlprof_profiler::NameId;
//! // Fake "events": device times in ns. Start marker at 1000 ns, stop marker 2 ms later;
//! // host ticks 50_000 and 2_050_000 at those markers (1 tick per ns). Markers under 1 ms apart
//! // would fall back to this machine's clock rate.
//! let cal = DeviceCalibration::new(50_000, 2_050_000, 2_000_000.0);
//! let mut ops = PendingOps::new(1000.0);
//! ops.push(NameId::NONE, 0, 0, 7, 1500.0, 1700.0);
//! let recs = ops.resolve(&cal, |a: &f64, b: &f64| Some(b - a));
//! assert_eq!((recs[0].ts, recs[0].a), (50_500, 50_700));
//! ```

use crate::intern::NameId;
use crate::plan::Tool;
use crate::record::{Kind, Record};

/// Thread id under which device records are written: `DEVICE_THREAD_BASE + stream`.
pub const DEVICE_THREAD_BASE: u32 = 0xFFFF_0000;

/// Work that completes a collection's device timeline off the training thread: waits for the
/// device and returns kernel records (with their ext records) on the host clock.
pub type DeviceFinish = Box<dyn FnOnce() -> Vec<Record> + Send>;

/// A compute backend's hooks into the collection lifecycle (see the module docs).
pub trait DeviceTimeline: Send + Sync {
    /// A collection of `tool` started on this rank (on the training thread): take the start
    /// calibration, open an `nsys` capture range, forget ops of earlier collections.
    fn collection_started(&self, tool: Tool);

    /// The collection of `tool` is stopping (on the training thread): close capture ranges,
    /// take the stop calibration and return the work that resolves the ops, if any. Must not
    /// wait for the device.
    fn collection_stopping(&self, tool: Tool) -> Option<DeviceFinish>;
}

/// Relates the device clock to host ticks over one collection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceCalibration {
    host_start: u64,
    host_stop: u64,
    device_span_ns: f64,
}

impl DeviceCalibration {
    /// Host ticks at the start and stop markers, and the device time between the markers.
    pub fn new(host_start: u64, host_stop: u64, device_span_ns: f64) -> DeviceCalibration {
        DeviceCalibration {
            host_start,
            host_stop,
            device_span_ns,
        }
    }

    /// Host ticks per device nanosecond: from the two markers when they are far enough apart to
    /// measure it (1 ms), from this process's clock otherwise.
    pub fn ticks_per_device_ns(&self) -> f64 {
        let host = self.host_stop.saturating_sub(self.host_start) as f64;
        if self.device_span_ns >= 1e6 && host > 0.0 {
            host / self.device_span_ns
        } else {
            1.0 / crate::clock::local_ns_per_tick()
        }
    }

    /// Host ticks of the device instant `offset_ns` after the start marker (negative offsets
    /// clamp to the start marker).
    pub fn host_ticks(&self, offset_ns: f64) -> u64 {
        let d = (offset_ns.max(0.0) * self.ticks_per_device_ns()).round();
        self.host_start.saturating_add(d as u64)
    }
}

/// One op's device timing, not yet read back.
#[derive(Debug)]
struct PendingOp<E> {
    name: NameId,
    flops: u64,
    bytes: u64,
    stream: u16,
    start: E,
    end: E,
}

/// The event pairs of one collection, in issue order, with the start marker they are measured
/// from. `E` is the backend's event type.
#[derive(Debug)]
pub struct PendingOps<E> {
    marker: E,
    ops: Vec<PendingOp<E>>,
}

impl<E> PendingOps<E> {
    /// An empty list measured from `marker` (the start calibration event).
    pub fn new(marker: E) -> PendingOps<E> {
        PendingOps {
            marker,
            ops: Vec::new(),
        }
    }

    /// Adds one op: its kernel name, FLOPs and bytes (0 = unknown), stream and event pair.
    pub fn push(&mut self, name: NameId, flops: u64, bytes: u64, stream: u16, start: E, end: E) {
        self.ops.push(PendingOp {
            name,
            flops,
            bytes,
            stream,
            start,
            end,
        });
    }

    /// Ops held.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no op is held.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The start marker.
    pub fn marker(&self) -> &E {
        &self.marker
    }

    /// Turns every pair into a kernel record (plus an ext record with FLOPs and bytes when
    /// known). `elapsed_ns(a, b)` is the device time from event `a` to event `b`, None when it
    /// cannot be read (that op is left out). Ends before starts are clamped to the start.
    pub fn resolve(
        self,
        cal: &DeviceCalibration,
        mut elapsed_ns: impl FnMut(&E, &E) -> Option<f64>,
    ) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.ops.len() * 2);
        for op in &self.ops {
            let (Some(s), Some(e)) = (
                elapsed_ns(&self.marker, &op.start),
                elapsed_ns(&self.marker, &op.end),
            ) else {
                continue;
            };
            let start = cal.host_ticks(s);
            let end = cal.host_ticks(e).max(start);
            out.push(Record::new(
                start,
                end,
                op.name.0,
                Kind::Kernel,
                0,
                op.stream,
            ));
            if op.flops != 0 || op.bytes != 0 {
                out.push(Record::new(op.flops, op.bytes, 0, Kind::Ext, 0, 0));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_map_to_their_host_ticks_and_drift_is_absorbed() {
        // Device clock runs 1% fast against the host: 10 ms of host ticks (1 tick/ns) span
        // 10.1 ms on the device.
        let cal = DeviceCalibration::new(1_000_000, 11_000_000, 10_100_000.0);
        assert_eq!(cal.host_ticks(0.0), 1_000_000);
        assert_eq!(cal.host_ticks(10_100_000.0), 11_000_000);
        assert_eq!(cal.host_ticks(5_050_000.0), 6_000_000);
        assert_eq!(cal.host_ticks(-5.0), 1_000_000, "before the marker clamps");
    }

    #[test]
    fn short_collections_use_the_process_clock_rate() {
        let cal = DeviceCalibration::new(100, 100, 0.0);
        let expect = 1_000_000.0 / crate::clock::local_ns_per_tick();
        let got = cal.host_ticks(1_000_000.0) - 100;
        assert!((got as f64 - expect).abs() <= 1.0, "{got} vs {expect}");
    }

    #[test]
    fn pairs_resolve_in_order_with_ext_only_when_known() {
        let cal = DeviceCalibration::new(0, 4_000_000, 2_000_000.0); // 2 ticks per device ns
        let mut ops = PendingOps::new(10.0f64);
        ops.push(NameId(3), 100, 400, 7, 20.0, 30.0);
        ops.push(NameId(4), 0, 0, 7, 30.0, 35.0);
        assert_eq!(ops.len(), 2);
        let recs = ops.resolve(&cal, |a, b| Some(b - a));
        assert_eq!(recs.len(), 3);
        assert_eq!(
            recs[0],
            Record::new(20, 40, 3, Kind::Kernel, 0, 7),
            "device offsets 10..20 ns"
        );
        assert_eq!(recs[1], Record::new(100, 400, 0, Kind::Ext, 0, 0));
        assert_eq!(recs[2], Record::new(40, 50, 4, Kind::Kernel, 0, 7));
    }

    #[test]
    fn unreadable_pairs_are_left_out_and_reversed_ends_clamped() {
        let cal = DeviceCalibration::new(0, 2_000_000, 2_000_000.0);
        let mut ops = PendingOps::new(0.0f64);
        ops.push(NameId(1), 0, 0, 0, f64::NAN, 5.0);
        ops.push(NameId(2), 0, 0, 0, 9.0, 4.0);
        let recs = ops.resolve(&cal, |a, b| {
            let d = b - a;
            (!d.is_nan()).then_some(d)
        });
        assert_eq!(recs, vec![Record::new(9, 9, 2, Kind::Kernel, 0, 0)]);
    }
}
