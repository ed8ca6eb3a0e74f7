//! The subcommands' implementations.

use crate::output::{outln, print_out, train_line};
use anyhow::Result;
use rlprof_config::{self as config, Selection};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The built-in default job (GRPO on the arithmetic task, profiling steps 1-2 on all ranks).
pub(crate) const DEFAULT_CONFIG: &str = include_str!("../../../configs/grpo_default.yaml");

/// Logs to stderr; `RUST_LOG` overrides the default `info` level.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(crate::output::stderr_is_terminal())
        .with_writer(std::io::stderr)
        .with_target(false)
        // Once per process: a second `run` in the same process (the Python module's) keeps the
        // first one's subscriber.
        .try_init()
        .ok();
}

/// Composes (Hydra), overrides and resolves (OmegaConf) a selection, or the built-in default
/// when nothing is selected.
fn compose(sel: &Selection, overrides: &[String]) -> Result<config::Composed> {
    let builtin = (DEFAULT_CONFIG, "<built-in grpo_default.yaml>");
    Ok(config::compose_config(sel, Some(builtin), overrides)?)
}

/// `config [FILE] [OVERRIDES...]` / `train [FILE] [OVERRIDES...]`: the first argument is the
/// config file only when no `--config-path`/`--config-name` selects one and it reads as a file:
/// it names an existing file, contains `/` or ends in `.yaml`/`.yml`, and is not an override
/// (`=`, or a leading `~` or `+`). Anything else is the first override, as Hydra reads it, so
/// `~trainer.logger` deletes the key and a bare `key` fails as Hydra's grammar does.
pub(crate) fn split_file(
    config: Option<String>,
    mut overrides: Vec<String>,
    selected: bool,
) -> (Option<PathBuf>, Vec<String>) {
    match config {
        Some(c) if selected || !is_file_argument(&c) => {
            overrides.insert(0, c);
            (None, overrides)
        }
        other => (other.map(PathBuf::from), overrides),
    }
}

fn is_file_argument(a: &str) -> bool {
    if a.contains('=') || a.starts_with(['~', '+']) {
        return false;
    }
    a.contains('/') || a.ends_with(".yaml") || a.ends_with(".yml") || Path::new(a).is_file()
}

/// Every config problem of a document, profiler and training together.
fn check_all(
    doc: &config::Node,
    written: &config::Written,
) -> std::result::Result<(rlprof_profiler::ProfilePlan, rlprof_trainer::TrainConfig), Vec<String>> {
    let plan = config::build_plan_composed(doc, written);
    let train = rlprof_trainer::TrainConfig::from_doc(doc);
    match (plan, train) {
        (Ok(p), Ok(t)) => Ok((p, t)),
        (p, t) => {
            let mut errors = Vec::new();
            if let Err(e) = p {
                errors.push(e.to_string());
            }
            if let Err(e) = t {
                errors.push(e.to_string());
            }
            Err(errors)
        }
    }
}

/// What `config check` accepts but `train` cannot run yet.
fn start_errors(
    plan: &rlprof_profiler::ProfilePlan,
    train: &rlprof_trainer::TrainConfig,
) -> Vec<String> {
    let mut out = plan.verl.start_errors.clone();
    out.extend(train.start_errors());
    out
}

