//! SIGINT and SIGTERM during `rlprof train`: the open collections are closed cleanly (end
//! marker, final directory name) before the process exits, so that nothing recorded is lost and
//! `rlprof analyse` parses them (marked `partial`). A second signal while closing exits at once.

use anyhow::Result;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Installs the handlers for the rest of the process's life.
pub(crate) fn install(profiler: rlprof_profiler::Profiler, save_path: PathBuf) -> Result<()> {
    let closing = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, closing.clone())?;
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("rlprof-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                closing.store(true, Ordering::SeqCst);
                shut_down(&profiler, sig, &save_path);
            }
        })?;
    Ok(())
}

fn shut_down(profiler: &rlprof_profiler::Profiler, sig: i32, save_path: &std::path::Path) -> ! {
    let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
    eprintln!("rlprof train: {name} received; closing the open collections");
    // A process about to exit parses nothing: `rlprof analyse` does it later.
    profiler.on_complete(|_| {});
    let n = profiler.close_open();
    eprintln!(
        "rlprof train: stopped by {name}; {n} open collection(s) closed early (partial); \
         parse them with `rlprof analyse {}`",
        save_path.display()
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(128 + sig)
}
