//! The update is visible inside: every backward node is an op (`autograd::engine::evaluate_function:
//! <Op>Backward0` with `<Op>Backward0` and its kernel beneath) under its forward op's module path
//! and sequence number, one per forward op that needs a gradient; backward allocations are
//! attributed to backward ops; the optimizer, clipping, zero-grad and gradient accumulation are
//! named; and ops cover most of every role call, where the ops that existed before (forward
//! tensor ops and collectives) covered much less of `update_actor`.

use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat, Record};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

#[global_allocator]
static GLOBAL: rlprof_profiler::alloc::TrackingAllocator =
    rlprof_profiler::alloc::TrackingAllocator::system();

const DEFAULT: &str = include_str!("../../../configs/grpo_default.yaml");

fn raw_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            raw_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rlraw") {
            out.push(p);
        }
    }
}

/// Ops named by the change under test (backward, loss, optimizer and host-side steps).
fn is_new_op(name: &str) -> bool {
    name.starts_with("autograd::")
        || name.ends_with("Backward0")
        || [
            "accumulate_grad",
            "adamw",
            "linalg_vector_norm",
            "copy_",
            "zero_",
            "compute_policy_loss",
            "compute_value_loss",
            "collate",
            "sample",
            "stop_check",
            "prepare_inputs",
            "to_host",
        ]
        .contains(&name)
}

/// Per role call name: the fraction of its time inside the union of op and collective
/// intervals on its thread (summed over its calls), counting only ops `keep` accepts.
fn coverage(
    recs: &[(u32, Record)],
    name: &dyn Fn(u32) -> String,
    keep: &dyn Fn(&str) -> bool,
) -> BTreeMap<String, f64> {
    let mut calls: Vec<(u32, u64, u64, String)> = Vec::new();
    let mut ivs: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for (t, r) in recs {
        match (Kind::from_u8(r.kind), RangeCat::from_u8(r.cat)) {
            (Some(Kind::Range), Some(RangeCat::RoleCall)) => {
                calls.push((*t, r.ts, r.a, name(r.name)))
            }
            (Some(Kind::Range), Some(RangeCat::Op)) if keep(&name(r.name)) => {
                ivs.entry(*t).or_default().push((r.ts, r.a))
            }
            (Some(Kind::Comm), _) => ivs.entry(*t).or_default().push((r.ts, r.a)),
            _ => {}
        }
    }
    for v in ivs.values_mut() {
        v.sort_unstable();
    }
    let mut sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (t, s, e, n) in calls {
        let mut covered = 0;
        let mut end = s;
        for &(a, b) in ivs.get(&t).map_or(&[][..], |v| v.as_slice()) {
            let (a, b) = (a.max(end), b.min(e));
            if b > a {
                covered += b - a;
                end = b;
            }
        }
        let x = sums.entry(n).or_default();
        x.0 += covered;
        x.1 += e - s;
    }
    sums.into_iter()
        .map(|(k, (c, t))| (k, c as f64 / t.max(1) as f64))
        .collect()
}

