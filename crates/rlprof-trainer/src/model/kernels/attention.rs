//! Fused grouped-query attention ([`attention`]) over an additive host-side mask ([`HostMask`]),
//! forward and backward, reading strided `[B, T, H, D]` views in place.
//!
//! Kernels: the row kernels ([`attn_fwd_impl`], [`attn_bwd_impl`]; portable, or AVX2+FMA) and,
//! on AVX-512 CPUs, block kernels for calls of [`BLOCKED_MIN_T`] or more query rows
//! ([`attn_fwd_avx512`], [`attn_bwd_avx512`]: keys transposed once per head, [`QB`] queries
//! scored together, intrinsic masked softmax) and a few-row forward for decoding
//! ([`attn_fwd_rows_avx512`]). All give the row kernels' probabilities (the same [`exp_poly`]
//! arithmetic) up to the order of the sums.

use super::cpu_of;
#[cfg(target_arch = "x86_64")]
use super::simd::{avx2_fma, avx512, exp_poly16};
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
/// prefix view works as is), mask `[B, T, Tk]`; output `[B, T, H, D]`. Keys the mask removes
/// get exactly 0 and are skipped where they can be (past a row's last kept key). Backward
/// recomputes the probabilities.
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

/// From this many query rows per call, the forward and backward passes run the AVX-512 block
/// kernels ([`attn_fwd_avx512`], [`attn_bwd_avx512`]): their transposed copy of each head's keys
/// is then read by at least this many queries.
#[cfg(target_arch = "x86_64")]
const BLOCKED_MIN_T: usize = 4;

/// Query rows the block kernels score together (their score accumulators share each load of
/// the transposed keys).
#[cfg(target_arch = "x86_64")]
const QB: usize = 8;

/// One batch row's mask, as the block kernels read it: each query row's mask padded to `tkp`
/// keys with `-inf` (padding keys masked), and how far its softmax reaches (`nk`: one past its
/// last kept key; all `tk` keys when it keeps none). Keys at or past `nk` get exactly 0, so the
/// kernels stop there.
#[cfg(target_arch = "x86_64")]
struct PaddedMask {
    mp: Vec<f32>,
    nk: Vec<usize>,
    tkp: usize,
}

#[cfg(target_arch = "x86_64")]
impl PaddedMask {
    fn new(t: usize, tkp: usize) -> PaddedMask {
        PaddedMask {
            mp: vec![f32::NEG_INFINITY; t * tkp],
            nk: vec![0; t],
            tkp,
        }
    }

    /// Takes batch row `bi` of `mask`.
    fn fill(&mut self, mask: &HostMask, bi: usize) {
        let (tk, tkp) = (mask.tk, self.tkp);
        for (i, nk) in self.nk.iter_mut().enumerate() {
            let row = mask.row(bi, i);
            self.mp[i * tkp..i * tkp + tk].copy_from_slice(row);
            *nk = row
                .iter()
                .rposition(|&m| m > MASK_SKIP)
                .map_or(tk, |j| j + 1);
        }
    }

    /// The keys query rows `i0..i0 + nq` reach.
    fn keys(&self, i0: usize, nq: usize) -> usize {
        self.nk[i0..i0 + nq].iter().copied().max().unwrap_or(0)
    }

    /// The 16-key chunks query rows `i0..i0 + nq` reach.
    fn chunks(&self, i0: usize, nq: usize) -> usize {
        self.keys(i0, nq).div_ceil(16)
    }
}

/// Softmax in place of the raw scores (dot products) of query rows `i0..i0 + nq` (at most
/// [`QB`]), rows of `sc` (`[nq, Tkp]`), over their first `nc` 16-key chunks, under their padded mask rows: `p =
/// exp(s * scale + m - max)` normalised over the keys a row keeps, exactly 0 on the keys it
/// masks (over all real keys when it keeps none, as the dense softmax would): the probabilities
/// [`attn_probs`] gives over its kept keys, with [`exp_poly`]'s exact arithmetic (16 lanes by
/// [`exp_poly16`]). Each step runs over all rows before the next (the rows' max, exp and sum
/// chains overlap).
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn block_softmax(
    sc: &mut [f32],
    pm: &PaddedMask,
    i0: usize,
    nq: usize,
    nc: usize,
    scale: f32,
) {
    use std::arch::x86_64::*;
    let tkp = pm.tkp;
    assert!(nq <= QB && nc * 16 <= tkp && sc.len() >= nq * tkp && pm.mp.len() >= (i0 + nq) * tkp);
    if nc == 0 {
        return;
    }
    let (s0, m0) = (sc.as_mut_ptr(), pm.mp.as_ptr());
    // SAFETY: row r < nq <= QB of `sc` and row i0 + r of the mask (asserted above). Every access
    // below reads or writes chunk c < nc of such rows, inside both (nc * 16 <= tkp).
    let row = |r: usize| unsafe { (s0.add(r * tkp), m0.add((i0 + r) * tkp)) };
    let (vs, skip) = (_mm512_set1_ps(scale), _mm512_set1_ps(MASK_SKIP));
    let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut top = [0f32; QB];
    // the keys each row's softmax runs over: those kept, or all real keys when none is
    let mut above = [skip; QB];
    for r in 0..nq {
        let (sp, mp) = row(r);
        let mut mx = ninf;
        for c in 0..nc {
            // SAFETY: chunk c < nc of row r (see `row`).
            unsafe {
                let mv = _mm512_loadu_ps(mp.add(16 * c));
                // a multiply then an add, as the scalar `s * scale + m` (no fused rounding)
                let x = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(sp.add(16 * c)), vs), mv);
                _mm512_storeu_ps(sp.add(16 * c), x);
                let keep = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(mv, skip);
                mx = _mm512_mask_max_ps(mx, keep, mx, x);
            }
        }
        top[r] = _mm512_reduce_max_ps(mx);
        if top[r] == f32::NEG_INFINITY {
            above[r] = ninf;
            for c in 0..nc {
                // SAFETY: chunk c < nc of row r (see `row`).
                unsafe {
                    let mv = _mm512_loadu_ps(mp.add(16 * c));
                    let real = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(mv, ninf);
                    mx = _mm512_mask_max_ps(mx, real, mx, _mm512_loadu_ps(sp.add(16 * c)));
                }
            }
            top[r] = _mm512_reduce_max_ps(mx);
        }
    }
    let mut sum = [0f32; QB];
    for (r, sum) in sum.iter_mut().enumerate().take(nq) {
        let (sp, mp) = row(r);
        let vt = _mm512_set1_ps(top[r]);
        let mut acc = _mm512_setzero_ps();
        for c in 0..nc {
            // SAFETY: chunk c < nc of row r (see `row`).
            unsafe {
                let on =
                    _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_loadu_ps(mp.add(16 * c)), above[r]);
                let x = _mm512_loadu_ps(sp.add(16 * c));
                let e = _mm512_maskz_mov_ps(on, exp_poly16(_mm512_sub_ps(x, vt)));
                _mm512_storeu_ps(sp.add(16 * c), e);
                acc = _mm512_add_ps(acc, e);
            }
        }
        *sum = _mm512_reduce_add_ps(acc);
    }
    for (r, sum) in sum.iter().enumerate().take(nq) {
        let (sp, _) = row(r);
        let inv = _mm512_set1_ps(1.0 / sum);
        for c in 0..nc {
            // SAFETY: chunk c < nc of row r (see `row`).
            unsafe {
                let p = sp.add(16 * c);
                _mm512_storeu_ps(p, _mm512_mul_ps(_mm512_loadu_ps(p), inv));
            }
        }
    }
}

