//! One event's fields read straight from the text (`ph`, `name`, `cat`, `pid`, `tid`, `ts`, `dur`,
//! `args`), unknown fields skipped and every value validated as serde_json would.

use crate::json_reader::{self as json, RawStr, Reader};
use rustc_hash::FxHashMap;
use std::borrow::Cow;

/// One event's fields as written (unknown fields skipped, validated).
#[derive(Default)]
pub(super) struct RawEvent<'a> {
    pub(super) ph: Option<RawStr<'a>>,
    pub(super) name: Option<&'a str>,
    pub(super) cat: Option<RawStr<'a>>,
    pub(super) pid: Option<&'a str>,
    pub(super) tid: Option<&'a str>,
    pub(super) ts: Option<&'a str>,
    pub(super) dur: Option<&'a str>,
    pub(super) args: Option<&'a str>,
    /// `name` when it is a string.
    pub(super) name_str: Option<RawStr<'a>>,
    /// Whether `args` is an object whose members were put in the chunk's `members`.
    pub(super) args_members: bool,
}

/// An object's members: decoded key, value text.
pub(super) type Members<'a> = Vec<(Cow<'a, str>, &'a str)>;

/// Compact text of array values already seen (shapes and dtype lists repeat across events).
pub(super) type Cache<'a> = FxHashMap<&'a str, String>;

/// [`json::compact`] of `v`, remembered.
pub(super) fn compact_cached<'c, 'a>(v: &'a str, cache: &'c mut Cache<'a>) -> &'c str {
    cache.entry(v).or_insert_with(|| {
        let mut s = String::new();
        json::compact(v, &mut s);
        s
    })
}

/// Field names in declaration order (an event may also be written as an array of them).
pub(super) const FIELDS: [&str; 8] = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "args"];

/// The index of a field name in [`FIELDS`] (compared as one little-endian word with its
/// length: no string comparisons).
#[inline]
pub(super) fn field_index(k: &str) -> Option<usize> {
    const fn word(k: &[u8]) -> (usize, u32) {
        let mut w = [0u8; 4];
        let mut i = 0;
        while i < k.len() {
            w[i] = k[i];
            i += 1;
        }
        (k.len(), u32::from_le_bytes(w))
    }
    const W: [(usize, u32); 8] = [
        word(b"ph"),
        word(b"name"),
        word(b"cat"),
        word(b"pid"),
        word(b"tid"),
        word(b"ts"),
        word(b"dur"),
        word(b"args"),
    ];
    let b = k.as_bytes();
    if !(2..=4).contains(&b.len()) {
        return None;
    }
    // Byte by byte (a `copy_from_slice` of a variable length is a `memcpy` call).
    let at = |i: usize| b.get(i).copied().unwrap_or(0) as u32;
    let key = (b.len(), at(0) | at(1) << 8 | at(2) << 16 | at(3) << 24);
    W.iter().position(|&f| f == key)
}

impl<'a> RawEvent<'a> {
    /// Reads the field `i` of [`FIELDS`]; an object `args` has its members put in `members`.
    #[inline(always)]
    pub(super) fn field(
        &mut self,
        r: &mut Reader<'a>,
        i: usize,
        open: u32,
        members: &mut Members<'a>,
    ) -> json::Result<()> {
        if i == 0 || i == 2 {
            let v = if r.null()? {
                None
            } else if r.peek() == Some(b'"') {
                Some(r.string()?)
            } else {
                return Err(r.err("invalid type: expected a string"));
            };
            if i == 0 {
                self.ph = v;
            } else {
                self.cat = v;
            }
            return Ok(());
        }
        if r.null()? {
            return Ok(());
        }
        let start = r.pos;
        // The common shapes directly; anything else through the general value reader.
        let v = match r.peek() {
            Some(b'"') => {
                let s = r.string()?;
                if i == 1 {
                    self.name_str = Some(s);
                }
                r.since(start)
            }
            Some(b'-' | b'0'..=b'9') => r.number()?,
            // A complete event (`X`) keeps its `args` as text, so its members are not needed;
            // other phases read them (when `ph` comes later they are read too).
            Some(b'{')
                if i == 7
                    && !matches!(
                        self.ph,
                        Some(RawStr {
                            raw: "X",
                            escaped: false
                        })
                    ) =>
            {
                r.open(open)?;
                r.pos += 1;
                members.clear();
                self.args_members = true;
                r.ws();
                if r.peek() == Some(b'}') {
                    r.pos += 1;
                } else {
                    loop {
                        let k = r.key()?;
                        let v = r.value(open + 1)?;
                        members.push((k.text(), v));
                        r.ws();
                        match r.peek() {
                            Some(b',') => r.pos += 1,
                            Some(b'}') => {
                                r.pos += 1;
                                break;
                            }
                            _ => return Err(r.err("expected `,` or `}`")),
                        }
                    }
                }
                r.since(start)
            }
            _ => r.value(open)?,
        };
        match i {
            1 => self.name = Some(v),
            3 => self.pid = Some(v),
            4 => self.tid = Some(v),
            5 => self.ts = Some(v),
            6 => self.dur = Some(v),
            _ => self.args = Some(v),
        }
        Ok(())
    }

    /// Reads one event (an object, or an array of the fields in order) inside `open` containers.
    pub(super) fn read(
        r: &mut Reader<'a>,
        open: u32,
        members: &mut Members<'a>,
    ) -> json::Result<RawEvent<'a>> {
        let mut ev = RawEvent::default();
        r.ws();
        match r.peek() {
            Some(b'{') => {
                r.open(open)?;
                r.pos += 1;
                r.ws();
                if r.peek() == Some(b'}') {
                    r.pos += 1;
                    return Ok(ev);
                }
                let mut seen = 0u8;
                loop {
                    let key_at = r.pos;
                    let key = r.key()?;
                    let i = if key.escaped {
                        field_index(&key.text())
                    } else {
                        field_index(key.raw)
                    };
                    match i {
                        Some(i) => {
                            if seen & 1 << i != 0 {
                                r.pos = key_at;
                                return Err(r.err("duplicate field"));
                            }
                            seen |= 1 << i;
                            ev.field(r, i, open + 1, members)?;
                        }
                        None => {
                            r.value(open + 1)?;
                        }
                    }
                    r.ws();
                    match r.peek() {
                        Some(b',') => r.pos += 1,
                        Some(b'}') => {
                            r.pos += 1;
                            return Ok(ev);
                        }
                        None => return Err(r.err("EOF while parsing an object")),
                        _ => return Err(r.err("expected `,` or `}`")),
                    }
                }
            }
            Some(b'[') => {
                r.open(open)?;
                r.pos += 1;
                r.ws();
                if r.peek() == Some(b']') {
                    r.pos += 1;
                    return Ok(ev);
                }
                let mut i = 0;
                loop {
                    if i == FIELDS.len() {
                        return Err(r.err("invalid length: an event has 8 fields"));
                    }
                    ev.field(r, i, open + 1, members)?;
                    i += 1;
                    r.ws();
                    match r.peek() {
                        Some(b',') => r.pos += 1,
                        Some(b']') => {
                            r.pos += 1;
                            return Ok(ev);
                        }
                        None => return Err(r.err("EOF while parsing a list")),
                        _ => return Err(r.err("expected `,` or `]`")),
                    }
                }
            }
            None => Err(r.err("EOF while parsing a value")),
            Some(_) => Err(r.err("invalid type: expected a trace event object")),
        }
    }
}
