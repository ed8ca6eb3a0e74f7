//! GRPO / DAPO numerics against hand-computed small cases.

use candle_core::{Device, Tensor};
use rlprof_trainer::algo::*;
use rlprof_trainer::config::LossAgg;

fn t(rows: &[&[f32]]) -> Tensor {
    let r = rows[0].len();
    let flat: Vec<f32> = rows.iter().flat_map(|x| x.iter().copied()).collect();
    Tensor::from_vec(flat, (rows.len(), r), &Device::Cpu).unwrap()
}

#[test]
fn grpo_advantage_is_group_normalised_with_unbiased_std() {
    // Group 1: rewards 1,0,0,1 -> mean 0.5, unbiased std sqrt(1/3) = 0.57735.
    // Group 2: all equal -> 0 advantage.
    let adv = grpo_advantages(&[1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0], 4, true);
    let a = 0.5 / (0.577_350_3 + ADV_EPS);
    let want = [a, -a, -a, a, 0.0, 0.0, 0.0, 0.0];
    for (g, w) in adv.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{adv:?}");
    }
    let centred = grpo_advantages(&[1.0, 0.0, 0.0, 1.0], 4, false);
    assert_eq!(centred, vec![0.5, -0.5, -0.5, 0.5]);
}

#[test]
fn dapo_filter_drops_constant_reward_groups() {
    let keep = informative_groups(&[1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], 3);
    assert_eq!(keep, vec![false, true, false]);
    let keep = informative_groups(&[0.0, 0.0, 0.5, 0.5], 2);
    assert_eq!(keep, vec![false, false]);
}

#[test]
fn low_var_kl_matches_the_k3_formula() {
    // logp = -1, ref = -1.5: kl = ref - logp = -0.5; exp(-0.5) + 0.5 - 1 = 0.10653066.
    assert!((low_var_kl(-1.0, -1.5) - 0.106_530_66).abs() < 1e-6);
    assert_eq!(low_var_kl(-2.0, -2.0), 0.0);
    assert_eq!(low_var_kl(0.0, 20.0), 10.0, "clamped");
}

#[test]
fn clip_higher_bounds_the_ratio_asymmetrically() {
    // ratio = e^0.5 = 1.6487; positive advantage 1: clipped at 1 + 0.28 -> loss -1.28.
    let l = ppo_token_loss(0.5, 0.0, 1.0, 0.2, 0.28);
    assert!((l + 1.28).abs() < 1e-6, "{l}");
    // Symmetric clip would give -1.2.
    assert!((ppo_token_loss(0.5, 0.0, 1.0, 0.2, 0.2) + 1.2).abs() < 1e-6);
    // ratio = e^-0.5 = 0.6065 with advantage -1: max(0.6065, 0.8) = 0.8 (lower clip).
    assert!((ppo_token_loss(-0.5, 0.0, -1.0, 0.2, 0.28) - 0.8).abs() < 1e-6);
    // Dual clip: huge ratio with negative advantage is capped at 3 * |adv|.
    assert!((ppo_token_loss(3.0, 0.0, -1.0, 0.2, 0.28) - 3.0).abs() < 1e-6);
}

#[test]
fn tensor_loss_equals_the_scalar_reference_and_aggregates_token_mean() {
    let logp = t(&[&[-0.5, -1.0, -2.0], &[-0.1, -0.3, 0.0]]);
    let old = t(&[&[-0.7, -1.0, -1.0], &[-0.4, -0.2, 0.0]]);
    let adv = t(&[&[1.0, 1.0, 1.0], &[-2.0, -2.0, -2.0]]);
    let mask = t(&[&[1.0, 1.0, 1.0], &[1.0, 1.0, 0.0]]);
    let zeros = t(&[&[0.0; 3], &[0.0; 3]]);
    let d = GlobalDenoms {
        tokens: 5.0,
        seqs: 2.0,
    };
    let s = LossSettings {
        clip_low: 0.2,
        clip_high: 0.28,
        kl_coef: 0.0,
        entropy_coeff: 0.0,
        agg: LossAgg::TokenMean,
    };
    let x = LossInputs {
        logp: &logp,
        entropy: &zeros,
        old_logp: &old,
        ref_logp: None,
        adv: &adv,
        mask: &mask,
    };
    let out = actor_loss(&x, s, d).unwrap();
    let (lp, ol, ad, mk) = (
        logp.to_vec2::<f32>().unwrap(),
        old.to_vec2::<f32>().unwrap(),
        adv.to_vec2::<f32>().unwrap(),
        mask.to_vec2::<f32>().unwrap(),
    );
    let mut tok_sum = 0.0;
    let mut seq_means = 0.0;
    for b in 0..2 {
        let mut row = 0.0;
        let mut n = 0.0;
        for i in 0..3 {
            let l = ppo_token_loss(lp[b][i], ol[b][i], ad[b][i], 0.2, 0.28) * mk[b][i];
            tok_sum += l;
            row += l;
            n += mk[b][i];
        }
        seq_means += row / n;
    }
    let token_mean = tok_sum / 5.0;
    assert!((out.loss.to_scalar::<f32>().unwrap() - token_mean).abs() < 1e-6);
    let seq = actor_loss(
        &x,
        LossSettings {
            agg: LossAgg::SeqMeanTokenMean,
            ..s
        },
        d,
    )
    .unwrap();
    assert!((seq.loss.to_scalar::<f32>().unwrap() - seq_means / 2.0).abs() < 1e-6);
    assert!(
        (token_mean - seq_means / 2.0).abs() > 1e-3,
        "the two modes must differ here"
    );
}

#[test]
fn kl_term_uses_low_var_kl_with_its_coefficient() {
    let logp = t(&[&[-1.0, -2.0]]);
    let reff = t(&[&[-1.5, -2.0]]);
    let zeros = t(&[&[0.0, 0.0]]);
    let mask = t(&[&[1.0, 1.0]]);
    let x = LossInputs {
        logp: &logp,
        entropy: &zeros,
        old_logp: &logp,
        ref_logp: Some(&reff),
        adv: &zeros,
        mask: &mask,
    };
    let s = LossSettings {
        clip_low: 0.2,
        clip_high: 0.2,
        kl_coef: 0.5,
        entropy_coeff: 0.0,
        agg: LossAgg::TokenMean,
    };
    let out = actor_loss(
        &x,
        s,
        GlobalDenoms {
            tokens: 2.0,
            seqs: 1.0,
        },
    )
    .unwrap();
    let kl = (low_var_kl(-1.0, -1.5) + low_var_kl(-2.0, -2.0)) / 2.0;
    assert!((out.kl - kl).abs() < 1e-6);
    assert!((out.loss.to_scalar::<f32>().unwrap() - 0.5 * kl).abs() < 1e-6);
}
