//! The padded (prompt, response) batch of the log-prob, update and value passes: collation,
//! shared-prompt forward passes, and the per-token tensors the losses read.

use super::{Sample, data_module};
use crate::error::Result;
use crate::host_op;
use crate::model::{
    Attn, Transformer, ids_tensor, token_logprob_only, token_logprobs,
    token_logprobs_entropy_metric,
};
use candle_core::{Device, Tensor};

/// A padded batch of (prompt, response) rows: prompts left-padded to `p`, responses
/// right-padded to `r`.
pub struct SeqBatch {
    pass: Pass,
    targets: Tensor,
    /// `[B, R]` 1 for response tokens.
    pub mask: Tensor,
    p: usize,
    r: usize,
}

/// How a batch's forward pass runs.
enum Pass {
    /// Every row over all `p + r - 1` positions.
    Full { ids: Tensor, attn: Attn },
    /// Rows share prompts: each distinct prompt once (`prefix_ids` `[G, p]`), its keys/values
    /// gathered to the rows (`rows`), then the `r - 1` response positions of every row.
    Shared {
        prefix_ids: Tensor,
        prefix_attn: Attn,
        rows: Tensor,
        suffix_ids: Tensor,
        suffix_attn: Attn,
    },
}

impl SeqBatch {
    /// Builds the padded batch of `samples`; rows with the same prompt share its forward pass
    /// (GRPO's `n` samples per prompt).
    pub fn new(samples: &[&Sample], pad: u32, device: &Device) -> Result<SeqBatch> {
        host_op!("collate", data_module(), 0, {
            SeqBatch::with_sharing(samples, pad, device, true)
        })
    }

