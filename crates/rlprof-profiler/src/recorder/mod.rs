//! The recorder: gating, thread-local record buffers and flushing to raw files.
//!
//! Cost model (the reason for the shape of this module):
//! - When no collection is active anywhere in the process, an instrumentation point loads one
//!   relaxed atomic ([`ANY_ACTIVE`]) and branches away.
//! - When one is active, the point reads the thread's binding (a `const` thread-local holding a
//!   raw pointer, no lazy init), checks the bound rank's generation and content flags, and
//!   appends a 24-byte record to the thread's fixed-capacity buffer with a plain store plus a
//!   release store of the length. No allocation, lock or formatting.
//! - A full buffer (every [`SLOT_CAPACITY`] records) is copied into a pooled hand-off buffer and
//!   queued for the background flusher thread, which writes it; only when the queue is full
//!   (the disk cannot keep up) does the recording thread write its buffer itself. The flusher
//!   also writes every thread's committed records every [`FLUSH_INTERVAL`], so a killed process
//!   loses at most that much plus the queue.
//!
//! Each rank of an in-process job is a [`RankContext`]; threads are bound to one with
//! [`crate::RankProfiler::bind_thread`]. Unbound threads record nothing.
//!
//! The locks are `parking_lot`'s, which do not poison: a panic on the flusher thread (or any
//! other) while it holds one never turns later instrumentation points on training threads into
//! panics; collection never breaks training.

mod hot_path;

pub(crate) use hot_path::{
    BusyGuard, current_op, depth, from_allocator, push, set_current_op, with_ctx,
};
pub use hot_path::{
    Open, ThreadBinding, active_gen, active_gen_structural, begin, begin_content, end, wants,
};

use crate::clock;
use crate::intern;
use crate::plan::{Caps, Contents};
use crate::raw::{RawWriter, TruncReason, Truncation};
use crate::record::{RECORD_SIZE, Record};
use parking_lot::{Condvar, Mutex};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

/// Records per thread buffer (24 B each: 48 KiB).
pub const SLOT_CAPACITY: usize = 2048;
/// Period of the background flusher.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Number of active collections in the process; the first thing every instrumentation point
/// reads.
pub(crate) static ANY_ACTIVE: AtomicU32 = AtomicU32::new(0);

static NEXT_GEN: AtomicU64 = AtomicU64::new(1);

/// [`RankContext::gate`]: content records are kept (no schedule, or an active iteration).
pub(crate) const GATE_RECORD: u32 = 0;
/// Content records are not taken (a scheduled role call outside its recorded iterations).
pub(crate) const GATE_SKIP: u32 = 1;
/// Content records are taken and then dropped (a schedule's warmup iterations).
pub(crate) const GATE_WARMUP: u32 = 2;
/// Generation given to warmup records: never a live collection's, so they are dropped at push.
const DROP_GEN: u64 = 0;

/// The schedule state of the role call open on a rank (see [`crate::iteration`]).
#[derive(Debug, Default)]
pub(crate) struct IterState {
    /// Schedule of the open role call and the iteration kind it counts.
    pub(crate) sched: Option<(crate::plan::Schedule, crate::plan::IterKind)>,
    /// Next iteration id.
    pub(crate) next: u64,
    /// One collection per schedule window (verl's discrete torch update), if set.
    pub(crate) split: Option<WindowSplit>,
}

/// Splits a scheduled role call's collection at each schedule window: when a window's first
/// recorded iteration begins and the open collection already holds a recorded iteration,
/// `hook` (the controller) closes it and opens the next, before the iteration records.
#[derive(Clone)]
pub(crate) struct WindowSplit {
    /// Called with the new window's first iteration id.
    pub(crate) hook: Arc<dyn Fn(u64) + Send + Sync>,
    /// Whether the open collection holds a recorded iteration.
    pub(crate) recorded: bool,
}

impl std::fmt::Debug for WindowSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowSplit")
            .field("recorded", &self.recorded)
            .finish_non_exhaustive()
    }
}

/// The recording state of one rank (one per rank, shared by its threads).
pub struct RankContext {
    /// Generation of the active collection, 0 when none.
    generation: AtomicU64,
    /// Content flags of the active collection.
    contents: AtomicU32,
    /// Schedule gate for content records (`GATE_*`); structural ranges ignore it.
    pub(crate) gate: AtomicU32,
    /// Schedule state of the open role call.
    pub(crate) iter: Mutex<IterState>,
    sink: Mutex<Option<Arc<Sink>>>,
    slots: Mutex<Vec<Arc<ThreadSlot>>>,
    next_thread: AtomicU32,
}

