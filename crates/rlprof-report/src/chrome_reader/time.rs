//! Timestamps and ids as the trace writes them: decimal microseconds turned into integer
//! nanoseconds exactly at every magnitude (no float rounding, see [`crate::exact_time`]), ids as
//! text.

use crate::json_reader::{self as json};
use std::borrow::Cow;

/// A pid/tid as text (empty when absent).
pub(super) fn id_text(v: Option<&str>) -> Cow<'_, str> {
    v.map(json::value_text).unwrap_or_default()
}

/// Microseconds (number or numeric string) to nanoseconds: decimal tokens exactly
/// ([`crate::exact_time`]); a token with an exponent as a float; anything else 0.
#[inline]
pub(super) fn us_to_ns(v: Option<&str>) -> i64 {
    match v.and_then(|v| v.as_bytes().first().map(|c| (c, v))) {
        Some((b'"', v)) => us_to_ns_text(json::value_text(v).trim()),
        Some((b'-' | b'0'..=b'9', v)) => us_to_ns_text(v),
        _ => 0,
    }
}

#[inline]
fn us_to_ns_text(v: &str) -> i64 {
    crate::exact_time::us_to_ns(v).unwrap_or(0)
}
