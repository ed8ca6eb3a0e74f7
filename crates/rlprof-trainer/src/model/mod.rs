//! A Qwen2/Llama-family decoder (RMSNorm, RoPE, SwiGLU, grouped-query attention, tied or untied
//! embeddings) from differentiable candle ops, so that every weight gets a gradient. candle's
//! fused rms_norm / softmax / rope have no backward pass: on CPU the trainable model uses the
//! differentiable fused kernels of [`kernels`], the no-grad models candle's fused ones, and other
//! devices the composed primitives.
//!
//! Layout conventions follow verl: prompts are left-padded, responses right-padded; callers pass
//! per-token validity and the model derives position ids and the attention mask from it.

pub mod autograd;
pub mod gather;
pub mod kernels;
pub mod ops;
pub mod params;

use crate::t;
use candle_core::{D, DType, Device, Result, Tensor};
use rlprof_profiler::{NameId, intern};
use serde::{Deserialize, Serialize};

pub use params::ParamStore;

/// Hugging Face `config.json` fields this model reads (Qwen2 / Llama).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelConfig {
    /// `Qwen2ForCausalLM` or `LlamaForCausalLM`.
    #[serde(default = "default_arch")]
    pub architectures: Vec<String>,
    /// `qwen2` or `llama`.
    #[serde(default = "default_model_type")]
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden size.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// Longest position.
    #[serde(default = "default_max_pos")]
    pub max_position_embeddings: usize,
    /// RMSNorm epsilon.
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    /// RoPE base.
    #[serde(default = "default_theta")]
    pub rope_theta: f64,
    /// LM head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Biases on q/k/v (Qwen2: true; Llama: `attention_bias`).
    #[serde(default)]
    pub attention_bias: Option<bool>,
    /// BOS id.
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// EOS id.
    #[serde(default)]
    pub eos_token_id: Option<u32>,
    /// Stored dtype.
    #[serde(default = "default_dtype")]
    pub torch_dtype: String,
}

fn default_arch() -> Vec<String> {
    vec!["Qwen2ForCausalLM".into()]
}
fn default_model_type() -> String {
    "qwen2".into()
}
fn default_max_pos() -> usize {
    4096
}
fn default_eps() -> f64 {
    1e-6
}
fn default_theta() -> f64 {
    10000.0
}
fn default_dtype() -> String {
    "float32".into()
}

impl ModelConfig {
    /// Key/value heads (defaults to the query heads).
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Per-head width.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Whether q/k/v carry biases.
    pub fn qkv_bias(&self) -> bool {
        self.attention_bias.unwrap_or(self.model_type == "qwen2")
    }

    /// Every parameter: (HF name, shape), in a fixed order.
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, i, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let kv = self.kv_heads() * self.head_dim();
        let mut out = vec![("model.embed_tokens.weight".to_string(), vec![v, h])];
        for l in 0..self.num_hidden_layers {
            let p = format!("model.layers.{l}");
            out.push((format!("{p}.input_layernorm.weight"), vec![h]));
            out.push((format!("{p}.self_attn.q_proj.weight"), vec![h, h]));
            out.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
            out.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
            if self.qkv_bias() {
                out.push((format!("{p}.self_attn.q_proj.bias"), vec![h]));
                out.push((format!("{p}.self_attn.k_proj.bias"), vec![kv]));
                out.push((format!("{p}.self_attn.v_proj.bias"), vec![kv]));
            }
            out.push((format!("{p}.self_attn.o_proj.weight"), vec![h, h]));
            out.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
            out.push((format!("{p}.mlp.gate_proj.weight"), vec![i, h]));
            out.push((format!("{p}.mlp.up_proj.weight"), vec![i, h]));
            out.push((format!("{p}.mlp.down_proj.weight"), vec![h, i]));
        }
        out.push(("model.norm.weight".to_string(), vec![h]));
        if !self.tie_word_embeddings {
            out.push(("lm_head.weight".to_string(), vec![v, h]));
        }
        out
    }

    /// Number of parameters.
    pub fn num_params(&self) -> usize {
        self.param_shapes()
            .iter()
            .map(|(_, s)| s.iter().product::<usize>())
            .sum()
    }
}

