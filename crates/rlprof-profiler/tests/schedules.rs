//! Fine-grained collection by schedule: the arithmetic, the config, and what a scheduled
//! collection really contains (only the scheduled iterations' content, marked with their ids).

mod support;

use rlprof_config::{build_plan, load_document_str};
use rlprof_profiler::plan::{IterAction, IterKind, RoleCall, Schedule};
use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use rlprof_profiler::{CompletedCollection, NameId, Profiler, iteration, name, op, phase};
use support::*;

fn sched(skip_first: u64, wait: u64, warmup: u64, active: u64, repeat: u64) -> Schedule {
    Schedule {
        skip_first,
        wait,
        warmup,
        active,
        repeat,
    }
}

#[test]
fn arithmetic_matches_torch_profiler_schedule() {
    // torch: skip_first=1, wait=1, warmup=1, active=2, repeat=2 over 12 steps
    let s = sched(1, 1, 1, 2, 2);
    let actions: Vec<IterAction> = (0..12).map(|i| s.action(i)).collect();
    use IterAction::*;
    assert_eq!(
        actions,
        vec![
            Skip, Skip, Warmup, Record, Record, Skip, Warmup, Record, Record, Skip, Skip, Skip
        ]
    );
    assert_eq!(s.recorded_in(12), vec![3, 4, 7, 8]);
    // repeat 0: cycles without end
    assert_eq!(sched(0, 1, 0, 1, 0).recorded_in(8), vec![1, 3, 5, 7]);
}

#[test]
fn schedule_longer_than_the_iterations_records_what_exists() {
    let s = sched(30, 0, 0, 41, 1);
    assert_eq!(s.recorded_in(50), (30..50).collect::<Vec<_>>());
    assert!(s.recorded_in(20).is_empty());
    assert_eq!(s.recorded_in(1000), (30..=70).collect::<Vec<_>>());
}

fn doc(extra: &[&str]) -> rlprof_config::Node {
    let base = "trainer: {nnodes: 1, n_gpus_per_node: 2}\nglobal_profiler: {tool: npu, steps: [2]}\nactor_rollout_ref:\n  actor:\n    profiler: {enable: true, all_ranks: false, ranks: [0], tool_config: {npu: {discrete: true}}}\n";
    let ov: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    load_document_str(base, "<test>", &ov).unwrap()
}

#[test]
fn config_reads_schedules_per_role_and_granularity() {
    let d = doc(&[
        "+actor_rollout_ref.rollout.profiler={enable: true, ranks: [0], tool_config: {npu: {discrete: true, schedule: {skip_first: 30, active: 41}}}}",
        "+actor_rollout_ref.actor.profiler.tool_config.npu.schedule={active: 1}",
        "+actor_rollout_ref.actor.profiler.tool_config.npu.granularity=mini_batch",
    ]);
    let plan = build_plan(&d).unwrap();
    let rollout = plan.role(rlprof_profiler::Role::Rollout).unwrap();
    assert_eq!(rollout.schedule, Some(sched(30, 0, 0, 41, 1)));
    let actor = plan.role(rlprof_profiler::Role::Actor).unwrap();
    assert_eq!(actor.schedule, Some(sched(0, 0, 0, 1, 1)));
    assert_eq!(
        IterKind::counted_for(RoleCall::UpdateActor, actor.granularity),
        Some(IterKind::MiniBatch)
    );
    // ref follows the actor for its settings but a schedule is not inherited
    let r = plan.role(rlprof_profiler::Role::Ref).unwrap();
    assert_eq!(r.schedule, None);
    let words = rlprof_config::describe(&plan);
    assert!(
        words.contains("decode steps of rollout_generate: records iterations 30-70"),
        "{words}"
    );
    let json = rlprof_config::plan_json(&plan);
    assert_eq!(json["roles"]["rollout"]["schedule"]["skip_first"], 30);
}

#[test]
fn global_default_schedule_applies_to_roles_without_their_own() {
    let d = doc(&["+global_profiler.global_tool_config.schedule={wait: 2, active: 3}"]);
    let plan = build_plan(&d).unwrap();
    let actor = plan.role(rlprof_profiler::Role::Actor).unwrap();
    assert_eq!(actor.schedule, Some(sched(0, 2, 0, 3, 1)));
}

#[test]
fn bad_schedules_name_the_path_and_valid_values() {
    let d = doc(&[
        "+actor_rollout_ref.actor.profiler.tool_config.npu.schedule={activ: 2, active: 0, wait: -1}",
        "+actor_rollout_ref.actor.profiler.tool_config.npu.granularity=batch",
    ]);
    let err = build_plan(&d).unwrap_err().to_string();
    let p = "actor_rollout_ref.actor.profiler.tool_config.npu";
    assert!(
        err.contains(&format!("{p}.schedule")) && err.contains("activ"),
        "{err}"
    );
    assert!(err.contains("active"), "{err}");
    assert!(err.contains(&format!("{p}.schedule.active")), "{err}");
    assert!(err.contains(&format!("{p}.schedule.wait")), "{err}");
    assert!(
        err.contains(&format!("{p}.granularity")) && err.contains("micro_batch, mini_batch"),
        "{err}"
    );
}

