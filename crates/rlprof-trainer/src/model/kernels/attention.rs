//! Fused grouped-query attention ([`attention`]) over an additive host-side mask ([`HostMask`]),
//! forward and backward, reading strided `[B, T, H, D]` views in place.

use super::cpu_of;
#[cfg(target_arch = "x86_64")]
use super::simd::{avx2_fma, avx512};
use super::simd::{axpy, dots, exp_poly};
use crate::model::autograd::tagged;
use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// Mask values at or below this are treated as masked keys (skipped: their softmax weight
/// underflows to exactly 0 anyway).
const MASK_SKIP: f32 = -1e8;

/// An additive attention mask on the host, `[B, T, Tk]` (0 or a large negative value), shared
/// by every layer of one forward call.
#[derive(Clone)]
pub struct HostMask {
    data: Arc<Vec<f32>>,
    b: usize,
    t: usize,
    tk: usize,
}

impl HostMask {
    /// A mask over `data` `[b, t, tk]` (row-major).
    pub fn new(data: Vec<f32>, b: usize, t: usize, tk: usize) -> Result<HostMask> {
        if data.len() != b * t * tk {
            candle_core::bail!("mask has {} values, not {b} x {t} x {tk}", data.len())
        }
        Ok(HostMask {
            data: Arc::new(data),
            b,
            t,
            tk,
        })
    }

    /// `[B, T, Tk]`.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.b, self.t, self.tk)
    }

    fn row(&self, b: usize, i: usize) -> &[f32] {
        let o = (b * self.t + i) * self.tk;
        &self.data[o..o + self.tk]
    }
}

/// Fused scaled-dot-product attention, `softmax(q k^T * scale + mask) v`, differentiable in `q`,
/// `k` and `v`: `q` `[B, T, H, D]`, `k`, `v` `[B, Tk, KVH, D]` (grouped-query heads: query head
/// `h` reads key/value head `h / (H / KVH)`), any strides with a unit last one (a KV-cache
/// prefix view works as is), mask `[B, T, Tk]`; output `[B, T, H, D]`. One pass per query row,
/// keys the mask removes are skipped. Backward recomputes the probabilities row by row.
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &HostMask,
    scale: f32,
) -> Result<Tensor> {
    let unit = |x: &Tensor| -> Result<Tensor> {
        if x.stride().last() == Some(&1) {
            Ok(x.clone())
        } else {
            x.contiguous()
        }
    };
    let (q, k, v) = (unit(q)?, unit(k)?, unit(v)?);
    q.apply_op3(
        &k,
        &v,
        tagged(FusedAttention {
            mask: mask.clone(),
            scale,
        }),
    )
}

struct FusedAttention {
    mask: HostMask,
    scale: f32,
}

#[derive(Clone, Copy)]
struct AttnDims {
    b: usize,
    t: usize,
    tk: usize,
    h: usize,
    kvh: usize,
    d: usize,
}

/// A strided `[B, T, H, D]` f32 view with unit last stride.
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    s: [usize; 3],
}

impl<'a> View<'a> {
    #[inline(always)]
    fn row(&self, b: usize, t: usize, h: usize, d: usize) -> &'a [f32] {
        let o = b * self.s[0] + t * self.s[1] + h * self.s[2];
        let data: &'a [f32] = self.data;
        &data[o..o + d]
    }
}

fn view<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<(View<'a>, [usize; 4])> {
    let CpuStorage::F32(data) = s else {
        candle_core::bail!("attention: {what} must be f32")
    };
    let (dims, st) = (l.dims(), l.stride());
    if dims.len() != 4 || (st[3] != 1 && dims[3] > 1) {
        candle_core::bail!("attention: {what} must be 4-D with a unit last stride, got {l:?}")
    }
    Ok((
        View {
            data: &data[l.start_offset()..],
            s: [st[0], st[1], st[2]],
        },
        [dims[0], dims[1], dims[2], dims[3]],
    ))
}

fn attn_dims(q: [usize; 4], k: [usize; 4], v: [usize; 4], mask: &HostMask) -> Result<AttnDims> {
    let [b, t, h, d] = q;
    let [_, tk, kvh, _] = k;
    if k != v || k[0] != b || k[3] != d || kvh == 0 || h % kvh != 0 || mask.dims() != (b, t, tk) {
        candle_core::bail!(
            "attention: q {q:?}, k {k:?}, v {v:?} and mask {:?} do not fit",
            mask.dims()
        )
    }
    Ok(AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    })
}

