//! Attribution: which host op issued each kernel, and host/device self and total times.
//!
//! Records of a thread arrive in completion order, so an op's kernels and child ranges all
//! arrive before the op itself. Per thread we keep the kernels not yet claimed and, per nesting
//! depth, the summed host and device time of closed children; when a range closes at depth `d`
//! it takes the sums of depth `d + 1`. An op claims the pending kernels that started inside it
//! (innermost op first, because it closes first). Kernels outside any op are released when an
//! outermost range closes, when too many are pending, or at the end. State is bounded by the
//! nesting depth and the kernels of one op.

use crate::decode::{Event, KernelEv, RangeEv};
use crate::dense::DenseMap;
use rlprof_profiler::record::RangeCat;

/// Most kernels held waiting for their op before the oldest are released unattributed.
const MAX_PENDING: usize = 1 << 16;

/// The op that issued a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpRef {
    /// The op's external id (correlation for flows).
    pub ext_id: u64,
    /// The op range.
    pub op: RangeEv,
}

/// A closed range with its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeInfo {
    /// The range.
    pub r: RangeEv,
    /// External id (ops only; 0 otherwise).
    pub ext_id: u64,
    /// Host time minus the host time of child ranges, ns.
    pub host_self: u64,
    /// Kernel time of kernels this op issued directly, ns (ops only).
    pub dev_self: u64,
    /// Kernel time of this range and everything inside it, ns.
    pub dev_total: u64,
}

/// What the attributor hands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out<'a> {
    /// A closed host range.
    Range(RangeInfo),
    /// A kernel with the op that issued it (None: issued outside any op).
    Kernel(KernelEv, Option<OpRef>),
    /// Any other event, unchanged.
    Other(&'a Event),
}

#[derive(Default)]
struct ThreadState {
    /// Per nesting depth: summed `(host, device)` time of closed children.
    child: Vec<(u64, u64)>,
    pending: Vec<KernelEv>,
}

/// The per-thread attribution state of one raw file.
#[derive(Default)]
pub struct Attributor {
    threads: DenseMap<ThreadState>,
    next_ext: u64,
}

impl Attributor {
    /// Feeds one event; calls `out` zero or more times.
    #[inline]
    pub fn push(&mut self, ev: &Event, out: &mut impl FnMut(Out)) {
        match ev {
            Event::Kernel(k) => {
                let st = self
                    .threads
                    .get_or_insert_with(k.thread, ThreadState::default);
                st.pending.push(*k);
                if st.pending.len() > MAX_PENDING {
                    for k in st.pending.drain(..MAX_PENDING / 2) {
                        out(Out::Kernel(k, None));
                    }
                }
            }
            Event::Range(r) => self.close(r, out),
            other => out(Out::Other(other)),
        }
    }

    #[inline]
    fn close(&mut self, r: &RangeEv, out: &mut impl FnMut(Out)) {
        let st = self
            .threads
            .get_or_insert_with(r.thread, ThreadState::default);
        let d = r.depth as usize;
        let total = r.end - r.start;
        if st.child.len() < d + 2 {
            st.child.resize(d + 2, (0, 0));
        }
        let (host_children, dev_children) = std::mem::take(&mut st.child[d + 1]);
        let is_op = r.cat == RangeCat::Op as u8;
        let mut ext_id = 0;
        let mut dev_self = 0;
        if is_op {
            self.next_ext += 1;
            ext_id = self.next_ext;
            let from = st
                .pending
                .iter()
                .rposition(|k| k.start < r.start)
                .map_or(0, |i| i + 1);
            let op = OpRef { ext_id, op: *r };
            for k in st.pending.drain(from..) {
                dev_self += k.end - k.start;
                out(Out::Kernel(k, Some(op)));
            }
        }
        let dev_total = dev_self + dev_children;
        let here = &mut st.child[d];
        here.0 += total;
        here.1 += dev_total;
        if d == 0 {
            for k in st.pending.drain(..) {
                out(Out::Kernel(k, None));
            }
        }
        out(Out::Range(RangeInfo {
            r: *r,
            ext_id,
            host_self: total.saturating_sub(host_children),
            dev_self,
            dev_total,
        }));
    }

    /// Releases every kernel still pending (call once after the last event).
    pub fn finish(&mut self, out: &mut impl FnMut(Out)) {
        for (_, st) in self.threads.iter_mut() {
            for k in st.pending.drain(..) {
                out(Out::Kernel(k, None));
            }
        }
    }
}
