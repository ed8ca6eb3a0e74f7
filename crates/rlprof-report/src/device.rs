//! Device time of one rank, as HolisticTraceAnalysis (HTA) reads a trace, from the device
//! tracks of the model ([`Track::Kernel`], [`Track::Comm`], [`Track::Memcpy`]).
//!
//! Definitions (all in ns; a union counts overlapping intervals once):
//! - `kernel_ns`: union of compute kernels; `comm_ns`: union of collectives (NCCL/HCCL/...);
//!   `memcpy_ns`: union of copies and sets; `busy_ns`: union of all device activity;
//! - `span_ns`: last device end minus first device start; `idle_ns` = `span_ns` − `busy_ns`;
//! - HTA's temporal breakdown: idle = `idle_ns`, compute = `kernel_ns`, non-compute =
//!   `busy_ns` − `kernel_ns`, over `span_ns` (HTA's "kernel time");
//! - communication/computation overlap: the time both a collective and a compute kernel run,
//!   over `comm_ns` (HTA's `comp_comm_overlap_ratio`);
//! - kernel breakdown by type: the plain sum of durations and count per type (HTA's
//!   `get_gpu_kernel_breakdown` kernel-type table: COMPUTATION, COMMUNICATION, MEMORY).
//!
//! Where HTA differs: HTA types kernels by name (`^nccl.*Kernel` is communication,
//! `^Memcpy|^Memset|^dma` memory, and a kernel whose name contains `Sync` or `Memcpy` is
//! neither); here the track decides (the category for PyTorch traces, the process and task type
//! for Ascend). HTA also reads only the events of complete profiler steps; these figures cover
//! every device event of the profile.

use crate::intervals;
use crate::model::{Profile, Track};
use serde::Serialize;

/// The JSON contract's device figures of one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Device {
    /// Union of compute kernels.
    pub kernel_ns: u64,
    /// Union of collectives.
    pub comm_ns: u64,
    /// Union of copies and sets.
    pub memcpy_ns: u64,
    /// Union of all device activity.
    pub busy_ns: u64,
    /// `span_ns` − `busy_ns`.
    pub idle_ns: u64,
    /// First device start to last device end (summed over the rank's profiles).
    pub span_ns: u64,
    /// Device events.
    pub events: u64,
}

/// HTA's temporal breakdown of one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Temporal {
    /// Device idle time.
    pub idle_ns: u64,
    /// Compute kernels' time.
    pub compute_ns: u64,
    /// Other device activity (collectives, copies) not under a compute kernel.
    pub non_compute_ns: u64,
    /// The span they divide (HTA's `kernel_time`).
    pub total_ns: u64,
    /// Shares of `total_ns` in percent (empty when it is 0).
    pub idle_pct: Option<f64>,
    /// See `idle_pct`.
    pub compute_pct: Option<f64>,
    /// See `idle_pct`.
    pub non_compute_pct: Option<f64>,
}

/// Communication/computation overlap of one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Overlap {
    /// Union of collectives.
    pub comm_ns: u64,
    /// Time a collective and a compute kernel run at once.
    pub overlapped_ns: u64,
    /// `overlapped_ns / comm_ns` (empty without collectives).
    pub ratio: Option<f64>,
}

/// Kernel time of one type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelType {
    /// `COMPUTATION`, `COMMUNICATION` or `MEMORY`.
    pub kind: &'static str,
    /// Kernels.
    pub count: u64,
    /// Sum of durations.
    pub sum_ns: u64,
    /// Share of all kernels' summed durations, percent.
    pub pct: f64,
}

/// Everything computed for one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// The contract's figures.
    pub device: Device,
    /// Overlapped time (for [`Overlap`]).
    pub overlapped_ns: u64,
    /// Per type: (count, summed duration), in [`TYPES`] order.
    pub types: [(u64, u64); 3],
}

/// Kernel types in HTA's names, with their tracks.
pub const TYPES: [(&str, Track); 3] = [
    ("COMPUTATION", Track::Kernel),
    ("COMMUNICATION", Track::Comm),
    ("MEMORY", Track::Memcpy),
];

impl Figures {
    /// The figures of one profile.
    pub fn of(p: &Profile) -> Figures {
        Figures::from_runs(&DeviceRuns::of(p))
    }

    /// The figures of one profile whose [`DeviceRuns`] are made.
    pub fn from_runs(u: &DeviceRuns<'_>) -> Figures {
        let mut f = Figures::default();
        for (k, run) in u.runs.iter().enumerate() {
            f.types[k] = (
                run.events().len() as u64,
                run.events().iter().map(|e| e.dur.max(0) as u64).sum(),
            );
        }
        let (mut first, mut last, mut busy) = (None, None, 0u64);
        for (a, b) in u.busy() {
            first.get_or_insert(a);
            last = Some(b);
            busy += (b - a) as u64;
        }
        let span = first.zip(last).map_or(0, |(a, b)| (b - a) as u64);
        f.device = Device {
            kernel_ns: intervals::length(u.runs[0].union()),
            comm_ns: intervals::length(u.runs[1].union()),
            memcpy_ns: intervals::length(u.runs[2].union()),
            busy_ns: busy,
            idle_ns: span - busy,
            span_ns: span,
            events: f.types.iter().map(|t| t.0).sum(),
        };
        f.overlapped_ns = intervals::intersection(u.runs[0].union(), u.runs[1].union());
        f
    }

