//! A strict, borrowing JSON reader for the Chrome-trace loader ([`crate::chrome`]).
//!
//! Why this is hand-written rather than serde_json: going through serde costs per event (a
//! visitor dispatch per field, an owned `String` or `serde_json::Value` per field, and the
//! `args` map built and re-serialised), which was most of the load time of an 80 MB trace
//! (BENCHMARKS.md, "Loading a foreign Chrome trace"); and serde_json cannot start parsing in the
//! middle of an array, which the parallel chunked parse needs. This reader walks bytes, returns
//! borrowed spans of the input, never allocates on the valid path, and never recurses (nesting
//! is tracked in a bit stack), so the stack stays bounded on hostile input.
//!
//! What it accepts is exactly what `serde_json::from_str::<serde_json::Value>` accepts
//! (RFC 8259 JSON: whitespace, literals, numbers without leading zeros, numbers that do not
//! overflow an `f64`, strings without raw control characters, valid escapes with paired UTF-16
//! surrogates) with at most [`MAX_DEPTH`]` - 1` nested arrays/objects (serde_json's recursion
//! limit). The tests in this module and in `chrome.rs` check that against serde_json.

use std::borrow::Cow;

/// serde_json's recursion limit: a document may nest at most `MAX_DEPTH - 1` containers.
pub(crate) const MAX_DEPTH: u32 = 128;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// Not JSON, or not the expected shape; the text says what was expected.
    Syntax(&'static str),
    /// Nested deeper than [`MAX_DEPTH`] allows.
    Depth,
}

/// An error at a byte offset of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Error {
    /// Byte offset into the text.
    pub offset: usize,
    /// What.
    pub kind: ErrorKind,
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

/// A JSON string as written: the text between the quotes and whether it holds escapes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawStr<'a> {
    /// The text between the quotes (escapes not yet decoded).
    pub raw: &'a str,
    /// Whether `raw` holds a backslash escape.
    pub escaped: bool,
}

