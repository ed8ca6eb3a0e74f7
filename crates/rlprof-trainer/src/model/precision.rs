//! verl 0.9.1's `precision_debugger` tool: msprobe-layout dumps of the model's API calls.
//!
//! verl wraps a stage (`actor_update`, `ref_compute_log_prob`, ...) in msprobe's PyTorch
//! `PrecisionDebugger` with `dump_path = save_path/step_{global_step}/{stage}`; msprobe writes
//! `step0/rank{R}/dump.json`, `stack.json` and `construct.json` below it (verl never advances
//! msprobe's own step). [`stage`] does the same for one role call of one rank thread: while its
//! guard lives, every op of the op layer ([`super::ops::traced`]) and every backward node of
//! [`super::autograd`] is one entry, named as msprobe names the PyTorch API it stands for
//! (`Functional.linear.0.forward`, `Tensor.__add__.3.backward`; see [`api_name`]), with the
//! statistics msprobe's `statistics` task writes for each input and output tensor (dtype, shape,
//! Max, Min, Mean, Norm, requires_grad). The statistics are computed here, inside the op layer,
//! on the tensors the op read and wrote.
//!
//! Cost when no stage dumps: [`on`] is one relaxed atomic load, and the op layer branches on it.

use candle_core::{CpuStorage, DType, Storage, Tensor};
use rlprof_profiler::plan::{MsprobeConfig, PrecisionPlan, RoleCall};
use rlprof_profiler::{NameId, RankProfiler, resolve};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rank threads with a stage dumping now.
static DUMPING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static DUMP: RefCell<Option<Dump>> = const { RefCell::new(None) };
}

/// Whether any rank thread is dumping (one relaxed load: the op layer's only cost otherwise).
#[inline]
pub fn on() -> bool {
    DUMPING.load(Ordering::Relaxed) != 0
}

/// One stage's dump on one rank thread.
struct Dump {
    dir: PathBuf,
    cfg: MsprobeConfig,
    /// Entries in order.
    entries: Vec<Entry>,
    /// Per-entry module path (stack.json).
    modules: Vec<String>,
    /// msprobe's per-API call counters.
    counters: HashMap<String, u32>,
    /// Forward calls by id: their `{api}.{n}` prefix (id = index + 1).
    calls: Vec<String>,
    /// msprobe's `scope` range state.
    in_scope: bool,
    /// Cache of API names by op name id.
    names: HashMap<u32, String>,
    /// The forward call now running (its id), for the autograd tag.
    current: u32,
    /// Statistics of the op outputs seen in this dump, by tensor id: an op's output is
    /// usually the next op's input, and a tensor an op created never changes.
    seen: HashMap<candle_core::TensorId, Option<[f64; 4]>>,
}

/// One tensor's statistics, as msprobe's `statistics` task writes them.
struct Stats {
    dtype: &'static str,
    shape: Vec<usize>,
    /// Max, Min, Mean, Norm (None: empty tensor).
    s: Option<[f64; 4]>,
    requires_grad: bool,
}

/// One dump.json entry: forward (`input_args`, `input_kwargs`, `output`) or backward (`input`,
/// `output`); a side left out by `data_mode` is None.
struct Entry {
    name: String,
    forward: bool,
    input: Option<Vec<Option<Stats>>>,
    output: Option<Vec<Option<Stats>>>,
}

/// The guard of one dumped stage: writes the dump when dropped.
pub struct StageDump(Option<()>);

impl Drop for StageDump {
    fn drop(&mut self) {
        if self.0.is_none() {
            return;
        }
        let d = DUMP.with(|c| c.borrow_mut().take());
        DUMPING.fetch_sub(1, Ordering::Relaxed);
        if let Some(d) = d
            && let Err(e) = d.write()
        {
            tracing::warn!(
                "precision_debugger: writing the dump under {} failed: {e}",
                d.dir.display()
            );
        }
    }
}

