//! The fused linear layer ([`linear`], with an optional bias or residual addend) on candle's CPU
//! matmul kernel (the `gemm` crate), forward and backward.

use super::{Body, cpu_of, f32_rows, widest};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};

/// `dst (m x n) = [dst +] lhs (m x k) * rhs (k x n)` with explicit element strides (row, column)
/// of each operand: candle's CPU matmul kernel (gemm), single-threaded unless candle's thread
/// count says otherwise.
#[allow(clippy::too_many_arguments)]
fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    accumulate: bool,
    lhs: &[f32],
    lhs_s: (usize, usize),
    rhs: &[f32],
    rhs_s: (usize, usize),
) {
    assert!(dst.len() >= m * n, "gemm: dst too short");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].iter_mut().for_each(|d| *d = 0.0);
        }
        return;
    }
    // SAFETY: dst holds m * n elements (checked above) and is a distinct &mut.
    unsafe {
        gemm_raw(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            (n, 1),
            accumulate,
            lhs,
            lhs_s,
            rhs,
            rhs_s,
        )
    }
}

/// [`gemm_f32`] into a new `m x n` buffer, written by gemm without a zero fill first (3% of a
/// tiny-size update was that memset): with `accumulate` off gemm stores every destination
/// element and reads none (`gemm_never_reads_an_overwritten_destination` checks it on a
/// NaN-filled destination at the shapes of each gemm code path).
#[allow(clippy::too_many_arguments)]
fn gemm_new(
    m: usize,
    n: usize,
    k: usize,
    lhs: &[f32],
    lhs_s: (usize, usize),
    rhs: &[f32],
    rhs_s: (usize, usize),
) -> Vec<f32> {
    let len = m * n;
    if m == 0 || n == 0 || k == 0 {
        return vec![0f32; len];
    }
    let mut dst: Vec<f32> = Vec::with_capacity(len);
    // SAFETY: `dst` has capacity for the m x n row-major destination and aliases no operand;
    // gemm without accumulation writes all of it before `set_len` exposes it (see above).
    unsafe {
        gemm_raw(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            (n, 1),
            false,
            lhs,
            lhs_s,
            rhs,
            rhs_s,
        );
        dst.set_len(len);
    }
    dst
}

