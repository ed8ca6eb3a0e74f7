//! Generation (`generate_sequences`): batched KV-cache decoding with shared-prompt prefill, the
//! per-row sampler and its random streams, and the uncached greedy reference decoder.

use super::batch::group_rows;
use super::{Decoded, Engine, Sample, Sampling, data_module};
use crate::comm::Communicator;
use crate::data::Prompt;
use crate::error::Result;
use crate::host_op;
use crate::model::{Attn, KvCache, Transformer, ids_tensor, kernels, token_logprob_only};
use candle_core::Tensor;
use rand::{Rng, SeedableRng, rngs::StdRng};
use rlprof_profiler::{iteration, name, plan::IterKind};

impl<C: Communicator> Engine<C> {
    /// `generate_sequences`: `n` samples for each prompt, batched, with a KV cache. Row `i` of
    /// this rank draws from the random stream of global row `row_base + i`, so results do not
    /// depend on how prompts are split over ranks.
    pub fn generate(
        &self,
        prompts: &[Prompt],
        n: usize,
        s: Sampling,
        row_base: usize,
    ) -> Result<Vec<Sample>> {
        let mut rows = Vec::new();
        for (g, p) in prompts.iter().enumerate() {
            let ids = self.tok.encode(&p.text)?;
            for _ in 0..n {
                rows.push((g, ids.clone()));
            }
        }
        let prompt_ids: Vec<Vec<u32>> = rows.iter().map(|(_, ids)| ids.clone()).collect();
        let logp = self.cfg.rollout.calculate_log_probs;
        let (responses, logps) =
            self.decode_rows(&self.rollout_model, &prompt_ids, s, row_base, logp)?;
        Ok(rows
            .into_iter()
            .zip(responses)
            .zip(logps)
            .map(|(((group, prompt_ids), response), rollout_logp)| Sample {
                group,
                prompt_ids,
                response,
                score: 0.0,
                reward: 0.0,
                adv: 0.0,
                old_logp: Vec::new(),
                rollout_logp,
                ref_logp: Vec::new(),
                token_adv: Vec::new(),
                values: Vec::new(),
                returns: Vec::new(),
            })
            .collect())
    }

    /// Batched decoding of `prompts` (token rows) with `model` and a KV cache.
    pub fn generate_rows(
        &self,
        model: &Transformer,
        prompts: &[Vec<u32>],
        s: Sampling,
        row_base: usize,
    ) -> Result<Vec<Vec<u32>>> {
        Ok(self.decode_rows(model, prompts, s, row_base, false)?.0)
    }

