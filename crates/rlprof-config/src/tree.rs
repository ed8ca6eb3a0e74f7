//! The configuration tree: what YAML files, overrides and composition produce and what
//! resolution reads (OmegaConf's value kinds, insertion-ordered mappings).

use indexmap::IndexMap;
use std::fmt::Write as _;

/// An ordered mapping of string keys (YAML keys of other kinds are written as strings, as
/// `json.dumps` does for OmegaConf's containers).
pub type Map = IndexMap<String, Node>;

/// One value of the tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `null`, `~` or an empty value.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string; `???` (missing) and `${...}` (interpolation) are strings until resolved.
    Str(String),
    /// A list.
    List(Vec<Node>),
    /// A mapping.
    Map(Map),
}

/// The OmegaConf marker of a mandatory value that is not set.
pub const MISSING: &str = "???";

impl Node {
    /// An empty mapping.
    pub fn map() -> Node {
        Node::Map(Map::new())
    }

    /// The mapping, if this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The mapping, mutably, if this is one.
    pub fn as_map_mut(&mut self) -> Option<&mut Map> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value under `key`, if this is a mapping that has it (lists are not indexed; see
    /// [`Node::child`] for that).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map().and_then(|m| m.get(key))
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is one (floats are not integers).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Node::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The integer, if this is one and it is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|i| u64::try_from(i).ok())
    }

    /// The number as a float: a float, or an integer where a float is expected.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Node::Float(f) => Some(*f),
            Node::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The items, if this is a list.
    pub fn as_list(&self) -> Option<&[Node]> {
        match self {
            Node::List(l) => Some(l),
            _ => None,
        }
    }

    /// The value as error messages show it: scalars as YAML writes them (strings quoted, floats
    /// with their shortest round-trip digits: `0.5`, `1e-6`, `.nan`, `.inf`), containers as JSON.
    pub fn show(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool(b) => b.to_string(),
            Node::Int(i) => i.to_string(),
            Node::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) => n.to_string(),
                None if f.is_nan() => ".nan".into(),
                None if *f > 0.0 => ".inf".into(),
                None => "-.inf".into(),
            },
            Node::Str(s) => format!("'{s}'"),
            Node::List(_) | Node::Map(_) => {
                serde_json::to_string(&self.to_json()).unwrap_or_else(|_| "<value>".into())
            }
        }
    }

    /// Whether this is an (unresolved) interpolation string.
    pub fn is_interpolation(&self) -> bool {
        matches!(self, Node::Str(s) if s.contains("${"))
    }

    /// Whether this is the missing marker `???`.
    pub fn is_missing(&self) -> bool {
        matches!(self, Node::Str(s) if s == MISSING)
    }

    /// The child at a dotted path segment list, if any.
    pub fn get_path(&self, path: &[String]) -> Option<&Node> {
        let mut cur = self;
        for seg in path {
            cur = cur.child(seg)?;
        }
        Some(cur)
    }

    /// The child named `key` (a list takes an index).
    pub fn child(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m.get(key),
            Node::List(l) => key.parse::<usize>().ok().and_then(|i| l.get(i)),
            _ => None,
        }
    }

    /// The kind with an article, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a float",
            Node::Str(_) => "a string",
            Node::List(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    /// Python's `str()` of the value, as OmegaConf uses it in string interpolation.
    pub fn python_str(&self) -> String {
        match self {
            Node::Str(s) => s.clone(),
            other => other.python_repr(),
        }
    }

    /// Python's `repr()` of the value (containers as Python prints them).
    pub fn python_repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    /// [`Node::python_repr`] into one buffer (each character is written once, however deep).
    fn write_repr(&self, out: &mut String) {
        match self {
            Node::Null => out.push_str("None"),
            Node::Bool(true) => out.push_str("True"),
            Node::Bool(false) => out.push_str("False"),
            Node::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Node::Float(f) => out.push_str(&python_float(*f)),
            Node::Str(s) => {
                let _ = write!(out, "'{s}'");
            }
            Node::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write_repr(out);
                }
                out.push(']');
            }
            Node::Map(m) => {
                out.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "'{k}': ");
                    v.write_repr(out);
                }
                out.push('}');
            }
        }
    }

    /// How big the value is, measured without recursion (so at any depth).
    pub fn extent(&self) -> Extent {
        let mut e = Extent::default();
        let mut todo: Vec<(&Node, usize)> = vec![(self, 0)];
        while let Some((n, d)) = todo.pop() {
            e.nodes += 1;
            e.depth = e.depth.max(d);
            match n {
                Node::Str(s) => e.bytes += s.len(),
                Node::List(l) => todo.extend(l.iter().map(|v| (v, d + 1))),
                Node::Map(m) => {
                    for (k, v) in m {
                        e.bytes += k.len();
                        todo.push((v, d + 1));
                    }
                }
                _ => {}
            }
        }
        e
    }

    /// The JSON value (`OmegaConf.to_container` then `json.dumps`; non-finite floats as the
    /// strings `inf`, `-inf`, `nan`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Node::Null => J::Null,
            Node::Bool(b) => J::Bool(*b),
            Node::Int(i) => J::from(*i),
            Node::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) => J::Number(n),
                None if f.is_nan() => J::String("nan".into()),
                None if *f > 0.0 => J::String("inf".into()),
                None => J::String("-inf".into()),
            },
            Node::Str(s) => J::String(s.clone()),
            Node::List(l) => J::Array(l.iter().map(Node::to_json).collect()),
            Node::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }
}