/// Starts dumping role call `call` of step `step` on this rank thread, when the plan's
/// precision debugger wants it (its stage listed, the step in `global_profiler.steps`, the rank
/// and msprobe step 0 in msprobe's `rank` / `step` lists).
pub fn stage(rp: &RankProfiler, step: u64, call: RoleCall) -> StageDump {
    let Some(p) = &rp.plan().verl.precision else {
        return StageDump(None);
    };
    start(p, rp.rank(), step, call)
}

/// [`stage`] on a plan.
pub fn start(p: &PrecisionPlan, rank: u32, step: u64, call: RoleCall) -> StageDump {
    let Some(s) = p.stages.iter().find(|s| s.call == call) else {
        return StageDump(None);
    };
    let cfg = &s.msprobe;
    if !p.steps.contains(&step)
        || (!cfg.ranks.is_empty() && !cfg.ranks.contains(&rank))
        || (!cfg.steps.is_empty() && !cfg.steps.contains(&0))
    {
        return StageDump(None);
    }
    let dir = p
        .save_path
        .join(format!("step_{step}"))
        .join(call.annotated_name())
        .join("step0")
        .join(format!("rank{rank}"));
    let d = Dump {
        dir,
        cfg: cfg.clone(),
        entries: Vec::new(),
        modules: Vec::new(),
        counters: HashMap::new(),
        calls: Vec::new(),
        in_scope: false,
        names: HashMap::new(),
        current: 0,
        seen: HashMap::new(),
    };
    let fresh = DUMP.with(|c| c.borrow_mut().replace(d).is_none());
    if fresh {
        DUMPING.fetch_add(1, Ordering::Relaxed);
        StageDump(Some(()))
    } else {
        StageDump(None)
    }
}

/// msprobe's name of the PyTorch API an op of ours stands for. Ops that are one PyTorch API
/// take its name; fused ops of ours with no single PyTorch API (`silu_mul`, `rope`,
/// `attention`, `entropy`, ...) are `Functional.<op>`.
pub fn api_name(op: &str) -> String {
    match op {
        "linear" | "embedding" | "softmax" | "log_softmax" | "rms_norm" => {
            format!("Functional.{op}")
        }
        "matmul" | "cat" | "gather" | "index_select" | "rsqrt" => format!("Torch.{op}"),
        "add" => "Tensor.__add__".into(),
        "mul" => "Tensor.__mul__".into(),
        "div" => "Tensor.__truediv__".into(),
        "pow" | "mean" => format!("Tensor.{op}"),
        "attention" => "Functional.scaled_dot_product_attention".into(),
        other => format!("Functional.{other}"),
    }
}

/// Called by `traced` before a forward op runs (only when [`on`]): the call's id (0 when this
/// thread is not dumping), also the current call that [`current`] gives the autograd tag.
pub(crate) fn enter(name: NameId) -> u32 {
    DUMP.with(|c| {
        let mut b = c.borrow_mut();
        let Some(d) = b.as_mut() else { return 0 };
        let api = d
            .names
            .entry(name.0)
            .or_insert_with(|| api_name(resolve(name).as_deref().unwrap_or("op")))
            .clone();
        let n = d.counters.entry(api.clone()).or_insert(0);
        let prefix = format!("{api}.{n}");
        *n += 1;
        d.calls.push(prefix);
        let id = d.calls.len() as u32;
        d.current = id;
        id
    })
}

/// The forward call running now (0: none), for a backward node's tag.
pub(crate) fn current() -> u32 {
    if !on() {
        return 0;
    }
    DUMP.with(|c| c.borrow().as_ref().map_or(0, |d| d.current))
}

/// Called by `traced` after forward call `id` ran: its entry.
pub(crate) fn forward(id: u32, module: NameId, inputs: &[&Tensor], out: Option<&Tensor>) {
    DUMP.with(|c| {
        let mut b = c.borrow_mut();
        let Some(d) = b.as_mut() else { return };
        d.current = 0;
        let Some(prefix) = d.calls.get(id as usize - 1).cloned() else {
            return;
        };
        let name = format!("{prefix}.forward");
        if !d.wants(&name, true) {
            return;
        }
        let input = d
            .mode("input")
            .then(|| inputs.iter().map(|t| Some(d.stats(t, false))).collect());
        let output = d
            .mode("output")
            .then(|| out.map(|t| Some(d.stats(t, true))).into_iter().collect());
        let module = resolve(module).map_or_else(String::new, |s| s.to_string());
        d.entries.push(Entry {
            name,
            forward: true,
            input,
            output,
        });
        d.modules.push(module);
    });
}