impl<'a> RawStr<'a> {
    /// The decoded string (borrowed when it holds no escape).
    #[inline]
    pub(crate) fn text(&self) -> Cow<'a, str> {
        if self.escaped {
            Cow::Owned(unescape(self.raw))
        } else {
            Cow::Borrowed(self.raw)
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// A cursor over a text.
pub(crate) struct Reader<'a> {
    text: &'a str,
    b: &'a [u8],
    /// Current byte offset.
    pub pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at offset `pos` of `text`.
    pub(crate) fn new(text: &'a str, pos: usize) -> Reader<'a> {
        Reader {
            text,
            b: text.as_bytes(),
            pos,
        }
    }

    /// The whole text.
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// The text from `start` to the cursor, where `start` is where a token or value this
    /// reader has read began (slicing a `str` checks both ends for a character boundary,
    /// which showed in profiles, one call per field).
    #[inline(always)]
    pub(crate) fn since(&self, start: usize) -> &'a str {
        assert!(start <= self.pos && self.pos <= self.b.len());
        debug_assert!(self.text.is_char_boundary(start) && self.text.is_char_boundary(self.pos));
        // SAFETY: in bounds (checked above). Both ends are character boundaries: `start` is
        // where the reader found a token's first byte or stepped past an opening quote, and
        // the cursor is just past a token's last byte or at a closing quote; every one of
        // those bytes is ASCII, and a position next to an ASCII byte is a boundary.
        unsafe { self.text.get_unchecked(start..self.pos) }
    }

    /// An error at the current position.
    pub(crate) fn err(&self, what: &'static str) -> Error {
        Error {
            offset: self.pos,
            kind: ErrorKind::Syntax(what),
        }
    }

    /// Skips JSON whitespace.
    #[inline(always)]
    pub(crate) fn ws(&mut self) {
        // Usually there is none: one comparison (every whitespace byte is <= b' ').
        if self.b.get(self.pos).is_some_and(|&c| c > b' ') {
            return;
        }
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The byte at the cursor.
    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Consumes `c` (no whitespace skipped) or fails with `what`.
    #[inline(always)]
    pub(crate) fn eat(&mut self, c: u8, what: &'static str) -> Result<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.eof_or(what))
        }
    }

    fn eof_or(&self, what: &'static str) -> Error {
        if self.pos >= self.b.len() {
            self.err("EOF while parsing")
        } else {
            self.err(what)
        }
    }

    /// Checks that one more container may open inside `open` open ones.
    #[inline(always)]
    pub(crate) fn open(&self, open: u32) -> Result<()> {
        if open + 1 >= MAX_DEPTH {
            Err(Error {
                offset: self.pos,
                kind: ErrorKind::Depth,
            })
        } else {
            Ok(())
        }
    }

    /// Reads a string; the cursor is at its opening quote.
    #[inline(always)]
    pub(crate) fn string(&mut self) -> Result<RawStr<'a>> {
        self.eat(b'"', "expected a string")?;
        let start = self.pos;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the first quote, backslash or control character.
            while let Some(chunk) = self.b.get(self.pos..self.pos + 8) {
                let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                let quote = v ^ (ONES * b'"' as u64);
                let bslash = v ^ (ONES * b'\\' as u64);
                let hit = (quote.wrapping_sub(ONES) & !quote)
                    | (bslash.wrapping_sub(ONES) & !bslash)
                    | (v.wrapping_sub(ONES * 0x20) & !v);
                let hit = hit & HIGHS;
                if hit != 0 {
                    self.pos += (hit.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match self.peek() {
                None => return Err(self.err("EOF while parsing a string")),
                Some(b'"') => {
                    let raw = self.since(start);
                    self.pos += 1;
                    return Ok(RawStr { raw, escaped });
                }
                Some(b'\\') => {
                    escaped = true;
                    self.pos += 1;
                    self.escape()?;
                }
                Some(c) if c < 0x20 => {
                    return Err(self.err("control character (\\u0000-\\u001F) in a string"));
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// Checks an escape; the cursor is after the backslash.
    fn escape(&mut self) -> Result<()> {
        match self.peek() {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.pos += 1;
                Ok(())
            }
            Some(b'u') => {
                self.pos += 1;
                let n = self.hex4()?;
                if (0xDC00..=0xDFFF).contains(&n) {
                    return Err(self.err("lone trailing surrogate in hex escape"));
                }
                if (0xD800..=0xDBFF).contains(&n) {
                    if self.b.get(self.pos..self.pos + 2) != Some(b"\\u") {
                        return Err(self.err("lone leading surrogate in hex escape"));
                    }
                    self.pos += 2;
                    let m = self.hex4()?;
                    if !(0xDC00..=0xDFFF).contains(&m) {
                        return Err(self.err("lone leading surrogate in hex escape"));
                    }
                }
                Ok(())
            }
            _ => Err(self.eof_or("invalid escape")),
        }
    }

    fn hex4(&mut self) -> Result<u16> {
        let Some(h) = self.b.get(self.pos..self.pos + 4) else {
            return Err(self.err("EOF while parsing a string"));
        };
        let mut n = 0u16;
        for &c in h {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return Err(self.err("invalid escape")),
            };
            n = n << 4 | d as u16;
        }
        self.pos += 4;
        Ok(n)
    }

    #[inline(always)]
    fn digits(&mut self) -> usize {
        let start = self.pos;
        // Eight bytes at a time up to the first non-digit: `t` maps digits to 0..=9, and a byte
        // of `t` gets its high bit set by adding 0x76 (no carry out of a byte) exactly when
        // it is above 9 or already had the bit.
        while let Some(chunk) = self.b.get(self.pos..self.pos + 8) {
            let t = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ (ONES * b'0' as u64);
            let non_digit = (((t & (ONES * 0x7F)) + ONES * 0x76) | t) & HIGHS;
            if non_digit != 0 {
                self.pos += (non_digit.trailing_zeros() / 8) as usize;
                return self.pos - start;
            }
            self.pos += 8;
        }
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Reads a number; the cursor is at its first byte.
    #[inline(always)]
    pub(crate) fn number(&mut self) -> Result<&'a str> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int = match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.err("invalid number"));
                }
                1
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("invalid number")),
        };
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        let mut exp = false;
        if let Some(b'e' | b'E') = self.peek() {
            exp = true;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        let tok = self.since(start);
        // Only an exponent or a very long integer part can overflow an f64; serde_json decides
        // those (so the two agree on the boundary).
        if (exp || int > 300) && serde_json::from_str::<serde_json::Value>(tok).is_err() {
            self.pos = start;
            return Err(self.err("number out of range"));
        }
        Ok(tok)
    }

    /// Reads `null`, `true` or `false` (`word`).
    fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        if self.b.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.eof_or("expected value"))
        }
    }

    /// Reads `null` if it is next (after whitespace).
    #[inline(always)]
    pub(crate) fn null(&mut self) -> Result<bool> {
        self.ws();
        if self.peek() == Some(b'n') {
            self.literal(b"null")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Reads an object key and its colon (whitespace before both skipped).
    #[inline(always)]
    pub(crate) fn key(&mut self) -> Result<RawStr<'a>> {
        self.ws();
        if self.peek() != Some(b'"') {
            return Err(self.eof_or("expected a string key"));
        }
        let k = self.string()?;
        self.ws();
        self.eat(b':', "expected `:`")?;
        Ok(k)
    }

    /// Reads and validates one value inside `open` open containers; returns its text.
    #[inline]
    pub(crate) fn value(&mut self, open: u32) -> Result<&'a str> {
        self.ws();
        let start = self.pos;
        match self.peek() {
            Some(b'"') => {
                self.string()?;
                Ok(self.since(start))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.nested_value(open, start),
        }
    }

    /// [`Reader::value`] for containers and literals.
    fn nested_value(&mut self, open: u32, start: usize) -> Result<&'a str> {
        // Bit i set: the i-th container opened inside this value is an array.
        let mut arrays: u128 = 0;
        let mut n: u32 = 0;
        'value: loop {
            self.ws();
            match self.peek() {
                Some(b'{') => {
                    self.open(open + n)?;
                    arrays &= !(1u128 << n);
                    n += 1;
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        n -= 1;
                    } else {
                        self.key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.open(open + n)?;
                    arrays |= 1u128 << n;
                    n += 1;
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        n -= 1;
                    } else {
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                }
                Some(b'n') => self.literal(b"null")?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                None => return Err(self.err("EOF while parsing a value")),
                Some(_) => return Err(self.err("expected value")),
            }
            loop {
                if n == 0 {
                    return Ok(self.since(start));
                }
                self.ws();
                let array = arrays >> (n - 1) & 1 == 1;
                match (self.peek(), array) {
                    (Some(b','), _) => {
                        self.pos += 1;
                        if !array {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    (Some(b']'), true) | (Some(b'}'), false) => {
                        self.pos += 1;
                        n -= 1;
                    }
                    (_, true) => return Err(self.eof_or("expected `,` or `]`")),
                    (_, false) => return Err(self.eof_or("expected `,` or `}`")),
                }
            }
        }
    }

    /// The members of an object whose text was already validated by [`Reader::value`]:
    /// calls `f(key, value text)` for each, in order. Fails if `self` is not at an object.
    pub(crate) fn members(&mut self, mut f: impl FnMut(RawStr<'a>, &'a str)) -> Result<()> {
        self.ws();
        self.eat(b'{', "expected an object")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let k = self.key()?;
            let v = self.value(0)?;
            f(k, v);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.eof_or("expected `,` or `}`")),
            }
        }
    }

    /// The elements of an array already validated by [`Reader::value`].
    pub(crate) fn elements(&mut self, mut f: impl FnMut(&'a str)) -> Result<()> {
        self.ws();
        self.eat(b'[', "expected an array")?;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            f(self.value(0)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.eof_or("expected `,` or `]`")),
            }
        }
    }
}

