//! The text layout's CSV headers (the columns msprof-analyze and MindStudio Insight read) and
//! the CSV field helpers shared by its writers.

use crate::ExportError;
use crate::decode::Index;
use crate::dense::DenseMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

/// Base header of `kernel_details.csv` (without Step Id and the shape columns).
pub(super) const KERNEL_BASE: [&str; 9] = [
    "Device_id",
    "Name",
    "Type",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Num",
    "",
];
pub(super) const KERNEL_SHAPES: [&str; 6] = [
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
];
/// Level1+ per-kernel metrics appended to `kernel_details.csv`.
pub const KERNEL_METRICS: [&str; 4] = [
    "FLOPs",
    "Memory Bytes",
    "Achieved GFLOP/s",
    "Achieved Bandwidth(GB/s)",
];
/// `operator_details.csv` header.
pub const OPERATOR_DETAILS: [&str; 9] = [
    "Name",
    "Input Shapes",
    "Call Stack",
    "Host Self Duration(us)",
    "Host Total Duration(us)",
    "Device Self Duration(us)",
    "Device Total Duration(us)",
    "Device Self Duration With AICore(us)",
    "Device Total Duration With AICore(us)",
];
/// `step_trace_time.csv` header.
pub const STEP_TRACE: [&str; 11] = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
];
/// `memory_record.csv` header.
pub const MEMORY_RECORD: [&str; 7] = [
    "Component",
    "Timestamp(us)",
    "Total Allocated(MB)",
    "Total Reserved(MB)",
    "Total Active(MB)",
    "Stream Ptr",
    "Device Type",
];
/// `operator_memory.csv` header.
pub const OPERATOR_MEMORY: [&str; 15] = [
    "Name",
    "Size(KB)",
    "Allocation Time(us)",
    "Release Time(us)",
    "Active Release Time(us)",
    "Duration(us)",
    "Active Duration(us)",
    "Allocation Total Allocated(MB)",
    "Allocation Total Reserved(MB)",
    "Allocation Total Active(MB)",
    "Release Total Allocated(MB)",
    "Release Total Reserved(MB)",
    "Release Total Active(MB)",
    "Stream Ptr",
    "Device Type",
];
/// `op_statistic.csv` header.
pub const OP_STATISTIC: [&str; 8] = [
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
];
/// `api_statistic.csv` header.
pub const API_STATISTIC: [&str; 8] = [
    "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance",
];

/// Microseconds with 3 decimals from ns.
pub fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The CSV field of a name id, escaped once.
pub(super) fn csv_name<'a>(names: &'a mut DenseMap<Box<[u8]>>, idx: &Index, id: u32) -> &'a [u8] {
    names.get_or_insert_with(id, || {
        let mut v = Vec::new();
        crate::text_format::csv_field(&mut v, idx.name(id));
        v.into_boxed_slice()
    })
}

pub(super) fn csv_writer(
    path: &Path,
    header: &[&str],
) -> Result<csv::Writer<BufWriter<File>>, ExportError> {
    let f = rlprof_profiler::collection::safe_fs::create(path).map_err(ExportError::io(path))?;
    let mut w = csv::Writer::from_writer(BufWriter::with_capacity(1 << 16, f));
    w.write_record(header).map_err(|source| ExportError::Csv {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(w)
}