/// The forward pass for calls of several query rows, 16 keys per AVX-512 vector: per batch row
/// and key head, the keys are copied transposed (`[D, Tk]`, padded to 16; in-register 16 x 16
/// transposes) once; then per query head, blocks of [`QB`] queries take their scores from one
/// pass over that copy (a broadcast query element times 16 keys per fused multiply-add, no
/// horizontal sums) up to the last key the block reaches, the masked softmax of its rows
/// ([`block_softmax`]), and the block's weighted sums of the value rows ([`block_weighted`]).
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
    let mut pm = PaddedMask::new(t, tkp);
    for bi in 0..b {
        pm.fill(mask, bi);
        for kh in 0..kvh {
            // SAFETY: AVX-512F (this function's contract).
            unsafe { transpose_in(k, bi * k.s[0] + kh * k.s[2], tk, d, tkp, &mut kt) };
            let vbase = bi * v.s[0] + kh * v.s[2];
            for hi in kh * group..(kh + 1) * group {
                let mut i0 = 0;
                while i0 < t {
                    let nq = (t - i0).min(QB);
                    let nc = pm.chunks(i0, nq);
                    let qr = block_rows(q, bi, i0, nq, hi, d);
                    // SAFETY: AVX-512F (this function's contract); sizes as documented.
                    unsafe { block_scores(&kt, tkp, nc, d, &qr, &mut sc) };
                    // SAFETY: AVX-512F (this function's contract); nc * 16 <= tkp.
                    unsafe { block_softmax(&mut sc, &pm, i0, nq, nc, scale) };
                    let n = pm.keys(i0, nq);
                    let o = ((bi * t + i0) * h + hi) * d;
                    // SAFETY: AVX-512F (this function's contract); n <= nc * 16 <= tkp.
                    unsafe {
                        block_weighted::<QB>(&sc, tkp, nq, n, v, vbase, d, &mut out, o, h * d)
                    };
                    i0 += nq;
                }
            }
        }
    }
    out
}

