//! The AVX2+FMA detection and the vectorisable helpers the kernels share: the polynomial
//! [`exp_poly`], the element-wise loops [`map2`]/[`map3`] and dot products / `axpy` for
//! attention. The `*_avx2` functions are safe `#[target_feature(enable = "avx2,fma")]` fns: only
//! their dispatch sites, after [`avx2_fma`], are `unsafe`.

/// Whether this CPU runs the `avx2,fma` paths (std caches the detection).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// `exp(x)` by range reduction and a degree-5 polynomial (Cephes `expf`, about 1 ulp on the
/// normal range; clamped to `[-87.3, 88.7]`). Plain arithmetic, so that the element-wise maps
/// vectorise (the libm call does not).
#[inline(always)]
pub(super) fn exp_poly(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.7);
    let fx = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - fx * 0.693_359_4 + fx * 2.121_944_4e-4;
    let z = r * r;
    let y = (((((1.987_569_2e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5)
        * z
        + r
        + 1.0;
    // 2^fx from fx's bits: adding 1.5 * 2^23 puts the integer fx (|fx| <= 128 here) in the low
    // mantissa bits. The same value as `(fx as i32 + 127) << 23`, whose saturating float-to-int
    // cast LLVM does not vectorise (one scalar conversion and NaN check per lane).
    let n = (fx + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
    y * f32::from_bits(n.wrapping_add(127) << 23)
}

/// [`exp_poly`] on 16 lanes: the same operations in the same order (separate multiplies and
/// adds, no fused multiply-add), so every lane equals the scalar result bit for bit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn exp_poly16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let c = _mm512_set1_ps;
    // max/min return their second operand when one is NaN: a NaN `x` stays NaN, as in `clamp`
    let x = _mm512_min_ps(c(88.7), _mm512_max_ps(c(-87.3), x));
    let fx = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(_mm512_add_ps(
        _mm512_mul_ps(x, c(std::f32::consts::LOG2_E)),
        c(0.5),
    ));
    let r = _mm512_add_ps(
        _mm512_sub_ps(x, _mm512_mul_ps(fx, c(0.693_359_4))),
        _mm512_mul_ps(fx, c(2.121_944_4e-4)),
    );
    let z = _mm512_mul_ps(r, r);
    let mut y = _mm512_add_ps(_mm512_mul_ps(c(1.987_569_2e-4), r), c(1.398_2e-3));
    for k in [8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5] {
        y = _mm512_add_ps(_mm512_mul_ps(y, r), c(k));
    }
    let y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(y, z), r), c(1.0));
    let n = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(fx, c(12_582_912.0))),
        _mm512_set1_epi32(0x4B40_0000),
    );
    let pow = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
        n,
        _mm512_set1_epi32(127),
    )));
    _mm512_mul_ps(y, pow)
}

/// Plain indexed loops (not `collect`, whose `from_iter` is a separate function compiled without
/// the caller's target features, so it would not vectorise inside the AVX2 wrappers).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub(super) fn map2<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: &F) -> Vec<f32> {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut out = Vec::with_capacity(n);
    // written through the spare capacity, not zero-filled first (one pass over `out` fewer)
    let dst = &mut out.spare_capacity_mut()[..n];
    for i in 0..n {
        dst[i].write(f(a[i], b[i]));
    }
    // SAFETY: the loop above initialised all `n` elements.
    unsafe { out.set_len(n) };
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) fn map2_avx2<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: &F) -> Vec<f32> {
    map2(a, b, f)
}

#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub(super) fn map3<F: Fn(f32, f32, f32) -> f32>(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    f: &F,
) -> Vec<f32> {
    let n = a.len().min(b.len()).min(c.len());
    let (a, b, c) = (&a[..n], &b[..n], &c[..n]);
    let mut out = Vec::with_capacity(n);
    let dst = &mut out.spare_capacity_mut()[..n];
    for i in 0..n {
        dst[i].write(f(a[i], b[i], c[i]));
    }
    // SAFETY: the loop above initialised all `n` elements.
    unsafe { out.set_len(n) };
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) fn map3_avx2<F: Fn(f32, f32, f32) -> f32>(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    f: &F,
) -> Vec<f32> {
    map3(a, b, c, f)
}

/// Whether the CPU has AVX-512F (with AVX2 and FMA): the element-wise maps and the attention
/// kernels then run 16 lanes wide.
#[cfg(target_arch = "x86_64")]
pub(super) fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && avx2_fma()
}

/// [`map2`] compiled for AVX-512 (16-lane vectors).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn map2_avx512<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: &F) -> Vec<f32> {
    map2(a, b, f)
}

