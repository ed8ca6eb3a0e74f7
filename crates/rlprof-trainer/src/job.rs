//! The training loop of one rank ([`run_rank`]) and of a whole in-process job ([`run`]): model
//! set-up, supervised warm-up, the GRPO/DAPO steps with their role calls and phase markers,
//! validation, metrics and checkpoints.

use crate::checkpoint;
use crate::comm::{Communicator, InProcess, Traced};
use crate::config::TrainConfig;
use crate::critic::Critic;
use crate::data::{Prompt, Source};
use crate::engine::{Engine, Sample, Sampling, mix};
use crate::error::{Result, TrainerError};
use crate::model::{ModelConfig, ParamStore};
use crate::optim::AdamW;
use crate::tokenizer::Tok;
use crate::{RunOptions, RunSummary, StepMetrics};
use candle_core::Device;
use rlprof_profiler::{Profiler, RankProfiler, RoleCall, phase};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

/// What a rank reports to the driver.
#[derive(Debug, Clone)]
pub enum Event {
    /// A supervised warm-up step finished: (step, total, loss).
    Warmup(u64, u64, f32),
    /// An RL step finished.
    Step(StepMetrics),
}

/// What one rank ends with.
#[derive(Debug, Clone)]
pub struct RankOutcome {
    /// RL steps run.
    pub steps: u64,
    /// Final actor parameters (flat).
    pub params: Vec<f32>,
    /// Optimizer state elements held by this rank.
    pub optimizer_state_len: usize,
    /// Parameters of the model.
    pub num_params: usize,
}

/// The device ranks compute on: CPU, or CUDA device `rank` on `cuda` builds.
pub fn device_for(rank: usize) -> Result<Device> {
    #[cfg(feature = "cuda")]
    {
        let n = candle_core::utils::cuda_is_available();
        if n {
            return Ok(Device::new_cuda(rank)?);
        }
    }
    let _ = rank;
    Ok(Device::Cpu)
}

/// The built-in tiny Qwen2-style model for the character tokenizer.
pub fn builtin_model(cfg: &TrainConfig, tok: &Tok) -> ModelConfig {
    let m = &cfg.model;
    ModelConfig {
        architectures: vec!["Qwen2ForCausalLM".into()],
        model_type: "qwen2".into(),
        vocab_size: tok.vocab_size(),
        hidden_size: m.hidden_size,
        intermediate_size: m.intermediate_size,
        num_hidden_layers: m.num_hidden_layers,
        num_attention_heads: m.num_attention_heads,
        num_key_value_heads: Some(m.num_key_value_heads),
        max_position_embeddings: 512,
        rms_norm_eps: 1e-6,
        rope_theta: 10000.0,
        tie_word_embeddings: m.tie_word_embeddings,
        attention_bias: Some(true),
        bos_token_id: None,
        eos_token_id: Some(tok.eos_id),
        torch_dtype: "float32".into(),
    }
}

fn rl_hparams(cfg: &TrainConfig) -> AdamW {
    AdamW {
        lr: cfg.actor.lr,
        warmup_steps: cfg.actor.lr_warmup_steps,
        weight_decay: cfg.actor.weight_decay,
        betas: cfg.actor.betas,
        eps: 1e-8,
    }
}

fn sft_hparams(cfg: &TrainConfig) -> AdamW {
    AdamW {
        lr: cfg.trainer.sft_lr,
        warmup_steps: 5,
        weight_decay: 0.0,
        betas: (0.9, 0.99),
        eps: 1e-8,
    }
}

/// Builds a rank's engine: loads `model.path` or initialises the built-in model.
pub fn build_engine<C: Communicator>(cfg: &TrainConfig, comm: C) -> Result<Engine<C>> {
    let device = device_for(comm.rank())?;
    let (mcfg, params, tok) = match &cfg.model.path {
        Some(p) => checkpoint::load_hf(p, &device)?,
        None => {
            let tok = Tok::builtin()?;
            let mcfg = builtin_model(cfg, &tok);
            let params = ParamStore::init(&mcfg, cfg.trainer.seed, &device)?;
            (mcfg, params, tok)
        }
    };
    Engine::new(cfg.clone(), comm, mcfg, tok, params, sft_hparams(cfg))
}