/// Dot products `q . x_j` of one query row with key rows `j < n` (at `base + j * x.s[1]`) into
/// `out[..n]`, 16 keys per vector: each key's `NCD` 16-lane products summed by fused
/// multiply-adds, then the 16 keys' lanes reduced together (a tree of in-lane, then cross-lane
/// shuffles and adds: 45 operations per 16 keys instead of 16 horizontal sums). `out` from `n`
/// to the next multiple of 16 is set to 0.
///
/// # Safety
/// The CPU must support AVX-512F; `d <= 16 * NCD`, `q` holds `d` elements, `out` `n` rounded up
/// to 16, rows `j < n` of `x` are inside it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn row_scores<const NCD: usize>(
    q: &[f32],
    x: View,
    base: usize,
    n: usize,
    d: usize,
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    assert!(d <= 16 * NCD && q.len() >= d && out.len() >= n.div_ceil(16) * 16);
    if n > 0 {
        let _ = &x.data[base + (n - 1) * x.s[1]..base + (n - 1) * x.s[1] + d];
    }
    let mut lane: [__mmask16; NCD] = [0; NCD];
    let mut qv = [_mm512_setzero_ps(); NCD];
    for c in 0..NCD {
        lane[c] = lanes(16 * c, d);
        // SAFETY: lanes below d, inside `q` (asserted above).
        qv[c] = unsafe { _mm512_maskz_loadu_ps(lane[c], q.as_ptr().add(16 * c)) };
    }
    let xp = x.data.as_ptr();
    for j0 in (0..n).step_by(16) {
        let mut v = [_mm512_setzero_ps(); 16];
        for (l, v) in v.iter_mut().enumerate().take(n - j0) {
            let row = base + (j0 + l) * x.s[1];
            for c in 0..NCD {
                // SAFETY: row j0 + l < n is inside `x.data` (checked above), lanes below d.
                let kv = unsafe { _mm512_maskz_loadu_ps(lane[c], xp.add(row + 16 * c)) };
                *v = _mm512_fmadd_ps(qv[c], kv, *v);
            }
        }
        // pairs: per 128-bit lane, [a0+a2, b0+b2, a1+a3, b1+b3]
        let mut s2 = [_mm512_setzero_ps(); 8];
        for (i, s2) in s2.iter_mut().enumerate() {
            let (a, b) = (v[2 * i], v[2 * i + 1]);
            *s2 = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        }
        // quads: per 128-bit lane, that lane's sums of keys 4i..4i + 4
        let mut s4 = [_mm512_setzero_ps(); 4];
        for (i, s4) in s4.iter_mut().enumerate() {
            let (a, b) = (s2[2 * i], s2[2 * i + 1]);
            *s4 = _mm512_add_ps(
                _mm512_shuffle_ps::<0x44>(a, b),
                _mm512_shuffle_ps::<0xEE>(a, b),
            );
        }
        // across the four 128-bit lanes: 128-bit lane L of the result holds keys 4L..4L + 4
        let w0 = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(s4[0], s4[1]),
            _mm512_shuffle_f32x4::<0xEE>(s4[0], s4[1]),
        );
        let w1 = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(s4[2], s4[3]),
            _mm512_shuffle_f32x4::<0xEE>(s4[2], s4[3]),
        );
        let sums = _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(w0, w1),
            _mm512_shuffle_f32x4::<0xDD>(w0, w1),
        );
        // SAFETY: j0 + 16 <= n rounded up to 16 <= out.len() (asserted above).
        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(j0), sums) };
    }
}

/// The forward pass for calls of a few query rows (decoding), with AVX-512: per query row and
/// head, the scores by [`row_scores`] up to the row's last kept key, its softmax by
/// [`block_softmax`] (a block of one) and the weighted sum of the value rows by
/// [`block_weighted`] (one row). No transposed copies: each key is read once per query.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA; `d <= 64`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn attn_fwd_rows_avx512(
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
    assert!(d <= 64);
    let group = h / kvh;
    let tkp = tk.div_ceil(16) * 16;
    let mut out = vec![0f32; b * t * h * d];
    let mut sc = vec![0f32; tkp];
    let mut pm = PaddedMask::new(t, tkp);
    for bi in 0..b {
        pm.fill(mask, bi);
        for i in 0..t {
            let n = pm.nk[i];
            for hi in 0..h {
                let kh = hi / group;
                let qr = q.row(bi, i, hi, d);
                let kbase = bi * k.s[0] + kh * k.s[2];
                // SAFETY: AVX-512F (this function's contract); d <= 64, `sc` holds tkp >= n
                // rounded up to 16.
                unsafe {
                    match d.div_ceil(16) {
                        0 | 1 => row_scores::<1>(qr, k, kbase, n, d, &mut sc),
                        2 => row_scores::<2>(qr, k, kbase, n, d, &mut sc),
                        3 => row_scores::<3>(qr, k, kbase, n, d, &mut sc),
                        _ => row_scores::<4>(qr, k, kbase, n, d, &mut sc),
                    }
                }
                let o = ((bi * t + i) * h + hi) * d;
                let vbase = bi * v.s[0] + kh * v.s[2];
                // SAFETY: AVX-512F; n.div_ceil(16) * 16 <= tkp; `sc` holds one row of tkp.
                unsafe {
                    block_softmax(&mut sc, &pm, i, 1, n.div_ceil(16), scale);
                    block_weighted::<1>(&sc, tkp, 1, n, v, vbase, d, &mut out, o, h * d);
                }
            }
        }
    }
    out
}

/// `dst[o + r * rs..][..d] = sum_{j < n} w[r * tkp + j] * x_j[..d]` for block rows `r < nq`,
/// `x_j` the row of `x` at `base + j * x.s[1]`: the probability-weighted sums of a query block
/// (`P V`, `dS K`). Per pass over the rows, 32 output columns of all `R` rows (a block of
/// [`QB`], or one): two row loads feed `2 R` accumulators.
///
/// # Safety
/// The CPU must support AVX-512F; `n <= tkp`, `w` holds `R * tkp` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn block_weighted<const R: usize>(
    w: &[f32],
    tkp: usize,
    nq: usize,
    n: usize,
    x: View,
    base: usize,
    d: usize,
    dst: &mut [f32],
    o: usize,
    rs: usize,
) {
    assert!(n <= tkp && w.len() >= R * tkp && nq <= R);
    if nq == 0 || d == 0 {
        return;
    }
    // every row read and written below is inside its slice
    if n > 0 {
        let _ = &x.data[base + (n - 1) * x.s[1]..base + (n - 1) * x.s[1] + d];
    }
    let _ = &dst[o + (nq - 1) * rs..o + (nq - 1) * rs + d];
    let mut dc = 0;
    while dc < d {
        // SAFETY: as checked above; columns below d.
        unsafe {
            if d - dc > 16 {
                weighted_pass::<2, R>(w, tkp, nq, n, x, base, d, dc, dst, o, rs);
            } else {
                weighted_pass::<1, R>(w, tkp, nq, n, x, base, d, dc, dst, o, rs);
            }
        }
        dc += 32;
    }
}

/// The 16 lanes of a row's columns `c..c + 16` below `d`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lanes(c: usize, d: usize) -> u16 {
    if c + 16 <= d {
        !0
    } else if c >= d {
        0
    } else {
        ((1u32 << (d - c)) - 1) as u16
    }
}

