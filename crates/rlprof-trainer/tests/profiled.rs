//! A profiled 2-rank run records what the trainer's instrumentation promises: role calls with the
//! reference names, phase markers, every tensor op with its module path and shapes, device
//! kernels, collectives with bytes, tensor memory attributed to ops, and decode-step iterations.

use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[global_allocator]
static GLOBAL: rlprof_profiler::alloc::TrackingAllocator =
    rlprof_profiler::alloc::TrackingAllocator::system();

/// Ops that run host work rather than a tensor op (no input shapes).
const HOST_OPS: &[&str] = &[
    "accumulate_grad",
    "adamw",
    "linalg_vector_norm",
    "copy_",
    "zero_",
    "collate",
    "sample",
    "stop_check",
    "prepare_inputs",
    "to_host",
];

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

#[test]
fn profiled_run_records_roles_phases_ops_comm_and_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let overrides: Vec<String> = [
        format!("global_profiler.save_path={}", save.display()),
        "global_profiler.steps=[2]".into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.contents=[npu,cpu,memory,shapes,module]"
            .into(),
        "actor_rollout_ref.actor.profiler.tool_config.npu.analysis=False".into(),
        "+actor_rollout_ref.rollout.profiler.tool_config.npu.schedule.skip_first=1".into(),
        "+actor_rollout_ref.rollout.profiler.tool_config.npu.schedule.active=2".into(),
        "trainer.total_training_steps=2".into(),
        "trainer.sft_warmup_steps=1".into(),
        format!(
            "trainer.default_local_dir={}",
            tmp.path().join("ckpt").display()
        ),
        "data.train_batch_size=4".into(),
        "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
        "actor_rollout_ref.rollout.n=2".into(),
        "actor_rollout_ref.model.hidden_size=32".into(),
        "actor_rollout_ref.model.num_hidden_layers=2".into(),
        "actor_rollout_ref.model.intermediate_size=64".into(),
    ]
    .into();
    let doc = rlprof_config::load_document_str(DEFAULT, "default", &overrides).unwrap();
    let plan = rlprof_config::build_plan(&doc).unwrap();
    let profiler = rlprof_profiler::Profiler::new(plan);
    let summary = rlprof_trainer::run(&cfg(&doc), profiler.clone(), Default::default()).unwrap();
    assert_eq!(summary.steps, 2);
    assert_eq!(profiler.completed().len(), 2, "one collection per rank");

    let mut files = Vec::new();
    raw_files(&save, &mut files);
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let s = RawSummary::read(f, true).unwrap();
        assert!(s.corruption.is_none() && s.end.is_some(), "{f:?} clean");
        let name = |id: u32| s.strings.get(&id).cloned().unwrap_or_default();
        let mut calls = BTreeSet::new();
        let mut phases = BTreeSet::new();
        let mut comms = BTreeSet::new();
        let mut modules = BTreeSet::new();
        let (mut ops, mut kernels, mut decode, mut mem_in_ops, mut comm_bytes) = (0, 0, 0, 0, 0u64);
        let (mut with_shapes, mut fwd_ops) = (0, 0);
        let recs = &s.kept;
        for (i, (_, r)) in recs.iter().enumerate() {
            let next = recs.get(i + 1).map(|(_, n)| *n);
            match (Kind::from_u8(r.kind), RangeCat::from_u8(r.cat)) {
                (Some(Kind::Range), Some(RangeCat::RoleCall)) => {
                    calls.insert(name(r.name));
                }
                (Some(Kind::Range), Some(RangeCat::Phase)) => {
                    phases.insert(name(r.name));
                }
                (Some(Kind::Range), Some(RangeCat::Iteration)) => {
                    decode += (name(r.name) == "decode_step") as usize;
                }
                (Some(Kind::Range), Some(RangeCat::Op)) => {
                    ops += 1;
                    // shapes are recorded on forward tensor ops (not on backward nodes or on
                    // host work such as the optimizer step)
                    let n = name(r.name);
                    let tensor_op = !(n.starts_with("autograd::")
                        || n.ends_with("Backward0")
                        || HOST_OPS.contains(&n.as_str()));
                    fwd_ops += tensor_op as usize;
                    if let Some(x) = next.filter(|n| n.kind == Kind::Ext as u8) {
                        modules.insert(name((x.ts & 0xffff_ffff) as u32));
                        with_shapes += (tensor_op && (x.ts >> 32) != 0) as usize;
                    }
                }
                _ => {}
            }
            if r.kind == Kind::Kernel as u8 {
                kernels += 1;
            }
            if r.kind == Kind::Memory as u8 && r.name != 0 {
                mem_in_ops += 1;
            }
            if r.kind == Kind::Comm as u8 {
                comms.insert(name(r.name));
                comm_bytes += next.map_or(0, |n| n.ts);
            }
        }
        for c in [
            "rollout_generate",
            "actor_compute_log_prob",
            "ref_compute_log_prob",
            "actor_update",
        ] {
            assert!(calls.contains(c), "{c} missing from {calls:?}");
        }
        for p in [
            "gen",
            "reward",
            "old_log_prob",
            "ref",
            "adv",
            "update_actor",
            "update_weights",
        ] {
            assert!(phases.contains(p), "phase {p} missing from {phases:?}");
        }
        for c in ["all_reduce", "all_gather", "reduce_scatter"] {
            assert!(comms.contains(c), "{c} missing from {comms:?}");
        }
        assert!(comm_bytes > 0);
        assert!(
            modules.contains("model.layers.0.self_attn.q_proj"),
            "{modules:?}"
        );
        assert!(modules.contains("model.layers.1.mlp"), "{modules:?}");
        assert!(ops > 100 && kernels > 100, "ops {ops} kernels {kernels}");
        assert!(
            with_shapes > fwd_ops / 2,
            "shapes on {with_shapes} of {fwd_ops} forward tensor ops"
        );
        assert_eq!(
            decode, 2,
            "decode steps 1 and 2 of the one rollout call are marked"
        );
        assert!(mem_in_ops > 0, "tensor memory attributed to ops");
    }
}

/// The job config of `doc` (read once, as the CLI does, and passed to the run).
fn cfg(doc: &rlprof_config::Node) -> rlprof_trainer::TrainConfig {
    rlprof_trainer::TrainConfig::from_doc(doc).unwrap()
}
