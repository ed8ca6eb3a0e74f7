//! Gradients and the ZeRO-2 optimizer update over flat parameters: backward with per-parameter
//! accumulation into a flat buffer, the zeroed buffer, and the reduce-scatter / clip / AdamW /
//! all-gather step.

use crate::comm::Communicator;
use crate::error::{Result, TrainerError};
use crate::host_op;
use crate::model::ParamStore;
use crate::model::autograd;
use crate::optim::{ShardedAdamW, clip_coef};
use candle_core::{Tensor, Var};
use rlprof_profiler::{NameId, name, scope};

/// The module path of each parameter of `store` (`model.layers.0.mlp.up_proj.weight` ->
/// `model.layers.0.mlp.up_proj`).
pub(crate) fn param_modules(store: &ParamStore) -> Vec<NameId> {
    store
        .names()
        .iter()
        .map(|n| rlprof_profiler::intern(n.rsplit_once('.').map_or(n.as_str(), |(m, _)| m)))
        .collect()
}

/// Backward of `loss` (every node a recorded op, [`autograd`]), then gradient accumulation:
/// each of `vars`' gradient added into its slice of `flat` (op `accumulate_grad` under the
/// parameter's module path `modules[i]`).
pub(crate) fn backward_into(
    loss: &Tensor,
    vars: &[&Var],
    modules: &[NameId],
    flat: &mut [f32],
) -> Result<()> {
    let bwd = scope(name!("backward"));
    let gs = {
        let _nodes = autograd::backward_scope();
        loss.backward()?
    };
    drop(bwd);
    let _acc = scope(name!("gradient_accumulation"));
    let mut off = 0;
    for (v, module) in vars.iter().zip(modules) {
        let n = v.elem_count();
        if let Some(g) = gs.get(v.as_tensor()) {
            host_op!(
                "accumulate_grad",
                *module,
                n * 4,
                accumulate(g, &mut flat[off..off + n])
            )?;
        }
        off += n;
    }
    Ok(())
}

/// One ZeRO-2 optimizer update over a flat parameter vector whose optimizer state is sharded.
pub(crate) struct Zero2<'a, C: Communicator> {
    pub comm: &'a C,
    pub opt: &'a mut ShardedAdamW,
    /// Full flat parameters, padded to `world * shard`.
    pub flat: &'a mut Vec<f32>,
    pub shard: usize,
}

impl<C: Communicator> Zero2<'_, C> {
    /// Reduce-scatter of `grads` (range `ZeRO2::reduce_scatter_grads`), global-norm clipping
    /// (`clip_grad_norm_`: a norm op and an all-reduce), AdamW on this rank's shard and the
    /// all-gather of the parameters (`Optimizer.step#AdamW.step`, with `ZeRO2::all_gather_params`
    /// inside), then `publish` of the new flat parameters into the model (op `copy_`). Returns
    /// the global grad norm before clipping; `what` names it in errors.
    pub(crate) fn step(
        &mut self,
        grads: &mut [f32],
        max_norm: f32,
        step: u64,
        what: &'static str,
        publish: impl FnOnce(&[f32]) -> Result<()>,
    ) -> Result<f32> {
        let (r, sh) = (self.comm.rank(), self.shard);
        let opt = name!("optimizer");
        let mut g = vec![0f32; sh];
        {
            let _s = scope(name!("ZeRO2::reduce_scatter_grads"));
            self.comm.reduce_scatter_sum(grads, &mut g)?;
        }
        let norm = {
            let _s = scope(name!("clip_grad_norm_"));
            let mut sq = [host_op!("linalg_vector_norm", opt, sh * 4, {
                g.iter().map(|x| x * x).sum::<f32>()
            })];
            self.comm.all_reduce_sum(&mut sq)?;
            sq[0].sqrt()
        };
        if !norm.is_finite() {
            return Err(TrainerError::NonFinite {
                step,
                what,
                value: norm as f64,
            });
        }
        let coef = clip_coef(norm, max_norm);
        let _s = scope(name!("Optimizer.step#AdamW.step"));
        let mut mine = self.flat[r * sh..(r + 1) * sh].to_vec();
        host_op!("adamw", opt, sh * 16, self.opt.step(&mut mine, &g, coef));
        {
            let _s = scope(name!("ZeRO2::all_gather_params"));
            self.comm.all_gather(&mine, &mut self.flat[..])?;
        }
        host_op!("copy_", opt, self.flat.len() * 4, publish(&self.flat[..]))?;
        Ok(norm)
    }
}

/// A zeroed flat gradient buffer, as range `Optimizer.zero_grad#AdamW.zero_grad` with op `zero_`.
pub(crate) fn zero_grad(len: usize) -> Vec<f32> {
    let _s = scope(name!("Optimizer.zero_grad#AdamW.zero_grad"));
    host_op!("zero_", name!("optimizer"), len * 4, vec![0f32; len])
}

/// Adds gradient `g` into `dst` (same element count).
fn accumulate(g: &Tensor, dst: &mut [f32]) -> Result<()> {
    let add = |src: &[f32], dst: &mut [f32]| {
        for (d, x) in dst.iter_mut().zip(src) {
            *d += x;
        }
    };
    if g.dtype() == candle_core::DType::F32 && g.device().is_cpu() {
        // read a contiguous CPU gradient in place (no copy of it)
        let (s, l) = g.storage_and_layout();
        if let (candle_core::Storage::Cpu(candle_core::CpuStorage::F32(data)), Some((a, b))) =
            (&*s, l.contiguous_offsets())
        {
            add(&data[a..b], dst);
            return Ok(());
        }
    }
    add(&g.flatten_all()?.to_vec1::<f32>()?, dst);
    Ok(())
}