/// Runs the whole job on one rank. `report` receives rank-level events (the caller forwards
/// rank 0's to the user).
pub fn run_rank<C: Communicator>(
    cfg: &TrainConfig,
    rp: &RankProfiler,
    comm: C,
    max_steps: Option<u64>,
    report: &mut dyn FnMut(Event),
) -> Result<RankOutcome> {
    let mut eng = build_engine(cfg, comm)?;
    #[cfg(feature = "cuda")]
    let _cuda = crate::cuda::attach(rp, eng.actor.device(), &ranks_in_process(&eng.comm))?;
    let result = train(&mut eng, rp, max_steps, report);
    if let Err(e) = &result {
        eng.comm.abort_with(&e.to_string());
    }
    result
}

/// The ranks that share this process: all of an in-process job's, or this one under MPI.
#[cfg(feature = "cuda")]
fn ranks_in_process<C: Communicator>(comm: &C) -> Vec<u32> {
    if crate::comm::launcher_world().is_some() {
        vec![comm.rank() as u32]
    } else {
        (0..comm.world_size() as u32).collect()
    }
}

fn train<C: Communicator>(
    eng: &mut Engine<C>,
    rp: &RankProfiler,
    max_steps: Option<u64>,
    report: &mut dyn FnMut(Event),
) -> Result<RankOutcome> {
    let cfg = eng.cfg.clone();
    sft_warmup(eng, &cfg, report)?;
    if cfg.actor.use_kl_loss {
        eng.freeze_reference()?;
    }
    eng.reset_optimizer(rl_hparams(&cfg));
    let mut critic = eng.new_critic()?;
    let mut start = 1;
    if let Some(step) = resume_point(&cfg)? {
        resume(eng, &cfg, step)?;
        start = step + 1;
    }
    eng.sync_rollout_weights()?;
    let total = max_steps.unwrap_or(cfg.trainer.total_training_steps);
    let mut source = Source::train(&cfg.data, cfg.data.seed)?;
    for _ in 1..start {
        source.next_batch(cfg.data.train_batch_size);
    }
    let mut steps = 0;
    for step in start..=total {
        let m = rl_step(eng, critic.as_mut(), rp, step, &mut source)?;
        if eng.comm.rank() == 0 {
            report(Event::Step(m));
        }
        let sf = cfg.trainer.save_freq;
        if sf > 0 && (step.is_multiple_of(sf) || step == total) {
            save(eng, &cfg, step)?;
        }
        steps += 1;
    }
    Ok(RankOutcome {
        steps,
        params: eng.actor_flat().to_vec(),
        optimizer_state_len: eng.opt.state_len(),
        num_params: eng.actor.len(),
    })
}

fn resume_point(cfg: &TrainConfig) -> Result<Option<u64>> {
    let root = &cfg.trainer.default_local_dir;
    match cfg.trainer.resume_mode.as_str() {
        "disable" => Ok(None),
        "auto" => Ok(checkpoint::latest(root)),
        other => {
            let p = std::path::Path::new(other);
            let step = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("global_step_"))
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| {
                    TrainerError::Config(vec![format!(
                        "trainer.resume_mode: '{other}' is not disable, auto or a global_step_N directory"
                    )])
                })?;
            Ok(Some(step))
        }
    }
}

fn resume<C: Communicator>(eng: &mut Engine<C>, cfg: &TrainConfig, step: u64) -> Result<()> {
    let dir = checkpoint::actor_dir(&cfg.trainer.default_local_dir, step);
    let (_, params, _) = checkpoint::load_hf(&dir.join("huggingface"), &Device::Cpu)?;
    let flat = params.flat()?;
    if flat.len() != eng.actor.len() {
        return Err(TrainerError::checkpoint(
            &dir,
            "checkpoint model does not match the configured model",
        ));
    }
    eng.load_actor_flat(&flat)?;
    checkpoint::load_optim(&dir, eng.comm.world_size(), eng.comm.rank(), &mut eng.opt)?;
    tracing::info!("resumed from {} (step {step})", dir.display());
    Ok(())
}

