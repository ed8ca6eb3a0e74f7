//! `rlprof analyse` and `rlprof report` read raw files through one decoder, so they give the
//! same durations: for a collection that stopped cleanly, and for a killed one (one calibration
//! point, no End chunk) whose writer's clock rate is not the reading machine's.

use rlprof_profiler::clock::Calibration;
use rlprof_profiler::plan::{Content, Level};
use rlprof_profiler::raw::{CollectionMeta, RawWriter};
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const T0: u64 = 5_000_000_000;
const WALL0: u64 = 1_700_000_000_000_000_000;

/// Writes `{root}/step1/e2e/host_1_20250101000000000_ascend_pt/rlprof_raw/rank_0.rlraw`: a step
/// holding ops (each with a kernel) of odd tick lengths; a clean collection ends with a second
/// calibration at `rate` ns per tick and an End chunk, a killed one has neither.
fn collection(root: &Path, rate: f64, killed: bool) -> (PathBuf, PathBuf) {
    let dir = root.join("step1/e2e/host_1_20250101000000000_ascend_pt");
    let raw_dir = dir.join("rlprof_raw");
    std::fs::create_dir_all(&raw_dir).unwrap();
    let raw = raw_dir.join("rank_0.rlraw");
    let mut w = RawWriter::create(&raw).unwrap();
    w.write_meta(&CollectionMeta {
        level: Level::Level1,
        contents: [Content::Npu, Content::Cpu].into_iter().collect(),
        steps: vec![1],
        host: "host".into(),
        pid: 1,
        start_wall_ns: WALL0,
        start_mono_ns: T0,
        ns_per_tick: Some(rate),
        ..CollectionMeta::default()
    })
    .unwrap();
    w.write_strings([(1, "ProfilerStep#1"), (2, "matmul"), (3, "gemm")])
        .unwrap();
    w.write_calibration(Calibration {
        ticks: T0,
        mono_ns: T0,
        wall_ns: WALL0,
    })
    .unwrap();
    let mut recs = Vec::new();
    let mut t = T0 + 1_000;
    for i in 0..50u64 {
        let len = 1_000 + 37 * i;
        recs.push(Record::new(t + 3, t + 3 + len / 2, 3, Kind::Kernel, 0, 0));
        recs.push(Record::new(0, 0, 0, Kind::Ext, 0, 0));
        recs.push(Record::new(
            t,
            t + len,
            2,
            Kind::Range,
            RangeCat::Op as u8,
            1,
        ));
        recs.push(Record::new(0, 0, 0, Kind::Ext, 0, 0));
        t += len + 11;
    }
    recs.push(Record::new(
        T0 + 500,
        t + 7,
        1,
        Kind::Range,
        RangeCat::Step as u8,
        0,
    ));
    w.write_records(0, &recs).unwrap();
    w.write_thread(0, "main").unwrap();
    if !killed {
        let ticks = T0 + 20_000_000;
        w.write_calibration(Calibration {
            ticks,
            mono_ns: T0 + (20_000_000.0 * rate) as u64,
            wall_ns: WALL0 + (20_000_000.0 * rate) as u64,
        })
        .unwrap();
        w.write_end(recs.len() as u64, 0).unwrap();
    }
    (dir, raw)
}

/// Durations (ns) by event name in `analyse`'s `trace_view.json`.
fn analyse_durations(dir: &Path) -> BTreeMap<String, Vec<u64>> {
    rlprof_export::analyse_collection(dir).unwrap();
    let text = std::fs::read_to_string(dir.join("ASCEND_PROFILER_OUTPUT/trace_view.json")).unwrap();
    let events: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let dur = (e["dur"].as_f64().unwrap() * 1000.0).round() as u64;
        out.entry(e["name"].as_str().unwrap().to_string())
            .or_default()
            .push(dur);
    }
    out.values_mut().for_each(|v| v.sort_unstable());
    out
}

/// Durations (ns) by event name in `report`'s profile of the raw file.
fn report_durations(raw: &Path) -> BTreeMap<String, Vec<u64>> {
    let p = rlprof_report::raw_input::load_raw(raw, "step1/e2e").unwrap();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in &p.events {
        out.entry(p.str(e.name).to_string())
            .or_default()
            .push(e.dur as u64);
    }
    out.values_mut().for_each(|v| v.sort_unstable());
    out
}

fn check(rate: f64, killed: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, raw) = collection(tmp.path(), rate, killed);
    let report = report_durations(&raw);
    let analyse = analyse_durations(&dir);
    for name in ["matmul", "gemm", "ProfilerStep#1"] {
        assert_eq!(
            report[name].len(),
            if name == "ProfilerStep#1" { 1 } else { 50 }
        );
        assert_eq!(
            analyse.get(name),
            report.get(name),
            "{name}: analyse vs report (rate {rate}, killed {killed})"
        );
    }
    // The first op is 1,000 ticks long (within the truncation of its two ends).
    let want = 1_000.0 * rate;
    let got = report["matmul"][0] as f64;
    assert!(
        (got - want).abs() <= 1.0,
        "{got} ns for 1,000 ticks at {rate} ns/tick"
    );
}

#[test]
fn analyse_and_report_agree_on_a_clean_collection() {
    check(0.37, false);
}

#[test]
fn analyse_and_report_agree_on_a_killed_collection_with_a_foreign_clock_rate() {
    // 2.5 ns per tick: no machine reading it counts at that rate, so a reader that used its own
    // clock's rate would get other durations.
    assert_ne!(rlprof_profiler::clock::local_ns_per_tick(), 2.5);
    check(2.5, true);
}
