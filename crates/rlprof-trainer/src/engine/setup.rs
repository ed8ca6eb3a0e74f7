//! Building a rank's engine and moving weights between its models: the reference snapshot, the
//! optimizer reset, loading the actor, and the actor-to-rollout weight sync.

use super::Engine;
use super::grads::param_modules;
use crate::comm::{Communicator, shard_len};
use crate::config::TrainConfig;
use crate::error::Result;
use crate::model::{ModelConfig, ParamStore, Transformer};
use crate::optim::{AdamW, ShardedAdamW};
use crate::tokenizer::Tok;

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

    /// The rollout model (for tests and validation).
    pub fn rollout_model(&self) -> &Transformer {
        &self.rollout_model
    }

    /// This rank's flat parameters (unpadded).
    pub fn actor_flat(&self) -> &[f32] {
        &self.flat[..self.actor.len()]
    }
}
