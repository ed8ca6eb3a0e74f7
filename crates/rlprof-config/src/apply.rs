//! Config-value overrides applied to the composed tree, as Hydra 1.3 applies them with
//! `OmegaConf.update(cfg, key, value, merge=True)` on a config in struct mode:
//! - `a.b.c=value` sets an existing key; a missing key is an error that suggests `+a.b.c=value`
//!   (struct mode: every key must be in the composed YAML, rlprof's own keys included). A mapping
//!   value merges into a mapping, and may only name keys the mapping has. A list item is
//!   addressed by its index (`betas.0=0.8`).
//! - `+a.b.c=value` adds a key (creating intermediate maps, replacing a non-mapping on the way);
//!   an existing non-null key is an error, except for a dict or list value, which merges into it.
//! - `++a.b.c=value` sets the key either way.
//! - `~a.b.c` removes a key; `~a.b.c=value` only when it holds that value.
//!
//! A dict merged into a list, or a list into a mapping, is refused (OmegaConf cannot merge them).

use super::grammar::{Kind, Override};
use super::merge::merge;
use super::tree::{Map, Node};
use crate::profile_plan::schema;
use crate::typed::suggest;

/// An index into a list, as OmegaConf reads a key segment of a list (`0`, `12`).
fn index(seg: &str, len: usize) -> Option<usize> {
    seg.parse::<usize>().ok().filter(|i| *i < len)
}

/// Applies one value override to `doc`.
pub(super) fn apply(doc: &mut Node, ov: &Override) -> Result<(), String> {
    let segments: Vec<&str> = ov.key.split('.').collect();
    let key = ov.key.as_str();
    let text = ov.text.as_str();
    if !matches!(doc, Node::Map(_)) {
        *doc = Node::map();
    }
    let force = matches!(ov.kind, Kind::Add | Kind::ForceAdd);
    let mut cur = doc;
    let (last, parents) = segments.split_last().expect("non-empty key");
    for (i, seg) in parents.iter().enumerate() {
        let here = segments[..i].join(".");
        if let Node::List(l) = cur {
            let Some(j) = index(seg, l.len()) else {
                return Err(format!(
                    "'{here}' is a list of {} items; '{seg}' is not an index of it",
                    l.len()
                ));
            };
            cur = &mut l[j];
            continue;
        }
        let map = match cur {
            Node::Map(m) => m,
            _ => return Err(not_a_map(&here)),
        };
        let absent = map.get(*seg).is_none_or(|v| matches!(v, Node::Null));
        let scalar = map
            .get(*seg)
            .is_some_and(|v| !matches!(v, Node::Map(_) | Node::List(_) | Node::Null));
        if absent || (force && scalar) {
            if force {
                map.insert((*seg).to_string(), Node::map());
            } else if absent {
                return Err(missing(map, &segments[..=i], ov.kind, text));
            }
        }
        cur = map.get_mut(*seg).expect("present");
    }
    let value = ov.value.clone();
    if let Node::List(l) = cur {
        let here = parents.join(".");
        let Some(j) = index(last, l.len()) else {
            return Err(format!(
                "'{here}' is a list of {} items; '{last}' is not an index of it",
                l.len()
            ));
        };
        return match ov.kind {
            Kind::Delete => Err(format!(
                "'{key}' is an item of a list; items cannot be removed with '~'"
            )),
            Kind::Add if !matches!(l[j], Node::Null) => Err(already(key, text)),
            _ => put(&mut l[j], value.expect("value"), key, text, false),
        };
    }
    let map: &mut Map = match cur {
        Node::Map(m) => m,
        _ => return Err(not_a_map(&parents.join("."))),
    };
    match ov.kind {
        Kind::Change => {
            let Some(existing) = map.get_mut(*last) else {
                return Err(missing(map, &segments, ov.kind, text));
            };
            put(existing, value.expect("value"), key, text, true)?;
        }
        Kind::Add | Kind::ForceAdd => {
            // Hydra merges a dict or list value into an existing key even with a single `+`.
            let v = value.expect("value");
            let container = matches!(v, Node::Map(_) | Node::List(_));
            match map.get_mut(*last) {
                Some(Node::Null) | None => {
                    map.insert((*last).to_string(), v);
                }
                Some(existing) if container || ov.kind == Kind::ForceAdd => {
                    put(existing, v, key, text, false)?;
                }
                Some(_) => return Err(already(key, text)),
            }
        }
        Kind::Delete => {
            // Hydra: a null value counts as absent (`OmegaConf.select` returns None).
            let Some(existing) = map.get(*last).filter(|v| !matches!(v, Node::Null)) else {
                return Err(missing(map, &segments, ov.kind, text));
            };
            if let Some(v) = &value
                && !py_eq(v, existing)
            {
                return Err(format!(
                    "could not delete from config: the value of '{key}' is {}, not {}",
                    existing.python_repr(),
                    v.python_repr()
                ));
            }
            map.shift_remove(*last);
        }
    }
    Ok(())
}