/// The gemm call of [`gemm_f32`]; `m, n, k > 0`; `dst_s` the (row, column) element strides of
/// the destination.
///
/// # Safety
/// `dst` must be valid for writes of the `m x n` elements its strides address (and reads when
/// `accumulate`) and must not alias `lhs` or `rhs`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_raw(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    (dst_rs, dst_cs): (usize, usize),
    accumulate: bool,
    lhs: &[f32],
    (lhs_rs, lhs_cs): (usize, usize),
    rhs: &[f32],
    (rhs_rs, rhs_cs): (usize, usize),
) {
    let last = |rs: usize, cs: usize, r: usize, c: usize| (r - 1) * rs + (c - 1) * cs;
    assert!(
        lhs.len() > last(lhs_rs, lhs_cs, m, k) && rhs.len() > last(rhs_rs, rhs_cs, k, n),
        "gemm: operand too short"
    );
    let threads = candle_core::utils::get_num_threads();
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: every operand index gemm touches is inside the slices (checked above: the last
    // element of each operand is in bounds and strides are non-negative); `dst` is valid for
    // the m x n row-major destination and does not alias the inputs (the caller's contract).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            dst_cs as isize,
            dst_rs as isize,
            accumulate,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// Up to this many rows, [`linear`]'s forward computes into a column-major buffer
/// ([`linear_few_rows`]).
const FEW_ROWS: usize = 32;

/// `y (rows x out) = x (rows x in) W^T` for few rows (decoding): gemm computes `y` column-major,
/// where the weights are its right operand read in place, then one transposing copy (adding
/// `add`, a bias of `out` values or a residual of `rows x out`) gives the row-major output. With
/// a row-major destination gemm makes the weights its left operand and re-packs all of them on
/// every call: for 16 rows that packing cost as much as the multiply itself.
fn linear_few_rows(
    rows: usize,
    in_f: usize,
    out_f: usize,
    x: &[f32],
    w: &[f32],
    add: Option<&[f32]>,
) -> Vec<f32> {
    assert!(
        x.len() >= rows * in_f && w.len() >= out_f * in_f,
        "linear: operand too short"
    );
    let mut t = vec![0f32; rows * out_f];
    if rows > 0 && out_f > 0 && in_f > 0 {
        // SAFETY: `t` holds rows * out_f elements, addressed column-major (row stride 1,
        // column stride rows); it is a fresh buffer, aliasing neither operand.
        unsafe {
            gemm_raw(
                rows,
                out_f,
                in_f,
                t.as_mut_ptr(),
                (1, rows),
                false,
                x,
                (in_f, 1),
                w,
                (1, in_f),
            )
        }
    }
    let mut y = vec![0f32; rows * out_f];
    for (r, yr) in y.chunks_exact_mut(out_f.max(1)).enumerate().take(rows) {
        for (o, v) in yr.iter_mut().enumerate() {
            *v = t[o * rows + r];
        }
        match add {
            Some(a) if a.len() == out_f => yr.iter_mut().zip(a).for_each(|(v, b)| *v += b),
            Some(a) => yr
                .iter_mut()
                .zip(&a[r * out_f..(r + 1) * out_f])
                .for_each(|(v, b)| *v += b),
            None => {}
        }
    }
    y
}

/// A fused linear layer `y = x W^T [+ add]`, `x` `[.., in]`, `W` `[out, in]`, `add` either a
/// bias `[out]` or a residual of the output's shape: one gemm with the addend as its initial
/// destination. Backward: `dx = g W`, `dW = g^T x` (two gemms on the stored layouts, no
/// transposed copies), `dbias = column sums of g`, `dresidual = g`.
pub fn linear(x: &Tensor, w: &Tensor, add: Option<&Tensor>) -> Result<Tensor> {
    let (x, w) = (x.contiguous()?, w.contiguous()?);
    match add {
        Some(a) => x.apply_op3(&w, &a.contiguous()?, tagged(Linear)),
        None => x.apply_op2(&w, tagged(Linear)),
    }
}

struct Linear;

/// `(rows, in, out)` of a linear layer, checked.
fn linear_dims(x: &Layout, w: &Layout) -> Result<(usize, usize, usize)> {
    let (out_f, in_f) = match *w.dims() {
        [o, i] => (o, i),
        _ => candle_core::bail!("linear: weight must be 2-D, got {:?}", w.dims()),
    };
    let xd = x.dims();
    if xd.last() != Some(&in_f) {
        candle_core::bail!("linear: input {xd:?} does not fit weight {:?}", w.dims())
    }
    Ok((x.shape().elem_count() / in_f.max(1), in_f, out_f))
}

fn linear_shape(x: &Layout, out_f: usize) -> Shape {
    let mut d = x.dims().to_vec();
    *d.last_mut().expect("rank >= 1") = out_f;
    Shape::from(d)
}

// Not an `F32Op2`/`F32Op3` (see `kernels/mod.rs`): the output shape comes from the checked dims,
// and this one body already serves both arities.
fn linear_fwd(
    s1: &CpuStorage,
    l1: &Layout,
    s2: &CpuStorage,
    l2: &Layout,
    add: Option<(&CpuStorage, &Layout)>,
) -> Result<(CpuStorage, Shape)> {
    let (x, _) = f32_rows(s1, l1, "linear")?;
    let (w, _) = f32_rows(s2, l2, "linear")?;
    let (rows, in_f, out_f) = linear_dims(l1, l2)?;
    if rows <= FEW_ROWS {
        let a = match add {
            None => None,
            Some((s3, l3)) => {
                let (a, _) = f32_rows(s3, l3, "linear")?;
                if a.len() != out_f && a.len() != rows * out_f {
                    candle_core::bail!(
                        "linear: addend {:?} fits neither bias nor output",
                        l3.dims()
                    )
                }
                Some(a)
            }
        };
        let y = linear_few_rows(rows, in_f, out_f, x, w, a);
        return Ok((CpuStorage::F32(y), linear_shape(l1, out_f)));
    }
    let mut dst = match add {
        None => {
            let y = gemm_new(rows, out_f, in_f, x, (in_f, 1), w, (1, in_f));
            return Ok((CpuStorage::F32(y), linear_shape(l1, out_f)));
        }
        Some((s3, l3)) => {
            let (a, _) = f32_rows(s3, l3, "linear")?;
            if a.len() == out_f {
                // The bias added to each row after the multiply, while the rows are in cache:
                // filling the destination with one bias copy per row first cost one `memcpy`
                // call per row (2% of the tiny ref pass).
                let mut y = gemm_new(rows, out_f, in_f, x, (in_f, 1), w, (1, in_f));
                widest(AddRows { y: &mut y, b: a });
                return Ok((CpuStorage::F32(y), linear_shape(l1, out_f)));
            } else if a.len() == rows * out_f {
                a.to_vec()
            } else {
                candle_core::bail!(
                    "linear: addend {:?} fits neither bias nor output",
                    l3.dims()
                )
            }
        }
    };
    gemm_f32(
        rows,
        out_f,
        in_f,
        &mut dst,
        true,
        x,
        (in_f, 1),
        w,
        (1, in_f),
    );
    Ok((CpuStorage::F32(dst), linear_shape(l1, out_f)))
}

/// `y[r] += b` for every row `r` of `y` (rows of `b.len()`).
struct AddRows<'a> {
    y: &'a mut [f32],
    b: &'a [f32],
}

impl Body for AddRows<'_> {
    #[inline(always)]
    fn run(self) {
        if self.b.is_empty() {
            return;
        }
        for row in self.y.chunks_exact_mut(self.b.len()) {
            for (v, b) in row.iter_mut().zip(self.b) {
                *v += b;
            }
        }
    }
}