impl RankContext {
    pub(crate) fn new() -> Arc<RankContext> {
        Arc::new(RankContext {
            generation: AtomicU64::new(0),
            contents: AtomicU32::new(0),
            gate: AtomicU32::new(GATE_RECORD),
            iter: Mutex::new(IterState::default()),
            sink: Mutex::new(None),
            slots: Mutex::new(Vec::new()),
            next_thread: AtomicU32::new(0),
        })
    }

    /// Whether a collection is recording on this rank.
    pub fn is_recording(&self) -> bool {
        self.generation.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn new_slot(&self) -> Arc<ThreadSlot> {
        let tid = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let name = std::thread::current()
            .name()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("thread-{tid}"));
        let slot = Arc::new(ThreadSlot::new(tid, name));
        self.slots.lock().push(slot.clone());
        slot
    }

    pub(crate) fn remove_slot(&self, slot: &Arc<ThreadSlot>) {
        if let Some(sink) = self.sink.lock().clone() {
            slot.flush_into(&sink);
        }
        self.slots.lock().retain(|s| !Arc::ptr_eq(s, slot));
    }

    /// Starts recording into `writer`. Returns the sink (for stop).
    pub(crate) fn start(
        self: &Arc<Self>,
        writer: RawWriter,
        contents: Contents,
        caps: Caps,
    ) -> Arc<Sink> {
        let generation = NEXT_GEN.fetch_add(1, Ordering::Relaxed);
        let sink = Arc::new(Sink {
            generation,
            writer: Mutex::new(SinkWriter {
                raw: writer,
                strings_written: 0,
                threads_named: Vec::new(),
            }),
            events: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            caps,
            failed: AtomicBool::new(false),
            truncated: Mutex::new(None),
            ctx: Arc::downgrade(self),
            pending: Mutex::new(VecDeque::new()),
            pool: Mutex::new(Vec::new()),
        });
        *self.sink.lock() = Some(sink.clone());
        self.contents.store(contents.0, Ordering::Relaxed);
        self.gate.store(GATE_RECORD, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Release);
        ANY_ACTIVE.fetch_add(1, Ordering::Release);
        flusher().register(sink.clone());
        sink
    }

    /// Stops recording and flushes every thread's records; returns the sink for finishing.
    pub(crate) fn stop(&self) -> Option<Arc<Sink>> {
        let sink = self.sink.lock().take()?;
        self.generation.store(0, Ordering::Release);
        ANY_ACTIVE.fetch_sub(1, Ordering::Release);
        self.flush_all(&sink);
        flusher().unregister(&sink);
        Some(sink)
    }

    fn flush_all(&self, sink: &Arc<Sink>) {
        let slots = self.slots.lock().clone();
        for s in slots {
            s.flush_into(sink);
        }
    }
}

/// One thread's buffer. Written only by its owner thread (lock-free), read under `flush` by
/// whichever thread flushes.
pub(crate) struct ThreadSlot {
    buf: Box<[UnsafeCell<Record>]>,
    /// Committed records (owner: release store; flusher: acquire load).
    len: AtomicUsize,
    /// Generation the buffered records belong to (changed only under `flush`).
    generation: AtomicU64,
    /// Index up to which records were already written out.
    flush: Mutex<usize>,
    tid: u32,
    name: Arc<str>,
}

// SAFETY: the owner thread writes `buf[len]` before publishing it with a release store of
// `len`; other threads only read `buf[..len]` after an acquire load, under `flush`. Resets of
// `len` happen only under `flush`, by the owner.
unsafe impl Sync for ThreadSlot {}
// SAFETY: the slot owns its buffer and holds no thread-bound state; it is shared as an
// `Arc<ThreadSlot>` between its owner and the flushing threads (the `Sync` reasoning above), and
// dropped by whichever holds the last reference.
unsafe impl Send for ThreadSlot {}

impl ThreadSlot {
    fn new(tid: u32, name: String) -> ThreadSlot {
        let name: Arc<str> = name.into();
        ThreadSlot {
            buf: (0..SLOT_CAPACITY)
                .map(|_| UnsafeCell::new(Record::default()))
                .collect(),
            len: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            flush: Mutex::new(0),
            tid,
            name,
        }
    }

