//! Fine-grained collection by config: a discrete rollout collection with a decode-step schedule
//! holds exactly the scheduled decode steps and is far smaller than the unscheduled one.

use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use std::path::{Path, PathBuf};

mod support;

const DEFAULT: &str = include_str!("../../../configs/grpo_default.yaml");

fn rollout_raw(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rollout_raw(&p, out);
        } else if p.extension().is_some_and(|x| x == "rlraw")
            // verl's layout: a rollout replica's collections go to agent_loop_rollout_replica_{rank}.
            && p.to_string_lossy().contains("/agent_loop_rollout_replica_0/")
        {
            out.push(p);
        }
    }
}

/// Runs one profiled step (discrete mode, rank 0) and returns (events, decode ids) of the
/// rollout collection.
fn rollout_collection(schedule: &[&str]) -> (u64, Vec<u64>) {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let mut overrides = support::discrete_rank0_step(&save, &tmp.path().join("ckpt"));
    overrides.extend(
        [
            "data.max_response_length=16",
            "actor_rollout_ref.model.num_hidden_layers=2",
        ]
        .map(String::from),
    );
    overrides.extend(schedule.iter().map(|s| s.to_string()));
    let doc = rlprof_config::load_document_str(DEFAULT, "default", &overrides).unwrap();
    let plan = rlprof_config::build_plan(&doc).unwrap();
    let profiler = rlprof_profiler::Profiler::new(plan);
    rlprof_trainer::run(&cfg(&doc), profiler, Default::default()).unwrap();
    let mut files = Vec::new();
    rollout_raw(&save, &mut files);
    assert_eq!(
        files.len(),
        1,
        "one rollout collection on rank 0: {files:?}"
    );
    let s = RawSummary::read(&files[0], true).unwrap();
    let mut ids = Vec::new();
    for (i, (_, r)) in s.kept.iter().enumerate() {
        if r.kind == Kind::Range as u8 && r.cat == RangeCat::Iteration as u8 {
            let ext = s.kept[i + 1].1;
            assert_eq!(ext.kind, Kind::Ext as u8);
            ids.push(ext.ts);
        }
    }
    (s.end.expect("clean end").0, ids)
}

#[test]
fn decode_step_schedule_collects_only_its_steps() {
    let (all_events, all_ids) = rollout_collection(&[]);
    assert!(all_ids.is_empty(), "no markers without a schedule");
    let (events, ids) = rollout_collection(&[
        "+actor_rollout_ref.rollout.profiler.tool_config.npu.schedule.skip_first=3",
        "+actor_rollout_ref.rollout.profiler.tool_config.npu.schedule.warmup=1",
        "+actor_rollout_ref.rollout.profiler.tool_config.npu.schedule.active=2",
    ]);
    assert_eq!(ids, vec![4, 5], "skip 3, warm up 1, record 2");
    assert!(
        all_events >= 5 * events,
        "scheduled {events} events vs unscheduled {all_events}"
    );
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
