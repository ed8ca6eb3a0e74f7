//! Typed reading of YAML values with error collection.
//!
//! Every getter treats an absent key, `null` and an interpolation string (`${oc.select:...}`,
//! `${...}`) as "not set" (returns `None`), and records a message that starts with the full YAML
//! path, shows the bad value and names the valid values when the value has the wrong type.

use serde_yaml::{Mapping, Value};
use std::fmt::Display;

use crate::plan::{Content, Level, Tool};

/// The closest candidate to `word`, if one is close enough to be a likely typo.
pub fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(word, c);
        let dist = strsim::damerau_levenshtein(word, c);
        let close = dist <= 2.max(word.len() / 3) || score >= 0.85;
        if close && best.is_none_or(|(_, s)| score > s) {
            best = Some((c, score));
        }
    }
    best.map(|(c, _)| c)
}

/// Whether `v` is an OmegaConf interpolation (treated as "not set / inherit").
pub fn is_interp(v: &Value) -> bool {
    matches!(v, Value::String(s) if s.contains("${"))
}

/// The integer value of `v`. Besides YAML integers this accepts the YAML 1.1 spelling with
/// digit separators (`100_000`, as in verl's own `ppo_trainer.yaml`), which OmegaConf reads as
/// an integer but a YAML 1.2 parser reads as a string.
pub fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let body = s.strip_prefix(['+', '-']).unwrap_or(s);
            let ok = body.starts_with(|c: char| c.is_ascii_digit())
                && body.chars().all(|c| c.is_ascii_digit() || c == '_')
                && body.contains('_');
            if ok {
                s.replace('_', "").parse().ok()
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A short rendering of a YAML value for messages (`'yes'`, `3`, `[1,2]`).
pub fn show(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("'{s}'"),
        Value::Sequence(_) | Value::Mapping(_) => {
            serde_json::to_string(v).unwrap_or_else(|_| "<value>".into())
        }
        Value::Tagged(t) => format!("!{} {}", t.tag, show(&t.value)),
    }
}

/// The kind of a YAML value, with article (`a string`, `an integer`).
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

fn names<T: Copy>(all: &[T], f: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|t| f(*t)).collect()
}

/// Collects configuration problems.
#[derive(Debug, Default)]
pub struct Ctx {
    /// Messages, each starting with a YAML path.
    pub errors: Vec<String>,
}

impl Ctx {
    /// Records `path: msg`.
    pub fn err(&mut self, path: &str, msg: impl Display) {
        self.errors.push(format!("{path}: {msg}"));
    }

    fn wrong(&mut self, path: &str, v: &Value, expected: &str) {
        self.err(
            path,
            format!("{} is {}, expected {expected}", show(v), kind(v)),
        );
    }