/// A linear layer `y = x W^T + b` with its module path.
struct Linear {
    w: Tensor,
    b: Option<Tensor>,
    module: NameId,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_add(x, None)
    }

    /// `x W^T + b [+ residual]`: on the CPU one fused op (the residual and bias are the gemm's
    /// initial destination), elsewhere matmul and adds.
    fn forward_add(&self, x: &Tensor, residual: Option<(&Tensor, NameId)>) -> Result<Tensor> {
        let (out_f, in_f) = self.w.dims2()?;
        let dims = x.dims().to_vec();
        let rows: usize = dims[..dims.len() - 1].iter().product();
        let flops = 2 * (rows * in_f * out_f) as u64;
        if kernels::supported(x) {
            let addend = match (&self.b, residual) {
                (Some(b), None) => Some(b),
                (None, Some((r, _))) => Some(r),
                _ => None,
            };
            let mut y = t!(
                "linear",
                self.module,
                [x, &self.w],
                flops,
                kernels::linear(x, &self.w, addend)
            )?;
            if let (Some(b), Some((r, m))) = (&self.b, residual) {
                y = t!("add", self.module, [&y, b], 0, y.broadcast_add(b))?;
                y = t!("add", m, [r, &y], 0, r.add(&y))?;
            }
            return Ok(y);
        }
        let x2 = x.reshape((rows, in_f))?;
        let wt = self.w.t()?;
        let mut y = t!("matmul", self.module, [&x2, &self.w], flops, x2.matmul(&wt))?;
        if let Some(b) = &self.b {
            y = t!("add", self.module, [&y, b], 0, y.broadcast_add(b))?;
        }
        let mut out_dims = dims;
        *out_dims.last_mut().expect("rank >= 1") = out_f;
        let y = y.reshape(out_dims)?;
        match residual {
            Some((r, m)) => t!("add", m, [r, &y], 0, r.add(&y)),
            None => Ok(y),
        }
    }
}

/// RMSNorm from primitives (differentiable).
struct RmsNorm {
    w: Tensor,
    eps: f64,
    module: NameId,
    /// No-grad model: candle's fused kernel (it has no backward pass).
    fused: bool,
}

impl RmsNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let m = self.module;
        let eps = self.eps as f32;
        if self.fused {
            return t!(
                "rms_norm",
                m,
                [x, &self.w],
                0,
                candle_nn::ops::rms_norm(x, &self.w, eps)
            );
        }
        if kernels::supported(x) {
            return t!(
                "rms_norm",
                m,
                [x, &self.w],
                0,
                kernels::rms_norm(x, &self.w, eps)
            );
        }
        let sq = t!("pow", m, [x], 0, x.sqr())?;
        let ms = t!("mean", m, [&sq], 0, sq.mean_keepdim(D::Minus1))?;
        let inv = t!(
            "rsqrt",
            m,
            [&ms],
            0,
            ms.affine(1.0, self.eps)?.sqrt()?.recip()
        )?;
        let xn = t!("mul", m, [x, &inv], 0, x.broadcast_mul(&inv))?;
        t!("mul", m, [&xn, &self.w], 0, xn.broadcast_mul(&self.w))
    }
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    module: NameId,
    /// No-grad model: fused RoPE and softmax kernels.
    fused: bool,
}

struct Mlp {
    gate: Linear,
    up: Linear,
    down: Linear,
    module: NameId,
}

struct Layer {
    norm1: RmsNorm,
    attn: Attention,
    norm2: RmsNorm,
    mlp: Mlp,
}

/// Per-layer key/value cache for incremental decoding: `[B, capacity, kv_heads, head_dim]`
/// buffers written in place (no-grad models), the first `len` positions valid.
#[derive(Default)]
pub struct KvCache {
    layers: Vec<Option<LayerCache>>,
    capacity: usize,
}

struct LayerCache {
    k: CacheBuf,
    v: CacheBuf,
}

/// One cached tensor: `[B, capacity, kv_heads, head_dim]`, the first `len` positions valid.
struct CacheBuf {
    buf: Tensor,
    len: usize,
}