/// One step of a scripted job: a rollout call with `decode` decode steps (3 ops each, plus a
/// prefill op outside any iteration) and an update call with `micro` micro-batches.
fn scripted(rank: &rlprof_profiler::RankProfiler, step: u64, decode: u64, micro: u64) {
    let _s = rank.step(step);
    {
        let _p = phase("gen");
        let _c = rank.role_call(RoleCall::GenerateSequences);
        {
            let _o = op(name!("prefill"), NameId::NONE);
        }
        for _ in 0..decode {
            let _it = iteration(IterKind::DecodeStep);
            for _ in 0..3 {
                let _o = op(name!("decode_matmul"), NameId::NONE);
            }
        }
    }
    {
        let _p = phase("update_actor");
        let _c = rank.role_call(RoleCall::UpdateActor);
        for _ in 0..micro {
            let _it = iteration(IterKind::MicroBatch);
            let _o = op(name!("backward"), NameId::NONE);
        }
    }
}

fn run(plan: rlprof_profiler::ProfilePlan, decode: u64) -> Vec<CompletedCollection> {
    let profiler = Profiler::new(plan);
    let rank = profiler.rank(0);
    let _b = rank.bind_thread();
    for step in 1..=2 {
        scripted(&rank, step, decode, 4);
    }
    profiler.completed()
}

/// (iteration ids recorded, op names with counts) of one collection.
fn contents(c: &CompletedCollection) -> (Vec<u64>, std::collections::BTreeMap<String, usize>) {
    let s = RawSummary::read(&c.raw_file, true).unwrap();
    let mut ids = vec![];
    let mut ops = std::collections::BTreeMap::new();
    for (i, (_, r)) in s.kept.iter().enumerate() {
        if r.kind == Kind::Range as u8 && r.cat == RangeCat::Iteration as u8 {
            let ext = s.kept[i + 1].1;
            assert_eq!(ext.kind, Kind::Ext as u8);
            ids.push(ext.ts);
        }
        if r.kind == Kind::Range as u8 && r.cat == RangeCat::Op as u8 {
            *ops.entry(s.name(r.name).to_string()).or_insert(0) += 1;
        }
    }
    (ids, ops)
}

#[test]
fn scheduled_discrete_rollout_has_exactly_the_scheduled_decode_steps_and_is_5x_smaller() {
    let dir = tempfile::tempdir().unwrap();
    let mut rollout = role_plan(dir.path(), vec![0], true);
    let mut p = plan(
        dir.path(),
        &[2],
        false,
        role_plan(dir.path(), vec![], true),
        1,
    );
    let unscheduled = {
        p.roles
            .insert(rlprof_profiler::Role::Rollout, rollout.clone());
        run(p.clone(), 500)
    };
    rollout.schedule = Some(sched(30, 0, 0, 41, 1));
    let mut actor = role_plan(dir.path(), vec![0], true);
    actor.schedule = Some(sched(0, 0, 0, 1, 1));
    p.roles.insert(rlprof_profiler::Role::Rollout, rollout);
    p.roles.insert(rlprof_profiler::Role::Actor, actor);
    let scheduled = run(p, 500);

    let generation = |cs: &[CompletedCollection]| {
        cs.iter()
            .find(|c| c.role_dir == "rollout_generate")
            .cloned()
            .expect("rollout collection")
    };
    let (ids_u, ops_u) = contents(&generation(&unscheduled));
    assert!(ids_u.is_empty(), "no schedule: no iteration markers");
    assert_eq!(ops_u["decode_matmul"], 1500);
    assert_eq!(ops_u["prefill"], 1);

    let g = generation(&scheduled);
    let (ids, ops) = contents(&g);
    assert_eq!(ids, (30..=70).collect::<Vec<_>>());
    assert_eq!(ops["decode_matmul"], 41 * 3);
    assert!(
        !ops.contains_key("prefill"),
        "prefill is outside the scheduled decode steps"
    );
    let meta = RawSummary::read(&g.raw_file, false).unwrap().meta.unwrap();
    assert_eq!(meta["schedules"]["rollout"]["schedule"]["skip_first"], 30);
    let ratio = generation(&unscheduled).bytes as f64 / g.bytes as f64;
    assert!(
        ratio >= 5.0,
        "scheduled collection only {ratio:.1}x smaller"
    );

    let upd = scheduled
        .iter()
        .find(|c| c.role_dir == "actor_update")
        .expect("update collection");
    let (ids, ops) = contents(upd);
    assert_eq!(ids, vec![0], "first micro-batch only");
    assert_eq!(ops["backward"], 1);
}

#[test]
fn warmup_iterations_run_but_leave_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut rollout = role_plan(dir.path(), vec![0], false);
    rollout.schedule = Some(sched(0, 1, 2, 1, 2));
    let mut p = plan(
        dir.path(),
        &[1],
        false,
        role_plan(dir.path(), vec![], false),
        1,
    );
    p.roles.insert(rlprof_profiler::Role::Rollout, rollout);
    let done = run(p, 10);
    // The rollout enabled alone collects its generation call only, as verl's rollout engine
    // profiles generation only.
    assert_eq!(done.len(), 1, "one collection, around generation");
    assert_eq!(done[0].role_dir, "rollout_generate");
    let (ids, ops) = contents(&done[0]);
    // cycle = wait 1, warmup 2, active 1: ids 3 and 7
    assert_eq!(ids, vec![3, 7]);
    assert_eq!(ops["decode_matmul"], 6);
    assert!(
        !ops.contains_key("backward"),
        "no update in a rollout-only collection"
    );
    assert!(
        !ops.contains_key("prefill"),
        "outside the scheduled iterations"
    );
}
