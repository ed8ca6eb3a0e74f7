//! The critic of PPO with GAE (`algorithm.adv_estimator: gae`, verl's default): a value model
//! with the actor's architecture and a scalar head (`score`, zero-initialised) over the final
//! hidden states, initialised from the actor's weights when RL starts. Its role calls are
//! `compute_values` (values of the state before each response token), and `update_critic`
//! (clipped value loss, its own sharded AdamW, mini- and micro-batches, ZeRO-2 like the actor).
//! GAE itself (with `algorithm.gamma` / `lam`, advantages whitened over the global batch) runs
//! between them.

use crate::algo::{self, GlobalDenoms, ValueInputs};
use crate::comm::{Communicator, shard_len};
use crate::critic_config::CriticConfig;
use crate::engine::{
    Engine, MicroBatchUpdate, PpoSchedule, Sample, SeqBatch, Zero2, backward_into, finite_loss,
    for_each_micro_batch, loss_module, param_modules,
};
use crate::error::Result;
use crate::model::{ModelConfig, ParamStore, Transformer, autograd, score_head};
use crate::optim::{AdamW, ShardedAdamW};
use crate::{host_op, traced_op};
use candle_core::{Tensor, Var};
use rlprof_profiler::{NameId, iteration, name, plan::IterKind};

/// The value model and its optimizer state.
pub struct Critic {
    params: ParamStore,
    train_model: Transformer,
    eval_model: Transformer,
    head_w: Var,
    head_b: Var,
    /// Optimizer state of this rank's shard.
    pub opt: ShardedAdamW,
    /// Full flat parameters (backbone, head weight, head bias), padded to `world * shard`.
    flat: Vec<f32>,
    shard: usize,
    modules: Vec<NameId>,
}

/// Statistics of one `update_critic` call (verl's `critic/*` names in [`CriticStats::metrics`]).
#[derive(Debug, Clone, Default)]
pub struct CriticStats {
    /// `critic/vf_loss`.
    pub vf_loss: f64,
    /// `critic/vf_clipfrac`.
    pub vf_clipfrac: f64,
    /// `critic/vpred_mean`.
    pub vpred_mean: f64,
    /// `critic/grad_norm`.
    pub grad_norm: f64,
    /// `critic/lr`.
    pub lr: f64,
    /// Optimizer updates done.
    pub updates: u64,
}

impl CriticStats {
    /// The statistics under verl's metric names.
    pub fn metrics(&self) -> [(&'static str, f64); 5] {
        [
            ("critic/vf_loss", self.vf_loss),
            ("critic/vf_clipfrac", self.vf_clipfrac),
            ("critic/vpred_mean", self.vpred_mean),
            ("critic/grad_norm", self.grad_norm),
            ("critic/lr", self.lr),
        ]
    }
}

impl Critic {
    /// A critic over a copy of `actor`'s weights with a zero value head, for `world` ranks.
    pub fn from_actor(
        mcfg: &ModelConfig,
        actor: &ParamStore,
        hp: AdamW,
        world: usize,
    ) -> Result<Critic> {
        let params = actor.deep_clone()?;
        let device = params.device().clone();
        let h = mcfg.hidden_size;
        let head_w = Var::zeros((1, h), candle_core::DType::F32, &device)?;
        let head_b = Var::zeros(1, candle_core::DType::F32, &device)?;
        let len = params.len() + h + 1;
        let shard = shard_len(len, world);
        let mut flat = params.flat()?;
        flat.extend(std::iter::repeat_n(0.0, h + 1));
        flat.resize(shard * world, 0.0);
        let mut modules = param_modules(&params);
        modules.extend([name!("score"), name!("score")]);
        Ok(Critic {
            train_model: Transformer::new(mcfg, &params, true)?,
            eval_model: Transformer::new(mcfg, &params, false)?,
            params,
            head_w,
            head_b,
            opt: ShardedAdamW::new(hp, shard),
            flat,
            shard,
            modules,
        })
    }

    /// The critic's flat parameters (unpadded) and its optimizer state length on this rank.
    pub fn flat_and_state_len(&self) -> (&[f32], usize) {
        let n = self.params.len() + self.head_w.elem_count() + 1;
        (&self.flat[..n], self.opt.state_len())
    }

    fn vars(&self) -> Vec<&Var> {
        let mut v: Vec<&Var> = self.params.vars().iter().collect();
        v.extend([&self.head_w, &self.head_b]);
        v
    }

