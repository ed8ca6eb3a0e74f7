//! What the commands print, on a terminal and off one (log files, pipes, `nohup`, cluster
//! schedulers): progress bars only on a terminal; off a terminal, every message a bar would
//! have shown is a plain line, and nothing carries ANSI colour codes.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Standard output failed: a full device (`> /dev/full`) or a reader that went away. `main`
/// ends the command on it quietly with the conventional status (141 for a closed pipe, as a
/// process killed by SIGPIPE; 1 with a message for any other write error, as coreutils do).
#[derive(Debug)]
pub(crate) struct StdoutFailed(pub(crate) std::io::Error);

impl std::fmt::Display for StdoutFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Writes `args` to standard output and flushes it, so that a failed write is seen here (not
/// lost at exit, nor a panic in `println!`).
pub(crate) fn print_out(args: std::fmt::Arguments<'_>) -> Result<(), StdoutFailed> {
    let mut o = std::io::stdout().lock();
    o.write_fmt(args)
        .and_then(|()| o.flush())
        .map_err(StdoutFailed)
}

/// `println!` that returns a [`StdoutFailed`] instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::print_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// Set once standard output has failed during `train`.
static TRAIN_STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// A line of `train`'s output. Training never stops or panics because its reader went away
/// (`rlprof train | head -2`) or the disk of a redirected log filled: the first failure is said
/// once on stderr and later lines are dropped, while training and its collections go on.
pub(crate) fn train_line(args: std::fmt::Arguments<'_>) {
    if TRAIN_STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = print_out(format_args!("{args}\n"))
        && !TRAIN_STDOUT_GONE.swap(true, Ordering::Relaxed)
    {
        let _ = writeln!(
            std::io::stderr(),
            "rlprof train: {e}; training goes on without printing to it"
        );
    }
}

/// The exit code of a command whose standard output was closed early (128 + SIGPIPE, as a
/// shell reports a process killed by it).
pub(crate) const CLOSED_PIPE: u8 = 141;

/// The exit status for an error of a command: [`StdoutFailed`] ends quietly (141 for a closed
/// pipe) or with its message and 1; anything else prints `error: ...` and gives 1.
pub(crate) fn exit_code_of(e: &anyhow::Error) -> std::process::ExitCode {
    if let Some(StdoutFailed(io)) = e.downcast_ref::<StdoutFailed>()
        && io.kind() == std::io::ErrorKind::BrokenPipe
    {
        return std::process::ExitCode::from(CLOSED_PIPE);
    }
    let _ = writeln!(std::io::stderr(), "error: {e:#}");
    std::process::ExitCode::FAILURE
}

/// Whether stderr (where bars and logs go) is a terminal.
pub(crate) fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// A progress bar on stderr with `template`; hidden when stderr is not a terminal.
pub(crate) fn bar(len: u64, template: &str) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::with_draw_target(Some(len), draw_target());
    b.set_style(
        indicatif::ProgressStyle::with_template(template)
            .expect("template")
            .progress_chars("=> "),
    );
    b
}

/// Where bars draw: stderr on a terminal, nowhere otherwise.
pub(crate) fn draw_target() -> indicatif::ProgressDrawTarget {
    if stderr_is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    }
}

/// Prints `msg` on stderr above the bar `pb`, or as a plain line when the bar is hidden.
pub(crate) fn line(pb: &indicatif::ProgressBar, msg: String) {
    if pb.is_hidden() {
        eprintln!("{msg}");
    } else {
        pb.println(msg);
    }
}

/// verl's key metrics of a step, as its console logger prints them
/// (`step:3 - critic/score/mean:0.250 - ...`), for logs off a terminal.
pub(crate) fn step_line(m: &rlprof_trainer::StepMetrics) -> String {
    const KEYS: [&str; 7] = [
        "critic/score/mean",
        "critic/rewards/mean",
        "actor/pg_loss",
        "actor/kl_loss",
        "actor/entropy",
        "actor/grad_norm",
        "response_length/mean",
    ];
    let mut s = format!("step:{}", m.step);
    for k in KEYS {
        if let Some(v) = m.values.get(k) {
            s.push_str(&format!(" - {k}:{v:.4}"));
        }
    }
    s.push_str(&format!(" - accuracy:{:.3}", m.accuracy));
    if let Some(t) = m.timing_s.get("step") {
        s.push_str(&format!(" - timing_s/step:{t:.3}"));
    }
    s.push_str(&format!(" - perf/throughput:{:.1}", m.tokens_per_s));
    s
}

