//! Byte-level formatting for the exporters' hot paths: integers, microsecond times, fixed-point
//! floats, JSON string literals and CSV fields, appended to a reusable `Vec<u8>`.
//!
//! Each function produces exactly the text of the `format!` it replaces (`{}`, `{:.N}`, the
//! `csv` crate's necessary-quotes rule); [`fixed`] falls back to `format!` whenever a shortcut
//! could round differently, and the tests compare every function with its `format!` twin.
//! Short texts are appended with fixed-size copies ([`Short`]), not variable-length `memcpy`
//! calls.

use std::io::Write as _;

/// A short text of at most `N` bytes, appended with one fixed-size copy and a truncate.
///
/// Hand-written because appending a few bytes of variable length with `extend_from_slice` is a
/// call into libc's `memcpy`; with itoa's own call per number that was the largest user-space
/// cost of the npu export (perf). Copying all `N` bytes (a few vector moves) and cutting the
/// vector back to the real length does the same with no call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short<const N: usize> {
    b: [u8; N],
    n: usize,
}

impl<const N: usize> Short<N> {
    /// The text of `bytes`, or None when it is longer than `N`.
    pub(crate) fn new(bytes: &[u8]) -> Option<Self> {
        let mut b = [0u8; N];
        b.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(Short { b, n: bytes.len() })
    }

    /// `v` in decimal (needs `N >= 20`).
    #[inline]
    pub(crate) fn uint(v: u64) -> Self {
        const { assert!(N >= 20) };
        let mut b = [0u8; N];
        let n = if v < 100_000_000 {
            let (digits, n) = small_digits(v as u32);
            b[..8].copy_from_slice(&digits);
            n
        } else {
            let mut ib = itoa::Buffer::new();
            let t = ib.format(v).as_bytes();
            b[..t.len()].copy_from_slice(t);
            t.len()
        };
        Short { b, n }
    }

    /// Appends the text.
    #[inline(always)]
    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        let len = out.len();
        out.extend_from_slice(&self.b);
        out.truncate(len + self.n);
    }

    /// The text.
    #[cfg(test)]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.b[..self.n]
    }
}

/// The decimal digits of `v < 10^8`, left-aligned in 8 bytes, and how many there are.
#[inline(always)]
fn small_digits(v: u32) -> ([u8; 8], usize) {
    debug_assert!(v < 100_000_000);
    let n = 1
        + (v >= 10) as usize
        + (v >= 100) as usize
        + (v >= 1_000) as usize
        + (v >= 10_000) as usize
        + (v >= 100_000) as usize
        + (v >= 1_000_000) as usize
        + (v >= 10_000_000) as usize;
    let (hi, lo) = (v / 10_000, v % 10_000);
    let pair = |x: u32| {
        let p = x as usize * 2;
        [PAIRS[p], PAIRS[p + 1]]
    };
    let [a, b] = pair(hi / 100);
    let [c, d] = pair(hi % 100);
    let [e, f] = pair(lo / 100);
    let [g, h] = pair(lo % 100);
    // All 8 digits zero-padded, then shifted left past the leading zeros.
    let padded = u64::from_be_bytes([a, b, c, d, e, f, g, h]);
    ((padded << ((8 - n) * 8)).to_be_bytes(), n)
}

/// Appends `v` in decimal.
#[inline]
pub(crate) fn uint(out: &mut Vec<u8>, v: u64) {
    Short::<24>::uint(v).put(out);
}

