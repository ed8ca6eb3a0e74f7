//! The `global_profiler` section and the world size (`trainer.nnodes * n_gpus_per_node`): tool,
//! steps, save path, caps, the default schedule and the nsys / torch_memory global options.

use super::fields::{parse_hooks, parse_schedule, pos_u32};
use super::precision::{PRECISION_DEBUGGER, RawPrecision, read_block};
use super::raw::{Global, Hooks};
use super::schema::{
    GLOBAL_KEYS, GLOBAL_TOOL_KEYS, NSYS_GLOBAL_KEYS, RLPROF_KEYS, TORCH_MEMORY_KEYS,
};
use crate::tree::{Map, Node};
use crate::typed::{self, Reader};
use rlprof_profiler::plan::{Caps, Layout, NsysOptions, Tool, TorchMemoryOptions};
use std::collections::BTreeMap;

pub(super) fn world_size(cx: &mut Reader, root: &Map) -> u32 {
    let Some(trainer) = cx.map(root.get("trainer"), "trainer") else {
        return 1;
    };
    let mut read = |key: &str| -> u32 {
        match Reader::entry(trainer, key) {
            None => 1,
            Some(v) => match typed::as_int(v) {
                Some(i) if i > 0 && i <= u32::MAX as i64 => i as u32,
                _ => {
                    cx.err(
                        &format!("trainer.{key}"),
                        format!("{} is not valid; expected an integer > 0", v.show()),
                    );
                    1
                }
            },
        }
    };
    let n = read("nnodes");
    let g = read("n_gpus_per_node");
    n.saturating_mul(g)
}

pub(super) fn parse_global(cx: &mut Reader, root: &Map, world: u32) -> Global {
    let mut g = Global {
        tool: None,
        tool_given: false,
        steps: vec![],
        continuous: false,
        save_path: "outputs/profile".into(),
        nsys: default_nsys(),
        torch_memory: TorchMemoryOptions::default(),
        caps: Caps::default(),
        schedule: None,
        hooks: Hooks::default(),
        precision_debugger: false,
        precision: RawPrecision::default(),
        unknown_tool: false,
        layout: Layout::default(),
        worker_nsight_null: false,
        warnings: Vec::new(),
    };
    let p = "global_profiler";
    let Some(m) = cx.map(root.get(p), p) else {
        return g;
    };
    cx.check_keys(m, p, GLOBAL_KEYS);
    g.precision_debugger = m.get("tool").and_then(Node::as_str) == Some(PRECISION_DEBUGGER);
    g.tool = match m.get("tool").and_then(Node::as_str) {
        _ if g.precision_debugger => None,
        Some(t) if Tool::parse(t).is_none() && !typed::is_interp(&m["tool"]) => {
            // verl 0.9.1 accepts any tool name and profiles nothing with an unknown one.
            let valid = Tool::ALL.map(Tool::as_str);
            let hint = typed::suggest(t, &valid)
                .map(|s| format!("; did you mean '{s}'?"))
                .unwrap_or_default();
            g.warnings.push(format!(
                "global_profiler.tool: '{t}' is not one of {}, so nothing is collected; verl 0.9.1 accepts it the same way (its no-op profiler){hint}",
                valid.join(", ")
            ));
            g.unknown_tool = true;
            None
        }
        _ => cx.tool(m, "tool", p),
    };
    g.hooks = parse_hooks(cx, m, p, world, &mut g.warnings);
    g.tool_given = Reader::entry(m, "tool").is_some();
    g.steps = parse_steps(cx, m.get("steps"), &mut g.warnings);
    if let Some(rl) = cx.map(m.get("rlprof"), "global_profiler.rlprof") {
        cx.check_keys(rl, "global_profiler.rlprof", RLPROF_KEYS);
        if let Some(l) = cx.str_in(rl, "layout", "global_profiler.rlprof") {
            match l.as_str() {
                "verl" => g.layout = Layout::Verl,
                "step_grouped" => g.layout = Layout::StepGrouped,
                other => cx.not_one_of(
                    "global_profiler.rlprof.layout",
                    other,
                    &["verl", "step_grouped"],
                ),
            }
        }
    }
    g.continuous = cx
        .bool_in(m, "profile_continuous_steps", p)
        .unwrap_or(false);
    if let Some(s) = cx.str_in(m, "save_path", p) {
        if s.trim().is_empty() {
            cx.err(
                "global_profiler.save_path",
                "'' is empty; give the directory that receives the collections (default outputs/profile)",
            );
        }
        g.save_path = s;
    }
    if let Some(c) = cx.cap_in(m, "max_events", p) {
        g.caps.max_events = c;
    }
    if let Some(c) = cx.cap_in(m, "max_bytes", p) {
        g.caps.max_bytes = c;
    }
    let gp = "global_profiler.global_tool_config";
    if let Some(gtc) = cx.map(m.get("global_tool_config"), gp) {
        cx.check_keys(gtc, gp, GLOBAL_TOOL_KEYS);
        g.schedule = parse_schedule(cx, gtc, gp);
        let np = format!("{gp}.nsys");
        if let Some(n) = cx.map(gtc.get("nsys"), &np) {
            cx.check_keys(n, &np, NSYS_GLOBAL_KEYS);
            if let Some(d) = cx.bool_in(n, "discrete", &np) {
                g.nsys.discrete = d;
            }
            for (key, target) in [
                (
                    "controller_nsight_options",
                    &mut g.nsys.controller_nsight_options,
                ),
                ("worker_nsight_options", &mut g.nsys.worker_nsight_options),
            ] {
                let kp = format!("{np}.{key}");
                if key == "worker_nsight_options" && matches!(n.get(key), Some(Node::Null)) {
                    g.worker_nsight_null = true;
                }
                if let Some(opts) = cx.map(n.get(key), &kp) {
                    for (k, v) in opts {
                        target.insert(k.clone(), v.to_json());
                    }
                }
            }
        }
        let tp = format!("{gp}.torch_memory");
        if let Some(t) = cx.map(gtc.get("torch_memory"), &tp) {
            cx.check_keys(t, &tp, TORCH_MEMORY_KEYS);
            if let Some(e) = cx.pos_int_in(t, "trace_alloc_max_entries", &tp) {
                g.torch_memory.trace_alloc_max_entries = e;
            }
            if let Some(d) = pos_u32(cx, t, "stack_depth", &tp) {
                g.torch_memory.stack_depth = d;
            }
            if let Some(n) = cx.pos_int_in(t, "memory_snapshot_num_steps", &tp) {
                g.torch_memory.snapshot_num_steps = n;
            }
        }
        let pp = format!("{gp}.precision_debugger");
        if let Some(b) = cx.map(gtc.get("precision_debugger"), &pp) {
            g.precision = read_block(cx, b, &pp);
        }
    }
    g
}