/// The keys row `mrow` keeps (all of them when it keeps none, as the dense softmax would).
#[inline(always)]
fn kept_keys(mrow: &[f32], idx: &mut Vec<usize>) {
    idx.clear();
    idx.extend((0..mrow.len()).filter(|&j| mrow[j] > MASK_SKIP));
    if idx.is_empty() {
        idx.extend(0..mrow.len());
    }
}

/// Normalised probabilities `p[n]` of query row `qr` over keys `idx` (head `kh` of batch `bi`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attn_probs<const AVX: bool>(
    qr: &[f32],
    k: View,
    bi: usize,
    kh: usize,
    d: usize,
    idx: &[usize],
    mrow: &[f32],
    scale: f32,
    p: &mut [f32],
) {
    dots::<AVX>(qr, idx, |j| k.row(bi, j, kh, d), p);
    let mut m = f32::NEG_INFINITY;
    for (pn, &j) in p.iter_mut().zip(idx) {
        let s = *pn * scale + mrow[j];
        *pn = s;
        m = m.max(s);
    }
    p.iter_mut().for_each(|pn| *pn = exp_poly(*pn - m));
    let sum: f32 = p.iter().sum();
    let inv = 1.0 / sum;
    p.iter_mut().for_each(|pn| *pn *= inv);
}

