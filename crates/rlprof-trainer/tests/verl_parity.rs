//! Runs of the trainer with verl-style settings, held against verl 0.9.1's rules as its source
//! states them (`verl/utils/profiler/mstx_profile.py` `get_npu_profiler`,
//! `torch_profile.py` `build_trace_basename` / `get_torch_profiler` / `Profiler.annotate`,
//! `torch_memory_profile.py`, `verl/workers/engine_workers.py`, `verl/trainer/ppo/ray_trainer.py`):
//! the directories and file names, the range names, one torch_memory window per snapshot, the
//! stages a schedule samples. Each test is a row of `docs/verl-differences.md` or of the verl
//! side rlprof now matches.

use rlprof_profiler::raw::RawSummary;
use rlprof_profiler::record::{Kind, RangeCat};
use rlprof_profiler::{CompletedCollection, ProfilePlan};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[global_allocator]
static GLOBAL: rlprof_profiler::alloc::TrackingAllocator =
    rlprof_profiler::alloc::TrackingAllocator::system();

const DEFAULT: &str = include_str!("../../../configs/grpo_default.yaml");

/// A small one-rank job of `steps` steps (4 prompts x 2 samples, 2 update mini-batches, no
/// warm-up, no automatic analysis) profiled under `save` with `extra` overrides.
fn run(save: &Path, steps: u64, extra: &[&str]) -> (ProfilePlan, Vec<CompletedCollection>) {
    let ckpt = save.with_file_name("ckpt");
    let mut ov: Vec<String> = vec![
        format!("global_profiler.save_path={}", save.display()),
        format!("trainer.total_training_steps={steps}"),
        "trainer.sft_warmup_steps=0".into(),
        "trainer.n_gpus_per_node=1".into(),
        format!("trainer.default_local_dir={}", ckpt.display()),
        "data.train_batch_size=4".into(),
        "actor_rollout_ref.actor.ppo_mini_batch_size=2".into(),
        "actor_rollout_ref.rollout.n=2".into(),
        "actor_rollout_ref.model.hidden_size=32".into(),
        "actor_rollout_ref.model.num_hidden_layers=1".into(),
        "actor_rollout_ref.model.intermediate_size=64".into(),
        "actor_rollout_ref.actor.profiler.all_ranks=False".into(),
        "+actor_rollout_ref.actor.profiler.ranks=[0]".into(),
    ];
    ov.extend(extra.iter().map(|s| s.to_string()));
    let doc = rlprof_config::load_document_str(DEFAULT, "default", &ov).unwrap();
    let plan = rlprof_config::build_plan(&doc).unwrap();
    let cfg = rlprof_trainer::TrainConfig::from_doc(&doc).unwrap();
    let profiler = rlprof_profiler::Profiler::new(plan.clone());
    rlprof_trainer::run(&cfg, profiler.clone(), Default::default()).unwrap();
    profiler.wait_collections();
    (plan, profiler.completed())
}

/// Directories directly under `dir`, by name.
fn subdirs(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

struct Ranges {
    s: RawSummary,
}

impl Ranges {
    fn of(c: &CompletedCollection) -> Ranges {
        let s = RawSummary::read(&c.raw_file, true).unwrap();
        assert!(
            s.corruption.is_none() && s.end.is_some(),
            "{:?} clean",
            c.raw_file
        );
        Ranges { s }
    }

    /// `(name, start, end)` of the ranges of category `cat`.
    fn of_cat(&self, cat: RangeCat) -> Vec<(String, u64, u64)> {
        self.s
            .kept
            .iter()
            .filter(|(_, r)| r.kind == Kind::Range as u8 && r.cat == cat as u8)
            .map(|(_, r)| {
                (
                    self.s.strings.get(&r.name).cloned().unwrap_or_default(),
                    r.ts,
                    r.a,
                )
            })
            .collect()
    }

    fn names(&self, cat: RangeCat) -> BTreeSet<String> {
        self.of_cat(cat).into_iter().map(|(n, _, _)| n).collect()
    }

    /// Op ranges inside the ranges of category `cat` named `name`.
    fn ops_in(&self, cat: RangeCat, name: &str) -> usize {
        let outer: Vec<(u64, u64)> = self
            .of_cat(cat)
            .into_iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, s, e)| (s, e))
            .collect();
        self.of_cat(RangeCat::Op)
            .iter()
            .filter(|(_, s, e)| outer.iter().any(|(os, oe)| os <= s && e <= oe))
            .count()
    }

    fn meta(&self, key: &str) -> serde_json::Value {
        self.s.meta.as_ref().unwrap()[key].clone()
    }
}