/// Called by a backward node of forward call `id`: `grad` is the gradient of its output
/// (msprobe's backward `input`), `grads` the gradients of its inputs (its `output`).
pub(crate) fn backward(id: u32, grad: &Tensor, grads: &[Option<&Tensor>]) {
    DUMP.with(|c| {
        let mut b = c.borrow_mut();
        let Some(d) = b.as_mut() else { return };
        let Some(prefix) = d.calls.get(id as usize - 1).cloned() else {
            return;
        };
        let name = format!("{prefix}.backward");
        if !d.wants(&name, false) {
            return;
        }
        let input = d.mode("input").then(|| vec![Some(d.stats(grad, false))]);
        let output = d
            .mode("output")
            .then(|| grads.iter().map(|g| g.map(|t| d.stats(t, true))).collect());
        d.entries.push(Entry {
            name,
            forward: false,
            input,
            output,
        });
        d.modules.push(String::new());
    });
}

/// The gradients a backward node returns, as a list (one per input of the forward op).
pub trait Grads {
    /// Each input's gradient.
    fn grads(&self) -> Vec<Option<&Tensor>>;
}

impl Grads for Option<Tensor> {
    fn grads(&self) -> Vec<Option<&Tensor>> {
        vec![self.as_ref()]
    }
}

impl Grads for (Option<Tensor>, Option<Tensor>) {
    fn grads(&self) -> Vec<Option<&Tensor>> {
        vec![self.0.as_ref(), self.1.as_ref()]
    }
}

impl Grads for (Option<Tensor>, Option<Tensor>, Option<Tensor>) {
    fn grads(&self) -> Vec<Option<&Tensor>> {
        vec![self.0.as_ref(), self.1.as_ref(), self.2.as_ref()]
    }
}

impl Dump {
    /// [`stats`] of `t`, reusing those of an op output seen before; `created` when an op of
    /// this dump created `t` (its statistics are kept for the ops that read it).
    fn stats(&mut self, t: &Tensor, created: bool) -> Stats {
        let s = match self.seen.get(&t.id()) {
            Some(s) => *s,
            None => {
                let s = summary(t);
                if created {
                    self.seen.insert(t.id(), s);
                }
                s
            }
        };
        Stats {
            dtype: torch_dtype(t.dtype()),
            shape: t.dims().to_vec(),
            s,
            requires_grad: t.track_op(),
        }
    }

    /// msprobe's `data_mode` (its `_get_allowed_data_mode`): `all`, else the listed modes, with
    /// both directions when none is listed and both sides when none is listed.
    fn allowed(&self, mode: &str) -> bool {
        let m = &self.cfg.data_mode;
        let has = |x: &str| m.iter().any(|y| y == x);
        if has("all") || has(mode) {
            return true;
        }
        match mode {
            "forward" | "backward" => !has("forward") && !has("backward"),
            _ => !has("input") && !has("output"),
        }
    }

    /// msprobe's `data_mode` for one side (`input` / `output`).
    fn mode(&self, side: &str) -> bool {
        self.allowed(side)
    }

    /// msprobe's `data_mode` direction filter, `scope` range and `list` filter (as its L1 API
    /// range scope checks them) for entry `name`.
    fn wants(&mut self, name: &str, forward: bool) -> bool {
        let dir_ok = self.allowed(if forward { "forward" } else { "backward" });
        let scope = &self.cfg.scope;
        if scope.len() == 2 && name == scope[0] {
            self.in_scope = true;
        }
        let in_range = scope.len() != 2 || self.in_scope;
        let listed = self.cfg.list.is_empty() || self.cfg.list.iter().any(|l| name.contains(l));
        if scope.len() == 2 && name == scope[1] {
            self.in_scope = false;
        }
        dir_ok && in_range && listed
    }

