//! Hydra-style command-line overrides applied on top of a YAML document.
//!
//! Forms (as in Hydra):
//! - `a.b.c=value` sets an existing key; a missing key is an error that suggests `+a.b.c=value`.
//!   Keys of the profiler schema (`global_profiler.*`, `<role>.profiler.*`, `trainer.nnodes`,
//!   `trainer.n_gpus_per_node`) count as existing even when the file does not write them, as they
//!   do in verl's full `ppo_trainer.yaml`.
//! - `+a.b.c=value` adds a new key (creating intermediate maps); an existing key is an error.
//! - `++a.b.c=value` sets the key whether or not it exists.
//! - `~a.b.c` (or `~a.b.c=value`) removes a key.
//!
//! Values are parsed like Hydra does: `null`, `true`/`True`/`false`/`False`, ints, floats, lists
//! (`[1,2,5]`, nested), quoted strings and bare strings.

use serde_yaml::{Mapping, Value};

use super::schema;
use super::values::suggest;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Set,
    Add,
    Force,
    Delete,
}

/// Parses the value part of an override (`[1,2,5]`, `True`, `null`, `'quoted'`, `bare`).
pub fn parse_value(text: &str) -> Result<Value, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(Value::String(String::new()));
    }
    // serde_yaml reads `True`/`False`/`TRUE`/`FALSE` as booleans, as Hydra does; quoted
    // `'True'` stays a string.
    match serde_yaml::from_str::<Value>(t) {
        Ok(v) => Ok(v),
        Err(e) => {
            // A bare string that YAML cannot read as a flow value (e.g. `a: b`) stays a string,
            // but an unbalanced list or quote is an error.
            let first = t.chars().next().unwrap_or(' ');
            if matches!(first, '[' | '{' | '\'' | '"') {
                Err(format!("cannot parse value '{t}': {e}"))
            } else {
                Ok(Value::String(t.to_string()))
            }
        }
    }
}

/// Applies every override to `doc`, collecting all problems.
pub fn apply_overrides(doc: &mut Value, overrides: &[String]) -> Vec<String> {
    let mut errors = Vec::new();
    for ov in overrides {
        if let Err(e) = apply_one(doc, ov) {
            errors.push(format!("override '{ov}': {e}"));
        }
    }
    errors
}

fn apply_one(doc: &mut Value, ov: &str) -> Result<(), String> {
    let (mode, rest) = if let Some(r) = ov.strip_prefix("++") {
        (Mode::Force, r)
    } else if let Some(r) = ov.strip_prefix('+') {
        (Mode::Add, r)
    } else if let Some(r) = ov.strip_prefix('~') {
        (Mode::Delete, r)
    } else {
        (Mode::Set, ov)
    };
    let (key, value_text) = match rest.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v)),
        None if mode == Mode::Delete => (rest.trim(), None),
        None => {
            return Err(format!(
                "missing '='; write key=value, e.g. '{}=value' (or '+{}=value' to add a new key)",
                rest.trim(),
                rest.trim()
            ))
        }
    };
    if key.is_empty() || key.split('.').any(|s| s.is_empty()) {
        return Err(format!("'{key}' is not a valid key path (expected a.b.c)"));
    }
    let segments: Vec<&str> = key.split('.').collect();
    let value = match value_text {
        Some(t) if mode != Mode::Delete => Some(parse_value(t)?),
        _ => None,
    };

    if doc.is_null() {
        *doc = Value::Mapping(Mapping::new());
    }
    let mut cur = doc;
    let (last, parents) = segments.split_last().expect("non-empty");
    for (i, seg) in parents.iter().enumerate() {
        let here = segments[..i].join(".");
        let map = match cur {
            Value::Mapping(m) => m,
            _ => return Err(not_a_map(&here)),
        };
        let k = Value::String((*seg).to_string());
        if !map.contains_key(&k) || map.get(&k).is_some_and(|v| v.is_null()) {
            match mode {
                Mode::Add | Mode::Force => {
                    map.insert(k.clone(), Value::Mapping(Mapping::new()));
                }
                Mode::Set if schema::knows(&segments[..=i]) => {
                    map.insert(k.clone(), Value::Mapping(Mapping::new()));
                }
                Mode::Set | Mode::Delete => {
                    return Err(missing(map, &segments[..=i], mode, ov));
                }
            }
        }
        cur = map.get_mut(&k).expect("present");
    }
    let parent_path = parents.join(".");
    let map = match cur {
        Value::Mapping(m) => m,
        _ => return Err(not_a_map(&parent_path)),
    };
    let k = Value::String((*last).to_string());
    let exists = map.contains_key(&k);
    match mode {
        Mode::Set => {
            if !exists && !schema::knows(&segments) {
                return Err(missing(map, &segments, mode, ov));
            }
            map.insert(k, value.expect("value"));
        }
        Mode::Add => {
            if exists {
                return Err(format!(
                    "key '{key}' already exists; to change it write '{}' (or '+{}' to set it either way)",
                    &ov[1..],
                    ov
                ));
            }
            map.insert(k, value.expect("value"));
        }
        Mode::Force => {
            map.insert(k, value.expect("value"));
        }
        Mode::Delete => {
            if map.remove(&k).is_none() {
                return Err(missing(map, &segments, mode, ov));
            }
        }
    }
    Ok(())
}

fn not_a_map(path: &str) -> String {
    if path.is_empty() {
        "the document is not a mapping".to_string()
    } else {
        format!("'{path}' is not a mapping, so it has no sub-keys")
    }
}

fn missing(map: &Mapping, segments: &[&str], mode: Mode, ov: &str) -> String {
    let path = segments.join(".");
    let last = segments.last().copied().unwrap_or("");
    let mut keys: Vec<&str> = map.keys().filter_map(|k| k.as_str()).collect();
    keys.extend(schema::keys_under(&segments[..segments.len() - 1]));
    let hint = match suggest(last, &keys) {
        Some(s) => format!(" did you mean '{s}'?"),
        None => String::new(),
    };
    match mode {
        Mode::Delete => format!("key '{path}' does not exist, nothing to remove;{hint}"),
        _ => format!("key '{path}' does not exist;{hint} to add a new key write '+{ov}'"),
    }
}