impl CacheBuf {
    /// Appends `x` `[B, T, kvh, hd]` and returns a view of every cached position. In place into
    /// a preallocated buffer when `in_place` (no gradient flows through a cache write), else by
    /// concatenation (tracked).
    fn append(
        slot: Option<&mut CacheBuf>,
        x: &Tensor,
        capacity: usize,
        in_place: bool,
    ) -> Result<(Tensor, Option<CacheBuf>)> {
        let (b, t, kvh, hd) = x.dims4()?;
        match slot {
            None if in_place && capacity > t => {
                let buf = Tensor::zeros((b, capacity, kvh, hd), x.dtype(), x.device())?;
                buf.slice_set(&x.contiguous()?, 1, 0)?;
                Ok((x.clone(), Some(CacheBuf { buf, len: t })))
            }
            None => Ok((
                x.clone(),
                Some(CacheBuf {
                    buf: x.clone(),
                    len: t,
                }),
            )),
            Some(c) => {
                let len = c.len + t;
                if in_place && c.buf.dim(1)? >= len && c.buf.is_contiguous() {
                    c.buf.slice_set(&x.contiguous()?, 1, c.len)?;
                } else {
                    c.buf = cat_dim1(&c.buf.narrow(1, 0, c.len)?, x)?;
                }
                c.len = len;
                Ok((c.buf.narrow(1, 0, len)?, None))
            }
        }
    }
}

impl LayerCache {
    /// Appends the new keys and values (op `kv_append` each) and returns every cached position.
    fn append(
        slot: &mut Option<LayerCache>,
        k: &Tensor,
        v: &Tensor,
        capacity: usize,
        in_place: bool,
        module: NameId,
    ) -> Result<(Tensor, Tensor)> {
        let (mut nk, mut nv) = (None, None);
        let k_all = t!("kv_append", module, [k], 0, {
            let ck = slot.as_mut().map(|c| &mut c.k);
            let (all, new) = CacheBuf::append(ck, k, capacity, in_place)?;
            nk = new;
            Ok(all)
        })?;
        let v_all = t!("kv_append", module, [v], 0, {
            let cv = slot.as_mut().map(|c| &mut c.v);
            let (all, new) = CacheBuf::append(cv, v, capacity, in_place)?;
            nv = new;
            Ok(all)
        })?;
        if let (Some(k), Some(v)) = (nk, nv) {
            *slot = Some(LayerCache { k, v });
        }
        Ok((k_all, v_all))
    }
}

impl LayerCache {
    /// Replaces the cached keys/values by rows `rows` (u32 `[B]`) of them (op `kv_expand`
    /// each): a prefix computed once per distinct prompt, handed to every row that shares it.
    /// A preallocated buffer keeps its capacity.
    fn select_rows(&mut self, rows: &Tensor, module: NameId) -> Result<()> {
        for c in [&mut self.k, &mut self.v] {
            let all = &c.buf;
            c.buf = t!("kv_expand", module, [all, rows], 0, select_rows0(all, rows))?;
        }
        Ok(())
    }
}

impl KvCache {
    /// An empty cache for `layers` layers.
    pub fn new(layers: usize) -> KvCache {
        KvCache::with_capacity(layers, 0)
    }

    /// An empty cache for `layers` layers whose buffers hold `capacity` positions (prompt +
    /// generated); past that it grows by concatenation.
    pub fn with_capacity(layers: usize, capacity: usize) -> KvCache {
        KvCache {
            layers: (0..layers).map(|_| None).collect(),
            capacity,
        }
    }

