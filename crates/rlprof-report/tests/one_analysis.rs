//! Issue 26, one test per defect: every input layout through the one analysis layer, with
//! integer time, CANN's step figures, ranks from the metadata, bad cells warned, nccl-tests
//! bandwidth, verl 0.9.1's stage labels, and `analyse --cluster` equal to `report`. Every input
//! is built here.

use rlprof_report::cluster::ClusterReport;
use rlprof_report::{Report, load, summarise};
use std::path::Path;

fn report(p: &Path) -> Report {
    summarise(&load(p, &Default::default()).unwrap())
}

fn cluster(p: &Path) -> ClusterReport {
    rlprof_report::cluster::analyse(p, &Default::default()).unwrap()
}

/// The data block of a report page.
fn page_data(html: &str) -> serde_json::Value {
    let json = html
        .split("id=\"rlprof-data\">")
        .nth(1)
        .and_then(|t| t.split("</script>").next())
        .expect("the page's data block");
    serde_json::from_str(json).unwrap()
}

/// An epoch-based microsecond timestamp (above 2^53 ns as nanoseconds).
const T0_US: u64 = 1_695_120_000_000_000;

/// A text-layout rank: `{root}/{name}_ascend_pt/` with `profiler_info_{rank}.json` (when
/// `info`), `profiler_metadata.json` and the given `ASCEND_PROFILER_OUTPUT` files.
fn text_rank(root: &Path, rank: u32, info: bool, world: u32, files: &[(&str, String)]) {
    let pt = root.join(format!(
        "host_{}_2025010100000000{rank}_ascend_pt",
        100 + rank
    ));
    let out = pt.join("ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    if info {
        std::fs::write(
            pt.join(format!("profiler_info_{rank}.json")),
            r#"{"config": {"common_config": {}}}"#,
        )
        .unwrap();
    }
    let ranks: Vec<String> = (0..world).map(|r| r.to_string()).collect();
    std::fs::write(
        pt.join("profiler_metadata.json"),
        format!(
            r#"{{"parallel_group_info": {{"group_name_0": {{"group_name": "default_group", "group_rank": {rank}, "global_ranks": [{}]}}}}}}"#,
            ranks.join(", ")
        ),
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(out.join(name), text).unwrap();
    }
}

/// `n` back-to-back 1 us kernels from `T0_US`, as `kernel_details.csv`.
fn back_to_back(n: u64) -> String {
    let mut s = String::from("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n");
    for i in 0..n {
        s += &format!("1,MatMul_{i},MatMul,AI_CORE,{}.000\t,1.000\t\n", T0_US + i);
    }
    s
}

const STEP_TRACE_HEADER: &str = "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n";

#[test]
fn epoch_microsecond_csv_sums_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    text_rank(
        tmp.path(),
        0,
        true,
        1,
        &[("kernel_details.csv", back_to_back(20))],
    );
    let r = report(tmp.path());
    let d = &r.jobs[0].ranks[0].device;
    assert_eq!((d.kernel_ns, d.idle_ns, d.span_ns), (20_000, 0, 20_000));
    // CANN's figures computed by its rules on the same rows: no gap, so no Free.
    let c = &r.cann_steps[0];
    assert_eq!((c.computing_ns, c.free_ns, c.stage_ns), (20_000, 0, 20_000));
    assert_eq!(c.source, rlprof_report::summary::cann::COMPUTED);
}