/// [`block_weighted`] on output columns `dc..dc + 16 * NC` (those below `d`).
///
/// # Safety
/// As [`block_weighted`], whose checks it relies on.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn weighted_pass<const NC: usize, const R: usize>(
    w: &[f32],
    tkp: usize,
    nq: usize,
    n: usize,
    x: View,
    base: usize,
    d: usize,
    dc: usize,
    dst: &mut [f32],
    o: usize,
    rs: usize,
) {
    use std::arch::x86_64::*;
    let mut lane: [__mmask16; NC] = [0; NC];
    for (c, l) in lane.iter_mut().enumerate() {
        *l = lanes(dc + 16 * c, d);
    }
    let (xp, wp) = (x.data.as_ptr(), w.as_ptr());
    let mut acc = [[_mm512_setzero_ps(); NC]; R];
    for j in 0..n {
        let mut xv = [_mm512_setzero_ps(); NC];
        for (c, xv) in xv.iter_mut().enumerate() {
            // SAFETY: row j < n of `x` (the caller's checks), lanes below d.
            *xv =
                unsafe { _mm512_maskz_loadu_ps(lane[c], xp.add(base + j * x.s[1] + dc + 16 * c)) };
        }
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: r < QB, j < n <= tkp: inside `w`.
            let wv = _mm512_set1_ps(unsafe { *wp.add(r * tkp + j) });
            for (acc, xv) in acc.iter_mut().zip(&xv) {
                *acc = _mm512_fmadd_ps(wv, *xv, *acc);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate().take(nq) {
        for (c, acc) in acc.iter().enumerate() {
            // SAFETY: row r < nq of `dst` (the caller's checks), lanes below d.
            unsafe {
                _mm512_mask_storeu_ps(
                    dst.as_mut_ptr().add(o + r * rs + dc + 16 * c),
                    lane[c],
                    *acc,
                )
            };
        }
    }
}

/// Scores of [`QB`] rows `rows` against the first `nc` 16-column chunks of `src_t` (`[D, Tkp]`,
/// keys or values transposed, `Tkp` a multiple of 16) into `out` (`[QB, Tkp]`): a broadcast row
/// element times 16 columns per fused multiply-add.
///
/// # Safety
/// The CPU must support AVX-512F; `nc * 16 <= tkp`, `src_t` holds `d * tkp` and `out`
/// `QB * tkp` elements, every row at least `d`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn block_scores(
    src_t: &[f32],
    tkp: usize,
    nc: usize,
    d: usize,
    rows: &[&[f32]; QB],
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    assert!(
        nc * 16 <= tkp
            && src_t.len() >= d * tkp
            && out.len() >= QB * tkp
            && rows.iter().all(|r| r.len() >= d)
    );
    for jc in (0..nc * 16).step_by(16) {
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

/// Rows `i0..i0 + nq` of head `hi` of batch row `bi`, the last repeated up to [`QB`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn block_rows<'a>(
    x: View<'a>,
    bi: usize,
    i0: usize,
    nq: usize,
    hi: usize,
    d: usize,
) -> [&'a [f32]; QB] {
    std::array::from_fn(|r| x.row(bi, i0 + r.min(nq - 1), hi, d))
}

/// Transposes 16 vectors in registers: lane `l` of output `c` is lane `c` of input `l`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(r: &mut [std::arch::x86_64::__m512; 16]) {
    use std::arch::x86_64::*;
    // pairs: per 128-bit lane L, [r0[4L], r1[4L], r0[4L+1], r1[4L+1]] and the next two columns
    // (plain loops: a closure in `array::from_fn` would be compiled without AVX-512)
    let mut a = [_mm512_setzero_ps(); 16];
    for i in (0..16).step_by(2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    // quads: c[4g + m] holds, per 128-bit lane L, column 4L + m of rows 4g..4g + 4
    let mut c = [_mm512_setzero_ps(); 16];
    for g in (0..16).step_by(4) {
        c[g] = _mm512_shuffle_ps::<0x44>(a[g], a[g + 2]);
        c[g + 1] = _mm512_shuffle_ps::<0xEE>(a[g], a[g + 2]);
        c[g + 2] = _mm512_shuffle_ps::<0x44>(a[g + 1], a[g + 3]);
        c[g + 3] = _mm512_shuffle_ps::<0xEE>(a[g + 1], a[g + 3]);
    }
    // 128-bit lanes: output 4L + m gathers lane L of c[m], c[4 + m], c[8 + m], c[12 + m]
    for m in 0..4 {
        let x01 = _mm512_shuffle_f32x4::<0x44>(c[m], c[4 + m]);
        let x23 = _mm512_shuffle_f32x4::<0xEE>(c[m], c[4 + m]);
        let y01 = _mm512_shuffle_f32x4::<0x44>(c[8 + m], c[12 + m]);
        let y23 = _mm512_shuffle_f32x4::<0xEE>(c[8 + m], c[12 + m]);
        r[m] = _mm512_shuffle_f32x4::<0x88>(x01, y01);
        r[4 + m] = _mm512_shuffle_f32x4::<0xDD>(x01, y01);
        r[8 + m] = _mm512_shuffle_f32x4::<0x88>(x23, y23);
        r[12 + m] = _mm512_shuffle_f32x4::<0xDD>(x23, y23);
    }
}

/// `[D, Tkp]` transposed copy of rows `0..tk` (columns `0..d`) of `x` at `base + j * x.s[1]`
/// into `dst`, padding columns `tk..tkp` zero: 16 x 16 tiles transposed in registers.
///
/// # Safety
/// The CPU must support AVX-512F; `tkp` is `tk` rounded up to 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn transpose_in(x: View, base: usize, tk: usize, d: usize, tkp: usize, dst: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(tkp >= tk && tkp.is_multiple_of(16) && dst.len() >= d * tkp);
    if tk > 0 && d > 0 {
        let _ = &x.data[base + (tk - 1) * x.s[1]..base + (tk - 1) * x.s[1] + d];
    }
    let sp = x.data.as_ptr();
    for j0 in (0..tk).step_by(16) {
        for c0 in (0..d).step_by(16) {
            let m = lanes(c0, d);
            let mut r = [_mm512_setzero_ps(); 16];
            for (l, r) in r.iter_mut().enumerate().take(tk - j0) {
                // SAFETY: row j0 + l < tk is inside `x.data` (checked above), lanes < d.
                *r = unsafe { _mm512_maskz_loadu_ps(m, sp.add(base + (j0 + l) * x.s[1] + c0)) };
            }
            transpose16(&mut r);
            for (cc, r) in r.iter().enumerate().take((d - c0).min(16)) {
                // SAFETY: c0 + cc < d and j0 + 16 <= tkp: inside `dst` (asserted above).
                unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add((c0 + cc) * tkp + j0), *r) };
            }
        }
    }
}

