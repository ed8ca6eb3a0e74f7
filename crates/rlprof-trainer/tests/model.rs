//! The model: KV-cache decoding equals uncached decoding, every weight gets a gradient, the
//! Hugging Face directory round-trips, and bad checkpoints give errors naming the file.

use candle_core::Device;
use rlprof_config::parse_yaml;
use rlprof_trainer::TrainConfig;
use rlprof_trainer::checkpoint::{load_hf, save_hf};
use rlprof_trainer::comm::InProcess;
use rlprof_trainer::engine::{Engine, Sample, Sampling, SeqBatch};
use rlprof_trainer::job::build_engine;
use rlprof_trainer::model::{Attn, Transformer, ids_tensor};

fn cfg(model_path: &str) -> TrainConfig {
    let doc = parse_yaml(&format!(
        "actor_rollout_ref: {{model: {{path: '{model_path}', hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 64, tie_word_embeddings: false}}}}\ntrainer: {{seed: 7}}\n"
    ))
    .unwrap();
    TrainConfig::from_doc(&doc).unwrap()
}

fn one_rank() -> InProcess {
    InProcess::group(1).pop().unwrap()
}

#[test]
fn kv_cache_greedy_decoding_equals_uncached_decoding() {
    let eng = build_engine(&cfg(""), one_rank()).unwrap();
    // A repeated prompt: the prefill runs it once and hands its cache to both rows.
    let prompts: Vec<Vec<u32>> = ["12+7=", "3+45=", "9=", "3+45="]
        .iter()
        .map(|p| eng.tok.encode(p).unwrap())
        .collect();
    let s = Sampling {
        temperature: 1.0,
        top_p: 1.0,
        top_k: -1,
        do_sample: false,
        max_tokens: 8,
        seed: 1,
        ignore_eos: false,
    };
    // Batched (left-padded prompts of different lengths) with the cache...
    let cached = eng
        .generate_rows(eng.rollout_model(), &prompts, s, 0)
        .unwrap();
    // ...equals one-at-a-time full recomputation.
    for (p, c) in prompts.iter().zip(&cached) {
        let u = eng.generate_greedy_uncached(p, 8).unwrap();
        assert_eq!(&u, c, "prompt {p:?}");
    }
    assert!(
        cached.iter().any(|c| c.len() == 8),
        "random weights rarely stop early"
    );
}

/// A scored-nothing-yet sample of prompt `p` with response `r`.
fn sample(eng: &Engine<InProcess>, p: &str, r: &str) -> Sample {
    Sample {
        group: 0,
        prompt_ids: eng.tok.encode(p).unwrap(),
        response: eng.tok.encode(r).unwrap(),
        score: 0.0,
        reward: 0.0,
        adv: 0.0,
        old_logp: vec![],
        rollout_logp: vec![],
        ref_logp: vec![],
        token_adv: vec![],
        values: vec![],
        returns: vec![],
    }
}

#[test]
fn every_trainable_weight_receives_a_nonzero_gradient() {
    let eng = build_engine(&cfg(""), one_rank()).unwrap();
    let norms = eng
        .grad_norms(&[sample(&eng, "1+2=", "3"), sample(&eng, "40+2=", "42")])
        .unwrap();
    assert_eq!(norms.len(), eng.actor.names().len());
    let zero: Vec<_> = norms
        .iter()
        .filter(|(_, n)| *n == 0.0 || !n.is_finite())
        .collect();
    assert!(zero.is_empty(), "weights without gradient: {zero:?}");
}

