//! A minimal pickle (protocol 2) writer for the memory snapshot.
//!
//! Only the opcodes PyTorch's browser unpickler (memory_viz) understands are used: dicts,
//! lists, unicode strings, i32/LONG1 integers, floats, booleans and None. No bytes objects,
//! no GLOBAL, no memo.

use std::io::Write;

/// A picklable value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True`/`False`.
    Bool(bool),
    /// An integer (within i64).
    Int(i64),
    /// A float.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `list`.
    List(Vec<Value>),
    /// A `dict` with string keys, in insertion order.
    Dict(Vec<(String, Value)>),
}

impl Value {
    /// A dict from `(key, value)` pairs.
    pub fn dict<const N: usize>(items: [(&str, Value); N]) -> Value {
        Value::Dict(items.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    /// An integer value from u64 (saturating at i64::MAX).
    pub fn uint(v: u64) -> Value {
        Value::Int(v.min(i64::MAX as u64) as i64)
    }
}

const BATCH: usize = 1000;

/// Writes `v` as a complete pickle (PROTO 2 ... STOP).
pub(crate) fn write(out: &mut impl Write, v: &Value) -> std::io::Result<()> {
    out.write_all(&[0x80, 2])?;
    value(out, v)?;
    out.write_all(b".")
}

fn str_op(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    out.write_all(b"X")?;
    out.write_all(&(s.len() as u32).to_le_bytes())?;
    out.write_all(s.as_bytes())
}

fn int_op(out: &mut impl Write, i: i64) -> std::io::Result<()> {
    if let Ok(small) = i32::try_from(i) {
        out.write_all(b"J")?;
        return out.write_all(&small.to_le_bytes());
    }
    // LONG1: length byte + minimal two's-complement little-endian bytes.
    let bytes = i.to_le_bytes();
    let mut n = 8;
    while n > 1 {
        let top = bytes[n - 1];
        let next_sign = bytes[n - 2] & 0x80;
        if (top == 0 && next_sign == 0) || (top == 0xff && next_sign != 0) {
            n -= 1;
        } else {
            break;
        }
    }
    out.write_all(&[0x8a, n as u8])?;
    out.write_all(&bytes[..n])
}

fn value(out: &mut impl Write, v: &Value) -> std::io::Result<()> {
    match v {
        Value::None => out.write_all(b"N"),
        Value::Bool(true) => out.write_all(&[0x88]),
        Value::Bool(false) => out.write_all(&[0x89]),
        Value::Int(i) => int_op(out, *i),
        Value::Float(f) => {
            out.write_all(b"G")?;
            out.write_all(&f.to_be_bytes())
        }
        Value::Str(s) => str_op(out, s),
        Value::List(items) => {
            out.write_all(b"]")?;
            for batch in items.chunks(BATCH) {
                out.write_all(b"(")?;
                for it in batch {
                    value(out, it)?;
                }
                out.write_all(b"e")?;
            }
            Ok(())
        }
        Value::Dict(items) => {
            out.write_all(b"}")?;
            for batch in items.chunks(BATCH) {
                out.write_all(b"(")?;
                for (k, it) in batch {
                    str_op(out, k)?;
                    value(out, it)?;
                }
                out.write_all(b"u")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_small_values_byte_exact() {
        let mut b = Vec::new();
        write(&mut b, &Value::dict([("a", Value::Int(1))])).unwrap();
        assert_eq!(b, b"\x80\x02}(X\x01\x00\x00\x00aJ\x01\x00\x00\x00u.");
    }

    #[test]
    fn large_ints_use_long1() {
        let mut b = Vec::new();
        int_op(&mut b, 1 << 40).unwrap();
        assert_eq!(b, [0x8a, 6, 0, 0, 0, 0, 0, 1]);
        b.clear();
        int_op(&mut b, -(1 << 40)).unwrap();
        assert_eq!(b, [0x8a, 6, 0, 0, 0, 0, 0, 0xff]);
    }
}
