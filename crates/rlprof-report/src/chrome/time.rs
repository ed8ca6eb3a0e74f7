//! Timestamps and ids as the trace writes them: microseconds with up to three decimals turned
//! into integer nanoseconds exactly (no float rounding), ids as text.

use crate::json_reader::{self as json};
use std::borrow::Cow;

/// A pid/tid as text (empty when absent).
pub(super) fn id_text(v: Option<&str>) -> Cow<'_, str> {
    v.map(json::value_text).unwrap_or_default()
}

/// Microseconds (number or numeric string) to nanoseconds.
#[inline]
pub(super) fn us_to_ns(v: Option<&str>) -> i64 {
    let us = match v.and_then(|v| v.as_bytes().first().map(|c| (c, v))) {
        Some((b'"', v)) => json::value_text(v).trim().parse().unwrap_or(0.0),
        Some((b'-' | b'0'..=b'9', v)) => {
            if let Some(ns) = decimal_us_to_ns(v) {
                return ns;
            }
            json::number_f64(v).unwrap_or(0.0)
        }
        _ => 0.0,
    };
    (us * 1000.0).round() as i64
}

/// [`us_to_ns`] of a number token in integer arithmetic, for the common case that gives the
/// same result: no exponent, at most 3 decimals, under 2^50 ns. (The float path divides the
/// digits by 10^decimals once, exactly rounded, and multiplies by 1000, rounded again: a
/// relative error under 2^-52, so under 0.25 ns below 2^50 ns, and the exact value is an
/// integer, which rounding then gives back.)
#[inline]
pub(super) fn decimal_us_to_ns(tok: &str) -> Option<i64> {
    const MAX: u64 = 1 << 50;
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok),
    };
    let (mut int, mut frac, mut decimals, mut dot) = (0u64, 0u64, 0u32, false);
    for c in body.bytes() {
        match c {
            b'0'..=b'9' if dot => {
                decimals += 1;
                if decimals > 3 {
                    return None;
                }
                frac = frac * 10 + (c - b'0') as u64;
            }
            b'0'..=b'9' => {
                int = int * 10 + (c - b'0') as u64;
                if int >= MAX / 1000 {
                    return None;
                }
            }
            b'.' => dot = true,
            _ => return None,
        }
    }
    let ns = int * 1000 + frac * 10u64.pow(3 - decimals);
    let ns = ns as i64;
    Some(if neg { -ns } else { ns })
}