fn host_pid_ts_re(name: &str, suffix: &str) -> bool {
    let host = rlprof_profiler::collection::names::sanitize_host(
        &rlprof_profiler::collection::names::hostname(),
    );
    let pid = std::process::id();
    let Some(ts) = name
        .strip_prefix(&format!("{host}_{pid}_"))
        .and_then(|r| r.strip_suffix(suffix))
    else {
        return false;
    };
    ts.len() == 17 && ts.bytes().all(|b| b.is_ascii_digit())
}

const STAGES: [&str; 4] = [
    "rollout_generate",
    "actor_compute_log_prob",
    "ref_compute_log_prob",
    "actor_update",
];

/// verl: `start_profile(role="train")` -> `get_npu_profiler(role="train")` ->
/// `save_path/train/{host}_{pid}_{ts}_ascend_pt`; stages named by their `role=` label.
#[test]
fn npu_end_to_end_goes_to_train_with_stage_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        2,
        &[
            "global_profiler.steps=[1,2]",
            "actor_rollout_ref.actor.use_kl_loss=True",
        ],
    );
    assert_eq!(done.len(), 2, "one per step");
    assert_eq!(subdirs(&save), BTreeSet::from(["train".to_string()]));
    for c in &done {
        assert_eq!(c.dir.parent().unwrap(), save.join("train"));
        let name = c.dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(host_pid_ts_re(&name, "_ascend_pt"), "{name}");
        let r = Ranges::of(c);
        let calls = r.names(RangeCat::RoleCall);
        for s in STAGES {
            assert!(calls.contains(s), "{s} missing from {calls:?}");
        }
        for old in ["update_actor", "compute_log_prob", "generate_sequences"] {
            assert!(!calls.contains(old), "{old} in {calls:?}");
        }
        let user = r.names(RangeCat::User);
        for l in ["mini_batch0", "mini_batch1", "train_batch"] {
            assert!(user.contains(l), "{l} missing from {user:?}");
        }
        assert!(r.ops_in(RangeCat::User, "train_batch") > 0);
    }
}

/// verl (discrete): `get_npu_profiler(role=<stage>)` -> `save_path/<stage>/...`; a rollout
/// replica's traces go to `save_path/agent_loop_rollout_replica_{rank}`.
#[test]
fn npu_discrete_goes_to_stage_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        1,
        &[
            "global_profiler.steps=[1]",
            "actor_rollout_ref.actor.use_kl_loss=True",
            "actor_rollout_ref.actor.profiler.tool_config.npu.discrete=True",
        ],
    );
    assert_eq!(
        subdirs(&save),
        BTreeSet::from([
            "actor_compute_log_prob".to_string(),
            "actor_update".to_string(),
            "agent_loop_rollout_replica_0".to_string(),
            "ref_compute_log_prob".to_string(),
        ])
    );
    for c in &done {
        let name = c.dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(host_pid_ts_re(&name, "_ascend_pt"), "{name}");
        let calls = Ranges::of(c).names(RangeCat::RoleCall);
        assert_eq!(calls.len(), 1, "{calls:?}");
        let stage = calls.iter().next().unwrap().clone();
        let dir = c
            .dir
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if stage == "rollout_generate" {
            assert_eq!(dir, "agent_loop_rollout_replica_0");
        } else {
            assert_eq!(dir, stage);
        }
    }
}