/// `dst[base + j * rs..][..d] += sum_{r < QB} w[r * tkp + j] * rows[r][..d]` for keys `j < n`
/// (`w` `[QB, Tkp]`, zero in rows past the block's): the key-side gradients of a query block in
/// row layout, `dK += dS^T Q` and `dV += P^T G`. Per pass, 32 columns of the block's rows stay
/// in registers; each key row is loaded, takes [`QB`] fused multiply-adds per 16 columns, and
/// is stored.
///
/// # Safety
/// The CPU must support AVX-512F; `n <= tkp`, `w` holds `QB * tkp` elements, every row at
/// least `d`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn block_outer_rows(
    rows: &[&[f32]; QB],
    w: &[f32],
    tkp: usize,
    n: usize,
    d: usize,
    dst: &mut [f32],
    base: usize,
    rs: usize,
) {
    assert!(n <= tkp && w.len() >= QB * tkp && rows.iter().all(|r| r.len() >= d));
    if n == 0 || d == 0 {
        return;
    }
    let _ = &dst[base + (n - 1) * rs..base + (n - 1) * rs + d];
    let mut dc = 0;
    while dc < d {
        // SAFETY: as checked above; columns below d.
        unsafe {
            if d - dc > 16 {
                outer_rows_pass::<2>(rows, w, tkp, n, d, dc, dst, base, rs);
            } else {
                outer_rows_pass::<1>(rows, w, tkp, n, d, dc, dst, base, rs);
            }
        }
        dc += 32;
    }
}

/// [`block_outer_rows`] on columns `dc..dc + 16 * NC` (those below `d`).
///
/// # Safety
/// As [`block_outer_rows`], whose checks it relies on.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn outer_rows_pass<const NC: usize>(
    rows: &[&[f32]; QB],
    w: &[f32],
    tkp: usize,
    n: usize,
    d: usize,
    dc: usize,
    dst: &mut [f32],
    base: usize,
    rs: usize,
) {
    use std::arch::x86_64::*;
    let mut lane: [__mmask16; NC] = [0; NC];
    for (c, l) in lane.iter_mut().enumerate() {
        *l = lanes(dc + 16 * c, d);
    }
    let mut xr = [[_mm512_setzero_ps(); NC]; QB];
    for (xr, row) in xr.iter_mut().zip(rows) {
        for (c, x) in xr.iter_mut().enumerate() {
            // SAFETY: lanes below d <= row.len() (the caller's checks).
            *x = unsafe { _mm512_maskz_loadu_ps(lane[c], row.as_ptr().add(dc + 16 * c)) };
        }
    }
    let (wp, dp) = (w.as_ptr(), dst.as_mut_ptr());
    for j in 0..n {
        // SAFETY: key row j < n of `dst` (the caller's checks), lanes below d.
        let p = unsafe { dp.add(base + j * rs + dc) };
        let mut even = [_mm512_setzero_ps(); NC];
        let mut odd = [_mm512_setzero_ps(); NC];
        for (c, e) in even.iter_mut().enumerate() {
            // SAFETY: as above.
            *e = unsafe { _mm512_maskz_loadu_ps(lane[c], p.add(16 * c)) };
        }
        for r in (0..QB).step_by(2) {
            // SAFETY: rows r, r + 1 < QB and j < n <= tkp: inside `w`.
            let (w0, w1) = unsafe {
                (
                    _mm512_set1_ps(*wp.add(r * tkp + j)),
                    _mm512_set1_ps(*wp.add((r + 1) * tkp + j)),
                )
            };
            for c in 0..NC {
                even[c] = _mm512_fmadd_ps(w0, xr[r][c], even[c]);
                odd[c] = _mm512_fmadd_ps(w1, xr[r + 1][c], odd[c]);
            }
        }
        for c in 0..NC {
            // SAFETY: as above.
            unsafe {
                _mm512_mask_storeu_ps(p.add(16 * c), lane[c], _mm512_add_ps(even[c], odd[c]))
            };
        }
    }
}