    /// Cached positions.
    pub fn len(&self) -> usize {
        self.layers
            .first()
            .and_then(|l| l.as_ref())
            .map_or(0, |c| c.k.len)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Position ids and the additive attention mask of one forward call.
pub struct Attn {
    /// `[B, T]` u32 positions of the new tokens.
    pub positions: Tensor,
    /// `[B, 1, T, T_keys]` additive mask (0 or -1e9).
    pub mask: Tensor,
    /// The same mask on the host, `[B, T, T_keys]`, for the fused CPU attention.
    host_mask: kernels::HostMask,
}

/// Mask value of a masked key (finite so fully-masked pad rows stay NaN-free).
const MASKED: f32 = -1e9;

impl Attn {
    /// For a full pass over `[B, L]` tokens with validity `valid` (row-major, 1 = real token).
    pub fn full(valid: &[Vec<bool>], device: &Device) -> Result<Attn> {
        Attn::rows(valid, 0, device)
    }

    /// Query positions `start..L` of the full pass over `valid` (keys: every position `0..L`),
    /// for a pass whose first `start` positions are already in a KV cache.
    pub fn rows(valid: &[Vec<bool>], start: usize, device: &Device) -> Result<Attn> {
        let b = valid.len();
        let l = valid.first().map_or(0, |r| r.len());
        let t = l.saturating_sub(start);
        let mut pos = Vec::with_capacity(b * t);
        let mut mask = vec![MASKED; b * t * l];
        for (bi, row) in valid.iter().enumerate() {
            let mut p = 0u32;
            for (i, &vi) in row.iter().enumerate() {
                if i >= start {
                    pos.push(if vi { p } else { 0 });
                    let r = (bi * t + i - start) * l;
                    for (j, &vj) in row.iter().enumerate().take(i + 1) {
                        if vj || j == i {
                            mask[r + j] = 0.0;
                        }
                    }
                }
                if vi {
                    p += 1;
                }
            }
        }
        Ok(Attn {
            positions: Tensor::from_vec(pos, (b, t), device)?,
            mask: Tensor::from_slice(&mask, (b, 1, t, l), device)?,
            host_mask: kernels::HostMask::new(mask, b, t, l)?,
        })
    }

    /// For one decode step: new token at `positions[b]`, keys valid per `valid[b]` (cached + new).
    pub fn decode(positions: &[u32], valid: &[Vec<bool>], device: &Device) -> Result<Attn> {
        let b = valid.len();
        let tk = valid.first().map_or(0, |r| r.len());
        let mask: Vec<f32> = valid
            .iter()
            .flat_map(|r| r.iter().map(|&v| if v { 0.0 } else { MASKED }))
            .collect();
        Ok(Attn {
            positions: Tensor::from_vec(positions.to_vec(), (b, 1), device)?,
            mask: Tensor::from_slice(&mask, (b, 1, 1, tk), device)?,
            host_mask: kernels::HostMask::new(mask, b, 1, tk)?,
        })
    }
}

/// The decoder.
pub struct Transformer {
    /// Its config.
    pub config: ModelConfig,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Tensor,
    cos: Tensor,
    sin: Tensor,
    fused: bool,
    device: Device,
}

impl Transformer {
    /// Builds the model over the tensors of `params` (tracked Vars for the actor, detached
    /// tensors for rollout/ref).
    pub fn new(config: &ModelConfig, params: &ParamStore, trainable: bool) -> Result<Transformer> {
        let get = |n: &str| params.tensor(n, trainable);
        let lin = |p: &str, bias: bool| -> Result<Linear> {
            Ok(Linear {
                w: get(&format!("{p}.weight"))?,
                b: if bias {
                    Some(get(&format!("{p}.bias"))?)
                } else {
                    None
                },
                module: intern(p),
            })
        };
        let eps = config.rms_norm_eps;
        let norm = |p: &str| -> Result<RmsNorm> {
            Ok(RmsNorm {
                w: get(&format!("{p}.weight"))?,
                eps,
                module: intern(p),
                fused: !trainable,
            })
        };
        let mut layers = Vec::new();
        for l in 0..config.num_hidden_layers {
            let p = format!("model.layers.{l}");
            let bias = config.qkv_bias();
            layers.push(Layer {
                norm1: norm(&format!("{p}.input_layernorm"))?,
                attn: Attention {
                    q: lin(&format!("{p}.self_attn.q_proj"), bias)?,
                    k: lin(&format!("{p}.self_attn.k_proj"), bias)?,
                    v: lin(&format!("{p}.self_attn.v_proj"), bias)?,
                    o: lin(&format!("{p}.self_attn.o_proj"), false)?,
                    heads: config.num_attention_heads,
                    kv_heads: config.kv_heads(),
                    head_dim: config.head_dim(),
                    module: intern(&format!("{p}.self_attn")),
                    fused: !trainable,
                },
                norm2: norm(&format!("{p}.post_attention_layernorm"))?,
                mlp: Mlp {
                    gate: lin(&format!("{p}.mlp.gate_proj"), false)?,
                    up: lin(&format!("{p}.mlp.up_proj"), false)?,
                    down: lin(&format!("{p}.mlp.down_proj"), false)?,
                    module: intern(&format!("{p}.mlp")),
                },
            });
        }
        let embed = get("model.embed_tokens.weight")?;
        let lm_head = if config.tie_word_embeddings {
            embed.clone()
        } else {
            get("lm_head.weight")?
        };
        let device = params.device().clone();
        let (cos, sin) = rope_tables(config, &device)?;
        Ok(Transformer {
            config: config.clone(),
            embed,
            layers,
            norm: norm("model.norm")?,
            lm_head,
            cos,
            sin,
            fused: !trainable,
            device,
        })
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Logits `[B, T, V]` for tokens `ids` `[B, T]` (u32). With a cache, the new keys/values
    /// are appended and attention covers cached + new positions (`attn.mask` must span both).
    pub fn forward(
        &self,
        ids: &Tensor,
        attn: &Attn,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let x = self.hidden(ids, attn, cache)?;
        self.head(&x)
    }

    /// Logits of the last position only, `[B, 1, V]` (generation).
    pub fn forward_last(
        &self,
        ids: &Tensor,
        attn: &Attn,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let x = self.pre_norm(ids, attn, cache)?;
        let t = x.dim(1)?;
        let x = self.norm.forward(&x.narrow(1, t - 1, 1)?.contiguous()?)?;
        self.head(&x)
    }

    /// Logits of positions `start..start + len` only, `[B, len, V]` (log-prob passes: the final
    /// norm and the LM head skip the prompt positions).
    pub fn forward_span(
        &self,
        ids: &Tensor,
        attn: &Attn,
        start: usize,
        len: usize,
    ) -> Result<Tensor> {
        self.head(&self.hidden_span(ids, attn, start, len)?)
    }

    /// The final hidden states (after the last norm) of positions `start..start + len`,
    /// `[B, len, H]`: what [`Self::forward_span`] feeds the LM head (a value head reads them).
    pub fn hidden_span(
        &self,
        ids: &Tensor,
        attn: &Attn,
        start: usize,
        len: usize,
    ) -> Result<Tensor> {
        let x = self.pre_norm(ids, attn, None)?;
        let (b, l, h) = x.dims3()?;
        let x = if start == 0 && len == l {
            x
        } else if kernels::supported(&x) {
            // a recorded gather (its backward is an op), not candle's narrow
            let idx: Vec<u32> = (0..b)
                .flat_map(|bi| (start..start + len).map(move |j| (bi * l + j) as u32))
                .collect();
            let idx = Tensor::from_vec(idx, b * len, x.device())?;
            let nm = self.norm.module;
            let flat = x.reshape((b * l, h))?;
            t!(
                "index_select",
                nm,
                [&flat, &idx],
                0,
                select_rows0(&flat, &idx)
            )?
            .reshape((b, len, h))?
        } else {
            x.narrow(1, start, len)?.contiguous()?
        };
        self.norm.forward(&x)
    }

    /// Logits `[B, 1 + S, V]` of the last prefix position and every suffix position when rows
    /// share their prompt: the prefix `prefix_ids` `[G, P]` runs once per distinct prompt, its
    /// keys/values are gathered to the rows (`rows[b]`: prefix of row `b`, u32 `[B]`) and the
    /// suffix `suffix_ids` `[B, S]` attends to them (`suffix_attn`: query positions `P..P + S`
    /// of the full pass, [`Attn::rows`]). The same values as `forward_span` of the full rows
    /// from position `P - 1` (causal attention: a prompt position never sees the response), on
    /// fewer rows; gradients flow back through the gathers into the shared prefix.
    pub fn forward_shared(
        &self,
        prefix_ids: &Tensor,
        prefix_attn: &Attn,
        rows: &Tensor,
        suffix_ids: &Tensor,
        suffix_attn: &Attn,
    ) -> Result<Tensor> {
        let x = self.hidden_shared(prefix_ids, prefix_attn, rows, suffix_ids, suffix_attn)?;
        self.head(&x)
    }

    /// The final hidden states [`Self::forward_shared`] feeds the LM head, `[B, 1 + S, H]`.
    pub fn hidden_shared(
        &self,
        prefix_ids: &Tensor,
        prefix_attn: &Attn,
        rows: &Tensor,
        suffix_ids: &Tensor,
        suffix_attn: &Attn,
    ) -> Result<Tensor> {
        let mut cache = KvCache::new(self.layers.len());
        let xp = self.pre_norm(prefix_ids, prefix_attn, Some(&mut cache))?;
        let p = xp.dim(1)?;
        let nm = self.norm.module;
        let last = t!("index_select", nm, [&xp, rows], 0, {
            // row rows[b]'s last prefix position, one gather from the flattened positions
            let (g, _, h) = xp.dims3()?;
            let idx: Vec<u32> = rows
                .to_vec1::<u32>()?
                .iter()
                .map(|&r| r * p as u32 + p as u32 - 1)
                .collect();
            let idx = Tensor::from_vec(idx, rows.dim(0)?, xp.device())?;
            select_rows0(&xp.reshape((g * p, h))?, &idx)?.unsqueeze(1)
        })?;
        self.expand_cache(&mut cache, rows)?;
        let xs = self.pre_norm(suffix_ids, suffix_attn, Some(&mut cache))?;
        let x = t!("cat", nm, [&last, &xs], 0, cat_dim1(&last, &xs))?;
        self.norm.forward(&x)
    }

    /// Replaces a cache filled for distinct prompts by its rows `rows` (u32 `[B]`, op
    /// `kv_expand` per layer's keys and values): afterwards it serves row `b` as if that row had
    /// run prompt `rows[b]` itself.
    pub fn expand_cache(&self, cache: &mut KvCache, rows: &Tensor) -> Result<()> {
        for (layer, slot) in self.layers.iter().zip(cache.layers.iter_mut()) {
            if let Some(c) = slot {
                c.select_rows(rows, layer.attn.module)?;
            }
        }
        Ok(())
    }

    /// Rows `rows` (u32 `[B]`) of logits `x` (op `index_select` under `lm_head`).
    pub fn select_logit_rows(&self, x: &Tensor, rows: &Tensor) -> Result<Tensor> {
        t!(
            "index_select",
            lm_head_module(),
            [x, rows],
            0,
            x.contiguous()?.index_select(rows, 0)
        )
    }

    fn hidden(&self, ids: &Tensor, attn: &Attn, cache: Option<&mut KvCache>) -> Result<Tensor> {
        let x = self.pre_norm(ids, attn, cache)?;
        self.norm.forward(&x)
    }

    /// The residual stream after the last layer, before the final norm.
    fn pre_norm(
        &self,
        ids: &Tensor,
        attn: &Attn,
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let flat = ids.flatten_all()?;
        let emb = intern_embed();
        let x = t!(
            "embedding",
            emb,
            [&self.embed, &flat],
            0,
            select_rows0(&self.embed, &flat)
        )?;
        let mut x = x.reshape((b, t, self.config.hidden_size))?;
        let rope = self.rope_at(&attn.positions)?;
        let mask = if kernels::supported(&x) {
            AttnMask::Host(&attn.host_mask)
        } else {
            // Expanded once per call to the attention shape, contiguous: candle's same-shape
            // binary kernels (forward and backward) are much faster than its strided broadcast.
            let (h, tk) = (self.config.num_attention_heads, attn.mask.dim(3)?);
            AttnMask::Dense(attn.mask.broadcast_as((b, h, t, tk))?.contiguous()?)
        };
        let capacity = cache.as_ref().map_or(0, |c| c.capacity);
        for (li, layer) in self.layers.iter().enumerate() {
            let h = layer.norm1.forward(&x)?;
            let kv = cache.as_deref_mut().map(|c| &mut c.layers[li]);
            // residual adds fused into the output projections
            x = layer.attn.forward(&h, &rope, &mask, kv, capacity, &x)?;
            let h = layer.norm2.forward(&x)?;
            x = layer.mlp.forward(&h, &x)?;
        }
        Ok(x)
    }

    fn head(&self, x: &Tensor) -> Result<Tensor> {
        Linear {
            w: self.lm_head.clone(),
            b: None,
            module: lm_head_module(),
        }
        .forward(x)
    }

    fn rope_at(&self, positions: &Tensor) -> Result<Rope> {
        let (b, t) = positions.dims2()?;
        let flat = positions.flatten_all()?;
        let hd = self.config.head_dim();
        let cos = self.cos.index_select(&flat, 0)?;
        let sin = self.sin.index_select(&flat, 0)?;
        if self.fused || kernels::supported(&self.cos) {
            // The fused kernels take the first half of the (duplicated) tables, `[B, T, D/2]`.
            let half = |x: Tensor| x.reshape((b, t, hd))?.narrow(2, 0, hd / 2)?.contiguous();
            return Ok(Rope {
                cos: half(cos)?,
                sin: half(sin)?,
                half: true,
            });
        }
        // Composed form: `[B, T, 1, D]`, broadcast over heads at use.
        Ok(Rope {
            cos: cos.reshape((b, t, 1, hd))?,
            sin: sin.reshape((b, t, 1, hd))?,
            half: false,
        })
    }
}

/// Rows `idx` of `x` along dimension 0: the recorded gather on the CPU, candle's elsewhere.
fn select_rows0(x: &Tensor, idx: &Tensor) -> Result<Tensor> {
    if kernels::supported(x) {
        gather::index_select0(x, idx)
    } else {
        x.contiguous()?.index_select(idx, 0)
    }
}

/// `[a, b]` along dimension 1: the recorded concatenation on the CPU, candle's elsewhere.
fn cat_dim1(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if kernels::supported(a) {
        gather::cat1(a, b)
    } else {
        Tensor::cat(&[a, b], 1)
    }
}

fn intern_embed() -> NameId {
    rlprof_profiler::name!("model.embed_tokens")
}

fn lm_head_module() -> NameId {
    rlprof_profiler::name!("lm_head")
}

fn rope_tables(config: &ModelConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    let hd = config.head_dim();
    let half = hd / 2;
    let max = config.max_position_embeddings.min(1 << 16);
    let mut cos = Vec::with_capacity(max * hd);
    let mut sin = Vec::with_capacity(max * hd);
    // Both halves of a row hold the same frequencies (rotate-half layout).
    for p in 0..max {
        for _half in 0..2 {
            for i in 0..half {
                let freq = 1.0 / config.rope_theta.powf(2.0 * i as f64 / hd as f64);
                let a = p as f64 * freq;
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
    }
    Ok((
        Tensor::from_vec(cos, (max, hd), device)?,
        Tensor::from_vec(sin, (max, hd), device)?,
    ))
}

/// RoPE tables at the call's positions: `[B, T, D/2]` for the fused kernels (`half`), else
/// `[B, T, 1, D]` for the composed form.
struct Rope {
    cos: Tensor,
    sin: Tensor,
    half: bool,
}

/// The attention mask of one forward call: on the host for the fused CPU kernel, else expanded
/// to `[B, H, T, Tk]`.
enum AttnMask<'a> {
    Host(&'a kernels::HostMask),
    Dense(Tensor),
}

/// `x * cos + rotate_half(x) * sin` from primitive ops; x `[B, T, H, D]`, cos, sin `[B, T, 1, D]`.
fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor, module: NameId) -> Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    let (cos, sin) = (
        cos.broadcast_as(x.shape())?.contiguous()?,
        sin.broadcast_as(x.shape())?.contiguous()?,
    );
    let x1 = x.narrow(D::Minus1, 0, d / 2)?;
    let x2 = x.narrow(D::Minus1, d / 2, d / 2)?;
    let rot = t!(
        "cat",
        module,
        [&x2, &x1],
        0,
        Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)
    )?;
    let a = t!("mul", module, [x, &cos], 0, x.mul(&cos))?;
    let b = t!("mul", module, [&rot, &sin], 0, rot.mul(&sin))?;
    t!("add", module, [&a, &b], 0, a.add(&b))
}

impl Attention {
    fn forward(
        &self,
        x: &Tensor,
        rope: &Rope,
        mask: &AttnMask,
        cache: Option<&mut Option<LayerCache>>,
        capacity: usize,
        residual: &Tensor,
    ) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let (h, kvh, hd) = (self.heads, self.kv_heads, self.head_dim);
        let m = self.module;
        // `[B, T, heads, hd]`: the projections' own layout, no transpose.
        let q = self.q.forward(x)?.reshape((b, t, h, hd))?;
        let k = self.k.forward(x)?.reshape((b, t, kvh, hd))?;
        let v = self.v.forward(x)?.reshape((b, t, kvh, hd))?;
        let rot = |x: &Tensor| {
            let (c, s) = (&rope.cos, &rope.sin);
            if !rope.half {
                apply_rope(x, c, s, m)
            } else if kernels::supported(x) {
                t!("rope", m, [x, c], 0, kernels::rope_bthd(x, c, s))
            } else {
                t!(
                    "rope",
                    m,
                    [x, c],
                    0,
                    candle_nn::rotary_emb::rope_thd(x, c, s)
                )
            }
        };
        let (q, k) = (rot(&q)?, rot(&k)?);
        let (k, v) = match cache {
            Some(slot) => LayerCache::append(slot, &k, &v, capacity, self.fused, m)?,
            None => (k, v),
        };
        let tk = k.dim(1)?;
        let flops = 4 * (b * h * t * tk * hd) as u64;
        let scale = 1.0 / (hd as f64).sqrt();
        let out = match mask {
            AttnMask::Host(hm) => t!(
                "attention",
                m,
                [&q, &k, &v],
                flops,
                kernels::attention(&q, &k, &v, hm, scale as f32)
            )?,
            AttnMask::Dense(mask) => {
                let bhtd = |x: &Tensor| x.transpose(1, 2)?.contiguous();
                let (q, k, v) = (bhtd(&q)?, bhtd(&k)?, bhtd(&v)?);
                let (k, v) = (repeat_kv(&k, h / kvh)?, repeat_kv(&v, h / kvh)?);
                let kt = k.transpose(2, 3)?.contiguous()?;
                let scores = t!("matmul", m, [&q, &kt], flops / 2, q.matmul(&kt))?;
                let scores = t!("mul", m, [&scores], 0, scores.affine(scale, 0.0))?;
                let scores = t!("add", m, [&scores, mask], 0, scores.add(mask))?;
                let probs = t!(
                    "softmax",
                    m,
                    [&scores],
                    0,
                    kernels::softmax_last_dim(&scores)
                )?;
                let out = t!("matmul", m, [&probs, &v], flops / 2, probs.matmul(&v))?;
                out.transpose(1, 2)?.contiguous()?
            }
        };
        self.o
            .forward_add(&out.reshape((b, t, h * hd))?, Some((residual, m)))
    }
}

fn repeat_kv(x: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(x.clone());
    }
    let (b, kvh, t, hd) = x.dims4()?;
    x.unsqueeze(2)?
        .expand((b, kvh, n, t, hd))?
        .contiguous()?
        .reshape((b, kvh * n, t, hd))
}

