//! `rlprof`: train (GRPO/DAPO with profiling), check configs, analyse and report collections.
//!
//! The command line is this library so that two programs can be it: the `rlprof` binary
//! (`src/main.rs`, what `cargo build` gives) and the `rlprof` command of the Python wheel
//! (`crates/rlprof-py`, what `pip install .` gives). Both call [`run`] with their arguments
//! and exit with the code it returns; the wheel's Python module also gets the report through
//! [`report_json`] and [`report_html`], which are `rlprof report`'s own code.
//!
//! A program that calls [`run`] for `rlprof train` should install
//! [`rlprof_profiler::alloc::TrackingAllocator`] as its global allocator, as both do: tensor
//! memory of the CPU engine is heap memory, recorded through it (`memory` content).

mod analysis;
mod commands;
mod interrupt;
mod launch;
mod output;

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A failure of [`report_json`] or [`report_html`], with the message `rlprof report` prints
/// after `error: ` (the whole chain of causes, on one line).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct CliError(anyhow::Error);

/// Hydra's config selection, as in `python -m verl.trainer.main_ppo --config-path DIR
/// --config-name NAME` (`--config-path=DIR` works too).
#[derive(Args, Clone, Default)]
struct Select {
    /// Directory of the primary config and its config groups.
    #[arg(long, value_name = "DIR")]
    config_path: Option<PathBuf>,
    /// Primary config in that directory (`ppo_trainer` or `ppo_trainer.yaml`).
    #[arg(long, value_name = "NAME")]
    config_name: Option<String>,
}

impl Select {
    /// The selection, with a leading file argument (an argument without `=`) if there is one.
    fn with_file(self, file: Option<PathBuf>) -> rlprof_config::Selection {
        rlprof_config::Selection {
            file,
            config_path: self.config_path,
            config_name: self.config_name,
        }
    }

    /// The selection and the overrides of a command line whose first positional argument is
    /// `first`: a file only when it reads as one and no `--config-path/--config-name` is given
    /// (`~key`, `+key`, a bare `key` are overrides, as Hydra reads them).
    fn split(
        self,
        first: Option<String>,
        overrides: Vec<String>,
    ) -> (rlprof_config::Selection, Vec<String>) {
        let selected = self.config_path.is_some() || self.config_name.is_some();
        let (file, overrides) = commands::split_file(first, overrides, selected);
        (self.with_file(file), overrides)
    }
}

/// Performance data collection for RL post-training (GRPO, DAPO).
#[derive(Parser)]
#[command(name = "rlprof", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the training job (default: GRPO on the built-in task, profiling steps 1-2).
    Train {
        /// A `ppo_trainer.yaml`-layout file (default: the built-in GRPO config).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Optional config file first (same as `-c`), then Hydra-style overrides: `a.b=v`,
        /// `+new.key=v`, lists `[1,2]`, `null`, `True`.
        overrides: Vec<String>,
        /// Do not show progress bars.
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        select: Select,
    },
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Parse every unparsed collection below PATH (offline analysis).
    #[command(alias = "analyze")]
    Analyse {
        /// A `*_ascend_pt` collection directory or any parent (e.g. the save_path).
        path: PathBuf,
        /// Collections parsed in parallel.
        #[arg(long, short, default_value_t = 2)]
        jobs: usize,
        /// Also analyse the ranks together: per-rank step split, role times, slowest rank,
        /// bandwidth (CSV + JSON in PATH/cluster_analysis, table on standard output).
        #[arg(long)]
        cluster: bool,
    },
    /// Report of collections (or of PyTorch traces / Ascend profiler directories).
    Report {
        /// A save_path, step directory, collection, `*.pt.trace.json[.gz]` or `*_ascend_pt` dir.
        path: PathBuf,
        /// Output file (default: report.html for html, standard output otherwise).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// html (single self-contained file), text or json.
        #[arg(long, default_value = "html", value_parser = ["html", "text", "json"])]
        format: String,
        /// A second path to diff against (two steps or two runs).
        #[arg(long)]
        compare: Option<PathBuf>,
        /// Replace the output file when it exists (never allowed inside raw data).
        #[arg(long)]
        force: bool,
        /// On a cluster page (more than 8 ranks), keep the timeline of these ranks too
        /// (besides rank 0, the slowest and the fastest), e.g. `--ranks 3,17`.
        #[arg(long, value_delimiter = ',')]
        ranks: Vec<u32>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config and print the collection plan.
    Check {
        /// The YAML file (omit for the built-in default). An argument containing `=` is an override.
        config: Option<String>,
        /// Overrides.
        overrides: Vec<String>,
        /// Print the plan as one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        select: Select,
    },
    /// Print the whole composed and resolved config (Hydra's `--cfg job --resolve`).
    Show {
        /// The YAML file (omit for the built-in default). An argument containing `=` is an override.
        config: Option<String>,
        /// Hydra overrides.
        overrides: Vec<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        select: Select,
    },
}

