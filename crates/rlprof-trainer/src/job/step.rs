//! One GRPO/DAPO step with its role calls and phase markers (generation with DAPO's group
//! filter, log-probs, values, advantages, the critic and actor updates, the weight sync), its
//! sampling settings and the periodic greedy validation.

use super::metrics::{rollout_probs_diff, step_metrics};
use crate::StepMetrics;
use crate::comm::Communicator;
use crate::config::TrainConfig;
use crate::critic::Critic;
use crate::data::{Prompt, Source};
use crate::engine::{Engine, Sample, Sampling, mix};
use crate::error::Result;
use crate::model::precision;
use rlprof_profiler::{RankProfiler, RoleCall, phase};
use std::collections::BTreeMap;
use std::time::Instant;

fn sampling(cfg: &TrainConfig, step: u64, salt: u64) -> Sampling {
    Sampling {
        temperature: cfg.rollout.temperature,
        top_p: cfg.rollout.top_p,
        top_k: cfg.rollout.top_k,
        do_sample: cfg.rollout.do_sample,
        max_tokens: cfg.data.max_response_length,
        seed: mix(mix(cfg.trainer.seed, step), salt),
        ignore_eos: cfg.rollout.ignore_eos,
    }
}

/// One GRPO/DAPO step with its role calls and phases.
pub(super) fn rl_step<C: Communicator>(
    eng: &mut Engine<C>,
    critic: Option<&mut Critic>,
    rp: &RankProfiler,
    step: u64,
    source: &mut Source,
) -> Result<StepMetrics> {
    let cfg = eng.cfg.clone();
    let t_step = Instant::now();
    let _step = rp.step(step);
    let (rank, world) = (eng.comm.rank(), eng.comm.world_size());
    crate::faults::at_step_start(rank, step)?;
    let bs = cfg.data.train_batch_size;
    let local = bs / world;
    let n = cfg.rollout.n;
    let mut timing = BTreeMap::new();
    let mut prompts: Vec<Prompt> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut gen_batches = 0u64;
    let filter = cfg.algorithm.filter_groups.clone();
    loop {
        let global = source.next_batch(bs);
        let mine = &global[rank * local..(rank + 1) * local];
        let row_base = (rank * local) * n;
        let s = sampling(&cfg, step, gen_batches);
        let mut batch = timed(&mut timing, "gen", || {
            let _call = rp.role_call(RoleCall::GenerateSequences);
            let _ph = phase("gen");
            eng.generate(mine, n, s, row_base)
        })?;
        timed(&mut timing, "reward", || {
            let _ph = phase("reward");
            eng.score(mine, &mut batch)
        })?;
        gen_batches += 1;
        let keep: Vec<bool> = if filter.enable {
            let r: Vec<f32> = batch.iter().map(|s| s.score).collect();
            crate::algo::informative_groups(&r, n)
        } else {
            vec![true; mine.len()]
        };
        for (g, p) in mine.iter().enumerate() {
            if keep[g] && prompts.len() < local {
                let gi = prompts.len();
                prompts.push(p.clone());
                samples.extend(batch[g * n..(g + 1) * n].iter().cloned().map(|mut s| {
                    s.group = gi;
                    s
                }));
            }
        }
        if !filter.enable {
            break;
        }
        let mut kept = [prompts.len() as f32];
        eng.comm.all_reduce_sum(&mut kept)?;
        if kept[0] as usize >= bs || gen_batches as usize >= filter.max_num_gen_batches {
            break;
        }
    }
    if cfg.algorithm.rollout_correction.bypass_mode {
        // verl's bypass mode: the rollout's log-probs are the old policy's; no recompute.
        for s in &mut samples {
            s.old_logp = s.rollout_logp.clone();
        }
    } else {
        timed(&mut timing, "old_log_prob", || {
            let _call = rp.role_call(RoleCall::ComputeLogProb);
            let _pd = precision::stage(rp, step, RoleCall::ComputeLogProb);
            let _ph = phase("old_log_prob");
            eng.log_probs(&mut samples, false)
        })?;
    }
    if cfg.actor.use_kl_loss {
        timed(&mut timing, "ref", || {
            let _call = rp.role_call(RoleCall::ComputeRefLogProb);
            let _pd = precision::stage(rp, step, RoleCall::ComputeRefLogProb);
            let _ph = phase("ref");
            eng.log_probs(&mut samples, true)
        })?;
    }
    let gae = cfg.algorithm.adv_estimator == crate::config::AdvEstimator::Gae;
    if let Some(c) = critic.as_deref() {
        timed(&mut timing, "values", || {
            let _call = rp.role_call(RoleCall::ComputeValues);
            let _pd = precision::stage(rp, step, RoleCall::ComputeValues);
            let _ph = phase("values");
            eng.compute_values(c, &mut samples)
        })?;
    }
    timed(&mut timing, "adv", || {
        let _ph = phase("adv");
        if gae {
            return eng.gae_advantages(&mut samples);
        }
        eng.advantages(&mut samples, n);
        Ok(())
    })?;
    let critic_stats = match critic {
        Some(c) => Some(timed(&mut timing, "update_critic", || {
            let _call = rp.role_call(RoleCall::UpdateCritic);
            let _pd = precision::stage(rp, step, RoleCall::UpdateCritic);
            let _ph = phase("update_critic");
            eng.update_critic(c, &samples, step)
        })?),
        None => None,
    };
    let stats = timed(&mut timing, "update_actor", || {
        let _call = rp.role_call(RoleCall::UpdateActor);
        let _pd = precision::stage(rp, step, RoleCall::UpdateActor);
        let _ph = phase("update_actor");
        eng.update_actor(&samples, step)
    })?;
    timed(&mut timing, "update_weights", || {
        let _ph = phase("update_weights");
        eng.sync_rollout_weights()
    })?;
    let val = validation(eng, &cfg, step)?;
    let step_s = t_step.elapsed().as_secs_f64();
    timing.insert("step".into(), step_s);
    let mut m = step_metrics(eng, step, &samples, &stats, timing, gen_batches, val)?;
    if cfg.rollout.calculate_log_probs && !cfg.algorithm.rollout_correction.bypass_mode {
        m.values.extend(rollout_probs_diff(eng, &samples)?);
    }
    if let Some(cs) = critic_stats {
        m.values
            .extend(cs.metrics().iter().map(|(k, v)| (k.to_string(), *v)));
        m.values.extend(eng.gae_metrics(&samples)?);
    }
    Ok(m)
}

