//! The `nsys profile` command line a job re-launches itself with, and the capture-range count.

use rlprof_config::{build_plan, load_document_str};
use rlprof_profiler::nsys::{capture_leader, capture_ranges, profile_command};
use rlprof_profiler::plan::RoleCall;
use std::path::Path;

const CALLS: [RoleCall; 4] = [
    RoleCall::GenerateSequences,
    RoleCall::ComputeLogProb,
    RoleCall::ComputeRefLogProb,
    RoleCall::UpdateActor,
];

fn plan(overrides: &[&str]) -> rlprof_profiler::ProfilePlan {
    let base = "trainer: {nnodes: 1, n_gpus_per_node: 2}\nglobal_profiler: {tool: nsys, steps: [1, 2, 5]}\nactor_rollout_ref:\n  actor:\n    profiler: {enable: true, ranks: [1]}\n";
    // `++`: set whether or not the small base config writes the key (struct mode).
    let ov: Vec<String> = overrides
        .iter()
        .map(|s| format!("++{}", s.trim_start_matches('+')))
        .collect();
    build_plan(&load_document_str(base, "<t>", &ov).unwrap()).unwrap()
}

#[test]
fn end_to_end_opens_one_range_per_step_group() {
    let p = plan(&[]);
    assert_eq!(capture_leader(&p, &[0, 1]), Some(1));
    assert_eq!(capture_leader(&p, &[0]), None);
    assert_eq!(capture_ranges(&p, 1, &CALLS), 3);
    let p = plan(&["global_profiler.profile_continuous_steps=True"]);
    assert_eq!(capture_ranges(&p, 1, &CALLS), 2, "[1,2] and [5]");
    assert_eq!(capture_ranges(&p, 0, &CALLS), 0, "rank 0 does not collect");
}

#[test]
fn discrete_opens_one_range_per_collected_role_call() {
    let p = plan(&["global_profiler.global_tool_config.nsys.discrete=True"]);
    // actor, rollout and ref follow the actor: all four calls per step, three steps
    assert_eq!(capture_ranges(&p, 1, &CALLS), 12);
    // without a KL term there is no ref call
    assert_eq!(capture_ranges(&p, 1, &CALLS[..2]), 6);
    let p = plan(&[
        "global_profiler.global_tool_config.nsys.discrete=True",
        "+actor_rollout_ref.rollout.profiler.enable=False",
    ]);
    assert_eq!(capture_ranges(&p, 1, &CALLS), 9);
}

#[test]
fn command_line_carries_worker_options_and_computed_range_end() {
    let p = plan(&[]);
    let cmd = profile_command(
        &p,
        3,
        Path::new("outputs/profile/nsys/host_1_x"),
        Path::new("/bin/rlprof"),
        &["train".into(), "trainer.total_training_steps=5".into()],
    );
    assert_eq!(&cmd[..2], &["nsys", "profile"]);
    for want in [
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=repeat-shutdown:3",
        "--kill=none",
        "--trace=cuda,nvtx,cublas,ucx",
        "--cuda-memory-usage=true",
    ] {
        assert!(cmd.iter().any(|a| a == want), "{want} missing in {cmd:?}");
    }
    let o = cmd.iter().position(|a| a == "-o").unwrap();
    assert_eq!(cmd[o + 1], "outputs/profile/nsys/host_1_x");
    assert_eq!(
        &cmd[o + 2..],
        &["/bin/rlprof", "train", "trainer.total_training_steps=5"]
    );
}

#[test]
fn an_explicit_capture_range_end_is_kept() {
    let p = plan(&[
        "global_profiler.global_tool_config.nsys.worker_nsight_options.capture-range-end=repeat:2",
    ]);
    let cmd = profile_command(&p, 3, Path::new("o"), Path::new("x"), &[]);
    assert!(
        cmd.iter().any(|a| a == "--capture-range-end=repeat:2"),
        "{cmd:?}"
    );
    assert!(!cmd.iter().any(|a| a.contains("repeat-shutdown")));
}