#[inline(always)]
fn attn_fwd_impl<const AVX: bool>(
    q: View,
    k: View,
    v: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> Vec<f32> {
    let AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    } = a;
    let group = h / kvh;
    let mut out = vec![0f32; b * t * h * d];
    let mut idx = Vec::with_capacity(tk);
    let mut p = vec![0f32; tk];
    for bi in 0..b {
        for i in 0..t {
            let mrow = mask.row(bi, i);
            kept_keys(mrow, &mut idx);
            let p = &mut p[..idx.len()];
            for hi in 0..h {
                let kh = hi / group;
                attn_probs::<AVX>(q.row(bi, i, hi, d), k, bi, kh, d, &idx, mrow, scale, p);
                let o = ((bi * t + i) * h + hi) * d;
                let orow = &mut out[o..o + d];
                for (&pn, &j) in p.iter().zip(idx.iter()) {
                    axpy(pn, v.row(bi, j, kh, d), orow);
                }
            }
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn attn_fwd_avx2(q: View, k: View, v: View, mask: &HostMask, a: AttnDims, scale: f32) -> Vec<f32> {
    attn_fwd_impl::<true>(q, k, v, mask, a, scale)
}

/// From this many query rows per call, the forward pass runs [`attn_fwd_avx512`] (its transposed
/// copy of each head's keys is then read by at least this many queries).
const BLOCKED_MIN_T: usize = 4;

/// Query rows [`attn_fwd_avx512`] scores together (their score accumulators share each load
/// of the transposed keys).
const QB: usize = 8;

/// Softmax in place of one query row's raw scores `s` (dot products, padded to a multiple of 16)
/// under additive mask row `m` (the same length; padding keys masked with `-inf`):
/// `p = exp(s * scale + m - max)` normalised over the keys the row keeps, exactly 0 on the keys
/// it masks (over all keys when it keeps none, as the dense softmax would): the probabilities
/// [`attn_probs`] gives over its kept keys. 16-lane chunks, so that it vectorises.
#[inline(always)]
fn masked_softmax16(s: &mut [f32], m: &[f32], scale: f32) {
    const L: usize = 16;
    let n = s.len().min(m.len()) / L * L;
    let (s, m) = (&mut s[..n], &m[..n]);
    let mut mx = [f32::NEG_INFINITY; L];
    for (sc, mc) in s.chunks_exact_mut(L).zip(m.chunks_exact(L)) {
        for l in 0..L {
            let x = sc[l] * scale + mc[l];
            sc[l] = x;
            let kx = if mc[l] > MASK_SKIP {
                x
            } else {
                f32::NEG_INFINITY
            };
            mx[l] = if kx > mx[l] { kx } else { mx[l] };
        }
    }
    let mut top = mx.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // a row that keeps no key: softmax over all (real) keys
    let kept = top > f32::NEG_INFINITY;
    if !kept {
        top = s
            .iter()
            .zip(m)
            .filter(|(_, mv)| **mv > f32::NEG_INFINITY)
            .fold(f32::NEG_INFINITY, |a, (x, _)| a.max(*x));
    }
    let mut acc = [0f32; L];
    for (sc, mc) in s.chunks_exact_mut(L).zip(m.chunks_exact(L)) {
        for l in 0..L {
            let e = exp_poly(sc[l] - top);
            let on = if kept {
                mc[l] > MASK_SKIP
            } else {
                mc[l] > f32::NEG_INFINITY
            };
            let e = if on { e } else { 0.0 };
            sc[l] = e;
            acc[l] += e;
        }
    }
    let inv = 1.0 / acc.iter().sum::<f32>();
    s.iter_mut().for_each(|p| *p *= inv);
}

/// The forward pass for calls of several query rows, 16 keys per AVX-512 vector: per batch row
/// and key head, the keys are copied transposed (`[D, Tk]`, padded to 16) once; then per query
/// head, blocks of [`QB`] queries take their scores from one pass over that copy (a broadcast
/// query element times 16 keys per fused multiply-add, no horizontal sums), the masked softmax
/// of each row, and the weighted sum of the value rows of the keys it keeps, 16 output lanes
/// per register.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn attn_fwd_avx512(
    q: View,
    k: View,
    v: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> Vec<f32> {
    let AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    } = a;
    let group = h / kvh;
    let tkp = tk.div_ceil(16) * 16;
    let mut out = vec![0f32; b * t * h * d];
    let mut kt = vec![0f32; d * tkp];
    let mut sc = vec![0f32; QB * tkp];
    // the mask row of the current query, padded with masked keys
    let mut mp = vec![f32::NEG_INFINITY; tkp];
    for bi in 0..b {
        for kh in 0..kvh {
            transpose_rows(k, bi, kh, tk, d, tkp, &mut kt);
            let vbase = bi * v.s[0] + kh * v.s[2];
            for hi in kh * group..(kh + 1) * group {
                let mut i0 = 0;
                while i0 < t {
                    let nq = (t - i0).min(QB);
                    let qr: [&[f32]; QB] =
                        std::array::from_fn(|r| q.row(bi, i0 + r.min(nq - 1), hi, d));
                    // SAFETY: AVX-512F (this function's contract); sizes as documented.
                    unsafe { block_scores(&kt, tkp, d, &qr, &mut sc) };
                    for r in 0..nq {
                        let i = i0 + r;
                        mp[..tk].copy_from_slice(mask.row(bi, i));
                        let p = &mut sc[r * tkp..(r + 1) * tkp];
                        masked_softmax16(p, &mp, scale);
                        let o = ((bi * t + i) * h + hi) * d;
                        // SAFETY: AVX-512F (this function's contract); o + d <= out.len().
                        unsafe {
                            weighted_rows(&p[..tk], v.data, vbase, v.s[1], d, &mut out[o..o + d])
                        };
                    }
                    i0 += nq;
                }
            }
        }
    }
    out
}

/// `dst[..d] = sum_j w[j] * row_j[..d]` over rows `j < w.len()` starting at `base + j * stride`
/// (elements of `src`): 16 output lanes per vector, four keys in flight (independent
/// accumulators, summed at the end).
///
/// # Safety
/// The CPU must support AVX-512F; `dst` holds `d` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn weighted_rows(
    w: &[f32],
    src: &[f32],
    base: usize,
    stride: usize,
    d: usize,
    dst: &mut [f32],
) {
    use std::arch::x86_64::*;
    let n = w.len();
    assert!(dst.len() >= d);
    if n > 0 {
        // every row read below is inside `src`
        let _ = &src[base + (n - 1) * stride..base + (n - 1) * stride + d];
    }
    let sp = src.as_ptr();
    let mut dc = 0;
    while dc < d {
        let lanes: __mmask16 = if dc + 16 <= d {
            !0
        } else {
            ((1u32 << (d - dc)) - 1) as __mmask16
        };
        // SAFETY: rows j < n are inside `src` (checked above; strides non-negative); the lanes
        // read and written stay below d.
        unsafe {
            let ld = |j: usize| _mm512_maskz_loadu_ps(lanes, sp.add(base + j * stride + dc));
            let mut acc = [_mm512_setzero_ps(); 4];
            let mut j = 0;
            while j + 4 <= n {
                for (l, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(_mm512_set1_ps(w[j + l]), ld(j + l), *acc);
                }
                j += 4;
            }
            while j < n {
                acc[0] = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), ld(j), acc[0]);
                j += 1;
            }
            let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
            _mm512_mask_storeu_ps(dst.as_mut_ptr().add(dc), lanes, sum);
        }
        dc += 16;
    }
}