    /// [`Engine::generate_rows`], with each sampled token's log-prob at the rollout temperature
    /// over the whole vocabulary (what `compute_log_prob` computes, from the KV-cached pass)
    /// when `logp`; otherwise the second list holds empty rows.
    pub fn decode_rows(
        &self,
        model: &Transformer,
        prompts: &[Vec<u32>],
        s: Sampling,
        row_base: usize,
        logp: bool,
    ) -> Result<Decoded> {
        let b = prompts.len();
        if b == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let p = prompts.iter().map(|r| r.len()).max().unwrap_or(0).max(1);
        let pad = self.tok.pad_id;
        let mut ids = Vec::with_capacity(b);
        let mut valid: Vec<Vec<bool>> = Vec::with_capacity(b);
        for r in prompts {
            let mut row = vec![pad; p - r.len()];
            row.extend(r);
            ids.push(row);
            let mut v = vec![false; p - r.len()];
            v.extend(std::iter::repeat_n(true, r.len()));
            valid.push(v);
        }
        let mut rngs: Vec<StdRng> = (0..b)
            .map(|i| StdRng::seed_from_u64(mix(s.seed, (row_base + i) as u64)))
            .collect();
        let mut cache = KvCache::with_capacity(self.mcfg.num_hidden_layers, p + s.max_tokens);
        // Prefill: each distinct prompt once (GRPO's `n` samples per prompt share it), then its
        // cache and last logits handed to every row of that prompt.
        let (distinct, row_of) = group_rows(prompts);
        let logits = if distinct.len() < b {
            let d_ids: Vec<Vec<u32>> = distinct.iter().map(|&i| ids[i].clone()).collect();
            let d_valid: Vec<Vec<bool>> = distinct.iter().map(|&i| valid[i].clone()).collect();
            let attn = Attn::full(&d_valid, &self.device)?;
            let logits =
                model.forward_last(&ids_tensor(&d_ids, &self.device)?, &attn, Some(&mut cache))?;
            let rows = Tensor::from_vec(row_of, b, &self.device)?;
            model.expand_cache(&mut cache, &rows)?;
            model.select_logit_rows(&logits, &rows)?
        } else {
            let attn = Attn::full(&valid, &self.device)?;
            model.forward_last(&ids_tensor(&ids, &self.device)?, &attn, Some(&mut cache))?
        };
        let sampler = name!("sampler");
        let temp = self.cfg.rollout.temperature;
        let mut next = host_op!("sample", sampler, logits.elem_count() * 4, {
            sample_rows(&logits, s, &mut rngs, logp.then_some(temp))
        })?;
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut out_logp: Vec<Vec<f32>> = vec![Vec::new(); b];
        let mut done = vec![false; b];
        for t in 0..s.max_tokens {
            let finished = host_op!("stop_check", sampler, b * 4, {
                for i in 0..b {
                    if !done[i] {
                        out[i].push(next.0[i]);
                        if logp {
                            out_logp[i].push(next.1[i]);
                        }
                        done[i] = !s.ignore_eos && next.0[i] == self.tok.eos_id;
                    }
                }
                t + 1 == s.max_tokens || done.iter().all(|d| *d)
            });
            if finished {
                break;
            }
            let _it = iteration(IterKind::DecodeStep);
            let (ids_t, attn) =
                host_op!("prepare_inputs", data_module(), b * valid[0].len() * 4, {
                    let positions: Vec<u32> =
                        (0..b).map(|i| (prompts[i].len() + t) as u32).collect();
                    // Finished rows feed padding; their outputs are ignored.
                    for (v, d) in valid.iter_mut().zip(&done) {
                        v.push(!d);
                    }
                    let step_ids: Vec<Vec<u32>> = (0..b)
                        .map(|i| vec![if done[i] { pad } else { next.0[i] }])
                        .collect();
                    Ok::<_, candle_core::Error>((
                        ids_tensor(&step_ids, &self.device)?,
                        Attn::decode(&positions, &valid, &self.device)?,
                    ))
                })?;
            let logits = model.forward_last(&ids_t, &attn, Some(&mut cache))?;
            next = host_op!("sample", sampler, logits.elem_count() * 4, {
                sample_rows(&logits, s, &mut rngs, logp.then_some(temp))
            })?;
        }
        Ok((out, out_logp))
    }

    /// Greedy decoding without a KV cache (reference for the cache-equality test).
    pub fn generate_greedy_uncached(&self, prompt: &[u32], max_tokens: usize) -> Result<Vec<u32>> {
        let mut seq = prompt.to_vec();
        let mut out = Vec::new();
        for _ in 0..max_tokens {
            let valid = vec![vec![true; seq.len()]];
            let attn = Attn::full(&valid, &self.device)?;
            let logits = self.rollout_model.forward_last(
                &ids_tensor(std::slice::from_ref(&seq), &self.device)?,
                &attn,
                None,
            )?;
            let row = logits.flatten_all()?.to_vec1::<f32>()?;
            let tok = argmax(&row);
            out.push(tok);
            seq.push(tok);
            if tok == self.tok.eos_id {
                break;
            }
        }
        Ok(out)
    }
}