/// `rlprof config show`.
pub(crate) fn config_show(sel: &Selection, overrides: &[String], json: bool) -> Result<ExitCode> {
    let tree = match compose(sel, overrides) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if json {
        outln!("{}", config::show_json(&tree.tree))?;
    } else {
        print_out(format_args!("{}", config::show_yaml(&tree.tree)))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `rlprof config check`.
pub(crate) fn config_check(
    sel: &Selection,
    overrides: Vec<String>,
    json: bool,
) -> Result<ExitCode> {
    let composed = match compose(sel, &overrides) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let doc = composed.tree;
    // The training sections are checked too (their errors name their YAML paths as well).
    let (plan, train) = match check_all(&doc, &composed.written) {
        Ok(v) => v,
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    for w in &train.warnings {
        eprintln!("warning: {w}");
    }
    // verl accepts these, so `config check` does; `train` refuses to start on them.
    for e in start_errors(&plan, &train) {
        eprintln!("note: `rlprof train` cannot run this setting and refuses to start: {e}");
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&config::plan_json(&plan))?
        )?;
    } else {
        outln!("{}", config::describe(&plan))?;
    }
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `rlprof train`.
pub(crate) fn train(sel: &Selection, overrides: &[String], quiet: bool) -> Result<ExitCode> {
    let composed = compose(sel, overrides)?;
    let doc = composed.tree;
    // Every config problem at once, profiler and training together, and what stops only `train`.
    let (plan, tcfg) = check_all(&doc, &composed.written)
        .and_then(|(p, t)| match start_errors(&p, &t) {
            e if e.is_empty() => Ok((p, t)),
            e => Err(e),
        })
        .map_err(|errors| anyhow::anyhow!("{}", errors.join("\n")))?;
    // Under an MPI launcher every process gets here; the plan is the same, rank 0 logs it.
    if rlprof_trainer::comm::launcher_world().is_none_or(|(r, _)| r == 0) {
        for w in &plan.warnings {
            tracing::warn!("{w}");
        }
        tracing::info!("profiling plan:\n{}", config::describe(&plan));
    }
    if plan.tool == Some(rlprof_profiler::Tool::Nsys)
        && !rlprof_profiler::nsys::running_under_nsys()
    {
        return relaunch_under_nsys(&plan, &doc);
    }
    for w in &tcfg.warnings {
        tracing::warn!("{w}");
    }
    let ranks = crate::launch::Ranks::detect()?;
    let rank = ranks.rank();
    // Only rank 0 shows progress and metrics; other processes report errors and collections.
    let quiet = quiet || rank != 0;
    let total = tcfg.trainer.total_training_steps;
    let say = |line: String| {
        if rank == 0 {
            train_line(format_args!("{line}"));
        }
    };
    say(format!(
        "GRPO job: {} rank(s), {} steps, {} prompts x {} samples per step; profiling: {}",
        tcfg.world_size(),
        total,
        tcfg.data.train_batch_size,
        tcfg.rollout.n,
        plan.tool
            .map_or("off".to_string(), |t| format!("{t:?}").to_lowercase()),
    ));
    let save_path = plan.save_path.clone();
    let profiler = rlprof_profiler::Profiler::new(plan);
    let analysis = crate::analysis::AutoAnalysis::attach(&profiler);
    crate::interrupt::install(profiler.clone(), save_path)?;
    let bars = indicatif::MultiProgress::with_draw_target(crate::output::draw_target());
    if quiet {
        bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Off a terminal (logs, pipes): one plain line per step on stdout instead of bars.
    let plain = rank == 0 && !crate::output::stderr_is_terminal();
    let warm = bars.add(indicatif::ProgressBar::new(tcfg.trainer.sft_warmup_steps));
    warm.set_style(
        indicatif::ProgressStyle::with_template(
            "  warm-up {pos}/{len} [{bar:30}] {elapsed_precise} {msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let bar = bars.add(indicatif::ProgressBar::new(total));
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} step {pos}/{len} [{bar:30}] {elapsed_precise} {msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let pb = bar.clone();
    let wb = warm.clone();
    let shown = !quiet && !plain;
    let opts = rlprof_trainer::RunOptions {
        on_warmup: Some(Box::new(move |s, t, loss| {
            wb.set_position(s);
            wb.set_message(format!("loss {loss:.3}"));
            if s == t {
                wb.finish();
                if plain {
                    train_line(format_args!("warm-up: {t} steps, loss {loss:.4}"));
                }
            }
        })),
        on_step: Some(Box::new(move |m: &rlprof_trainer::StepMetrics| {
            let step_s: f64 = m
                .timing_s
                .get("step")
                .copied()
                .unwrap_or_else(|| m.timing_s.values().sum());
            let line = format!(
                "reward {:.3} acc {:.2} step {:.2}s {:.0} tok/s",
                m.reward_mean, m.accuracy, step_s, m.tokens_per_s
            );
            if plain {
                train_line(format_args!("{}", crate::output::step_line(m)));
            } else if shown {
                pb.println(format!("step {:>3}: {line}", m.step));
            }
            pb.set_position(m.step);
            pb.set_message(line);
        })),
        ..Default::default()
    };
    let summary = match ranks.run(&tcfg, profiler.clone(), opts) {
        Ok(s) => s,
        Err(e) if ranks.is_multi_process() => {
            profiler.close_open();
            return Ok(rank_failed(&ranks, &e, &profiler, &analysis));
        }
        Err(e) => {
            // A failed run (a rank's error or panic): what was collected stays readable.
            profiler.close_open();
            profiler.wait_collections();
            analysis.wait();
            return Err(e.into());
        }
    };
    bar.finish();
    // Collections with a GPU timeline complete once its events are read back.
    profiler.wait_collections();
    analysis.wait();
    crate::launch::write_final_params(&ranks, &summary.final_params)?;
    if rank != 0 {
        print_collections(&profiler, rank);
        ranks.finish();
        return Ok(ExitCode::SUCCESS);
    }
    train_line(format_args!(
        "trained {} steps on {} rank(s) in {:.1}s; metrics: {}",
        summary.steps,
        summary.world_size,
        summary.wall_s,
        summary.metrics_path.display()
    ));
    if let Some(last) = summary.metrics.last() {
        train_line(format_args!(
            "last step: reward {:.3}, accuracy {:.2}",
            last.reward_mean, last.accuracy
        ));
    }
    print_collections(&profiler, rank);
    ranks.finish();
    Ok(ExitCode::SUCCESS)
}

/// A rank of a multi-process job failed (its own error, or a peer's reported failure): print it
/// with the rank, let automatic analysis of finished collections end, and exit non-zero without
/// finalising MPI (peers may be inside an abandoned collective).
fn rank_failed(
    ranks: &crate::launch::Ranks,
    e: &rlprof_trainer::TrainerError,
    profiler: &rlprof_profiler::Profiler,
    analysis: &crate::analysis::AutoAnalysis,
) -> ExitCode {
    eprintln!("error: rank {}: {e}", ranks.rank());
    profiler.wait_collections();
    analysis.wait();
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    ranks.finish_failed();
    std::process::exit(1)
}

/// Lists this process's finished collections.
fn print_collections(profiler: &rlprof_profiler::Profiler, rank: usize) {
    let who = if rank == 0 {
        String::new()
    } else {
        format!("rank {rank}: ")
    };
    let done = profiler.completed();
    if done.is_empty() {
        train_line(format_args!(
            "{who}profiling: nothing collected (no listed step ran on a selected rank)"
        ));
    } else {
        train_line(format_args!(
            "{who}profiling: {} collection(s):",
            done.len()
        ));
        for c in &done {
            train_line(format_args!(
                "  {} (rank {}, {} events, {} KiB{})",
                c.dir.display(),
                c.rank,
                c.events,
                c.bytes / 1024,
                if c.truncated {
                    ", TRUNCATED by a cap"
                } else {
                    ""
                }
            ));
        }
    }
}

/// The role calls one training step makes (the ref pass only with a KL term).
fn calls_per_step(doc: &config::Node) -> Vec<rlprof_profiler::RoleCall> {
    use rlprof_profiler::RoleCall::*;
    let kl = doc
        .get("actor_rollout_ref")
        .and_then(|a| a.get("actor"))
        .and_then(|a| a.get("use_kl_loss"))
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let mut calls = vec![GenerateSequences, ComputeLogProb];
    if kl {
        calls.push(ComputeRefLogProb);
    }
    calls.push(UpdateActor);
    calls
}

/// `tool: nsys`: runs this same command again under `nsys profile` with the configured nsight
/// options and a capture-range end that finishes the report after the last range.
fn relaunch_under_nsys(
    plan: &rlprof_profiler::ProfilePlan,
    doc: &config::Node,
) -> Result<ExitCode> {
    if !cfg!(feature = "cuda") {
        anyhow::bail!(
            "global_profiler.tool: nsys needs a CUDA build (cargo build --release --features cuda) \
             and NVIDIA Nsight Systems; valid tools on this build: npu, torch, torch_memory"
        );
    }
    let nsys_on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("nsys").is_file()))
        .unwrap_or(false);
    if !nsys_on_path {
        anyhow::bail!(
            "global_profiler.tool: nsys: `nsys` is not on PATH; install NVIDIA Nsight Systems or \
             choose another tool (npu, torch, torch_memory)"
        );
    }
    let ranks: Vec<u32> = (0..plan.world_size).collect();
    let leader = rlprof_profiler::nsys::capture_leader(plan, &ranks).unwrap_or(0);
    let ranges = rlprof_profiler::nsys::capture_ranges(plan, leader, &calls_per_step(doc));
    let stem = plan.save_path.join("nsys").join(format!(
        "{}_{}_{}",
        rlprof_profiler::collection::names::hostname(),
        std::process::id(),
        rlprof_profiler::collection::names::timestamp17(rlprof_profiler::clock::wall_ns())
    ));
    std::fs::create_dir_all(stem.parent().expect("parent"))?;
    let exe = std::env::current_exe()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = rlprof_profiler::nsys::profile_command(plan, ranges, &stem, &exe, &args);
    tracing::info!("re-launching under nsys: {}", cmd.join(" "));
    let status = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .env(rlprof_profiler::nsys::UNDER_NSYS_ENV, "1")
        .status()?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `rlprof analyse`: parses every unparsed collection at or below `path`, `jobs` in parallel,
/// with a progress bar on a terminal. Every failure is printed as a plain line on stderr (file
/// and byte offset where known), also when stderr is a log file or a pipe. Exit status: success
/// when every collection was parsed (now or by an earlier run, with warnings for damaged data)
/// or is still being written by a running job; failure when a collection could not be parsed
/// at all, or when there is no collection below `path`. With `cluster`, a tree that holds no raw
/// data of ours succeeds: there is nothing to parse, and the cluster analysis reads what is
/// there as `report` does.
pub(crate) fn analyse(path: &Path, jobs: usize, cluster: bool) -> Result<ExitCode> {
    use rlprof_export::{Outcome, TreeEvent};
    let bar = crate::output::bar(
        0,
        "{spinner} parsed {pos}/{len} collections [{bar:30}] {elapsed_precise} {msg}",
    );
    let pb = bar.clone();
    let progress = move |e: TreeEvent| match e {
        TreeEvent::Found { todo, .. } => pb.set_length(todo as u64),
        TreeEvent::Finished(o) => {
            pb.inc(1);
            if let Outcome::Failed(d, err) = o {
                crate::output::line(&pb, format!("error: {}: {err}", d.display()));
            }
        }
    };
    let report = match rlprof_export::analyse_tree(path, jobs, &progress) {
        Ok(r) => r,
        Err(e) => {
            bar.abandon();
            eprintln!("rlprof analyse: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    bar.finish_and_clear();
    if report.found == 0 && cluster {
        // Nothing of ours to parse: the cluster analysis reads whatever `report` reads
        // (torch_npu text and DB trees, PyTorch traces).
        outln!(
            "no rlprof collection below {}: the cluster analysis reads the profiles there",
            path.display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    if report.found == 0 {
        eprintln!(
            "rlprof analyse: no collection (directory with rlprof_raw/rank_*.rlraw) at or below {}",
            path.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    for o in &report.outcomes {
        match o {
            Outcome::Parsed(r) => {
                for w in &r.warnings {
                    eprintln!("{w}");
                }
                if r.recovered_from.is_some() || r.partial {
                    eprintln!(
                        "{}: {}",
                        r.dir.display(),
                        if r.partial {
                            "partial collection finished (partial: true)"
                        } else {
                            "unfinished collection finished"
                        }
                    );
                }
            }
            Outcome::Busy(d) => eprintln!(
                "{}: still being written by a running job (or recovered by another process); skipped",
                d.display()
            ),
            _ => {}
        }
    }
    if report.parsed() == 0 && report.failed() == 0 && report.busy() == 0 {
        outln!(
            "nothing to do: all {} collection(s) below {} are already parsed",
            report.found,
            path.display()
        )?;
    } else {
        outln!(
            "parsed {} collection(s), {} already parsed, {} in flight, {} failed",
            report.parsed(),
            report.skipped(),
            report.busy(),
            report.failed()
        )?;
    }
    Ok(if report.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `rlprof analyse PATH --cluster`: the cross-rank analysis of every collection below `path`,
/// written to `path/cluster_analysis/` and printed.
pub(crate) fn cluster(path: &Path) -> Result<ExitCode> {
    let rep = match rlprof_report::cluster::analyse(path, &rlprof_report::Limits::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rlprof analyse --cluster: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new(".")).to_path_buf()
    };
    let out = dir.join(rlprof_report::cluster::OUT_DIR);
    let files = rlprof_report::cluster::write_outputs(&rep, &out)?;
    print_out(format_args!(
        "{}",
        rlprof_report::cluster::render_table(&rep)
    ))?;
    outln!("cluster analysis written to {}", out.display())?;
    tracing::debug!("{files:?}");
    Ok(ExitCode::SUCCESS)
}

/// The report of `path` (diffed against `compare`), with what is needed to read its inputs
/// again (each input is dropped once summarised, unless `keep` says otherwise); `skipped` is
/// told of each input of `path` that could not be read, before the summary is made.
fn summarised(
    path: &Path,
    compare: Option<&Path>,
    keep: rlprof_report::summary::Keep,
    skipped: impl Fn(&rlprof_report::model::Skipped),
) -> Result<rlprof_report::summary::Summarised> {
    use rlprof_report::summary::{Keep, summarise_path};
    let limits = rlprof_report::Limits::default();
    let mut s = summarise_path(path, &limits, keep)?;
    s.report.skipped.iter().for_each(skipped);
    if let Some(b) = compare {
        let other = summarise_path(b, &limits, Keep::None)?.report;
        let label = |p: &Path| p.display().to_string();
        s.report = rlprof_report::compare(s.report, &other, &label(path), &label(b));
    }
    Ok(s)
}

/// `rlprof report PATH --format json`'s text, for the Python module (`rlprof.load`).
pub(crate) fn report_json(path: &Path) -> Result<String> {
    let s = summarised(path, None, rlprof_report::summary::Keep::None, |_| ())?;
    Ok(rlprof_report::render_json(&s.report)?)
}

/// `rlprof report`.
pub(crate) fn report(
    path: &Path,
    output: Option<&Path>,
    format: &str,
    compare: Option<&Path>,
    force: bool,
    ranks: Vec<u32>,
) -> Result<ExitCode> {
    if let Some(b) = compare
        && rlprof_report::precision_compare::is_dump(path)
    {
        return precision_compare(path, b, output, force);
    }
    let default_html = Path::new("report.html");
    let out = output.or((format == "html").then_some(default_html));
    if let Some(out) = out {
        // Refused before the (possibly long) load.
        crate::output::check_report_target(out, force)?;
    }
    // A page shows the timelines of at most a few ranks: up to that many inputs are kept
    // from the first read; more are dropped once summarised and the shown ones read again.
    let keep = match format {
        "json" | "text" => rlprof_report::summary::Keep::None,
        _ => rlprof_report::summary::Keep::UpTo(16),
    };
    let summarised = summarised(path, compare, keep, |s| {
        eprintln!("skipped {}: {}", s.path.display(), s.reason)
    })?;
    let report = &summarised.report;
    // Each format is written as it is rendered; the HTML page as it is serialised (it can be a
    // quarter of a large trace's size: building it in memory first would add that to the peak).
    let render = |w: &mut dyn std::io::Write| -> anyhow::Result<()> {
        match format {
            "json" => w.write_all(rlprof_report::render_json(report)?.as_bytes())?,
            "text" => w.write_all(rlprof_report::render_text(report).as_bytes())?,
            _ => {
                let opts = rlprof_report::HtmlOptions {
                    ranks: ranks.clone(),
                    ..Default::default()
                };
                rlprof_report::html::write_html_summarised(&summarised, &opts, w)?
            }
        }
        Ok(())
    };
    match out {
        Some(out) => {
            crate::output::write_report(out, force, render)?;
            eprintln!("report written to {}", out.display());
        }
        None => {
            let mut o = std::io::stdout().lock();
            render(&mut o)?;
            std::io::Write::flush(&mut o).map_err(crate::output::StdoutFailed)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `report --compare` on two msprobe dumps (the precision_debugger tool): a text comparison.
fn precision_compare(a: &Path, b: &Path, output: Option<&Path>, force: bool) -> Result<ExitCode> {
    let c = rlprof_report::precision_compare::compare(a, b)?;
    let text = rlprof_report::precision_compare::render_text(&c);
    match output {
        Some(out) => {
            crate::output::check_report_target(out, force)?;
            crate::output::write_report(out, force, |w| Ok(w.write_all(text.as_bytes())?))?;
            eprintln!("report written to {}", out.display());
        }
        None => {
            let mut o = std::io::stdout().lock();
            std::io::Write::write_all(&mut o, text.as_bytes())
                .map_err(crate::output::StdoutFailed)?;
            std::io::Write::flush(&mut o).map_err(crate::output::StdoutFailed)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
