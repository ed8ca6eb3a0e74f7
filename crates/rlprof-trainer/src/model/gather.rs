//! Row gathers and concatenation of the trainable model (embedding lookup, the shared-prompt
//! gathers, KV-cache appends) as tagged custom ops, so that their backward passes are recorded
//! ops like the fused kernels' ([`super::autograd`]); candle's own `index_select` / `cat` would
//! run their backward unrecorded. CPU f32 only ([`super::kernels::supported`]).

use super::autograd::tagged;
use super::kernels;
use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};

/// Rows `idx` of `x` along dimension 0: the recorded gather on the CPU, candle's elsewhere.
pub(super) fn select_rows0(x: &Tensor, idx: &Tensor) -> Result<Tensor> {
    if kernels::supported(x) {
        index_select0(x, idx)
    } else {
        x.contiguous()?.index_select(idx, 0)
    }
}

/// `[a, b]` along dimension 1: the recorded concatenation on the CPU, candle's elsewhere.
pub(super) fn cat_dim1(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if kernels::supported(a) {
        cat1(a, b)
    } else {
        Tensor::cat(&[a, b], 1)
    }
}

/// Rows `idx` (u32 `[M]`) of `x` `[N, ...]` along dimension 0: `[M, ...]`. Backward: the
/// gradient rows added into the rows they came from.
pub fn index_select0(x: &Tensor, idx: &Tensor) -> Result<Tensor> {
    let idx = idx.to_dtype(candle_core::DType::U32)?.contiguous()?;
    x.contiguous()?.apply_op2(&idx, tagged(IndexSelect0))
}

struct IndexSelect0;

fn contiguous<'a, T>(data: &'a [T], l: &Layout, what: &str) -> Result<&'a [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&data[a..b]),
        None => candle_core::bail!("{what}: contiguous input required"),
    }
}

impl CustomOp2 for IndexSelect0 {
    fn name(&self) -> &'static str {
        "rlprof-index-select0"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(x), CpuStorage::U32(ix)) = (s1, s2) else {
            candle_core::bail!("index_select0: f32 values and u32 indices only")
        };
        let (x, ix) = (
            contiguous(x, l1, "index_select0")?,
            contiguous(ix, l2, "index_select0")?,
        );
        let dims = l1.dims();
        let n = dims.first().copied().unwrap_or(0);
        let row = dims.iter().skip(1).product::<usize>();
        let mut out = Vec::with_capacity(ix.len() * row);
        for &i in ix {
            let i = i as usize;
            if i >= n {
                candle_core::bail!("index_select0: index {i} out of {n} rows")
            }
            out.extend_from_slice(&x[i * row..(i + 1) * row]);
        }
        let mut od = dims.to_vec();
        od[0] = ix.len();
        Ok((CpuStorage::F32(out), Shape::from(od)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        idx: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dx = x.zeros_like()?.index_add(idx, &grad.contiguous()?, 0)?;
        Ok((Some(dx), None))
    }
}

/// `[a, b]` along dimension 1 (`a` `[B, Ta, ...]`, `b` `[B, Tb, ...]`). Backward: the gradient
/// split at `Ta`.
pub fn cat1(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.contiguous()?.apply_op2(&b.contiguous()?, tagged(Cat1))
}

struct Cat1;

impl CustomOp2 for Cat1 {
    fn name(&self) -> &'static str {
        "rlprof-cat1"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(a), CpuStorage::F32(b)) = (s1, s2) else {
            candle_core::bail!("cat1: f32 only")
        };
        let (a, b) = (contiguous(a, l1, "cat1")?, contiguous(b, l2, "cat1")?);
        let (da, db) = (l1.dims(), l2.dims());
        if da.len() < 2 || da.len() != db.len() || da[0] != db[0] || da[2..] != db[2..] {
            candle_core::bail!("cat1: shapes {da:?} and {db:?} do not concatenate on dim 1")
        }
        let inner = da[2..].iter().product::<usize>();
        let (ra, rb) = (da[1] * inner, db[1] * inner);
        let mut out = Vec::with_capacity(a.len() + b.len());
        for i in 0..da[0] {
            out.extend_from_slice(&a[i * ra..(i + 1) * ra]);
            out.extend_from_slice(&b[i * rb..(i + 1) * rb]);
        }
        let mut od = da.to_vec();
        od[1] += db[1];
        Ok((CpuStorage::F32(out), Shape::from(od)))
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let ta = a.dim(1)?;
        let da = grad.narrow(1, 0, ta)?.contiguous()?;
        let db = grad.narrow(1, ta, b.dim(1)?)?.contiguous()?;
        Ok((Some(da), Some(db)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn close(a: &Tensor, b: &Tensor) -> Result<()> {
        let (x, y) = (
            a.flatten_all()?.to_vec1::<f32>()?,
            b.flatten_all()?.to_vec1::<f32>()?,
        );
        assert_eq!(x.len(), y.len());
        for (p, q) in x.iter().zip(&y) {
            assert!((p - q).abs() < 1e-5, "{x:?} vs {y:?}");
        }
        Ok(())
    }

    #[test]
    fn gathers_and_cats_match_candle_values_and_gradients() -> Result<()> {
        let d = Device::Cpu;
        let x = Var::from_vec((0..12).map(|v| v as f32).collect(), (4, 3), &d)?;
        let idx = Tensor::from_vec(vec![2u32, 0, 2], 3, &d)?;
        let w = Tensor::from_vec((0..9).map(|v| v as f32 * 0.5 - 1.0).collect(), (3, 3), &d)?;
        let ours = index_select0(x.as_tensor(), &idx)?;
        let theirs = x.as_tensor().index_select(&idx, 0)?;
        close(&ours, &theirs)?;
        let g1 = ours.mul(&w)?.sum_all()?.backward()?;
        let g2 = theirs.mul(&w)?.sum_all()?.backward()?;
        close(
            g1.get(x.as_tensor()).expect("grad"),
            g2.get(x.as_tensor()).expect("grad"),
        )?;

        let a = Var::from_vec((0..8).map(|v| v as f32).collect(), (2, 2, 2), &d)?;
        let b = Var::from_vec((0..4).map(|v| v as f32 * 3.0).collect(), (2, 1, 2), &d)?;
        let w = Tensor::from_vec((0..12).map(|v| v as f32 - 4.0).collect(), (2, 3, 2), &d)?;
        let ours = cat1(a.as_tensor(), b.as_tensor())?;
        let theirs = Tensor::cat(&[a.as_tensor(), b.as_tensor()], 1)?;
        close(&ours, &theirs)?;
        let g1 = ours.mul(&w)?.sum_all()?.backward()?;
        let g2 = theirs.mul(&w)?.sum_all()?.backward()?;
        for v in [&a, &b] {
            close(
                g1.get(v.as_tensor()).expect("grad"),
                g2.get(v.as_tensor()).expect("grad"),
            )?;
        }
        Ok(())
    }
}
