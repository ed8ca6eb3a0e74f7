//! The details the report shows for an event (shapes, dtypes, bytes, stream, correlation), decoded
//! from the raw `args` text only when shown, clipped to [`MAX_ARGS_TEXT`](super::MAX_ARGS_TEXT).

use super::MAX_ARGS_TEXT;
use super::event::{Cache, Members, compact_cached};
use crate::json_reader::{self as json, Reader};
use crate::model::{Detail, Track};

/// [`detail_of`] on a parsed value (the reference the raw-text path is tested against).
#[cfg(test)]
pub(super) fn detail_of_value(track: Track, args: serde_json::Value) -> Detail {
    let serde_json::Value::Object(mut m) = args else {
        return Detail {
            args: Some(clip(value_text_of(&args))),
            ..Detail::default()
        };
    };
    let mut take = |k: &str| m.remove(k).map(|v| clip(value_text_of(&v)));
    let mut d = Detail {
        shapes: take("Input Dims"),
        dtypes: take("Input type"),
        stack: take("Call stack"),
        module: take("Module Hierarchy"),
        ..Detail::default()
    };
    if track == Track::Comm {
        let n = m.get("In msg nelems").and_then(value_i64_of);
        let out = m.get("Out msg nelems").and_then(value_i64_of);
        let size = m
            .get("dtype")
            .map(value_text_of)
            .and_then(|t| dtype_size(&t));
        d.bytes = n.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        d.out_bytes = out.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        d.group_size = m
            .get("Group size")
            .and_then(value_i64_of)
            .and_then(|g| u32::try_from(g).ok());
        d.group = m.get("Process Group Name").map(value_text_of);
    }
    if !m.is_empty() {
        d.args = Some(clip(serde_json::Value::Object(m).to_string()));
    }
    d
}

/// [`detail_of`] with scratch space of its own: decodes a raw detail
/// ([`crate::model::RawDetails`]) when it is shown.
pub(super) fn detail_of_text(track: Track, args: &str) -> Detail {
    detail_of(track, args, &mut Members::new(), &mut Cache::default())
}

/// The detail of an event from its raw `args` text: the shown keys decoded, the rest kept as
/// compact JSON text with sorted keys (what serde_json's map gives), each clipped to
/// [`MAX_ARGS_TEXT`]. `members` is scratch space.
pub(super) fn detail_of<'a>(
    track: Track,
    args: &'a str,
    members: &mut Members<'a>,
    cache: &mut Cache<'a>,
) -> Detail {
    if !args.starts_with('{') {
        return Detail {
            args: Some(clip(json::value_text(args).into_owned())),
            ..Detail::default()
        };
    }
    members.clear();
    if Reader::new(args, 0)
        .members(|k, v| members.push((k.text(), v)))
        .is_err()
    {
        // Not reached: the text was validated by the same reader when the event was read.
        debug_assert!(false, "validated args did not re-read: {args}");
        return Detail::default();
    }
    detail_from_members(track, args.len(), members, cache)
}

/// [`detail_of`] on the members of an `args` object (`len`: its text's length).
pub(super) fn detail_from_members<'a>(
    track: Track,
    len: usize,
    members: &mut Members<'a>,
    cache: &mut Cache<'a>,
) -> Detail {
    if cache.len() > 4096 {
        cache.clear();
    }
    if !members.is_sorted_by(|a, b| a.0 <= b.0) {
        members.sort_by(|a, b| a.0.cmp(&b.0));
    }
    // Of equal keys the last one written wins, as in a map.
    members.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
    let mut d = Detail::default();
    let (mut nelems, mut dtype, mut group) = (None, None, None);
    let (mut out_nelems, mut group_size) = (None, None);
    let mut taken = 0;
    for (k, v) in members.iter() {
        let slot = match k.as_ref() {
            "Input Dims" => &mut d.shapes,
            "Input type" => &mut d.dtypes,
            "Call stack" => &mut d.stack,
            "Module Hierarchy" => &mut d.module,
            "In msg nelems" => {
                nelems = Some(*v);
                continue;
            }
            "Out msg nelems" => {
                out_nelems = Some(*v);
                continue;
            }
            "Group size" => {
                group_size = Some(*v);
                continue;
            }
            "dtype" => {
                dtype = Some(*v);
                continue;
            }
            "Process Group Name" => {
                group = Some(*v);
                continue;
            }
            _ => continue,
        };
        *slot = Some(clip(if v.starts_with('[') {
            compact_cached(v, cache).to_string()
        } else {
            json::value_text(v).into_owned()
        }));
        taken += 1;
    }
    if track == Track::Comm {
        let n = nelems.and_then(json::value_i64);
        let size = dtype.map(json::value_text).and_then(|t| dtype_size(&t));
        d.bytes = n.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        let out = out_nelems.and_then(json::value_i64);
        d.out_bytes = out.zip(size).map(|(n, s)| n.max(0) as u64 * s);
        d.group_size = group_size
            .and_then(json::value_i64)
            .and_then(|g| u32::try_from(g).ok());
        d.group = group.map(|v| json::value_text(v).into_owned());
    }
    if members.len() > taken {
        let mut s = String::with_capacity(len);
        s.push('{');
        for (k, v) in members.iter() {
            if matches!(
                k.as_ref(),
                "Input Dims" | "Input type" | "Call stack" | "Module Hierarchy"
            ) {
                continue;
            }
            if s.len() > 1 {
                s.push(',');
            }
            if k.bytes().any(|c| c == b'"' || c == b'\\' || c < 0x20) {
                s.push_str(&serde_json::Value::from(k.as_ref()).to_string());
            } else {
                s.push('"');
                s.push_str(k);
                s.push('"');
            }
            s.push(':');
            if v.starts_with('[') {
                s.push_str(compact_cached(v, cache));
            } else {
                json::compact(v, &mut s);
            }
        }
        s.push('}');
        d.args = Some(clip(s));
    }
    d
}

pub(super) fn dtype_size(t: &str) -> Option<u64> {
    Some(match t {
        "Float" | "Int" | "float32" | "int32" => 4,
        "Half" | "BFloat16" | "Short" | "float16" | "bfloat16" => 2,
        "Double" | "Long" | "float64" | "int64" => 8,
        "Byte" | "Char" | "Bool" | "uint8" | "int8" => 1,
        _ => return None,
    })
}

pub(super) fn clip(mut s: String) -> String {
    if s.len() > MAX_ARGS_TEXT {
        let mut cut = MAX_ARGS_TEXT;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("… (truncated)");
    }
    s
}

#[cfg(test)]
pub(super) fn value_text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
pub(super) fn value_i64_of(v: &serde_json::Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}