    /// Appends a record of generation `gen` (owner thread only).
    #[inline]
    fn push(&self, generation: u64, rec: Record, ctx: &RankContext) {
        let mut len = self.len.load(Ordering::Relaxed);
        if len == SLOT_CAPACITY || self.generation.load(Ordering::Relaxed) != generation {
            self.make_room(generation, ctx);
            len = self.len.load(Ordering::Relaxed);
        }
        // SAFETY: only the owner thread writes, and index `len` is not yet visible to readers.
        unsafe { *self.buf[len].get() = rec };
        self.len.store(len + 1, Ordering::Release);
    }

    /// Cold path: the buffer is full or holds another collection's records.
    #[cold]
    fn make_room(&self, generation: u64, ctx: &RankContext) {
        let sink = ctx.sink.lock().clone();
        let mut flushed = self.flush.lock();
        if let Some(sink) = sink.filter(|s| s.generation == self.generation.load(Ordering::Relaxed))
        {
            let len = self.len.load(Ordering::Acquire);
            if !sink.hand_off(self, *flushed, len) {
                sink.write(self, *flushed, len);
            }
        }
        *flushed = 0;
        self.len.store(0, Ordering::Relaxed);
        self.generation.store(generation, Ordering::Relaxed);
    }

    /// Writes the committed, not yet written records into `sink` (any thread).
    fn flush_into(&self, sink: &Sink) {
        let mut flushed = self.flush.lock();
        if self.generation.load(Ordering::Relaxed) != sink.generation {
            return;
        }
        let len = self.len.load(Ordering::Acquire);
        if len > *flushed {
            sink.write(self, *flushed, len);
            *flushed = len;
        }
    }
}

/// Where one collection's records go.
pub(crate) struct Sink {
    generation: u64,
    writer: Mutex<SinkWriter>,
    events: AtomicU64,
    dropped: AtomicU64,
    caps: Caps,
    failed: AtomicBool,
    truncated: Mutex<Option<Truncation>>,
    ctx: Weak<RankContext>,
    /// Full buffers handed to the flusher thread, oldest first (per thread, always older than
    /// that thread's live buffer: every write drains this queue first).
    pending: Mutex<VecDeque<Pending>>,
    /// Emptied hand-off buffers for reuse (no allocation once warm).
    pool: Mutex<Vec<Vec<Record>>>,
}

/// A full thread buffer waiting for the flusher.
struct Pending {
    tid: u32,
    name: Arc<str>,
    recs: Vec<Record>,
}

/// Hand-off queue bound: beyond it the recording thread writes its buffer itself (back-pressure
/// when the disk cannot keep up), so memory stays bounded at this many buffers per collection.
const MAX_PENDING: usize = 32;

struct SinkWriter {
    raw: RawWriter,
    strings_written: usize,
    threads_named: Vec<u32>,
}

/// Final state of a collection's raw file.
#[derive(Debug, Clone)]
pub struct SinkStats {
    /// Events written.
    pub events: u64,
    /// Events dropped (failed writes, records past a cap).
    pub dropped: u64,
    /// Raw bytes written.
    pub bytes: u64,
    /// Truncation, if a cap was hit.
    pub truncated: Option<Truncation>,
    /// Whether writing failed (the collection was disabled).
    pub failed: bool,
}

impl Sink {
    /// The committed records `from..to` of `slot` (caller holds the slot's flush lock).
    fn committed(slot: &ThreadSlot, from: usize, to: usize) -> &[Record] {
        if from >= to {
            return &[];
        }
        // SAFETY: records `from..to` were published by the owner (acquire load of len by caller)
        // and are not modified until `len` is reset under the flush lock, which the caller holds.
        // UnsafeCell<Record> has the layout of Record, so the committed range is a plain slice.
        unsafe { std::slice::from_raw_parts(slot.buf[from].get() as *const Record, to - from) }
    }

