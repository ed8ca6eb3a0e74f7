//! What a PyTorch reference needs to rerun a dumped stage under msprobe's own
//! `PrecisionDebugger` (the golden dump `msprobe compare` checks ours against): with
//! `RLPROF_PRECISION_GOLDEN=1` in the environment, a dumped rank directory also holds
//!
//! - `rlprof_model.json`: the model's Hugging Face `config.json` fields;
//! - `rlprof_weights.safetensors`: the weights the stage ran with, by Hugging Face name;
//! - `rlprof_inputs.safetensors`: per forward call `k` of the stage (its micro-batches), the
//!   tensors the model read besides its weights, as PyTorch takes them: `ids.k` (int64
//!   `[B, T]`), `cos.k` / `sin.k` (the RoPE tables at the tokens' positions, `[B, T, 1, D]`),
//!   `mask.k` (the additive attention mask `[B, 1, T, T]`), `span_index.k` (int64 rows of the
//!   flattened positions the LM head reads, when not all), `targets.k` (int64 `[B, R, 1]`);
//! - `rlprof_inputs.json`: `{"calls": K, "temperature": t}`.
//!
//! `scripts/torch_reference_model.py` reads them. The tensors are captured by the dump path
//! itself, from the ops' own inputs, so the reference reruns exactly the dumped calls.

use super::Hint;
use candle_core::{Tensor, TensorId};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Whether `RLPROF_PRECISION_GOLDEN` asks for the reference's inputs.
pub(super) fn wanted() -> bool {
    std::env::var_os("RLPROF_PRECISION_GOLDEN").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The captured inputs and weights of one dumped stage.
#[derive(Default)]
pub(super) struct Capture {
    tensors: Vec<(String, Tensor)>,
    counts: HashMap<&'static str, usize>,
    seen: HashSet<TensorId>,
    temperature: Option<f32>,
    weights: Vec<(String, Tensor)>,
    model: Option<String>,
}

impl Capture {
    /// Keeps tensor `t` as `{name}.{k}` unless the op input `key` was kept already (the same
    /// mask or RoPE table serves every layer).
    fn keep(&mut self, name: &'static str, key: &Tensor, t: candle_core::Result<Tensor>) {
        if !self.seen.insert(key.id()) {
            return;
        }
        match t {
            Ok(t) => {
                let k = self.counts.entry(name).or_insert(0);
                self.tensors.push((format!("{name}.{k}"), t));
                *k += 1;
            }
            Err(e) => tracing::warn!("precision_debugger: {name} not captured: {e}"),
        }
    }

    /// Captures what op `op` (about to be expanded) read that the reference needs.
    pub(super) fn capture(
        &mut self,
        op: &str,
        inputs: &[&Tensor],
        _out: Option<&Tensor>,
        hint: Option<&Hint>,
    ) {
        match (op, inputs, hint) {
            ("embedding", [_, ids], h) => {
                let (b, t) = match h {
                    Some(Hint::Rows(b, t)) => (*b, *t),
                    _ => (1, ids.elem_count()),
                };
                self.keep("ids", ids, super::as_index(ids, &[b, t]));
            }
            ("rope", [_, c], Some(Hint::Sin(s))) => {
                if self.seen.contains(&c.id()) {
                    return;
                }
                let sin = super::full_table(s);
                self.keep("cos", c, super::full_table(c));
                let k = self.counts.entry("sin").or_insert(0);
                match sin {
                    Ok(t) => self.tensors.push((format!("sin.{k}"), t)),
                    Err(e) => tracing::warn!("precision_debugger: sin not captured: {e}"),
                }
                *k += 1;
            }
            ("attention", _, Some(Hint::Mask(m))) => self.keep("mask", m, Ok(m.clone())),
            ("index_select", [_, idx], _) => {
                let n = idx.elem_count();
                self.keep("span_index", idx, super::as_index(idx, &[n]));
            }
            ("log_softmax_gather", [_, targets], h) => {
                if let Some(Hint::Temp(t)) = h {
                    self.temperature = Some(*t);
                }
                let mut dims = targets.dims().to_vec();
                dims.push(1);
                self.keep("targets", targets, super::as_index(targets, &dims));
            }
            _ => {}
        }
    }

    /// Keeps the stage's weights and model config (the first call wins).
    pub(super) fn weights(&mut self, model: String, weights: Vec<(String, Tensor)>) {
        if self.model.is_none() {
            self.model = Some(model);
            self.weights = weights;
        }
    }

    /// Writes the files listed in the module docs into `dir`.
    pub(super) fn write(&self, dir: &Path) -> std::io::Result<()> {
        let io = |e: candle_core::Error| std::io::Error::other(e.to_string());
        let save = |file: &str, list: &[(String, Tensor)]| -> std::io::Result<()> {
            let map: HashMap<String, Tensor> = list
                .iter()
                .map(|(n, t)| Ok((n.clone(), t.detach().contiguous()?)))
                .collect::<candle_core::Result<_>>()
                .map_err(io)?;
            candle_core::safetensors::save(&map, dir.join(file)).map_err(io)
        };
        if !self.tensors.is_empty() {
            save("rlprof_inputs.safetensors", &self.tensors)?;
        }
        let calls = self.counts.get("targets").copied().unwrap_or(0);
        let meta = serde_json::json!({
            "calls": calls,
            "temperature": self.temperature.unwrap_or(1.0),
        });
        std::fs::write(dir.join("rlprof_inputs.json"), meta.to_string())?;
        if let Some(m) = &self.model {
            save("rlprof_weights.safetensors", &self.weights)?;
            std::fs::write(dir.join("rlprof_model.json"), m)?;
        }
        Ok(())
    }
}
