//! Controller behaviour: collections per mode over a scripted run on two ranks.

mod support;

use rlprof_profiler::Profiler;
use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use std::collections::BTreeMap;
use support::*;

/// Runs 6 steps on 2 ranks (one thread each) and returns the completed collections.
fn run(plan: rlprof_profiler::ProfilePlan) -> Vec<rlprof_profiler::CompletedCollection> {
    let profiler = Profiler::new(plan);
    std::thread::scope(|s| {
        for r in 0..2 {
            let rank = profiler.rank(r);
            s.spawn(move || {
                let _b = rank.bind_thread();
                for step in 1..=6 {
                    scripted_step(&rank, step, 10);
                }
            });
        }
    });
    profiler.completed()
}

/// The directory holding the collection, relative to `root`, and the steps it covers:
/// `train step1`, `actor_update step2` (verl's layout) or `step1/e2e step1` (step-grouped).
fn rel(c: &rlprof_profiler::CompletedCollection, root: &std::path::Path) -> String {
    let p = c.dir.parent().unwrap().strip_prefix(root).unwrap();
    format!(
        "{} step{}",
        p.display(),
        rlprof_profiler::collection::names::step_label(&c.steps)
    )
}

fn op_count(c: &rlprof_profiler::CompletedCollection) -> usize {
    let s = RawSummary::read(&c.raw_file, true).unwrap();
    s.kept
        .iter()
        .filter(|(_, r)| r.kind == Kind::Range as u8 && r.cat == RangeCat::Op as u8)
        .count()
}

fn range_names(c: &rlprof_profiler::CompletedCollection, cat: RangeCat) -> Vec<String> {
    let s = RawSummary::read(&c.raw_file, true).unwrap();
    let mut v: Vec<String> = s
        .kept
        .iter()
        .filter(|(_, r)| r.kind == Kind::Range as u8 && r.cat == cat as u8)
        .map(|(_, r)| s.name(r.name).to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn end_to_end_one_collection_per_step_and_rank_with_role_calls_inside() {
    let dir = tempfile::tempdir().unwrap();
    let done = run(plan(
        dir.path(),
        &[1, 2, 5],
        false,
        role_plan(dir.path(), vec![0, 1], false),
        2,
    ));
    assert_eq!(done.len(), 6);
    let mut per: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for c in &done {
        per.entry(rel(c, dir.path())).or_default().push(c.rank);
        assert!(
            c.dir
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("_ascend_pt")
        );
        assert!(c.dir.is_dir() && c.raw_file.is_file());
        assert_eq!(op_count(c), 40, "4 role calls x 10 ops inside the step");
        assert_eq!(
            range_names(c, RangeCat::RoleCall),
            [
                "actor_compute_log_prob",
                "actor_update",
                "ref_compute_log_prob",
                "rollout_generate",
            ]
        );
        assert_eq!(range_names(c, RangeCat::Step).len(), 1);
    }
    assert_eq!(
        per.keys().cloned().collect::<Vec<_>>(),
        ["train step1", "train step2", "train step5"]
    );
    for ranks in per.values_mut() {
        ranks.sort();
        assert_eq!(ranks, &[0, 1]);
    }
    // nothing left under a temporary name
    let tmp = walk(dir.path())
        .into_iter()
        .filter(|p| p.ends_with(".tmp"))
        .count();
    assert_eq!(tmp, 0);
}

#[test]
fn discrete_one_collection_per_role_call_named_by_role() {
    let dir = tempfile::tempdir().unwrap();
    let done = run(plan(
        dir.path(),
        &[1, 2, 5],
        false,
        role_plan(dir.path(), vec![0, 1], true),
        2,
    ));
    assert_eq!(done.len(), 3 * 4 * 2);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for c in &done {
        *kinds.entry(rel(c, dir.path())).or_default() += 1;
        assert_eq!(op_count(c), 10, "only the ops of the one role call");
        assert_eq!(range_names(c, RangeCat::RoleCall).len(), 1);
    }
    for step in [1, 2, 5] {
        for role in [
            "actor_compute_log_prob",
            "ref_compute_log_prob",
            "actor_update",
        ] {
            assert_eq!(
                kinds.get(&format!("{role} step{step}")),
                Some(&2),
                "{role} step{step}"
            );
        }
        // verl: a rollout replica's traces go to agent_loop_rollout_replica_{rank}.
        for r in 0..2 {
            let k = format!("agent_loop_rollout_replica_{r} step{step}");
            assert_eq!(kinds.get(&k), Some(&1), "{k}");
        }
    }
}

#[test]
fn continuous_steps_share_one_collection() {
    let dir = tempfile::tempdir().unwrap();
    let done = run(plan(
        dir.path(),
        &[1, 2, 5],
        true,
        role_plan(dir.path(), vec![0, 1], false),
        2,
    ));
    assert_eq!(done.len(), 4);
    let mut names: Vec<String> = done.iter().map(|c| rel(c, dir.path())).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "train step1-2",
            "train step1-2",
            "train step5",
            "train step5"
        ]
    );
    for c in &done {
        let steps = range_names(c, RangeCat::Step).len();
        assert_eq!(op_count(c), 40 * steps);
        assert_eq!(c.steps.len(), steps);
    }
}

#[test]
fn only_selected_ranks_collect_and_unselected_steps_record_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let done = run(plan(
        dir.path(),
        &[3],
        false,
        role_plan(dir.path(), vec![1], false),
        2,
    ));
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].rank, 1);
    assert_eq!(done[0].steps, vec![3]);
    assert_eq!(op_count(&done[0]), 40);
}

#[test]
fn role_enabled_with_no_rank_collects_nothing_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("profile");
    let done = run(plan(
        &save,
        &[1, 2],
        false,
        role_plan(&save, vec![], false),
        2,
    ));
    assert!(done.is_empty());
    assert!(!save.exists(), "nothing may be written under save_path");
}

#[test]
fn a_second_run_into_the_same_save_path_overwrites_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = || {
        plan(
            dir.path(),
            &[1],
            false,
            role_plan(dir.path(), vec![0, 1], false),
            2,
        )
    };
    let a = run(p());
    let b = run(p());
    let mut all: Vec<_> = a.iter().chain(b.iter()).map(|c| c.dir.clone()).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4, "four distinct collection directories");
    for d in &all {
        assert!(d.is_dir());
    }
}

fn walk(p: &std::path::Path) -> Vec<String> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            out.push(e.path().to_string_lossy().into_owned());
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            }
        }
    }
    out
}

#[test]
fn step_grouped_layout_stays_available() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(
        dir.path(),
        &[1, 2],
        false,
        role_plan(dir.path(), vec![0, 1], true),
        2,
    );
    p.layout = rlprof_profiler::plan::Layout::StepGrouped;
    let done = run(p);
    let mut kinds: Vec<String> = done
        .iter()
        .map(|c| {
            c.dir
                .parent()
                .unwrap()
                .strip_prefix(dir.path())
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "step1/actor_compute_log_prob",
            "step1/actor_update",
            "step1/ref_compute_log_prob",
            "step1/rollout_generate",
            "step2/actor_compute_log_prob",
            "step2/actor_update",
            "step2/ref_compute_log_prob",
            "step2/rollout_generate",
        ]
    );
}