    /// Values `[B, R]` of a batch: tracked (`train`) or not.
    fn values(&self, batch: &SeqBatch, train: bool) -> Result<Tensor> {
        if train {
            let x = batch.response_hidden(&self.train_model)?;
            Ok(score_head(
                &x,
                self.head_w.as_tensor(),
                self.head_b.as_tensor(),
            )?)
        } else {
            let x = batch.response_hidden(&self.eval_model)?;
            let (w, b) = (
                self.head_w.as_tensor().detach(),
                self.head_b.as_tensor().detach(),
            );
            Ok(score_head(&x, &w, &b)?)
        }
    }
}

impl<C: Communicator> Engine<C> {
    /// The critic, built from the current actor weights, when the job runs PPO with GAE (call
    /// once RL starts, after the warm-up); `None` otherwise. The job holds it beside the engine.
    pub fn new_critic(&self) -> Result<Option<Critic>> {
        if self.cfg.algorithm.adv_estimator != crate::config::AdvEstimator::Gae {
            return Ok(None);
        }
        let c = &self.cfg.critic;
        let hp = AdamW {
            lr: c.lr,
            warmup_steps: c.lr_warmup_steps,
            weight_decay: c.weight_decay,
            betas: self.cfg.actor.betas,
            eps: 1e-8,
        };
        Ok(Some(Critic::from_actor(
            &self.mcfg,
            &self.actor,
            hp,
            self.comm.world_size(),
        )?))
    }

    /// `compute_values`: the critic's value of each response token's state, in micro-batches
    /// of `critic.forward_micro_batch_size_per_gpu`.
    pub fn compute_values(&self, critic: &Critic, samples: &mut [Sample]) -> Result<()> {
        let mb = self.cfg.critic.forward_micro_batch_size_per_gpu;
        for chunk in samples.chunks_mut(mb) {
            let _it = iteration(IterKind::MicroBatch);
            let refs: Vec<&Sample> = chunk.iter().collect();
            let batch = SeqBatch::new(&refs, self.tok.pad_id, &self.device)?;
            let v = critic.values(&batch, false)?;
            let rows = host_op!(
                "to_host",
                crate::engine::data_module(),
                v.elem_count() * 4,
                v.to_vec2::<f32>()
            )?;
            for (s, row) in chunk.iter_mut().zip(rows) {
                s.values = row[..s.response.len()].to_vec();
            }
        }
        Ok(())
    }

    /// GAE advantages and returns of every sample (outcome reward on the last token), the
    /// advantages whitened with the mean and variance of every response token on all ranks.
    /// `Sample::adv` gets the mean of its token advantages (for reporting).
    pub fn gae_advantages(&self, samples: &mut [Sample]) -> Result<()> {
        let (gamma, lam) = (self.cfg.critic.gamma, self.cfg.critic.lam);
        let mut sums = [0f32; 3];
        for s in samples.iter_mut() {
            let (adv, ret) = algo::gae(s.reward, &s.values, gamma, lam);
            sums[0] += adv.iter().sum::<f32>();
            sums[1] += adv.iter().map(|a| a * a).sum::<f32>();
            sums[2] += adv.len() as f32;
            s.token_adv = adv;
            s.returns = ret;
        }
        self.comm.all_reduce_sum(&mut sums)?;
        let n = sums[2].max(1.0);
        let mean = sums[0] / n;
        // unbiased variance, as verl's masked_whiten
        let var = (sums[1] / n - mean * mean).max(0.0) * n / (n - 1.0).max(1.0);
        let inv = 1.0 / (var + 1e-8).sqrt();
        for s in samples.iter_mut() {
            s.token_adv.iter_mut().for_each(|a| *a = (*a - mean) * inv);
            let k = s.token_adv.len().max(1) as f32;
            s.adv = s.token_adv.iter().sum::<f32>() / k;
        }
        Ok(())
    }

    /// `update_critic`: PPO epochs over mini-batches of micro-batches of the clipped value loss,
    /// one sharded optimizer update per mini-batch.
    pub fn update_critic(
        &mut self,
        critic: &mut Critic,
        samples: &[Sample],
        step: u64,
    ) -> Result<CriticStats> {
        let c = self.cfg.critic.clone();
        let schedule = PpoSchedule::new(
            c.ppo_epochs,
            self.cfg.data.train_batch_size,
            c.ppo_mini_batch_size,
            c.ppo_micro_batch_size_per_gpu,
        );
        let mut update = CriticUpdate {
            engine: self,
            critic,
            cfg: &c,
            step,
            local: [0f32; 3],
        };
        let totals = for_each_micro_batch(&mut update, samples, schedule)?;
        let mut local = update.local;
        let mut st = CriticStats {
            grad_norm: totals.grad_norm,
            updates: totals.updates,
            ..CriticStats::default()
        };
        self.comm.all_reduce_sum(&mut local)?;
        let k = st.updates.max(1) as f64;
        st.vf_loss = local[0] as f64 / k;
        st.vf_clipfrac = local[1] as f64 / k;
        st.vpred_mean = local[2] as f64 / k;
        st.grad_norm /= k;
        st.lr = critic.opt.current_lr();
        Ok(st)
    }
}

/// `update_critic`'s part of the PPO loop: the clipped value loss of each micro-batch, the
/// critic's ZeRO-2 update of each mini-batch.
struct CriticUpdate<'a, C: Communicator> {
    engine: &'a Engine<C>,
    critic: &'a mut Critic,
    cfg: &'a CriticConfig,
    step: u64,
    /// Sums over micro-batches of the value loss, vf_clipfrac and vpred_mean (this rank).
    local: [f32; 3],
}

