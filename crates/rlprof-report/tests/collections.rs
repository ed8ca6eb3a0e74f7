//! Report numbers from our own collections equal an independent computation over the raw records.

mod support;

use rlprof_profiler::clock::TickMapper;
use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use rlprof_report::{Limits, load, summarise};
use std::collections::BTreeMap;

/// Independent numbers of one raw file: role call durations, op totals, memory peak, comm bytes.
struct Truth {
    rank: u32,
    roles: BTreeMap<String, u64>,
    op_total: BTreeMap<String, u64>,
    op_count: BTreeMap<String, u64>,
    kernel_count: u64,
    peak: i64,
    comm_bytes: u64,
    comm_count: u64,
    step_ns: u64,
}

fn truth(path: &std::path::Path) -> Truth {
    let s = RawSummary::read(path, true).unwrap();
    let m = TickMapper::new(s.calibrations[0], *s.calibrations.last().unwrap(), None);
    let rank = s.meta.as_ref().unwrap()["rank"].as_u64().unwrap() as u32;
    let mut t = Truth {
        rank,
        roles: BTreeMap::new(),
        op_total: BTreeMap::new(),
        op_count: BTreeMap::new(),
        kernel_count: 0,
        peak: 0,
        comm_bytes: 0,
        comm_count: 0,
        step_ns: 0,
    };
    let (mut level, mut pending_mem, mut last_comm) = (0i64, None::<bool>, false);
    for (_, r) in &s.kept {
        let dur = m.to_ns(r.a) as i64 - m.to_ns(r.ts) as i64;
        match Kind::from_u8(r.kind).unwrap() {
            Kind::Range if r.cat == RangeCat::RoleCall as u8 => {
                *t.roles.entry(s.name(r.name).into()).or_default() += dur as u64
            }
            Kind::Range if r.cat == RangeCat::Step as u8 => t.step_ns += dur as u64,
            Kind::Range if r.cat == RangeCat::Op as u8 => {
                *t.op_total.entry(s.name(r.name).into()).or_default() += dur as u64;
                *t.op_count.entry(s.name(r.name).into()).or_default() += 1;
            }
            Kind::Kernel => t.kernel_count += 1,
            Kind::Memory => pending_mem = Some(r.cat == 1),
            Kind::Comm => {
                last_comm = true;
                t.comm_count += 1;
            }
            Kind::Ext => {
                if let Some(free) = pending_mem.take() {
                    level += if free { -(r.a as i64) } else { r.a as i64 };
                    t.peak = t.peak.max(level);
                } else if last_comm {
                    t.comm_bytes += r.ts;
                }
                last_comm = false;
            }
            _ => {}
        }
        if r.kind != Kind::Comm as u8 {
            last_comm = r.kind == Kind::Comm as u8;
        }
    }
    t
}

fn close(a: u64, b: u64, events: u64, what: &str) {
    let tol = 4 * events.max(1) + 1000;
    assert!(
        a.abs_diff(b) <= tol,
        "{what}: report {a} vs independent {b}"
    );
}

