//! Typed events: a record and the Ext record that extends it, unpacked once for every reader
//! (see the Ext layouts in `docs/raw-format.md`), with times in wall-clock nanoseconds.

use crate::clock::TickMapper;
use crate::record::{Kind, RangeCat, Record};

/// A host range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeEv {
    /// Thread index.
    pub thread: u32,
    /// [`RangeCat`] byte.
    pub cat: u8,
    /// Name id.
    pub name: u32,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
    /// Nesting depth on its thread.
    pub depth: u16,
    /// Module id (ops).
    pub module: u32,
    /// Shapes id (ops).
    pub shapes: u32,
    /// Dtypes id (ops).
    pub dtypes: u32,
    /// Call-stack id (ops).
    pub stack: u32,
    /// Autograd sequence number linking a forward op and its backward op (0 = none).
    pub seq: u32,
    /// The op is the backward op of sequence number `seq`.
    pub backward: bool,
    /// Iteration id (scheduled iterations).
    pub iter_id: Option<u64>,
}

/// A device kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelEv {
    /// Thread index that recorded it.
    pub thread: u32,
    /// Name id.
    pub name: u32,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
    /// Stream.
    pub stream: u16,
    /// Ran on the host CPU engine.
    pub on_host: bool,
    /// FLOPs (0 = unknown).
    pub flops: u64,
    /// Bytes moved (0 = unknown).
    pub bytes: u64,
}

/// An allocation or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemEv {
    /// Thread index.
    pub thread: u32,
    /// Time, wall ns.
    pub ts: u64,
    /// Name id of the op that caused it (0 = none).
    pub op: u32,
    /// Device index.
    pub device: u16,
    /// A free (else an allocation).
    pub free: bool,
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub bytes: u64,
}

/// A collective or point-to-point communication op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommEv {
    /// Thread index.
    pub thread: u32,
    /// Name id (`all_reduce`, ...).
    pub name: u32,
    /// Start, wall ns.
    pub start: u64,
    /// End, wall ns.
    pub end: u64,
    /// Bytes.
    pub bytes: u64,
    /// Time spent waiting for peers, ns.
    pub wait_ns: u64,
    /// Group name id.
    pub group: u32,
    /// Peer rank of a point-to-point op.
    pub peer: Option<u16>,
}

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Host range.
    Range(RangeEv),
    /// Device kernel.
    Kernel(KernelEv),
    /// Memory event.
    Memory(MemEv),
    /// Communication op.
    Comm(CommEv),
    /// Instant `(thread, ts, name, value)`.
    Instant(u32, u64, u32, u64),
    /// Counter sample `(thread, ts, name, value)`.
    Counter(u32, u64, u32, u64),
}

/// What the decoder asks about a record's times while it builds the event, in its one match
/// on the kind byte (so that validating adds no second dispatch): pass 2's validation
/// (`decode::Check`), or a stand-in that keeps every record.
pub(super) trait TimeCheck: Copy {
    /// Whether an interval `[ts, a)` in ticks is kept as it is.
    fn interval(self, ts: u64, a: u64) -> bool;
    /// Whether a point in time `ts` in ticks is kept.
    fn instant(self, ts: u64) -> bool;
    /// Nanoseconds of `ticks`, a time of a record this check kept.
    #[inline(always)]
    fn to_ns(self, m: &TickMapper, ticks: u64) -> u64 {
        m.to_ns(ticks)
    }
}

/// Keeps every record.
#[cfg(test)]
#[derive(Clone, Copy)]
struct KeepAll;

#[cfg(test)]
impl TimeCheck for KeepAll {
    fn interval(self, _: u64, _: u64) -> bool {
        true
    }
    fn instant(self, _: u64) -> bool {
        true
    }
}