/// The size of a value ([`Node::extent`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extent {
    /// Nodes: scalars, lists and mappings.
    pub nodes: usize,
    /// Bytes of its strings and mapping keys.
    pub bytes: usize,
    /// Levels of lists and mappings below it (0 for a scalar or an empty container).
    pub depth: usize,
}

/// `node["key"]`: the value under `key`, or `Null` when this is not a mapping or lacks the key
/// (never panics, so chains like `doc["trainer"]["nnodes"]` read absent keys as `null`).
impl std::ops::Index<&str> for Node {
    type Output = Node;

    fn index(&self, key: &str) -> &Node {
        static NULL: Node = Node::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

/// Python's `repr(float)`: shortest round-trip digits, exponent from 1e16 and below 1e-4.
pub fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = f.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // `{:e}` gives `1e-6`; Python writes `1e-06`.
        let s = format!("{f:e}");
        let (mant, exp) = s.split_once('e').expect("exponent");
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("+", exp),
        };
        format!("{mant}e{sign}{digits:0>2}")
    } else {
        let s = format!("{f:?}");
        if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Node {
        super::super::yaml::parse("a: {n: 3, x: 0.5, b: yes, s: hi, l: [1, 2], neg: -1}").unwrap()
    }

    #[test]
    fn accessors_read_what_the_validators_expect() {
        let d = doc();
        let a = &d["a"];
        assert_eq!(a.get("n").and_then(Node::as_i64), Some(3));
        assert_eq!(a.get("n").and_then(Node::as_u64), Some(3));
        assert_eq!(a.get("neg").and_then(Node::as_u64), None);
        // An integer is read where a float is expected; a float is not an integer.
        assert_eq!(a.get("n").and_then(Node::as_f64), Some(3.0));
        assert_eq!(a.get("x").and_then(Node::as_i64), None);
        assert_eq!(a.get("b").and_then(Node::as_bool), Some(true));
        assert_eq!(a.get("s").and_then(Node::as_str), Some("hi"));
        assert_eq!(
            a.get("l").and_then(Node::as_list).map(<[Node]>::len),
            Some(2)
        );
        // `get` does not index lists (`child` does).
        assert_eq!(a["l"].get("0"), None);
        assert_eq!(a["l"].child("0"), Some(&Node::Int(1)));
    }

    #[test]
    fn indexing_a_missing_key_is_null() {
        let d = doc();
        assert!(d["nope"]["deeper"].is_null());
        assert!(d["a"]["n"]["x"].is_null());
    }
}
