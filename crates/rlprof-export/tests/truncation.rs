//! A collection stopped by a cap carries the truncation marker inside its exported files (npu
//! `profiler_metadata.json`, torch trace top level), and a complete one carries `null`.

mod support;

use rlprof_export::analyse_collection;
use rlprof_profiler::plan::{Caps, Content, Level, Tool};
use support::*;

fn marker_of(tool: Tool, caps: Caps) -> Vec<serde_json::Value> {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Script::npu(Level::Level0, &[Content::Npu, Content::Cpu]);
    s.tool = tool;
    s.steps = vec![1];
    s.ops = 200;
    s.caps = caps;
    let done = collect(tmp.path(), &s);
    let mut out = Vec::new();
    for c in &done {
        analyse_collection(&c.dir).unwrap();
        match tool {
            Tool::Npu => {
                let md: serde_json::Value = serde_json::from_slice(
                    &std::fs::read(c.dir.join("profiler_metadata.json")).unwrap(),
                )
                .unwrap();
                out.push(md["rlprof"]["truncated"].clone());
            }
            _ => {
                let parent = c.dir.parent().unwrap();
                for f in std::fs::read_dir(parent).unwrap().flatten() {
                    let p = f.path();
                    // verl's trace name: `..._rank{R}-of-{W}_pid{P}_{ts}.json.gz`.
                    if p.to_string_lossy().ends_with(".json.gz")
                        && p.to_string_lossy()
                            .contains(&format!("_rank{}-of-", c.rank))
                    {
                        let gz = std::fs::File::open(&p).unwrap();
                        let v: serde_json::Value =
                            serde_json::from_reader(flate2::read::GzDecoder::new(gz)).unwrap();
                        out.push(v["rlprof_truncated"].clone());
                    }
                }
            }
        }
    }
    assert_eq!(out.len(), done.len());
    out
}

#[test]
fn capped_collections_say_so_in_their_outputs() {
    let capped = Caps {
        max_events: Some(100),
        max_bytes: None,
    };
    for tool in [Tool::Npu, Tool::Torch] {
        for m in marker_of(tool, capped) {
            assert_eq!(m["reason"], "max_events", "{tool:?}: {m}");
            assert!(m["events_kept"].as_u64().unwrap() <= 100, "{m}");
        }
        for m in marker_of(tool, Caps::default()) {
            assert!(m.is_null(), "{tool:?}: complete collection marked {m}");
        }
    }
}
