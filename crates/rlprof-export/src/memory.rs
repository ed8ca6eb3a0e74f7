//! Memory accounting shared by the exporters, and the `torch_memory` snapshot.
//!
//! The engine allocates straight from the system allocator (no caching allocator), so every
//! allocation is its own segment and reserved memory equals allocated memory; the snapshot
//! says exactly that (one segment per live allocation, one `active_allocated` block tiling it).
//! Running totals follow the order in which a rank's memory events are read.

use crate::decode::{Index, MemEv};
use crate::pickle::Value;
use std::collections::{HashMap, VecDeque};

/// A live allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// Bytes.
    pub bytes: u64,
    /// Allocation time, wall ns.
    pub ts: u64,
    /// Op name id that allocated it.
    pub op: u32,
    /// Total allocated just after the allocation.
    pub total_at_alloc: u64,
    /// Device.
    pub device: u16,
}

/// Running totals and live allocations of one rank.
#[derive(Debug, Default)]
pub struct MemTracker {
    /// Bytes allocated now.
    pub allocated: u64,
    /// Peak of `allocated`.
    pub peak: u64,
    /// Live allocations by address.
    pub live: HashMap<u64, Live>,
    /// Allocations seen.
    pub allocs: u64,
    /// Frees seen.
    pub frees: u64,
    /// Bytes allocated in total.
    pub alloc_bytes: u64,
}

impl MemTracker {
    /// Reserved bytes (no caching allocator: equal to allocated).
    pub fn reserved(&self) -> u64 {
        self.allocated
    }

    /// Applies an event; for a free, returns the allocation it releases (if it was seen).
    pub fn apply(&mut self, m: &MemEv) -> Option<Live> {
        if m.free {
            self.frees += 1;
            let live = self.live.remove(&m.addr);
            let bytes = live.map_or(m.bytes, |l| l.bytes);
            self.allocated = self.allocated.saturating_sub(bytes);
            live
        } else {
            self.allocs += 1;
            self.alloc_bytes += m.bytes;
            self.allocated += m.bytes;
            self.peak = self.peak.max(self.allocated);
            self.live.insert(
                m.addr,
                Live {
                    bytes: m.bytes,
                    ts: m.ts,
                    op: m.op,
                    total_at_alloc: self.allocated,
                    device: m.device,
                },
            );
            None
        }
    }
}

/// One device-trace entry.
#[derive(Debug, Clone, PartialEq)]
struct TraceEntry {
    action: &'static str,
    addr: u64,
    size: u64,
    time_us: u64,
    op: u32,
}

/// Builds one snapshot per profiled step: the trace entries of the step (the most recent
/// `trace_alloc_max_entries`) and the segments live at its end.
pub struct SnapshotBuilder {
    max_entries: usize,
    stack_depth: usize,
    step: Option<u64>,
    entries: VecDeque<TraceEntry>,
    /// Entries dropped by the cap in the current step.
    pub dropped: u64,
}

/// A finished step snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The step.
    pub step: u64,
    /// The pickle value.
    pub value: Value,
    /// Bytes allocated at the end of the step.
    pub allocated: u64,
    /// Trace entries written.
    pub entries: usize,
}

