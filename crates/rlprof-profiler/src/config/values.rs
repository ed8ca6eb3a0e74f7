//! Typed reading of YAML values with error collection.
//!
//! Every getter treats an absent key, `null` and an interpolation string (`${oc.select:...}`,
//! `${...}`) as "not set" (returns `None`), and records a message that starts with the full YAML
//! path, shows the bad value and names the valid values when the value has the wrong type.

use std::fmt::Display;

use super::tree::{Map, Node};
use crate::plan::{Content, ExportType, Level, Tool};

/// The closest candidate to `word`, if one is close enough to be a likely typo.
pub(super) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
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
pub(super) fn is_interp(v: &Node) -> bool {
    v.is_interpolation()
}

/// The integer value of `v`. Besides YAML integers this accepts a string spelling of one with
/// digit separators (`'100_000'`; the reader types the plain `100_000` of verl's own
/// `ppo_trainer.yaml` as an integer already, as OmegaConf does).
pub(super) fn as_int(v: &Node) -> Option<i64> {
    match v {
        Node::Int(i) => Some(*i),
        Node::Str(s) => {
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

/// The kind of a YAML value, with article (`a string`, `an integer`).
pub(super) fn kind(v: &Node) -> &'static str {
    v.kind()
}

fn names<T: Copy>(all: &[T], f: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|t| f(*t)).collect()
}

/// Collects configuration problems.
#[derive(Debug, Default)]
pub(super) struct Ctx {
    /// Messages, each starting with a YAML path.
    pub errors: Vec<String>,
}

impl Ctx {
    /// Records `path: msg`.
    pub(super) fn err(&mut self, path: &str, msg: impl Display) {
        self.errors.push(format!("{path}: {msg}"));
    }

    fn wrong(&mut self, path: &str, v: &Node, expected: &str) {
        self.err(
            path,
            format!("{} is {}, expected {expected}", v.show(), kind(v)),
        );
    }

    /// The value at `m[key]` unless absent, null or an interpolation.
    pub(super) fn get<'a>(m: &'a Map, key: &str) -> Option<&'a Node> {
        m.get(key).filter(|v| !v.is_null() && !is_interp(v))
    }

    /// Reads an optional mapping; absent, null or interpolation -> `None`.
    pub(super) fn map<'a>(&mut self, v: Option<&'a Node>, path: &str) -> Option<&'a Map> {
        match v {
            None | Some(Node::Null) => None,
            Some(v) if is_interp(v) => None,
            Some(Node::Map(m)) => Some(m),
            Some(v) => {
                self.wrong(path, v, "a mapping of keys");
                None
            }
        }
    }

    /// Reports every key of `m` not in `valid`, with a did-you-mean.
    pub(super) fn check_keys(&mut self, m: &Map, path: &str, valid: &[&str]) {
        let list = valid.join(", ");
        for s in m.keys().filter(|k| !valid.contains(&k.as_str())) {
            let hint = match suggest(s, valid) {
                Some(c) => format!("did you mean '{c}'? "),
                None => String::new(),
            };
            self.err(
                &format!("{path}.{s}"),
                format!("unknown key; {hint}valid keys: {list}"),
            );
        }
    }

    /// Reads a boolean.
    pub(super) fn bool(&mut self, m: &Map, key: &str, path: &str) -> Option<bool> {
        let v = Self::get(m, key)?;
        match v {
            Node::Bool(b) => Some(*b),
            _ => {
                self.wrong(&format!("{path}.{key}"), v, "a boolean (true or false)");
                None
            }
        }
    }

    /// Reads an integer.
    pub(super) fn int(&mut self, m: &Map, key: &str, path: &str) -> Option<i64> {
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
    pub(super) fn pos_int(&mut self, m: &Map, key: &str, path: &str) -> Option<u64> {
        let v = Self::get(m, key)?;
        match as_int(v) {
            Some(i) if i > 0 => Some(i as u64),
            _ => {
                self.err(
                    &format!("{path}.{key}"),
                    format!("{} is not valid; expected an integer > 0", v.show()),
                );
                None
            }
        }
    }

    /// Reads a size cap: absent/interpolation -> `None` (inherit), `null` -> `Some(None)`
    /// (unlimited), integer > 0 -> `Some(Some(n))`.
    pub(super) fn cap(&mut self, m: &Map, key: &str, path: &str) -> Option<Option<u64>> {
        let v = m.get(key)?;
        if is_interp(v) {
            return None;
        }
        match v {
            Node::Null => Some(None),
            _ => match as_int(v) {
                Some(i) if i > 0 => Some(Some(i as u64)),
                _ => {
                    self.err(
                        &format!("{path}.{key}"),
                        format!(
                            "{} is not valid; expected an integer > 0, or null for no limit",
                            v.show()
                        ),
                    );
                    None
                }
            },
        }
    }

    /// Reads a string.
    pub(super) fn string(&mut self, m: &Map, key: &str, path: &str) -> Option<String> {
        let v = Self::get(m, key)?;
        match v {
            Node::Str(s) => Some(s.clone()),
            _ => {
                self.wrong(&format!("{path}.{key}"), v, "a string");
                None
            }
        }
    }

    /// Reads a tool name.
    pub(super) fn tool(&mut self, m: &Map, key: &str, path: &str) -> Option<Tool> {
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
    pub(super) fn level(&mut self, m: &Map, key: &str, path: &str) -> Option<Level> {
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

    /// Reads an npu export type (`db` or `text`).
    pub(super) fn export_type(&mut self, m: &Map, key: &str, path: &str) -> Option<ExportType> {
        let s = self.string(m, key, path)?;
        let valid = names(&ExportType::ALL, ExportType::as_str);
        let parsed = ExportType::parse(&s);
        if parsed.is_none() {
            self.not_one_of(&format!("{path}.{key}"), &s, &valid);
        }
        parsed
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
    pub(super) fn contents(
        &mut self,
        m: &Map,
        key: &str,
        path: &str,
        tool: Tool,
    ) -> Option<Vec<Content>> {
        let v = Self::get(m, key)?;
        let path = format!("{path}.{key}");
        let valid = names(Content::valid_for(tool), Content::as_str);
        let Node::List(seq) = v else {
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