    fn write(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut dump = String::new();
        dump.push_str("{\n");
        let _ = writeln!(dump, " \"task\": {},", quote(self.cfg.task.as_str()));
        let _ = writeln!(dump, " \"level\": {},", quote(self.cfg.level.as_str()));
        dump.push_str(" \"framework\": \"pytorch\",\n \"dump_data_dir\": null,\n \"data\": {");
        for (i, e) in self.entries.iter().enumerate() {
            dump.push_str(if i == 0 { "\n" } else { ",\n" });
            write_entry(&mut dump, e);
        }
        dump.push_str(if self.entries.is_empty() {
            "}\n}"
        } else {
            "\n }\n}"
        });
        let mut stack = String::from("{");
        for (i, (e, module)) in self.entries.iter().zip(&self.modules).enumerate() {
            let frame = if module.is_empty() {
                "File rlprof, in backward".to_string()
            } else {
                format!("File rlprof, in {module}")
            };
            let _ = write!(
                stack,
                "{}\n \"{i}\": [\n  [\n   {}\n  ],\n  [\n   {}\n  ]\n ]",
                if i == 0 { "" } else { "," },
                quote(&e.name),
                quote(&frame)
            );
        }
        stack.push_str(if self.entries.is_empty() { "}" } else { "\n}" });
        let write = |file: &str, text: &str| {
            rlprof_profiler::collection::safe_fs::write(&self.dir.join(file), text.as_bytes())
        };
        write("dump.json", &dump)?;
        write("stack.json", &stack)?;
        write("construct.json", "{}")
    }
}

/// A JSON string.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// One entry of dump.json's `data`, in msprobe's key order and one-space indent.
fn write_entry(out: &mut String, e: &Entry) {
    let _ = write!(out, "  {}: {{", quote(&e.name));
    let mut first = true;
    let mut side = |out: &mut String, key: &str, v: &Option<Vec<Option<Stats>>>| {
        let Some(list) = v else { return };
        out.push_str(if first { "\n" } else { ",\n" });
        first = false;
        let _ = write!(out, "   \"{key}\": [");
        for (i, t) in list.iter().enumerate() {
            out.push_str(if i == 0 { "\n" } else { ",\n" });
            match t {
                None => out.push_str("    null"),
                Some(t) => write_stats(out, t),
            }
        }
        out.push_str(if list.is_empty() { "]" } else { "\n   ]" });
    };
    if e.forward {
        side(out, "input_args", &e.input);
        if e.input.is_some() {
            out.push_str(",\n   \"input_kwargs\": {}");
        }
    } else {
        side(out, "input", &e.input);
    }
    side(out, "output", &e.output);
    out.push_str(if e.input.is_none() && e.output.is_none() {
        "}"
    } else {
        "\n  }"
    });
}

/// A float as Python's `json.dump` writes it (`NaN`, `Infinity` for the non-finite).
fn py_float(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        serde_json::to_string(&x).unwrap_or_else(|_| "null".into())
    }
}

fn write_stats(out: &mut String, t: &Stats) {
    let num = |i: usize| t.s.map_or_else(|| "null".to_string(), |s| py_float(s[i]));
    let shape: Vec<String> = t.shape.iter().map(|d| format!("\n      {d}")).collect();
    let shape = if shape.is_empty() {
        "[]".to_string()
    } else {
        format!("[{}\n     ]", shape.join(","))
    };
    let _ = write!(
        out,
        "    {{\n     \"type\": \"torch.Tensor\",\n     \"dtype\": \"{}\",\n     \"shape\": {shape},\n     \"Max\": {},\n     \"Min\": {},\n     \"Mean\": {},\n     \"Norm\": {},\n     \"requires_grad\": {}\n    }}",
        t.dtype,
        num(0),
        num(1),
        num(2),
        num(3),
        t.requires_grad
    );
}

/// msprobe's spelling of a dtype in dump.json.
fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "torch.float32",
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
        DType::F64 => "torch.float64",
        DType::U32 => "torch.uint32",
        DType::I64 => "torch.int64",
        DType::U8 => "torch.uint8",
        _ => "unknown",
    }
}