/// The backward pass for calls of several query rows, the block form of [`attn_bwd_impl`]: per
/// batch row and key head, keys and values transposed once (as in [`attn_fwd_avx512`]); per
/// query head and block of [`QB`] queries, the scores `Q K^T` and `dP = G V^T` by
/// [`block_scores`], each row's probabilities, `dS = P (dP - rowsum(P dP)) scale`, `dQ = dS K`
/// by [`block_weighted`], then `dK += dS^T Q` and `dV += P^T G` straight into the gradients'
/// rows by [`block_outer_rows`], all up to the last key the block reaches.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn attn_bwd_avx512(
    q: View,
    k: View,
    v: View,
    g: View,
    mask: &HostMask,
    a: AttnDims,
    scale: f32,
) -> AttnGrads {
    use std::arch::x86_64::*;
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
    let mut dq = vec![0f32; b * t * h * d];
    let mut dk = vec![0f32; b * tk * kvh * d];
    let mut dv = vec![0f32; b * tk * kvh * d];
    let (mut kt, mut vt) = (vec![0f32; d * tkp], vec![0f32; d * tkp]);
    let (mut sc, mut dp) = (vec![0f32; QB * tkp], vec![0f32; QB * tkp]);
    let mut pm = PaddedMask::new(t, tkp);
    for bi in 0..b {
        pm.fill(mask, bi);
        for kh in 0..kvh {
            let (kbase, vbase) = (bi * k.s[0] + kh * k.s[2], bi * v.s[0] + kh * v.s[2]);
            // SAFETY: AVX-512F (this function's contract); tkp is tk rounded up to 16.
            unsafe {
                transpose_in(k, kbase, tk, d, tkp, &mut kt);
                transpose_in(v, vbase, tk, d, tkp, &mut vt);
            }
            for hi in kh * group..(kh + 1) * group {
                let mut i0 = 0;
                while i0 < t {
                    let nq = (t - i0).min(QB);
                    let nc = pm.chunks(i0, nq);
                    let (qr, gr) = (
                        block_rows(q, bi, i0, nq, hi, d),
                        block_rows(g, bi, i0, nq, hi, d),
                    );
                    // SAFETY: AVX-512F (this function's contract); nc * 16 <= tkp, buffers
                    // sized as the helpers document.
                    unsafe {
                        block_scores(&kt, tkp, nc, d, &qr, &mut sc);
                        block_scores(&vt, tkp, nc, d, &gr, &mut dp);
                    }
                    // SAFETY: AVX-512F (this function's contract); nc * 16 <= tkp.
                    unsafe { block_softmax(&mut sc, &pm, i0, nq, nc, scale) };
                    for r in 0..nq {
                        let (p, dpr) = (
                            &mut sc[r * tkp..(r + 1) * tkp],
                            &mut dp[r * tkp..(r + 1) * tkp],
                        );
                        // SAFETY: AVX-512F; chunks c < nc lie inside both rows (nc * 16 <= tkp).
                        unsafe {
                            let (pp, dpp) = (p.as_ptr(), dpr.as_mut_ptr());
                            let mut acc = _mm512_setzero_ps();
                            for c in 0..nc {
                                let (pv, dv) = (
                                    _mm512_loadu_ps(pp.add(16 * c)),
                                    _mm512_loadu_ps(dpp.add(16 * c)),
                                );
                                acc = _mm512_add_ps(acc, _mm512_mul_ps(pv, dv));
                            }
                            let dsum = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
                            let vs = _mm512_set1_ps(scale);
                            for c in 0..nc {
                                let (pv, dv) = (
                                    _mm512_loadu_ps(pp.add(16 * c)),
                                    _mm512_loadu_ps(dpp.add(16 * c)),
                                );
                                let ds =
                                    _mm512_mul_ps(_mm512_mul_ps(pv, _mm512_sub_ps(dv, dsum)), vs);
                                _mm512_storeu_ps(dpp.add(16 * c), ds);
                            }
                        }
                    }
                    if nq < QB {
                        // rows past the block's weigh nothing in the key-side sums
                        sc[nq * tkp..].fill(0.0);
                        dp[nq * tkp..].fill(0.0);
                    }
                    let (n, o) = (pm.keys(i0, nq), ((bi * t + i0) * h + hi) * d);
                    let (kvb, rs) = ((bi * tk * kvh + kh) * d, kvh * d);
                    // SAFETY: AVX-512F; n <= nc * 16 <= tkp, buffers sized as documented.
                    unsafe {
                        block_weighted::<QB>(&dp, tkp, nq, n, k, kbase, d, &mut dq, o, h * d);
                        block_outer_rows(&qr, &dp, tkp, n, d, &mut dk, kvb, rs);
                        block_outer_rows(&gr, &sc, tkp, n, d, &mut dv, kvb, rs);
                    }
                    i0 += nq;
                }
            }
        }
    }
    (dq, dk, dv)
}

fn attn_fwd(q: View, k: View, v: View, mask: &HostMask, a: AttnDims, scale: f32) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        if a.t >= BLOCKED_MIN_T {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked above).
            return unsafe { attn_fwd_avx512(q, k, v, mask, a, scale) };
        }
        if a.d <= 64 {
            // SAFETY: as above; d <= 64.
            return unsafe { attn_fwd_rows_avx512(q, k, v, mask, a, scale) };
        }
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
    if a.t >= BLOCKED_MIN_T && avx512() {
        // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked above).
        return unsafe { attn_bwd_avx512(q, k, v, g, mask, a, scale) };
    }
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
        // the kernel this CPU dispatches to: the blocked one where it has AVX-512F
        let blocked = attn_fwd(qv, kv, vv, &hm, a, 0.3);
        let worst = rows
            .iter()
            .zip(&blocked)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-5, "dispatched vs row forward: {worst}");
    }
}

/// The AVX-512 block kernels against the row kernels on odd shapes, raw views (strided caches
/// included), and their timings on the benchmark's shapes.
#[cfg(all(test, target_arch = "x86_64"))]
mod avx512_tests {
    use super::*;

