//! Sharded data parallelism: two in-process ranks end with the same parameters as one rank given
//! the same global batch, and each rank holds only its shard of the optimizer state.

use rlprof_config::parse_yaml;
use rlprof_trainer::TrainConfig;
use rlprof_trainer::comm::{Communicator, InProcess};
use rlprof_trainer::engine::{Engine, Sample};
use rlprof_trainer::job::build_engine;

fn cfg(world: usize) -> TrainConfig {
    let doc = parse_yaml(&format!(
        "data: {{train_batch_size: 4}}
actor_rollout_ref:
  model: {{hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 64}}
  actor: {{ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 1, ppo_epochs: 2, use_kl_loss: true, kl_loss_coef: 0.1, optim: {{lr: 0.01}}}}
  rollout: {{n: 2}}
trainer: {{n_gpus_per_node: {world}, seed: 3}}"
    ))
    .unwrap();
    TrainConfig::from_doc(&doc).unwrap()
}

/// Eight samples (4 prompts x 2) with fixed rewards-derived advantages.
fn global_batch<C: Communicator>(eng: &Engine<C>) -> Vec<Sample> {
    let rows = [
        ("1+2=", "3", 1.0),
        ("1+2=", "4", -1.0),
        ("33+4=", "37", 0.5),
        ("33+4=", "38", -0.5),
        ("5+5=", "10", 1.0),
        ("5+5=", "1", -1.0),
        ("71+20=", "91", 0.7),
        ("71+20=", "19", -0.7),
    ];
    rows.iter()
        .enumerate()
        .map(|(i, (p, r, adv))| {
            let mut resp = eng.tok.encode(r).unwrap();
            resp.push(eng.tok.eos_id);
            Sample {
                group: i / 2,
                prompt_ids: eng.tok.encode(p).unwrap(),
                response: resp,
                score: 0.0,
                reward: 0.0,
                adv: *adv,
                old_logp: vec![],
                rollout_logp: vec![],
                ref_logp: vec![],
                token_adv: vec![],
                values: vec![],
                returns: vec![],
            }
        })
        .collect()
}

fn update(eng: &mut Engine<InProcess>, mut samples: Vec<Sample>) -> Vec<f32> {
    eng.reset_optimizer(rlprof_trainer::optim::AdamW {
        lr: 0.01,
        warmup_steps: 0,
        weight_decay: 0.01,
        betas: (0.9, 0.999),
        eps: 1e-8,
    });
    eng.freeze_reference().unwrap();
    eng.log_probs(&mut samples, false).unwrap();
    eng.log_probs(&mut samples, true).unwrap();
    eng.update_actor(&samples, 1).unwrap();
    eng.actor_flat().to_vec()
}