/// [`map3`] compiled for AVX-512 (16-lane vectors).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn map3_avx512<F: Fn(f32, f32, f32) -> f32>(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    f: &F,
) -> Vec<f32> {
    map3(a, b, c, f)
}

/// Dot product; with `AVX` (only inside the AVX2+FMA wrappers) by 8-wide fused multiply-adds.
#[inline(always)]
fn dot<const AVX: bool>(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if AVX {
        // SAFETY: AVX is only true in functions called after the CPU was checked for AVX2+FMA.
        return unsafe { dot_avx2(a, b) };
    }
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let mut acc = _mm256_setzero_ps();
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, inside both slices.
        let (x, y) = unsafe {
            (
                _mm256_loadu_ps(a.as_ptr().add(i)),
                _mm256_loadu_ps(b.as_ptr().add(i)),
            )
        };
        acc = _mm256_fmadd_ps(x, y, acc);
        i += 8;
    }
    let s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let mut s = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    while i < n {
        s += a[i] * b[i];
        i += 1;
    }
    s
}

/// `out[n] = a . row(idx[n])` for every `n`; with `AVX`, eight rows at a time (eight dot
/// products share one horizontal reduction).
#[inline(always)]
pub(super) fn dots<'a, const AVX: bool>(
    a: &[f32],
    idx: &[usize],
    row: impl Fn(usize) -> &'a [f32],
    out: &mut [f32],
) {
    let mut n = 0;
    #[cfg(target_arch = "x86_64")]
    if AVX {
        while n + 8 <= idx.len().min(out.len()) {
            let rows: [&[f32]; 8] = std::array::from_fn(|l| row(idx[n + l]));
            // SAFETY: AVX is only true in functions called after the CPU was checked for
            // AVX2+FMA.
            let s = unsafe { dot8_avx2(a, &rows) };
            out[n..n + 8].copy_from_slice(&s);
            n += 8;
        }
    }
    for (o, &j) in out[n..].iter_mut().zip(&idx[n..]) {
        *o = dot::<AVX>(a, row(j));
    }
}

/// Eight dot products `a . b[l]` by 8-wide fused multiply-adds, reduced together (two rounds
/// of horizontal adds and one cross-lane add for all eight).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dot8_avx2(a: &[f32], b: &[&[f32]; 8]) -> [f32; 8] {
    use std::arch::x86_64::*;
    let n = b.iter().fold(a.len(), |m, r| m.min(r.len()));
    let mut acc = [_mm256_setzero_ps(); 8];
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n, inside `a` and every `b[l]` (n is the shortest length).
        let x = unsafe { _mm256_loadu_ps(a.as_ptr().add(i)) };
        for (acc, r) in acc.iter_mut().zip(b) {
            // SAFETY: as above.
            let y = unsafe { _mm256_loadu_ps(r.as_ptr().add(i)) };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 8;
    }
    // hadd(x, y) = [x0+x1, x2+x3, y0+y1, y2+y3 | x4+x5, x6+x7, y4+y5, y6+y7]: after two rounds
    // lane l of the low (high) half holds accumulator l's (l + 4's) sum of lanes 0..4 in the
    // first vector's low half and of lanes 4..8 in its high half.
    let h01 = _mm256_hadd_ps(acc[0], acc[1]);
    let h23 = _mm256_hadd_ps(acc[2], acc[3]);
    let h45 = _mm256_hadd_ps(acc[4], acc[5]);
    let h67 = _mm256_hadd_ps(acc[6], acc[7]);
    let h0123 = _mm256_hadd_ps(h01, h23);
    let h4567 = _mm256_hadd_ps(h45, h67);
    let lo = _mm256_permute2f128_ps(h0123, h4567, 0x20);
    let hi = _mm256_permute2f128_ps(h0123, h4567, 0x31);
    let mut out = [0f32; 8];
    // SAFETY: `out` holds eight f32s.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_add_ps(lo, hi)) };
    for (o, r) in out.iter_mut().zip(b) {
        for j in i..n {
            *o += a[j] * r[j];
        }
    }
    out
}

/// `y += a * x`.
#[inline(always)]
pub(super) fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yv, &xv) in y.iter_mut().zip(x) {
        *yv += a * xv;
    }
}

/// Row statistics over the vocabulary for the log-softmax kernels and the sampler: the max of
/// `row * s` and the sum of `exp(row * s - m)`, 16 lanes wide so that they vectorise (the scalar
/// `f32::max` fold and the libm `exp` do not); with `AVX` inside an AVX2+FMA function.
#[inline(always)]
fn scaled_max_impl(row: &[f32], s: f32) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 16];
    let chunks = row.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..16 {
            let v = c[l] * s;
            acc[l] = if v > acc[l] { v } else { acc[l] };
        }
    }
    let mut m = acc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for &v in rest {
        m = m.max(v * s);
    }
    m
}