/// verl's `build_trace_basename`: `{worker}_{train|stage}_step{N}_rank{R}-of-{W}_pid{P}_{ts}`,
/// each part sanitised (`_` -> `-`), written flat into save_path.
#[test]
fn torch_trace_is_flat_and_named_as_verl() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        1,
        &["global_profiler.tool=torch", "global_profiler.steps=[1]"],
    );
    assert_eq!(done.len(), 1);
    let c = &done[0];
    assert_eq!(c.dir.parent().unwrap(), save, "flat in save_path");
    let name = c.dir.file_name().unwrap().to_string_lossy().into_owned();
    let pid = std::process::id();
    let prefix = format!("actor-rollout-ref_train_step1_rank0-of-1_pid{pid}_");
    let ts = name
        .strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix("_torch_pt"))
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        ts.len() == 17 && ts.bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );
    let r = Ranges::of(c);
    assert_eq!(
        r.meta("export_name"),
        serde_json::json!(format!("{prefix}{ts}.json.gz"))
    );
    // rlprof's RL step range in the raw data (`rlprof_step#N` in the exported trace).
    assert_eq!(
        r.names(RangeCat::Step),
        BTreeSet::from(["ProfilerStep#1".to_string()])
    );
    assert!(r.names(RangeCat::RoleCall).contains("actor_update"));
}

/// verl: only `actor_update` is `scheduled=True`; `actor_compute_log_prob` is collected in
/// full; the schedule counts update mini-batches. End-to-end, rlprof keeps the earlier stages
/// (docs/verl-differences.md, torch-e2e-earlier-stages).
#[test]
fn torch_schedule_samples_the_update_only() {
    for discrete in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let save = tmp.path().join("prof");
        let d = format!("+actor_rollout_ref.actor.profiler.tool_config.torch.discrete={discrete}");
        let (plan, done) = run(
            &save,
            1,
            &[
                "global_profiler.tool=torch",
                "global_profiler.steps=[1]",
                &d,
                "+actor_rollout_ref.actor.profiler.tool_config.torch.schedule.skip_first=1",
                "+actor_rollout_ref.actor.profiler.tool_config.torch.schedule.active=1",
            ],
        );
        let sched = plan.roles[&rlprof_profiler::plan::Role::Actor]
            .schedule
            .unwrap();
        assert_eq!(sched.repeat, if discrete { 0 } else { 1 });
        let find = |stage: &str| {
            done.iter()
                .map(Ranges::of)
                .find(|r| r.names(RangeCat::RoleCall).contains(stage))
                .unwrap_or_else(|| panic!("no collection holds {stage}"))
        };
        let lp = find("actor_compute_log_prob");
        assert!(
            lp.ops_in(RangeCat::RoleCall, "actor_compute_log_prob") > 10,
            "log-prob stage collected in full (discrete={discrete})"
        );
        let up = find("actor_update");
        let user = up.names(RangeCat::User);
        assert!(user.contains("mini_batch1"), "{user:?}");
        assert!(
            !user.contains("mini_batch0"),
            "mini-batch 0 skipped: {user:?}"
        );
        assert!(up.ops_in(RangeCat::User, "mini_batch1") > 0);
        if discrete {
            assert!(
                done.iter().all(|c| !c.dir.starts_with(save.join("train"))),
                "discrete torch traces are flat"
            );
        }
    }
}