    /// Queues `slot`'s full buffer for the flusher thread instead of writing it on the recording
    /// thread. False when the queue is full (the caller then writes it itself).
    fn hand_off(&self, slot: &ThreadSlot, from: usize, to: usize) -> bool {
        let recs = Self::committed(slot, from, to);
        if recs.is_empty() {
            return true;
        }
        if self.pending.lock().len() >= MAX_PENDING {
            return false;
        }
        let mut buf = self
            .pool
            .lock()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SLOT_CAPACITY));
        buf.extend_from_slice(recs);
        self.pending.lock().push_back(Pending {
            tid: slot.tid,
            name: slot.name.clone(),
            recs: buf,
        });
        flusher().wake();
        true
    }

    /// Writes every queued buffer (caller holds the writer lock).
    fn drain_pending(&self, w: &mut SinkWriter) {
        loop {
            let Some(mut p) = self.pending.lock().pop_front() else {
                return;
            };
            self.write_locked(w, p.tid, &p.name, &p.recs);
            p.recs.clear();
            self.pool.lock().push(p.recs);
        }
    }

    /// Writes queued buffers (flusher thread).
    fn flush_pending(&self) {
        if self.pending.lock().is_empty() {
            return;
        }
        let mut w = self.writer.lock();
        self.drain_pending(&mut w);
    }

    fn write(&self, slot: &ThreadSlot, from: usize, to: usize) {
        let recs = Self::committed(slot, from, to);
        let mut w = self.writer.lock();
        self.drain_pending(&mut w);
        self.write_locked(&mut w, slot.tid, &slot.name, recs);
    }

    /// Writes records made off the recording threads (a device timeline's kernels, see
    /// [`crate::device`]) under thread `tid`; call between the rank's stop and [`Sink::finish`].
    pub(crate) fn write_external(&self, tid: u32, name: &str, recs: &[Record]) {
        let mut w = self.writer.lock();
        self.drain_pending(&mut w);
        self.write_locked(&mut w, tid, name, recs);
    }

    /// Writes one thread's records, applying caps and failure handling. A panic while writing
    /// (a bug, or a `tracing` layer that panics on the warning logged here) never reaches the
    /// caller, which may be a training thread or the flusher: it is caught, and the records it
    /// left neither written nor counted are counted as dropped, so that the end marker's
    /// `dropped` says what was lost and `analyse` marks the collection partial with the count.
    fn write_locked(&self, w: &mut SinkWriter, tid: u32, name: &str, recs: &[Record]) {
        // Both counters change only under the writer lock, which the caller holds.
        let before = self.events.load(Ordering::Relaxed) + self.dropped.load(Ordering::Relaxed);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.write_locked_unguarded(w, tid, name, recs)
        }));
        if caught.is_err() {
            let after = self.events.load(Ordering::Relaxed) + self.dropped.load(Ordering::Relaxed);
            let unaccounted = (recs.len() as u64).saturating_sub(after - before);
            self.dropped.fetch_add(unaccounted, Ordering::Relaxed);
        }
    }

    fn write_locked_unguarded(&self, w: &mut SinkWriter, tid: u32, name: &str, recs: &[Record]) {
        if recs.is_empty() {
            return;
        }
        let n = recs.len() as u64;
        if self.failed.load(Ordering::Relaxed) || self.truncated.lock().is_some() {
            self.dropped.fetch_add(n, Ordering::Relaxed);
            return;
        }
        let mut keep = recs.len();
        let mut trunc = None;
        let events = self.events.load(Ordering::Relaxed);
        if let Some(max) = self.caps.max_events
            && events + keep as u64 > max
        {
            keep = max.saturating_sub(events) as usize;
            trunc = Some(TruncReason::Events);
        }
        if let Some(max) = self.caps.max_bytes {
            let room = max.saturating_sub(w.raw.bytes_written() + 64) / RECORD_SIZE as u64;
            if (keep as u64) > room {
                keep = room as usize;
                trunc = Some(TruncReason::Bytes);
            }
        }
        let result = (|| {
            let sw = &mut *w;
            if !sw.threads_named.contains(&tid) {
                sw.raw.write_thread(tid, name)?;
                sw.threads_named.push(tid);
            }
            let mut pending: Vec<(u32, String)> = Vec::new();
            let from = sw.strings_written;
            sw.strings_written =
                intern::for_each_since(from, |id, s| pending.push((id, s.to_owned())));
            if !pending.is_empty() {
                sw.raw
                    .write_strings(pending.iter().map(|(i, s)| (*i, s.as_str())))?;
            }
            if keep > 0 {
                sw.raw.write_records(tid, &recs[..keep])?;
            }
            if let Some(reason) = trunc {
                let t = Truncation {
                    events_kept: events + keep as u64,
                    bytes_kept: sw.raw.bytes_written(),
                    reason,
                };
                sw.raw.write_truncated(t)?;
                *self.truncated.lock() = Some(t);
            }
            Ok::<(), crate::ProfilerError>(())
        })();
        self.events.fetch_add(keep as u64, Ordering::Relaxed);
        self.dropped
            .fetch_add((recs.len() - keep) as u64, Ordering::Relaxed);
        match result {
            Ok(()) => {
                if let Some(reason) = trunc {
                    self.disable_ctx();
                    tracing::warn!(
                        file = %w.raw.path().display(),
                        "collection truncated: {} cap reached after {} events; later events dropped",
                        if reason == TruncReason::Events { "max_events" } else { "max_bytes" },
                        events + keep as u64
                    );
                }
            }
            Err(e) => {
                self.dropped.fetch_add(keep as u64, Ordering::Relaxed);
                let first = !self.failed.swap(true, Ordering::Relaxed);
                self.disable_ctx();
                if first {
                    tracing::warn!(
                        "profiling data collection disabled for this collection, training continues: {e}"
                    );
                }
            }
        }
    }

    /// Stops recording on the owning rank without ending the collection (cap or failure).
    fn disable_ctx(&self) {
        if let Some(ctx) = self.ctx.upgrade() {
            let _ = ctx.generation.compare_exchange(
                self.generation,
                0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }

    /// The generation of the collection this sink writes.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Writes the trailing strings, final calibration and end marker.
    pub(crate) fn finish(&self) -> SinkStats {
        let mut w = self.writer.lock();
        self.drain_pending(&mut w);
        if !self.failed.load(Ordering::Relaxed) {
            // A panic here (on the rank's thread, which ends the collection) must not end
            // training: it is caught and the collection is failed, without an end marker, so
            // `analyse` reads it as partial.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut pending: Vec<(u32, String)> = Vec::new();
                let from = w.strings_written;
                w.strings_written =
                    intern::for_each_since(from, |id, s| pending.push((id, s.to_owned())));
                if !pending.is_empty() {
                    w.raw
                        .write_strings(pending.iter().map(|(i, s)| (*i, s.as_str())))?;
                }
                w.raw.write_calibration(clock::calibrate())?;
                w.raw.write_end(
                    self.events.load(Ordering::Relaxed),
                    self.dropped.load(Ordering::Relaxed),
                )
            }))
            .unwrap_or_else(|_| {
                Err(crate::ProfilerError::Io {
                    path: w.raw.path().to_path_buf(),
                    source: std::io::Error::other("a panic while writing the end of the file"),
                })
            });
            if let Err(e) = r
                && !self.failed.swap(true, Ordering::Relaxed)
            {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    tracing::warn!(
                        "profiling data collection failed while finishing, training continues: {e}"
                    );
                }));
            }
        }
        SinkStats {
            events: self.events.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            bytes: w.raw.bytes_written(),
            truncated: *self.truncated.lock(),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// Periodic flush: every thread of the rank, plus a calibration point.
    fn periodic_flush(&self) {
        self.flush_pending();
        let Some(ctx) = self.ctx.upgrade() else {
            return;
        };
        let slots = ctx.slots.lock().clone();
        for s in slots {
            s.flush_into(self);
        }
    }
}