#[inline(always)]
fn sum_exp_impl(row: &[f32], s: f32, m: f32) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = row.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..16 {
            acc[l] += exp_poly(c[l] * s - m);
        }
    }
    let mut sum = 0.0;
    for h in (0..16).step_by(2) {
        sum += acc[h] + acc[h + 1];
    }
    for &v in rest {
        sum += exp_poly(v * s - m);
    }
    sum
}

/// `sum(exp(row * s - m) * row * s)`.
#[inline(always)]
fn sum_exp_weighted_impl(row: &[f32], s: f32, m: f32) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = row.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..16 {
            let z = c[l] * s;
            acc[l] += exp_poly(z - m) * z;
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for &v in rest {
        let z = v * s;
        sum += exp_poly(z - m) * z;
    }
    sum
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn sum_exp_weighted_avx2(row: &[f32], s: f32, m: f32) -> f32 {
    sum_exp_weighted_impl(row, s, m)
}

/// `sum(exp(row * s - m) * row * s)` by [`exp_poly`].
#[inline]
pub(super) fn sum_exp_weighted(row: &[f32], s: f32, m: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU was checked for AVX2+FMA.
        return unsafe { sum_exp_weighted_avx2(row, s, m) };
    }
    sum_exp_weighted_impl(row, s, m)
}