    /// Adds another profile's figures of the same rank (a separate recording window).
    pub fn add(&mut self, o: &Figures) {
        let (d, e) = (&mut self.device, &o.device);
        d.kernel_ns += e.kernel_ns;
        d.comm_ns += e.comm_ns;
        d.memcpy_ns += e.memcpy_ns;
        d.busy_ns += e.busy_ns;
        d.idle_ns += e.idle_ns;
        d.span_ns += e.span_ns;
        d.events += e.events;
        self.overlapped_ns += o.overlapped_ns;
        for (a, b) in self.types.iter_mut().zip(o.types) {
            a.0 += b.0;
            a.1 += b.1;
        }
    }

    /// HTA's temporal breakdown.
    pub fn temporal(&self) -> Temporal {
        let d = &self.device;
        let pct = |x: u64| (d.span_ns > 0).then(|| 100.0 * x as f64 / d.span_ns as f64);
        let non_compute = d.busy_ns - d.kernel_ns.min(d.busy_ns);
        Temporal {
            idle_ns: d.idle_ns,
            compute_ns: d.kernel_ns,
            non_compute_ns: non_compute,
            total_ns: d.span_ns,
            idle_pct: pct(d.idle_ns),
            compute_pct: pct(d.kernel_ns),
            non_compute_pct: pct(non_compute),
        }
    }

    /// Communication/computation overlap.
    pub fn overlap(&self) -> Overlap {
        let c = self.device.comm_ns;
        Overlap {
            comm_ns: c,
            overlapped_ns: self.overlapped_ns,
            ratio: (c > 0).then(|| self.overlapped_ns as f64 / c as f64),
        }
    }

    /// Kernel breakdown by type (types without kernels left out).
    pub fn kernel_types(&self) -> Vec<KernelType> {
        let total: u64 = self.types.iter().map(|t| t.1).sum();
        TYPES
            .iter()
            .zip(self.types)
            .filter(|(_, (n, _))| *n > 0)
            .map(|((kind, _), (count, sum))| KernelType {
                kind,
                count,
                sum_ns: sum,
                pct: if total == 0 {
                    0.0
                } else {
                    100.0 * sum as f64 / total as f64
                },
            })
            .collect()
    }
}

/// The device tracks of one profile ([`TYPES`] order) as [`intervals::Run`]s: their unions,
/// and the union of all device activity, are streamed from the events when asked for.
pub struct DeviceRuns<'a> {
    /// Kernels, collectives, copies.
    pub runs: [intervals::Run<'a>; 3],
    /// The busy time's segments, kept when each run keeps its union (a small profile).
    busy_kept: Option<Vec<(i64, i64)>>,
}

impl<'a> DeviceRuns<'a> {
    /// The device runs of `p`.
    pub fn of(p: &'a Profile) -> DeviceRuns<'a> {
        let mut d = DeviceRuns {
            runs: TYPES.map(|(_, t)| intervals::Run::of(p, t)),
            busy_kept: None,
        };
        if d.runs.iter().all(intervals::Run::keeps_union) {
            d.busy_kept = Some(d.busy().collect());
        }
        d
    }

    /// The union of all device activity, in start order.
    pub fn busy(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        let [k, c, m] = &self.runs;
        match &self.busy_kept {
            Some(b) => either::Either::Left(b.iter().copied()),
            None => either::Either::Right(intervals::Union::new(intervals::merge(
                intervals::merge(k.union(), c.union()),
                m.union(),
            ))),
        }
    }

    /// Device time within `[s, e)`: `kernel`, `comm`, `memcpy` and `idle`.
    pub fn within(&self, s: i64, e: i64) -> [(&'static str, u64); 4] {
        let [k, c, m] = &self.runs;
        let busy = match &self.busy_kept {
            Some(b) => {
                intervals::covered(b[b.partition_point(|x| x.1 <= s)..].iter().copied(), s, e)
            }
            None => intervals::covered(
                intervals::Union::new(intervals::merge(
                    intervals::merge(k.union_from(s, e), c.union_from(s, e)),
                    m.union_from(s, e),
                )),
                s,
                e,
            ),
        };
        [
            ("kernel", k.covered(s, e, None)),
            ("comm", c.covered(s, e, None)),
            ("memcpy", m.covered(s, e, None)),
            ("idle", ((e - s).max(0) as u64).saturating_sub(busy)),
        ]
    }
}
