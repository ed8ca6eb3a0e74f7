//! Output-equivalence check for exporter changes.
//!
//! `golden make DIR` records scripted collections (npu level0/1/2, torch; every content) with
//! the profiler's own API into `DIR`; `golden export DIR` parses every collection below `DIR`.
//! Run `make` once, copy the tree, export each copy with the old and the new build, and compare
//! them with `golden_cmp.py OLD NEW` (byte-identical files, or traces equal as JSON).

#[path = "../tests/support/mod.rs"]
mod support;

use rlprof_profiler::plan::{Content, Level, Tool};
use std::path::Path;

fn make(dir: &Path) {
    use Content::*;
    let all = [Npu, Cpu, Memory, Shapes, Module, Stack];
    let cases = [
        ("npu_l0", Tool::Npu, Level::Level0, &all[..]),
        ("npu_l1", Tool::Npu, Level::Level1, &all[..]),
        ("npu_l2", Tool::Npu, Level::Level2, &all[..]),
        ("npu_none", Tool::Npu, Level::LevelNone, &[Cpu, Memory][..]),
        (
            "torch",
            Tool::Torch,
            Level::Level1,
            &[Cuda, Cpu, Memory, Shapes, Module, Stack][..],
        ),
        (
            "torch_memory",
            Tool::TorchMemory,
            Level::Level0,
            &[Cuda, Cpu, Memory][..],
        ),
    ];
    for (name, tool, level, contents) in cases {
        let mut s = support::Script::npu(level, contents);
        s.tool = tool;
        s.ops = 200;
        s.comms = 3;
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let done = support::collect(&d, &s);
        println!("{name}: {} collections", done.len());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(2).expect("usage: golden make|export DIR"));
    match args[1].as_str() {
        "make" => make(dir),
        "export" => {
            let r = rlprof_export::analyse_tree(dir, 1, &|_| {}).unwrap();
            println!("parsed {} failed {}", r.parsed(), r.failed());
        }
        other => panic!("unknown command {other}"),
    }
}
