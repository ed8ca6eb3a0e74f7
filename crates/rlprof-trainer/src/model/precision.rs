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
//! on the tensors the op read and wrote. A fused kernel of ours is written as the PyTorch calls
//! it stands for ([`expand`]), with the intermediate tensors PyTorch would materialise computed
//! here (only while dumping), so that `msprobe compare` pairs our dump row by row with msprobe's
//! dump of a PyTorch model of the same architecture (`scripts/torch_reference_model.py`, which
//! reruns a stage from the inputs [`golden`] captures).
//!
//! Cost when no stage dumps: [`on`] is one relaxed atomic load, and the op layer branches on it.

mod golden;

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
    /// Forward calls by id (id = index + 1).
    calls: Vec<Call>,
    /// msprobe's `scope` range state.
    in_scope: bool,
    /// Cache of op names by op name id.
    names: HashMap<u32, String>,
    /// The forward call now running (its id), for the autograd tag.
    current: u32,
    /// Statistics of the op outputs seen in this dump, by tensor id: an op's output is
    /// usually the next op's input, and a tensor an op created never changes.
    seen: HashMap<candle_core::TensorId, Option<[f64; 4]>>,
    /// The inputs a PyTorch reference needs to rerun the dumped calls (see [`golden`]), when
    /// `RLPROF_PRECISION_GOLDEN` is set.
    golden: Option<golden::Capture>,
}

/// One forward call: its op and the `{api}.{n}` prefix its backward entry takes (empty until
/// the forward entry is written, for an op that [`expand`] rewrites).
#[derive(Clone)]
struct Call {
    op: String,
    prefix: String,
}

/// One tensor's statistics, as msprobe's `statistics` task writes them.
struct Stats {
    dtype: &'static str,
    shape: Vec<usize>,
    /// Max, Min, Mean, Norm (None: empty tensor).
    s: Option<[f64; 4]>,
    requires_grad: bool,
    /// An integer tensor: msprobe writes its Mean and Norm as null.
    int: bool,
}

/// One argument or result of a dump.json entry: a tensor's statistics or a Python scalar as
/// msprobe writes it (`{"type": "int", "value": -1}`), or `null`.
enum Arg {
    T(Stats),
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
}

/// One dump.json entry: forward (`input_args`, `input_kwargs`, `output`) or backward (`input`,
/// `output`); a side left out by `data_mode` is None.
struct Entry {
    name: String,
    forward: bool,
    input: Option<Vec<Arg>>,
    output: Option<Vec<Arg>>,
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
        golden: golden::wanted().then(golden::Capture::default),
    };
    HINT.with(|h| h.borrow_mut().take());
    let fresh = DUMP.with(|c| c.borrow_mut().replace(d).is_none());
    if fresh {
        DUMPING.fetch_add(1, Ordering::Relaxed);
        StageDump(Some(()))
    } else {
        StageDump(None)
    }
}

/// msprobe's name of the PyTorch API an op of ours stands for. Ops that are one PyTorch API
/// take its name; fused ops of ours are `Functional.<op>` (the name of their backward entry;
/// their forward entries are the PyTorch calls [`expand`] writes, where it has a mapping).
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

/// Dump-only arguments of the next traced op: what its PyTorch form takes and the op's own
/// inputs do not show (the addend fused into a gemm, RMSNorm's epsilon, RoPE's sine table,
/// the attention mask, ...). Set by the op layer just before the op, only when [`on`].
pub enum Hint {
    /// `linear`'s fused addend: its bias (`F.linear(x, w, b)`).
    Bias(Tensor),
    /// `linear`'s fused addend: the residual stream (`r + F.linear(x, w)`).
    Residual(Tensor),
    /// `rms_norm`'s epsilon.
    Eps(f64),
    /// `rope`'s sine table (first half, as the cosine input).
    Sin(Tensor),
    /// `attention`'s additive mask `[B, 1, T, Tk]`.
    Mask(Tensor),
    /// `embedding`'s token ids as `[B, T]`.
    Rows(usize, usize),
    /// `log_softmax_gather`'s temperature.
    Temp(f32),
}

thread_local! {
    static HINT: RefCell<Option<Hint>> = const { RefCell::new(None) };
}

/// Gives the next traced op its dump-only arguments (`h` runs only when dumping).
#[inline]
pub fn hint(h: impl FnOnce() -> Hint) {
    if on() {
        HINT.with(|c| *c.borrow_mut() = Some(h()));
    }
}