impl<C: Communicator> MicroBatchUpdate for CriticUpdate<'_, C> {
    type Comm = C;

    fn comm(&self) -> &C {
        &self.engine.comm
    }

    fn grads_len(&self) -> usize {
        self.critic.flat.len()
    }

    fn micro_batch(
        &mut self,
        micro: &[Sample],
        denoms: GlobalDenoms,
        grads: &mut [f32],
    ) -> Result<()> {
        let (e, critic, c) = (self.engine, &*self.critic, self.cfg);
        let refs: Vec<&Sample> = micro.iter().collect();
        let batch = SeqBatch::new(&refs, e.tok.pad_id, &e.device)?;
        let vpreds = critic.values(&batch, true)?;
        let mut stats = None;
        let values = batch.per_token(&refs, |s| &s.values)?;
        let returns = batch.per_token(&refs, |s| &s.returns)?;
        let loss = traced_op!("compute_value_loss", loss_module(), [&vpreds], 0, {
            autograd::region(&vpreds, &batch.mask, |v, mask| {
                let out = algo::value_loss(
                    &ValueInputs {
                        vpreds: v,
                        values: &values,
                        returns: &returns,
                        mask,
                    },
                    c.cliprange_value,
                    c.loss_agg_mode,
                    denoms,
                )?;
                let l = out.loss.clone();
                stats = Some(out);
                Ok(l)
            })
        })?;
        let out = stats.expect("the loss region ran");
        let lv = finite_loss(&loss, self.step, "critic loss")?;
        backward_into(&loss, &critic.vars(), &critic.modules, grads)?;
        self.local[0] += lv;
        self.local[1] += out.clipfrac;
        self.local[2] += out.vpred_mean;
        Ok(())
    }

    fn apply(&mut self, grads: &mut [f32]) -> Result<f32> {
        let critic = &mut *self.critic;
        let params = &critic.params;
        let (hw, hb) = (&critic.head_w, &critic.head_b);
        let mut z = Zero2 {
            comm: &self.engine.comm,
            opt: &mut critic.opt,
            flat: &mut critic.flat,
            shard: critic.shard,
        };
        z.step(
            grads,
            self.cfg.grad_clip,
            self.step,
            "critic grad_norm",
            |f| set_critic_flat(params, hw, hb, f),
        )
    }
}

/// [`Critic::set_flat`] over borrowed parts (the optimizer holds the flat vector meanwhile).
fn set_critic_flat(params: &ParamStore, hw: &Var, hb: &Var, flat: &[f32]) -> Result<()> {
    let n = params.len();
    let h = hw.elem_count();
    params.set_flat(&flat[..n])?;
    let dev = params.device();
    hw.set(&Tensor::from_slice(&flat[n..n + h], (1, h), dev)?)?;
    hb.set(&Tensor::from_slice(&flat[n + h..n + h + 1], 1, dev)?)?;
    Ok(())
}

impl<C: Communicator> Engine<C> {
    /// verl's data metrics of GAE over all ranks' response tokens: `critic/values/mean`,
    /// `critic/returns/mean`, `critic/advantages/mean`.
    pub fn gae_metrics(&self, samples: &[Sample]) -> Result<Vec<(String, f64)>> {
        let sum = |f: fn(&Sample) -> &Vec<f32>| samples.iter().flat_map(f).sum::<f32>();
        let mut s = [
            sum(|s| &s.values),
            sum(|s| &s.returns),
            sum(|s| &s.token_adv),
            samples.iter().map(|s| s.values.len() as f32).sum::<f32>(),
        ];
        self.comm.all_reduce_sum(&mut s)?;
        let n = s[3].max(1.0) as f64;
        Ok(vec![
            ("critic/values/mean".into(), s[0] as f64 / n),
            ("critic/returns/mean".into(), s[1] as f64 / n),
            ("critic/advantages/mean".into(), s[2] as f64 / n),
        ])
    }
}
