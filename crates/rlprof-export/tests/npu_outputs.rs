//! npu outputs: the level/content matrix of files and columns, exact headers, and counts and
//! durations that match the raw data.

mod support;

use rlprof_export::analyse_collection;
use rlprof_export::npu::{self, files_for, kernel_header};
use rlprof_profiler::plan::{Content, Level};
use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use support::*;

const ALL_FILES: [&str; 10] = [
    "trace_view.json",
    "kernel_details.csv",
    "operator_details.csv",
    "step_trace_time.csv",
    "op_statistic.csv",
    "api_statistic.csv",
    "memory_record.csv",
    "operator_memory.csv",
    "communication.json",
    "communication_matrix.json",
];

fn present(dir: &std::path::Path) -> Vec<String> {
    let out = dir.join(npu::OUTPUT_DIR);
    let mut v: Vec<String> = ALL_FILES
        .iter()
        .filter(|f| out.join(f).is_file())
        .map(|f| f.to_string())
        .collect();
    v.sort();
    v
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn matrix_of_files_per_level_and_content() {
    use Content::*;
    let cases: Vec<(Level, Vec<Content>, Vec<&str>)> = vec![
        (
            Level::LevelNone,
            vec![Cpu],
            vec!["trace_view.json", "operator_details.csv"],
        ),
        (
            Level::Level0,
            vec![Npu, Cpu],
            vec![
                "trace_view.json",
                "step_trace_time.csv",
                "kernel_details.csv",
                "operator_details.csv",
            ],
        ),
        (
            Level::Level0,
            vec![Npu, Cpu, Memory],
            vec![
                "trace_view.json",
                "step_trace_time.csv",
                "kernel_details.csv",
                "operator_details.csv",
                "memory_record.csv",
                "operator_memory.csv",
            ],
        ),
        (
            Level::Level1,
            vec![Npu, Cpu],
            vec![
                "trace_view.json",
                "step_trace_time.csv",
                "kernel_details.csv",
                "operator_details.csv",
                "op_statistic.csv",
                "api_statistic.csv",
                "communication.json",
                "communication_matrix.json",
            ],
        ),
        (
            Level::Level2,
            vec![Npu],
            vec![
                "trace_view.json",
                "step_trace_time.csv",
                "kernel_details.csv",
                "op_statistic.csv",
                "api_statistic.csv",
                "communication.json",
                "communication_matrix.json",
            ],
        ),
    ];
    for (level, contents, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Script::npu(level, &contents);
        s.world = 1;
        s.steps = vec![1];
        let done = collect(tmp.path(), &s);
        assert_eq!(done.len(), 1);
        let r = analyse_collection(&done[0].dir).unwrap();
        assert!(!r.already_done);
        assert_eq!(
            present(&done[0].dir),
            sorted(&want),
            "{level:?} {contents:?}"
        );
        assert!(done[0].dir.join("profiler_info_0.json").is_file());
        assert!(done[0].dir.join("profiler_metadata.json").is_file());
        // The pure function agrees with what was written.
        let names: Vec<&str> = contents.iter().map(|c| c.as_str()).collect();
        let lr = rlprof_export::npu::level_rank(level);
        assert_eq!(
            sorted(&files_for(lr, |c| names.contains(&c)
                || (c == "npu" && names.contains(&"cuda")))),
            sorted(&want)
        );
    }
}

#[test]
fn kernel_columns_follow_steps_shapes_and_level() {
    let base =
        "Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Num";
    let shapes = "Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats";
    assert_eq!(kernel_header(false, false, 0).join(","), base);
    assert_eq!(
        kernel_header(true, false, 0).join(","),
        format!("Step Id,{base}")
    );
    assert_eq!(
        kernel_header(true, true, 0).join(","),
        format!("Step Id,{base},{shapes}")
    );
    assert_eq!(
        kernel_header(true, false, 1).join(","),
        format!("Step Id,{base},FLOPs,Memory Bytes,Achieved GFLOP/s,Achieved Bandwidth(GB/s)")
    );
    // And in a written file (with shapes):
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(
        Level::Level0,
        &[Content::Npu, Content::Cpu, Content::Shapes],
    );
    s.world = 1;
    let done = collect(tmp.path(), &s);
    analyse_collection(&done[0].dir).unwrap();
    let (h, rows) = read_csv(
        &done[0]
            .dir
            .join("ASCEND_PROFILER_OUTPUT/kernel_details.csv"),
    );
    assert_eq!(h.join(","), format!("Step Id,{base},{shapes}"));
    assert!(
        rows.iter()
            .all(|r| r[9] == "4,8;8,16" && r[10] == "float32;float32"),
        "shapes come from the issuing op"
    );
}

#[test]
fn exact_headers_and_counts_match_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(
        Level::Level1,
        &[Content::Npu, Content::Cpu, Content::Memory],
    );
    s.world = 1;
    s.steps = vec![1, 2];
    let done = collect(tmp.path(), &s);
    assert_eq!(done.len(), 2);
    for c in &done {
        analyse_collection(&c.dir).unwrap();
        let raw = RawSummary::read(&c.raw_file, true).unwrap();
        let kernels: Vec<_> = raw
            .kept
            .iter()
            .filter(|(_, r)| r.kind == Kind::Kernel as u8)
            .collect();
        let ops = raw
            .kept
            .iter()
            .filter(|(_, r)| r.kind == Kind::Range as u8 && r.cat == RangeCat::Op as u8)
            .count();
        let mems = raw
            .kept
            .iter()
            .filter(|(_, r)| r.kind == Kind::Memory as u8)
            .count();
        assert_eq!(kernels.len(), 10);
        let out = c.dir.join("ASCEND_PROFILER_OUTPUT");
        let (h, rows) = read_csv(&out.join("kernel_details.csv"));
        assert_eq!(h[0], "Step Id");
        assert_eq!(rows.len(), kernels.len());
        let step = c.steps[0].to_string();
        assert!(
            rows.iter().all(|r| r[0] == step),
            "every kernel is inside its step"
        );
        let dur_us: f64 = rows.iter().map(|r| r[6].parse::<f64>().unwrap()).sum();
        let (hs, st) = read_csv(&out.join("step_trace_time.csv"));
        assert_eq!(hs, npu::STEP_TRACE);
        assert_eq!(st.len(), 1);
        let computing: f64 = st[0][2].parse().unwrap();
        assert!(
            (computing - dur_us).abs() < 0.01 * dur_us + 0.01,
            "{computing} vs {dur_us}"
        );
        assert!(
            dur_us >= 10.0 * 20.0,
            "each kernel busy-waits 20us: {dur_us}"
        );
        let comm: f64 = st[0][5].parse().unwrap();
        assert!(comm >= 2.0 * 30.0, "two collectives of >= 30us: {comm}");
        let (ho, od) = read_csv(&out.join("operator_details.csv"));
        assert_eq!(ho, npu::OPERATOR_DETAILS);
        assert_eq!(od.len(), 1, "one (name, shapes, module) key");
        let dev_self: f64 = od[0][5].parse().unwrap();
        assert!(
            (dev_self - dur_us).abs() < 0.01,
            "all kernel time attributed to matmul"
        );
        let host_total: f64 = od[0][4].parse().unwrap();
        assert!(host_total >= dev_self);
        let (hstat, stat) = read_csv(&out.join("op_statistic.csv"));
        assert_eq!(hstat, npu::OP_STATISTIC);
        assert_eq!(stat[0][2], kernels.len().to_string());
        let (hm, mr) = read_csv(&out.join("memory_record.csv"));
        assert_eq!(hm, npu::MEMORY_RECORD);
        assert_eq!(mr.len(), mems);
        let (hom, om) = read_csv(&out.join("operator_memory.csv"));
        assert_eq!(hom, npu::OPERATOR_MEMORY);
        assert_eq!(om.len(), mems / 2);
        assert!(om.iter().all(|r| r[0] == "matmul" && r[1] == "4.000"));
        let (ha, _) = read_csv(&out.join("api_statistic.csv"));
        assert_eq!(ha, npu::API_STATISTIC);
        let comm_json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("communication.json")).unwrap())
                .unwrap();
        let coll = &comm_json[format!("step{step}")]["collective"];
        assert_eq!(coll.as_object().unwrap().len(), 2, "{coll}");
        let trace: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("trace_view.json")).unwrap()).unwrap();
        let ev = trace.as_array().unwrap();
        let count = |cat: &str| {
            ev.iter()
                .filter(|e| e["cat"] == cat && e["ph"] == "X")
                .count()
        };
        assert_eq!(count("kernel"), kernels.len());
        assert_eq!(count("cpu_op"), ops + 2, "ops plus the two collectives");
        let flows = ev.iter().filter(|e| e["ph"] == "s").count();
        assert_eq!(flows, ops, "one flow per op that issued a kernel");
    }
}
