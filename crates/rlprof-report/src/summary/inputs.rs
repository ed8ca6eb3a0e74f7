//! The report's list of inputs: what each loaded profile holds and how to open it in the
//! ecosystem's viewers.

use super::Input;
use crate::model::{Profile, SourceFormat};
use std::path::PathBuf;

pub(super) fn input_of(index: usize, p: &Profile) -> Input {
    Input {
        index,
        path: p.source.clone(),
        format: p.format,
        rank: p.rank,
        group: p.group.clone(),
        steps: p.steps.clone(),
        events: p.events.len(),
        memory_events: p.memory.len(),
        notes: p.notes.clone(),
        tables: p.tables.clone(),
        open_with: open_with(p),
    }
}

/// How to look at an input in the ecosystem's viewers.
fn open_with(p: &Profile) -> Vec<String> {
    match p.format {
        SourceFormat::RlprofRaw => {
            let coll = p.source.parent().and_then(|d| d.parent());
            let mut v = vec![format!("raw data: {}", p.source.display())];
            if let Some(c) = coll {
                let out = c.join("ASCEND_PROFILER_OUTPUT");
                if out.is_dir() {
                    v.push(format!(
                        "MindStudio Insight: open {} ; Perfetto UI: open {}",
                        c.display(),
                        out.join("trace_view.json").display()
                    ));
                } else {
                    v.push(format!(
                        "run `rlprof analyse {}` to write the viewers' formats (MindStudio Insight, Perfetto UI)",
                        c.display()
                    ));
                }
                for f in files_below(c, 2) {
                    let n = f.to_string_lossy();
                    if crate::discover::is_torch_trace(&n) {
                        v.push(format!("Perfetto UI / chrome://tracing: open {n}"));
                    } else if n.ends_with(".pickle") {
                        v.push(format!("PyTorch memory_viz: load {n}"));
                    }
                }
            }
            v
        }
        SourceFormat::TorchTrace => vec![format!(
            "Perfetto UI (Open trace file) or chrome://tracing: {}",
            p.source.display()
        )],
        SourceFormat::Ascend => vec![format!(
            "MindStudio Insight: open {}",
            p.source.parent().unwrap_or(&p.source).display()
        )],
    }
}

fn files_below(dir: &std::path::Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && depth > 0 {
                out.extend(files_below(&p, depth - 1));
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
