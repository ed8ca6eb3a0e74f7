//! Synthetic inputs in the layouts of other tools (2021 kineto categories, other accelerators,
//! torch_npu's HCCL tasks, torch_npu's CSV outputs): the JSON contract of `report --format json`
//! against an independent computation (`support::contract`).

mod support;

use support::contract::*;

/// 2021-era kineto categories (`Operator`, `Kernel`, `Runtime`, `Memcpy`, as in kineto's
/// tb_plugin samples) are read like today's.
#[test]
fn kineto_2021_categories_are_read_case_insensitively() {
    let trace = r#"{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
      {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 110, "dur": 20},
      {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 115, "dur": 5},
      {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": 7, "ts": 130, "dur": 30},
      {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 170, "dur": 10},
      {"ph": "X", "cat": "Kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 8, "ts": 150, "dur": 20}
    ]}"#;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("worker0.pt.trace.json"), trace).unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(steps_in(rank), vec![(5, 100_000)]);
    let want = expected(
        &[(130_000, 160_000)],
        &[(150_000, 170_000)],
        &[(170_000, 180_000)],
    );
    check_device(rank, &want);
    let kind = |n: &str| top_kind(&report, n);
    assert_eq!(kind("aten::mm").as_deref(), Some("op"));
    assert_eq!(kind("cudaLaunchKernel").as_deref(), Some("api"));
    assert_eq!(kind("volta_sgemm").as_deref(), Some("kernel"));
}

/// Other accelerators' kineto categories: MTIA's device events (`mtia_ccp_events`) are
/// kernels, `*_runtime` / `*_driver` host calls (`mtia_runtime`, `xpu_runtime`,
/// `privateuse1_driver`) are API calls.
#[test]
fn other_accelerators_categories_give_kernels_and_api_calls() {
    let trace = r#"{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
      {"ph": "X", "cat": "mtia_runtime", "name": "mtiaLaunch", "pid": 1, "tid": 1, "ts": 105, "dur": 4},
      {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 1, "tid": 1, "ts": 110, "dur": 3},
      {"ph": "X", "cat": "privateuse1_driver", "name": "devLaunch", "pid": 1, "tid": 1, "ts": 114, "dur": 2},
      {"ph": "X", "cat": "mtia_ccp_events", "name": "fused_gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 40},
      {"ph": "X", "cat": "mtia_ccp_events", "name": "fused_add", "pid": 0, "tid": 7, "ts": 165, "dur": 20}
    ]}"#;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("rank-0.json"), trace).unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(steps_in(rank), vec![(2, 100_000)]);
    check_device(
        rank,
        &expected(&[(120_000, 160_000), (165_000, 185_000)], &[], &[]),
    );
    let kind = |n: &str| top_kind(&report, n);
    assert_eq!(kind("fused_gemm").as_deref(), Some("kernel"));
    for api in ["mtiaLaunch", "urEnqueueKernelLaunch", "devLaunch"] {
        assert_eq!(kind(api).as_deref(), Some("api"), "{api}");
    }
}