/// Max, Min, Mean and Norm (L2) of a tensor, accumulated in f64 and rounded to the tensor's
/// f32 as PyTorch's `.item()` of an f32 reduction gives them. None for an empty tensor.
pub fn summary(t: &Tensor) -> Option<[f64; 4]> {
    let mut acc = Acc::default();
    let (s, l) = t.storage_and_layout();
    match (&*s, l.contiguous_offsets()) {
        (Storage::Cpu(CpuStorage::F32(v)), Some((a, b))) => acc.add_f32(&v[a..b]),
        (Storage::Cpu(CpuStorage::U32(v)), Some((a, b))) => {
            v[a..b].iter().for_each(|x| acc.add(f64::from(*x)))
        }
        _ => {
            drop(s);
            let v = t
                .flatten_all()
                .and_then(|f| f.to_dtype(DType::F64))
                .and_then(|f| f.to_vec1::<f64>())
                .ok()?;
            v.iter().for_each(|x| acc.add(*x));
        }
    }
    acc.finish()
}

/// Running Max, Min, sum and sum of squares (f64), over 8 independent lanes so that the loop
/// vectorises.
struct Acc {
    n: u64,
    max: f64,
    min: f64,
    sum: f64,
    sq: f64,
}

impl Default for Acc {
    fn default() -> Self {
        Acc {
            n: 0,
            max: f64::NEG_INFINITY,
            min: f64::INFINITY,
            sum: 0.0,
            sq: 0.0,
        }
    }
}

impl Acc {
    #[inline]
    fn add(&mut self, x: f64) {
        self.max = self.max.max(x);
        self.min = self.min.min(x);
        self.n += 1;
        self.sum += x;
        self.sq += x * x;
    }

    fn add_f32(&mut self, v: &[f32]) {
        const L: usize = 8;
        let (mut mx, mut mn, mut su, mut sq) = (
            [f32::NEG_INFINITY; L],
            [f32::INFINITY; L],
            [0f64; L],
            [0f64; L],
        );
        let mut chunks = v.chunks_exact(L);
        for c in &mut chunks {
            for i in 0..L {
                let x = c[i];
                mx[i] = mx[i].max(x);
                mn[i] = mn[i].min(x);
                let y = f64::from(x);
                su[i] += y;
                sq[i] += y * y;
            }
        }
        for i in 0..L {
            self.max = self.max.max(f64::from(mx[i]));
            self.min = self.min.min(f64::from(mn[i]));
            self.sum += su[i];
            self.sq += sq[i];
        }
        self.n += (v.len() - chunks.remainder().len()) as u64;
        for x in chunks.remainder() {
            self.add(f64::from(*x));
        }
    }

    fn finish(&self) -> Option<[f64; 4]> {
        if self.n == 0 {
            return None;
        }
        let r = |x: f64| f64::from(x as f32);
        if self.sum.is_nan() {
            // a NaN element: PyTorch's max and min propagate it
            return Some([f64::NAN, f64::NAN, f64::NAN, r(self.sq.sqrt())]);
        }
        Some([
            r(self.max),
            r(self.min),
            r(self.sum / self.n as f64),
            r(self.sq.sqrt()),
        ])
    }
}