/// 4 ranks (TP1 PP2 shape): ranks 1 and 3 hold no `trace_view.json` and no
/// `kernel_details.csv`, only CANN's tables, and rank 3 has no `profiler_info_3.json`: every
/// rank is found, the world size is the metadata's, and the steps last CANN's `Stage`.
#[test]
fn every_rank_directory_with_a_readable_file_is_a_rank() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..4u32 {
        let table = format!(
            "{STEP_TRACE_HEADER}{rank},1,100.5,20.25,5,25.25,10,130.75,0,20.25,3\n{rank},2,101.5,20.25,5,25.25,10,131.755,0,20.25,3\n"
        );
        let mut files = vec![("step_trace_time.csv", table)];
        if rank % 2 == 0 {
            files.push(("kernel_details.csv", back_to_back(3)));
        } else {
            files.push((
                "communication.json",
                r#"{"step1": {"collective": {}}}"#.to_string(),
            ));
        }
        text_rank(tmp.path(), rank, rank != 3, 4, &files);
    }
    let r = report(tmp.path());
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    assert_eq!(r.jobs.len(), 1, "{:?}", r.jobs);
    let job = &r.jobs[0];
    assert_eq!(job.world_size, 4);
    assert_eq!(
        job.ranks.iter().map(|k| k.rank).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    for k in &job.ranks {
        let durs: Vec<Option<u64>> = k.steps.iter().map(|s| s.dur_ns).collect();
        assert_eq!(durs, [Some(130_750), Some(131_755)], "rank {}", k.rank);
    }
    // The figures are the table's, to the nanosecond.
    let c = r
        .cann_steps
        .iter()
        .find(|c| c.rank == 1 && c.step == "2")
        .unwrap();
    assert_eq!(
        (
            c.computing_ns,
            c.communication_not_overlapped_ns,
            c.free_ns,
            c.stage_ns,
            c.preparing_ns
        ),
        (101_500, 20_250, 10_000, 131_755, Some(3_000))
    );
    assert_eq!(c.source, "step_trace_time.csv");
    // analyse --cluster reads the same tree (no rlprof collection in it) and agrees.
    let cl = cluster(tmp.path());
    assert_eq!(cl.ranks, [0, 1, 2, 3]);
    assert_eq!(cl.world_size, [4]);
    assert_eq!(cl.steps.len(), 8);
    let s = cl
        .steps
        .iter()
        .find(|s| s.rank == 1 && s.step == "2")
        .unwrap();
    assert_eq!(s.step_ms, 0.131755);
    assert_eq!(s.free_ms, 0.010);
}

/// CANN's rules on a built timeline: two steps, compute and communication overlapping in part,
/// a gap (Free), an `hcom_receive` (Bubble).
#[test]
fn cann_figures_by_cann_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let us = |t: u64| T0_US + t;
    // Host steps at 0 and 100 us; step 1's device work: compute 10-30, comm 20-40 (10 of it
    // under compute), gap 40-50, compute 50-60; step 2: receive 110-120, compute 120-130.
    let trace = format!(
        r#"{{"traceEvents": [
 {{"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":{},"dur":100}},
 {{"ph":"X","cat":"cpu_op","name":"ProfilerStep#2","pid":1,"tid":1,"ts":{},"dur":100}},
 {{"ph":"X","cat":"kernel","name":"MatMul","pid":2,"tid":7,"ts":{},"dur":20}},
 {{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce","pid":2,"tid":8,"ts":{},"dur":20}},
 {{"ph":"X","cat":"kernel","name":"Add","pid":2,"tid":7,"ts":{},"dur":10}},
 {{"ph":"X","cat":"kernel","name":"hcom_receive_1","pid":2,"tid":8,"ts":{},"dur":10}},
 {{"ph":"X","cat":"kernel","name":"Mul","pid":2,"tid":7,"ts":{},"dur":10}}
]}}"#,
        us(0),
        us(100),
        us(10),
        us(20),
        us(50),
        us(110),
        us(120)
    );
    std::fs::write(tmp.path().join("rank0.pt.trace.json"), trace).unwrap();
    let r = report(tmp.path());
    let rows: Vec<_> = r.cann_steps.iter().filter(|c| c.rank == 0).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (a, b) = (rows[0], rows[1]);
    assert_eq!(a.step, "1");
    assert_eq!(a.computing_ns, 30_000);
    assert_eq!(a.communication_ns, 20_000);
    assert_eq!(a.communication_not_overlapped_ns, 10_000);
    assert_eq!(a.overlapped_ns, 10_000);
    // Free: 40-50, and 60-110 up to step 2's first task (segments belong to the step their
    // start is in).
    assert_eq!(a.free_ns, 10_000 + 50_000);
    assert_eq!(a.stage_ns, 100_000);
    assert_eq!(a.preparing_ns, Some(10_000));
    assert_eq!(b.bubble_ns, 10_000);
    assert_eq!(b.communication_not_overlapped_exclude_receive_ns, 0);
    assert_eq!(b.stage_ns, 20_000 - 10_000);
    assert_eq!(b.preparing_ns, Some(10_000));
}

