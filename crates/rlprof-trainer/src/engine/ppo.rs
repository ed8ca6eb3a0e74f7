//! The PPO update loop that `update_actor` and `update_critic` share: epochs over mini-batches
//! of micro-batches, gradients accumulated over a mini-batch's micro-batches and applied once
//! per mini-batch.

use super::Sample;
use super::grads::zero_grad;
use super::update::{global_denoms, split_even};
use crate::algo::GlobalDenoms;
use crate::comm::Communicator;
use crate::error::Result;
use crate::model::autograd;
use rlprof_profiler::{iteration, plan::IterKind};

/// How a PPO update walks its samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PpoSchedule {
    /// `ppo_epochs`: passes over all samples.
    pub(crate) epochs: usize,
    /// Mini-batches per epoch (one optimizer update each).
    pub(crate) mini_batches: usize,
    /// `ppo_micro_batch_size_per_gpu`: samples per forward / backward pass.
    pub(crate) micro_batch_size: usize,
}

impl PpoSchedule {
    /// The schedule of a model with these settings: `train_batch_size / ppo_mini_batch_size`
    /// mini-batches (at least one).
    pub(crate) fn new(
        epochs: usize,
        train_batch_size: usize,
        ppo_mini_batch_size: usize,
        micro_batch_size: usize,
    ) -> PpoSchedule {
        PpoSchedule {
            epochs,
            mini_batches: (train_batch_size / ppo_mini_batch_size).max(1),
            micro_batch_size,
        }
    }
}

/// What one model's PPO update does inside [`for_each_micro_batch`].
pub(crate) trait MicroBatchUpdate {
    /// The communicator the mini-batches' loss denominators are summed over.
    type Comm: Communicator;

    /// The communicator of this rank.
    fn comm(&self) -> &Self::Comm;

    /// Length of the flat gradient buffer of one mini-batch.
    fn grads_len(&self) -> usize;

    /// Loss and backward of one micro-batch (gradients enabled), its gradients added into
    /// `grads`.
    fn micro_batch(
        &mut self,
        micro: &[Sample],
        denoms: GlobalDenoms,
        grads: &mut [f32],
    ) -> Result<()>;

    /// The optimizer update at the end of a mini-batch; returns the gradient norm.
    fn apply(&mut self, grads: &mut [f32]) -> Result<f32>;
}

/// What [`for_each_micro_batch`] adds up over its optimizer updates.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UpdateTotals {
    /// Sum of the gradient norms of the updates.
    pub(crate) grad_norm: f64,
    /// Optimizer updates done (mini-batches without a sequence on any rank are skipped).
    pub(crate) updates: u64,
}

/// Runs PPO's `epochs x mini-batches x micro-batches` loop over `samples`: each mini-batch
/// (iteration `mini_batch`) gets its global loss denominators, a zeroed gradient buffer, one
/// [`MicroBatchUpdate::micro_batch`] per micro-batch (iteration `micro_batch`, gradients
/// enabled), then one [`MicroBatchUpdate::apply`].
pub(crate) fn for_each_micro_batch<U: MicroBatchUpdate>(
    update: &mut U,
    samples: &[Sample],
    schedule: PpoSchedule,
) -> Result<UpdateTotals> {
    let minis = split_even(samples, schedule.mini_batches);
    let mut totals = UpdateTotals::default();
    // verl's mini-batch index runs on across epochs (one dataloader over all of them).
    let mut index = 0u64;
    for _epoch in 0..schedule.epochs {
        for mini in &minis {
            let _it = iteration(IterKind::MiniBatch);
            // verl's ranges: `mini_batch{i}` around the mini-batch, `train_batch` inside it.
            let _mb = rlprof_profiler::api::label(format_args!("mini_batch{index}"));
            let _tb = rlprof_profiler::api::label(format_args!("train_batch"));
            index += 1;
            let Some(denoms) = global_denoms(update.comm(), mini)? else {
                continue;
            };
            let mut grads = zero_grad(update.grads_len());
            for micro in mini.chunks(schedule.micro_batch_size) {
                let _it = iteration(IterKind::MicroBatch);
                let _grad = autograd::grad_enabled();
                update.micro_batch(micro, denoms, &mut grads)?;
            }
            let norm = update.apply(&mut grads)?;
            totals.grad_norm += norm as f64;
            totals.updates += 1;
        }
    }
    Ok(totals)
}
