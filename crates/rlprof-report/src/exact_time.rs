//! Decimal microseconds, as traces and CSVs write them, into integer nanoseconds without floats.
//!
//! Every real trace's timestamps are epoch-based microseconds (about 1.7e15 us = 1.7e18 ns,
//! above 2^53 ns): an f64 holds them only to 256 ns, so a float parse rounds each boundary by up
//! to 128 ns, and twenty back-to-back 1 us kernels no longer sum to 20,000 ns. This module reads
//! the decimal digits into an integer at every magnitude that fits `i64` nanoseconds (±292 years).
//! Digits past the third decimal (sub-nanosecond) are rounded half away from zero, as
//! `f64::round` does. Only a token written with an exponent (`1.7e15`) is really a float; its
//! callers parse it as one, rounded to the nearest nanosecond (the one place rounding applies).

/// `tok` (optional `-`, digits, optional `.` and digits; no exponent, no spaces) as integer
/// nanoseconds, exactly. `None` when it is not such a token or does not fit `i64` nanoseconds.
#[inline]
pub(crate) fn decimal_us_to_ns(tok: &str) -> Option<i64> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut ns: i64 = 0;
    for c in int.bytes() {
        if !c.is_ascii_digit() {
            return None;
        }
        ns = ns.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    ns = ns.checked_mul(1000)?;
    let f = frac.as_bytes();
    let mut scale = 100;
    for (i, &c) in f.iter().enumerate() {
        if !c.is_ascii_digit() {
            return None;
        }
        if i < 3 {
            ns = ns.checked_add((c - b'0') as i64 * scale)?;
            scale /= 10;
        } else if i == 3 {
            // Sub-nanosecond: half away from zero, from the first dropped digit (the rest only
            // need to be digits).
            if c >= b'5' {
                ns = ns.checked_add(1)?;
            }
        }
    }
    Some(if neg { -ns } else { ns })
}

/// A microsecond token of any form (decimal exactly, else a float such as `1.7e15`, rounded to
/// the nearest nanosecond); `None` when it is not a finite number.
pub(crate) fn us_to_ns(tok: &str) -> Option<i64> {
    if let Some(ns) = decimal_us_to_ns(tok) {
        return Some(ns);
    }
    let us: f64 = tok.parse().ok()?;
    let ns = (us * 1000.0).round();
    (ns.is_finite() && ns.abs() < i64::MAX as f64).then_some(ns as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_microseconds_are_exact() {
        // 20 back-to-back 1 us kernels at an epoch timestamp: exactly 20,000 ns apart.
        let base = "1700000000123456";
        let starts: Vec<i64> = (0..=20)
            .map(|i| decimal_us_to_ns(&format!("{base}.000")).unwrap() + i * 1000)
            .collect();
        assert_eq!(starts[20] - starts[0], 20_000);
        assert_eq!(
            decimal_us_to_ns("1700000000123456.789"),
            Some(1_700_000_000_123_456_789)
        );
        assert_eq!(
            decimal_us_to_ns("1700000000123457.001").unwrap()
                - decimal_us_to_ns("1700000000123456.001").unwrap(),
            1000
        );
        // The float path rounds the same value to a multiple of 256 ns.
        #[allow(clippy::excessive_precision)] // the point: f64 cannot hold this value
        let f = (1700000000123456.789f64 * 1000.0).round() as i64;
        assert_ne!(f, 1_700_000_000_123_456_789);
    }

    #[test]
    fn forms_and_rounding() {
        assert_eq!(decimal_us_to_ns("0"), Some(0));
        assert_eq!(decimal_us_to_ns("12"), Some(12_000));
        assert_eq!(decimal_us_to_ns("12."), Some(12_000));
        assert_eq!(decimal_us_to_ns(".5"), Some(500));
        assert_eq!(decimal_us_to_ns("-1.5"), Some(-1500));
        assert_eq!(decimal_us_to_ns("1.0005"), Some(1001));
        assert_eq!(decimal_us_to_ns("1.00049999"), Some(1000));
        assert_eq!(decimal_us_to_ns("-1.0005"), Some(-1001));
        assert_eq!(decimal_us_to_ns("1e3"), None);
        assert_eq!(decimal_us_to_ns(""), None);
        assert_eq!(decimal_us_to_ns("."), None);
        assert_eq!(decimal_us_to_ns("1.2.3"), None);
        assert_eq!(decimal_us_to_ns("99999999999999999999"), None);
        assert_eq!(us_to_ns("1e3"), Some(1_000_000));
        assert_eq!(us_to_ns("1.69512E+15"), Some(1_695_120_000_000_000_000));
        assert_eq!(us_to_ns("nan"), None);
        assert_eq!(us_to_ns("inf"), None);
        assert_eq!(us_to_ns("1e300"), None);
    }

    #[test]
    fn agrees_with_exact_integer_arithmetic_at_every_magnitude() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let int =
                seed % [10, 100_000, 1 << 40, 1 << 51, 9_000_000_000_000_000][(seed % 5) as usize];
            let decimals = ((seed >> 8) % 7) as u32;
            let frac = (seed >> 12) % 10u64.pow(decimals);
            let tok = match decimals {
                0 => format!("{int}"),
                d => format!("{int}.{frac:0w$}", w = d as usize),
            };
            // Reference in i128: value * 10^decimals, then to ns with half-up rounding.
            let scaled = int as i128 * 10i128.pow(decimals) + frac as i128;
            let want = if decimals <= 3 {
                scaled * 10i128.pow(3 - decimals)
            } else {
                let div = 10i128.pow(decimals - 3);
                (scaled + div / 2) / div
            };
            assert_eq!(decimal_us_to_ns(&tok).map(i128::from), Some(want), "{tok}");
        }
    }
}
