//! Time is exact at every magnitude (issue 26, item 3): real traces carry epoch-based
//! microseconds (about 1.7e15 us), where an f64 holds a timestamp only to 256 ns. Twenty
//! back-to-back 1 us kernels there must give 20,000 ns of kernel time and no idle time, in a
//! PyTorch Chrome trace and in torch_npu's `kernel_details.csv` alike.

use rlprof_report::{Limits, load, render_json, summarise};
use serde_json::Value;
use std::path::Path;

fn report_json(path: &Path) -> Value {
    let loaded = load(path, &Limits::default()).unwrap();
    serde_json::from_str(&render_json(&summarise(&loaded)).unwrap()).unwrap()
}

/// Start of kernel `i`, in microseconds as text, from an epoch-scale base with 3 decimals.
fn start_us(i: u64) -> String {
    let ns = 1_700_000_000_123_456_789u64 + i * 1000;
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn check(report: &Value) {
    let d = &report["jobs"][0]["ranks"][0]["device"];
    assert_eq!(d["kernel_ns"].as_i64(), Some(20_000), "{d}");
    assert_eq!(d["busy_ns"].as_i64(), Some(20_000), "{d}");
    assert_eq!(d["idle_ns"].as_i64(), Some(0), "{d}");
}

#[test]
fn back_to_back_kernels_at_epoch_time_in_a_chrome_trace_sum_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let mut evs = vec![
        r#"{"ph":"M","name":"process_name","pid":0,"args":{"name":"GPU 0"}}"#.to_string(),
        format!(
            r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":{},"dur":20}}"#,
            start_us(0)
        ),
    ];
    for i in 0..20 {
        evs.push(format!(
            r#"{{"ph":"X","cat":"kernel","name":"k{i}","pid":0,"tid":7,"ts":{},"dur":1.000}}"#,
            start_us(i)
        ));
    }
    let text = format!(
        "{{\"distributedInfo\":{{\"rank\":0,\"world_size\":1}},\"traceEvents\":[\n{}\n]}}",
        evs.join(",\n")
    );
    std::fs::write(tmp.path().join("w_1.pt.trace.json"), text).unwrap();
    check(&report_json(tmp.path()));
}

#[test]
fn back_to_back_kernels_at_epoch_time_in_kernel_details_sum_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let pt = tmp.path().join("node_1_20250101000000000_ascend_pt");
    let out = pt.join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        pt.join("profiler_info_0.json"),
        r#"{"config": {}, "rank_id": 0}"#,
    )
    .unwrap();
    let mut csv = String::from(
        "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n",
    );
    for i in 0..20 {
        csv.push_str(&format!(
            "1,0,MatMul{i},MatMulV2,AI_CORE,{}\t,1.000\t,0.000\t,8\n",
            start_us(i)
        ));
    }
    std::fs::write(out.join("kernel_details.csv"), csv).unwrap();
    check(&report_json(tmp.path()));
}
