//! The training loop of one rank ([`run_rank`]) and of a whole in-process job ([`run`]): model
//! set-up, supervised warm-up, the GRPO/DAPO steps with their role calls and phase markers,
//! validation, metrics and checkpoints.

mod metrics;
mod process;
mod resume;
mod sink;
mod step;

pub use process::{configure_engine_threads, run, run_process, tune_host_allocator};

use self::resume::{resume, resume_point, save};
use self::step::rl_step;
use crate::StepMetrics;
use crate::checkpoint;
use crate::comm::Communicator;
use crate::config::TrainConfig;
use crate::data::Source;
use crate::engine::{Engine, mix};
use crate::error::Result;
use crate::model::{ModelConfig, ParamStore};
use crate::optim::AdamW;
use crate::tokenizer::Tok;
use candle_core::Device;
use rlprof_profiler::RankProfiler;

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
        vocab_size: tok.vocab_size().max(m.vocab_size),
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
