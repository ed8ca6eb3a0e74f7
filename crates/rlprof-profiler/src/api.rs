//! The instrumentation API: free functions and RAII guards that record into the collection of
//! the calling thread's rank (see [`crate::RankProfiler::bind_thread`]).
//!
//! Every function here starts with the one-relaxed-load check of [`crate::recorder::begin`]; when
//! nothing collects they cost a load and a branch, and the guards are empty.
//!
//! ```
//! use rlprof_profiler::{op, phase, name, intern};
//! let module = intern("model.layers.0.mlp.up_proj");
//! {
//!     let _p = phase("gen");
//!     let _o = op(name!("matmul"), module);
//!     // ... the work ...
//! }
//! ```

use crate::intern::{self, NameId};
use crate::plan::{Content, IterAction, IterKind};
use crate::record::{Kind, RangeCat, Record};
use crate::recorder::{self, Open};

/// Current raw ticks (for [`kernel`] start/end stamps).
#[inline(always)]
pub fn now() -> u64 {
    crate::clock::now()
}

/// Whether the calling thread's rank records `content` right now (e.g. test
/// `wants(Content::Shapes)` before computing a shape id).
#[inline(always)]
pub fn wants(content: Content) -> bool {
    recorder::wants(content)
}

/// A host range; records `[enter, drop)` when it was opened inside a collection.
#[must_use = "the range ends when the guard is dropped"]
pub struct RangeGuard {
    open: Option<Open>,
    name: NameId,
    cat: RangeCat,
}

impl RangeGuard {
    /// Opens a range with an interned name.
    #[inline(always)]
    pub fn new(name: NameId, cat: RangeCat) -> RangeGuard {
        let open = if cat.is_structural() {
            recorder::begin(None)
        } else {
            recorder::begin_content(None)
        };
        RangeGuard { open, name, cat }
    }
}

impl Drop for RangeGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            recorder::end(o, Kind::Range as u8, self.cat as u8, self.name.0);
        }
    }
}

/// A user range with an interned name.
#[inline(always)]
pub fn scope(name: NameId) -> RangeGuard {
    RangeGuard::new(name, RangeCat::User)
}

/// A range named with one of verl's stage labels inside a stage (`mini_batch{i}` around each
/// update mini-batch, `train_batch` inside it, as verl's `TrainingWorker` names them): a user
/// range, gated like other content by a schedule; the name is formatted and interned only when
/// a collection is recording. With the `nsys` tool it is also an NVTX range, in verl's colour
/// where verl gives one (`train_batch` red; see [`crate::nvtx::colour`]).
///
/// ```
/// let _mb = rlprof_profiler::api::label(format_args!("mini_batch{}", 0));
/// ```
#[inline]
pub fn label(name: std::fmt::Arguments<'_>) -> LabelGuard {
    let nvtx = crate::nvtx::NvtxRange::push(name);
    let idle = RangeGuard {
        open: None,
        name: NameId(0),
        cat: RangeCat::User,
    };
    if recorder::ANY_ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return LabelGuard {
            range: idle,
            _nvtx: nvtx,
        };
    }
    let range = match recorder::begin_content(None) {
        Some(open) => RangeGuard {
            open: Some(open),
            name: intern::intern(&name.to_string()),
            cat: RangeCat::User,
        },
        None => idle,
    };
    LabelGuard { range, _nvtx: nvtx }
}

/// Guard of a [`label`]: its recorded range and, for `nsys`, its NVTX range.
#[must_use = "the range ends when the guard is dropped"]
pub struct LabelGuard {
    range: RangeGuard,
    _nvtx: crate::nvtx::NvtxRange,
}

impl LabelGuard {
    /// Whether the range is being recorded.
    pub fn is_recording(&self) -> bool {
        self.range.open.is_some()
    }
}

/// A trainer phase marker (`gen`, `reward`, `old_log_prob`, `ref`, `adv`, `update_actor`,
/// `update_weights`, ...). The name is interned only when a collection is recording; with the
/// `nsys` tool it is also an NVTX range.
pub fn phase(name: &'static str) -> PhaseGuard {
    let open = recorder::begin(None);
    PhaseGuard {
        range: RangeGuard {
            name: if open.is_some() {
                intern::intern(name)
            } else {
                NameId::NONE
            },
            open,
            cat: RangeCat::Phase,
        },
        _nvtx: crate::nvtx::NvtxRange::push(name),
    }
}

/// Guard of a [`phase`]: its recorded range and, for `nsys`, its NVTX range.
#[must_use = "the phase ends when the guard is dropped"]
pub struct PhaseGuard {
    range: RangeGuard,
    _nvtx: crate::nvtx::NvtxRange,
}

impl PhaseGuard {
    /// The recorded range.
    pub fn range(&self) -> &RangeGuard {
        &self.range
    }
}

/// A framework (tensor) op: name, module path, and optionally shapes/dtypes. Recorded when the
/// collection has the `cpu` content; module and shapes per the `module`/`shapes` contents.
#[must_use = "the op ends when the guard is dropped"]
pub struct OpGuard {
    open: Option<Open>,
    name: NameId,
    module: NameId,
    shapes: NameId,
    dtypes: NameId,
    seq: u32,
    backward: bool,
    prev_op: u32,
}