/// Scores of [`QB`] rows `rows` against the columns of `src_t` (`[D, Tkp]`, keys or values
/// transposed, `Tkp` a multiple of 16) into `out` (`[QB, Tkp]`): a broadcast row element times
/// 16 columns per fused multiply-add.
///
/// # Safety
/// The CPU must support AVX-512F; `src_t` holds `d * tkp` and `out` `QB * tkp` elements, every
/// row at least `d`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn block_scores(src_t: &[f32], tkp: usize, d: usize, rows: &[&[f32]; QB], out: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(src_t.len() >= d * tkp && out.len() >= QB * tkp && rows.iter().all(|r| r.len() >= d));
    for jc in (0..tkp).step_by(16) {
        let mut acc = [_mm512_setzero_ps(); QB];
        for c in 0..d {
            // SAFETY: c < d and jc + 16 <= tkp: inside `src_t` (asserted above).
            let kv = unsafe { _mm512_loadu_ps(src_t.as_ptr().add(c * tkp + jc)) };
            for (acc, row) in acc.iter_mut().zip(rows) {
                // SAFETY: c < d <= row.len() (asserted above).
                let x = unsafe { *row.get_unchecked(c) };
                *acc = _mm512_fmadd_ps(_mm512_set1_ps(x), kv, *acc);
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: r < QB and jc + 16 <= tkp: inside `out` (asserted above).
            unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(r * tkp + jc), *acc) };
        }
    }
}

/// `[D, Tkp]` transposed copy of rows `0..tk` of `x` at (batch row `bi`, head `kh`) into `dst`
/// (padding columns left as they are).
#[inline(always)]
fn transpose_rows(x: View, bi: usize, kh: usize, tk: usize, d: usize, tkp: usize, dst: &mut [f32]) {
    for j in 0..tk {
        for (c, &e) in x.row(bi, j, kh, d).iter().enumerate() {
            dst[c * tkp + j] = e;
        }
    }
}

fn attn_fwd(q: View, k: View, v: View, mask: &HostMask, a: AttnDims, scale: f32) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if a.t >= BLOCKED_MIN_T && avx512() {
        // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked above).
        return unsafe { attn_fwd_avx512(q, k, v, mask, a, scale) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { attn_fwd_avx2(q, k, v, mask, a, scale) };
    }
    attn_fwd_impl::<false>(q, k, v, mask, a, scale)
}

