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
        None => config::load_document_str(DEFAULT_CONFIG, "<built-in grpo_default.yaml>", overrides)?,
    })
}

/// `rlprof config check`.
pub fn config_check(config: Option<String>, mut overrides: Vec<String>, json: bool) -> Result<ExitCode> {
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
                println!("{}", serde_json::to_string_pretty(&config::plan_json(&plan))?);
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
    let _ = quiet;
    anyhow::bail!("the trainer is not wired in yet")
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
