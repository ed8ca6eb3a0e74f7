//! Automatic analysis (`analysis: true`): each completed collection is parsed on a background
//! thread so that training waits only for the raw flush, never for parsing.

use rlprof_profiler::{CompletedCollection, Profiler};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// Parses completed collections off the training threads.
#[derive(Clone, Default)]
pub(crate) struct AutoAnalysis {
    handles: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl AutoAnalysis {
    /// Hooks into `profiler`'s completions.
    pub(crate) fn attach(profiler: &Profiler) -> AutoAnalysis {
        let me = AutoAnalysis::default();
        let h = me.handles.clone();
        profiler.on_complete(move |c: &CompletedCollection| {
            if !c.analysis {
                return;
            }
            let dir = c.dir.clone();
            let spawned = std::thread::Builder::new()
                .name("rlprof-analysis".into())
                .spawn(move || parse(&dir));
            match spawned {
                Ok(j) => h.lock().unwrap_or_else(PoisonError::into_inner).push(j),
                Err(e) => tracing::warn!(
                    "cannot start automatic analysis ({e}); run `rlprof analyse` later"
                ),
            }
        });
        me
    }

    /// Waits for every started analysis.
    pub(crate) fn wait(&self) {
        let hs: Vec<_> = self
            .handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .collect();
        for h in hs {
            let _ = h.join();
        }
    }
}

/// Parses one collection (automatic analysis, on a background thread). Failures are logged:
/// the raw data stays and `rlprof analyse` can parse it later.
fn parse(dir: &Path) {
    match rlprof_export::analyse_collection(dir) {
        Ok(r) => {
            for w in &r.warnings {
                tracing::warn!("{w}");
            }
            tracing::info!("parsed {}", dir.display());
        }
        Err(e) => tracing::warn!(
            "automatic analysis of {} failed ({e}); raw data kept, run `rlprof analyse` later",
            dir.display()
        ),
    }
}