/// Appends `v` in decimal.
#[inline]
pub(crate) fn int(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// `00`..`99`.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends `ns` as microseconds with 3 decimals (`format!("{}.{:03}", ns / 1000, ns % 1000)`).
#[inline]
pub(crate) fn us3(out: &mut Vec<u8>, ns: u64) {
    uint(out, ns / 1000);
    let [a, b, c] = digits3((ns % 1000) as u32);
    out.extend_from_slice(&[b'.', a, b, c]);
}

/// The three decimal digits of `v < 1000`, zero-padded.
#[inline(always)]
fn digits3(v: u32) -> [u8; 3] {
    let p = (v % 100) as usize * 2;
    [b'0' + (v / 100) as u8, PAIRS[p], PAIRS[p + 1]]
}

/// [`us3`] for timestamps that share their leading digits: the digits above the last six of
/// the microsecond part are formatted once and reused while they stay the same (absolute
/// timestamps of one collection differ only in their low digits).
#[derive(Debug)]
pub(crate) struct UsCache {
    /// `ns / 10^9` whose text is `text` (`u64::MAX`: none yet).
    high: u64,
    text: Short<24>,
}

impl Default for UsCache {
    fn default() -> Self {
        UsCache {
            high: u64::MAX,
            text: Short::uint(0),
        }
    }
}

impl UsCache {
    /// Appends `ns` exactly as [`us3`] does.
    #[inline]
    pub(crate) fn us3(&mut self, out: &mut Vec<u8>, ns: u64) {
        // The microsecond text is `ns / 10^9` followed by the 6 digits of the microseconds
        // within that second (zero-padded), then `.` and the last 3 digits.
        let high = ns / 1_000_000_000;
        if high == 0 {
            return us3(out, ns);
        }
        if high != self.high {
            self.high = high;
            self.text = Short::uint(high);
        }
        self.text.put(out);
        let low = (ns - high * 1_000_000_000) as u32;
        let (a, b, c) = (low / 1_000_000, low / 1000 % 1000, low % 1000);
        let ([a0, a1, a2], [b0, b1, b2], [c0, c1, c2]) = (digits3(a), digits3(b), digits3(c));
        out.extend_from_slice(&[a0, a1, a2, b0, b1, b2, b'.', c0, c1, c2]);
    }
}

/// Appends `format!("{:.D$}", x)` for `D` = 3 or 6 (other values go through `format!`).
///
/// Shortcut: for `0 <= x` with `x * 10^D` well inside the exactly representable integers, the
/// scaled value is rounded in floating point; the result is taken only when the scaled value
/// is farther from a rounding tie than the multiplication's error bound, so it always equals
/// the correctly rounded decimal `format!` produces.
#[inline]
pub(crate) fn fixed(out: &mut Vec<u8>, x: f64, decimals: u32) {
    let (scale, p) = match decimals {
        3 => (1e3, 1000),
        6 => (1e6, 1_000_000),
        _ => return slow_fixed(out, x, decimals),
    };
    let t = x * scale;
    if !(x.is_sign_positive() && t < 4.0e15) {
        return slow_fixed(out, x, decimals);
    }
    let floor = t.floor();
    let frac = t - floor;
    // |exact - t| <= ulp(t) / 2 <= t * 2^-53; keep a wide margin.
    let margin = t * 4.0e-16 + 1e-300;
    if (frac - 0.5).abs() <= margin {
        return slow_fixed(out, x, decimals);
    }
    let r = if frac > 0.5 { floor + 1.0 } else { floor } as u64;
    uint(out, r / p);
    let f = (r % p) as u32;
    if p == 1000 {
        let [a, b, c] = digits3(f);
        out.extend_from_slice(&[b'.', a, b, c]);
    } else {
        let ([a, b, c], [d, e, g]) = (digits3(f / 1000), digits3(f % 1000));
        out.extend_from_slice(&[b'.', a, b, c, d, e, g]);
    }
}

#[cold]
fn slow_fixed(out: &mut Vec<u8>, x: f64, decimals: u32) {
    let _ = write!(out, "{:.*}", decimals as usize, x);
}

/// Appends `s` as a JSON string literal (with quotes).
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            c if c < 0x20 => {
                out.extend_from_slice(&b[start..i]);
                let _ = write!(out, "\\u{:04x}", c);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

/// Appends `s` as one CSV field the way the `csv` crate writes it by default: quoted (with
/// quotes doubled) only when it holds `,`, `"`, `\r` or `\n`.
pub(crate) fn csv_field(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    if !b.iter().any(|&c| matches!(c, b',' | b'"' | b'\r' | b'\n')) {
        out.extend_from_slice(b);
        return;
    }
    out.push(b'"');
    for &c in b {
        if c == b'"' {
            out.push(b'"');
        }
        out.push(c);
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn integers_and_microseconds_match_format() {
        let mut cache = UsCache::default();
        let mut vs = vec![
            0u64,
            1,
            9,
            10,
            999,
            1000,
            1001,
            9999,
            10_000,
            123_456_789,
            u64::MAX,
        ];
        vs.extend([999_999_999, 1_000_000_000, 1_000_000_001, 1_000_001_000]);
        // Every digit count, at and around each power of ten (the small path ends at 10^8).
        for k in 0..20u32 {
            let p = 10u64.pow(k);
            vs.extend([p - 1, p, p + 1, p.saturating_mul(7) / 3]);
        }
        vs.extend((0..5000u64).map(|i| i * 20_011));
        vs.extend((0..2000u64).map(|i| 1_700_000_000_000_000_000 + i * 7_777_777));
        vs.extend((0..2000u64).map(|i| 1_699_999_999_000_000_000 + i * 1_000_000));
        for v in vs {
            let want = format!("{}.{:03}", v / 1000, v % 1000);
            assert_eq!(s(|o| uint(o, v)), v.to_string());
            assert_eq!(s(|o| Short::<24>::uint(v).put(o)), v.to_string());
            // Appending after other text keeps it.
            assert_eq!(
                s(|o| {
                    o.push(b'x');
                    uint(o, v)
                }),
                format!("x{v}")
            );
            assert_eq!(s(|o| us3(o, v)), want);
            assert_eq!(s(|o| cache.us3(o, v)), want);
        }
        for v in [i64::MIN, -4096, -1, 0, 7, i64::MAX] {
            assert_eq!(s(|o| int(o, v)), v.to_string());
        }
    }

    #[test]
    fn short_texts() {
        let t = Short::<8>::new(b"abc").unwrap();
        assert_eq!(t.as_bytes(), b"abc");
        assert_eq!(s(|o| t.put(o)), "abc");
        assert!(Short::<8>::new(b"123456789").is_none());
        assert_eq!(
            Short::<8>::new(b"12345678").unwrap().as_bytes(),
            b"12345678"
        );
    }

    #[test]
    fn fixed_matches_format_including_ties_and_odd_values() {
        let mut xs = vec![
            0.0,
            0.0005,
            0.0015,
            0.0025,
            1.0005,
            2.675,
            0.125,
            0.3125,
            1e-7,
            0.0000005,
            0.0000015,
            4096.0 / 1048576.0,
            123456.789,
            1e9,
            3.9e12,
            4.1e12,
            1e300,
            -0.0,
            -1.5,
            f64::NAN,
            f64::INFINITY,
        ];
        // A deterministic spread of values, many right at decimal ties of the binary grid.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let m = (seed >> 11) as f64 / (1u64 << 53) as f64;
            let e = (seed % 40) as i32 - 20;
            xs.push(m * 10f64.powi(e));
            xs.push((seed % 100_000) as f64 / 2000.0);
            xs.push((seed % 1_000_000) as f64 / 1048576.0);
        }
        for x in xs {
            for d in [3, 6, 2] {
                assert_eq!(
                    s(|o| fixed(o, x, d)),
                    format!("{x:.*}", d as usize),
                    "{x:e} .{d}"
                );
            }
        }
    }

    #[test]
    fn json_and_csv_escaping() {
        let cases = [
            "plain",
            "a\"b",
            "back\\slash",
            "nl\nx\r\t",
            "\u{1}\u{1f}",
            "ünï",
            "",
            "a,b",
        ];
        for c in cases {
            assert_eq!(
                s(|o| json_str(o, c)),
                serde_json::to_string(c).unwrap(),
                "{c:?}"
            );
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record([c, "x"]).unwrap();
            let want = String::from_utf8(w.into_inner().unwrap()).unwrap();
            let got = s(|o| {
                csv_field(o, c);
                o.extend_from_slice(b",x\n");
            });
            assert_eq!(got, want, "{c:?}");
        }
    }
}
