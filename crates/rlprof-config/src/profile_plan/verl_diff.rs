//! Every remaining difference between rlprof's collection and verl 0.9.1's, as data: the one
//! table `docs/verl-differences.md` shows (a test holds the two equal) and `rlprof config check`
//! prints the rows of (those that apply to the given plan). Each row names the test that pins
//! rlprof's side of it.

use rlprof_profiler::plan::{Content, ProfilePlan, Role, RolePlan, ScheduleScope, Tool};

/// One difference from verl 0.9.1.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Difference {
    /// Short stable id (the anchor in `docs/verl-differences.md`).
    pub id: &'static str,
    /// What verl 0.9.1 does.
    pub verl: &'static str,
    /// What rlprof does.
    pub rlprof: &'static str,
    /// Why.
    pub why: &'static str,
    /// The test that pins rlprof's side (`crate/tests/file.rs::name`).
    pub test: &'static str,
    /// Whether the row applies to a plan.
    pub applies: fn(&ProfilePlan) -> bool,
}

fn enabled(p: &ProfilePlan) -> impl Iterator<Item = (&Role, &RolePlan)> {
    p.roles.iter().filter(|(_, r)| r.enable)
}

fn collects(p: &ProfilePlan) -> bool {
    !p.step_groups.is_empty() && enabled(p).next().is_some()
}

fn tool_is(p: &ProfilePlan, t: Tool) -> bool {
    collects(p) && p.tool == Some(t)
}

fn e2e_training(p: &ProfilePlan) -> bool {
    collects(p)
        && enabled(p).any(|(role, r)| *role != Role::Rollout && !r.discrete && !r.ranks.is_empty())
}

/// The table.
pub(crate) const DIFFERENCES: &[Difference] = &[
    Difference {
        id: "rollout-in-e2e",
        verl: "an end-to-end window (`train`) holds what the training worker runs (log-prob passes, the update); generation is profiled by the rollout engine, apart, under `agent_loop_rollout_replica_{rank}/`.",
        rlprof: "generation is a `rollout_generate` range inside the end-to-end collection, beside `actor_compute_log_prob`, `ref_compute_log_prob` and `actor_update`.",
        why: "one collection shows the whole step, so the per-step breakdown needs no second tool; rlprof's rollout runs in the training process.",
        test: "crates/rlprof-trainer/tests/verl_parity.rs::npu_end_to_end_goes_to_train_with_stage_ranges",
        applies: e2e_training,
    },
    Difference {
        id: "empty-ranks",
        verl: "`enable: true` with `ranks: []` and `all_ranks: false` profiles rank 0.",
        rlprof: "it collects nothing, with a warning.",
        why: "the user document says so.",
        test: "crates/rlprof-config/tests/verl_parity.rs::empty_ranks_collect_nothing",
        applies: |p| collects(p) && enabled(p).any(|(_, r)| !r.all_ranks && r.ranks.is_empty()),
    },
    Difference {
        id: "npu-contents",
        verl: "always collects CPU activity; adds NPU activity only when `npu` is listed, so `[]` is CPU only and `[npu]` is CPU and NPU.",
        rlprof: "`[]` is CPU only, as verl; a written list is taken as written: `[npu]` is NPU only, `cpu` selects host data.",
        why: "the user document says `cpu` selects host data; where it is silent (`[]`) rlprof follows verl.",
        test: "crates/rlprof-config/tests/verl_parity.rs::npu_contents_follow_the_document_then_verl",
        applies: |p| {
            tool_is(p, Tool::Npu) && enabled(p).any(|(_, r)| !r.contents.has(Content::Cpu))
        },
    },
    Difference {
        id: "torch-e2e-earlier-stages",
        verl: "end-to-end, a schedule that skips ahead (`skip_first`, `wait` or `warmup` > 0) also drops the stages before the active window (log-prob passes): torch keeps only windows that end in RECORD_AND_SAVE.",
        rlprof: "the update's mini-batches are sub-sampled the same way; the earlier stages are kept in full.",
        why: "data is never dropped silently; the schedule's unit is the update's mini-batch.",
        test: "crates/rlprof-trainer/tests/verl_parity.rs::torch_schedule_samples_the_update_only",
        applies: |p| {
            tool_is(p, Tool::Torch)
                && enabled(p).any(|(_, r)| {
                    !r.discrete
                        && r.schedule_scope == ScheduleScope::Update
                        && r.schedule
                            .is_some_and(|s| s.skip_first + s.wait + s.warmup > 0)
                })
        },
    },
    Difference {
        id: "memory-last-window",
        verl: "a torch_memory window that never reaches `memory_snapshot_num_steps` profiled steps is never dumped.",
        rlprof: "it is written as a shorter window (`step{N}` or `steps{a}-{b}`).",
        why: "data is never lost silently.",
        test: "crates/rlprof-trainer/tests/verl_parity.rs::torch_memory_one_snapshot_per_window",
        applies: |p| {
            tool_is(p, Tool::TorchMemory)
                && p.step_groups.len() >= 2
                && p.step_groups.first().map(Vec::len) != p.step_groups.last().map(Vec::len)
        },
    },
    Difference {
        id: "memory-history",
        verl: "the snapshot holds the allocation history since the worker started (or since the last dump), and an OOM observer dumps one at allocator OOM.",
        rlprof: "the snapshot holds the allocations of its window; there is no OOM observer.",
        why: "rlprof's allocator hooks record while a collection is open only.",
        test: "crates/rlprof-trainer/tests/verl_parity.rs::torch_memory_one_snapshot_per_window",
        applies: |p| tool_is(p, Tool::TorchMemory),
    },
    Difference {
        id: "timestamp-utc",
        verl: "the 17-digit timestamp in collection and trace names is local time.",
        rlprof: "it is UTC.",
        why: "names from ranks on hosts in different time zones sort together.",
        test: "crates/rlprof-profiler/src/collection/names.rs::timestamp_has_17_digits_and_known_value",
        applies: collects,
    },
    Difference {
        id: "e2e-holds-discrete",
        verl: "each worker profiles apart, so an end-to-end worker and a discrete worker each write their own collections.",
        rlprof: "on a rank where a training role collects end-to-end, another role's discrete setting cannot take effect: its calls are ranges in the end-to-end collection, and a warning names both keys.",
        why: "one process runs every role of a rank, and a rank records into one collection at a time.",
        test: "crates/rlprof-trainer/tests/verl_parity.rs::end_to_end_and_discrete_roles_warn",
        applies: |p| e2e_training(p) && enabled(p).any(|(_, r)| r.discrete && !r.ranks.is_empty()),
    },
    Difference {
        id: "precision-config-file",
        verl: "msprobe reads `config_path` when the first listed stage starts; a missing file or a bad key fails there, and without `strict` the stage is silently not dumped.",
        rlprof: "`config.json` is read and checked at start-up (`config check` too); a missing file, a bad value or a key rlprof cannot honour (another task, L2, md5/xor, `dump_enable`, `slice`, ...) is a configuration error naming the key.",
        why: "a key is never silently ignored, and a dump is not found missing after the run.",
        test: "crates/rlprof-config/tests/precision_debugger.rs::msprobe_keys_rlprof_cannot_honour_are_errors",
        applies: |p| p.verl.precision.is_some(),
    },
    Difference {
        id: "precision-api-names",
        verl: "msprobe hooks PyTorch's APIs: a model's fused op is dumped as the APIs it calls, each with its backward.",
        rlprof: "forward: an op of ours that is one PyTorch API takes its name (`Torch.matmul`, `Tensor.__add__`, ...); a fused kernel is written as the PyTorch calls it stands for (`silu_mul` as `Functional.silu` + `Tensor.__mul__`, a residual-fused gemm as `Functional.linear` + `Tensor.__add__`, RMSNorm as Hugging Face's six calls, ...; table in `docs/precision-debugger.md`), the intermediates' statistics computed in the dump path only; ops with no PyTorch form (`entropy`, `kv_append`, ...) are one `Functional.<op>` entry. Backward entries are written for the ops with a recorded backward node only (candle's own `add`/`mul` backward is not hooked; an expanded op has one backward entry, not one per PyTorch call).",
        why: "the kernels stay fused (the dump path recomputes what PyTorch would materialise, only while dumping), and `msprobe compare` against msprobe's dump of a PyTorch reference pairs every forward row.",
        test: "crates/rlprof-cli/tests/precision_debugger.rs::msprobe_compare_matches_our_dump_against_a_pytorch_reference_golden_dump",
        applies: |p| p.verl.precision.is_some(),
    },
];

