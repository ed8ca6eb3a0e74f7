//! Checkpoints of the rank loop: where to resume (`trainer.resume_mode`), loading the actor and
//! its optimizer shard from a `global_step_N` directory, and saving one.

use crate::checkpoint;
use crate::comm::Communicator;
use crate::config::TrainConfig;
use crate::engine::Engine;
use crate::error::{Result, TrainerError};
use candle_core::Device;

pub(super) fn resume_point(cfg: &TrainConfig) -> Result<Option<u64>> {
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

pub(super) fn resume<C: Communicator>(
    eng: &mut Engine<C>,
    cfg: &TrainConfig,
    step: u64,
) -> Result<()> {
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

pub(super) fn save<C: Communicator>(eng: &Engine<C>, cfg: &TrainConfig, step: u64) -> Result<()> {
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