/// Opens an op range. Memory events on this thread while it is open are attributed to it.
#[inline(always)]
pub fn op(name: NameId, module: NameId) -> OpGuard {
    let open = recorder::begin_content(Some(Content::Cpu));
    let prev_op = if open.is_some() {
        recorder::set_current_op(name.0)
    } else {
        0
    };
    OpGuard {
        open,
        name,
        module,
        shapes: NameId::NONE,
        dtypes: NameId::NONE,
        seq: 0,
        backward: false,
        prev_op,
    }
}

impl OpGuard {
    /// Whether this op is being recorded (compute shapes only then).
    #[inline(always)]
    pub fn is_recording(&self) -> bool {
        self.open.is_some()
    }

    /// Attaches input shapes (from [`crate::intern_shapes`]).
    #[inline]
    pub fn shapes(&mut self, shapes: NameId) -> &mut Self {
        self.shapes = shapes;
        self
    }

    /// Attaches input dtypes (an interned `"float32;float32"`).
    #[inline]
    pub fn dtypes(&mut self, dtypes: NameId) -> &mut Self {
        self.dtypes = dtypes;
        self
    }

    /// Links a forward op and its backward op (PyTorch's autograd `Sequence number`): both carry
    /// the same non-zero `seq` (unique per thread and collection), the backward one with
    /// `backward` set. Exporters draw a `fwdbwd` flow from the forward op to the backward op.
    #[inline]
    pub fn seq(&mut self, seq: u32, backward: bool) -> &mut Self {
        self.seq = seq;
        self.backward = backward;
        self
    }
}

impl Drop for OpGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            recorder::set_current_op(self.prev_op);
            recorder::end(o, Kind::Range as u8, RangeCat::Op as u8, self.name.0);
            if self.module != NameId::NONE
                || self.shapes != NameId::NONE
                || self.dtypes != NameId::NONE
                || self.seq != 0
            {
                recorder::push(
                    o.generation(),
                    Record {
                        ts: self.module.0 as u64 | (self.shapes.0 as u64) << 32,
                        a: self.dtypes.0 as u64,
                        name: self.seq,
                        kind: Kind::Ext as u8,
                        cat: self.backward as u8,
                        aux: 0,
                    },
                );
            }
        }
    }
}

/// Records a device kernel that ran `[start, end)` (ticks from [`now`]), with its FLOPs and
/// bytes moved when known (0 = unknown). Recorded with the `npu`/`cuda` content.
#[inline]
pub fn kernel(name: NameId, start: u64, end: u64, flops: u64, bytes: u64) {
    if let Some(generation) = recorder::active_gen(Some(Content::Npu)) {
        recorder::push(
            generation,
            Record {
                ts: start,
                a: end,
                name: name.0,
                kind: Kind::Kernel as u8,
                cat: 1,
                aux: 0,
            },
        );
        if flops != 0 || bytes != 0 {
            recorder::push(
                generation,
                Record {
                    ts: flops,
                    a: bytes,
                    name: 0,
                    kind: Kind::Ext as u8,
                    cat: 0,
                    aux: 0,
                },
            );
        }
    }
}

fn memory(free: bool, addr: u64, bytes: u64) {
    if let Some(generation) = recorder::active_gen(Some(Content::Memory)) {
        let ts = now();
        recorder::push(
            generation,
            Record {
                ts,
                a: 0,
                name: recorder::current_op(),
                kind: Kind::Memory as u8,
                cat: free as u8,
                aux: 0,
            },
        );
        recorder::push(
            generation,
            Record {
                ts: addr,
                a: bytes,
                name: 0,
                kind: Kind::Ext as u8,
                cat: 0,
                aux: 0,
            },
        );
    }
}

/// Records an allocation of `bytes` at `addr`, attributed to the op open on this thread.
#[inline]
pub fn mem_alloc(addr: u64, bytes: u64) {
    memory(false, addr, bytes)
}

/// Records the release of the allocation at `addr`.
#[inline]
pub fn mem_free(addr: u64, bytes: u64) {
    memory(true, addr, bytes)
}

/// A collective communication op; records `[enter, drop)` with bytes, group and wait time.
#[must_use = "the collective ends when the guard is dropped"]
pub struct CommGuard {
    open: Option<Open>,
    name: NameId,
    group: NameId,
    bytes: u64,
    wait: u64,
    peer: u16,
}

/// Opens a collective (`all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`, `barrier`).
#[inline(always)]
pub fn comm(name: NameId, group: NameId, bytes: u64) -> CommGuard {
    CommGuard {
        open: recorder::begin_content(None),
        name,
        group,
        bytes,
        wait: 0,
        peer: 0,
    }
}

impl CommGuard {
    /// Ticks spent waiting for the slowest peer (see the communicator for the method).
    #[inline]
    pub fn set_wait_ticks(&mut self, ticks: u64) {
        self.wait = ticks;
    }

