//! One rank of the job: the actor (trainable, sharded optimizer), the rollout engine (its own
//! weights, synced from the actor each step), the frozen reference policy, and the role calls of
//! a GRPO/DAPO step. All ranks run the same code on their own data shard; they meet only in the
//! collectives of their [`Communicator`].

use crate::algo::{self, GlobalDenoms, LossInputs, LossSettings};
use crate::comm::{Communicator, shard_len};
use crate::config::TrainConfig;
use crate::data::Prompt;
use crate::error::{Result, TrainerError};
use crate::model::autograd;
use crate::model::{
    Attn, KvCache, ModelConfig, ParamStore, Transformer, ids_tensor, token_logprob_only,
    token_logprobs,
};
use crate::optim::{AdamW, ShardedAdamW, clip_coef};
use crate::reward;
use crate::tokenizer::Tok;
use crate::{h, t};
use candle_core::{Device, Tensor, Var};
use rand::{Rng, SeedableRng, rngs::StdRng};
use rlprof_profiler::{NameId, iteration, name, plan::IterKind, scope};

/// One generated response and everything computed about it during the step.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Index of its prompt (group) in this rank's batch.
    pub group: usize,
    /// Prompt tokens.
    pub prompt_ids: Vec<u32>,
    /// Response tokens (ending with EOS unless cut at the length limit).
    pub response: Vec<u32>,
    /// Rule-based score (0/1) before shaping.
    pub score: f32,
    /// Reward after shaping.
    pub reward: f32,
    /// Advantage.
    pub adv: f32,
    /// Old log-probs of the update's ratio: `compute_log_prob`'s, or the rollout's own in
    /// bypass mode.
    pub old_logp: Vec<f32>,
    /// Log-probs of the sampled tokens as generation drew them (`rollout_log_probs`; empty
    /// unless `rollout.calculate_log_probs`).
    pub rollout_logp: Vec<f32>,
    /// Reference log-probs (`compute_ref_log_prob`).
    pub ref_logp: Vec<f32>,
    /// Per-token advantages (GAE); empty: `adv` on every token (GRPO).
    pub token_adv: Vec<f32>,
    /// Critic values per response token (`compute_values`, GAE only).
    pub values: Vec<f32>,
    /// GAE returns per response token.
    pub returns: Vec<f32>,
}

/// Decoded rows: the tokens of each row and, when asked for, their log-probs (else empty rows).
pub type Decoded = (Vec<Vec<u32>>, Vec<Vec<f32>>);

/// Sampling settings of one generation call.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    /// Temperature.
    pub temperature: f32,
    /// Nucleus mass.
    pub top_p: f32,
    /// Top-k (-1 = off).
    pub top_k: i64,
    /// false = greedy.
    pub do_sample: bool,
    /// Longest response.
    pub max_tokens: usize,
    /// Base seed; every row draws from its own stream keyed by its global index.
    pub seed: u64,
    /// Keep generating past EOS up to `max_tokens` (benchmarks: fixed response length).
    pub ignore_eos: bool,
}

/// Statistics of one `update_actor` call, summed over micro-batches and ranks.
#[derive(Debug, Clone, Default)]
pub struct UpdateStats {
    /// Mean policy-gradient loss.
    pub pg_loss: f64,
    /// Mean KL to the reference.
    pub kl: f64,
    /// Mean entropy.
    pub entropy: f64,
    /// Fraction of clipped tokens.
    pub clipfrac: f64,
    /// Mean global grad norm (before clipping).
    pub grad_norm: f64,
    /// Optimizer updates done.
    pub updates: u64,
}

/// The models and optimizer of one rank.
pub struct Engine<C: Communicator> {
    /// Job config.
    pub cfg: TrainConfig,
    /// Collectives.
    pub comm: C,
    /// Model config.
    pub mcfg: ModelConfig,
    /// Tokenizer.
    pub tok: Tok,
    /// Actor weights.
    pub actor: ParamStore,
    train_model: Transformer,
    eval_model: Transformer,
    rollout_params: ParamStore,
    rollout_model: Transformer,
    ref_params: Option<ParamStore>,
    ref_model: Option<Transformer>,
    /// Optimizer state of this rank's shard.
    pub opt: ShardedAdamW,
    /// Full flat parameters (padded to `world * shard`), the optimizer's master copy.
    flat: Vec<f32>,
    /// Shard length.
    shard: usize,
    pub(crate) device: Device,
    /// Module path of each actor parameter (its name without `.weight`/`.bias`).
    param_modules: Vec<NameId>,
}