/// `(dq, dk, dv)` of [`attention`] for output gradient `g` (contiguous `[B, T, H, D]`).
type AttnGrads = (Vec<f32>, Vec<f32>, Vec<f32>);

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attn_bwd_impl<const AVX: bool>(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    let AttnDims {
        b,
        t,
        tk,
        h,
        kvh,
        d,
    } = a;
    let group = h / kvh;
    let mut dq = vec![0f32; b * t * h * d];
    let mut dk = vec![0f32; b * tk * kvh * d];
    let mut dv = vec![0f32; b * tk * kvh * d];
    let mut idx = Vec::with_capacity(tk);
    let (mut p, mut dp) = (vec![0f32; tk], vec![0f32; tk]);
    for bi in 0..b {
        for i in 0..t {
            let mrow = mask.row(bi, i);
            kept_keys(mrow, &mut idx);
            let n = idx.len();
            let (p, dp) = (&mut p[..n], &mut dp[..n]);
            for hi in 0..h {
                let kh = hi / group;
                let qr = q.row(bi, i, hi, d);
                attn_probs::<AVX>(qr, k, bi, kh, d, &idx, mrow, scale, p);
                let gr = g.row(bi, i, hi, d);
                dots::<AVX>(gr, &idx, |j| v.row(bi, j, kh, d), dp);
                let mut dsum = 0.0;
                for (&dpn, &pn) in dp.iter().zip(p.iter()) {
                    dsum += pn * dpn;
                }
                let qo = ((bi * t + i) * h + hi) * d;
                for ((&dpn, &pn), &j) in dp.iter().zip(p.iter()).zip(idx.iter()) {
                    let ds = pn * (dpn - dsum) * scale;
                    let ko = ((bi * tk + j) * kvh + kh) * d;
                    axpy(ds, k.row(bi, j, kh, d), &mut dq[qo..qo + d]);
                    axpy(ds, qr, &mut dk[ko..ko + d]);
                    axpy(pn, gr, &mut dv[ko..ko + d]);
                }
            }
        }
    }
    (dq, dk, dv)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn attn_bwd_avx2(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    attn_bwd_impl::<true>(q, k, v, g, mask, a, scale)
}

fn attn_bwd(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked above).
        return unsafe { attn_bwd_avx2(q, k, v, g, mask, a, scale) };
    }
    attn_bwd_impl::<false>(q, k, v, g, mask, a, scale)
}
// Not an `F32Op3` (see `kernels/mod.rs`): q, k and v are strided views read in place, not
// contiguous rows.
impl CustomOp3 for FusedAttention {
    fn name(&self) -> &'static str {
        "rlprof-attention"
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
        let (q, qd) = view(s1, l1, "q")?;
        let (k, kd) = view(s2, l2, "k")?;
        let (v, vd) = view(s3, l3, "v")?;
        let a = attn_dims(qd, kd, vd, &self.mask)?;
        let out = attn_fwd(q, k, v, &self.mask, a, self.scale);
        Ok((CpuStorage::F32(out), Shape::from(qd.to_vec())))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let (dq, dk, dv) = {
            let (qs, ql) = q.storage_and_layout();
            let (ks, kl) = k.storage_and_layout();
            let (vs, vl) = v.storage_and_layout();
            let (gs, gl) = grad.storage_and_layout();
            let (qv, qd) = view(cpu_of(&qs, "q")?, ql, "q")?;
            let (kv, kd) = view(cpu_of(&ks, "k")?, kl, "k")?;
            let (vv, vd) = view(cpu_of(&vs, "v")?, vl, "v")?;
            let (gv, gd) = view(cpu_of(&gs, "grad")?, gl, "grad")?;
            let a = attn_dims(qd, kd, vd, &self.mask)?;
            if gd != qd {
                candle_core::bail!("attention backward: grad {gd:?} vs q {qd:?}")
            }
            attn_bwd(qv, kv, vv, gv, &self.mask, a, self.scale)
        };
        let dev = q.device();
        Ok((
            Some(Tensor::from_vec(dq, q.shape(), dev)?),
            Some(Tensor::from_vec(dk, k.shape(), dev)?),
            Some(Tensor::from_vec(dv, v.shape(), dev)?),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{check, diff, var};
    use super::*;
    use candle_core::{D, Device};

    /// Causal mask over left-padded rows (`pad[b]` leading pad keys), as the model builds it.
    fn causal_mask(b: usize, t: usize, pad: &[usize]) -> Vec<f32> {
        let mut m = vec![-1e9f32; b * t * t];
        for bi in 0..b {
            for i in 0..t {
                for j in 0..=i {
                    if j >= pad[bi] || j == i {
                        m[(bi * t + i) * t + j] = 0.0;
                    }
                }
            }
        }
        m
    }

    /// Dense attention from candle ops on `[B, T, H, D]` inputs (grouped heads repeated).
    fn composed_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &[f32], scale: f64) -> Tensor {
        let (b, t, h, d) = q.dims4().unwrap();
        let (_, tk, kvh, _) = k.dims4().unwrap();
        let rep = |x: &Tensor| {
            x.transpose(1, 2)
                .unwrap()
                .unsqueeze(2)
                .unwrap()
                .expand((b, kvh, h / kvh, tk, d))
                .unwrap()
                .contiguous()
                .unwrap()
                .reshape((b, h, tk, d))
                .unwrap()
        };
        let qt = q.transpose(1, 2).unwrap().contiguous().unwrap();
        let (kt, vt) = (rep(k), rep(v));
        let m = Tensor::from_slice(mask, (b, 1, t, tk), &Device::Cpu)
            .unwrap()
            .broadcast_as((b, h, t, tk))
            .unwrap()
            .contiguous()
            .unwrap();
        let s = qt
            .matmul(&kt.transpose(2, 3).unwrap().contiguous().unwrap())
            .unwrap()
            .affine(scale, 0.0)
            .unwrap()
            .add(&m)
            .unwrap();
        let p = candle_nn::ops::softmax(&s, D::Minus1).unwrap();
        p.matmul(&vt)
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    }

    #[test]
    fn attention_matches_the_composed_form_with_padding_and_grouped_heads() {
        // 19 positions: rows with 8 or more kept keys take the eight-at-a-time dot products.
        for (h, kvh, t) in [(4, 4, 6), (4, 2, 6), (4, 2, 19)] {
            let (b, d) = (3, 8);
            let (q, k, v) = (
                var(&[b, t, h, d], 1.0),
                var(&[b, t, kvh, d], 1.0),
                var(&[b, t, kvh, d], 1.0),
            );
            let mask = causal_mask(b, t, &[0, 2, 5]);
            let hm = HostMask::new(mask.clone(), b, t, t).unwrap();
            let scale = 1.0 / (d as f64).sqrt();
            check(
                &[&q, &k, &v],
                |ts| attention(ts[0], ts[1], ts[2], &hm, scale as f32).unwrap(),
                |ts| composed_attention(ts[0], ts[1], ts[2], &mask, scale),
                1e-5,
            );
        }
    }

    #[test]
    fn attention_reads_a_strided_cache_prefix() {
        let (b, h, d, cap, tk) = (2, 2, 4, 9, 5);
        let q = Tensor::randn(0f32, 1.0, (b, 1, h, d), &Device::Cpu).unwrap();
        let kc = Tensor::randn(0f32, 1.0, (b, cap, h, d), &Device::Cpu).unwrap();
        let vc = Tensor::randn(0f32, 1.0, (b, cap, h, d), &Device::Cpu).unwrap();
        let (k, v) = (kc.narrow(1, 0, tk).unwrap(), vc.narrow(1, 0, tk).unwrap());
        let mask: Vec<f32> = (0..b * tk)
            .map(|i| if i == 1 { -1e9 } else { 0.0 })
            .collect();
        let hm = HostMask::new(mask.clone(), b, 1, tk).unwrap();
        let ours = attention(&q, &k, &v, &hm, 0.5).unwrap();
        let theirs = composed_attention(
            &q,
            &k.contiguous().unwrap(),
            &v.contiguous().unwrap(),
            &mask,
            0.5,
        );
        assert!(diff(&ours, &theirs) < 1e-5, "{}", diff(&ours, &theirs));
    }
}

#[cfg(test)]
mod blocked_tests {
    use super::*;
    use candle_core::Device;

