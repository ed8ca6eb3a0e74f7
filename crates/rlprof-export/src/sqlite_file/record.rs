//! SQLite's record format: a value's storage class after column affinity, its serial type, and
//! the record (a header of serial types, then the values), with SQLite's variable-length
//! integers. See <https://sqlite.org/fileformat2.html#record_format>.

/// One value of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// SQL NULL.
    Null,
    /// A 64-bit signed integer.
    Int(i64),
    /// An IEEE double.
    Real(f64),
    /// UTF-8 text.
    Text(&'a str),
}

impl From<i64> for Value<'_> {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<Option<i64>> for Value<'_> {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Value::Null, Value::Int)
    }
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl From<Option<f64>> for Value<'_> {
    fn from(v: Option<f64>) -> Self {
        v.map_or(Value::Null, Value::Real)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(v)
    }
}

/// A column's affinity, from its declared type by SQLite's rules (section 3.1 of
/// <https://sqlite.org/datatype3.html>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    /// `INT` in the type.
    Integer,
    /// `CHAR`, `CLOB` or `TEXT` in the type.
    Text,
    /// `BLOB` in the type, or no type.
    Blob,
    /// `REAL`, `FLOA` or `DOUB` in the type.
    Real,
    /// Anything else (`NUMERIC`, `DECIMAL`, ...).
    Numeric,
}

impl Affinity {
    /// The affinity of a declared column type.
    pub fn of(declared: &str) -> Affinity {
        let t = declared.to_ascii_uppercase();
        if t.contains("INT") {
            Affinity::Integer
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
            Affinity::Text
        } else if t.contains("BLOB") || t.is_empty() {
            Affinity::Blob
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            Affinity::Real
        } else {
            Affinity::Numeric
        }
    }
}

/// What SQLite stores for `v` in a column of affinity `a`, for the conversions rlprof's tables
/// meet: a whole REAL in an INTEGER or NUMERIC column is stored as an integer, an integer in a
/// TEXT column as its decimal text, an integer in a REAL column as a REAL. Text in a numeric
/// column and REAL in a TEXT column are not converted (SQLite would parse or format them;
/// rlprof's writers never produce them, which [`encode`] checks in debug
/// builds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stored<'a> {
    /// The value as given.
    Plain(Value<'a>),
    /// An integer stored as decimal text.
    IntText(i64),
}

