//! Config-value overrides applied to the composed tree, with Hydra's rules:
//! - `a.b.c=value` sets an existing key (a mapping value merges into a mapping); a missing key is
//!   an error that suggests `+a.b.c=value`. Keys of the profiler schema (`global_profiler.*`,
//!   `<role>.profiler.*`, `trainer.nnodes`, `trainer.n_gpus_per_node`) count as existing even
//!   when the file does not write them, as they do in verl's full `ppo_trainer.yaml`.
//! - `+a.b.c=value` adds a key (creating intermediate maps); an existing non-null key is an error,
//!   except for a dict or list value, which merges into it (Hydra 1.2+).
//! - `++a.b.c=value` sets the key either way.
//! - `~a.b.c` removes a key; `~a.b.c=value` only when it holds that value.

use super::grammar::{Kind, Override};
use super::merge::merge;
use super::tree::{Map, Node};
use crate::profile_plan::schema;
use crate::typed::suggest;

/// Applies one value override to `doc`.
pub(super) fn apply(doc: &mut Node, ov: &Override) -> Result<(), String> {
    let segments: Vec<&str> = ov.key.split('.').collect();
    let key = ov.key.as_str();
    let text = ov.text.as_str();
    if !matches!(doc, Node::Map(_)) {
        *doc = Node::map();
    }
    let mut cur = doc;
    let (last, parents) = segments.split_last().expect("non-empty key");
    for (i, seg) in parents.iter().enumerate() {
        let here = segments[..i].join(".");
        let map = match cur {
            Node::Map(m) => m,
            _ => return Err(not_a_map(&here)),
        };
        let absent = map.get(*seg).is_none_or(|v| matches!(v, Node::Null));
        if absent {
            match ov.kind {
                Kind::Add | Kind::ForceAdd => {
                    map.insert((*seg).to_string(), Node::map());
                }
                Kind::Change if schema::knows(&segments[..=i]) => {
                    map.insert((*seg).to_string(), Node::map());
                }
                Kind::Change | Kind::Delete => {
                    return Err(missing(map, &segments[..=i], ov.kind, text));
                }
            }
        }
        cur = map.get_mut(*seg).expect("present");
    }
    let map: &mut Map = match cur {
        Node::Map(m) => m,
        _ => return Err(not_a_map(&parents.join("."))),
    };
    let value = ov.value.clone();
    match ov.kind {
        Kind::Change => {
            if !map.contains_key(*last) && !schema::knows(&segments) {
                return Err(missing(map, &segments, ov.kind, text));
            }
            set(map, last, value.expect("value"));
        }
        Kind::Add => {
            // Hydra merges a dict or list value into an existing key even with a single `+`.
            let container = matches!(value, Some(Node::Map(_) | Node::List(_)));
            if !container && map.get(*last).is_some_and(|v| !matches!(v, Node::Null)) {
                let rest = &text[1..];
                return Err(format!(
                    "key '{key}' already exists; to change it write '{rest}' (or '+{text}' to set it either way)"
                ));
            }
            set(map, last, value.expect("value"));
        }
        Kind::ForceAdd => set(map, last, value.expect("value")),
        Kind::Delete => {
            // Hydra: a null value counts as absent (`OmegaConf.select` returns None).
            let Some(existing) = map.get(*last).filter(|v| !matches!(v, Node::Null)) else {
                return Err(missing(map, &segments, ov.kind, text));
            };
            if let Some(v) = &value
                && v != existing
                && !(matches!(v, Node::Str(s) if s.is_empty()))
            {
                return Err(format!(
                    "the value of '{key}' is {}, not {}; nothing removed",
                    existing.python_repr(),
                    v.python_repr()
                ));
            }
            map.shift_remove(*last);
        }
    }
    Ok(())
}

/// `OmegaConf.update(..., merge=True)`: a mapping merges into a mapping, anything else replaces.
fn set(map: &mut Map, key: &str, value: Node) {
    match map.get_mut(key) {
        Some(existing @ Node::Map(_)) if matches!(value, Node::Map(_)) => merge(existing, value),
        _ => {
            map.insert(key.to_string(), value);
        }
    }
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
    let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
    keys.extend(schema::keys_under(&segments[..segments.len() - 1]));
    let hint = match suggest(last, &keys) {
        Some(s) => format!(" did you mean '{s}'?"),
        None => String::new(),
    };
    match kind {
        Kind::Delete => format!("key '{path}' does not exist, nothing to remove;{hint}"),
        _ => format!("key '{path}' does not exist;{hint} to add a new key write '+{text}'"),
    }
}