    /// The model's shared-prompt suffix pass: `t` queries after a `p`-key prompt, causal.
    fn suffix_mask(b: usize, p: usize, t: usize) -> Vec<f32> {
        let tk = p + t;
        let mut m = vec![-1e9f32; b * t * tk];
        for bi in 0..b {
            for i in 0..t {
                for j in 0..tk {
                    if (j < p && j >= bi % 3) || (j >= p && j - p <= i) {
                        m[(bi * t + i) * tk + j] = 0.0;
                    }
                }
            }
        }
        m
    }

    #[test]
    fn blocked_forward_equals_the_row_forward() {
        // d 40: two full 16-lane chunks and a partial one; 7 queries: a partial query block
        let (b, p, t, h, kvh, d) = (4, 5, 7, 4, 2, 40);
        let tk = p + t;
        let q = Tensor::randn(0f32, 1.0, (b, t, h, d), &Device::Cpu).unwrap();
        let k = Tensor::randn(0f32, 1.0, (b, tk, kvh, d), &Device::Cpu).unwrap();
        let v = Tensor::randn(0f32, 1.0, (b, tk, kvh, d), &Device::Cpu).unwrap();
        let mut m = suffix_mask(b, p, t);
        // a row that keeps no key: softmax over all of them
        m[..tk].iter_mut().for_each(|x| *x = -1e9);
        let hm = HostMask::new(m, b, t, tk).unwrap();
        let (qs, ql) = q.storage_and_layout();
        let (ks, kl) = k.storage_and_layout();
        let (vs, vl) = v.storage_and_layout();
        let (qv, qd) = view(cpu_of(&qs, "q").unwrap(), ql, "q").unwrap();
        let (kv, kd) = view(cpu_of(&ks, "k").unwrap(), kl, "k").unwrap();
        let (vv, vd) = view(cpu_of(&vs, "v").unwrap(), vl, "v").unwrap();
        let a = attn_dims(qd, kd, vd, &hm).unwrap();
        let rows = attn_fwd_impl::<false>(qv, kv, vv, &hm, a, 0.3);
        #[cfg(target_arch = "x86_64")]
        if avx512() {
            // SAFETY: checked above.
            let blocked = unsafe { attn_fwd_avx512(qv, kv, vv, &hm, a, 0.3) };
            let worst = rows
                .iter()
                .zip(&blocked)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-5, "blocked vs row forward: {worst}");
        }
    }
}