/// Applies affinity `a` to `v`.
#[inline]
pub(super) fn apply_affinity(a: Affinity, v: Value<'_>) -> Stored<'_> {
    match (a, v) {
        (Affinity::Integer | Affinity::Numeric, Value::Real(r)) => match whole(r) {
            Some(i) => Stored::Plain(Value::Int(i)),
            None => Stored::Plain(v),
        },
        (Affinity::Text, Value::Int(i)) => Stored::IntText(i),
        (Affinity::Real, Value::Int(i)) => Stored::Plain(Value::Real(i as f64)),
        _ => Stored::Plain(v),
    }
}

/// `r` as an integer when SQLite would store it as one (exactly whole, strictly inside the
/// 64-bit range, as `sqlite3VdbeIntegerAffinity` decides).
fn whole(r: f64) -> Option<i64> {
    // The cast saturates, so compare with -2^63 and 2^63 (exact doubles) before casting.
    const LIMIT: f64 = (1u64 << 63) as f64;
    if !(r > -LIMIT && r < LIMIT) {
        return None;
    }
    let i = r as i64;
    (i as f64 == r && i != i64::MIN && i != i64::MAX).then_some(i)
}

/// Serial type and body length of a stored value.
#[inline(always)]
fn serial(v: &Stored<'_>, digits: &mut itoa::Buffer) -> (u64, usize) {
    match *v {
        Stored::Plain(Value::Null) => (0, 0),
        Stored::Plain(Value::Int(i)) => int_serial(i),
        Stored::Plain(Value::Real(_)) => (7, 8),
        Stored::Plain(Value::Text(s)) => (13 + 2 * s.len() as u64, s.len()),
        Stored::IntText(i) => {
            let n = digits.format(i).len();
            (13 + 2 * n as u64, n)
        }
    }
}

/// The smallest integer serial type holding `i` (schema format 4: 0 and 1 take no bytes).
#[inline]
fn int_serial(i: i64) -> (u64, usize) {
    match i {
        0 => (8, 0),
        1 => (9, 0),
        -128..=127 => (1, 1),
        -32_768..=32_767 => (2, 2),
        -8_388_608..=8_388_607 => (3, 3),
        -2_147_483_648..=2_147_483_647 => (4, 4),
        -140_737_488_355_328..=140_737_488_355_327 => (5, 6),
        _ => (6, 8),
    }
}

/// Appends to `out` the record of `row`, each value stored under its column's affinity.
pub(super) fn encode(row: &[Value<'_>], affinity: &[Affinity], out: &mut Vec<u8>) {
    debug_assert_eq!(row.len(), affinity.len());
    let stored = || {
        row.iter()
            .zip(affinity)
            .map(|(v, a)| apply_affinity(*a, *v))
    };
    let mut digits = itoa::Buffer::new();
    // The header: its length (one byte, fixed below), then a serial type per value.
    let start = out.len();
    out.push(0);
    for (v, a) in row.iter().zip(affinity) {
        debug_assert!(
            !matches!(
                (a, v),
                (Affinity::Integer | Affinity::Numeric, Value::Text(_))
                    | (Affinity::Text, Value::Real(_))
            ),
            "a value SQLite would convert by parsing or formatting: {v:?} as {a:?}"
        );
        push_varint(out, serial(&apply_affinity(*a, *v), &mut digits).0);
    }
    // The length counts its own varint: one byte up to 127, else two (64 columns of at most
    // 9 bytes each stay far below 16 383).
    let types = out.len() - start - 1;
    if types < 127 {
        out[start] = types as u8 + 1;
    } else {
        let mut h = [0u8; 9];
        let n = put_varint(&mut h, types as u64 + 2);
        debug_assert_eq!(n, 2);
        out[start] = h[0];
        out.insert(start + 1, h[1]);
    }
    for v in stored() {
        match v {
            Stored::Plain(Value::Null) => {}
            Stored::Plain(Value::Int(i)) => {
                let (_, n) = int_serial(i);
                out.extend_from_slice(&i.to_be_bytes()[8 - n..]);
            }
            Stored::Plain(Value::Real(r)) => out.extend_from_slice(&r.to_bits().to_be_bytes()),
            Stored::Plain(Value::Text(s)) => out.extend_from_slice(s.as_bytes()),
            Stored::IntText(i) => out.extend_from_slice(digits.format(i).as_bytes()),
        }
    }
}

/// Appends `v` as a varint.
#[inline]
fn push_varint(out: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        out.push(v as u8);
    } else {
        let mut b = [0u8; 9];
        let n = put_varint(&mut b, v);
        out.extend_from_slice(&b[..n]);
    }
}

/// Writes `v` as a SQLite varint (big-endian groups of 7 bits, the ninth byte holding 8) at
/// the start of `out`; returns its length (1 to 9).
#[inline]
pub(super) fn put_varint(out: &mut [u8], v: u64) -> usize {
    if v < 0x80 {
        out[0] = v as u8;
        return 1;
    }
    if v < 0x4000 {
        out[0] = (v >> 7) as u8 | 0x80;
        out[1] = v as u8 & 0x7f;
        return 2;
    }
    if v > 0x00ff_ffff_ffff_ffff {
        // Nine bytes: eight groups of 7 bits, then the low 8 bits whole.
        let mut x = v >> 8;
        for i in (0..8).rev() {
            out[i] = (x & 0x7f) as u8 | 0x80;
            x >>= 7;
        }
        out[8] = v as u8;
        return 9;
    }
    let mut groups = [0u8; 8];
    let (mut n, mut x) = (0, v);
    while x > 0 {
        groups[n] = (x & 0x7f) as u8;
        x >>= 7;
        n += 1;
    }
    for i in 0..n {
        out[i] = groups[n - 1 - i] | if i + 1 < n { 0x80 } else { 0 };
    }
    n
}

/// The length of `v` as a varint.
#[inline]
pub(super) fn varint_len(v: u64) -> usize {
    if v > 0x00ff_ffff_ffff_ffff {
        9
    } else {
        ((64 - v.leading_zeros() as usize).div_ceil(7)).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's `sqlite3GetVarint`, written from the file-format text, to check the writer.
    fn get_varint(b: &[u8]) -> (u64, usize) {
        let mut v = 0u64;
        for (i, &byte) in b.iter().enumerate().take(8) {
            v = (v << 7) | (byte & 0x7f) as u64;
            if byte & 0x80 == 0 {
                return (v, i + 1);
            }
        }
        ((v << 8) | b[8] as u64, 9)
    }

    #[test]
    fn varints_round_trip_at_every_length_boundary() {
        let mut cases = vec![0u64, 1, 127, 128, 16_383, 16_384, u64::MAX, u64::MAX - 1];
        for bits in 7..64 {
            cases.push((1u64 << bits) - 1);
            cases.push(1u64 << bits);
        }
        for v in cases {
            let mut b = [0u8; 9];
            let n = put_varint(&mut b, v);
            assert_eq!(get_varint(&b), (v, n), "{v}");
            assert_eq!(varint_len(v), n);
        }
    }

    #[test]
    fn affinity_follows_sqlites_rules() {
        assert_eq!(Affinity::of("INTEGER"), Affinity::Integer);
        assert_eq!(Affinity::of("NUMERIC"), Affinity::Numeric);
        assert_eq!(Affinity::of("TEXT"), Affinity::Text);
        assert_eq!(Affinity::of(""), Affinity::Blob);
        assert_eq!(Affinity::of("DOUBLE"), Affinity::Real);
        let n = Affinity::Numeric;
        assert_eq!(
            apply_affinity(n, Value::Real(3.0)),
            Stored::Plain(Value::Int(3))
        );
        assert_eq!(
            apply_affinity(n, Value::Real(3.5)),
            Stored::Plain(Value::Real(3.5))
        );
        assert_eq!(
            apply_affinity(n, Value::Real(1e300)),
            Stored::Plain(Value::Real(1e300))
        );
        assert_eq!(
            apply_affinity(Affinity::Text, Value::Int(-7)),
            Stored::IntText(-7)
        );
    }
}