/// `out[i] = a * exp(row[i] * s - m)`; returns the sum of `out`.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn scaled_exp_into_impl(row: &[f32], s: f32, m: f32, a: f32, out: &mut [f32]) -> f32 {
    let n = row.len().min(out.len());
    let (row, out) = (&row[..n], &mut out[..n]);
    let mut acc = [0f32; 16];
    let mut i = 0;
    while i + 16 <= n {
        for l in 0..16 {
            let e = a * exp_poly(row[i + l] * s - m);
            out[i + l] = e;
            acc[l] += e;
        }
        i += 16;
    }
    let mut sum: f32 = acc.iter().sum();
    for j in i..n {
        out[j] = a * exp_poly(row[j] * s - m);
        sum += out[j];
    }
    sum
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn scaled_max_avx2(row: &[f32], s: f32) -> f32 {
    scaled_max_impl(row, s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn sum_exp_avx2(row: &[f32], s: f32, m: f32) -> f32 {
    sum_exp_impl(row, s, m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn scaled_exp_into_avx2(row: &[f32], s: f32, m: f32, a: f32, out: &mut [f32]) -> f32 {
    scaled_exp_into_impl(row, s, m, a, out)
}

/// The max of `row * s` (`-inf` for an empty row).
#[inline]
pub(super) fn scaled_max(row: &[f32], s: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU was checked for AVX2+FMA.
        return unsafe { scaled_max_avx2(row, s) };
    }
    scaled_max_impl(row, s)
}

/// `sum(exp(row * s - m))` by [`exp_poly`].
#[inline]
pub(super) fn sum_exp(row: &[f32], s: f32, m: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU was checked for AVX2+FMA.
        return unsafe { sum_exp_avx2(row, s, m) };
    }
    sum_exp_impl(row, s, m)
}

/// `out[i] = a * exp(row[i] * s - m)` by [`exp_poly`], over the shorter of the two; returns the
/// sum of what it wrote.
#[inline]
pub(super) fn scaled_exp_into(row: &[f32], s: f32, m: f32, a: f32, out: &mut [f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        // SAFETY: the CPU was checked for AVX2+FMA.
        return unsafe { scaled_exp_into_avx2(row, s, m, a, out) };
    }
    scaled_exp_into_impl(row, s, m, a, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomial_exp_is_within_a_few_ulp() {
        for i in -8000..=8000 {
            let x = i as f32 * 0.01;
            let (ours, libm) = (exp_poly(x), x.exp());
            assert!(
                ((ours - libm) / libm).abs() < 5e-7,
                "exp({x}): {ours} vs {libm}"
            );
        }
    }

    #[test]
    fn exponent_bits_match_the_integer_cast() {
        // every integer the clamped range reaches, and beyond
        for i in -140i32..=140 {
            let fx = i as f32;
            let bits = (fx + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
            assert_eq!(
                bits.wrapping_add(127) << 23,
                ((fx as i32 + 127) as u32) << 23
            );
        }
        for x in [-1e9f32, -87.3, -87.29, -0.5, 0.0, 0.5, 88.0, 88.7, 1e9] {
            assert!(exp_poly(x).is_finite() || x >= 88.7, "exp_poly({x})");
        }
        assert!(exp_poly(f32::NAN).is_nan());
    }

    /// Run by name by `.ci/parts/80-avx512.sh` where the CPU has AVX-512F.
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[ignore = "needs a CPU with AVX-512F"]
    fn sixteen_lane_exp_equals_the_scalar_exp_bit_for_bit() {
        assert!(avx512(), "this CPU has no AVX-512F");
        {
            use std::arch::x86_64::*;
            let mut xs: Vec<f32> = (-9000..=9000).map(|i| i as f32 * 0.01 + 0.003).collect();
            xs.extend([-1e9, -87.3, -87.31, 88.7, 88.71, 1e9, 0.0, -0.0, f32::NAN]);
            xs.extend([f32::NEG_INFINITY, f32::INFINITY, 1e-30, -1e-30]);
            for c in xs.chunks(16) {
                let mut v = [0f32; 16];
                v[..c.len()].copy_from_slice(c);
                let mut out = [0f32; 16];
                // SAFETY: AVX-512F checked above; both arrays hold 16 f32s.
                unsafe {
                    _mm512_storeu_ps(out.as_mut_ptr(), exp_poly16(_mm512_loadu_ps(v.as_ptr())))
                };
                for (&x, &o) in v.iter().zip(&out) {
                    let e = exp_poly(x);
                    assert!(
                        o.to_bits() == e.to_bits() || (o.is_nan() && e.is_nan()),
                        "exp({x}): {o} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn row_statistics_match_the_scalar_forms() {
        for n in [0usize, 1, 15, 16, 17, 52, 8192 + 5] {
            let row: Vec<f32> = (0..n).map(|i| (i as f32 * 0.731).sin() * 9.0).collect();
            for s in [1.0f32, 1.0 / 0.7] {
                let m = row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v * s));
                assert_eq!(scaled_max(&row, s), m, "n {n}");
                if n == 0 {
                    continue;
                }
                let want: f64 = row.iter().map(|&v| f64::from(v * s - m).exp()).sum();
                let got = sum_exp(&row, s, m);
                assert!(
                    ((f64::from(got) - want) / want).abs() < 1e-5,
                    "n {n}: {got} vs {want}"
                );
                let want_w: f64 = row
                    .iter()
                    .map(|&v| f64::from(v * s - m).exp() * f64::from(v * s))
                    .sum();
                let got_w = f64::from(sum_exp_weighted(&row, s, m));
                assert!(
                    (got_w - want_w).abs() < 1e-5 * want.max(want_w.abs()),
                    "{got_w} vs {want_w}"
                );
                let mut out = vec![f32::NAN; n];
                let total = scaled_exp_into(&row, s, m, 0.5, &mut out);
                assert!(((f64::from(total) - 0.5 * want) / want).abs() < 1e-5);
                for (o, &v) in out.iter().zip(&row) {
                    let e = 0.5 * (v * s - m).exp();
                    assert!((o - e).abs() <= 1e-6 * e.max(1e-30) + 1e-12, "{o} vs {e}");
                }
            }
        }
    }

    /// Run by name by `.ci/parts/80-avx512.sh` where the CPU has AVX2 and FMA.
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[ignore = "needs a CPU with AVX2 and FMA"]
    fn avx2_dot_matches_the_portable_dot() {
        assert!(avx2_fma(), "this CPU has no AVX2 + FMA");
        {
            for n in [0, 3, 8, 32, 37] {
                let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
                let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
                let (x, y) = (dot::<false>(&a, &b), dot::<true>(&a, &b));
                assert!((x - y).abs() < 1e-5, "n {n}: {x} vs {y}");
            }
            // Eight at a time: row lengths with and without a tail, 0..=20 rows (tails of the
            // row count too), rows picked out of order.
            for d in [3, 8, 32, 37] {
                let a: Vec<f32> = (0..d).map(|i| (i as f32 * 0.37).sin()).collect();
                let rows: Vec<Vec<f32>> = (0..24)
                    .map(|r| (0..d).map(|i| ((r * d + i) as f32 * 0.13).cos()).collect())
                    .collect();
                for n in 0..=20 {
                    let idx: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % 24).collect();
                    let mut out = vec![f32::NAN; n];
                    dots::<true>(&a, &idx, |j| &rows[j], &mut out);
                    for (o, &j) in out.iter().zip(&idx) {
                        let want = dot::<false>(&a, &rows[j]);
                        assert!((o - want).abs() < 1e-5, "d {d} n {n}: {o} vs {want}");
                    }
                }
            }
        }
    }
}