impl SnapshotBuilder {
    /// A builder with the collection's torch_memory options.
    pub fn new(idx: &Index) -> SnapshotBuilder {
        SnapshotBuilder {
            max_entries: idx
                .meta
                .torch_memory
                .trace_alloc_max_entries
                .min(usize::MAX as u64) as usize,
            stack_depth: idx.meta.torch_memory.stack_depth as usize,
            step: None,
            entries: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Records a memory event that belongs to `step` (after the tracker applied it). When the
    /// step changes, the previous step's snapshot is returned.
    pub fn push(
        &mut self,
        idx: &Index,
        step: u64,
        m: &MemEv,
        tracker: &MemTracker,
    ) -> Option<Snapshot> {
        let done = match self.step {
            Some(s) if s != step => Some(self.take(idx, tracker)),
            _ => None,
        };
        self.step = Some(step);
        let time_us = m.ts / 1000;
        let actions: &[&'static str] = if m.free {
            &["free_requested", "free_completed"]
        } else {
            &["alloc"]
        };
        for &action in actions {
            if self.entries.len() == self.max_entries {
                self.entries.pop_front();
                self.dropped += 1;
            }
            self.entries.push_back(TraceEntry {
                action,
                addr: m.addr,
                size: m.bytes,
                time_us,
                op: m.op,
            });
        }
        done
    }

    /// The snapshot of the current step (None when no memory event was seen).
    pub fn finish(&mut self, idx: &Index, tracker: &MemTracker) -> Option<Snapshot> {
        self.step.is_some().then(|| self.take(idx, tracker))
    }

    fn frames(&self, idx: &Index, op: u32) -> Value {
        let name = idx.name(op);
        let frames: Vec<Value> = if name.is_empty() {
            Vec::new()
        } else {
            vec![frame(name)]
        };
        Value::List(frames.into_iter().take(self.stack_depth).collect())
    }

    fn take(&mut self, idx: &Index, tracker: &MemTracker) -> Snapshot {
        let step = self.step.take().unwrap_or(0);
        let raw: Vec<TraceEntry> = self.entries.drain(..).collect();
        let entries: Vec<Value> = raw
            .into_iter()
            .map(|e| {
                Value::dict([
                    ("action", Value::str(e.action)),
                    ("addr", Value::uint(e.addr)),
                    ("size", Value::uint(e.size)),
                    ("stream", Value::Int(0)),
                    ("time_us", Value::uint(e.time_us)),
                    ("frames", self.frames(idx, e.op)),
                ])
            })
            .collect();
        let n = entries.len();
        let mut live: Vec<(&u64, &Live)> = tracker.live.iter().collect();
        live.sort_by_key(|(a, _)| **a);
        let segments: Vec<Value> = live
            .into_iter()
            .map(|(addr, l)| segment(*addr, l, self.frames(idx, l.op)))
            .collect();
        self.dropped = 0;
        Snapshot {
            step,
            value: Value::dict([
                ("segments", Value::List(segments)),
                ("device_traces", Value::List(vec![Value::List(entries)])),
                (
                    "allocator_settings",
                    Value::dict([("caching_allocator", Value::Bool(false))]),
                ),
                ("external_annotations", Value::List(Vec::new())),
            ]),
            allocated: tracker.allocated,
            entries: n,
        }
    }
}

fn frame(name: &str) -> Value {
    Value::dict([
        ("filename", Value::str("<rlprof op>")),
        ("line", Value::Int(0)),
        ("name", Value::str(name)),
    ])
}

fn segment(addr: u64, l: &Live, frames: Value) -> Value {
    let size = Value::uint(l.bytes);
    Value::dict([
        ("device", Value::Int(l.device as i64)),
        ("address", Value::uint(addr)),
        ("total_size", size.clone()),
        ("allocated_size", size.clone()),
        ("active_size", size.clone()),
        ("requested_size", size.clone()),
        ("stream", Value::Int(0)),
        (
            "segment_type",
            Value::str(if l.bytes >= 1 << 20 { "large" } else { "small" }),
        ),
        (
            "segment_pool_id",
            Value::List(vec![Value::Int(0), Value::Int(0)]),
        ),
        ("is_expandable", Value::Bool(false)),
        ("frames", frames.clone()),
        (
            "blocks",
            Value::List(vec![Value::dict([
                ("address", Value::uint(addr)),
                ("size", size.clone()),
                ("requested_size", size),
                ("state", Value::str("active_allocated")),
                ("frames", frames),
            ])]),
        ),
    ])
}

/// A snapshot with no segments and no trace entries.
pub fn empty_snapshot() -> Value {
    Value::dict([
        ("segments", Value::List(Vec::new())),
        ("device_traces", Value::List(vec![Value::List(Vec::new())])),
        (
            "allocator_settings",
            Value::dict([("caching_allocator", Value::Bool(false))]),
        ),
        ("external_annotations", Value::List(Vec::new())),
    ])
}