fn save<C: Communicator>(eng: &Engine<C>, cfg: &TrainConfig, step: u64) -> Result<()> {
    let root = &cfg.trainer.default_local_dir;
    let (rank, world) = (eng.comm.rank(), eng.comm.world_size());
    let model = (rank == 0).then_some((&eng.mcfg, &eng.actor, &eng.tok));
    checkpoint::save_actor(root, step, rank, world, model, &eng.opt)?;
    eng.comm.barrier()?;
    if rank == 0 {
        checkpoint::mark_latest(root, step)?;
    }
    Ok(())
}

/// Supervised warm-up on the task's reference answers so that RL starts with non-zero reward.
fn sft_warmup<C: Communicator>(
    eng: &mut Engine<C>,
    cfg: &TrainConfig,
    report: &mut dyn FnMut(Event),
) -> Result<()> {
    let total = cfg.trainer.sft_warmup_steps;
    if total == 0 {
        return Ok(());
    }
    let (rank, world) = (eng.comm.rank(), eng.comm.world_size());
    let global = (cfg.data.train_batch_size * 4).div_ceil(world) * world;
    let local = global / world;
    let mut src = Source::train(&cfg.data, mix(cfg.data.seed, 0x5f7))?;
    for step in 1..=total {
        let batch = src.next_batch(global);
        let mut rows = Vec::with_capacity(local);
        for p in &batch[rank * local..(rank + 1) * local] {
            let target = p.solution.clone().unwrap_or_else(|| p.ground_truth.clone());
            let mut t = eng.tok.encode(&target)?;
            t.push(eng.tok.eos_id);
            rows.push((eng.tok.encode(&p.text)?, t));
        }
        let loss = eng.sft_step(&rows, 0)?;
        if rank == 0 {
            if step % 20 == 0 || step == total {
                tracing::info!("warm-up step {step}/{total}: loss {loss:.4}");
            }
            report(Event::Warmup(step, total, loss));
        }
    }
    Ok(())
}

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
fn rl_step<C: Communicator>(
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
            let _ph = phase("old_log_prob");
            eng.log_probs(&mut samples, false)
        })?;
    }
    if cfg.actor.use_kl_loss {
        timed(&mut timing, "ref", || {
            let _call = rp.role_call(RoleCall::ComputeRefLogProb);
            let _ph = phase("ref");
            eng.log_probs(&mut samples, true)
        })?;
    }
    let gae = cfg.algorithm.adv_estimator == crate::config::AdvEstimator::Gae;
    if let Some(c) = critic.as_deref() {
        timed(&mut timing, "values", || {
            let _call = rp.role_call(RoleCall::ComputeValues);
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
            let _ph = phase("update_critic");
            eng.update_critic(c, &samples, step)
        })?),
        None => None,
    };
    let stats = timed(&mut timing, "update_actor", || {
        let _call = rp.role_call(RoleCall::UpdateActor);
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

/// verl's rollout-vs-actor debug metrics (`verl.utils.debug.metrics.calculate_debug_metrics`):
/// `|p_actor - p_rollout|` over every response token of the whole batch (max, mean, sample
/// std) and the Pearson correlation of the two probabilities, where `p = exp(log-prob)` of the
/// old (recomputed) and the rollout's log-probs.
fn rollout_probs_diff<C: Communicator>(
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

fn step_metrics<C: Communicator>(
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

/// Gives each of `local_ranks` ranks of this process its share of the cores for candle's CPU
/// kernels (once per process: the first job's share stays), unless the user set `CANDLE_NUM_THREADS` / `RAYON_NUM_THREADS`. Must run before the
/// first tensor op. Without it, every rank thread feeds candle's one global spinning thread pool
/// and the ranks spin against each other (measured: 3.9x slower steps with 2 ranks on 2 cores).
pub fn configure_engine_threads(local_ranks: usize) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_rank = (cores / local_ranks.max(1)).max(1).to_string();
        for var in ["CANDLE_NUM_THREADS", "RAYON_NUM_THREADS"] {
            if std::env::var_os(var).is_none() {
                // SAFETY: once per process, before this job's rank threads and tensor ops start.
                // Rust's own environment reads (other threads' `std::env::var`) take the same
                // lock as this write; no C code of this process reads the environment on another
                // thread at this point (MPI and CUDA are called from the rank threads, later).
                unsafe { std::env::set_var(var, &per_rank) };
            }
        }
    });
}

/// Keeps freed tensor memory in glibc's heap instead of returning it to the kernel after every
/// op (tensors of a few hundred KiB are mmap'ed and page-faulted afresh by default; measured ~20%
/// of `update_actor` on the peer workload). Process-wide: call it from a program's `main`.
pub fn tune_host_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocation thresholds; valid at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// Runs this process's one rank of a job whose ranks are separate processes (`comm` connects
/// them, e.g. MPI under `mpirun`). The communicator's world size must equal
/// `trainer.nnodes * trainer.n_gpus_per_node`. Rank 0 writes the metrics and calls the
/// callbacks; the summary's `final_params` are this rank's (identical on every rank).
pub fn run_process<C: Communicator>(
    doc: &rlprof_profiler::config::Node,
    profiler: Profiler,
    opts: RunOptions,
    comm: C,
) -> Result<RunSummary> {
    let cfg = TrainConfig::from_doc(doc)?;
    let (rank, world) = (comm.rank(), comm.world_size());
    if world != cfg.world_size() {
        return Err(TrainerError::Config(vec![format!(
            "trainer.nnodes * trainer.n_gpus_per_node = {} x {} = {} ranks, but the launcher \
             started {world} processes; make them equal (e.g. mpirun -np {} or \
             trainer.n_gpus_per_node={})",
            cfg.trainer.nnodes,
            cfg.trainer.n_gpus_per_node,
            cfg.world_size(),
            cfg.world_size(),
            world / cfg.trainer.nnodes.max(1) as usize,
        )]));
    }
    // Ranks sharing this host share its cores (MPICH: MPI_LOCALNRANKS, OpenMPI: ..._LOCAL_SIZE).
    let local = ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse::<usize>().ok())
        .unwrap_or(1);
    configure_engine_threads(local);
    let t0 = Instant::now();
    let metrics_path = opts
        .metrics_path
        .clone()
        .unwrap_or_else(|| default_metrics_path(&cfg));
    let writer = match rank {
        0 => Some(MetricsWriter::create(&metrics_path)?),
        _ => None,
    };
    let rp = profiler.rank(rank as u32);
    let _bound = rp.bind_thread();
    let mut sink = EventSink::new(&opts, writer);
    let mut report = |ev: Event| sink.deliver(ev);
    let out = run_rank(&cfg, &rp, Traced::new(comm), opts.max_steps, &mut report)?;
    let metrics = sink.finish()?;
    Ok(RunSummary {
        steps: out.steps,
        world_size: world as u32,
        wall_s: t0.elapsed().as_secs_f64(),
        metrics_path,
        metrics,
        final_params: out.params,
        optimizer_state_len: vec![out.optimizer_state_len],
        num_params: out.num_params,
    })
}

