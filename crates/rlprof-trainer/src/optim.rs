//! AdamW over this rank's shard of the flat parameter vector (ZeRO-2 / FSDP `SHARD_GRAD_OP`:
//! every rank holds full parameters for the forward pass but optimizer state only for its shard),
//! with linear learning-rate warm-up.

use candle_core::{Device, Tensor};
use std::collections::HashMap;

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy)]
pub struct AdamW {
    /// Peak learning rate.
    pub lr: f64,
    /// Steps of linear warm-up (0 = none).
    pub warmup_steps: u64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Betas.
    pub betas: (f64, f64),
    /// Epsilon.
    pub eps: f64,
}

/// Optimizer state of one shard.
pub struct ShardedAdamW {
    /// Hyper-parameters.
    pub hp: AdamW,
    /// First moments of the shard.
    pub m: Vec<f32>,
    /// Second moments of the shard.
    pub v: Vec<f32>,
    /// Updates done.
    pub t: u64,
}

impl ShardedAdamW {
    /// Zero state for a shard of `len` elements.
    pub fn new(hp: AdamW, len: usize) -> ShardedAdamW {
        ShardedAdamW {
            hp,
            m: vec![0.0; len],
            v: vec![0.0; len],
            t: 0,
        }
    }

    /// Elements of optimizer state held (the test that state is sharded reads this).
    pub fn state_len(&self) -> usize {
        self.m.len()
    }

    /// Learning rate of the next update.
    pub fn current_lr(&self) -> f64 {
        let w = self.hp.warmup_steps;
        if w == 0 {
            self.hp.lr
        } else {
            self.hp.lr * ((self.t + 1) as f64 / w as f64).min(1.0)
        }
    }

    /// One AdamW update of `params` (this shard) with `grads` scaled by `grad_scale`.
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], grad_scale: f32) {
        let lr = self.current_lr();
        self.t += 1;
        let (b1, b2) = self.hp.betas;
        let bc1 = 1.0 - b1.powi(self.t as i32);
        let bc2 = 1.0 - b2.powi(self.t as i32);
        let (b1, b2) = (b1 as f32, b2 as f32);
        let step = (lr / bc1) as f32;
        let bc2s = bc2.sqrt() as f32;
        let decay = 1.0 - (lr * self.hp.weight_decay) as f32;
        let eps = self.hp.eps as f32;
        for i in 0..params.len() {
            let g = grads[i] * grad_scale;
            let m = b1 * self.m[i] + (1.0 - b1) * g;
            let v = b2 * self.v[i] + (1.0 - b2) * g * g;
            self.m[i] = m;
            self.v[i] = v;
            params[i] = params[i] * decay - step * m / (v.sqrt() / bc2s + eps);
        }
    }

    /// State as tensors (for a safetensors checkpoint).
    pub fn to_tensors(&self) -> candle_core::Result<HashMap<String, Tensor>> {
        let d = Device::Cpu;
        let mut out = HashMap::new();
        out.insert(
            "exp_avg".into(),
            Tensor::from_slice(&self.m, self.m.len(), &d)?,
        );
        out.insert(
            "exp_avg_sq".into(),
            Tensor::from_slice(&self.v, self.v.len(), &d)?,
        );
        out.insert("step".into(), Tensor::from_slice(&[self.t as u32], 1, &d)?);
        Ok(out)
    }

    /// Restores state saved by [`Self::to_tensors`]; `Err` names the mismatch.
    pub fn load_tensors(&mut self, t: &HashMap<String, Tensor>) -> Result<(), String> {
        let get = |k: &str| -> Result<Vec<f32>, String> {
            t.get(k)
                .ok_or_else(|| format!("missing '{k}'"))?
                .to_vec1::<f32>()
                .map_err(|e| e.to_string())
        };
        let (m, v) = (get("exp_avg")?, get("exp_avg_sq")?);
        if m.len() != self.m.len() || v.len() != self.v.len() {
            return Err(format!(
                "optimizer shard has {} elements, this rank's shard has {}",
                m.len(),
                self.m.len()
            ));
        }
        let step = t
            .get("step")
            .and_then(|s| s.to_vec1::<u32>().ok())
            .and_then(|s| s.first().copied())
            .ok_or("missing 'step'")?;
        self.m = m;
        self.v = v;
        self.t = step as u64;
        Ok(())
    }
}

/// Global-norm clip coefficient for `max_norm` (1 when under the limit or `max_norm` is 0).
pub fn clip_coef(total_norm: f32, max_norm: f32) -> f32 {
    if max_norm <= 0.0 || total_norm <= max_norm {
        1.0
    } else {
        max_norm / (total_norm + 1e-6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adamw_first_step_moves_by_lr_against_the_gradient_sign() {
        let hp = AdamW {
            lr: 0.1,
            warmup_steps: 0,
            weight_decay: 0.0,
            betas: (0.9, 0.999),
            eps: 1e-8,
        };
        let mut o = ShardedAdamW::new(hp, 2);
        let mut p = vec![1.0, 1.0];
        o.step(&mut p, &[2.0, -0.5], 1.0);
        assert!(
            (p[0] - 0.9).abs() < 1e-5 && (p[1] - 1.1).abs() < 1e-5,
            "{p:?}"
        );
    }

    #[test]
    fn warmup_is_linear() {
        let hp = AdamW {
            lr: 1.0,
            warmup_steps: 4,
            weight_decay: 0.0,
            betas: (0.9, 0.999),
            eps: 1e-8,
        };
        let mut o = ShardedAdamW::new(hp, 1);
        assert_eq!(o.current_lr(), 0.25);
        o.t = 10;
        assert_eq!(o.current_lr(), 1.0);
        assert_eq!(clip_coef(2.0, 1.0), 1.0 / (2.0 + 1e-6));
        assert_eq!(clip_coef(0.5, 1.0), 1.0);
    }
}