    /// A deterministic pseudo-random fill in `[-1, 1)`.
    fn fill(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Query rows `i` of batch row `bi` see prompt keys `bi % 3..p` (left padding) and the
    /// suffix keys up to their own; `dead` rows keep none.
    fn suffix_mask(b: usize, p: usize, t: usize, dead: &[(usize, usize)]) -> Vec<f32> {
        let tk = p + t;
        let mut m = vec![-1e9f32; b * t * tk];
        for bi in 0..b {
            for i in 0..t {
                if dead.contains(&(bi, i)) {
                    continue;
                }
                for j in 0..tk {
                    if (j < p && j >= bi % 3) || (j >= p && j - p <= i) {
                        m[(bi * t + i) * tk + j] = 0.0;
                    }
                }
            }
        }
        m
    }

    /// One attention call's inputs: q `[b, t, h, d]` read out of a `[b, t, h + 1, d]` buffer,
    /// k and v `[b, tk, kvh, d]` out of a `cap`-row cache, g contiguous.
    struct Case {
        dims: AttnDims,
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        g: Vec<f32>,
        cap: usize,
        mask: HostMask,
    }

    impl Case {
        fn new(b: usize, p: usize, t: usize, h: usize, kvh: usize, d: usize, cap: usize) -> Case {
            let tk = p + t;
            let dead = [(0, 0), (b - 1, t / 2)];
            Case {
                dims: AttnDims {
                    b,
                    t,
                    tk,
                    h,
                    kvh,
                    d,
                },
                q: fill(b * t * (h + 1) * d, 1),
                k: fill(b * cap * kvh * d, 2).iter().map(|x| 2.0 * x).collect(),
                v: fill(b * cap * kvh * d, 3),
                g: fill(b * t * h * d, 4),
                cap,
                mask: HostMask::new(suffix_mask(b, p, t, &dead), b, t, tk).unwrap(),
            }
        }

        fn views(&self) -> (View<'_>, View<'_>, View<'_>, View<'_>) {
            let AttnDims { t, h, kvh, d, .. } = self.dims;
            let q = View {
                data: &self.q,
                s: [t * (h + 1) * d, (h + 1) * d, d],
            };
            let cs = [self.cap * kvh * d, kvh * d, d];
            let (k, v) = (
                View {
                    data: &self.k,
                    s: cs,
                },
                View {
                    data: &self.v,
                    s: cs,
                },
            );
            let g = View {
                data: &self.g,
                s: [t * h * d, h * d, d],
            };
            (q, k, v, g)
        }
    }

    fn worst(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        let top = b.iter().fold(0f32, |m, x| m.max(x.abs()));
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
            / (1.0 + top)
    }

    /// Partial 16-key chunks, partial query blocks, head sizes below, at and past 16 and 64,
    /// grouped heads, rows that keep no key, keys read out of a longer cache.
    const SHAPES: [(usize, usize, usize, usize, usize, usize, usize); 6] = [
        (3, 5, 7, 4, 2, 40, 14),
        (2, 0, 19, 6, 2, 8, 21),
        (2, 16, 32, 4, 4, 32, 48),
        (1, 3, 9, 2, 1, 72, 30),
        (2, 1, 4, 3, 3, 16, 5),
        (4, 16, 16, 4, 4, 17, 33),
    ];

    /// The kernels this CPU dispatches to (the AVX-512 ones where it has AVX-512F, else AVX2,
    /// else the portable ones themselves) against the portable kernels: on any CPU the test
    /// checks what that CPU runs, and never passes empty.
    #[test]
    fn dispatched_forward_and_backward_equal_the_portable_ones() {
        for (b, p, t, h, kvh, d, cap) in SHAPES {
            let c = Case::new(b, p, t, h, kvh, d, cap);
            let (q, k, v, g) = c.views();
            let want = attn_fwd_impl::<false>(q, k, v, &c.mask, c.dims, 0.3);
            let got = attn_fwd(q, k, v, &c.mask, c.dims, 0.3);
            let e = worst(&got, &want);
            assert!(e < 2e-6, "forward {:?}: {e}", (b, p, t, h, kvh, d));
            let (wq, wk, wv) = attn_bwd_impl::<false>(q, k, v, g, &c.mask, c.dims, 0.3);
            let (gq, gk, gv) = attn_bwd(q, k, v, g, &c.mask, c.dims, 0.3);
            for (what, x, y) in [("dq", &gq, &wq), ("dk", &gk, &wk), ("dv", &gv, &wv)] {
                let e = worst(x, y);
                assert!(e < 2e-6, "{what} {:?}: {e}", (b, p, t, h, kvh, d));
            }
            // the dead rows: uniform over the real keys, so not all zero
            let o = ((b - 1) * t + t / 2) * h * d;
            assert!(got[o..o + d].iter().any(|x| *x != 0.0));
        }
    }

    /// The decoding shapes (one to three query rows after a prompt; head sizes up to 64; keys
    /// from a longer cache) through the dispatch, as above (the AVX-512 row kernel where the CPU
    /// has AVX-512F).
    #[test]
    fn dispatched_decoding_forward_equals_the_portable_one() {
        for (b, p, t, h, kvh, d, cap) in [
            (3, 20, 1, 4, 4, 32, 30),
            (2, 15, 1, 6, 2, 8, 17),
            (2, 33, 2, 4, 2, 40, 40),
            (1, 0, 3, 2, 1, 64, 5),
            (4, 47, 1, 4, 4, 17, 64),
            (2, 2, 3, 3, 3, 1, 9),
        ] {
            let c = Case::new(b, p, t, h, kvh, d, cap);
            let (q, k, v, _) = c.views();
            let want = attn_fwd_impl::<false>(q, k, v, &c.mask, c.dims, 0.3);
            let got = attn_fwd(q, k, v, &c.mask, c.dims, 0.3);
            let e = worst(&got, &want);
            assert!(e < 2e-6, "forward {:?}: {e}", (b, p, t, h, kvh, d));
        }
    }

    /// The AVX-512 tile transposes against an element loop (they run inside the blocked forward
    /// and backward too, which the dispatch tests above reach on an AVX-512 CPU). Run by name by
    /// `.ci/parts/80-avx512.sh` where the CPU has AVX-512F.
    #[test]
    #[ignore = "needs a CPU with AVX-512F"]
    fn tile_transposes_copy_every_shape() {
        assert!(avx512(), "this CPU has no AVX-512F");
        for (tk, d) in [(1, 1), (15, 8), (16, 16), (17, 40), (48, 32), (33, 72)] {
            let (cap, stride) = (tk + 3, d + 5);
            let src = fill(cap * stride + 7, 9);
            let x = View {
                data: &src,
                s: [0, stride, 0],
            };
            let tkp = tk.div_ceil(16) * 16;
            let mut t = vec![f32::NAN; d * tkp];
            // SAFETY: AVX-512F asserted above; tkp is tk rounded up to 16.
            unsafe { transpose_in(x, 7, tk, d, tkp, &mut t) };
            for c in 0..d {
                for j in 0..tkp {
                    let want = if j < tk { src[7 + j * stride + c] } else { 0.0 };
                    assert_eq!(t[c * tkp + j], want, "tk {tk} d {d}: ({c}, {j})");
                }
            }
        }
    }

    fn median_us(mut f: impl FnMut(), reps: usize) -> f64 {
        let mut ts: Vec<f64> = (0..reps)
            .map(|_| {
                let t0 = std::time::Instant::now();
                f();
                t0.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        ts.sort_by(f64::total_cmp);
        ts[reps / 2]
    }

    /// Medians of the AVX-512 kernels against the AVX2 row kernels on the tiny benchmark's
    /// shapes (a decoding step, the 32-query suffix after a 16-token prompt, and the prompt
    /// itself), alternating in one run:
    /// `cargo test -p rlprof-trainer --release --lib attention_kernel_timings -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore = "a timing, run by hand"]
    fn attention_kernel_timings() {
        assert!(avx512(), "these timings are of the AVX-512 kernels");
        let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpu
            .lines()
            .find(|l| l.starts_with("model name"))
            .unwrap_or("");
        println!("{model}");
        {
            // one decoding step: 32 rows, the 41st token
            let c = Case::new(32, 40, 1, 4, 4, 32, 48);
            let (q, k, v, _) = c.views();
            let (m, a) = (&c.mask, c.dims);
            let mut sink = 0f32;
            // SAFETY: AVX-512F, AVX2 and FMA checked above (the same for the one below).
            let f_row = || unsafe { attn_fwd_avx2(q, k, v, m, a, 0.2) }[0];
            // SAFETY: as above; d <= 64.
            let f_new = || unsafe { attn_fwd_rows_avx512(q, k, v, m, a, 0.2) }[0];
            let (mut fr, mut fn_) = (vec![], vec![]);
            for _ in 0..5 {
                fr.push(median_us(|| sink += f_row(), 400));
                fn_.push(median_us(|| sink += f_new(), 400));
            }
            fr.sort_by(f64::total_cmp);
            fn_.sort_by(f64::total_cmp);
            println!(
                "decode b 32 t 1 tk 41 h 4 d 32: row avx2 {:.1} us, avx512 {:.1} us ({:.2}x) [{sink}]",
                fr[2],
                fn_[2],
                fn_[2] / fr[2]
            );
        }
        for (b, p, t, h, kvh, d) in [(32, 16, 32, 4, 4, 32), (4, 0, 16, 4, 4, 32)] {
            let c = Case::new(b, p, t, h, kvh, d, p + t);
            let (q, k, v, g) = c.views();
            let (m, a) = (&c.mask, c.dims);
            let mut sink = 0f32;
            let reps = 400;
            let (mut fn_, mut fr, mut bo, mut bn) = (vec![], vec![], vec![], vec![]);
            // SAFETY: AVX-512F, AVX2 and FMA checked above (the same for the three below).
            let f_new = || unsafe { attn_fwd_avx512(q, k, v, m, a, 0.2) }[0];
            // SAFETY: as above.
            let f_row = || unsafe { attn_fwd_avx2(q, k, v, m, a, 0.2) }[0];
            // SAFETY: as above.
            let b_old = || unsafe { attn_bwd_avx2(q, k, v, g, m, a, 0.2) }.0[0];
            // SAFETY: as above.
            let b_new = || unsafe { attn_bwd_avx512(q, k, v, g, m, a, 0.2) }.0[0];
            for _ in 0..5 {
                fn_.push(median_us(|| sink += f_new(), reps));
                fr.push(median_us(|| sink += f_row(), reps));
                bo.push(median_us(|| sink += b_old(), reps / 4));
                bn.push(median_us(|| sink += b_new(), reps / 4));
            }
            let med = |x: &mut Vec<f64>| {
                x.sort_by(f64::total_cmp);
                x[x.len() / 2]
            };
            let (fn_, fr, bo, bn) = (med(&mut fn_), med(&mut fr), med(&mut bo), med(&mut bn));
            println!(
                "b {b} t {t} tk {} h {h} d {d}: forward row avx2 {fr:.1} us, avx512 {fn_:.1} us \
                 ({:.2}x); backward avx2 {bo:.1} us, avx512 {bn:.1} us ({:.2}x) [{sink}]",
                p + t,
                fn_ / fr,
                bn / bo
            );
        }
    }
}
