//! Thread binding and the hot path: the `const` thread-local binding of a thread to its rank and
//! buffer, and the instrumentation points (gating checks, range open/close, record pushes,
//! allocation-hook re-entrancy guard, memory attribution op). See the cost model in
//! [`super`].

use super::{ANY_ACTIVE, DROP_GEN, GATE_RECORD, GATE_WARMUP, RankContext, ThreadSlot};
use crate::clock;
use crate::plan::{Content, Contents};
use crate::record::Record;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

struct Binding {
    ctx: Cell<*const RankContext>,
    slot: Cell<*const ThreadSlot>,
    /// Op currently open on this thread (memory attribution).
    cur_op: Cell<u32>,
    depth: Cell<u16>,
    /// Inside the recorder or the controller on this thread: allocation hooks must not record
    /// (they would re-enter locks this thread holds).
    busy: Cell<bool>,
}

thread_local! {
    static BINDING: Binding = const {
        Binding {
            ctx: Cell::new(std::ptr::null()),
            slot: Cell::new(std::ptr::null()),
            cur_op: Cell::new(0),
            depth: Cell::new(0),
            busy: Cell::new(false),
        }
    };
}

/// Keeps the current thread bound to a rank; unbinds on drop. Not `Send`.
pub struct ThreadBinding {
    ctx: Arc<RankContext>,
    slot: Arc<ThreadSlot>,
    prev: (*const RankContext, *const ThreadSlot),
}

impl ThreadBinding {
    pub(crate) fn bind(ctx: Arc<RankContext>) -> ThreadBinding {
        let slot = ctx.new_slot();
        let prev = BINDING.with(|b| {
            let p = (b.ctx.get(), b.slot.get());
            b.ctx.set(Arc::as_ptr(&ctx));
            b.slot.set(Arc::as_ptr(&slot));
            p
        });
        ThreadBinding { ctx, slot, prev }
    }
}

impl Drop for ThreadBinding {
    fn drop(&mut self) {
        BINDING.with(|b| {
            b.ctx.set(self.prev.0);
            b.slot.set(self.prev.1);
        });
        self.ctx.remove_slot(&self.slot);
    }
}

/// Token returned by [`begin`]: the generation and start ticks of an open range.
#[derive(Debug, Clone, Copy)]
pub struct Open {
    generation: u64,
    start: u64,
}

impl Open {
    /// Generation of the collection the range belongs to.
    #[inline(always)]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Start ticks.
    #[inline(always)]
    pub fn start(&self) -> u64 {
        self.start
    }
}

/// Whether the current thread's rank is recording `content`. One relaxed load when nothing
/// records.
#[inline(always)]
pub fn wants(content: Content) -> bool {
    if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
        return false;
    }
    wants_slow(content)
}

#[inline(never)]
fn wants_slow(content: Content) -> bool {
    BINDING.with(|b| {
        let ctx = b.ctx.get();
        if ctx.is_null() {
            return false;
        }
        // SAFETY: the binding keeps the context alive while the pointer is set.
        let ctx = unsafe { &*ctx };
        ctx.generation.load(Ordering::Relaxed) != 0
            && ctx.gate.load(Ordering::Relaxed) == GATE_RECORD
            && Contents(ctx.contents.load(Ordering::Relaxed)).has(content)
    })
}

/// Opens a structural range (step, phase, role call: never gated by a schedule) if the current
/// thread's rank is recording (None otherwise).
#[inline(always)]
pub fn begin(content: Option<Content>) -> Option<Open> {
    if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    begin_slow(content, false)
}

/// Opens a content range (op, collective): like [`begin`], and subject to the schedule gate.
#[inline(always)]
pub fn begin_content(content: Option<Content>) -> Option<Open> {
    if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    begin_slow(content, true)
}

/// The generation a gated record takes under the rank's schedule gate.
#[inline]
fn gated_gen(ctx: &RankContext, generation: u64) -> Option<u64> {
    match ctx.gate.load(Ordering::Relaxed) {
        GATE_RECORD => Some(generation),
        GATE_WARMUP => Some(DROP_GEN),
        _ => None,
    }
}

#[inline]
fn begin_slow(content: Option<Content>, gated: bool) -> Option<Open> {
    BINDING.with(|b| {
        let ctx = b.ctx.get();
        if ctx.is_null() {
            return None;
        }
        // SAFETY: see `wants_slow`.
        let ctx = unsafe { &*ctx };
        let generation = ctx.generation.load(Ordering::Acquire);
        if generation == 0 {
            return None;
        }
        if let Some(c) = content
            && !Contents(ctx.contents.load(Ordering::Relaxed)).has(c)
        {
            return None;
        }
        let generation = if gated {
            gated_gen(ctx, generation)?
        } else {
            generation
        };
        b.depth.set(b.depth.get().wrapping_add(1));
        Some(Open {
            generation,
            start: clock::now(),
        })
    })
}

