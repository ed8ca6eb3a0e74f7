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
    y * f32::from_bits(((fx as i32 + 127) as u32) << 23)
}

/// Plain indexed loops (not `collect`, whose `from_iter` is a separate function compiled without
/// the caller's target features, so it would not vectorise inside the AVX2 wrappers).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub(super) fn map2<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], f: &F) -> Vec<f32> {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut out = vec![0f32; n];
    for i in 0..n {
        out[i] = f(a[i], b[i]);
    }
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
    let mut out = vec![0f32; n];
    for i in 0..n {
        out[i] = f(a[i], b[i], c[i]);
    }
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
    fn avx2_dot_matches_the_portable_dot() {
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
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
