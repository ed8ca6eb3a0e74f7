//! verl 0.9.1's `precision_debugger` tool (`verl/utils/profiler/precision_debugger_profile.py`,
//! `PrecisionDebuggerToolConfig`) and the msprobe `config.json` it names, resolved into the plan.

use rlprof_config::describe;
use rlprof_profiler::plan::{MsprobeLevel, MsprobeTask, RoleCall};
use std::path::Path;

mod support;
use support::{plan, problems};

/// A job with the precision debugger: actor and ref enabled (ref follows the actor), a critic.
fn job(dir: &Path, msprobe: &str, block: &str) -> String {
    let cfg = dir.join("config.json");
    std::fs::write(&cfg, msprobe).unwrap();
    format!(
        "global_profiler:\n  tool: precision_debugger\n  steps: [2]\n  save_path: /tmp/pd\n  global_tool_config:\n    precision_debugger: {{config_path: '{}', {block}}}\nactor_rollout_ref: {{actor: {{profiler: {{enable: true, all_ranks: true}}}}}}\ncritic: {{profiler: {{enable: false}}}}\ntrainer: {{nnodes: 1, n_gpus_per_node: 2}}\n",
        cfg.display()
    )
}

const L1: &str = r#"{"task": "statistics", "level": "L1", "rank": [], "step": [],
 "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}"#;

#[test]
fn stages_follow_verl_and_the_window_is_global_steps() {
    let d = tempfile::tempdir().unwrap();
    let p = plan(&job(
        d.path(),
        L1,
        "stages: [actor_update, rollout_generate, ref_compute_log_prob, critic_update, bogus], steps: [1]",
    ));
    let pd = p.verl.precision.as_ref().expect("dumps");
    assert_eq!(pd.steps, vec![2]);
    assert_eq!(pd.save_path, Path::new("/tmp/pd"));
    // critic_update is listed but the critic's profiler is disabled (verl's gate).
    let calls: Vec<RoleCall> = pd.stages.iter().map(|s| s.call).collect();
    assert_eq!(calls, [RoleCall::ComputeRefLogProb, RoleCall::UpdateActor]);
    let m = &pd.stages[0].msprobe;
    assert_eq!(
        (m.task, m.level),
        (MsprobeTask::Statistics, MsprobeLevel::L1)
    );
    assert_eq!(m.data_mode, ["all"]);
    let w = p.warnings.join("\n");
    assert!(
        w.contains("`precision_debugger.steps` is deprecated and ignored"),
        "{w}"
    );
    assert!(
        w.contains("Ignoring precision_debugger stages: ['rollout_generate']"),
        "{w}"
    );
    assert!(
        w.contains("Unknown precision_debugger stages: ['bogus']"),
        "{w}"
    );
    assert!(p.verl.start_errors.is_empty(), "{:?}", p.verl.start_errors);
    let text = describe(&p);
    assert!(
        text.contains("precision_debugger: msprobe dumps of steps [2]"),
        "{text}"
    );
    assert!(text.contains("steps [2] -> no trace collections"), "{text}");
    assert!(
        text.contains("/tmp/pd/step_{global_step}/{stage}/step0/rank{R}/dump.json"),
        "{text}"
    );
}

#[test]
fn an_unknown_stage_fails_with_strict() {
    let d = tempfile::tempdir().unwrap();
    let e = problems(&job(
        d.path(),
        L1,
        "stages: [actor_update, bogus], strict: true",
    ));
    assert!(
        e.iter().any(|m| m.contains("precision_debugger.stages")
            && m.contains("Unknown precision_debugger stages: ['bogus']")),
        "{e:?}"
    );
}

#[test]
fn without_config_path_nothing_is_dumped_with_a_warning() {
    let p = plan(
        "global_profiler: {tool: precision_debugger, steps: [1]}\nactor_rollout_ref: {actor: {profiler: {enable: true, all_ranks: true}}}\n",
    );
    assert!(p.verl.precision.is_none());
    let w = p.warnings.join("\n");
    assert!(
        w.contains("config_path: not set") && w.contains("dump nothing"),
        "{w}"
    );
    assert!(w.contains("actor_update"), "{w}");
}

#[test]
fn msprobe_keys_rlprof_cannot_honour_are_errors() {
    let d = tempfile::tempdir().unwrap();
    for (cfg, needle) in [
        (
            r#"{"task": "overflow_check"}"#,
            "is not a task rlprof dumps",
        ),
        (r#"{"level": "L2"}"#, "is not a level rlprof dumps"),
        (r#"{"statistics": {"summary_mode": "md5"}}"#, "md5"),
        (
            r#"{"dump_enable": true}"#,
            "msprobe key 'dump_enable' is not honoured",
        ),
        (
            r#"{"statistics": {"data_mode": ["all", "input"]}}"#,
            "'all' cannot be combined",
        ),
        (r#"{"statistics": {"data_mode": ["sideways"]}}"#, "sideways"),
        (
            r#"{"statistics": {"scope": ["Functional.linear.0.forward"]}}"#,
            "[first, last] pair",
        ),
        (
            r#"{"statistics": {"slice": [[0, 1]]}}"#,
            "msprobe key 'slice' is not honoured",
        ),
        (r#"{"rank": ["0-3"]}"#, "ranges are not honoured"),
        ("{not json", "is not valid JSON"),
    ] {
        let e = problems(&job(d.path(), cfg, "stages: [actor_update]"));
        assert!(
            e.iter()
                .any(|m| m.contains("config_path") && m.contains(needle)),
            "{cfg}: {e:?}"
        );
    }
    let e = problems(
        "global_profiler: {tool: precision_debugger, steps: [1], global_tool_config: {precision_debugger: {config_path: /nonexistent/config.json}}}\nactor_rollout_ref: {actor: {profiler: {enable: true}}}\n",
    );
    assert!(e.iter().any(|m| m.contains("cannot be read")), "{e:?}");
}

#[test]
fn msprobe_filters_are_read() {
    let d = tempfile::tempdir().unwrap();
    let p = plan(&job(
        d.path(),
        r#"{"task": "statistics", "level": "L1", "rank": [1], "step": [0],
            "statistics": {"scope": ["Functional.linear.0.forward", "Tensor.__add__.1.forward"],
                           "list": ["linear"], "data_mode": ["forward", "input"]}}"#,
        "stages: [actor_update]",
    ));
    let m = &p.verl.precision.as_ref().expect("dumps").stages[0].msprobe;
    assert_eq!(m.ranks, [1]);
    assert_eq!(m.steps, [0]);
    assert_eq!(m.scope.len(), 2);
    assert_eq!(m.list, ["linear"]);
    assert_eq!(m.data_mode, ["forward", "input"]);
}

/// A role's `tool_config.precision_debugger` wins for its stages (verl's role configs read
/// theirs first, then the global block).
#[test]
fn a_role_block_wins_for_its_stages() {
    let d = tempfile::tempdir().unwrap();
    let mut y = job(d.path(), L1, "stages: [actor_update]");
    y = y.replace(
        "actor_rollout_ref: {actor: {profiler: {enable: true, all_ranks: true}}}",
        "actor_rollout_ref: {actor: {profiler: {enable: true, all_ranks: true}}, ref: {profiler: {tool_config: {precision_debugger: {stages: [ref_compute_log_prob]}}}}}",
    );
    let p = plan(&y);
    let calls: Vec<RoleCall> = p
        .verl
        .precision
        .unwrap()
        .stages
        .iter()
        .map(|s| s.call)
        .collect();
    assert_eq!(calls, [RoleCall::ComputeRefLogProb, RoleCall::UpdateActor]);
}