/// `{default_local_dir}/metrics-{ms}-{pid}.jsonl`: the process id keeps two runs started in the
/// same millisecond apart (and [`MetricsWriter::create`] never opens an existing file).
fn default_metrics_path(cfg: &TrainConfig) -> std::path::PathBuf {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    // Several runs of one process (tests, notebooks) get a sequence number too.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    let name = match seq {
        0 => format!("metrics-{ts}-{pid}.jsonl"),
        n => format!("metrics-{ts}-{pid}-{n}.jsonl"),
    };
    cfg.trainer.default_local_dir.join(name)
}

/// Runs the job with `trainer.nnodes * trainer.n_gpus_per_node` in-process ranks.
pub fn run(
    doc: &rlprof_profiler::config::Node,
    profiler: Profiler,
    opts: RunOptions,
) -> Result<RunSummary> {
    let cfg = TrainConfig::from_doc(doc)?;
    let world = cfg.world_size();
    configure_engine_threads(world);
    let t0 = Instant::now();
    let metrics_path = opts
        .metrics_path
        .clone()
        .unwrap_or_else(|| default_metrics_path(&cfg));
    let writer = MetricsWriter::create(&metrics_path)?;
    let (tx, rx) = std::sync::mpsc::channel::<Event>();
    let mut handles = Vec::new();
    for comm in InProcess::group(world) {
        let (cfg, prof, tx) = (cfg.clone(), profiler.clone(), tx.clone());
        let max = opts.max_steps;
        let rank = comm.rank();
        let aborter = comm.aborter();
        let h = std::thread::Builder::new()
            .name(format!("rank-{rank}"))
            .spawn(move || {
                let rp = prof.rank(rank as u32);
                let _bound = rp.bind_thread();
                let mut send = |e: Event| {
                    let _ = tx.send(e);
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_rank(&cfg, &rp, Traced::new(comm), max, &mut send)
                }));
                match r {
                    Ok(r) => r,
                    Err(p) => {
                        aborter();
                        Err(TrainerError::RankPanicked {
                            rank,
                            message: panic_message(&p),
                        })
                    }
                }
            })
            .map_err(|e| TrainerError::Comm(format!("cannot start rank {rank}: {e}")))?;
        handles.push(h);
    }
    drop(tx);
    let mut sink = EventSink::new(&opts, Some(writer));
    for ev in rx {
        sink.deliver(ev);
    }
    let mut outcomes = Vec::new();
    let mut first_err: Option<TrainerError> = None;
    for (rank, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(o)) => outcomes.push(o),
            Ok(Err(e)) => {
                // Keep the root cause, not the peers' "collective abandoned" follow-ups.
                let follow_up = matches!(e, TrainerError::Comm(_));
                if first_err.is_none()
                    || (!follow_up && matches!(first_err, Some(TrainerError::Comm(_))))
                {
                    first_err = Some(e);
                }
            }
            Err(p) => {
                first_err = first_err.or(Some(TrainerError::RankPanicked {
                    rank,
                    message: panic_message(&p),
                }))
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let metrics = sink.finish()?;
    Ok(RunSummary {
        steps: outcomes.first().map_or(0, |o| o.steps),
        world_size: world as u32,
        wall_s: t0.elapsed().as_secs_f64(),
        metrics_path,
        metrics,
        final_params: outcomes
            .first()
            .map(|o| o.params.clone())
            .unwrap_or_default(),
        optimizer_state_len: outcomes.iter().map(|o| o.optimizer_state_len).collect(),
        num_params: outcomes.first().map_or(0, |o| o.num_params),
    })
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Delivers rank 0's events: metrics file, the caller's callbacks, the summary's list. A write
/// failure is kept and returned by [`EventSink::finish`], after the ranks have been joined.
struct EventSink<'a> {
    opts: &'a RunOptions,
    writer: Option<MetricsWriter>,
    metrics: Vec<StepMetrics>,
    error: Option<TrainerError>,
}