#[test]
fn json_numbers_equal_an_independent_computation_over_the_raw_records() {
    let dir = tempfile::tempdir().unwrap();
    let done = support::collect(dir.path(), &[1, 2], false, 6);
    assert_eq!(done.len(), 4);
    let loaded = load(dir.path(), &Limits::default()).unwrap();
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    let report = summarise(&loaded);
    let json: serde_json::Value =
        serde_json::from_str(&rlprof_report::render_json(&report).unwrap()).unwrap();
    assert_eq!(json["inputs"].as_array().unwrap().len(), 4);
    for c in &done {
        let t = truth(&c.raw_file);
        let step = c.steps[0].to_string();
        let row = json["breakdown"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["step"] == step.as_str() && r["rank"] == t.rank)
            .unwrap_or_else(|| panic!("no row for step {step} rank {}", t.rank));
        close(row["step_ns"].as_u64().unwrap(), t.step_ns, 1, "step time");
        for (role, ns) in &t.roles {
            close(row["roles"][role].as_u64().unwrap(), *ns, 1, role);
        }
        assert_eq!(t.roles.len(), 4);
        let split = row["rollout_ns"].as_u64().unwrap();
        close(split, t.roles["rollout_generate"], 1, "rollout split");
        let other = row["other_ns"].as_u64().unwrap();
        assert_eq!(
            other + t.roles.values().sum::<u64>().min(t.step_ns),
            row["step_ns"].as_u64().unwrap().max(other),
            "other = step - role calls"
        );
        let idx = report
            .inputs
            .iter()
            .position(|i| i.path == c.raw_file)
            .unwrap();
        let mem = report.memory.iter().find(|m| m.profile == idx).unwrap();
        assert_eq!(
            mem.peak_bytes, t.peak,
            "memory peak equals the replayed records"
        );
        assert_eq!(mem.baseline, "from_collection_start");
        assert!(!mem.at_peak.is_empty() && mem.at_peak[0].op == "matmul");
        let comm = report.comm.iter().find(|x| x.profile == idx).unwrap();
        assert_eq!(comm.name, "all_reduce");
        assert_eq!((comm.count, comm.bytes), (t.comm_count, Some(t.comm_bytes)));
        assert!(comm.bandwidth_gbps.is_some() && comm.wait_ns.is_some());
    }
    // Op totals summed over every collection, per name.
    let mut want_total: BTreeMap<String, u64> = BTreeMap::new();
    let mut want_count: BTreeMap<String, u64> = BTreeMap::new();
    let mut kernels = 0;
    for c in &done {
        let t = truth(&c.raw_file);
        for (k, v) in t.op_total {
            *want_total.entry(k).or_default() += v;
        }
        for (k, v) in t.op_count {
            *want_count.entry(k).or_default() += v;
        }
        kernels += t.kernel_count;
    }
    for (name, total) in &want_total {
        let row = report
            .top
            .iter()
            .find(|r| r.kind.as_str() == "op" && &r.name == name)
            .unwrap();
        assert_eq!(row.count, want_count[name]);
        close(row.total_ns, *total, row.count, name);
    }
    let gemm = report.top.iter().find(|r| r.name == "gemm_kernel").unwrap();
    assert_eq!(gemm.count, kernels);
    // matmul's self time excludes the nested add.
    let matmul = report.top.iter().find(|r| r.name == "matmul").unwrap();
    let add = report.top.iter().find(|r| r.name == "add").unwrap();
    close(
        matmul.self_ns,
        matmul.total_ns - add.total_ns,
        matmul.count * 2,
        "self time",
    );
    // Roles are attributed: every op row has a role call.
    assert!(
        report
            .ops
            .iter()
            .filter(|o| o.kind.as_str() == "op")
            .all(|o| o.role != "-")
    );
}

#[test]
fn the_slow_rank_stands_out_and_any_level_of_path_loads() {
    let dir = tempfile::tempdir().unwrap();
    let done = support::collect(dir.path(), &[1], false, 2);
    let report = summarise(&load(dir.path(), &Limits::default()).unwrap());
    let slow: Vec<_> = report.breakdown.iter().filter(|r| r.slowest).collect();
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].rank, 1, "rank 1 spins 30 ms longer in rollout");
    // The `train` directory (verl's layout), one collection and one raw file load the same
    // profile data.
    let step_dir = dir.path().join("train");
    assert_eq!(
        load(&step_dir, &Limits::default()).unwrap().profiles.len(),
        2
    );
    assert_eq!(
        load(&done[0].dir, &Limits::default())
            .unwrap()
            .profiles
            .len(),
        1
    );
    let one = load(&done[0].raw_file, &Limits::default()).unwrap();
    assert_eq!(one.profiles.len(), 1);
    assert_eq!(one.profiles[0].rank, done[0].rank);
    let text = rlprof_report::render_text(&report);
    assert!(text.contains("slowest rank") && text.contains("all_reduce"));
}

