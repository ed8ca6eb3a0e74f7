//! A step's metrics under verl's names, reduced over the ranks: rewards, scores, response
//! lengths, the actor's update statistics, and the rollout-vs-actor probability comparison.

use crate::StepMetrics;
use crate::comm::Communicator;
use crate::engine::{Engine, Sample};
use crate::error::Result;
use std::collections::BTreeMap;

/// verl's rollout-vs-actor debug metrics (`verl.utils.debug.metrics.calculate_debug_metrics`):
/// `|p_actor - p_rollout|` over every response token of the whole batch (max, mean, sample
/// std) and the Pearson correlation of the two probabilities, where `p = exp(log-prob)` of the
/// old (recomputed) and the rollout's log-probs.
pub(super) fn rollout_probs_diff<C: Communicator>(
    eng: &Engine<C>,
    samples: &[Sample],
) -> Result<Vec<(String, f64)>> {
    // (p_actor, p_rollout, |difference|) per response token.
    let points: Vec<[f64; 3]> = samples
        .iter()
        .flat_map(|s| s.old_logp.iter().zip(&s.rollout_logp))
        .map(|(&a, &r)| {
            let (x, y) = (f64::from(a.exp()), f64::from(r.exp()));
            [x, y, (x - y).abs()]
        })
        .collect();
    // Two passes over the ranks, means first, then centred sums: the collectives carry f32,
    // and raw sums of squares would cancel.
    let mut first = [points.len() as f32, 0.0, 0.0, 0.0];
    for p in &points {
        for (acc, v) in first[1..].iter_mut().zip(p) {
            *acc += *v as f32;
        }
    }
    eng.comm.all_reduce_sum(&mut first)?;
    let n = f64::from(first[0]);
    if n < 1.0 {
        return Ok(vec![("training/rollout_probs_diff_valid".into(), 0.0)]);
    }
    let [mx, my, md] = [1, 2, 3].map(|i| f64::from(first[i]) / n);
    let mut second = [0f32; 4];
    let mut max = 0f64;
    for &[x, y, d] in &points {
        let (cx, cy, cd) = (x - mx, y - my, d - md);
        for (acc, v) in second.iter_mut().zip([cd * cd, cx * cx, cy * cy, cx * cy]) {
            *acc += v as f32;
        }
        max = max.max(d);
    }
    eng.comm.all_reduce_sum(&mut second)?;
    let mut maxes = vec![0f32; eng.comm.world_size()];
    eng.comm.all_gather(&[max as f32], &mut maxes)?;
    let [sdd, sxx, syy, sxy] = second.map(f64::from);
    let std = if n > 1.0 {
        (sdd / (n - 1.0)).sqrt()
    } else {
        f64::NAN
    };
    Ok(vec![
        ("training/rollout_probs_diff_valid".into(), 1.0),
        (
            "training/rollout_probs_diff_max".into(),
            f64::from(maxes.iter().copied().fold(0f32, f32::max)),
        ),
        ("training/rollout_probs_diff_mean".into(), md),
        ("training/rollout_probs_diff_std".into(), std),
        (
            "training/rollout_actor_probs_pearson_corr".into(),
            sxy / (sxx * syy).sqrt(),
        ),
    ])
}

pub(super) fn step_metrics<C: Communicator>(
    eng: &Engine<C>,
    step: u64,
    samples: &[Sample],
    st: &crate::engine::UpdateStats,
    timing: BTreeMap<String, f64>,
    gen_batches: u64,
    val: Option<f64>,
) -> Result<StepMetrics> {
    let mut sums = [
        samples.iter().map(|s| s.reward).sum::<f32>(),
        samples.iter().map(|s| s.score).sum::<f32>(),
        samples.len() as f32,
        samples.iter().map(|s| s.response.len() as f32).sum::<f32>(),
        samples
            .iter()
            .map(|s| (s.prompt_ids.len() + s.response.len()) as f32)
            .sum::<f32>(),
        samples
            .iter()
            .filter(|s| s.response.last() != Some(&eng.tok.eos_id))
            .count() as f32,
    ];
    eng.comm.all_reduce_sum(&mut sums)?;
    let local_max = [
        samples.iter().map(|s| s.reward).fold(f32::MIN, f32::max),
        samples
            .iter()
            .map(|s| s.response.len() as f32)
            .fold(0.0, f32::max),
    ];
    let mut all = vec![0f32; 2 * eng.comm.world_size()];
    eng.comm.all_gather(&local_max, &mut all)?;
    let reward_max = all.iter().step_by(2).fold(f32::MIN, |a, b| a.max(*b));
    let len_max = all.iter().skip(1).step_by(2).fold(0f32, |a, b| a.max(*b));
    let cnt = sums[2].max(1.0) as f64;
    let step_s = timing.get("step").copied().unwrap_or(0.0);
    let mut values = BTreeMap::new();
    values.insert("critic/rewards/mean".into(), sums[0] as f64 / cnt);
    values.insert("critic/rewards/max".into(), reward_max as f64);
    values.insert("critic/score/mean".into(), sums[1] as f64 / cnt);
    values.insert("response_length/mean".into(), sums[3] as f64 / cnt);
    values.insert("response_length/max".into(), len_max as f64);
    values.insert("response_length/clip_ratio".into(), sums[5] as f64 / cnt);
    values.insert("actor/pg_loss".into(), st.pg_loss);
    values.insert("actor/kl_loss".into(), st.kl);
    values.insert("actor/entropy".into(), st.entropy);
    values.insert("actor/pg_clipfrac".into(), st.clipfrac);
    values.insert("actor/grad_norm".into(), st.grad_norm);
    values.insert("actor/lr".into(), eng.opt.current_lr());
    values.insert("train/num_gen_batches".into(), gen_batches as f64);
    values.insert("train/num_samples".into(), sums[2] as f64);
    if let Some(v) = val {
        values.insert("val/accuracy".into(), v);
    }
    Ok(StepMetrics {
        step,
        reward_mean: sums[0] as f64 / cnt,
        accuracy: sums[1] as f64 / cnt,
        tokens_per_s: if step_s > 0.0 {
            sums[4] as f64 / step_s
        } else {
            0.0
        },
        timing_s: timing,
        values,
    })
}