/// Refuses a report output path that would replace a file (unless `force`) or write into a
/// collection's raw data (`rlprof_raw/`, `*.rlraw`; never, even with `force`).
pub(crate) fn check_report_target(out: &std::path::Path, force: bool) -> anyhow::Result<()> {
    let abs = std::path::absolute(out)?;
    let parent = abs.parent().unwrap_or(std::path::Path::new("/"));
    // Resolve links of the existing directories, so a link cannot smuggle the write in.
    let real_parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
    let real = match std::fs::canonicalize(&abs) {
        Ok(p) => p,
        Err(_) => real_parent.join(abs.file_name().unwrap_or_default()),
    };
    let in_raw = real.components().any(|c| c.as_os_str() == "rlprof_raw")
        || real.extension().is_some_and(|e| e == "rlraw");
    if in_raw {
        anyhow::bail!(
            "{}: refusing to write a report into a collection's raw data; choose another -o",
            out.display()
        );
    }
    if real.is_dir() {
        anyhow::bail!(
            "{}: is a directory; give a file name with -o",
            out.display()
        );
    }
    // A device node, FIFO or socket is never replaced by (nor written as) a report, even with
    // --force: as root, `-o /dev/null --force` would otherwise replace /dev/null.
    if let Ok(m) = std::fs::metadata(&real)
        && !m.file_type().is_file()
    {
        anyhow::bail!(
            "{}: not a regular file; a report is written only to a regular file",
            out.display()
        );
    }
    if !force && std::fs::symlink_metadata(out).is_ok() {
        anyhow::bail!(
            "{}: exists; pass --force to replace it, or choose another -o",
            out.display()
        );
    }
    Ok(())
}

/// Writes the report as `write` renders it (a large HTML report is never held in memory): a
/// new file (`create_new`) unless `force`, then through a staging file and a rename, so a
/// reader never sees half a report. A failed write removes the file it was writing.
pub(crate) fn write_report(
    out: &std::path::Path,
    force: bool,
    write: impl FnOnce(&mut dyn std::io::Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    check_report_target(out, force)?;
    let tmp = force.then(|| rlprof_profiler::collection::staging::staging_name(out));
    let path = tmp.as_deref().unwrap_or(out);
    let mut options = std::fs::File::options();
    match tmp {
        Some(_) => options.write(true).create(true).truncate(true),
        None => options.write(true).create_new(true),
    };
    let mut f = options
        .open(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Err(e) = write(&mut f) {
        drop(f);
        let _ = std::fs::remove_file(path);
        return Err(anyhow::anyhow!("{}: {e}", path.display()));
    }
    drop(f);
    if let Some(tmp) = &tmp {
        std::fs::rename(tmp, out).map_err(|e| {
            let _ = std::fs::remove_file(tmp);
            anyhow::anyhow!("{}: {e}", out.display())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_line_is_plain_verl_style() {
        let mut m = rlprof_trainer::StepMetrics {
            step: 3,
            reward_mean: 0.5,
            accuracy: 0.25,
            timing_s: Default::default(),
            tokens_per_s: 100.0,
            values: Default::default(),
        };
        m.values.insert("actor/pg_loss".into(), -0.125);
        m.timing_s.insert("step".into(), 1.5);
        let l = step_line(&m);
        assert!(l.starts_with("step:3 - actor/pg_loss:-0.1250"), "{l}");
        assert!(l.contains("timing_s/step:1.500"), "{l}");
        assert!(!l.contains('\u{1b}'), "no ANSI codes: {l}");
    }
}