#[test]
fn shared_prompt_pass_equals_the_full_pass_on_values_and_gradients() {
    let eng = build_engine(&cfg(""), one_rank()).unwrap();
    // Prompts of different lengths (left padding in the prefix), each shared by some rows, and
    // responses of different lengths (right padding in the suffix).
    let rows = [
        ("12+7=", "19"),
        ("3+45=", "48;"),
        ("12+7=", "1"),
        ("9=", "9;;"),
        ("3+45=", "4"),
        ("12+7=", "20;"),
    ];
    let samples: Vec<Sample> = rows.iter().map(|(p, r)| sample(&eng, p, r)).collect();
    let refs: Vec<&Sample> = samples.iter().collect();
    let dev = Device::Cpu;
    let pad = eng.tok.pad_id;
    let (shared, full) = (
        SeqBatch::with_sharing(&refs, pad, &dev, true).unwrap(),
        SeqBatch::with_sharing(&refs, pad, &dev, false).unwrap(),
    );
    assert!(shared.is_shared() && !full.is_shared());
    let cfg = eng.rollout_model().config.clone();
    let close = |a: &candle_core::Tensor, b: &candle_core::Tensor, what: &str| {
        let (a, b) = (
            a.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            b.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        );
        assert_eq!(a.len(), b.len(), "{what}");
        let scale = b.iter().fold(1e-3f32, |m, x| m.max(x.abs()));
        let err = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            err <= 1e-5 * scale.max(1.0),
            "{what}: max error {err} (scale {scale})"
        );
    };
    // No-grad model: log-probs only.
    let eval = Transformer::new(&cfg, &eng.actor, false).unwrap();
    close(
        &shared.logprobs_only(&eval, 0.7).unwrap(),
        &full.logprobs_only(&eval, 0.7).unwrap(),
        "no-grad log-probs",
    );
    // Trainable model: log-probs, entropies and every weight's gradient.
    let train = Transformer::new(&cfg, &eng.actor, true).unwrap();
    let mut grads = Vec::new();
    for b in [&shared, &full] {
        let (lp, ent) = b.logprobs(&train, 0.7).unwrap();
        let loss = lp
            .mul(&b.mask)
            .unwrap()
            .sum_all()
            .unwrap()
            .add(
                &ent.mul(&b.mask)
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .affine(0.1, 0.0)
                    .unwrap(),
            )
            .unwrap();
        let gs = loss.backward().unwrap();
        grads.push((lp, ent, gs));
    }
    close(&grads[0].0, &grads[1].0, "log-probs");
    close(&grads[0].1, &grads[1].1, "entropies");
    for (n, v) in eng.actor.names().iter().zip(eng.actor.vars()) {
        let (a, b) = (
            grads[0].2.get(v.as_tensor()).unwrap(),
            grads[1].2.get(v.as_tensor()).unwrap(),
        );
        close(a, b, n);
    }
}

#[test]
fn hugging_face_directory_round_trips() {
    let eng = build_engine(&cfg(""), one_rank()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hf = dir.path().join("hf");
    save_hf(&hf, &eng.mcfg, &eng.actor, &eng.tok).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(hf.join(f).is_file(), "{f}");
    }
    let (c2, p2, t2) = load_hf(&hf, &Device::Cpu).unwrap();
    assert_eq!(c2, eng.mcfg);
    assert_eq!(p2.flat().unwrap(), eng.actor.flat().unwrap());
    assert_eq!(t2.encode("5+5=").unwrap(), eng.tok.encode("5+5=").unwrap());
    // A job pointed at the directory loads it and computes the same logits.
    let path = hf.display().to_string();
    let loaded = build_engine(&cfg(&path), one_rank()).unwrap();
    let ids = vec![eng.tok.encode("12+3=").unwrap()];
    let attn = Attn::full(&[vec![true; 5]], &Device::Cpu).unwrap();
    let logits = |e: &rlprof_trainer::engine::Engine<InProcess>| {
        e.rollout_model()
            .forward(&ids_tensor(&ids, &Device::Cpu).unwrap(), &attn, None)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    };
    let (a, b) = (logits(&eng), logits(&loaded));
    assert_eq!(a, b);
}

#[test]
fn bad_checkpoints_name_the_file() {
    let eng = build_engine(&cfg(""), one_rank()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Missing directory.
    let missing = dir.path().join("nope");
    let e = load_hf(&missing, &Device::Cpu).err().unwrap().to_string();
    assert!(e.contains("nope") && e.contains("does not exist"), "{e}");
    // Missing tokenizer.
    let hf = dir.path().join("hf");
    save_hf(&hf, &eng.mcfg, &eng.actor, &eng.tok).unwrap();
    std::fs::remove_file(hf.join("tokenizer.json")).unwrap();
    let e = load_hf(&hf, &Device::Cpu).err().unwrap().to_string();
    assert!(
        e.contains("tokenizer.json") && e.contains("not found"),
        "{e}"
    );
    // Shape mismatch: config says a wider model than the weights.
    eng.tok.save(&hf.join("tokenizer.json")).unwrap();
    let mut c = eng.mcfg.clone();
    c.intermediate_size = 96;
    std::fs::write(hf.join("config.json"), serde_json::to_string(&c).unwrap()).unwrap();
    let e = load_hf(&hf, &Device::Cpu).err().unwrap().to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("shape"),
        "{e}"
    );
    // Garbage weights.
    std::fs::write(hf.join("model.safetensors"), b"not a safetensors file").unwrap();
    let e = load_hf(&hf, &Device::Cpu).err().unwrap().to_string();
    assert!(e.contains("model.safetensors"), "{e}");
    // Broken config.json.
    std::fs::write(hf.join("config.json"), "{").unwrap();
    let e = load_hf(&hf, &Device::Cpu).err().unwrap().to_string();
    assert!(e.contains("config.json"), "{e}");
}
