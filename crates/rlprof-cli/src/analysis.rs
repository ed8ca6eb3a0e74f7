//! Automatic analysis (`analysis: true`): each completed collection is parsed on a background
//! thread so that training waits only for the raw flush, never for parsing.

use rlprof_profiler::{CompletedCollection, Profiler};
use std::sync::{Arc, Mutex};
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
                Ok(j) => h.lock().expect("handles").push(j),
                Err(e) => tracing::warn!(
                    "cannot start automatic analysis ({e}); run `rlprof analyse` later"
                ),
            }
        });
        me
    }

    /// Waits for every started analysis.
    pub(crate) fn wait(&self) {
        let hs: Vec<_> = self.handles.lock().expect("handles").drain(..).collect();
        for h in hs {
            let _ = h.join();
        }
    }
}

fn parse(dir: &std::path::Path) {
    crate::commands::analyse_one(dir);
}