#[test]
fn a_mangled_number_is_warned_with_its_line_and_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let memory = format!(
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\nPTA,{}.5,10,20,NPU:0\nPTA,1.69512E+15,4000,20,NPU:0\nPTA,{}.5,12,20,NPU:0\n",
        T0_US,
        T0_US + 16_000
    );
    text_rank(
        tmp.path(),
        0,
        true,
        1,
        &[
            ("kernel_details.csv", back_to_back(2)),
            ("memory_record.csv", memory),
        ],
    );
    let r = report(tmp.path());
    let notes = &r.inputs[0].notes;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("memory_record.csv:3:") && n.contains("1.69512E+15")),
        "{notes:?}"
    );
    let m = &r.memory[0];
    assert_eq!(m.peak_bytes, 12 * 1024 * 1024);
    assert!(m.peak_since_start_ns < 17_000_000, "{m:?}");
}

#[test]
fn all_gather_bandwidth_counts_the_gathered_output() {
    let tmp = tempfile::tempdir().unwrap();
    // 8 ranks gather 12,568 floats each (50,272 B) in 100 us; the output is 402,176 B.
    let trace = r#"{"traceEvents": [
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllGather_RING_LL","pid":2,"tid":8,"ts":1000,"dur":100,
  "args":{"In msg nelems":12568,"Out msg nelems":100544,"Group size":8,"dtype":"Float","Process Group Name":"0"}},
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":2,"tid":8,"ts":2000,"dur":100,
  "args":{"In msg nelems":12568,"Out msg nelems":12568,"Group size":8,"dtype":"Float"}}
]}"#;
    std::fs::write(tmp.path().join("rank0.pt.trace.json"), trace).unwrap();
    let r = report(tmp.path());
    let ag = r
        .comm
        .iter()
        .find(|c| c.name.contains("AllGather"))
        .unwrap();
    assert_eq!(ag.bytes, Some(402_176));
    assert_eq!(ag.group_size, Some(8));
    let algbw = 402_176.0 / 100_000.0;
    assert!((ag.bandwidth_gbps.unwrap() - algbw).abs() < 1e-9);
    assert!((ag.bus_bandwidth_gbps.unwrap() - algbw * 7.0 / 8.0).abs() < 1e-9);
    let ar = r
        .comm
        .iter()
        .find(|c| c.name.contains("AllReduce"))
        .unwrap();
    assert_eq!(ar.bytes, Some(50_272));
    let algbw = 50_272.0 / 100_000.0;
    assert!((ar.bus_bandwidth_gbps.unwrap() - algbw * 2.0 * 7.0 / 8.0).abs() < 1e-9);
    assert!(
        r.notes.iter().any(|n| n.contains("nccl-tests")),
        "{:?}",
        r.notes
    );
}