#[test]
fn backward_and_optimizer_ops_cover_the_update() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let overrides: Vec<String> = [
        format!("global_profiler.save_path={}", save.display()),
        "global_profiler.steps=[2]".into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.contents=[npu,cpu,memory,module]".into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.analysis=False".into(),
        "trainer.total_training_steps=2".into(),
        "trainer.sft_warmup_steps=1".into(),
        format!(
            "trainer.default_local_dir={}",
            tmp.path().join("c").display()
        ),
        "data.train_batch_size=8".into(),
        "actor_rollout_ref.actor.ppo_mini_batch_size=4".into(),
        "actor_rollout_ref.rollout.n=4".into(),
        "actor_rollout_ref.model.hidden_size=64".into(),
        "actor_rollout_ref.model.num_hidden_layers=2".into(),
        "actor_rollout_ref.model.intermediate_size=128".into(),
    ]
    .into();
    let doc = rlprof_config::load_document_str(DEFAULT, "default", &overrides).unwrap();
    let plan = rlprof_config::build_plan(&doc).unwrap();
    let profiler = rlprof_profiler::Profiler::new(plan);
    rlprof_trainer::run(&cfg(&doc), profiler, Default::default()).unwrap();

    let mut files = Vec::new();
    raw_files(&save, &mut files);
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let s = RawSummary::read(f, true).unwrap();
        let name = |id: u32| s.strings.get(&id).cloned().unwrap_or_default();
        let recs = &s.kept;
        // forward ops with a sequence number, backward ops by sequence number
        let mut fwd: BTreeMap<u32, String> = BTreeMap::new();
        let mut bwd: BTreeMap<u32, (String, String)> = BTreeMap::new();
        let mut names = BTreeSet::new();
        let mut bwd_mem = 0;
        for (i, (_, r)) in recs.iter().enumerate() {
            let is_op = r.kind == Kind::Range as u8 && r.cat == RangeCat::Op as u8;
            if is_op {
                names.insert(name(r.name));
            }
            let next = recs.get(i + 1).map(|(_, n)| *n);
            if let (true, Some(x)) = (is_op, next.filter(|n| n.kind == Kind::Ext as u8)) {
                let module = name((x.ts & 0xffff_ffff) as u32);
                if x.name != 0 && x.cat == 1 {
                    let prev = bwd.insert(x.name, (name(r.name), module));
                    assert!(prev.is_none(), "one backward op per sequence number");
                } else if x.name != 0 {
                    assert!(fwd.insert(x.name, name(r.name)).is_none());
                }
            }
            if r.kind == Kind::Memory as u8
                && r.cat == 0
                && name(r.name).starts_with("autograd::engine::evaluate_function: ")
            {
                bwd_mem += 1;
            }
        }
        assert!(
            fwd.len() > 50,
            "forward ops that need a gradient: {}",
            fwd.len()
        );
        assert_eq!(
            fwd.keys().collect::<Vec<_>>(),
            bwd.keys().collect::<Vec<_>>(),
            "every forward op that needs a gradient has exactly one backward op"
        );
        for (seq, (bname, module)) in &bwd {
            let want = format!(
                "autograd::engine::evaluate_function: {}",
                rlprof_trainer::model::autograd::backward_name(&fwd[seq])
            );
            assert_eq!(bname, &want);
            assert!(
                !module.is_empty(),
                "{bname} carries its forward op's module"
            );
        }
        for n in [
            "autograd::engine::evaluate_function: LinearBackward0",
            "LinearBackward0",
            "AttentionBackward0",
            "RmsNormBackward0",
            "EmbeddingBackward0",
            "ComputePolicyLossBackward0",
            "accumulate_grad",
            "adamw",
            "linalg_vector_norm",
            "zero_",
            "sample",
            "stop_check",
        ] {
            assert!(names.contains(n), "{n} missing from {names:?}");
        }
        assert!(
            bwd_mem > 0,
            "backward allocations are attributed to backward ops"
        );

        let all = coverage(recs, &name, &|_| true);
        let before = coverage(recs, &name, &|n| !is_new_op(n));
        for call in [
            "rollout_generate",
            "actor_compute_log_prob",
            "ref_compute_log_prob",
            "actor_update",
        ] {
            assert!(
                all[call] > before[call] - 1e-9,
                "{call}: {all:?} vs {before:?}"
            );
        }
        // Ratios of time on a shared machine: the thresholds leave room for preemption. A rank
        // that waits long in a collective (the other rank preempted) is covered by that
        // collective either way, so the gain, not the old coverage, is what is asserted.
        assert!(all["actor_update"] > 0.8, "{all:?}");
        assert!(
            all["actor_update"] > before["actor_update"] + 0.01,
            "the new ops add coverage to actor_update: {all:?} vs {before:?}"
        );
        eprintln!("{f:?}: coverage with the change {all:?}, without {before:?}");
    }
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