/// What the HCCL stream of a newer torch_npu `trace_view.json` holds on `Ascend Hardware`
/// (MindStudio Insight's test data, `test/data/pytorch/text/level*`): the collective's transfer
/// tasks (`SDMA`) are parts of the collective (not kernels, not collectives of their own);
/// `Notify Wait`, `Write Value` and a compute stream's `EVENT_WAIT` are synchronisation, not
/// device work. With them, the report's kernel and
/// communication time equal CANN's `step_trace_time.csv` on those six real ranks to within
/// 0.5 us; here, against the events the test wrote.
#[test]
fn hccl_stream_tasks_and_stream_waits_are_not_kernels() {
    let trace = r#"[
      {"ph": "M", "name": "process_name", "pid": 10, "args": {"name": "Ascend Hardware"}},
      {"ph": "M", "name": "process_labels", "pid": 10, "args": {"labels": "NPU"}},
      {"ph": "M", "name": "thread_name", "pid": 10, "tid": 2, "args": {"name": "Stream 2"}},
      {"ph": "M", "name": "thread_name", "pid": 10, "tid": 4, "args": {"name": "Stream 4"}},
      {"ph": "M", "name": "process_name", "pid": 11, "args": {"name": "HCCL"}},
      {"ph": "M", "name": "thread_name", "pid": 11, "tid": 1, "args": {"name": "Communication"}},
      {"ph": "M", "name": "process_name", "pid": 12, "args": {"name": "Python"}},
      {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "pid": 12, "tid": 1, "ts": "100.000", "dur": 200},
      {"ph": "X", "cat": "enqueue", "name": "Enqueue@MatMul", "pid": 12, "tid": 1, "ts": "105.000", "dur": 2},
      {"ph": "X", "name": "aclnnMm_MatMulCommon_MatMulV2", "pid": 10, "tid": 2, "ts": "110.000", "dur": 20, "args": {"Task Type": "AI_CORE"}},
      {"ph": "X", "name": "EVENT_WAIT", "pid": 10, "tid": 2, "ts": "131.000", "dur": 60, "args": {"Task Type": "EVENT_WAIT_SQE"}},
      {"ph": "X", "name": "hcom_allReduce__586_0_1", "pid": 11, "tid": 1, "ts": "140.000", "dur": 50},
      {"ph": "X", "name": "Notify Wait", "pid": 10, "tid": 4, "ts": "140.000", "dur": 30, "args": {"Task Type": "Notify Wait"}},
      {"ph": "X", "name": "SDMA", "pid": 10, "tid": 4, "ts": "170.000", "dur": 15, "args": {"Task Type": "SDMA"}},
      {"ph": "X", "name": "Write Value", "pid": 10, "tid": 4, "ts": "185.000", "dur": 1, "args": {"Task Type": "Write Value"}},
      {"ph": "X", "name": "SDMA", "pid": 10, "tid": 4, "ts": "186.000", "dur": 4, "args": {"Task Type": "SDMA"}}
    ]"#;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp
        .path()
        .join("host_1_20250101000000000_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("trace_view.json"), trace).unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(steps_in(rank), vec![(7, 200_000)]);
    check_device(
        rank,
        &expected(&[(110_000, 130_000)], &[(140_000, 190_000)], &[]),
    );
    // The transfers are parts of the collective, not collectives of their own.
    let comm: Vec<&str> = report["comm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(comm, ["hcom_allReduce__586_0_1"]);
    // torch_npu's task queue is the runtime layer, as its DB's `queue` API type is read.
    assert_eq!(
        top_kind(&report, "Enqueue@MatMul").as_deref(),
        Some("runtime")
    );
}

/// `kernel_details.csv`: HCCL tasks are communication, `Step Id` gives the steps, a lane per
/// stream; `memory_record.csv` gives the device memory curve; `communication.json` a table.
#[test]
fn ascend_csv_outputs_feed_the_same_model() {
    let tmp = tempfile::tempdir().unwrap();
    let pt = tmp.path().join("node_4242_20250101000000000_ascend_pt");
    let out = pt.join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        pt.join("profiler_info_5.json"),
        r#"{"config": {}, "rank_id": 5}"#,
    )
    .unwrap();
    std::fs::write(
        out.join("kernel_details.csv"),
        "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n\
         1,0,MatMulV2,MatMulV2,AI_CORE,1000.000\t,10.000\t,0.000\t,8\n\
         1,0,hcom_allReduce__1_1_1,hcom_allReduce_,HCCL,1005.000\t,20.000\t,0.000\t,0\n\
         2,0,Add,Add,AI_VECTOR_CORE,1030.000\t,5.000\t,0.000\t,4\n",
    )
    .unwrap();
    std::fs::write(
        out.join("memory_record.csv"),
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n\
         PTA,1000.0,1.0,2.0,1.0,0,NPU:0\nAPP,1000.0,50.0,60.0,50.0,0,NPU:0\nPTA,1010.0,3.0,4.0,3.0,0,NPU:0\nPTA,1020.0,2.0,4.0,2.0,0,NPU:0\n",
    )
    .unwrap();
    std::fs::write(
        out.join("communication.json"),
        r#"{"step1": {"collective": {"hcom_allReduce__1_1_1@123": {"Communication Time Info": {"Elapse Time(ms)": 0.02, "Wait Time(ms)": 0.005, "Transit Time(ms)": 0.01}, "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 1.0, "Transit Time(ms)": 0.01}}}}}}"#,
    )
    .unwrap();
    // Two ops' allocations on the PTA curve (same time, same total just after), one released
    // before the peak; a third that matches no point of the curve.
    std::fs::write(
        out.join("operator_memory.csv"),
        "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),\
         Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),\
         Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),\
         Release Total Active(MB),Stream Ptr,Device Type\n\
         aten::empty,1024.0,1000.000\t,,,,,1.0,2.0,1.0,,,,0,NPU:0\n\
         aten::mm,2048.0,1010.000\t,1020.000\t,,10.0,,3.0,4.0,3.0,2.0,4.0,2.0,0,NPU:0\n\
         aten::add,4.0,1005.000\t,,,,,9.0,9.0,9.0,,,,0,NPU:0\n",
    )
    .unwrap();
    let report = report_json(tmp.path());
    let rank = &report["jobs"][0]["ranks"][0];
    assert_eq!(rank["rank"], 5);
    // profiler_info_5.json is the profile's own metadata, not a stray JSON file.
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| !n.as_str().unwrap().contains("profiler_info")),
        "{}",
        report["notes"]
    );
    check_device(
        rank,
        &expected(
            &[(1_000_000, 1_010_000), (1_030_000, 1_035_000)],
            &[(1_005_000, 1_025_000)],
            &[],
        ),
    );
    let steps: Vec<u64> = rank["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, vec![1, 2]);
    assert!(
        rank["steps"][0]["dur_ns"].is_null(),
        "a Step Id has no duration"
    );
    let mem = &report["memory"][0];
    assert_eq!(mem["peak_bytes"], 3 * 1024 * 1024);
    assert_eq!(mem["kind"], "device");
    let live: Vec<(&str, i64)> = mem["at_peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["op"].as_str().unwrap(), o["bytes"].as_i64().unwrap()))
        .collect();
    assert_eq!(live, [("aten::mm", 2 << 20), ("aten::empty", 1 << 20)]);
    let comm = report["inputs"][0]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "communication.json")
        .unwrap();
    assert_eq!(comm["rows"][0][2], "hcom_allReduce__1_1_1@123");
    assert_eq!(comm["rows"][0][8], "100.000000");
}
