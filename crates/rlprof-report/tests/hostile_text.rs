//! Hostile files in torch_npu's text layout (issue 28): reads are capped by the bytes actually
//! read (not the size a file claims), files that are not regular files are refused without
//! being opened, optional files that cannot be read are notes, and what `kernel_details.csv`
//! costs in memory is its events, not its text. Every input is built here.
//!
//! The allocations of this test binary are counted (its own global allocator) to check the
//! memory bound; the tests take one lock so that one's allocations are not another's.

use rlprof_report::model::{Loaded, Track};
use rlprof_report::{Limits, load, render_json, summarise};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded as received.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `{root}/h_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT` (made).
fn out_dir(root: &Path) -> PathBuf {
    let d = root
        .join("h_1_20250101000000000_ascend_pt")
        .join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&d).unwrap();
    d
}

const KERNELS: &str = "Name,Accelerator Core,Start Time(us),Duration(us),Step Id\n\
                       MatMul_0,AI_CORE,1000.0,10.0,1\n\
                       Add_1,AI_VECTOR_CORE,1020.0,5.0,1\n";

fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn notes(l: &Loaded) -> String {
    l.profiles
        .iter()
        .flat_map(|p| p.notes.iter())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

fn kernels(l: &Loaded) -> usize {
    l.profiles[0]
        .events
        .iter()
        .filter(|e| e.track == Track::Kernel)
        .count()
}

/// A small size limit: `/proc/self/pagemap` claims 0 bytes and holds gigabytes.
fn small() -> Limits {
    Limits {
        max_bytes: 1 << 20,
        ..Limits::default()
    }
}

#[test]
fn a_kernel_table_linked_to_pagemap_stops_at_the_size_limit() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = out_dir(tmp.path());
    std::os::unix::fs::symlink("/proc/self/pagemap", d.join("kernel_details.csv")).unwrap();
    // The size limit, or pagemap's own refusal of the last, unaligned read: a clean error.
    let err = load(tmp.path(), &small()).unwrap_err().to_string();
    assert!(err.contains("kernel_details.csv: "), "{err}");
}

#[test]
fn optional_tables_linked_to_pagemap_are_notes() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = out_dir(tmp.path());
    std::fs::write(d.join("kernel_details.csv"), KERNELS).unwrap();
    for f in ["memory_record.csv", "op_statistic.csv"] {
        std::os::unix::fs::symlink("/proc/self/pagemap", d.join(f)).unwrap();
    }
    let loaded = load(tmp.path(), &small()).unwrap();
    assert_eq!(kernels(&loaded), 2);
    let n = notes(&loaded);
    assert!(
        n.contains("memory_record.csv") && n.contains("op_statistic.csv"),
        "{n}"
    );
    assert!(loaded.profiles[0].memory.is_empty());
    assert!(loaded.profiles[0].tables.is_empty());
}

#[test]
fn json_linked_to_dev_zero_and_fifos_are_refused_unopened() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = out_dir(tmp.path());
    std::fs::write(d.join("kernel_details.csv"), KERNELS).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("communication.json")).unwrap();
    std::os::unix::fs::symlink(
        "/dev/zero",
        d.parent().unwrap().join("profiler_info_3.json"),
    )
    .unwrap();
    mkfifo(&d.join("step_trace_time.csv"));
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    assert_eq!(kernels(&loaded), 2);
    let n = notes(&loaded);
    assert!(
        n.contains("communication.json: not a regular file (a device)"),
        "{n}"
    );
    assert!(
        n.contains("profiler_info_3.json: not a regular file"),
        "{n}"
    );
    assert!(
        n.contains("step_trace_time.csv: not a regular file (a FIFO)"),
        "{n}"
    );
}

#[test]
fn a_fifo_kernel_table_is_an_error_not_a_hang() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = out_dir(tmp.path());
    mkfifo(&d.join("kernel_details.csv"));
    let err = load(tmp.path(), &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file (a FIFO)"), "{err}");
}

#[test]
fn a_sparse_table_of_zeros_just_under_the_limit_is_a_note_and_small() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = out_dir(tmp.path());
    std::fs::write(d.join("kernel_details.csv"), KERNELS).unwrap();
    // Just under 1 GiB, a few KB on disk: one line of zeros.
    let f = std::fs::File::create(d.join("op_statistic.csv")).unwrap();
    f.set_len((1 << 30) - 1).unwrap();
    drop(f);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    let json = render_json(&summarise(&loaded)).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert!(
        notes(&loaded).contains("CSV line length"),
        "{}",
        notes(&loaded)
    );
    assert!(peak < 64 << 20, "peak {peak} bytes");
    assert!(json.len() < 1 << 20);
}

#[test]
fn kernel_details_costs_its_events_not_its_text() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let d = out_dir(tmp.path());
    // Rows as torch_npu writes them, about 35 bytes each, in time order.
    let rows = 200_000;
    let mut text = String::from("Name,Accelerator Core,Start Time(us),Duration(us),Step Id\n");
    for i in 0..rows {
        let name = ["MatMul_0", "Add_1", "Cast_2"][i % 3];
        text.push_str(&format!(
            "{name},AI_CORE,{}.5,1.25,{}\n",
            1000 + i * 2,
            i / 1000
        ));
    }
    let path = d.join("kernel_details.csv");
    std::fs::write(&path, &text).unwrap();
    let size = text.len();
    drop(text);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let loaded = load(tmp.path(), &Limits::default()).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(kernels(&loaded), rows);
    assert_eq!(loaded.profiles[0].steps.len(), rows / 1000);
    assert!(
        peak <= 2 * size,
        "peak {peak} bytes for a file of {size} bytes"
    );
}
