//! A Qwen2/Llama-family decoder (RMSNorm, RoPE, SwiGLU, grouped-query attention, tied or untied
//! embeddings) from differentiable candle ops, so that every weight gets a gradient. candle's
//! fused rms_norm / softmax / rope have no backward pass: on CPU the trainable model uses the
//! differentiable fused kernels of [`kernels`], the no-grad models candle's fused ones, and other
//! devices the composed primitives.
//!
//! Layout conventions follow verl: prompts are left-padded, responses right-padded; callers pass
//! per-token validity and the model derives position ids and the attention mask from it.

mod attention;
pub mod autograd;
mod cache;
pub mod gather;
pub mod kernels;
mod layers;
mod logprob;
mod mask;
pub mod ops;
pub mod params;
pub mod precision;
mod transformer;

use candle_core::{DType, Device, Result, Tensor};
use serde::{Deserialize, Serialize};

pub use cache::KvCache;
pub use layers::score_head;
pub use logprob::{token_logprob_only, token_logprobs, token_logprobs_entropy_metric};
pub use mask::Attn;
pub use params::ParamStore;
pub use transformer::Transformer;

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

/// Convenience: a u32 tensor `[B, T]` from rows.
pub fn ids_tensor(rows: &[Vec<u32>], device: &Device) -> Result<Tensor> {
    let b = rows.len();
    let t = rows.first().map_or(0, |r| r.len());
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, (b, t), device)
}

/// The dtype the model computes in.
pub const DTYPE: DType = DType::F32;