/// One token per row of `logits` `[B, 1, V]`, and with `logp_temp`, each token's log-prob at
/// that temperature (else an empty list), by the log-prob passes' own kernel
/// ([`token_logprob_only`]), so the rollout's and `compute_log_prob`'s have one definition.
fn sample_rows(
    logits: &Tensor,
    s: Sampling,
    rngs: &mut [StdRng],
    logp_temp: Option<f32>,
) -> Result<(Vec<u32>, Vec<f32>)> {
    let rows = logits.squeeze(1)?.to_vec2::<f32>()?;
    let tokens: Vec<u32> = rows
        .iter()
        .zip(rngs.iter_mut())
        .map(|(row, rng)| sample_token(row, s, rng))
        .collect();
    let logps = match logp_temp {
        Some(temp) => {
            let targets = Tensor::from_slice(&tokens, (tokens.len(), 1), logits.device())?;
            token_logprob_only(logits, &targets, temp)?
                .flatten_all()?
                .to_vec1::<f32>()?
        }
        None => Vec::new(),
    };
    Ok((tokens, logps))
}

/// Draws one token: greedy, or temperature + top-k + top-p sampling.
pub fn sample_token(logits: &[f32], s: Sampling, rng: &mut StdRng) -> u32 {
    if !s.do_sample {
        return argmax(logits);
    }
    if (s.top_k <= 0 || s.top_k as usize >= logits.len()) && s.top_p >= 1.0 {
        // The whole vocabulary: one pass in token order (as torch.multinomial), no sort.
        let mut w = vec![0f32; logits.len()];
        let total = kernels::softmax_weights(logits, 1.0 / s.temperature, &mut w);
        let mut u = rng.random::<f32>() * total;
        for (k, p) in w.iter().enumerate() {
            if u < *p {
                return k as u32;
            }
            u -= p;
        }
        // Rounding left u above the last weights: the last token with any weight.
        return w.iter().rposition(|p| *p > 0.0).unwrap_or(0) as u32;
    }
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_unstable_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    if s.top_k > 0 {
        idx.truncate(s.top_k as usize);
    }
    let max = logits[idx[0]];
    let mut probs: Vec<f32> = idx
        .iter()
        .map(|&i| ((logits[i] - max) / s.temperature).exp())
        .collect();
    let total: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    if s.top_p < 1.0 {
        let mut cum = 0.0;
        let mut keep = probs.len();
        for (k, p) in probs.iter().enumerate() {
            cum += p;
            if cum >= s.top_p {
                keep = k + 1;
                break;
            }
        }
        probs.truncate(keep);
        idx.truncate(keep);
    }
    let total: f32 = probs.iter().sum();
    let mut u = rng.random::<f32>() * total;
    for (k, p) in probs.iter().enumerate() {
        if u < *p {
            return idx[k] as u32;
        }
        u -= p;
    }
    idx[probs.len() - 1] as u32
}

/// A 64-bit mix of two keys (SplitMix64 finaliser).
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(top_k: i64, top_p: f32) -> Sampling {
        Sampling {
            temperature: 0.7,
            top_p,
            top_k,
            do_sample: true,
            max_tokens: 1,
            seed: 0,
            ignore_eos: true,
        }
    }

    /// Whole-vocabulary sampling (no sort) and the sorted top-k path draw from softmax(l / T).
    #[test]
    fn sampling_frequencies_follow_the_tempered_softmax() {
        let logits = [0.3f32, -1.0, 2.0, 0.0, 1.1, -0.4, 0.9];
        let w: Vec<f64> = logits.iter().map(|&l| (f64::from(l) / 0.7).exp()).collect();
        let z: f64 = w.iter().sum();
        let n = 40_000;
        for s in [sampling(-1, 1.0), sampling(0, 1.0), sampling(7, 0.99999)] {
            let mut rng = StdRng::seed_from_u64(11);
            let mut count = [0usize; 7];
            for _ in 0..n {
                count[sample_token(&logits, s, &mut rng) as usize] += 1;
            }
            for (c, wi) in count.iter().zip(&w) {
                let (f, p) = (*c as f64 / n as f64, wi / z);
                assert!(
                    (f - p).abs() < 0.01,
                    "{s:?}: frequency {f} vs probability {p}"
                );
            }
        }
        // Top-k 1 is the argmax.
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(sample_token(&logits, sampling(1, 1.0), &mut rng), 2);
    }
}