/// Decodes the escapes of a string's text (validated by [`Reader::string`]).
pub(crate) fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let b = rest.as_bytes();
        let (c, used) = match b[i + 1] {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            _ => {
                let hex = |at: usize| u32::from_str_radix(rest.get(at..at + 4).unwrap_or(""), 16);
                let n = hex(i + 2).unwrap_or(0xFFFD);
                if (0xD800..=0xDBFF).contains(&n) {
                    let m = hex(i + 8).unwrap_or(0);
                    let c = 0x1_0000 + ((n - 0xD800) << 10) + (m.wrapping_sub(0xDC00) & 0x3FF);
                    (char::from_u32(c).unwrap_or('\u{FFFD}'), 12)
                } else {
                    (char::from_u32(n).unwrap_or('\u{FFFD}'), 6)
                }
            }
        };
        out.push(c);
        rest = rest.get(i + used..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

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

/// The `f64` serde_json gives a number's text (validated by [`Reader::number`]).
///
/// Short decimals (significand below 2^53, power of ten up to 22) take one exact
/// multiplication or division, which is what serde_json computes for them with or without its
/// `float_roundtrip` feature; anything else is handed to serde_json.
pub(crate) fn number_f64(tok: &str) -> Option<f64> {
    let (neg, body) = match tok.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, tok),
    };
    let mut sig: u64 = 0;
    let mut digits = 0;
    let mut exp: i32 = 0;
    let mut frac = false;
    for c in body.bytes() {
        match c {
            b'0'..=b'9' => {
                digits += 1;
                if digits > 19 {
                    return slow_f64(tok);
                }
                sig = sig * 10 + (c - b'0') as u64;
                if frac {
                    exp -= 1;
                }
            }
            b'.' => frac = true,
            _ => return slow_f64(tok),
        }
    }
    if sig >= 1 << 53 || exp < -22 {
        return slow_f64(tok);
    }
    let mut f = sig as f64;
    if exp < 0 {
        f /= POW10[(-exp) as usize];
    }
    Some(if neg { -f } else { f })
}

