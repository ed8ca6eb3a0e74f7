//! The decoder: building it over a parameter store, the forward passes (full, last position,
//! a span, shared-prompt prefix + suffix), the hidden states a value head reads, and the
//! KV-cache row expansion of generation.

use super::attention::{Attention, AttnMask, Rope, rope_tables};
use super::cache::KvCache;
use super::gather::{cat_dim1, select_rows0};
use super::kernels;
use super::layers::{Linear, Mlp, RmsNorm};
use super::mask::Attn;
use super::{ModelConfig, ParamStore};
use crate::traced_op;
use candle_core::{Device, Result, Tensor};
use rlprof_profiler::{NameId, intern};

struct Layer {
    norm1: RmsNorm,
    attn: Attention,
    norm2: RmsNorm,
    mlp: Mlp,
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
            traced_op!(
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
        let last = traced_op!("index_select", nm, [&xp, rows], 0, {
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
        let x = traced_op!("cat", nm, [&last, &xs], 0, cat_dim1(&last, &xs))?;
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
        traced_op!(
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
        super::precision::hint(|| super::precision::Hint::Rows(b, t));
        let x = traced_op!(
            "embedding",
            emb,
            [&self.embed, &flat],
            0,
            select_rows0(&self.embed, &flat)
        )?;
        let mut x = x.reshape((b, t, self.config.hidden_size))?;
        let rope = self.rope_at(&attn.positions)?;
        let mask = if kernels::supported(&x) {
            AttnMask::Host(&attn.host_mask, &attn.mask)
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

fn intern_embed() -> NameId {
    rlprof_profiler::name!("model.embed_tokens")
}

fn lm_head_module() -> NameId {
    rlprof_profiler::name!("lm_head")
}