impl<C: Communicator> Engine<C> {
    /// Builds a rank's engine around actor weights `actor`.
    pub fn new(
        cfg: TrainConfig,
        comm: C,
        mcfg: ModelConfig,
        tok: Tok,
        actor: ParamStore,
        hp: AdamW,
    ) -> Result<Engine<C>> {
        let device = actor.device().clone();
        let train_model = Transformer::new(&mcfg, &actor, true)?;
        let eval_model = Transformer::new(&mcfg, &actor, false)?;
        let rollout_params = actor.deep_clone()?;
        let rollout_model = Transformer::new(&mcfg, &rollout_params, false)?;
        let world = comm.world_size();
        let shard = shard_len(actor.len(), world);
        let mut flat = actor.flat()?;
        flat.resize(shard * world, 0.0);
        let param_modules = param_modules(&actor);
        Ok(Engine {
            cfg,
            comm,
            mcfg,
            tok,
            actor,
            train_model,
            eval_model,
            rollout_params,
            rollout_model,
            ref_params: None,
            ref_model: None,
            opt: ShardedAdamW::new(hp, shard),
            flat,
            shard,
            device,
            param_modules,
        })
    }

    /// Freezes the current actor weights as the reference policy.
    pub fn freeze_reference(&mut self) -> Result<()> {
        let p = self.actor.deep_clone()?;
        self.ref_model = Some(Transformer::new(&self.mcfg, &p, false)?);
        self.ref_params = Some(p);
        Ok(())
    }

    /// Replaces the optimizer (fresh state).
    pub fn reset_optimizer(&mut self, hp: AdamW) {
        self.opt = ShardedAdamW::new(hp, self.shard);
    }

    /// Overwrites the actor weights (and the optimizer's master copy) from a flat vector.
    pub fn load_actor_flat(&mut self, flat: &[f32]) -> Result<()> {
        self.actor.set_flat(flat)?;
        self.flat[..flat.len()].copy_from_slice(flat);
        Ok(())
    }