#[cold]
fn slow_f64(tok: &str) -> Option<f64> {
    serde_json::from_str::<serde_json::Value>(tok)
        .ok()
        .and_then(|v| v.as_f64())
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Our verdict on a whole document (one value, then only whitespace).
    fn ours(doc: &str) -> Result<&str> {
        let mut r = Reader::new(doc, 0);
        let v = r.value(0)?;
        r.ws();
        if r.pos != doc.len() {
            return Err(r.err("trailing characters"));
        }
        Ok(v)
    }

    fn corpus() -> Vec<String> {
        let mut v: Vec<String> = [
            "null",
            "true",
            "false",
            "nul",
            "tru",
            "0",
            "-0",
            "01",
            "-",
            "1.",
            ".5",
            "1.5",
            "1e5",
            "1E+5",
            "1e-5",
            "1e",
            "1e+",
            "-1.25e-3",
            "1e400",
            "-1e400",
            "1e308",
            "123456789012345678901234567890",
            "\"\"",
            "\"a\"",
            "\"\\n\\t\\\"\\\\\\/\\b\\f\\r\"",
            "\"\\x\"",
            "\"\\u00e9\"",
            "\"\\u00G9\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ud83d\"",
            "\"\\ude00\"",
            "\"\\ud83dx\"",
            "\"\\ud83d\\u0041\"",
            "\"a\u{1}b\"",
            "\"tab\there\"",
            "\"é ü 中文 😀\"",
            "\"unterminated",
            "[]",
            "[1,2]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{}",
            "{\"a\":1}",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{a:1}",
            "{\"a\":1 \"b\":2}",
            "{\"a\":[{\"b\":[]}],\"c\":{\"d\":null}}",
            " \n\t\r[ 1 , { \"x\" : \"y\" } ] \n",
            "[1]x",
            "[1]]",
            "{\"a\":1}}",
            "",
            " ",
            "[\"a\u{7f}\"]",
            "[1,[2,[3,[4]]]]",
            "{\"\":\"\"}",
            "[-]",
            "[--1]",
            "[+1]",
            "[0x10]",
            "[1.0e+]",
            "[\"\\u12\"]",
            "[Infinity]",
            "[NaN]",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for d in [126, 127, 128, 129] {
            v.push(format!("{}{}", "[".repeat(d), "]".repeat(d)));
            v.push(format!("{}1{}", "[".repeat(d), "]".repeat(d)));
            v.push(format!("{}{}", "{\"a\":".repeat(d), "}".repeat(d)).replace(":}", ":1}"));
        }
        // Truncations of a valid document fail at every cut, as serde_json does.
        let whole = r#"{"a":[1,-2.5e3,"x\u00e9\ud83d\ude00",true,null,{"b":{}}],"c":"d"}"#;
        for i in 0..whole.len() {
            if whole.is_char_boundary(i) {
                v.push(whole[..i].to_string());
            }
        }
        v.push(whole.to_string());
        v
    }

    #[test]
    fn accepts_and_rejects_exactly_what_serde_json_does() {
        for doc in corpus() {
            let want = serde_json::from_str::<serde_json::Value>(&doc);
            let got = ours(&doc);
            assert_eq!(
                got.is_ok(),
                want.is_ok(),
                "{doc:?}: ours {got:?}, serde_json {want:?}"
            );
            if let Ok(v) = want {
                // Same value, and the span is the whole value.
                let span = got.unwrap();
                assert_eq!(serde_json::from_str::<serde_json::Value>(span).unwrap(), v);
                assert_eq!(span, doc.trim_matches([' ', '\n', '\t', '\r']));
            }
        }
    }

    #[test]
    fn digit_runs_end_at_the_first_non_digit_byte() {
        for c in 0..=255u8 {
            for run in [0, 1, 7, 8, 9, 15, 16, 23] {
                for tail in [0, 1, 9] {
                    let mut b = vec![b'5'; run];
                    b.push(c);
                    b.extend(std::iter::repeat_n(b'1', tail));
                    let text = String::from_utf8_lossy(&b).into_owned();
                    let mut r = Reader::new(&text, 0);
                    let want = text.bytes().take_while(u8::is_ascii_digit).count();
                    assert_eq!(r.digits(), want, "{c} {run} {tail}");
                    assert_eq!(r.pos, want);
                }
            }
        }
    }

    #[test]
    fn depth_errors_are_told_apart_and_deep_input_does_not_overflow_the_stack() {
        let deep = "[".repeat(1_000_000);
        assert_eq!(ours(&deep).unwrap_err().kind, ErrorKind::Depth);
        let ok = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert!(ours(&ok).is_ok());
        let too = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(ours(&too).unwrap_err().kind, ErrorKind::Depth);
    }

    #[test]
    fn strings_decode_like_serde_json() {
        for s in [
            r#""plain""#,
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u0000\u001f\u00e9\u4e2d\ud83d\ude00""#,
            "\"\u{e9}\u{4e2d}\u{1F600}\"",
            r#""<script>\u003c/script>""#,
        ] {
            let want: String = serde_json::from_str(s).unwrap();
            let got = Reader::new(s, 0).string().unwrap();
            assert_eq!(got.text(), want, "{s}");
            assert_eq!(value_text(s), want, "{s}");
        }
    }

    #[test]
    fn compact_text_equals_serde_json_value_to_string() {
        for raw in [
            r#"[[4, 8], [8, 16]]"#,
            r#"["float32", "float32"]"#,
            r#"{"b": 1, "a": [1, 2.50, -0], "a": "dup wins"}"#,
            r#"[1e3, 1.5E-2, -0, -0.0, 0.1, 12345678901234567890, -12]"#,
            r#""esc\u0041\/""#,
            r#"[true, false, null, "x\ty"]"#,
            r#"{"nested": {"z": 1, "y": [{"k": "v"}]}}"#,
            r#"123"#,
            r#"-9223372036854775808"#,
        ] {
            let v: serde_json::Value = serde_json::from_str(raw).unwrap();
            let mut got = String::new();
            compact(raw, &mut got);
            assert_eq!(got, v.to_string(), "{raw}");
        }
    }

    #[test]
    fn numbers_convert_like_serde_json() {
        for tok in [
            "0",
            "-0",
            "1",
            "-17",
            "1700000000123.456",
            "0.001",
            "80.125",
            "9007199254740993",
            "123456789.123456789",
            "1e3",
            "1.5e-7",
            "-2.5",
            "0.30000000000000004",
            "18446744073709551615",
            "18446744073709551616",
        ] {
            let v: serde_json::Value = serde_json::from_str(tok).unwrap();
            assert_eq!(
                number_f64(tok).map(f64::to_bits),
                v.as_f64().map(f64::to_bits),
                "{tok}"
            );
            let want_i = v.as_i64().or_else(|| v.as_f64().map(|f| f as i64));
            assert_eq!(value_i64(tok), want_i, "{tok}");
        }
        assert_eq!(value_i64("\" 42 \""), Some(42));
        assert_eq!(value_i64("\"x\""), None);
        assert_eq!(value_i64("[1]"), None);
    }
}