/// The background flusher thread (started on first use).
struct Flusher {
    sinks: Mutex<Vec<Arc<Sink>>>,
    /// Set by [`Flusher::wake`] when a full buffer was handed off.
    woken: Mutex<bool>,
    cv: Condvar,
}

fn flusher() -> &'static Flusher {
    static F: OnceLock<&'static Flusher> = OnceLock::new();
    F.get_or_init(|| {
        let f: &'static Flusher = Box::leak(Box::new(Flusher {
            sinks: Mutex::new(Vec::new()),
            woken: Mutex::new(false),
            cv: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new()
            .name("rlprof-flusher".into())
            .spawn(move || f.run());
        if let Err(e) = spawned {
            tracing::warn!("cannot start the rlprof flusher thread ({e}); raw data is written when buffers fill and at stop only");
        }
        f
    })
}

impl Flusher {
    /// Writes handed-off buffers as they arrive, and every thread's committed records every
    /// [`FLUSH_INTERVAL`].
    fn run(&self) {
        let mut last = std::time::Instant::now();
        loop {
            {
                let mut woken = self.woken.lock();
                if !*woken {
                    let left = FLUSH_INTERVAL.saturating_sub(last.elapsed());
                    self.cv.wait_for(&mut woken, left);
                }
                *woken = false;
            }
            let sinks = self.sinks.lock().clone();
            let periodic = last.elapsed() >= FLUSH_INTERVAL;
            for s in &sinks {
                if periodic {
                    s.periodic_flush();
                } else {
                    s.flush_pending();
                }
            }
            if periodic {
                last = std::time::Instant::now();
            }
        }
    }

    /// Wakes the flusher for a handed-off buffer (cold path).
    fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_one();
    }

    fn register(&self, s: Arc<Sink>) {
        self.sinks.lock().push(s);
    }
    fn unregister(&self, s: &Arc<Sink>) {
        self.sinks.lock().retain(|x| !Arc::ptr_eq(x, s));
    }
}
