//! Turning the reader's borrowed spans into values: unescaping strings, parsing numbers as
//! serde_json does, and re-serialising a raw value compactly.

use super::reader::{RawStr, Reader};
use std::borrow::Cow;

/// Whether a number's text is an integer that serde_json prints back unchanged (so its text
/// is its compact JSON form).
pub(crate) fn plain_int(tok: &str) -> bool {
    let digits = tok.strip_prefix('-');
    let (d, max) = match digits {
        Some(d) => (d, 18),
        None => (tok, 19),
    };
    !d.is_empty()
        && d.len() <= max
        && d.bytes().all(|c| c.is_ascii_digit())
        && !(digits.is_some() && d == "0")
}

/// Appends the compact JSON serde_json's `Value::to_string` gives the value text `raw`
/// (validated): object keys sorted, later duplicates winning, escapes and numbers normalised.
/// Strings without escapes, plain integers, literals and arrays of them are copied; the rest
/// goes through `serde_json::Value`.
pub(crate) fn compact(raw: &str, out: &mut String) {
    match raw.as_bytes().first() {
        Some(b'"') if !raw[1..raw.len() - 1].contains('\\') => out.push_str(raw),
        Some(b't' | b'f' | b'n') => out.push_str(raw),
        Some(b'-' | b'0'..=b'9') if plain_int(raw) => out.push_str(raw),
        Some(b'[') => {
            out.push('[');
            let mut first = true;
            let ok = Reader::new(raw, 0).elements(|e| {
                if !first {
                    out.push(',');
                }
                first = false;
                compact(e, out);
            });
            debug_assert!(ok.is_ok());
            out.push(']');
        }
        _ => {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(raw) {
                out.push_str(&v.to_string());
            }
        }
    }
}

/// The text serde_json's `value_text` convention gives a value: a string's contents, or the
/// value's compact JSON.
pub(crate) fn value_text(raw: &str) -> Cow<'_, str> {
    match raw.as_bytes().first() {
        Some(b'"') => RawStr {
            raw: &raw[1..raw.len() - 1],
            escaped: raw.contains('\\'),
        }
        .text(),
        Some(b't' | b'f' | b'n') => Cow::Borrowed(raw),
        Some(b'-' | b'0'..=b'9') if plain_int(raw) => Cow::Borrowed(raw),
        _ => {
            let mut s = String::new();
            compact(raw, &mut s);
            Cow::Owned(s)
        }
    }
}

/// The `i64` serde_json-style accessors give a value: integers, floats truncated, numeric
/// strings parsed.
pub(crate) fn value_i64(raw: &str) -> Option<i64> {
    match raw.as_bytes().first() {
        Some(b'"') => value_text(raw).trim().parse().ok(),
        // Plain integers (sizes, addresses): a validated JSON integer is exactly what
        // `i64::from_str` reads (no `+`, no leading zeros); fractions, exponents and
        // out-of-range values go through serde_json like the reference loader.
        Some(b'-' | b'0'..=b'9') => raw.parse().ok().or_else(|| {
            match serde_json::from_str::<serde_json::Value>(raw).ok()? {
                serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
                _ => None,
            }
        }),
        _ => None,
    }
}
