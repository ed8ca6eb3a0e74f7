//! The reader itself: a cursor over the text that checks and skips values, hands out
//! borrowed string spans and tracks nesting in a bit stack.

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
    pub(super) fn digits(&mut self) -> usize {
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