/// Closes a range opened by [`begin`]: appends a record `[start, now)`.
#[inline]
pub fn end(open: Open, kind: u8, cat: u8, name: u32) -> u64 {
    let now = clock::now();
    BINDING.with(|b| {
        let depth = b.depth.get().wrapping_sub(1);
        b.depth.set(depth);
        push_in(
            b,
            open.generation,
            Record {
                ts: open.start,
                a: now,
                name,
                kind,
                cat,
                aux: depth,
            },
        );
    });
    now
}

/// Appends one record to the current thread's buffer if `gen` is still recording.
#[inline]
pub(crate) fn push(generation: u64, rec: Record) {
    BINDING.with(|b| push_in(b, generation, rec));
}

#[inline]
fn push_in(b: &Binding, generation: u64, rec: Record) {
    let (ctx, slot) = (b.ctx.get(), b.slot.get());
    if ctx.is_null() || slot.is_null() {
        return;
    }
    // SAFETY: the binding keeps both alive while the pointers are set.
    let (ctx, slot) = unsafe { (&*ctx, &*slot) };
    if ctx.generation.load(Ordering::Relaxed) != generation {
        return;
    }
    let was = b.busy.replace(true);
    slot.push(generation, rec, ctx);
    b.busy.set(was);
}

/// Marks this thread busy (inside profiler code) until the guard drops.
pub(crate) struct BusyGuard(bool);

impl BusyGuard {
    pub(crate) fn enter() -> BusyGuard {
        BusyGuard(BINDING.try_with(|b| b.busy.replace(true)).unwrap_or(true))
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let was = self.0;
        let _ = BINDING.try_with(|b| b.busy.set(was));
    }
}

/// Runs `f` for an allocation hook unless this thread is inside profiler code (re-entrancy) or
/// no collection is active; `f` runs with the thread marked busy.
#[inline]
pub(crate) fn from_allocator(f: impl FnOnce()) {
    if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
        return;
    }
    let enter = BINDING
        .try_with(|b| !b.ctx.get().is_null() && !b.busy.replace(true))
        .unwrap_or(false);
    if enter {
        f();
        let _ = BINDING.try_with(|b| b.busy.set(false));
    }
}

/// The generation the current thread would record a content record (kernel, memory) into for
/// `content` now, under the schedule gate (None = not recording).
#[inline(always)]
pub fn active_gen(content: Option<Content>) -> Option<u64> {
    active_gen_inner(content, true)
}

/// Like [`active_gen`] for structural records (instants, counters): not gated.
#[inline(always)]
pub fn active_gen_structural() -> Option<u64> {
    active_gen_inner(None, false)
}

#[inline(always)]
fn active_gen_inner(content: Option<Content>, gated: bool) -> Option<u64> {
    if ANY_ACTIVE.load(Ordering::Relaxed) == 0 {
        return None;
    }
    BINDING.with(|b| {
        let ctx = b.ctx.get();
        if ctx.is_null() {
            return None;
        }
        // SAFETY: see `wants_slow`.
        let ctx = unsafe { &*ctx };
        let generation = ctx.generation.load(Ordering::Acquire);
        if generation == 0 {
            return None;
        }
        match content {
            Some(c) if !Contents(ctx.contents.load(Ordering::Relaxed)).has(c) => None,
            _ if gated => gated_gen(ctx, generation),
            _ => Some(generation),
        }
    })
}

/// Runs `f` on the current thread's bound rank context, if any.
pub(crate) fn with_ctx<T>(f: impl FnOnce(&RankContext) -> T) -> Option<T> {
    BINDING.with(|b| {
        let ctx = b.ctx.get();
        if ctx.is_null() {
            return None;
        }
        // SAFETY: see `wants_slow`.
        Some(f(unsafe { &*ctx }))
    })
}

/// The current thread's range nesting depth (ranges open on it that were recorded).
#[inline]
pub(crate) fn depth() -> u16 {
    BINDING.with(|b| b.depth.get())
}

/// Sets the op used for memory attribution on this thread; returns the previous one.
#[inline]
pub(crate) fn set_current_op(name: u32) -> u32 {
    BINDING.with(|b| b.cur_op.replace(name))
}

/// The op open on this thread (0 = none).
#[inline]
pub(crate) fn current_op() -> u32 {
    BINDING.with(|b| b.cur_op.get())
}