/// verl 0.9.1 `torch_profile.py`: a discrete `actor_update` under a schedule
/// (`Profiler.annotate(scheduled=True)`) gets a scheduled `get_torch_profiler` whose
/// `_trace_handler` writes one file per window, all under one `build_trace_basename`, each
/// suffixed by the mini-batches it holds (`_mb{first}-{last}`, `_mb{k}` for one), the window
/// the update loop ends in the middle of flushed short (`_flush_partial_window`). 4 update
/// mini-batches (2 per epoch x 2 epochs, indexed on across epochs), `wait=1, active=2`:
/// mini-batch 0 waits, 1-2 are a window, 3 waits; with `ppo_epochs=4` (8 mini-batches) the
/// windows are 1-2, 4-5 and the short 7.
#[test]
fn torch_discrete_update_writes_one_trace_per_window() {
    for (epochs, windows) in [(2, vec![(1u64, 2u64)]), (4, vec![(1, 2), (4, 5), (7, 7)])] {
        let tmp = tempfile::tempdir().unwrap();
        let save = tmp.path().join("prof");
        let ep = format!("actor_rollout_ref.actor.ppo_epochs={epochs}");
        let (_, done) = run(
            &save,
            1,
            &[
                "global_profiler.tool=torch",
                "global_profiler.steps=[1]",
                "+actor_rollout_ref.actor.profiler.tool_config.torch.discrete=true",
                "+actor_rollout_ref.actor.profiler.tool_config.torch.schedule.wait=1",
                "+actor_rollout_ref.actor.profiler.tool_config.torch.schedule.active=2",
                &ep,
            ],
        );
        let pid = std::process::id();
        let prefix = format!("actor-rollout-ref_actor-update_step1_rank0-of-1_pid{pid}_");
        let mut update: Vec<&CompletedCollection> = done
            .iter()
            .filter(|c| {
                c.dir
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .collect();
        update.sort_by_key(|c| c.dir.clone());
        assert_eq!(update.len(), windows.len(), "one collection per window");
        // One basename (one timestamp) for every window of the call.
        let basenames: BTreeSet<String> = update
            .iter()
            .map(|c| {
                let n = c.dir.file_name().unwrap().to_string_lossy().into_owned();
                n[..n.find("_mb").unwrap_or_else(|| panic!("{n}"))].to_string()
            })
            .collect();
        assert_eq!(basenames.len(), 1, "{basenames:?}");
        let base = basenames.into_iter().next().unwrap();
        let mut traces = BTreeSet::new();
        let mut mbs_per_window = Vec::new();
        for c in &update {
            let r = Ranges::of(c);
            assert!(r.names(RangeCat::RoleCall).contains("actor_update"));
            let mbs: Vec<String> = r
                .names(RangeCat::User)
                .into_iter()
                .filter(|n| n.starts_with("mini_batch"))
                .collect();
            mbs_per_window.push(mbs);
            let report = rlprof_export::analyse::analyse_collection(&c.dir).unwrap();
            for f in report.ranks.iter().flat_map(|r| &r.outputs) {
                traces.insert(f.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        let expected: BTreeSet<String> = windows
            .iter()
            .map(|&(a, b)| {
                if a == b {
                    format!("{base}_mb{a}.json.gz")
                } else {
                    format!("{base}_mb{a}-{b}.json.gz")
                }
            })
            .collect();
        assert_eq!(traces, expected);
        for t in &traces {
            assert!(save.join(t).is_file(), "{t} flat in save_path");
        }
        let mut expected_mbs: Vec<Vec<String>> = windows
            .iter()
            .map(|&(a, b)| (a..=b).map(|i| format!("mini_batch{i}")).collect())
            .collect();
        for v in &mut expected_mbs {
            v.sort();
        }
        mbs_per_window.sort();
        expected_mbs.sort();
        assert_eq!(mbs_per_window, expected_mbs);
    }
}

/// verl 0.9.1 (`torch_profile.py` `Profiler.step` / `stop`, `engine_workers.py`
/// `train_mini_batch`): end-to-end without a schedule, `prof.step()` runs after each update
/// mini-batch, so torch writes `ProfilerStep#0` from `start()` to the end of mini-batch 0,
/// `ProfilerStep#k` over mini-batch k, `ProfilerStep#M` from the last mini-batch to `stop()`,
/// and the `ProfilerStep#{M+1}` that `stop()`'s own `step()` opens; under a schedule
/// (`record_steps = False`) and in discrete mode there are none. rlprof marks the RL step
/// `rlprof_step#N` in its torch traces, and `rlprof report` still finds RL step 1 in the trace
/// alone and in the collection.
#[test]
fn torch_profiler_steps_mark_update_mini_batches() {
    use rlprof_report::model::Track;
    for (extra, verl_rows) in [
        (None, true),
        (
            Some("+actor_rollout_ref.actor.profiler.tool_config.torch.discrete=true"),
            false,
        ),
        (
            Some("+actor_rollout_ref.actor.profiler.tool_config.torch.schedule.active=1"),
            false,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let save = tmp.path().join("prof");
        let mut ov = vec!["global_profiler.tool=torch", "global_profiler.steps=[1]"];
        ov.extend(extra);
        let (_, done) = run(&save, 1, &ov);
        let mut traces = Vec::new();
        for c in &done {
            let report = rlprof_export::analyse::analyse_collection(&c.dir).unwrap();
            traces.extend(report.ranks.iter().flat_map(|r| r.outputs.clone()));
        }
        let mut profiler_steps = 0;
        let mut rl_steps = BTreeSet::new();
        for t in &traces {
            let loaded = rlprof_report::load(t, &Default::default()).unwrap();
            for p in &loaded.profiles {
                rl_steps.extend(p.steps.iter().copied());
                // verl's per-mini-batch rows: user ranges, the RL step being the step.
                let mut rows: Vec<(String, i64, i64)> = p
                    .events
                    .iter()
                    .filter(|e| {
                        e.track == Track::User && p.str(e.name).starts_with("ProfilerStep#")
                    })
                    .map(|e| (p.str(e.name).to_string(), e.start, e.start + e.dur))
                    .collect();
                for e in p.events.iter().filter(|e| e.track == Track::Step) {
                    assert_eq!(p.str(e.name), "ProfilerStep#1", "{t:?}");
                }
                let minis: Vec<(String, i64, i64)> = p
                    .events
                    .iter()
                    .filter(|e| p.str(e.name).starts_with("mini_batch"))
                    .map(|e| (p.str(e.name).to_string(), e.start, e.start + e.dur))
                    .collect();
                if !verl_rows {
                    assert!(rows.is_empty(), "no per-mini-batch rows in {t:?}: {rows:?}");
                    continue;
                }
                rows.sort_by_key(|r| (r.1, r.2));
                assert_eq!(minis.len(), 4, "4 update mini-batches: {minis:?}");
                let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
                assert_eq!(
                    names,
                    [
                        "ProfilerStep#0",
                        "ProfilerStep#1",
                        "ProfilerStep#2",
                        "ProfilerStep#3",
                        "ProfilerStep#4",
                        "ProfilerStep#5"
                    ]
                );
                // ProfilerStep#k (k = 0..3) ends where mini-batch k ends and holds it.
                for (k, (_, ss, se)) in rows.iter().take(4).enumerate() {
                    let (_, ms, me) = minis
                        .iter()
                        .find(|m| m.0 == format!("mini_batch{k}"))
                        .unwrap();
                    assert_eq!(se, me, "ProfilerStep#{k} ends with mini_batch{k}");
                    assert!(ss <= ms, "ProfilerStep#{k} holds mini_batch{k}");
                }
                assert_eq!(rows[5].1, rows[5].2, "the row stop() opens is empty");
                profiler_steps += rows.len();
            }
        }
        // A discrete collection lies inside one step (its name says which): its trace has no
        // step row, as verl's.
        let discrete = extra.is_some_and(|e| e.contains("discrete"));
        let expected = if discrete {
            BTreeSet::new()
        } else {
            BTreeSet::from([1])
        };
        assert_eq!(rl_steps, expected, "RL steps from the traces ({extra:?})");
        if verl_rows {
            assert_eq!(profiler_steps, 6);
        }
        // From the collections themselves (raw data), the same RL step.
        let loaded = rlprof_report::load(&save, &Default::default()).unwrap();
        assert!(!loaded.profiles.is_empty());
        for p in &loaded.profiles {
            assert_eq!(p.steps, [1], "{extra:?}");
        }
    }
}

/// verl's `TorchMemoryProfiler`: one dump per `memory_snapshot_num_steps` profiled steps, into
/// `step{N}` or `steps{a}-{b}`, named `torch_memory_rank{R}_pid{P}.pickle`. The last, shorter
/// window is written too (docs/verl-differences.md, memory-last-window).
#[test]
fn torch_memory_one_snapshot_per_window() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        3,
        &[
            "global_profiler.tool=torch_memory",
            "global_profiler.steps=[1,2,3]",
            "+global_profiler.global_tool_config.torch_memory.memory_snapshot_num_steps=2",
        ],
    );
    assert_eq!(done.len(), 2, "two windows");
    assert_eq!(
        subdirs(&save),
        BTreeSet::from(["step3".to_string(), "steps1-2".to_string()])
    );
    let pid = std::process::id();
    let mut windows: Vec<Vec<u64>> = done.iter().map(|c| c.steps.clone()).collect();
    windows.sort();
    assert_eq!(windows, vec![vec![1, 2], vec![3]]);
    for c in &done {
        let r = Ranges::of(c);
        assert_eq!(
            r.meta("export_name"),
            serde_json::json!(format!("torch_memory_rank0_pid{pid}.pickle"))
        );
        let name = c.dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(host_pid_ts_re(&name, "_torch_memory_pt"), "{name}");
    }
}

/// verl profiles a rollout enabled alone in the rollout engine around generation only.
#[test]
fn rollout_only_records_generation_only() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        1,
        &[
            "global_profiler.steps=[1]",
            "actor_rollout_ref.actor.profiler.enable=False",
            "+actor_rollout_ref.rollout.profiler.enable=True",
            "+actor_rollout_ref.rollout.profiler.ranks=[0]",
        ],
    );
    assert!(!done.is_empty());
    assert_eq!(
        subdirs(&save),
        BTreeSet::from(["agent_loop_rollout_replica_0".to_string()])
    );
    for c in &done {
        let calls = Ranges::of(c).names(RangeCat::RoleCall);
        assert_eq!(calls, BTreeSet::from(["rollout_generate".to_string()]));
    }
}

/// An end-to-end actor and a discrete rollout on one rank: a warning naming both keys, and the
/// rollout's calls are ranges of the end-to-end collection.
#[test]
fn end_to_end_and_discrete_roles_warn() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (plan, done) = run(
        &save,
        1,
        &[
            "global_profiler.steps=[1]",
            "+actor_rollout_ref.rollout.profiler.tool_config.npu.discrete=True",
        ],
    );
    assert!(
        plan.warnings.iter().any(|w| w.contains(
            "actor_rollout_ref.rollout.profiler.tool_config.npu.discrete: true cannot take effect"
        ) && w
            .contains("actor_rollout_ref.actor.profiler.tool_config.npu.discrete: false")),
        "{:#?}",
        plan.warnings
    );
    assert_eq!(done.len(), 1);
    assert!(
        Ranges::of(&done[0])
            .names(RangeCat::RoleCall)
            .contains("rollout_generate")
    );
}

/// verl hands `profile_token_*` to the rollout engine only: the actor's window does not
/// sub-sample the actor's stages.
#[test]
fn actor_token_window_leaves_actor_stages_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        1,
        &[
            "global_profiler.steps=[1]",
            "+actor_rollout_ref.actor.profiler.tool_config.npu.profile_token_start=5",
            "+actor_rollout_ref.actor.profiler.tool_config.npu.profile_token_end=6",
        ],
    );
    let r = Ranges::of(&done[0]);
    assert!(r.ops_in(RangeCat::RoleCall, "actor_compute_log_prob") > 10);
    let user = r.names(RangeCat::User);
    assert!(
        user.contains("mini_batch0") && user.contains("mini_batch1"),
        "{user:?}"
    );
    assert!(r.names(RangeCat::Iteration).is_empty(), "nothing scheduled");
}

/// `global_profiler.rlprof.layout=step_grouped` keeps rlprof's step-grouped tree.
#[test]
fn step_grouped_layout_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("prof");
    let (_, done) = run(
        &save,
        1,
        &[
            "global_profiler.steps=[1]",
            "+global_profiler.rlprof.layout=step_grouped",
        ],
    );
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].dir.parent().unwrap(),
        save.join("step1").join("e2e")
    );
    let _: PathBuf = done[0].raw_file.clone();
}