/// `(dx, dW)` of a linear layer, reading the operands in place.
fn linear_bwd(x: &Tensor, w: &Tensor, g: &Tensor) -> Result<(Tensor, Tensor)> {
    let (out_f, in_f) = w.dims2()?;
    let rows = x.elem_count() / in_f.max(1);
    let (x, w, g) = (x.contiguous()?, w.contiguous()?, g.contiguous()?);
    let (dx, dw);
    {
        let (gs, gl) = g.storage_and_layout();
        let (xs, xl) = x.storage_and_layout();
        let (ws, wl) = w.storage_and_layout();
        let (gv, _) = f32_rows(cpu_of(&gs, "grad")?, gl, "linear backward")?;
        let (xv, _) = f32_rows(cpu_of(&xs, "x")?, xl, "linear backward")?;
        let (wv, _) = f32_rows(cpu_of(&ws, "w")?, wl, "linear backward")?;
        if gv.len() != rows * out_f || xv.len() != rows * in_f || wv.len() != out_f * in_f {
            candle_core::bail!(
                "linear backward: grad {:?}, x {:?}, w {:?}",
                gl.dims(),
                xl.dims(),
                wl.dims()
            )
        }
        dx = gemm_new(rows, in_f, out_f, gv, (out_f, 1), wv, (in_f, 1));
        dw = gemm_new(out_f, in_f, rows, gv, (1, out_f), xv, (in_f, 1));
    }
    Ok((
        Tensor::from_vec(dx, x.shape(), x.device())?,
        Tensor::from_vec(dw, w.shape(), w.device())?,
    ))
}