impl Mlp {
    /// `residual + down(silu(gate(x)) * up(x))`.
    fn forward(&self, x: &Tensor, residual: &Tensor) -> Result<Tensor> {
        let m = self.module;
        let g = self.gate.forward(x)?;
        let u = self.up.forward(x)?;
        let gu = t!("silu_mul", m, [&g, &u], 0, kernels::silu_mul(&g, &u))?;
        self.down.forward_add(&gu, Some((residual, m)))
    }
}

/// A value (score) head: `x` `[B, T, H]` -> `[B, T]` through `w` `[1, H]` and bias `b` `[1]`
/// (ops under module `score`, verl's critic head).
pub fn score_head(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let head = Linear {
        w: w.clone(),
        b: Some(b.clone()),
        module: rlprof_profiler::name!("score"),
    };
    head.forward(x)?.squeeze(D::Minus1)
}

/// Log-probs (and entropies) of `targets` under `logits` `[B, T, V]` at temperature `temp`.
pub fn token_logprobs(logits: &Tensor, targets: &Tensor, temp: f32) -> Result<(Tensor, Tensor)> {
    let m = rlprof_profiler::name!("logprob");
    if kernels::supported(logits) {
        let lp = token_logprob_only(logits, targets, temp)?;
        let ent = t!(
            "entropy",
            m,
            [logits],
            0,
            kernels::entropy(logits, 1.0 / temp)
        )?;
        return Ok((lp, ent));
    }
    let logits = if (temp - 1.0).abs() > f32::EPSILON {
        t!("div", m, [logits], 0, logits.affine(1.0 / temp as f64, 0.0))?
    } else {
        logits.clone()
    };
    let lsm = t!(
        "log_softmax",
        m,
        [&logits],
        0,
        candle_nn::ops::log_softmax(&logits, D::Minus1)
    )?;
    let idx = targets.unsqueeze(D::Minus1)?;
    let lp = t!("gather", m, [&lsm, &idx], 0, lsm.gather(&idx, D::Minus1))?.squeeze(D::Minus1)?;
    let p = lsm.exp()?;
    let ent = t!(
        "entropy",
        m,
        [&p, &lsm],
        0,
        p.mul(&lsm)?.sum(D::Minus1)?.neg()
    )?;
    Ok((lp, ent))
}

/// Log-probs of `targets` under `logits` `[B, T, V]` at temperature `temp`, without the
/// entropies (the no-grad log-prob passes).
pub fn token_logprob_only(logits: &Tensor, targets: &Tensor, temp: f32) -> Result<Tensor> {
    let m = rlprof_profiler::name!("logprob");
    if kernels::supported(logits) {
        return t!(
            "log_softmax_gather",
            m,
            [logits, targets],
            0,
            kernels::token_logprob(logits, targets, 1.0 / temp)
        );
    }
    Ok(token_logprobs(logits, targets, temp)?.0)
}

/// Convenience: a u32 tensor `[B, T]` from rows.
pub fn ids_tensor(rows: &[Vec<u32>], device: &Device) -> Result<Tensor> {
    let b = rows.len();
    let t = rows.first().map_or(0, |r| r.len());
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, (b, t), device)
}

/// The dtype the model computes in.
pub const DTYPE: DType = DType::F32;
