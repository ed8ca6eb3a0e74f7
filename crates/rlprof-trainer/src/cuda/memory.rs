//! candle's CUDA allocations as memory events.
//!
//! candle allocates device memory through cudarc, which (with candle's `dynamic-linking`) calls
//! the driver's `cuMemAllocAsync` / `cuMemAlloc_v2` and frees with `cuMemFreeAsync` /
//! `cuMemFree_v2`. This module defines those four symbols in the executable, so cudarc's calls
//! bind here; each forwards to the driver's own function (found with `dlsym(RTLD_NEXT)`) and, once
//! [`enable`]d, reports successful allocations and frees through the profiler's memory API
//! (attributed to the op open on the thread, recorded only while a `memory` collection is
//! active). The sizes of live allocations are kept so that a free reports its size.

use candle_core::cuda::cudarc::driver::sys::{CUdeviceptr, CUresult, CUstream};
use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Starts reporting device allocations (the table of live sizes starts empty: frees of earlier
/// allocations are reported with size 0).
pub fn enable() {
    // Referenced from code that is surely linked, so that the linker takes these definitions
    // (and binds cudarc's calls to them) before it reaches the driver library.
    std::hint::black_box([
        cuMemAllocAsync as *const () as usize,
        cuMemAlloc_v2 as *const () as usize,
        cuMemFreeAsync as *const () as usize,
        cuMemFree_v2 as *const () as usize,
    ]);
    ENABLED.store(true, Ordering::Relaxed);
}

fn live() -> &'static Mutex<HashMap<u64, u64>> {
    static LIVE: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

fn on_alloc(addr: u64, bytes: u64) {
    if ENABLED.load(Ordering::Relaxed) {
        live().lock().expect("cuda allocations").insert(addr, bytes);
        rlprof_profiler::mem_alloc(addr, bytes);
    }
}

fn on_free(addr: u64) {
    if ENABLED.load(Ordering::Relaxed) {
        let bytes = live()
            .lock()
            .expect("cuda allocations")
            .remove(&addr)
            .unwrap_or(0);
        rlprof_profiler::mem_free(addr, bytes);
    }
}

/// The driver's own definition of `name` (NUL-terminated): the next one after this executable,
/// else the one in `libcuda.so.1`.
fn driver_fn(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym/dlopen with NUL-terminated names; a null result is handled by the caller.
    unsafe {
        let f = libc::dlsym(libc::RTLD_NEXT, name.as_ptr());
        if !f.is_null() {
            return f;
        }
        let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if lib.is_null() {
            return std::ptr::null_mut();
        }
        libc::dlsym(lib, name.as_ptr())
    }
}

macro_rules! forward {
    ($name:literal, $ty:ty) => {{
        static F: OnceLock<usize> = OnceLock::new();
        let p = *F.get_or_init(|| driver_fn($name) as usize);
        if p == 0 {
            None
        } else {
            // SAFETY: `p` is the driver's definition of this very symbol, whose C signature is
            // `$ty` (the same declaration cudarc uses).
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

/// What an interposed call returns when the driver's function cannot be found.
fn not_found() -> CUresult {
    CUresult::CUDA_ERROR_NOT_FOUND
}

type AllocAsync = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
type AllocSync = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult;
type FreeAsync = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;
type FreeSync = unsafe extern "C" fn(CUdeviceptr) -> CUresult;

/// Interposes the driver's `cuMemAllocAsync`.
///
/// # Safety
/// As the driver function: `dptr` must be valid for a write.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    hStream: CUstream,
) -> CUresult {
    let Some(f) = forward!(c"cuMemAllocAsync", AllocAsync) else {
        return not_found();
    };
    // SAFETY: the driver's own function, called with the caller's arguments unchanged.
    let rc = unsafe { f(dptr, bytesize, hStream) };
    if rc == CUresult::CUDA_SUCCESS {
        // SAFETY: the driver wrote the new pointer to `dptr`, valid for reads as for its write.
        on_alloc(unsafe { *dptr }, bytesize as u64);
    }
    rc
}

/// Interposes the driver's `cuMemAlloc_v2`.
///
/// # Safety
/// As the driver function: `dptr` must be valid for a write.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    let Some(f) = forward!(c"cuMemAlloc_v2", AllocSync) else {
        return not_found();
    };
    // SAFETY: the driver's own function, called with the caller's arguments unchanged.
    let rc = unsafe { f(dptr, bytesize) };
    if rc == CUresult::CUDA_SUCCESS {
        // SAFETY: the driver wrote the new pointer to `dptr`, valid for reads as for its write.
        on_alloc(unsafe { *dptr }, bytesize as u64);
    }
    rc
}

/// Interposes the driver's `cuMemFreeAsync`.
///
/// # Safety
/// As the driver function.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream) -> CUresult {
    let Some(f) = forward!(c"cuMemFreeAsync", FreeAsync) else {
        return not_found();
    };
    // SAFETY: the driver's own function, called with the caller's arguments unchanged.
    let rc = unsafe { f(dptr, hStream) };
    if rc == CUresult::CUDA_SUCCESS {
        on_free(dptr);
    }
    rc
}

/// Interposes the driver's `cuMemFree_v2`.
///
/// # Safety
/// As the driver function.
#[unsafe(no_mangle)]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    let Some(f) = forward!(c"cuMemFree_v2", FreeSync) else {
        return not_found();
    };
    // SAFETY: the driver's own function, called with the caller's arguments unchanged.
    let rc = unsafe { f(dptr) };
    if rc == CUresult::CUDA_SUCCESS {
        on_free(dptr);
    }
    rc
}