impl<'a> EventSink<'a> {
    fn new(opts: &'a RunOptions, writer: Option<MetricsWriter>) -> EventSink<'a> {
        EventSink {
            opts,
            writer,
            metrics: Vec::new(),
            error: None,
        }
    }

    fn deliver(&mut self, ev: Event) {
        match ev {
            Event::Warmup(s, t, loss) => {
                if let Some(cb) = &self.opts.on_warmup {
                    cb(s, t, loss);
                }
            }
            Event::Step(m) => {
                if let Some(Err(e)) = self.writer.as_mut().map(|w| w.write(&m)) {
                    self.error.get_or_insert(e);
                }
                if let Some(cb) = &self.opts.on_step {
                    cb(&m);
                }
                self.metrics.push(m);
            }
        }
    }

    fn finish(self) -> Result<Vec<StepMetrics>> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.metrics),
        }
    }
}

/// Per-step metrics as JSON lines (verl's metric names plus `step`, `timing_s/*`).
struct MetricsWriter {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl MetricsWriter {
    fn create(path: &std::path::Path) -> Result<MetricsWriter> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| TrainerError::io(d, e))?;
        }
        // A new file only: another run's metrics are never truncated.
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| TrainerError::io(path, e))?;
        Ok(MetricsWriter {
            file,
            path: path.to_path_buf(),
        })
    }

    fn write(&mut self, m: &StepMetrics) -> Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("step".into(), m.step.into());
        for (k, v) in &m.values {
            obj.insert(k.clone(), (*v).into());
        }
        for (k, v) in &m.timing_s {
            obj.insert(format!("timing_s/{k}"), (*v).into());
        }
        obj.insert("perf/throughput".into(), m.tokens_per_s.into());
        let line = serde_json::Value::Object(obj).to_string();
        writeln!(self.file, "{line}").map_err(|e| TrainerError::io(&self.path, e))
    }
}