/// Keeps the weights a dumped stage runs with, and its model config, for a PyTorch reference
/// (only with `RLPROF_PRECISION_GOLDEN` set; see [`golden`]). `f` runs only then.
pub fn golden_weights(f: impl FnOnce() -> (String, Vec<(String, Tensor)>)) {
    if !on() {
        return;
    }
    DUMP.with(|c| {
        if let Some(g) = c.borrow_mut().as_mut().and_then(|d| d.golden.as_mut()) {
            let (model, weights) = f();
            g.weights(model, weights);
        }
    });
}

/// Ops whose entries [`expand`] writes as the PyTorch calls they stand for.
fn expands(op: &str) -> bool {
    matches!(
        op,
        "linear"
            | "embedding"
            | "rms_norm"
            | "rope"
            | "attention"
            | "silu_mul"
            | "index_select"
            | "log_softmax_gather"
    )
}

/// Called by `traced` before a forward op runs (only when [`on`]): the call's id (0 when this
/// thread is not dumping), also the current call that [`current`] gives the autograd tag.
pub(crate) fn enter(name: NameId) -> u32 {
    DUMP.with(|c| {
        let mut b = c.borrow_mut();
        let Some(d) = b.as_mut() else { return 0 };
        let op = d
            .names
            .entry(name.0)
            .or_insert_with(|| resolve(name).as_deref().unwrap_or("op").to_string())
            .clone();
        // an expanded op takes its numbers when its entries are written (after the op ran,
        // which runs no other traced op)
        let prefix = if expands(&op) {
            String::new()
        } else {
            d.next(&api_name(&op))
        };
        d.calls.push(Call { op, prefix });
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

/// Called by `traced` after forward call `id` ran: its entries.
pub(crate) fn forward(id: u32, module: NameId, inputs: &[&Tensor], out: Option<&Tensor>) {
    let hint = HINT.with(|h| h.borrow_mut().take());
    DUMP.with(|c| {
        let mut b = c.borrow_mut();
        let Some(d) = b.as_mut() else { return };
        d.current = 0;
        let Some(call) = d.calls.get(id as usize - 1).cloned() else {
            return;
        };
        let module = resolve(module).map_or_else(String::new, |s| s.to_string());
        let records = if call.prefix.is_empty() {
            if let Some(g) = d.golden.as_mut() {
                g.capture(&call.op, inputs, out, hint.as_ref());
            }
            match out.map(|o| expand(&call.op, inputs, o, hint.as_ref())) {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    tracing::warn!("precision_debugger: {} not expanded: {e}", call.op);
                    vec![Rec::plain(api_name(&call.op), inputs, out)]
                }
                None => vec![Rec::plain(api_name(&call.op), inputs, out)],
            }
        } else {
            vec![Rec::plain(String::new(), inputs, out)]
        };
        let primary = primary_api(&call.op);
        let mut backward_prefix = None;
        for r in records {
            let prefix = if call.prefix.is_empty() {
                d.next(&r.api)
            } else {
                call.prefix.clone()
            };
            if r.api == primary {
                backward_prefix = Some(prefix.clone());
            }
            d.record(&prefix, &module, &r);
        }
        if call.prefix.is_empty() {
            // the backward entry of an expanded op: its primary PyTorch call's, else its own
            // (`Functional.rms_norm.{n}`)
            let p = match backward_prefix {
                Some(p) => p,
                None => d.next(&api_name(&call.op)),
            };
            d.calls[id as usize - 1].prefix = p;
        }
    });
}

/// The PyTorch call of an expanded op whose number its backward entry takes ("": none).
fn primary_api(op: &str) -> &'static str {
    match op {
        "linear" => "Functional.linear",
        "embedding" => "Functional.embedding",
        "attention" => "Functional.scaled_dot_product_attention",
        "index_select" => "Torch.index_select",
        _ => "",
    }
}

/// Called by a backward node of forward call `id`: `grad` is the gradient of its output
/// (msprobe's backward `input`), `grads` the gradients of its inputs (its `output`).
pub(crate) fn backward(id: u32, grad: &Tensor, grads: &[Option<&Tensor>]) {
    DUMP.with(|c| {
        let mut b = c.borrow_mut();
        let Some(d) = b.as_mut() else { return };
        let Some(call) = d.calls.get(id as usize - 1).cloned() else {
            return;
        };
        let name = format!("{}.backward", call.prefix);
        if !d.wants(&name, false) {
            return;
        }
        let input = d.mode("input").then(|| vec![Arg::T(d.stats(grad, false))]);
        let output = d.mode("output").then(|| {
            grads
                .iter()
                .map(|g| g.map_or(Arg::Null, |t| Arg::T(d.stats(t, true))))
                .collect()
        });
        d.entries.push(Entry {
            name,
            forward: false,
            input,
            output,
        });
        d.modules.push(String::new());
    });
}

/// One argument of a [`Rec`].
enum RecArg {
    T(Tensor),
    /// A tensor written with another shape: a permutation of its dimensions, whose statistics
    /// are those of the tensor itself (read in place, not copied).
    Shaped(Tensor, Vec<usize>),
    /// An f32 intermediate PyTorch would materialise, whose statistics were computed in one
    /// pass over the op's inputs without materialising it: shape, statistics, requires_grad.
    Computed(Vec<usize>, Option<[f64; 4]>, bool),
    /// A tensor no op changes while the dump lives (the attention mask): its statistics are
    /// kept by tensor id like an op output's.
    Const(Tensor),
    /// A fused RoPE table's first half `[B, T, D/2]` written as the full `[B, T, 1, D]` table
    /// holding each half twice (the same Max, Min and Mean, the Norm times sqrt(2)).
    Table(Tensor, Vec<usize>),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// One PyTorch call a dump entry is written for: its API, its positional arguments and its
/// output. `api` empty: the call's own prefix.
struct Rec {
    api: String,
    args: Vec<RecArg>,
    out: Option<RecArg>,
}

impl Rec {
    fn plain(api: String, inputs: &[&Tensor], out: Option<&Tensor>) -> Rec {
        Rec {
            api,
            args: inputs.iter().map(|t| RecArg::T((*t).clone())).collect(),
            out: out.map(|t| RecArg::T(t.clone())),
        }
    }

    fn new(api: &str, args: Vec<RecArg>, out: impl Into<RecArg>) -> Rec {
        Rec {
            api: api.into(),
            args,
            out: Some(out.into()),
        }
    }
}

impl From<Tensor> for RecArg {
    fn from(t: Tensor) -> RecArg {
        RecArg::T(t)
    }
}

/// Runs `f` on the contiguous f32 elements of `t` (copied only when `t` is strided or not on
/// the CPU).
fn with_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> candle_core::Result<R> {
    {
        let (s, l) = t.storage_and_layout();
        if let (Storage::Cpu(CpuStorage::F32(v)), Some((a, b))) = (&*s, l.contiguous_offsets()) {
            return Ok(f(&v[a..b]));
        }
    }
    let v = t.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    Ok(f(&v))
}

/// A [`RecArg::Computed`] of `acc` in shape `dims`.
fn computed(dims: &[usize], acc: &Sink, grad: bool) -> RecArg {
    RecArg::Computed(dims.to_vec(), acc.finish(), grad)
}

/// Values of a tensor that is not materialised, buffered so that [`Acc::add_f32`]'s
/// vectorised pass reduces them.
#[derive(Default)]
struct Sink {
    acc: Acc,
    buf: Vec<f32>,
}

impl Sink {
    const CHUNK: usize = 4096;

    #[inline]
    fn push(&mut self, x: f32) {
        self.buf.push(x);
        if self.buf.len() == Self::CHUNK {
            self.acc.add_f32(&self.buf);
            self.buf.clear();
        }
    }

    fn finish(&self) -> Option<[f64; 4]> {
        let mut acc = Acc {
            n: self.acc.n,
            max: self.acc.max,
            min: self.acc.min,
            sum: self.acc.sum,
            sq: self.acc.sq,
        };
        acc.add_f32(&self.buf);
        acc.finish()
    }
}

/// An index tensor as the int64 PyTorch's index APIs take (ours are u32), in shape `dims`.
fn as_index(t: &Tensor, dims: &[usize]) -> candle_core::Result<Tensor> {
    t.to_dtype(DType::I64)?.reshape(dims)
}

/// The PyTorch calls a fused op of ours stands for, with the intermediate tensors PyTorch would
/// produce, computed here (only while dumping) from the op's inputs; the last call's output is
/// the op's own output. The mapping (docs/precision-debugger.md):
///
/// - `linear` -> `Functional.linear(x, w[, b])`, plus `Tensor.__add__(r, y)` for a fused
///   residual;
/// - `embedding` -> `Functional.embedding(ids, w)`;
/// - `rms_norm` -> `Tensor.pow(x, 2)`, `Tensor.mean(., -1, True)`, `Tensor.__add__(., eps)`,
///   `Torch.rsqrt`, `Tensor.__mul__(x, .)`, `Tensor.__mul__(w, .)` (Hugging Face's RMSNorm);
/// - `rope` -> `Tensor.__mul__(x, cos)`, `Tensor.__mul__(rotate_half(x), sin)`,
///   `Tensor.__add__` (rotate_half's `torch.cat` is not recorded by msprobe 26.2 on CPU);
/// - `attention` -> `Functional.scaled_dot_product_attention(q, k, v, mask)` on `[B, H, T, D]`;
/// - `silu_mul` -> `Functional.silu(g)`, `Tensor.__mul__(., u)`;
/// - `index_select` -> `Torch.index_select(x, 0, idx)`;
/// - `log_softmax_gather` -> [`Tensor.__truediv__(logits, temperature)`],
///   `Functional.log_softmax(., -1)`, `Torch.gather(., -1, targets[..., None])`.
fn expand(
    op: &str,
    inputs: &[&Tensor],
    out: &Tensor,
    hint: Option<&Hint>,
) -> candle_core::Result<Vec<Rec>> {
    use RecArg::{Bool, Float, Int, T};
    let arg = |i: usize| -> candle_core::Result<Tensor> {
        inputs
            .get(i)
            .map(|t| (*t).clone())
            .ok_or_else(|| candle_core::Error::Msg(format!("{op}: input {i} missing")))
    };
    let o = out.clone();
    let grad = out.track_op();
    Ok(match op {
        "linear" => {
            let (x, w) = (arg(0)?, arg(1)?);
            match hint {
                Some(Hint::Bias(b)) => {
                    vec![Rec::new(
                        "Functional.linear",
                        vec![T(x), T(w), T(b.clone())],
                        o,
                    )]
                }
                Some(Hint::Residual(r)) => {
                    // y = out - residual: the gemm added the residual in its accumulator
                    // (recomputing y would double the gemm's cost while dumping)
                    let mut acc = Sink::default();
                    with_f32(&o, |ov| {
                        with_f32(r, |rv| ov.iter().zip(rv).for_each(|(a, b)| acc.push(a - b)))
                    })??;
                    let y = computed(o.dims(), &acc, grad);
                    let y2 = computed(o.dims(), &acc, grad);
                    vec![
                        Rec::new("Functional.linear", vec![T(x), T(w)], y),
                        Rec::new("Tensor.__add__", vec![T(r.clone()), y2], o),
                    ]
                }
                _ => vec![Rec::new("Functional.linear", vec![T(x), T(w)], o)],
            }
        }
        "embedding" => {
            let (w, ids) = (arg(0)?, arg(1)?);
            let (b, t) = match hint {
                Some(Hint::Rows(b, t)) => (*b, *t),
                _ => (1, ids.elem_count()),
            };
            let h = w.dim(1)?;
            vec![Rec::new(
                "Functional.embedding",
                vec![T(as_index(&ids, &[b, t])?), T(w)],
                o.reshape((b, t, h))?,
            )]
        }
        "rms_norm" => {
            let (x, w) = (arg(0)?, arg(1)?);
            let eps = match hint {
                Some(Hint::Eps(e)) => *e,
                _ => candle_core::bail!("rms_norm: no epsilon"),
            };
            // one pass per row: x^2, its mean, + eps, rsqrt, x * rsqrt
            let h = x.dim(candle_core::D::Minus1)?;
            let [mut sq, mut ms, mut ad, mut rs, mut xn]: [Sink; 5] = Default::default();
            with_f32(&x, |xv| {
                for row in xv.chunks_exact(h.max(1)) {
                    let mut sum = 0f64;
                    for &v in row {
                        let s = v * v;
                        sq.push(s);
                        sum += f64::from(s);
                    }
                    let m = (sum / h as f64) as f32;
                    let e = m + eps as f32;
                    let r = 1.0 / e.sqrt();
                    ms.push(m);
                    ad.push(e);
                    rs.push(r);
                    row.iter().for_each(|&v| xn.push(v * r));
                }
            })?;
            let full = x.dims().to_vec();
            let mut one = full.clone();
            if let Some(l) = one.last_mut() {
                *l = 1;
            }
            vec![
                Rec::new(
                    "Tensor.pow",
                    vec![T(x.clone()), Int(2)],
                    computed(&full, &sq, grad),
                ),
                Rec::new(
                    "Tensor.mean",
                    vec![computed(&full, &sq, grad), Int(-1), Bool(true)],
                    computed(&one, &ms, grad),
                ),
                Rec::new(
                    "Tensor.__add__",
                    vec![computed(&one, &ms, grad), Float(eps)],
                    computed(&one, &ad, grad),
                ),
                Rec::new(
                    "Torch.rsqrt",
                    vec![computed(&one, &ad, grad)],
                    computed(&one, &rs, grad),
                ),
                Rec::new(
                    "Tensor.__mul__",
                    vec![T(x), computed(&one, &rs, grad)],
                    computed(&full, &xn, grad),
                ),
                Rec::new("Tensor.__mul__", vec![T(w), computed(&full, &xn, grad)], o),
            ]
        }
        "rope" => {
            let (x, c) = (arg(0)?, arg(1)?);
            let s = match hint {
                Some(Hint::Sin(s)) => s.clone(),
                _ => candle_core::bail!("rope: no sine table"),
            };
            // x `[B, T, H, D]`, tables `[B, T, D/2]`: x * cos, rotate_half(x), rotate_half(x) * sin
            // in one pass; the full tables `[B, T, 1, D]` hold each half twice
            let (b, _, h, d) = x.dims4()?;
            let half = d / 2;
            let (mut xa, mut rot, mut xb) = (Sink::default(), Sink::default(), Sink::default());
            with_f32(&x, |xv| {
                with_f32(&c, |cv| {
                    with_f32(&s, |sv| {
                        for (i, head) in xv.chunks_exact(d.max(1)).enumerate() {
                            let bt = i / h.max(1);
                            let (cr, sr) = (&cv[bt * half..][..half], &sv[bt * half..][..half]);
                            for j in 0..d {
                                let (k, r) = if j < half {
                                    (j, -head[j + half])
                                } else {
                                    (j - half, head[j - half])
                                };
                                xa.push(head[j] * cr[k]);
                                rot.push(r);
                                xb.push(r * sr[k]);
                            }
                        }
                    })
                })
            })???;
            let table = |t: &Tensor| -> candle_core::Result<RecArg> {
                Ok(RecArg::Table(t.clone(), vec![b, t.dim(1)?, 1, d]))
            };
            let full = x.dims().to_vec();
            vec![
                Rec::new(
                    "Tensor.__mul__",
                    vec![T(x), table(&c)?],
                    computed(&full, &xa, grad),
                ),
                Rec::new(
                    "Tensor.__mul__",
                    vec![computed(&full, &rot, grad), table(&s)?],
                    computed(&full, &xb, grad),
                ),
                Rec::new(
                    "Tensor.__add__",
                    vec![computed(&full, &xa, grad), computed(&full, &xb, grad)],
                    o,
                ),
            ]
        }
        "attention" => {
            // `[B, T, H, D]` written as SDPA's `[B, H, T, D]`
            let heads_first = |t: Tensor| -> candle_core::Result<RecArg> {
                let (b, l, h, d) = t.dims4()?;
                Ok(RecArg::Shaped(t, vec![b, h, l, d]))
            };
            let mut args = vec![
                heads_first(arg(0)?)?,
                heads_first(arg(1)?)?,
                heads_first(arg(2)?)?,
            ];
            if let Some(Hint::Mask(m)) = hint {
                args.push(RecArg::Const(m.clone()));
            }
            let out = heads_first(o)?;
            vec![Rec::new(
                "Functional.scaled_dot_product_attention",
                args,
                out,
            )]
        }
        "silu_mul" => {
            let (g, u) = (arg(0)?, arg(1)?);
            let mut acc = Sink::default();
            with_f32(&g, |gv| {
                gv.iter().for_each(|&v| acc.push(v / (1.0 + (-v).exp())))
            })?;
            vec![
                Rec::new(
                    "Functional.silu",
                    vec![T(g.clone())],
                    computed(g.dims(), &acc, grad),
                ),
                Rec::new(
                    "Tensor.__mul__",
                    vec![computed(g.dims(), &acc, grad), T(u)],
                    o,
                ),
            ]
        }
        "index_select" => {
            let (x, idx) = (arg(0)?, arg(1)?);
            let n = idx.elem_count();
            vec![Rec::new(
                "Torch.index_select",
                vec![T(x), Int(0), T(as_index(&idx, &[n])?)],
                o,
            )]
        }
        "log_softmax_gather" => {
            let (logits, targets) = (arg(0)?, arg(1)?);
            let mut recs = Vec::new();
            let mut l = logits;
            if let Some(Hint::Temp(t)) = hint
                && (*t - 1.0).abs() > f32::EPSILON
            {
                let scaled = l.affine(1.0 / f64::from(*t), 0.0)?;
                recs.push(Rec::new(
                    "Tensor.__truediv__",
                    vec![T(l), Float(f64::from(*t))],
                    scaled.clone(),
                ));
                l = scaled;
            }
            let lsm = candle_nn::ops::log_softmax(&l, candle_core::D::Minus1)?;
            let mut dims = targets.dims().to_vec();
            dims.push(1);
            recs.push(Rec::new(
                "Functional.log_softmax",
                vec![T(l), Int(-1)],
                lsm.clone(),
            ));
            recs.push(Rec::new(
                "Torch.gather",
                vec![T(lsm), Int(-1), T(as_index(&targets, &dims)?)],
                o.reshape(dims)?,
            ));
            recs
        }
        other => candle_core::bail!("no expansion for {other}"),
    })
}

/// A fused RoPE table's first half `[B, T, D/2]` as the full `[B, T, 1, D]` table PyTorch's
/// rotate-half form multiplies by (both halves hold the same frequencies).
fn full_table(half: &Tensor) -> candle_core::Result<Tensor> {
    let full = Tensor::cat(&[half, half], candle_core::D::Minus1)?;
    let (b, t, d) = full.dims3()?;
    full.reshape((b, t, 1, d))
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
    /// The next `{api}.{n}` prefix (msprobe's per-API call counter).
    fn next(&mut self, api: &str) -> String {
        let n = self.counters.entry(api.to_string()).or_insert(0);
        let prefix = format!("{api}.{n}");
        *n += 1;
        prefix
    }

    /// The forward entry `{prefix}.forward` of call `r`, when the configuration wants it.
    fn record(&mut self, prefix: &str, module: &str, r: &Rec) {
        let name = format!("{prefix}.forward");
        if !self.wants(&name, true) {
            return;
        }
        let input = self
            .mode("input")
            .then(|| r.args.iter().map(|a| self.arg(a, false)).collect());
        let output = self
            .mode("output")
            .then(|| r.out.iter().map(|a| self.arg(a, true)).collect());
        self.entries.push(Entry {
            name,
            forward: true,
            input,
            output,
        });
        self.modules.push(module.to_string());
    }

    /// The dump.json form of argument `a` (`created`: an op output, see [`Dump::stats`]).
    fn arg(&mut self, a: &RecArg, created: bool) -> Arg {
        match a {
            RecArg::T(t) => Arg::T(self.stats(t, created)),
            RecArg::Shaped(t, shape) => {
                let mut s = self.stats(t, created);
                s.shape.clone_from(shape);
                Arg::T(s)
            }
            RecArg::Computed(shape, s, grad) => Arg::T(Stats {
                dtype: "torch.float32",
                shape: shape.clone(),
                s: *s,
                requires_grad: *grad,
                int: false,
            }),
            RecArg::Const(t) => Arg::T(self.stats(t, true)),
            RecArg::Table(t, shape) => {
                let mut s = self.stats(t, true);
                s.shape.clone_from(shape);
                s.s = s.s.map(|[mx, mn, mean, norm]| {
                    [
                        mx,
                        mn,
                        mean,
                        f64::from((norm * std::f64::consts::SQRT_2) as f32),
                    ]
                });
                Arg::T(s)
            }
            RecArg::Int(i) => Arg::Int(*i),
            RecArg::Float(x) => Arg::Float(*x),
            RecArg::Bool(b) => Arg::Bool(*b),
        }
    }

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
            int: !t.dtype().is_float(),
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
        write("construct.json", "{}")?;
        match &self.golden {
            Some(g) => g.write(&self.dir),
            None => Ok(()),
        }
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
    let mut side = |out: &mut String, key: &str, v: &Option<Vec<Arg>>| {
        let Some(list) = v else { return };
        out.push_str(if first { "\n" } else { ",\n" });
        first = false;
        let _ = write!(out, "   \"{key}\": [");
        for (i, t) in list.iter().enumerate() {
            out.push_str(if i == 0 { "\n" } else { ",\n" });
            match t {
                Arg::Null => out.push_str("    null"),
                Arg::T(t) => write_stats(out, t),
                Arg::Int(i) => {
                    let _ = write!(
                        out,
                        "    {{\n     \"type\": \"int\",\n     \"value\": {i}\n    }}"
                    );
                }
                Arg::Float(x) => {
                    let _ = write!(
                        out,
                        "    {{\n     \"type\": \"float\",\n     \"value\": {}\n    }}",
                        py_float(*x)
                    );
                }
                Arg::Bool(b) => {
                    let v = if *b { "true" } else { "false" };
                    let _ = write!(
                        out,
                        "    {{\n     \"type\": \"bool\",\n     \"value\": {v}\n    }}"
                    );
                }
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
    // msprobe writes an integer tensor's Mean and Norm as null
    let num = |i: usize| match t.s {
        Some(s) if t.int && i < 2 && s[i].is_finite() => format!("{}", s[i] as i64),
        Some(s) if !(t.int && i >= 2) => py_float(s[i]),
        _ => "null".to_string(),
    };
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
    if t.dtype() == DType::F32 && !t.is_contiguous() && t.device().is_cpu() {
        // a strided f32 view: one copy, then the vectorised pass
        return summary(&t.contiguous().ok()?);
    }
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

/// Running Max, Min, sum and sum of squares (f64; a contiguous f32 run is summed over 16
/// independent f32 lanes in blocks, see [`Acc::add_f32`], so that the loop vectorises).
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
        const L: usize = 16;
        // f32 partial sums over blocks of 64 values per lane, the blocks added in f64: the
        // loop runs 16 f32 lanes wide, and the f32 rounding stays within ~64 ulps of a block
        const BLOCK: usize = 64 * L;
        let (mut mx, mut mn, mut su, mut sq) = (
            [f32::NEG_INFINITY; L],
            [f32::INFINITY; L],
            [0f64; L],
            [0f64; L],
        );
        let full = v.len() - v.len() % L;
        for block in v[..full].chunks(BLOCK) {
            let (mut bs, mut bq) = ([0f32; L], [0f32; L]);
            for c in block.chunks_exact(L) {
                for i in 0..L {
                    let x = c[i];
                    mx[i] = mx[i].max(x);
                    mn[i] = mn[i].min(x);
                    bs[i] += x;
                    bq[i] += x * x;
                }
            }
            for i in 0..L {
                su[i] += f64::from(bs[i]);
                sq[i] += f64::from(bq[i]);
            }
        }
        for i in 0..L {
            self.max = self.max.max(f64::from(mx[i]));
            self.min = self.min.min(f64::from(mn[i]));
            self.sum += su[i];
            self.sq += sq[i];
        }
        self.n += full as u64;
        for x in &v[full..] {
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
        int: !t.dtype().is_float(),
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
            input: Some(vec![Arg::T(stats(&t)), Arg::Int(-1)]),
            output: Some(vec![Arg::T(stats(&t)), Arg::Null]),
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
            golden: None,
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
        // a Python scalar argument, as msprobe writes one
        assert_eq!(
            v["data"]["Tensor.__mul__.0.forward"]["input_args"][1],
            serde_json::json!({"type": "int", "value": -1})
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

    fn names(recs: &[Rec]) -> Vec<&str> {
        recs.iter().map(|r| r.api.as_str()).collect()
    }

    fn close(a: &Tensor, b: &Tensor) -> candle_core::Result<()> {
        let d = a.sub(b)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(d < 1e-5, "{a} vs {b}");
        Ok(())
    }

    fn tensor(a: &RecArg) -> &Tensor {
        match a {
            RecArg::T(t) | RecArg::Shaped(t, _) => t,
            _ => panic!("not a tensor"),
        }
    }

    /// The statistics an argument is written with.
    fn stat(a: &RecArg) -> [f64; 4] {
        match a {
            RecArg::T(t) | RecArg::Shaped(t, _) => summary(t).expect("non-empty"),
            RecArg::Computed(_, s, _) => s.expect("non-empty"),
            RecArg::Const(t) => summary(t).expect("non-empty"),
            RecArg::Table(t, _) => {
                let [mx, mn, mean, norm] = summary(t).expect("non-empty");
                [mx, mn, mean, norm * std::f64::consts::SQRT_2]
            }
            _ => panic!("not a tensor"),
        }
    }

    /// `a` holds the statistics of `t`.
    fn stats_of(a: &RecArg, t: &Tensor) -> candle_core::Result<()> {
        let (x, y) = (stat(a), summary(t).expect("non-empty"));
        for (p, q) in x.iter().zip(&y) {
            assert!((p - q).abs() <= 1e-5 * (1.0 + q.abs()), "{x:?} vs {y:?}");
        }
        Ok(())
    }

    fn out(r: &Rec) -> &RecArg {
        r.out.as_ref().expect("an output")
    }

    #[test]
    fn fused_ops_expand_to_the_pytorch_calls_they_stand_for() -> candle_core::Result<()> {
        let dev = candle_core::Device::Cpu;
        // silu_mul: F.silu(g) * u
        let g = Tensor::new(&[[1f32, -2.0, 0.5]], &dev)?;
        let u = Tensor::new(&[[3f32, 1.0, -1.0]], &dev)?;
        let o = super::super::kernels::silu_mul(&g, &u)?;
        let r = expand("silu_mul", &[&g, &u], &o, None)?;
        assert_eq!(names(&r), ["Functional.silu", "Tensor.__mul__"]);
        let silu = g.mul(&candle_nn::ops::sigmoid(&g)?)?;
        stats_of(out(&r[0]), &silu)?;
        stats_of(&r[1].args[0], &silu)?;
        close(&silu.mul(&u)?, tensor(out(&r[1])))?;
        // a gemm with a fused residual: F.linear(x, w), then residual + y
        let x = Tensor::new(&[[[1f32, 2.0, 3.0], [0.5, -1.0, 2.0]]], &dev)?;
        let w = Tensor::new(&[[0.1f32, 0.2, 0.3], [-0.5, 0.25, 1.0]], &dev)?;
        let res = Tensor::new(&[[[10f32, 20.0], [-3.0, 4.0]]], &dev)?;
        let o = super::super::kernels::linear(&x, &w, Some(&res))?;
        let r = expand("linear", &[&x, &w], &o, Some(&Hint::Residual(res.clone())))?;
        assert_eq!(names(&r), ["Functional.linear", "Tensor.__add__"]);
        stats_of(out(&r[0]), &x.broadcast_matmul(&w.t()?)?)?;
        assert_eq!(
            tensor(&r[1].args[0]).id(),
            res.id(),
            "the residual comes first"
        );
        // RMSNorm: Hugging Face's six calls, the last one's output the kernel's
        let wn = Tensor::new(&[0.5f32, 1.0, 2.0], &dev)?;
        let o = candle_nn::ops::rms_norm(&x, &wn, 1e-6)?;
        let r = expand("rms_norm", &[&x, &wn], &o, Some(&Hint::Eps(1e-6)))?;
        assert_eq!(
            names(&r),
            [
                "Tensor.pow",
                "Tensor.mean",
                "Tensor.__add__",
                "Torch.rsqrt",
                "Tensor.__mul__",
                "Tensor.__mul__"
            ]
        );
        stats_of(out(&r[0]), &x.sqr()?)?;
        let ms = x.sqr()?.mean_keepdim(2)?;
        stats_of(out(&r[1]), &ms)?;
        assert!(matches!(
            r[1].args[1..],
            [RecArg::Int(-1), RecArg::Bool(true)]
        ));
        let rs = ms.affine(1.0, 1e-6)?.sqrt()?.recip()?;
        stats_of(out(&r[3]), &rs)?;
        stats_of(out(&r[4]), &x.broadcast_mul(&rs)?)?;
        assert_eq!(tensor(out(&r[5])).id(), o.id(), "the kernel's output");
        // RoPE: x * cos + rotate_half(x) * sin, tables doubled to [B, T, 1, D]
        let q = Tensor::new(&[[[[1f32, 2.0, 3.0, 4.0]], [[-1.0, 0.5, 2.0, 0.0]]]], &dev)?;
        let c = Tensor::new(&[[[0.5f32, 1.0], [0.25, -0.5]]], &dev)?;
        let sn = Tensor::new(&[[[0.1f32, 0.2], [0.3, 0.4]]], &dev)?;
        let o = super::super::kernels::rope_bthd(&q, &c, &sn)?;
        let r = expand("rope", &[&q, &c], &o, Some(&Hint::Sin(sn.clone())))?;
        assert_eq!(
            names(&r),
            ["Tensor.__mul__", "Tensor.__mul__", "Tensor.__add__"]
        );
        let cos = full_table(&c)?;
        let sin = full_table(&sn)?;
        stats_of(&r[0].args[1], &cos)?;
        let rot = Tensor::cat(&[&q.narrow(3, 2, 2)?.neg()?, &q.narrow(3, 0, 2)?], 3)?;
        stats_of(out(&r[0]), &q.broadcast_mul(&cos)?)?;
        stats_of(&r[1].args[0], &rot)?;
        stats_of(out(&r[1]), &rot.broadcast_mul(&sin)?)?;
        close(
            &q.broadcast_mul(&cos)?.add(&rot.broadcast_mul(&sin)?)?,
            tensor(out(&r[2])),
        )?;
        // log-softmax + gather: int64 targets [B, R, 1]
        let logits = Tensor::new(&[[[1f32, 2.0, 3.0], [0.0, 0.0, 1.0]]], &dev)?;
        let targets = Tensor::new(&[[2u32, 0]], &dev)?;
        let o = super::super::kernels::token_logprob(&logits, &targets, 1.0)?;
        let r = expand(
            "log_softmax_gather",
            &[&logits, &targets],
            &o,
            Some(&Hint::Temp(1.0)),
        )?;
        assert_eq!(names(&r), ["Functional.log_softmax", "Torch.gather"]);
        let idx = tensor(&r[1].args[2]);
        assert_eq!((idx.dtype(), idx.dims()), (DType::I64, &[1usize, 2, 1][..]));
        let lsm = tensor(out(&r[0]));
        close(
            &lsm.gather(&idx.to_dtype(DType::U32)?, 2)?,
            tensor(out(&r[1])),
        )?;
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
