//! Model parameters: named candle `Var`s in a fixed order, with flat (concatenated f32) views for
//! the sharded optimizer and the collectives.

use candle_core::{DType, Device, Result, Tensor, Var};
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::ModelConfig;

/// Named parameters in the order of [`ModelConfig::param_shapes`].
pub struct ParamStore {
    names: Vec<String>,
    vars: Vec<Var>,
    device: Device,
}

impl ParamStore {
    /// Fresh weights: normal(0, 0.02) for matrices (scaled down for output projections), ones for
    /// norms, zeros for biases; deterministic in `seed`.
    pub fn init(config: &ModelConfig, seed: u64, device: &Device) -> Result<ParamStore> {
        let mut rng = StdRng::seed_from_u64(seed);
        let depth_scale = 1.0 / (2.0 * config.num_hidden_layers as f32).sqrt();
        let mut names = Vec::new();
        let mut vars = Vec::new();
        for (name, shape) in config.param_shapes() {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = if name.ends_with("norm.weight") {
                vec![1.0; n]
            } else if name.ends_with(".bias") {
                vec![0.0; n]
            } else {
                let std = if name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight") {
                    0.02 * depth_scale
                } else {
                    0.02
                };
                (0..n).map(|_| normal(&mut rng) * std).collect()
            };
            vars.push(Var::from_tensor(&Tensor::from_vec(data, shape, device)?)?);
            names.push(name);
        }
        Ok(ParamStore {
            names,
            vars,
            device: device.clone(),
        })
    }

    /// From named tensors (a loaded checkpoint), in `config`'s order; errors name what is
    /// missing or mis-shaped.
    pub fn from_tensors(
        config: &ModelConfig,
        mut get: impl FnMut(&str) -> Option<Tensor>,
        device: &Device,
    ) -> std::result::Result<ParamStore, String> {
        let mut names = Vec::new();
        let mut vars = Vec::new();
        for (name, shape) in config.param_shapes() {
            let t = get(&name).ok_or_else(|| format!("missing tensor '{name}'"))?;
            if t.dims() != shape.as_slice() {
                return Err(format!(
                    "tensor '{name}' has shape {:?}, config.json implies {:?}",
                    t.dims(),
                    shape
                ));
            }
            let t = t
                .to_dtype(DType::F32)
                .and_then(|t| t.to_device(device))
                .map_err(|e| format!("tensor '{name}': {e}"))?;
            vars.push(Var::from_tensor(&t).map_err(|e| e.to_string())?);
            names.push(name);
        }
        Ok(ParamStore {
            names,
            vars,
            device: device.clone(),
        })
    }

    /// A deep copy (own storage).
    pub fn deep_clone(&self) -> Result<ParamStore> {
        let vars = self
            .vars
            .iter()
            .map(|v| Var::from_tensor(&v.as_tensor().copy()?))
            .collect::<Result<Vec<_>>>()?;
        Ok(ParamStore {
            names: self.names.clone(),
            vars,
            device: self.device.clone(),
        })
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Parameter names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The variables, in order.
    pub fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// Total element count.
    pub fn len(&self) -> usize {
        self.vars.iter().map(|v| v.elem_count()).sum()
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The tensor of `name`: tracked for training, detached (same storage) otherwise.
    pub fn tensor(&self, name: &str, trainable: bool) -> Result<Tensor> {
        let i = self
            .names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| candle_core::Error::Msg(format!("no parameter '{name}'")))?;
        let t = self.vars[i].as_tensor();
        Ok(if trainable { t.clone() } else { t.detach() })
    }

    /// All parameters concatenated.
    pub fn flat(&self) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(self.len());
        for v in &self.vars {
            out.extend(v.as_tensor().flatten_all()?.to_vec1::<f32>()?);
        }
        Ok(out)
    }

    /// Overwrites every parameter from a concatenation (at least [`Self::len`] long).
    pub fn set_flat(&self, flat: &[f32]) -> Result<()> {
        let mut off = 0;
        for v in &self.vars {
            let n = v.elem_count();
            let Some(src) = flat.get(off..off + n) else {
                candle_core::bail!("set_flat: {} values for more parameters", flat.len())
            };
            if self.device.is_cpu() && v.dtype() == DType::F32 {
                // straight into the parameter's storage (`Var::set` would copy a fresh tensor)
                v.as_tensor().inplace_op1(&CopyFrom(src))?;
            } else {
                v.set(&Tensor::from_slice(src, v.shape(), &self.device)?)?;
            }
            off += n;
        }
        Ok(())
    }

    /// Copies every parameter from `other` (same layout): the rollout engine's weight sync.
    pub fn copy_from(&self, other: &ParamStore) -> Result<()> {
        for (dst, src) in self.vars.iter().zip(&other.vars) {
            dst.set(src.as_tensor())?;
        }
        Ok(())
    }

    /// Named tensors (for saving).
    pub fn named_tensors(&self) -> Vec<(String, Tensor)> {
        self.names
            .iter()
            .cloned()
            .zip(self.vars.iter().map(|v| v.as_tensor().detach()))
            .collect()
    }
}

/// Overwrites a contiguous f32 CPU tensor with the values of a slice (its element count).
struct CopyFrom<'a>(&'a [f32]);

impl candle_core::InplaceOp1 for CopyFrom<'_> {
    fn name(&self) -> &'static str {
        "copy_from_slice"
    }

    fn cpu_fwd(&self, s: &mut candle_core::CpuStorage, l: &candle_core::Layout) -> Result<()> {
        let candle_core::CpuStorage::F32(d) = s else {
            candle_core::bail!("copy_from_slice: f32 only")
        };
        match l.contiguous_offsets() {
            Some((a, b)) if b - a == self.0.len() => {
                d[a..b].copy_from_slice(self.0);
                Ok(())
            }
            _ => candle_core::bail!(
                "copy_from_slice: {} values for a {:?} parameter (contiguous required)",
                self.0.len(),
                l.dims()
            ),
        }
    }
}

/// Standard normal by Box-Muller (rand's distributions crate is not needed for this one use).
fn normal(rng: &mut StdRng) -> f32 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_flat_writes_every_parameter_in_place_and_rejects_short_input() {
        let cfg: ModelConfig = serde_json::from_str(
            r#"{"vocab_size": 11, "hidden_size": 8, "intermediate_size": 12,
                "num_hidden_layers": 1, "num_attention_heads": 2}"#,
        )
        .unwrap();
        let store = ParamStore::init(&cfg, 3, &Device::Cpu).unwrap();
        let before = store.flat().unwrap();
        let first = store.vars[0].as_tensor().clone();
        let new: Vec<f32> = (0..before.len()).map(|i| i as f32 * 0.5 - 3.0).collect();
        store.set_flat(&new).unwrap();
        assert_eq!(store.flat().unwrap(), new);
        // the same storage: a tensor taken before sees the new values
        let n0 = first.elem_count();
        assert_eq!(
            first.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            new[..n0]
        );
        assert!(store.set_flat(&new[..new.len() - 1]).is_err());
    }
}