#[test]
fn discrete_collections_merge_into_one_row_per_step_and_rank() {
    let dir = tempfile::tempdir().unwrap();
    let done = support::collect(dir.path(), &[2], true, 1);
    assert_eq!(done.len(), 8);
    let report = summarise(&load(dir.path(), &Limits::default()).unwrap());
    assert_eq!(report.breakdown.len(), 2);
    for r in &report.breakdown {
        assert_eq!(r.step, "2");
        assert_eq!(
            r.step_ns, None,
            "no step marker in discrete mode: left empty"
        );
        assert_eq!(r.roles.len(), 4);
        assert_eq!(r.profiles.len(), 4);
    }
}

#[test]
fn a_path_with_nothing_loadable_is_an_error_naming_the_skipped_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.pt.trace.json"), b"{not json").unwrap();
    let err = load(dir.path(), &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("bad.pt.trace.json"), "{err}");
}

/// The `torch` tool writes each collection's trace beside it (`../{basename}.json.gz`, as verl
/// names it); `report` on the save path reads the collection's raw data and says the trace is
/// not read a second time, so nothing is counted twice and no second job appears.
#[test]
fn a_torch_trace_written_beside_its_collection_is_not_read_twice() {
    use rlprof_profiler::plan::Tool;
    let dir = tempfile::tempdir().unwrap();
    let mut plan = support::plan(dir.path(), &[1], false);
    plan.tool = Some(Tool::Torch);
    for role in plan.roles.values_mut() {
        role.tool = Tool::Torch;
    }
    let profiler = rlprof_profiler::Profiler::new(plan);
    std::thread::scope(|s| {
        for r in 0..2 {
            let rank = profiler.rank(r);
            s.spawn(move || {
                let _b = rank.bind_thread();
                support::step(&rank, 1, 2);
            });
        }
    });
    let done = profiler.completed();
    assert_eq!(done.len(), 2);
    let mut beside = Vec::new();
    for c in &done {
        rlprof_export::analyse::analyse_collection(&c.dir).unwrap();
        let parent = c.dir.parent().unwrap();
        beside.extend(
            std::fs::read_dir(parent)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".json.gz")),
        );
    }
    beside.sort();
    beside.dedup();
    assert_eq!(beside.len(), 2, "one trace per rank beside its collection");
    let loaded = load(dir.path(), &Limits::default()).unwrap();
    assert_eq!(loaded.profiles.len(), 2, "{:?}", loaded.notes);
    assert!(
        loaded
            .profiles
            .iter()
            .all(|p| p.source.to_string_lossy().ends_with(".rlraw")),
        "read from the raw data"
    );
    for t in &beside {
        assert!(
            loaded
                .notes
                .iter()
                .any(|n| n.contains(&*t.to_string_lossy()) && n.contains("not read twice")),
            "{t:?}: {:?}",
            loaded.notes
        );
    }
    // Read alone, the trace is a foreign one, with one update_actor call per step (the phase
    // of the same name around it is not a second call).
    let one = load(&beside[0], &Limits::default()).unwrap();
    let report = summarise(&one);
    assert_eq!(report.breakdown.len(), 1);
    let row = &report.breakdown[0];
    let own = summarise(&load(&done[0].raw_file, &Limits::default()).unwrap());
    let raw_row = own.breakdown.iter().find(|r| r.rank == row.rank).unwrap();
    assert_eq!(row.roles.len(), 4, "{:?}", row.roles);
    // Once, not twice: equal up to the phase's few microseconds around the call (the support
    // step opens the phase outside the call) and the trace's rounding.
    let (a, b) = (row.update_ns as f64, raw_row.update_ns as f64);
    assert!(
        (a - b).abs() <= 0.05 * b,
        "update {a} ns from the trace vs {b} ns raw"
    );
}
