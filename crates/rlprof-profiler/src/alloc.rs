//! A global allocator wrapper that records heap allocations and frees of at least
//! [`TrackingAllocator::MIN_BYTES`] as memory events (the `memory` content), attributed to the op
//! open on the allocating thread. For a CPU tensor engine such as candle, tensor storage is heap
//! memory, so this sees every tensor allocation and release without touching the engine.
//!
//! Cost when no collection is active: one relaxed atomic load per allocation. The hook never
//! records from inside the profiler itself (a per-thread busy flag), so it cannot re-enter the
//! recorder's locks.
//!
//! ```
//! use rlprof_profiler::alloc::TrackingAllocator;
//! #[global_allocator]
//! static GLOBAL: TrackingAllocator = TrackingAllocator::system();
//! fn main() {
//!     let v = vec![0u8; 1 << 16]; // recorded when a collection with `memory` is active
//!     drop(v);
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

static HOST_TRACKING: AtomicBool = AtomicBool::new(true);

/// Turns the recording of host allocations on or off for the whole process (on by default).
/// A job whose tensors live on a GPU turns it off: its memory events are then the device
/// allocations its backend reports, not host buffers under the same device index.
pub fn set_host_tracking(on: bool) {
    HOST_TRACKING.store(on, Ordering::Relaxed);
}

/// Records large allocations of the wrapped allocator `A`.
pub struct TrackingAllocator<A = System> {
    inner: A,
}

impl TrackingAllocator<System> {
    /// Allocations below this size are not recorded (small host objects, not tensors).
    pub const MIN_BYTES: usize = 4096;

    /// Wraps the system allocator.
    pub const fn system() -> TrackingAllocator<System> {
        TrackingAllocator { inner: System }
    }
}

#[inline]
fn record(free: bool, ptr: *mut u8, size: usize) {
    if size < TrackingAllocator::MIN_BYTES || ptr.is_null() {
        return;
    }
    crate::recorder::from_allocator(|| {
        if !HOST_TRACKING.load(Ordering::Relaxed) {
            return;
        }
        if free {
            crate::api::mem_free(ptr as u64, size as u64)
        } else {
            crate::api::mem_alloc(ptr as u64, size as u64)
        }
    });
}

// SAFETY: every call is forwarded to `inner` unchanged; recording only reads the pointer value.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TrackingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's guarantees for `layout` are passed on to `inner` unchanged.
        let p = unsafe { self.inner.alloc(layout) };
        record(false, p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        record(false, p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(true, ptr, layout.size());
        // SAFETY: `ptr` was allocated by `inner` (every allocation goes through it) with
        // `layout`, as the caller guarantees.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(true, ptr, layout.size());
        // SAFETY: as in `dealloc`, with the caller's guarantees for `new_size`.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if p.is_null() {
            // The old block is still live.
            record(false, ptr, layout.size());
        } else {
            record(false, p, new_size);
        }
        p
    }
}