impl Event {
    /// The event of record `r` of `thread`, extended by `ext`, with ticks mapped by `m`.
    /// An interval ending before it starts is clamped to zero length. `None` for a record of
    /// unknown kind (or a stray Ext).
    #[cfg(test)]
    pub(super) fn decode(
        thread: u32,
        r: &Record,
        ext: Option<&Record>,
        m: &TickMapper,
    ) -> Option<Event> {
        let interval = [Kind::Range, Kind::Kernel, Kind::Comm].map(|k| k as u8);
        let r = Record {
            a: if interval.contains(&r.kind) {
                r.a.max(r.ts)
            } else {
                r.a
            },
            ..*r
        };
        Event::decode_checked(thread, &r, ext, m, KeepAll)
    }

    /// The event of record `r` of `thread`, extended by `ext`, with ticks mapped by `m`, when
    /// `check` keeps its times as they are; `None` when it does not, and for a record of unknown
    /// kind (or a stray Ext).
    #[inline(always)]
    pub(super) fn decode_checked(
        thread: u32,
        r: &Record,
        ext: Option<&Record>,
        m: &TickMapper,
        check: impl TimeCheck,
    ) -> Option<Event> {
        let e = ext.copied().unwrap_or_default();
        Some(match r.kind {
            KERNEL => {
                if !check.interval(r.ts, r.a) {
                    return None;
                }
                Event::Kernel(KernelEv {
                    thread,
                    name: r.name,
                    start: check.to_ns(m, r.ts),
                    end: check.to_ns(m, r.a),
                    stream: r.aux,
                    on_host: r.cat == 1,
                    flops: e.ts,
                    bytes: e.a,
                })
            }
            MEMORY => {
                if !check.instant(r.ts) {
                    return None;
                }
                Event::Memory(MemEv {
                    thread,
                    ts: check.to_ns(m, r.ts),
                    op: r.name,
                    device: r.aux,
                    free: r.cat == 1,
                    addr: e.ts,
                    bytes: e.a,
                })
            }
            COMM => {
                if !check.interval(r.ts, r.a) {
                    return None;
                }
                Event::Comm(CommEv {
                    thread,
                    name: r.name,
                    start: check.to_ns(m, r.ts),
                    end: check.to_ns(m, r.a),
                    bytes: e.ts,
                    wait_ns: m.span_ns(0, e.a),
                    group: e.name,
                    peer: (e.aux > 0).then(|| e.aux - 1),
                })
            }
            INSTANT => {
                if !check.instant(r.ts) {
                    return None;
                }
                Event::Instant(thread, check.to_ns(m, r.ts), r.name, r.a)
            }
            COUNTER => {
                if !check.instant(r.ts) {
                    return None;
                }
                Event::Counter(thread, check.to_ns(m, r.ts), r.name, r.a)
            }
            EXT => return None,
            RANGE => {
                if !check.interval(r.ts, r.a) {
                    return None;
                }
                let is_op = r.cat == RangeCat::Op as u8;
                let is_iter = r.cat == RangeCat::Iteration as u8;
                Event::Range(RangeEv {
                    thread,
                    cat: r.cat,
                    name: r.name,
                    start: check.to_ns(m, r.ts),
                    end: check.to_ns(m, r.a),
                    depth: r.aux,
                    module: if is_op { e.ts as u32 } else { 0 },
                    shapes: if is_op { (e.ts >> 32) as u32 } else { 0 },
                    dtypes: if is_op { e.a as u32 } else { 0 },
                    stack: if is_op { (e.a >> 32) as u32 } else { 0 },
                    seq: if is_op { e.name } else { 0 },
                    backward: is_op && e.cat == 1,
                    iter_id: (is_iter && ext.is_some()).then_some(e.ts),
                })
            }
            _ => return None,
        })
    }
}

const RANGE: u8 = Kind::Range as u8;
const EXT: u8 = Kind::Ext as u8;
const KERNEL: u8 = Kind::Kernel as u8;
const MEMORY: u8 = Kind::Memory as u8;
const COMM: u8 = Kind::Comm as u8;
const INSTANT: u8 = Kind::Instant as u8;
const COUNTER: u8 = Kind::Counter as u8;