    /// `update_weights`: copies the actor's weights into the rollout engine.
    pub fn sync_rollout_weights(&self) -> Result<()> {
        Ok(self.rollout_params.copy_from(&self.actor)?)
    }

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
        let mut next = h!("sample", sampler, logits.elem_count() * 4, {
            sample_rows(&logits, s, &mut rngs, logp.then_some(temp))
        })?;
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); b];
        let mut out_logp: Vec<Vec<f32>> = vec![Vec::new(); b];
        let mut done = vec![false; b];
        for t in 0..s.max_tokens {
            let finished = h!("stop_check", sampler, b * 4, {
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
            let (ids_t, attn) = h!("prepare_inputs", data_module(), b * valid[0].len() * 4, {
                let positions: Vec<u32> = (0..b).map(|i| (prompts[i].len() + t) as u32).collect();
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
            next = h!("sample", sampler, logits.elem_count() * 4, {
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

    /// The rollout model (for tests and validation).
    pub fn rollout_model(&self) -> &Transformer {
        &self.rollout_model
    }

    /// Scores every sample (reward function, then DAPO overlong shaping when on).
    pub fn score(&self, prompts: &[Prompt], samples: &mut [Sample]) -> Result<()> {
        let max = self.cfg.data.max_response_length;
        let ol = &self.cfg.overlong;
        for s in samples.iter_mut() {
            let p = &prompts[s.group];
            let text = self.tok.decode(&s.response)?;
            s.score = reward::score(&p.data_source, &p.text, &text, &p.ground_truth);
            s.reward = s.score;
            if ol.enable {
                s.reward +=
                    reward::overlong_penalty(s.response.len(), max, ol.len, ol.penalty_factor);
            }
        }
        Ok(())
    }

    /// GRPO advantages over each prompt's `n` samples (samples are grouped consecutively).
    pub fn advantages(&self, samples: &mut [Sample], n: usize) {
        let r: Vec<f32> = samples.iter().map(|s| s.reward).collect();
        let adv = algo::grpo_advantages(&r, n, self.cfg.algorithm.norm_adv_by_std_in_grpo);
        for (s, a) in samples.iter_mut().zip(adv) {
            s.adv = a;
        }
    }

    /// `compute_log_prob` (actor) or `compute_ref_log_prob` (reference), in micro-batches.
    pub fn log_probs(&self, samples: &mut [Sample], reference: bool) -> Result<()> {
        let (model, mb) = if reference {
            let m = self.ref_model.as_ref().unwrap_or(&self.eval_model);
            (m, self.cfg.ref_log_prob_micro_batch_size_per_gpu)
        } else {
            (
                &self.eval_model,
                self.cfg.rollout.log_prob_micro_batch_size_per_gpu,
            )
        };
        let temp = self.cfg.rollout.temperature;
        for chunk in samples.chunks_mut(mb) {
            let _it = iteration(IterKind::MicroBatch);
            let refs: Vec<&Sample> = chunk.iter().collect();
            let batch = SeqBatch::new(&refs, self.tok.pad_id, &self.device)?;
            let lp = batch.logprobs_only(model, temp)?;
            let rows = h!(
                "to_host",
                data_module(),
                lp.elem_count() * 4,
                lp.to_vec2::<f32>()
            )?;
            for (s, row) in chunk.iter_mut().zip(rows) {
                let v = row[..s.response.len()].to_vec();
                if reference {
                    s.ref_logp = v;
                } else {
                    s.old_logp = v;
                }
            }
        }
        Ok(())
    }

    /// `update_actor`: PPO epochs over mini-batches of micro-batches with gradient accumulation;
    /// one sharded optimizer update per mini-batch. `step` names the step in errors.
    pub fn update_actor(&mut self, samples: &[Sample], step: u64) -> Result<UpdateStats> {
        let a = self.cfg.actor.clone();
        let n_mini = (self.cfg.data.train_batch_size / a.ppo_mini_batch_size).max(1);
        let settings = LossSettings {
            clip_low: a.clip_ratio_low,
            clip_high: a.clip_ratio_high,
            kl_coef: if a.use_kl_loss { a.kl_loss_coef } else { 0.0 },
            entropy_coeff: a.entropy_coeff,
            agg: a.loss_agg_mode,
        };
        let temp = self.cfg.rollout.temperature;
        let minis = split_even(samples, n_mini);
        let mut st = UpdateStats::default();
        let mut local = [0f32; 4];
        for _epoch in 0..a.ppo_epochs {
            for mini in &minis {
                let _it = iteration(IterKind::MiniBatch);
                let Some(denoms) = global_denoms(&self.comm, mini)? else {
                    continue;
                };
                let mut grads = zero_grad(self.flat.len());
                for micro in mini.chunks(a.ppo_micro_batch_size_per_gpu) {
                    let _it = iteration(IterKind::MicroBatch);
                    let _grad = autograd::grad_enabled();
                    let refs: Vec<&Sample> = micro.iter().collect();
                    let batch = SeqBatch::new(&refs, self.tok.pad_id, &self.device)?;
                    let (lp, ent) = batch.logprobs(&self.train_model, temp)?;
                    let old = batch.per_token(&refs, |s| &s.old_logp)?;
                    let refl = if settings.kl_coef != 0.0 {
                        Some(batch.per_token(&refs, |s| &s.ref_logp)?)
                    } else {
                        None
                    };
                    let adv = batch.advantages(&refs)?;
                    let mut stats = None;
                    let loss = t!("compute_policy_loss", loss_module(), [&lp, &ent], 0, {
                        autograd::region(&lp, &ent, |lp, ent| {
                            let out = algo::actor_loss(
                                &LossInputs {
                                    logp: lp,
                                    entropy: ent,
                                    old_logp: &old,
                                    ref_logp: refl.as_ref(),
                                    adv: &adv,
                                    mask: &batch.mask,
                                },
                                settings,
                                denoms,
                            )?;
                            let l = out.loss.clone();
                            stats = Some(out);
                            Ok(l)
                        })
                    })?;
                    let out = stats.expect("the loss region ran");
                    finite_loss(&loss, step, "actor loss")?;
                    self.accumulate_grads(&loss, &mut grads)?;
                    local[0] += out.pg_loss;
                    local[1] += out.kl;
                    local[2] += out.entropy;
                    local[3] += out.clipfrac;
                }
                let norm = self.apply_grads(&mut grads, self.cfg.actor.grad_clip, step)?;
                st.grad_norm += norm as f64;
                st.updates += 1;
            }
        }
        self.comm.all_reduce_sum(&mut local)?;
        let k = st.updates.max(1) as f64;
        st.pg_loss = local[0] as f64 / k;
        st.kl = local[1] as f64 / k;
        st.entropy = local[2] as f64 / k;
        st.clipfrac = local[3] as f64 / k;
        st.grad_norm /= k;
        Ok(st)
    }

    /// Supervised step on `(prompt, target)` token rows (the warm-up): token-mean cross-entropy
    /// over target tokens of the global batch. Returns the global loss.
    pub fn sft_step(&mut self, rows: &[(Vec<u32>, Vec<u32>)], step: u64) -> Result<f32> {
        let mut tokens = [rows.iter().map(|(_, t)| t.len() as f32).sum::<f32>()];
        self.comm.all_reduce_sum(&mut tokens)?;
        let samples: Vec<Sample> = rows
            .iter()
            .map(|(p, t)| Sample {
                group: 0,
                prompt_ids: p.clone(),
                response: t.clone(),
                score: 0.0,
                reward: 0.0,
                adv: 0.0,
                old_logp: Vec::new(),
                rollout_logp: Vec::new(),
                ref_logp: Vec::new(),
                token_adv: Vec::new(),
                values: Vec::new(),
                returns: Vec::new(),
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let mut grads = zero_grad(self.flat.len());
        let mut loss_sum = [0f32];
        for micro in refs.chunks(self.cfg.actor.ppo_micro_batch_size_per_gpu.max(1)) {
            let _grad = autograd::grad_enabled();
            let batch = SeqBatch::new(micro, self.tok.pad_id, &self.device)?;
            let (lp, _) = batch.logprobs(&self.train_model, 1.0)?;
            let scale = -1.0 / tokens[0].max(1.0) as f64;
            let loss = t!(
                "compute_sft_loss",
                loss_module(),
                [&lp],
                0,
                autograd::region(&lp, &batch.mask, |lp, mask| lp
                    .mul(mask)?
                    .sum_all()?
                    .affine(scale, 0.0))
            )?;
            loss_sum[0] += finite_loss(&loss, step, "warm-up loss")?;
            self.accumulate_grads(&loss, &mut grads)?;
        }
        self.apply_grads(&mut grads, 1.0, step)?;
        self.comm.all_reduce_sum(&mut loss_sum)?;
        Ok(loss_sum[0])
    }

    /// Backward of `loss` (every node a recorded op, [`autograd`]), then gradient accumulation:
    /// each parameter's gradient added into the flat buffer (op `accumulate_grad` per
    /// parameter, under the parameter's module path).
    fn accumulate_grads(&self, loss: &Tensor, flat: &mut [f32]) -> Result<()> {
        let vars: Vec<&Var> = self.actor.vars().iter().collect();
        backward_into(loss, &vars, &self.param_modules, flat)
    }

    /// Per-parameter gradient norms of `loss` (for the every-weight-learns test).
    pub fn grad_norms(&self, samples: &[Sample]) -> Result<Vec<(String, f32)>> {
        let refs: Vec<&Sample> = samples.iter().collect();
        let batch = SeqBatch::new(&refs, self.tok.pad_id, &self.device)?;
        let (lp, _) = batch.logprobs(&self.train_model, 1.0)?;
        let loss = lp.mul(&batch.mask)?.sum_all()?.neg()?;
        let gs = loss.backward()?;
        self.actor
            .names()
            .iter()
            .zip(self.actor.vars())
            .map(|(n, v)| {
                let norm = match gs.get(v.as_tensor()) {
                    Some(g) => g.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?,
                    None => 0.0,
                };
                Ok((n.clone(), norm))
            })
            .collect()
    }

    /// ZeRO-2 update: reduce-scatter gradients, clip by the global norm, AdamW on this rank's
    /// shard, all-gather the parameters. Returns the global grad norm before clipping.
    fn apply_grads(&mut self, grads: &mut [f32], max_norm: f32, step: u64) -> Result<f32> {
        let mut z = Zero2 {
            comm: &self.comm,
            opt: &mut self.opt,
            flat: &mut self.flat,
            shard: self.shard,
        };
        let actor = &self.actor;
        z.step(grads, max_norm, step, "grad_norm", |flat| {
            Ok(actor.set_flat(&flat[..actor.len()])?)
        })
    }

    /// This rank's flat parameters (unpadded).
    pub fn actor_flat(&self) -> &[f32] {
        &self.flat[..self.actor.len()]
    }
}

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
        h!("collate", data_module(), 0, {
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

/// The module path of each parameter of `store` (`model.layers.0.mlp.up_proj.weight` ->
/// `model.layers.0.mlp.up_proj`).
pub(crate) fn param_modules(store: &ParamStore) -> Vec<NameId> {
    store
        .names()
        .iter()
        .map(|n| rlprof_profiler::intern(n.rsplit_once('.').map_or(n.as_str(), |(m, _)| m)))
        .collect()
}

/// Backward of `loss` (every node a recorded op, [`autograd`]), then gradient accumulation:
/// each of `vars`' gradient added into its slice of `flat` (op `accumulate_grad` under the
/// parameter's module path `modules[i]`).
pub(crate) fn backward_into(
    loss: &Tensor,
    vars: &[&Var],
    modules: &[NameId],
    flat: &mut [f32],
) -> Result<()> {
    let bwd = scope(name!("backward"));
    let gs = {
        let _nodes = autograd::backward_scope();
        loss.backward()?
    };
    drop(bwd);
    let _acc = scope(name!("gradient_accumulation"));
    let mut off = 0;
    for (v, module) in vars.iter().zip(modules) {
        let n = v.elem_count();
        if let Some(g) = gs.get(v.as_tensor()) {
            h!(
                "accumulate_grad",
                *module,
                n * 4,
                accumulate(g, &mut flat[off..off + n])
            )?;
        }
        off += n;
    }
    Ok(())
}

/// One ZeRO-2 optimizer update over a flat parameter vector whose optimizer state is sharded.
pub(crate) struct Zero2<'a, C: Communicator> {
    pub comm: &'a C,
    pub opt: &'a mut ShardedAdamW,
    /// Full flat parameters, padded to `world * shard`.
    pub flat: &'a mut Vec<f32>,
    pub shard: usize,
}

impl<C: Communicator> Zero2<'_, C> {
    /// Reduce-scatter of `grads` (range `ZeRO2::reduce_scatter_grads`), global-norm clipping
    /// (`clip_grad_norm_`: a norm op and an all-reduce), AdamW on this rank's shard and the
    /// all-gather of the parameters (`Optimizer.step#AdamW.step`, with `ZeRO2::all_gather_params`
    /// inside), then `publish` of the new flat parameters into the model (op `copy_`). Returns
    /// the global grad norm before clipping; `what` names it in errors.
    pub(crate) fn step(
        &mut self,
        grads: &mut [f32],
        max_norm: f32,
        step: u64,
        what: &'static str,
        publish: impl FnOnce(&[f32]) -> Result<()>,
    ) -> Result<f32> {
        let (r, sh) = (self.comm.rank(), self.shard);
        let opt = name!("optimizer");
        let mut g = vec![0f32; sh];
        {
            let _s = scope(name!("ZeRO2::reduce_scatter_grads"));
            self.comm.reduce_scatter_sum(grads, &mut g)?;
        }
        let norm = {
            let _s = scope(name!("clip_grad_norm_"));
            let mut sq = [h!("linalg_vector_norm", opt, sh * 4, {
                g.iter().map(|x| x * x).sum::<f32>()
            })];
            self.comm.all_reduce_sum(&mut sq)?;
            sq[0].sqrt()
        };
        if !norm.is_finite() {
            return Err(TrainerError::NonFinite {
                step,
                what,
                value: norm as f64,
            });
        }
        let coef = clip_coef(norm, max_norm);
        let _s = scope(name!("Optimizer.step#AdamW.step"));
        let mut mine = self.flat[r * sh..(r + 1) * sh].to_vec();
        h!("adamw", opt, sh * 16, self.opt.step(&mut mine, &g, coef));
        {
            let _s = scope(name!("ZeRO2::all_gather_params"));
            self.comm.all_gather(&mine, &mut self.flat[..])?;
        }
        h!("copy_", opt, self.flat.len() * 4, publish(&self.flat[..]))?;
        Ok(norm)
    }
}

/// Module path of host-side input preparation.
pub(crate) fn data_module() -> NameId {
    name!("data")
}

/// Module path of the loss ops.
pub(crate) fn loss_module() -> NameId {
    name!("loss")
}

/// A zeroed flat gradient buffer, as range `Optimizer.zero_grad#AdamW.zero_grad` with op `zero_`.
pub(crate) fn zero_grad(len: usize) -> Vec<f32> {
    let _s = scope(name!("Optimizer.zero_grad#AdamW.zero_grad"));
    h!("zero_", name!("optimizer"), len * 4, vec![0f32; len])
}

/// Adds gradient `g` into `dst` (same element count).
fn accumulate(g: &Tensor, dst: &mut [f32]) -> Result<()> {
    let g = g.flatten_all()?;
    let g = g.to_vec1::<f32>()?;
    for (d, x) in dst.iter_mut().zip(&g) {
        *d += x;
    }
    Ok(())
}

/// Splits `v` into `k` contiguous chunks whose sizes differ by at most one.
pub(crate) fn split_even<T>(v: &[T], k: usize) -> Vec<&[T]> {
    let (q, rem) = (v.len() / k, v.len() % k);
    let mut out = Vec::with_capacity(k);
    let mut off = 0;
    for i in 0..k {
        let len = q + (i < rem) as usize;
        out.push(&v[off..off + len]);
        off += len;
    }
    out
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

/// A mini-batch's loss denominators over all ranks (response tokens, sequences), as verl's
/// global-batch loss aggregation takes them; `None` when no rank has a sequence in it. Shared by
/// `update_actor` and `update_critic`.
pub(crate) fn global_denoms<C: Communicator>(
    comm: &C,
    mini: &[Sample],
) -> Result<Option<GlobalDenoms>> {
    let mut d = [
        mini.iter().map(|s| s.response.len() as f32).sum::<f32>(),
        mini.len() as f32,
    ];
    comm.all_reduce_sum(&mut d)?;
    Ok((d[1] != 0.0).then(|| GlobalDenoms {
        tokens: d[0].max(1.0),
        seqs: d[1],
    }))
}

/// The value of a micro-batch's scalar loss; a non-finite one stops training with an error
/// naming the step and `what`.
pub(crate) fn finite_loss(loss: &Tensor, step: u64, what: &'static str) -> Result<f32> {
    let v = loss.to_scalar::<f32>()?;
    if !v.is_finite() {
        return Err(TrainerError::NonFinite {
            step,
            what,
            value: v as f64,
        });
    }
    Ok(v)
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

/// Rows grouped by equal keys: the first row of each distinct key, in order of appearance, and
/// each row's group index (a linear scan per row: a batch holds a few distinct prompts).
fn group_rows<T: PartialEq>(keys: &[T]) -> (Vec<usize>, Vec<u32>) {
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