/// verl 0.9.1 names its ranges by stage label (`actor_update`, `actor_compute_log_prob`,
/// `ref_compute_log_prob`, `rollout`, `async_rollout` inside it): the per-step breakdown maps
/// them to rollout / log-prob / update, a nested range of one class counted once.
#[test]
fn verl_stage_labels_give_the_role_breakdown() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = r#"{"traceEvents": [
 {"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
 {"ph":"X","cat":"user_annotation","name":"rollout","pid":1,"tid":1,"ts":0,"dur":400},
 {"ph":"X","cat":"user_annotation","name":"async_rollout","pid":1,"tid":1,"ts":10,"dur":300},
 {"ph":"X","cat":"user_annotation","name":"actor_compute_log_prob","pid":1,"tid":1,"ts":400,"dur":100},
 {"ph":"X","cat":"user_annotation","name":"ref_compute_log_prob","pid":1,"tid":1,"ts":500,"dur":50},
 {"ph":"X","cat":"user_annotation","name":"actor_update","pid":1,"tid":1,"ts":600,"dur":300},
 {"ph":"X","cat":"user_annotation","name":"train_batch","pid":1,"tid":1,"ts":610,"dur":200},
 {"ph":"X","cat":"kernel","name":"MatMul","pid":2,"tid":7,"ts":620,"dur":10}
]}"#;
    std::fs::write(tmp.path().join("rank0.pt.trace.json"), trace).unwrap();
    let r = report(tmp.path());
    let row = &r.breakdown[0];
    assert_eq!(row.rollout_ns, 400_000);
    assert_eq!(row.log_prob_ns, 150_000);
    assert_eq!(row.update_ns, 300_000);
    assert!(row.roles.contains_key("actor_update"), "{:?}", row.roles);
    assert!(!row.roles.contains_key("train_batch"), "{:?}", row.roles);
}

/// The cluster view is the report's figures, rank by rank.
#[test]
fn cluster_and_report_give_the_same_per_rank_figures() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..2u32 {
        text_rank(
            tmp.path(),
            rank,
            true,
            2,
            &[("kernel_details.csv", back_to_back(5 + rank as u64))],
        );
    }
    let r = report(tmp.path());
    let c = cluster(tmp.path());
    assert_eq!(c.steps.len(), r.cann_steps.len());
    for s in &c.steps {
        let k = r
            .cann_steps
            .iter()
            .find(|k| k.rank == s.rank && k.step == s.step)
            .unwrap();
        assert_eq!(s.computing_ms, k.computing_ns as f64 / 1e6);
        assert_eq!(s.step_ms, k.stage_ns as f64 / 1e6);
    }
    assert_eq!(c.steps[1].computing_ms, 0.006);
}

/// torch_npu's memory: 4,000 MB allocated at the first record, 10 MB of it by an op at that
/// time and the rest before profiling started; then A (100 MB, freed before the peak), B
/// (50 MB, never freed) and C (200 MB, the peak): what is live at the peak is "before
/// profiling" + C + B + the first op, summing to the peak, and A is not listed.
#[test]
fn memory_live_at_the_peak_sums_to_the_peak() {
    let tmp = tempfile::tempdir().unwrap();
    let t = |us: u64| format!("{}.000", T0_US + us);
    let totals = [
        (0, 4000),
        (10, 4100),
        (20, 4150),
        (30, 4050),
        (40, 4250),
        (50, 4050),
    ];
    let mut record = String::from(
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n",
    );
    for (us, mb) in totals {
        record += &format!("PTA,{},{mb},8000,NPU:0\n", t(us));
    }
    let mut ops = String::from(
        "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n",
    );
    let mut row =
        |name: &str, mb: u64, at: u64, rel: Option<u64>, at_total: u64, rel_total: u64| {
            ops += &format!(
                "{name},{},{},{},,,,{at_total},8000,,{},8000,,1,NPU:0\n",
                mb * 1024,
                t(at),
                rel.map(t).unwrap_or_default(),
                if rel.is_some() {
                    rel_total.to_string()
                } else {
                    String::new()
                }
            );
        };
    row("aten::empty_strided", 10, 0, None, 4000, 0);
    row("A", 100, 10, Some(30), 4100, 4050);
    row("B", 50, 20, None, 4150, 0);
    row("C", 200, 40, Some(50), 4250, 4050);
    text_rank(
        tmp.path(),
        0,
        true,
        1,
        &[
            ("kernel_details.csv", back_to_back(2)),
            ("memory_record.csv", record),
            ("operator_memory.csv", ops),
        ],
    );
    let r = report(tmp.path());
    let m = &r.memory[0];
    let mb = 1024 * 1024;
    assert_eq!(m.peak_bytes, 4250 * mb);
    let live: Vec<(&str, i64)> = m.at_peak.iter().map(|o| (o.op.as_str(), o.bytes)).collect();
    assert_eq!(
        live,
        [
            ("before profiling", 3990 * mb),
            ("C", 200 * mb),
            ("B", 50 * mb),
            ("aten::empty_strided", 10 * mb)
        ],
        "{m:?}"
    );
    assert!(m.at_peak.iter().map(|o| o.bytes).sum::<i64>() <= m.peak_bytes);
}