/// One tensor's statistics, as msprobe's `statistics` task writes them.
#[cfg(test)]
fn stats(t: &Tensor) -> Stats {
    Stats {
        dtype: torch_dtype(t.dtype()),
        shape: t.dims().to_vec(),
        s: summary(t),
        requires_grad: t.track_op(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_match_their_definitions() -> candle_core::Result<()> {
        let t = Tensor::new(&[[1f32, -2.0], [3.0, 4.0]], &candle_core::Device::Cpu)?;
        let [max, min, mean, norm] = summary(&t).expect("non-empty");
        assert_eq!((max, min), (4.0, -2.0));
        assert!((mean - 1.5).abs() < 1e-7);
        assert!((norm - 30f64.sqrt()).abs() < 1e-6);
        // a strided view reads the same elements
        let col = t.narrow(1, 1, 1)?;
        assert_eq!(summary(&col).expect("non-empty")[0], 4.0);
        assert_eq!(summary(&col).expect("non-empty")[1], -2.0);
        Ok(())
    }

    #[test]
    fn dump_json_keeps_call_order_and_msprobe_key_order() -> candle_core::Result<()> {
        let dir = tempfile::tempdir().map_err(candle_core::Error::wrap)?;
        let t = Tensor::new(&[1f32, 2.0], &candle_core::Device::Cpu)?;
        let e = |name: &str, forward: bool| Entry {
            name: name.into(),
            forward,
            input: Some(vec![Some(stats(&t))]),
            output: Some(vec![Some(stats(&t)), None]),
        };
        let d = Dump {
            dir: dir.path().to_path_buf(),
            cfg: MsprobeConfig {
                path: PathBuf::new(),
                task: rlprof_profiler::plan::MsprobeTask::Statistics,
                level: rlprof_profiler::plan::MsprobeLevel::L1,
                ranks: vec![],
                steps: vec![],
                scope: vec![],
                list: vec![],
                data_mode: vec!["all".into()],
                summary_mode: "statistics".into(),
            },
            entries: vec![
                e("Tensor.__mul__.0.forward", true),
                e("Functional.linear.0.backward", false),
            ],
            modules: vec!["model.layers.0".into(), String::new()],
            counters: HashMap::new(),
            calls: vec![],
            in_scope: false,
            names: HashMap::new(),
            current: 0,
            seen: HashMap::new(),
        };
        d.write().map_err(candle_core::Error::wrap)?;
        let text = std::fs::read_to_string(dir.path().join("dump.json"))
            .map_err(candle_core::Error::wrap)?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(candle_core::Error::wrap)?;
        assert_eq!(
            v["data"]["Tensor.__mul__.0.forward"]["input_args"][0]["Max"],
            2.0
        );
        assert_eq!(
            v["data"]["Functional.linear.0.backward"]["output"][1],
            serde_json::Value::Null
        );
        // call order, and msprobe's key order within a tensor
        assert!(text.find("Tensor.__mul__").unwrap() < text.find("Functional.linear").unwrap());
        let keys = [
            "\"type\"",
            "\"dtype\"",
            "\"shape\"",
            "\"Max\"",
            "\"Min\"",
            "\"Mean\"",
            "\"Norm\"",
            "\"requires_grad\"",
        ];
        let pos: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{text}");
        let stack: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("stack.json"))
                .map_err(candle_core::Error::wrap)?,
        )
        .map_err(candle_core::Error::wrap)?;
        assert_eq!(stack["0"][0][0], "Tensor.__mul__.0.forward");
        assert_eq!(stack["0"][1][0], "File rlprof, in model.layers.0");
        Ok(())
    }

    #[test]
    fn a_nan_propagates_to_max_min_and_mean_as_in_pytorch() -> candle_core::Result<()> {
        let t = Tensor::new(
            &[1f32, f32::NAN, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0],
            &candle_core::Device::Cpu,
        )?;
        let s = summary(&t).expect("non-empty");
        assert!(s[0].is_nan() && s[1].is_nan() && s[2].is_nan());
        assert_eq!(py_float(s[0]), "NaN");
        let t = Tensor::new(
            &[1f32, -5.0, 3.0, 0.5, 0.25, 0.0, 7.0, 2.0, 9.0, -1.0, 4.0],
            &candle_core::Device::Cpu,
        )?;
        let [max, min, mean, _] = summary(&t).expect("non-empty");
        assert_eq!((max, min), (9.0, -5.0));
        assert!((mean - 20.75 / 11.0).abs() < 1e-6);
        Ok(())
    }

    #[test]
    fn api_names_follow_msprobe() {
        assert_eq!(api_name("linear"), "Functional.linear");
        assert_eq!(api_name("add"), "Tensor.__add__");
        assert_eq!(api_name("matmul"), "Torch.matmul");
        assert_eq!(api_name("silu_mul"), "Functional.silu_mul");
    }
}