fn timed<T>(
    timing: &mut BTreeMap<String, f64>,
    key: &str,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let t = Instant::now();
    let out = f()?;
    *timing.entry(key.to_string()).or_insert(0.0) += t.elapsed().as_secs_f64();
    Ok(out)
}

/// Greedy accuracy on the validation prompts every `trainer.test_freq` steps.
fn validation<C: Communicator>(
    eng: &Engine<C>,
    cfg: &TrainConfig,
    step: u64,
) -> Result<Option<f64>> {
    let f = cfg.trainer.test_freq;
    if f == 0 || !step.is_multiple_of(f) {
        return Ok(None);
    }
    let (rank, world) = (eng.comm.rank(), eng.comm.world_size());
    let per = cfg.trainer.val_batch_size / world;
    let prompts = Source::val(&cfg.data, cfg.data.seed)?.next_batch(per * world);
    let mine = &prompts[rank * per..(rank + 1) * per];
    let mut s = sampling(cfg, step, u64::MAX);
    s.do_sample = false;
    let mut samples = eng.generate(mine, 1, s, rank * per)?;
    eng.score(mine, &mut samples)?;
    let mut acc = [
        samples.iter().map(|s| s.score).sum::<f32>(),
        samples.len() as f32,
    ];
    eng.comm.all_reduce_sum(&mut acc)?;
    Ok(Some((acc[0] / acc[1].max(1.0)) as f64))
}