/// The whole `rlprof` program: parses `args` (the program name first, as `std::env::args_os`
/// gives them), runs the command and returns the process's exit code (0 success, 1 failure,
/// 2 a usage error, 141 standard output closed early). Errors are printed on stderr, help and
/// `--version` on stdout. Called once per process: it sets the process's logging, allocator
/// thresholds and, except for `train`, SIGPIPE's default disposition.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // What `Cli::parse` does, without leaving the process: help and the version on
            // stdout with 0, a usage error on stderr with 2.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    rlprof_trainer::job::tune_host_allocator();
    commands::init_logging();
    if !matches!(cli.command, Command::Train { .. }) {
        quit_quietly_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Train {
            config,
            mut overrides,
            quiet,
            select,
        } => {
            // `rlprof train recipes/dapo.yaml k=v` (or `-c FILE`).
            let (selection, overrides) = match config {
                Some(file) => (select.with_file(Some(file)), overrides),
                None => {
                    let first = (!overrides.is_empty()).then(|| overrides.remove(0));
                    select.split(first, overrides)
                }
            };
            commands::train(&selection, &overrides, quiet)
        }
        Command::Config {
            command:
                ConfigCommand::Check {
                    config,
                    overrides,
                    json,
                    select,
                },
        } => {
            let (selection, overrides) = select.split(config, overrides);
            commands::config_check(&selection, overrides, json)
        }
        Command::Config {
            command:
                ConfigCommand::Show {
                    config,
                    overrides,
                    json,
                    select,
                },
        } => {
            let (selection, overrides) = select.split(config, overrides);
            commands::config_show(&selection, &overrides, json)
        }
        Command::Analyse {
            path,
            jobs,
            cluster,
        } => commands::analyse(&path, jobs, cluster).and_then(|code| {
            if cluster && code == std::process::ExitCode::SUCCESS {
                commands::cluster(&path)
            } else {
                Ok(code)
            }
        }),
        Command::Report {
            path,
            output,
            format,
            compare,
            force,
            ranks,
        } => commands::report(
            &path,
            output.as_deref(),
            &format,
            compare.as_deref(),
            force,
            ranks,
        ),
    };
    code_of(match result {
        Ok(code) => code,
        Err(e) => output::exit_code_of(&e),
    })
}

/// The number of an exit code the commands return (`ExitCode` does not give its value back).
fn code_of(code: ExitCode) -> u8 {
    if code == ExitCode::SUCCESS {
        0
    } else if code == ExitCode::from(output::CLOSED_PIPE) {
        output::CLOSED_PIPE
    } else {
        1
    }
}

/// The report of `path` as `rlprof report PATH --format json` prints it: the same loading,
/// summary and serialisation, not a second copy of them. Inputs that could not be read are
/// listed in its `skipped` table (the command also prints them on stderr; this does not).
pub fn report_json(path: &Path) -> Result<String, CliError> {
    commands::report_json(path).map_err(CliError)
}

/// Writes the HTML report of `path` to `out`, as `rlprof report PATH -o OUT [--force]
/// [--ranks R,...]` does: an existing `out` is replaced only with `force`, and never a file
/// inside a collection's raw data; `ranks` are kept on a cluster page besides rank 0, the
/// slowest and the fastest.
pub fn report_html(path: &Path, out: &Path, force: bool, ranks: Vec<u32>) -> Result<(), CliError> {
    commands::report(path, Some(out), "html", None, force, ranks)
        .map(drop)
        .map_err(CliError)
}

/// `rlprof config check ... | head` ends quietly like any Unix tool instead of panicking in
/// `println!` (Rust starts with SIGPIPE ignored). Not for `train`: a reader of its output that
/// goes away must not kill the training with a signal.
fn quit_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restores the default disposition of SIGPIPE before any thread is started by this
    // command; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