/// verl 0.9.1 in discrete mode: one torch_npu collection per call under
/// `save_path/{stage}/{host}_{pid}_{ts}_ascend_pt`, each holding the stage's mstx range. Two
/// steps of three stages group into two step rows by time, each with its rollout, log-prob and
/// update time.
#[test]
fn verl_discrete_collections_group_into_steps_by_time() {
    let tmp = tempfile::tempdir().unwrap();
    let stages = [
        ("rollout_generate", "rollout", 400u64),
        ("actor_compute_log_prob", "actor_compute_log_prob", 100),
        ("actor_update", "actor_update", 300),
    ];
    let mut t = T0_US;
    for step in 0..2u64 {
        for (k, (dir, label, dur)) in stages.iter().enumerate() {
            let pt = tmp
                .path()
                .join(dir)
                .join(format!("host_4242_2025010100000{step}{k}_ascend_pt"));
            let out = pt.join("ASCEND_PROFILER_OUTPUT");
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(pt.join("profiler_info_0.json"), "{}").unwrap();
            let trace = format!(
                r#"[{{"ph":"X","cat":"MsTx","name":"{label}","pid":1,"tid":1,"ts":"{t}.000","dur":{dur}}},
 {{"ph":"X","cat":"kernel","name":"MatMul","pid":2,"tid":7,"ts":"{}.000","dur":5}}]"#,
                t + 1
            );
            std::fs::write(out.join("trace_view.json"), trace).unwrap();
            t += dur + 50;
        }
    }
    let r = report(tmp.path());
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    let rows: Vec<_> = r.breakdown.iter().filter(|b| b.rank == 0).collect();
    assert_eq!(
        rows.iter().map(|b| b.step.as_str()).collect::<Vec<_>>(),
        ["1", "2"],
        "{rows:?}"
    );
    for b in rows {
        assert_eq!(
            (b.rollout_ns, b.log_prob_ns, b.update_ns),
            (400_000, 100_000, 300_000),
            "{b:?}"
        );
    }
}