    /// [`SeqBatch::new`], with prompt sharing on or off (off: every row runs its prompt).
    pub fn with_sharing(
        samples: &[&Sample],
        pad: u32,
        device: &Device,
        share: bool,
    ) -> Result<SeqBatch> {
        let p = samples
            .iter()
            .map(|s| s.prompt_ids.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let r = samples
            .iter()
            .map(|s| s.response.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let mut ids = Vec::new();
        let mut valid = Vec::new();
        let mut targets = Vec::new();
        let mut mask = Vec::new();
        for s in samples {
            let lp = p - s.prompt_ids.len();
            let mut row = vec![pad; lp];
            row.extend(&s.prompt_ids);
            row.extend(&s.response);
            row.resize(p + r, pad);
            let mut v = vec![false; lp];
            v.extend(std::iter::repeat_n(
                true,
                s.prompt_ids.len() + s.response.len(),
            ));
            v.resize(p + r, false);
            // The last response token is only a target: no logit reads it (causal attention),
            // so the forward pass stops one position short.
            row.truncate(p + r - 1);
            v.truncate(p + r - 1);
            let mut t = s.response.clone();
            t.resize(r, pad);
            targets.push(t);
            mask.extend((0..r).map(|i| (i < s.response.len()) as u8 as f32));
            ids.push(row);
            valid.push(v);
        }
        // Distinct prompts in order of first appearance, and each row's.
        let prompt_of: Vec<&[u32]> = samples.iter().map(|s| s.prompt_ids.as_slice()).collect();
        let (firsts, row_of) = group_rows(&prompt_of);
        let distinct: Vec<&[u32]> = firsts.iter().map(|&i| prompt_of[i]).collect();
        let pass = if share && r >= 2 && distinct.len() < samples.len() {
            let mut prefix = Vec::with_capacity(distinct.len());
            let mut prefix_valid = Vec::with_capacity(distinct.len());
            for d in &distinct {
                let mut row = vec![pad; p - d.len()];
                row.extend_from_slice(d);
                prefix.push(row);
                let mut v = vec![false; p - d.len()];
                v.extend(std::iter::repeat_n(true, d.len()));
                prefix_valid.push(v);
            }
            let suffix: Vec<Vec<u32>> = ids.iter().map(|row| row[p..].to_vec()).collect();
            let n = row_of.len();
            Pass::Shared {
                prefix_ids: ids_tensor(&prefix, device)?,
                prefix_attn: Attn::full(&prefix_valid, device)?,
                rows: Tensor::from_vec(row_of, n, device)?,
                suffix_ids: ids_tensor(&suffix, device)?,
                suffix_attn: Attn::rows(&valid, p, device)?,
            }
        } else {
            Pass::Full {
                ids: ids_tensor(&ids, device)?,
                attn: Attn::full(&valid, device)?,
            }
        };
        Ok(SeqBatch {
            pass,
            targets: ids_tensor(&targets, device)?,
            mask: Tensor::from_vec(mask, (samples.len(), r), device)?,
            p,
            r,
        })
    }

    /// Whether rows share their prompts' forward pass.
    pub fn is_shared(&self) -> bool {
        matches!(self.pass, Pass::Shared { .. })
    }

    /// Logits `[B, R, V]` at the positions that predict the response tokens.
    fn response_logits(&self, model: &Transformer) -> Result<Tensor> {
        Ok(match &self.pass {
            Pass::Full { ids, attn } => model.forward_span(ids, attn, self.p - 1, self.r)?,
            Pass::Shared {
                prefix_ids,
                prefix_attn,
                rows,
                suffix_ids,
                suffix_attn,
            } => model.forward_shared(prefix_ids, prefix_attn, rows, suffix_ids, suffix_attn)?,
        })
    }

    /// Log-probs and entropies `[B, R]` of the response tokens under `model`.
    pub fn logprobs(&self, model: &Transformer, temp: f32) -> Result<(Tensor, Tensor)> {
        let resp = self.response_logits(model)?;
        Ok(token_logprobs(&resp, &self.targets, temp)?)
    }

    /// [`SeqBatch::logprobs`] with the entropies as a metric only (no backward through them).
    pub fn logprobs_entropy_metric(
        &self,
        model: &Transformer,
        temp: f32,
    ) -> Result<(Tensor, Tensor)> {
        let resp = self.response_logits(model)?;
        Ok(token_logprobs_entropy_metric(&resp, &self.targets, temp)?)
    }

    /// Log-probs `[B, R]` of the response tokens under `model`, without entropies.
    pub fn logprobs_only(&self, model: &Transformer, temp: f32) -> Result<Tensor> {
        let resp = self.response_logits(model)?;
        Ok(token_logprob_only(&resp, &self.targets, temp)?)
    }

    /// A `[B, R]` tensor of per-token values (zero-padded).
    pub fn per_token(
        &self,
        samples: &[&Sample],
        f: impl Fn(&Sample) -> &Vec<f32>,
    ) -> Result<Tensor> {
        let mut v = Vec::with_capacity(samples.len() * self.r);
        for s in samples {
            let row = f(s);
            v.extend(row.iter().copied().take(self.r));
            v.extend(std::iter::repeat_n(0.0, self.r - row.len().min(self.r)));
        }
        Ok(Tensor::from_vec(
            v,
            (samples.len(), self.r),
            self.mask.device(),
        )?)
    }

    /// Advantages `[B, R]`: per token (GAE) or the sequence's on every token (GRPO).
    pub fn advantages(&self, samples: &[&Sample]) -> Result<Tensor> {
        if samples
            .iter()
            .all(|s| !s.token_adv.is_empty() || s.response.is_empty())
        {
            self.per_token(samples, |s| &s.token_adv)
        } else {
            self.per_seq(samples, |s| s.adv)
        }
    }

    /// Final hidden states `[B, R, H]` at the positions that predict the response tokens (what
    /// a value head reads: the value of the state before each response token).
    pub fn response_hidden(&self, model: &Transformer) -> Result<Tensor> {
        Ok(match &self.pass {
            Pass::Full { ids, attn } => model.hidden_span(ids, attn, self.p - 1, self.r)?,
            Pass::Shared {
                prefix_ids,
                prefix_attn,
                rows,
                suffix_ids,
                suffix_attn,
            } => model.hidden_shared(prefix_ids, prefix_attn, rows, suffix_ids, suffix_attn)?,
        })
    }

    /// A `[B, R]` tensor of a per-sequence value broadcast over tokens.
    fn per_seq(&self, samples: &[&Sample], f: impl Fn(&Sample) -> f32) -> Result<Tensor> {
        let v: Vec<f32> = samples
            .iter()
            .flat_map(|s| std::iter::repeat_n(f(s), self.r))
            .collect();
        Ok(Tensor::from_vec(
            v,
            (samples.len(), self.r),
            self.mask.device(),
        )?)
    }
}

/// Rows grouped by equal keys: the first row of each distinct key, in order of appearance, and
/// each row's group index (a linear scan per row: a batch holds a few distinct prompts).
pub(super) fn group_rows<T: PartialEq>(keys: &[T]) -> (Vec<usize>, Vec<u32>) {
    let mut firsts: Vec<usize> = Vec::new();
    let row_of = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let g = match firsts.iter().position(|&f| keys[f] == *k) {
                Some(g) => g,
                None => {
                    firsts.push(i);
                    firsts.len() - 1
                }
            };
            g as u32
        })
        .collect();
    (firsts, row_of)
}