/// The gradient of bias `bias` (`[out]`) for output gradient `grad` (`[.., out]`): the sums of
/// `grad`'s columns, row after row into one accumulator row (the order of candle's `sum(0)`, in
/// one contiguous pass instead of its strided reduction, which was 6% of a tiny-size update).
fn column_sums(grad: &Tensor, bias: &Tensor) -> Result<Tensor> {
    let n = bias.elem_count();
    let grad = grad.contiguous()?;
    let acc = {
        let (gs, gl) = grad.storage_and_layout();
        let (gv, _) = f32_rows(cpu_of(&gs, "grad")?, gl, "linear backward")?;
        if n == 0 || gv.len() % n != 0 {
            candle_core::bail!(
                "linear backward: grad {:?} does not fit bias {:?}",
                gl.dims(),
                bias.dims()
            )
        }
        let mut acc = vec![0f32; n];
        for row in gv.chunks_exact(n) {
            for (a, &g) in acc.iter_mut().zip(row) {
                *a += g;
            }
        }
        acc
    };
    Tensor::from_vec(acc, bias.shape(), bias.device())
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "rlprof-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        linear_fwd(s1, l1, s2, l2, None)
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) = linear_bwd(x, w, grad)?;
        Ok((Some(dx), Some(dw)))
    }
}

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "rlprof-linear-add"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        linear_fwd(s1, l1, s2, l2, Some((s3, l3)))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        add: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) = linear_bwd(x, w, grad)?;
        let da = if add.rank() == 1 {
            // a bias: its gradient sums the output gradient over the rows
            column_sums(grad, add)?
        } else {
            grad.clone()
        };
        Ok((Some(dx), Some(dw), Some(da)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{check, var};
    use super::*;

    /// `linear` against candle's matmul (with a bias, with a residual) on `[2, t, 6] x [4, 6]`.
    fn check_linear(t: usize) {
        let (x, w) = (var(&[2, t, 6], 1.0), var(&[4, 6], 1.0));
        let (b, r) = (var(&[4], 1.0), var(&[2, t, 4], 1.0));
        let mm = |x: &Tensor, w: &Tensor| {
            x.reshape((2 * t, 6))
                .unwrap()
                .matmul(&w.t().unwrap())
                .unwrap()
                .reshape((2, t, 4))
                .unwrap()
        };
        check(
            &[&x, &w],
            |t| linear(t[0], t[1], None).unwrap(),
            |t| mm(t[0], t[1]),
            1e-5,
        );
        check(
            &[&x, &w, &b],
            |t| linear(t[0], t[1], Some(t[2])).unwrap(),
            |t| mm(t[0], t[1]).broadcast_add(t[2]).unwrap(),
            1e-5,
        );
        check(
            &[&x, &w, &r],
            |t| linear(t[0], t[1], Some(t[2])).unwrap(),
            |t| mm(t[0], t[1]).add(t[2]).unwrap(),
            1e-5,
        );
    }

    #[test]
    fn linear_matches_matmul_with_bias_and_residual() {
        // few rows (the column-major path of decoding) and many (row-major gemm)
        check_linear(5);
        const _: () = assert!(2 * 5 <= FEW_ROWS && 2 * 40 > FEW_ROWS);
        check_linear(40);
    }

    #[test]
    fn few_rows_path_matches_row_major_gemm_at_model_shapes() {
        // decoding shapes: 16 rows, d_model 256, an MLP width of 683 (not a multiple of the
        // SIMD width) and 8192 outputs; a bias and a residual addend
        for (rows, in_f, out_f) in [
            (16, 256, 683),
            (16, 256, 8192),
            (3, 683, 256),
            (32, 256, 256),
        ] {
            let x = var(&[rows, in_f], 1.0).as_tensor().flatten_all().unwrap();
            let w = var(&[out_f, in_f], 0.1).as_tensor().flatten_all().unwrap();
            let b = var(&[out_f], 1.0).as_tensor().flatten_all().unwrap();
            let r = var(&[rows, out_f], 1.0).as_tensor().flatten_all().unwrap();
            let [x, w, b, r] = [x, w, b, r].map(|t| t.to_vec1::<f32>().unwrap());
            let plain = gemm_new(rows, out_f, in_f, &x, (in_f, 1), &w, (1, in_f));
            for (add, expect) in [
                (None, plain.clone()),
                (
                    Some(&b),
                    plain
                        .iter()
                        .enumerate()
                        .map(|(i, v)| v + b[i % out_f])
                        .collect::<Vec<_>>(),
                ),
                (
                    Some(&r),
                    plain.iter().zip(&r).map(|(v, a)| v + a).collect::<Vec<_>>(),
                ),
            ] {
                let got = linear_few_rows(rows, in_f, out_f, &x, &w, add.map(|a| &a[..]));
                let worst = got
                    .iter()
                    .zip(&expect)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(worst < 1e-4, "{rows}x{in_f}x{out_f}: differs by {worst}");
            }
        }
    }

    #[test]
    fn gemm_never_reads_an_overwritten_destination() {
        // gevv (k <= 2), gemv (one row or column), small and large blocked shapes, both
        // destination layouts; a NaN left in or read from the destination would show
        for (m, n, k) in [
            (3, 5, 1),
            (3, 5, 2),
            (1, 40, 17),
            (40, 1, 17),
            (7, 9, 13),
            (16, 683, 256),
            (512, 256, 683),
            (130, 70, 300),
        ] {
            let lhs: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1)
                .collect();
            let rhs: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1)
                .collect();
            let mut want = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    want[i * n + j] = (0..k).map(|p| lhs[i * k + p] * rhs[p * n + j]).sum();
                }
            }
            for col_major in [false, true] {
                let mut dst = vec![f32::NAN; m * n];
                let ds = if col_major { (1, m) } else { (n, 1) };
                // SAFETY: dst holds m * n elements for either layout and aliases nothing.
                unsafe {
                    gemm_raw(
                        m,
                        n,
                        k,
                        dst.as_mut_ptr(),
                        ds,
                        false,
                        &lhs,
                        (k, 1),
                        &rhs,
                        (n, 1),
                    )
                };
                for i in 0..m {
                    for j in 0..n {
                        let got = dst[i * ds.0 + j * ds.1];
                        let w = want[i * n + j];
                        assert!(
                            (got - w).abs() <= 1e-4 * (1.0 + w.abs()),
                            "{m}x{n}x{k} col_major {col_major} [{i},{j}]: {got} vs {w}"
                        );
                    }
                }
            }
        }
    }
}