/// A cluster of 12 ranks: the page keeps the timeline of rank 0, the slowest and the fastest
/// (and those asked for), lists the inputs in numeric rank order, and its overview has every
/// rank.
#[test]
fn a_cluster_page_keeps_detail_for_a_subset_of_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..12u32 {
        // Rank 7 computes longest, rank 4 shortest.
        let dur = match rank {
            7 => 900,
            4 => 100,
            _ => 500,
        };
        let trace = format!(
            r#"{{"distributedInfo": {{"rank": {rank}, "world_size": 12}}, "traceEvents": [
 {{"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":{step}}},
 {{"ph":"X","cat":"kernel","name":"MatMul","pid":2,"tid":7,"ts":10,"dur":{dur}}}]}}"#,
            step = dur + 100
        );
        let d = tmp.path().join(format!("rank{rank}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("r{rank}.pt.trace.json")), trace).unwrap();
    }
    let loaded = load(tmp.path(), &Default::default()).unwrap();
    let ranks: Vec<u32> = loaded.profiles.iter().map(|p| p.rank).collect();
    assert_eq!(ranks, (0..12).collect::<Vec<_>>(), "numeric order");
    let r = summarise(&loaded);
    let opts = rlprof_report::HtmlOptions {
        ranks: vec![9],
        ..Default::default()
    };
    let html = rlprof_report::render_html(&r, &loaded.profiles, &opts).unwrap();
    let data = page_data(&html);
    let detail: Vec<u64> = data["detail_ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(
        detail,
        [0, 4, 7, 9],
        "rank 0, the fastest, the slowest, the asked"
    );
    assert_eq!(data["timeline"].as_array().unwrap().len(), detail.len());
    assert_eq!(
        data["report"]["jobs"][0]["ranks"].as_array().unwrap().len(),
        12
    );
    let all = rlprof_report::render_html(
        &r,
        &loaded.profiles,
        &rlprof_report::HtmlOptions {
            max_detail_ranks: 64,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!all.contains("\"detail_ranks\""));
}

/// The report of a tree read one input at a time ([`rlprof_report::summary::summarise_path`]:
/// each rank dropped once summarised) equals the report of the tree loaded whole, on a tree that
/// mixes layouts, jobs, discrete collections, a copy of a trace and an unreadable file; and its
/// page, whose shown ranks are read again, holds the same timelines.
#[test]
fn a_tree_summarised_input_by_input_equals_the_tree_loaded_whole() {
    use rlprof_report::summary::{Keep, summarise_path};
    let tmp = tempfile::tempdir().unwrap();
    for rank in 0..20u32 {
        let dur = 300 + 37 * rank;
        let trace = format!(
            r#"{{"distributedInfo": {{"rank": {rank}, "world_size": 20}}, "traceEvents": [
 {{"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":{step}}},
 {{"ph":"X","cat":"user_annotation","name":"actor_update","pid":1,"tid":1,"ts":5,"dur":{dur}}},
 {{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":6,"dur":{mm}}},
 {{"ph":"X","cat":"kernel","name":"MatMul","pid":2,"tid":7,"ts":10,"dur":{dur}}},
 {{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","pid":2,"tid":8,"ts":20,"dur":{ar},
   "args":{{"Collective name":"allreduce","In msg nelems":1024,"Group size":20,"dtype":"Float"}}}}]}}"#,
            step = dur + 100,
            mm = dur / 2,
            ar = 40 + rank
        );
        let d = tmp.path().join("gpu").join(format!("rank{rank}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("r{rank}.pt.trace.json")), &trace).unwrap();
        if rank == 3 {
            // A copy, counted once.
            std::fs::write(d.join("copy.pt.trace.json"), &trace).unwrap();
        }
    }
    std::fs::write(
        tmp.path().join("gpu").join("broken.pt.trace.json"),
        "{\"traceEvents\": [",
    )
    .unwrap();
    let npu = tmp.path().join("npu");
    for rank in 0..3u32 {
        text_rank(
            &npu,
            rank,
            true,
            3,
            &[("kernel_details.csv", back_to_back(4 + rank as u64))],
        );
    }
    let limits = Default::default();
    let loaded = load(tmp.path(), &limits).unwrap();
    let whole = summarise(&loaded);
    let s = summarise_path(tmp.path(), &limits, Keep::None).unwrap();
    assert!(s.inputs.len() > 16, "more inputs than a page keeps");
    // Op rows that tie on every sort key may come in either order: compare them as sets.
    let canonical = |r: &Report| {
        let mut v = serde_json::to_value(r).unwrap();
        for key in ["ops", "top"] {
            let rows = v[key].as_array_mut().unwrap();
            rows.sort_by_key(|x| x.to_string());
        }
        v
    };
    assert_eq!(canonical(&s.report), canonical(&whole));
    assert_eq!(whole.skipped.len(), 1, "{:?}", whole.skipped);
    assert!(
        whole.notes.iter().any(|n| n.contains("counted once")),
        "{:?}",
        whole.notes
    );
    assert!(whole.jobs.len() >= 2, "GPU and NPU jobs apart");

    let opts = rlprof_report::HtmlOptions::default();
    let page = |html: &str| -> serde_json::Value {
        let v = page_data(html);
        serde_json::json!({"timeline": v["timeline"], "detail_ranks": v["detail_ranks"]})
    };
    let mut again = Vec::new();
    rlprof_report::html::write_html_summarised(&s, &opts, &mut again).unwrap();
    let from_loaded = rlprof_report::render_html(&whole, &loaded.profiles, &opts).unwrap();
    let (a, b) = (page(&String::from_utf8(again).unwrap()), page(&from_loaded));
    assert!(a["timeline"].as_array().is_some_and(|t| !t.is_empty()));
    assert_eq!(a, b);
}