/// Python's `==` of two values (`1 == 1.0 == True`).
fn py_eq(a: &Node, b: &Node) -> bool {
    let num = |n: &Node| match n {
        Node::Bool(x) => Some(f64::from(u8::from(*x))),
        Node::Int(i) => Some(*i as f64),
        Node::Float(f) => Some(*f),
        _ => None,
    };
    match (a, b) {
        (Node::List(x), Node::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Node::Map(x), Node::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

fn already(key: &str, text: &str) -> String {
    let rest = text.trim_start_matches('+');
    format!(
        "could not append to config: an item is already at '{key}'; either remove the + prefix ('{rest}') or add a second + to add or override it ('++{rest}')"
    )
}

/// `OmegaConf.update(..., merge=True)` of `value` into `existing`: a mapping merges into a
/// mapping (in struct mode, `strict`, only into keys it has), a list replaces a list, a scalar
/// replaces anything; a mapping into a list or a list into a mapping cannot merge.
fn put(
    existing: &mut Node,
    value: Node,
    key: &str,
    text: &str,
    strict: bool,
) -> Result<(), String> {
    match (&*existing, &value) {
        (Node::Map(_), Node::List(_)) | (Node::List(_), Node::Map(_)) => Err(format!(
            "error merging override: '{key}' is {} and the value is {}; they cannot merge",
            existing.kind(),
            value.kind()
        )),
        (Node::Map(m), Node::Map(v)) => {
            if strict && let Some(p) = unknown_key(m, v, key) {
                let rest = text.trim_start_matches('+');
                return Err(format!(
                    "could not override '{key}': '{p}' is not a key of the config (struct mode); to add keys write '+{rest}'"
                ));
            }
            merge(existing, value);
            Ok(())
        }
        _ => {
            *existing = value;
            Ok(())
        }
    }
}

/// The first key of `value` (a path under `at`) that `dest` lacks, recursively into mappings.
fn unknown_key(dest: &Map, value: &Map, at: &str) -> Option<String> {
    for (k, v) in value {
        let p = format!("{at}.{k}");
        match (dest.get(k), v) {
            (None, _) => return Some(p),
            (Some(Node::Map(d)), Node::Map(s)) => {
                if let Some(x) = unknown_key(d, s, &p) {
                    return Some(x);
                }
            }
            _ => {}
        }
    }
    None
}

fn not_a_map(path: &str) -> String {
    if path.is_empty() {
        "the document is not a mapping".to_string()
    } else {
        format!("'{path}' is not a mapping, so it has no sub-keys")
    }
}

fn missing(map: &Map, segments: &[&str], kind: Kind, text: &str) -> String {
    let path = segments.join(".");
    let last = segments.last().copied().unwrap_or("");
    let schema_keys = schema::keys_under(&segments[..segments.len() - 1]);
    let rlprof_key = if schema_keys.contains(&last) && kind != Kind::Delete {
        " (a profiler key this config does not write: keys absent from the YAML need '+')"
    } else {
        ""
    };
    let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
    keys.extend(schema_keys.iter().filter(|k| **k != last));
    let hint = match suggest(last, &keys) {
        Some(s) if rlprof_key.is_empty() => format!(" did you mean '{s}'?"),
        _ => String::new(),
    };
    match kind {
        Kind::Delete => format!("key '{path}' does not exist, nothing to remove;{hint}"),
        _ => format!(
            "key '{path}' does not exist{rlprof_key};{hint} to add a new key write '+{}'",
            text.trim_start_matches('+')
        ),
    }
}
