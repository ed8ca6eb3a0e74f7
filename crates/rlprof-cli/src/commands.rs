//! The subcommands' implementations.

use anyhow::Result;
use rlprof_profiler::config;
use std::path::Path;
use std::process::ExitCode;

/// The built-in default job (GRPO on the arithmetic task, profiling steps 1-2 on all ranks).
pub const DEFAULT_CONFIG: &str = include_str!("../../../configs/grpo_default.yaml");

/// Logs to stderr; `RUST_LOG` overrides the default `info` level.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// Loads the merged document from a file or the built-in default, with overrides.
pub fn load(config_path: Option<&Path>, overrides: &[String]) -> Result<serde_yaml::Value> {
    Ok(match config_path {
        Some(p) => config::load_document(Some(p), overrides)?,
        None => {
            config::load_document_str(DEFAULT_CONFIG, "<built-in grpo_default.yaml>", overrides)?
        }
    })
}

/// `rlprof config check`.
pub fn config_check(
    config: Option<String>,
    mut overrides: Vec<String>,
    json: bool,
) -> Result<ExitCode> {
    let path = match config {
        Some(c) if c.contains('=') => {
            overrides.insert(0, c);
            None
        }
        other => other,
    };
    let doc = match load(path.as_deref().map(Path::new), &overrides) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match config::build_plan(&doc) {
        Ok(plan) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&config::plan_json(&plan))?
                );
            } else {
                println!("{}", config::describe(&plan));
            }
            for w in &plan.warnings {
                eprintln!("warning: {w}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `rlprof train`.
pub fn train(config_path: Option<&Path>, overrides: &[String], quiet: bool) -> Result<ExitCode> {
    let doc = load(config_path, overrides)?;
    let plan = config::build_plan(&doc)?;
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    tracing::info!("profiling plan:\n{}", config::describe(&plan));
    let total = rlprof_trainer::TrainConfig::from_doc(&doc)?
        .trainer
        .total_training_steps;
    let profiler = rlprof_profiler::Profiler::new(plan);
    let analysis = crate::analysis::AutoAnalysis::attach(&profiler);
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(total)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} step {pos}/{len} [{bar:30}] {elapsed_precise} {msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let pb = bar.clone();
    let opts = rlprof_trainer::RunOptions {
        on_step: Some(Box::new(move |m: &rlprof_trainer::StepMetrics| {
            let step_s: f64 = m
                .timing_s
                .get("step")
                .copied()
                .unwrap_or_else(|| m.timing_s.values().sum());
            pb.set_position(m.step);
            pb.set_message(format!(
                "reward {:.3} acc {:.2} step {:.2}s {:.0} tok/s",
                m.reward_mean, m.accuracy, step_s, m.tokens_per_s
            ));
        })),
        ..Default::default()
    };
    let summary = rlprof_trainer::run(&doc, profiler.clone(), opts)?;
    bar.finish();
    analysis.wait();
    println!(
        "trained {} steps on {} rank(s) in {:.1}s; metrics: {}",
        summary.steps,
        summary.world_size,
        summary.wall_s,
        summary.metrics_path.display()
    );
    if let Some(last) = summary.metrics.last() {
        println!(
            "last step: reward {:.3}, accuracy {:.2}",
            last.reward_mean, last.accuracy
        );
    }
    let done = profiler.completed();
    if done.is_empty() {
        println!("profiling: nothing collected (no listed step ran on a selected rank)");
    } else {
        println!("profiling: {} collection(s):", done.len());
        for c in &done {
            println!(
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
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `rlprof analyse`.
pub fn analyse(path: &Path, jobs: usize) -> Result<ExitCode> {
    let _ = (path, jobs);
    eprintln!("rlprof analyse: not implemented yet");
    Ok(ExitCode::FAILURE)
}

/// `rlprof report`.
pub fn report(path: &Path) -> Result<ExitCode> {
    let _ = path;
    eprintln!("rlprof report: not implemented yet (issue: interactive report)");
    Ok(ExitCode::FAILURE)
}

/// Parses one collection (automatic analysis). Until the exporters land, the raw data is kept
/// as written and this says so once per collection.
pub fn analyse_one(dir: &Path) {
    tracing::info!(
        "collection complete: {} (raw data kept; parsing into tool formats is not implemented yet)",
        dir.display()
    );
}