    /// The value at `m[key]` unless absent, null or an interpolation.
    pub fn get<'a>(m: &'a Mapping, key: &str) -> Option<&'a Value> {
        m.get(key).filter(|v| !v.is_null() && !is_interp(v))
    }

    /// Reads an optional mapping; absent, null or interpolation -> `None`.
    pub fn map<'a>(&mut self, v: Option<&'a Value>, path: &str) -> Option<&'a Mapping> {
        match v {
            None | Some(Value::Null) => None,
            Some(v) if is_interp(v) => None,
            Some(Value::Mapping(m)) => Some(m),
            Some(v) => {
                self.wrong(path, v, "a mapping of keys");
                None
            }
        }
    }

    /// Reports every key of `m` not in `valid`, with a did-you-mean.
    pub fn check_keys(&mut self, m: &Mapping, path: &str, valid: &[&str]) {
        let list = valid.join(", ");
        for k in m.keys() {
            match k.as_str() {
                Some(s) if valid.contains(&s) => {}
                Some(s) => {
                    let hint = match suggest(s, valid) {
                        Some(c) => format!("did you mean '{c}'? "),
                        None => String::new(),
                    };
                    self.err(
                        &format!("{path}.{s}"),
                        format!("unknown key; {hint}valid keys: {list}"),
                    );
                }
                None => self.err(
                    path,
                    format!("key {} is not a string; valid keys: {list}", show(k)),
                ),
            }
        }
    }

    /// Reads a boolean.
    pub fn bool(&mut self, m: &Mapping, key: &str, path: &str) -> Option<bool> {
        let v = Self::get(m, key)?;
        match v {
            Value::Bool(b) => Some(*b),
            _ => {
                self.wrong(&format!("{path}.{key}"), v, "a boolean (true or false)");
                None
            }
        }
    }

    /// Reads an integer.
    pub fn int(&mut self, m: &Mapping, key: &str, path: &str) -> Option<i64> {
        let v = Self::get(m, key)?;
        match as_int(v) {
            Some(i) => Some(i),
            None => {
                self.wrong(&format!("{path}.{key}"), v, "an integer");
                None
            }
        }
    }

    /// Reads an integer that must be > 0.
    pub fn pos_int(&mut self, m: &Mapping, key: &str, path: &str) -> Option<u64> {
        let v = Self::get(m, key)?;
        match as_int(v) {
            Some(i) if i > 0 => Some(i as u64),
            _ => {
                self.err(
                    &format!("{path}.{key}"),
                    format!("{} is not valid; expected an integer > 0", show(v)),
                );
                None
            }
        }
    }

    /// Reads a size cap: absent/interpolation -> `None` (inherit), `null` -> `Some(None)`
    /// (unlimited), integer > 0 -> `Some(Some(n))`.
    pub fn cap(&mut self, m: &Mapping, key: &str, path: &str) -> Option<Option<u64>> {
        let v = m.get(key)?;
        if is_interp(v) {
            return None;
        }
        match v {
            Value::Null => Some(None),
            _ => match as_int(v) {
                Some(i) if i > 0 => Some(Some(i as u64)),
                _ => {
                    self.err(
                        &format!("{path}.{key}"),
                        format!(
                            "{} is not valid; expected an integer > 0, or null for no limit",
                            show(v)
                        ),
                    );
                    None
                }
            },
        }
    }

    /// Reads a string.
    pub fn string(&mut self, m: &Mapping, key: &str, path: &str) -> Option<String> {
        let v = Self::get(m, key)?;
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.wrong(&format!("{path}.{key}"), v, "a string");
                None
            }
        }
    }

    /// Reads a tool name.
    pub fn tool(&mut self, m: &Mapping, key: &str, path: &str) -> Option<Tool> {
        let s = self.string(m, key, path)?;
        let valid = names(&Tool::ALL, Tool::as_str);
        match Tool::parse(&s) {
            Some(t) => Some(t),
            None => {
                self.not_one_of(&format!("{path}.{key}"), &s, &valid);
                None
            }
        }
    }

    /// Reads an npu level name.
    pub fn level(&mut self, m: &Mapping, key: &str, path: &str) -> Option<Level> {
        let s = self.string(m, key, path)?;
        let valid = names(&Level::ALL, Level::as_str);
        match Level::parse(&s) {
            Some(l) => Some(l),
            None => {
                self.not_one_of(&format!("{path}.{key}"), &s, &valid);
                None
            }
        }
    }

    fn not_one_of(&mut self, path: &str, s: &str, valid: &[&str]) {
        let hint = match suggest(s, valid) {
            Some(c) => format!("; did you mean '{c}'?"),
            None => String::new(),
        };
        self.err(
            path,
            format!("'{s}' is not one of {}{hint}", valid.join(", ")),
        );
    }

    /// Reads a `contents` list valid for `tool`.
    pub fn contents(
        &mut self,
        m: &Mapping,
        key: &str,
        path: &str,
        tool: Tool,
    ) -> Option<Vec<Content>> {
        let v = Self::get(m, key)?;
        let path = format!("{path}.{key}");
        let valid = names(Content::valid_for(tool), Content::as_str);
        let Value::Sequence(seq) = v else {
            self.wrong(
                &path,
                v,
                &format!("a list drawn from {}, e.g. [npu, cpu]", valid.join(", ")),
            );
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in seq.iter().enumerate() {
            let ipath = format!("{path}[{i}]");
            let Some(s) = item.as_str() else {
                self.wrong(
                    &ipath,
                    item,
                    &format!("a content name, one of {}", valid.join(", ")),
                );
                ok = false;
                continue;
            };
            match Content::parse(s) {
                Some(c) if Content::valid_for(tool).contains(&c) => out.push(c),
                Some(_) => {
                    self.err(
                        &ipath,
                        format!(
                            "'{s}' is not valid for the {} tool; valid contents: {}",
                            tool.as_str(),
                            valid.join(", ")
                        ),
                    );
                    ok = false;
                }
                None => {
                    self.not_one_of(&ipath, s, &valid);
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}