    /// For point-to-point ops: the peer rank.
    #[inline]
    pub fn set_peer(&mut self, rank: u16) {
        self.peer = rank.saturating_add(1);
    }

    /// Whether this collective is being recorded.
    pub fn is_recording(&self) -> bool {
        self.open.is_some()
    }
}

impl Drop for CommGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            let generation = o.generation();
            recorder::end(o, Kind::Comm as u8, 0, self.name.0);
            recorder::push(
                generation,
                Record {
                    ts: self.bytes,
                    a: self.wait,
                    name: self.group.0,
                    kind: Kind::Ext as u8,
                    cat: 0,
                    aux: self.peer,
                },
            );
        }
    }
}

/// An instant event with a value.
#[inline]
pub fn instant(name: NameId, value: u64) {
    if let Some(generation) = recorder::active_gen_structural() {
        recorder::push(
            generation,
            Record {
                ts: now(),
                a: value,
                name: name.0,
                kind: Kind::Instant as u8,
                cat: 0,
                aux: 0,
            },
        );
    }
}

/// A counter sample.
#[inline]
pub fn counter(name: NameId, value: u64) {
    if let Some(generation) = recorder::active_gen_structural() {
        recorder::push(
            generation,
            Record {
                ts: now(),
                a: value,
                name: name.0,
                kind: Kind::Counter as u8,
                cat: 0,
                aux: 0,
            },
        );
    }
}

/// Marks one inner iteration of a role call (a decode step of `generate_sequences`, a
/// micro-batch or mini-batch of a log-prob pass or of `update_actor`).
///
/// When the role has a `schedule`, the iteration's id (0-based within the role call) decides
/// whether the content records inside it (ops, kernels, memory, collectives) are kept, run and
/// dropped (warmup) or not taken; outside iterations of a scheduled call they are not taken.
/// Recorded iterations leave a marker range (`decode_step` ...) with their id, so outputs show
/// which iterations were collected. Without a schedule this costs one relaxed load (nothing
/// collecting) or a short lock per iteration (collecting).
///
/// ```
/// use rlprof_profiler::{iteration, plan::IterKind};
/// for _step in 0..3 {
///     let _it = iteration(IterKind::DecodeStep);
///     // ... one decode step ...
/// }
/// ```
#[inline]
pub fn iteration(kind: IterKind) -> IterationGuard {
    if recorder::ANY_ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return IterationGuard::NONE;
    }
    iteration_slow(kind)
}

#[cold]
fn iteration_slow(kind: IterKind) -> IterationGuard {
    recorder::with_ctx(|ctx| {
        let mut st = ctx.iter.lock();
        match st.sched {
            Some((sched, counted)) if counted == kind => {
                let id = st.next;
                st.next += 1;
                let action = sched.action(id);
                let split = match st.split.as_mut() {
                    Some(s) if action == IterAction::Record => {
                        let hook = (s.recorded && sched.starts_window(id)).then(|| s.hook.clone());
                        s.recorded = true;
                        hook
                    }
                    _ => None,
                };
                drop(st);
                if let Some(hook) = split {
                    // A new window: the controller closes the collection and opens the next.
                    hook(id);
                }
                let gate = match action {
                    IterAction::Record => recorder::GATE_RECORD,
                    IterAction::Warmup => recorder::GATE_WARMUP,
                    IterAction::Skip => recorder::GATE_SKIP,
                };
                ctx.gate.store(gate, std::sync::atomic::Ordering::Relaxed);
                IterationGuard {
                    open: if action == IterAction::Record {
                        recorder::begin(None)
                    } else {
                        None
                    },
                    id,
                    kind,
                    scheduled: true,
                }
            }
            _ => IterationGuard::NONE,
        }
    })
    .unwrap_or(IterationGuard::NONE)
}

/// One inner iteration; see [`iteration`].
#[must_use = "the iteration ends when the guard is dropped"]
pub struct IterationGuard {
    open: Option<Open>,
    id: u64,
    kind: IterKind,
    scheduled: bool,
}

impl IterationGuard {
    const NONE: IterationGuard = IterationGuard {
        open: None,
        id: 0,
        kind: IterKind::DecodeStep,
        scheduled: false,
    };

    /// Whether this iteration's content is recorded (false when nothing collects, and for
    /// iterations a schedule skips or warms up).
    pub fn is_recorded(&self) -> bool {
        self.open.is_some()
    }

    /// The iteration's id within its role call (0 when not scheduled).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for IterationGuard {
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            let generation = o.generation();
            let name = intern::intern(self.kind.as_str());
            recorder::end(o, Kind::Range as u8, RangeCat::Iteration as u8, name.0);
            recorder::push(
                generation,
                Record {
                    ts: self.id,
                    a: 0,
                    name: 0,
                    kind: Kind::Ext as u8,
                    cat: 0,
                    aux: 0,
                },
            );
        }
        if self.scheduled {
            recorder::with_ctx(|ctx| {
                ctx.gate
                    .store(recorder::GATE_SKIP, std::sync::atomic::Ordering::Relaxed)
            });
        }
    }
}