fn default_nsys() -> NsysOptions {
    let s = |v: &str| serde_json::Value::String(v.to_string());
    let mut controller = BTreeMap::new();
    controller.insert("trace".to_string(), s("cuda,nvtx,cublas,ucx"));
    controller.insert("cuda-memory-usage".to_string(), s("true"));
    controller.insert("cuda-graph-trace".to_string(), s("graph"));
    let mut worker = controller.clone();
    worker.insert("capture-range".to_string(), s("cudaProfilerApi"));
    worker.insert("capture-range-end".to_string(), serde_json::Value::Null);
    worker.insert("kill".to_string(), s("none"));
    NsysOptions {
        discrete: false,
        controller_nsight_options: controller,
        worker_nsight_options: worker,
    }
}

fn parse_steps(cx: &mut Reader, v: Option<&Node>, warnings: &mut Vec<String>) -> Vec<u64> {
    let p = "global_profiler.steps";
    let v = match v {
        None | Some(Node::Null) => return vec![],
        Some(v) if typed::is_interp(v) => return vec![],
        Some(v) => v,
    };
    let Node::List(seq) = v else {
        let example = match typed::as_int(v) {
            Some(i) => format!("[{i}]"),
            None => "[1, 2, 5]".to_string(),
        };
        cx.err(
            p,
            format!(
                "{} is {}, but steps must be a list of 1-based step numbers or null; write steps: {example} (on the command line: global_profiler.steps={})",
                v.show(),
                typed::kind(v),
                example.replace(' ', "")
            ),
        );
        return vec![];
    };
    let mut out = Vec::new();
    for (i, item) in seq.iter().enumerate() {
        match typed::as_int(item) {
            Some(s) if s >= 1 => out.push(s as u64),
            // verl 0.9.1 accepts it: its trainer counts steps from 1, so the step never comes.
            Some(s) => warnings.push(format!(
                "{p}[{i}]: step {s} never comes (the trainer counts steps from 1), so it is not profiled; verl 0.9.1 accepts it the same way"
            )),
            _ => cx.err(
                &format!("{p}[{i}]"),
                format!(
                    "{} is not a valid step; steps are integers >= 1 (the trainer counts steps from 1)",
                    item.show()
                ),
            ),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