#[test]
fn two_ranks_match_one_rank_and_shard_the_optimizer() {
    // One rank: its mini-batch j must hold what the two ranks' local chunk j hold together.
    // Rank r gets samples [4r, 4r+4) and splits them into two mini-batches of 2.
    let c1 = cfg(1);
    let mut e1 = build_engine(&c1, InProcess::group(1).pop().unwrap()).unwrap();
    let all = global_batch(&e1);
    let order = [0, 1, 4, 5, 2, 3, 6, 7];
    let one_rank_batch: Vec<Sample> = order.iter().map(|&i| all[i].clone()).collect();
    let before = e1.actor_flat().to_vec();
    let p1 = update(&mut e1, one_rank_batch);
    let n = p1.len();
    assert_eq!(e1.opt.state_len(), n);
    assert!(
        p1.iter().zip(&before).any(|(a, b)| a != b),
        "the update changed nothing"
    );

    let c2 = cfg(2);
    let handles: Vec<_> = InProcess::group(2)
        .into_iter()
        .map(|comm| {
            let c2 = c2.clone();
            std::thread::spawn(move || {
                let r = comm.rank();
                let mut e = build_engine(&c2, comm).unwrap();
                let all = global_batch(&e);
                let mine = all[4 * r..4 * r + 4].to_vec();
                let p = update(&mut e, mine);
                (p, e.opt.state_len())
            })
        })
        .collect();
    let outs: Vec<(Vec<f32>, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (r, (p, state)) in outs.iter().enumerate() {
        assert_eq!(*state, n.div_ceil(2), "rank {r} holds only its shard");
        let max_diff = p
            .iter()
            .zip(&p1)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(max_diff < 2e-5, "rank {r}: max |diff| {max_diff}");
    }
    assert_eq!(
        outs[0].0, outs[1].0,
        "ranks agree exactly after the all-gather"
    );
}

fn gae_cfg(world: usize) -> TrainConfig {
    let doc = parse_yaml(&format!(
        "data: {{train_batch_size: 4}}
actor_rollout_ref:
  model: {{hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 64}}
  actor: {{ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 1, ppo_epochs: 2}}
  rollout: {{n: 2}}
critic: {{ppo_micro_batch_size_per_gpu: 1, cliprange_value: 0.2, optim: {{lr: 0.01}}}}
algorithm: {{adv_estimator: gae, gamma: 0.9, lam: 0.8}}
trainer: {{n_gpus_per_node: {world}, seed: 3}}"
    ))
    .unwrap();
    TrainConfig::from_doc(&doc).unwrap()
}

/// compute_values, GAE (whitened over all ranks) and two critic updates; the critic's params.
fn critic_update(eng: &mut Engine<InProcess>, mut samples: Vec<Sample>) -> (Vec<f32>, usize) {
    let mut critic = eng.new_critic().unwrap().expect("a gae job has a critic");
    for s in samples.iter_mut() {
        s.reward = s.adv;
    }
    for step in 1..=2 {
        eng.compute_values(&critic, &mut samples).unwrap();
        eng.gae_advantages(&mut samples).unwrap();
        let st = eng.update_critic(&mut critic, &samples, step).unwrap();
        assert!(st.vf_loss.is_finite() && st.updates == 4, "{st:?}");
    }
    let (p, state) = critic.flat_and_state_len();
    (p.to_vec(), state)
}

#[test]
fn the_critic_on_two_ranks_matches_one_rank() {
    let c1 = gae_cfg(1);
    let mut e1 = build_engine(&c1, InProcess::group(1).pop().unwrap()).unwrap();
    let all = global_batch(&e1);
    let order = [0, 1, 4, 5, 2, 3, 6, 7];
    let one: Vec<Sample> = order.iter().map(|&i| all[i].clone()).collect();
    let (p1, s1) = critic_update(&mut e1, one);
    assert_eq!(s1, p1.len());
    let c2 = gae_cfg(2);
    let handles: Vec<_> = InProcess::group(2)
        .into_iter()
        .map(|comm| {
            let c2 = c2.clone();
            std::thread::spawn(move || {
                let r = comm.rank();
                let mut e = build_engine(&c2, comm).unwrap();
                let all = global_batch(&e);
                critic_update(&mut e, all[4 * r..4 * r + 4].to_vec())
            })
        })
        .collect();
    for (r, h) in handles.into_iter().enumerate() {
        let (p, state) = h.join().unwrap();
        assert_eq!(state, p1.len().div_ceil(2), "rank {r} holds only its shard");
        // The two runs sum each gradient in a different order (one rank's micro-batches vs two
        // ranks' partial sums reduce-scattered), so they agree to rounding, not bit for bit.
        // Adam's first steps divide a gradient by its own magnitude: a parameter whose gradient
        // is near Adam's eps turns that rounding into an update difference of up to ~1e-3 of
        // lr (0.01) here. So the bulk must agree to 5e-6 and every parameter to 1% of one lr
        // step; a shard mix-up moves thousands of parameters by ~lr.
        let diffs: Vec<f32> = p.iter().zip(&p1).map(|(a, b)| (a - b).abs()).collect();
        let max_diff = diffs.iter().copied().fold(0f32, f32::max);
        let loose = diffs.iter().filter(|&&d| d > 5e-6).count();
        assert!(max_diff < 1e-4, "rank {r}: max |diff| {max_diff}");
        assert!(
            loose * 1000 < diffs.len(),
            "rank {r}: {loose} of {} parameters differ by more than 5e-6",
            diffs.len()
        );
    }
}