/// The rows that apply to `plan`.
pub(crate) fn applying(plan: &ProfilePlan) -> Vec<&'static Difference> {
    DIFFERENCES.iter().filter(|d| (d.applies)(plan)).collect()
}

/// The table as `docs/verl-differences.md` shows it (one Markdown row per difference).
#[cfg(test)]
pub(crate) fn markdown_rows() -> String {
    let mut out =
        String::from("| id | verl 0.9.1 | rlprof | why | pinned by |\n|---|---|---|---|---|\n");
    for d in DIFFERENCES {
        let (file, name) = d.test.split_once("::").unwrap_or((d.test, ""));
        out.push_str(&format!(
            "| <a id=\"{}\"></a>`{}` | {} | {} | {} | [`{name}`](../{file}) |\n",
            d.id, d.id, d.verl, d.rlprof, d.why
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = include_str!("../../../../docs/verl-differences.md");

    /// The document shows exactly this table (regenerate the rows from `markdown_rows`).
    #[test]
    fn the_document_shows_the_table() {
        assert!(
            DOC.contains(&markdown_rows()),
            "docs/verl-differences.md is out of date; its table is:\n{}",
            markdown_rows()
        );
    }

    /// Every row names a test that exists.
    #[test]
    fn every_row_is_pinned_by_a_test_that_exists() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut ids = std::collections::BTreeSet::new();
        for d in DIFFERENCES {
            assert!(ids.insert(d.id), "duplicate id {}", d.id);
            let (file, name) = d.test.split_once("::").expect("file::test");
            let text = std::fs::read_to_string(root.join(file))
                .unwrap_or_else(|e| panic!("{}: {file}: {e}", d.id));
            assert!(
                text.contains(&format!("fn {name}(")),
                "{}: no fn {name} in {file}",
                d.id
            );
        }
    }
}
