//! The one YAML reader of rlprof: YAML text -> [`Node`], read the way OmegaConf reads it.
//!
//! Built on `yaml-rust2`'s event parser (a maintained pure-Rust YAML parser; `serde_yaml` is
//! deprecated). Plain scalars are typed with YAML 1.1's rules, as PyYAML's `SafeLoader` with
//! OmegaConf's additions does: `yes/no/on/off` are booleans, `100_000` and `0x1F` are integers,
//! `1e-6` (no dot) is a float, timestamps stay strings. Quoted scalars are strings. Duplicate keys
//! are errors, as in OmegaConf. Nesting deeper than [`MAX_DEPTH`] and documents that expand to
//! more than [`MAX_NODES`] nodes through aliases are refused as soon as the limit is reached, so
//! hostile input is rejected in time linear in its length. As PyYAML's reader, a leading byte
//! order mark is skipped and characters YAML does not allow in a stream (NUL and the other
//! control characters but tab and line breaks, `U+FFFE`, `U+FFFF`) are errors with their position.

use regex::Regex;
use std::collections::HashMap;
use std::sync::LazyLock;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::tree::{Map, Node};

/// Deepest nesting of mappings and lists accepted (verl's own files nest 7 deep).
pub const MAX_DEPTH: usize = 256;

/// Most nodes (scalars, lists and mappings) one document may hold once its aliases are expanded
/// (the copies kept for its anchors count as well). An alias copies its anchor's whole subtree,
/// so a few lines of aliases of aliases ("billion laughs") expand to billions of nodes; the count
/// is kept as the document is read and it is refused before the copy that would pass the limit.
/// verl's largest composed config (all its files together) has a few thousand nodes.
pub const MAX_NODES: usize = 500_000;

/// The byte order mark PyYAML skips at the start of a stream.
const BOM: char = '\u{feff}';

/// A YAML problem: message with `line:column` (1-based) of where it was found.
#[derive(Debug, Clone)]
pub struct YamlError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl YamlError {
    fn at(m: &Marker, message: String) -> YamlError {
        YamlError {
            line: m.line(),
            column: m.col() + 1,
            message,
        }
    }

    /// `origin:line:column: YAML syntax error: message (line L column C)`.
    pub fn render(&self, origin: &str) -> String {
        format!(
            "{origin}:{}:{}: YAML syntax error: {} at line {} column {}",
            self.line, self.column, self.message, self.line, self.column
        )
    }
}

/// An open list or mapping: its items so far, its anchor, and the node count before it began.
enum Frame {
    List(Vec<Node>, usize, usize),
    Map(Map, Option<String>, usize, usize),
}

/// Parses one YAML document (an empty document is `Null`).
pub fn parse(text: &str) -> Result<Node, YamlError> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    check_printable(text)?;
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    // Each anchor with the number of nodes its subtree holds (what an alias of it adds).
    let mut anchors: HashMap<usize, (Node, usize)> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut nodes = Count::default();
    loop {
        let (ev, mark) = parser
            .next_token()
            .map_err(|e| YamlError::at(e.marker(), e.info().to_string()))?;
        let done = match ev {
            Event::StreamEnd => true,
            Event::DocumentEnd if root.is_some() => true,
            Event::Scalar(text, style, anchor, tag) => {
                nodes.add(1, &mark)?;
                let node = scalar(&text, style, tag.as_ref().map(|t| t.suffix.as_str()))
                    .map_err(|m| YamlError::at(&mark, m))?;
                push(
                    &mut stack,
                    &mut root,
                    &mut anchors,
                    &mut nodes,
                    (node, 1),
                    anchor,
                    &mark,
                )?
            }
            Event::Alias(id) => {
                let (node, size) = anchors
                    .get(&id)
                    .ok_or_else(|| YamlError::at(&mark, "unknown alias".into()))?;
                // Counted before the copy is made.
                nodes.add(*size, &mark)?;
                let node = (node.clone(), *size);
                push(
                    &mut stack,
                    &mut root,
                    &mut anchors,
                    &mut nodes,
                    node,
                    0,
                    &mark,
                )?
            }
            Event::SequenceStart(anchor, _) => {
                depth_check(&stack, &mark)?;
                let before = nodes.document;
                nodes.add(1, &mark)?;
                stack.push(Frame::List(Vec::new(), anchor, before));
                false
            }
            Event::MappingStart(anchor, _) => {
                depth_check(&stack, &mark)?;
                let before = nodes.document;
                nodes.add(1, &mark)?;
                stack.push(Frame::Map(Map::new(), None, anchor, before));
                false
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, before) = match stack.pop() {
                    Some(Frame::List(l, a, b)) => (Node::List(l), a, b),
                    Some(Frame::Map(m, _, a, b)) => (Node::Map(m), a, b),
                    None => return Err(YamlError::at(&mark, "unbalanced end".into())),
                };
                let size = nodes.document - before;
                push(
                    &mut stack,
                    &mut root,
                    &mut anchors,
                    &mut nodes,
                    (node, size),
                    anchor,
                    &mark,
                )?
            }
            _ => false,
        };
        if done && stack.is_empty() {
            break;
        }
    }
    Ok(root.unwrap_or(Node::Null))
}

/// The nodes a document holds: its own, aliases expanded ([`Count::document`], which gives
/// the size of each subtree), and the copies kept for its anchors; together at most
/// [`MAX_NODES`].
#[derive(Default)]
struct Count {
    document: usize,
    kept: usize,
}

impl Count {
    /// `n` more nodes in the document.
    fn add(&mut self, n: usize, mark: &Marker) -> Result<(), YamlError> {
        self.document = self.document.saturating_add(n);
        self.check(mark)
    }

    /// A copy of `n` nodes kept for an anchor.
    fn keep(&mut self, n: usize, mark: &Marker) -> Result<(), YamlError> {
        self.kept = self.kept.saturating_add(n);
        self.check(mark)
    }

    fn check(&self, mark: &Marker) -> Result<(), YamlError> {
        if self.document.saturating_add(self.kept) > MAX_NODES {
            return Err(YamlError::at(
                mark,
                format!(
                    "more than {MAX_NODES} nodes once aliases are expanded (aliases of aliases?); refusing the document"
                ),
            ));
        }
        Ok(())
    }
}

/// PyYAML's reader: only printable characters, tab and line breaks may appear in a stream
/// (`[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]` is refused).
/// A NUL would otherwise end the document early, silently dropping what follows it.
fn check_printable(text: &str) -> Result<(), YamlError> {
    let ok = |c: char| matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..);
    if text.chars().all(ok) {
        return Ok(());
    }
    let (mut line, mut column) = (1, 1);
    for (position, c) in text.chars().enumerate() {
        if !ok(c) {
            return Err(YamlError {
                line,
                column,
                message: format!(
                    "unacceptable character #x{:04x}: special characters are not allowed (position {position})",
                    u32::from(c)
                ),
            });
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    Ok(())
}

fn depth_check(stack: &[Frame], mark: &Marker) -> Result<(), YamlError> {
    if stack.len() >= MAX_DEPTH {
        return Err(YamlError::at(
            mark,
            format!("nested deeper than {MAX_DEPTH} levels; refusing the document"),
        ));
    }
    Ok(())
}

/// Adds a finished node to the open container (or makes it the root). Returns whether the
/// document is complete.
fn push(
    stack: &mut [Frame],
    root: &mut Option<Node>,
    anchors: &mut HashMap<usize, (Node, usize)>,
    nodes: &mut Count,
    (node, size): (Node, usize),
    anchor: usize,
    mark: &Marker,
) -> Result<bool, YamlError> {
    if anchor != 0 {
        // The anchor's copy is counted too: anchors nested in anchors copy their subtrees again.
        nodes.keep(size, mark)?;
        anchors.insert(anchor, (node.clone(), size));
    }
    match stack.last_mut() {
        None => {
            *root = Some(node);
            Ok(false)
        }
        Some(Frame::List(l, ..)) => {
            l.push(node);
            Ok(false)
        }
        Some(Frame::Map(m, pending, ..)) => {
            match pending.take() {
                None => *pending = Some(key_text(&node, mark)?),
                Some(k) if k == "<<" => merge_key(m, node, mark)?,
                Some(k) => {
                    if m.contains_key(&k) {
                        return Err(YamlError::at(mark, format!("duplicate key '{k}'")));
                    }
                    m.insert(k, node);
                }
            }
            Ok(false)
        }
    }
}

/// YAML's merge key `<<`: the keys of the merged mapping(s) the mapping does not set.
fn merge_key(m: &mut Map, node: Node, mark: &Marker) -> Result<(), YamlError> {
    let sources = match node {
        Node::Map(src) => vec![src],
        Node::List(l) => l
            .into_iter()
            .map(|n| match n {
                Node::Map(src) => Ok(src),
                _ => Err(YamlError::at(mark, "'<<' takes mappings".into())),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(YamlError::at(mark, "'<<' takes a mapping".into())),
    };
    for src in sources {
        for (k, v) in src {
            m.entry(k).or_insert(v);
        }
    }
    Ok(())
}

/// A mapping key as text (`json.dumps` spelling for non-string keys).
fn key_text(node: &Node, mark: &Marker) -> Result<String, YamlError> {
    Ok(match node {
        Node::Str(s) => s.clone(),
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Int(i) => i.to_string(),
        Node::Float(f) => super::tree::python_float(*f),
        _ => {
            return Err(YamlError::at(
                mark,
                "a mapping or list cannot be a key".into(),
            ));
        }
    })
}

static INT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    )
    .expect("int regex")
});

static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)|\.[0-9_]+(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    )
    .expect("float regex")
});

/// Types one scalar.
fn scalar(text: &str, style: TScalarStyle, tag: Option<&str>) -> Result<Node, String> {
    match tag {
        Some("str") => return Ok(Node::Str(text.to_string())),
        Some("int") => return plain_int(text).ok_or_else(|| format!("'{text}' is not an integer")),
        Some("float") => {
            return plain_float(text)
                .or_else(|| {
                    plain_int(text).map(|n| match n {
                        Node::Int(i) => Node::Float(i as f64),
                        other => other,
                    })
                })
                .ok_or_else(|| format!("'{text}' is not a float"));
        }
        Some("bool") => {
            return plain_bool(text)
                .map(Node::Bool)
                .ok_or_else(|| format!("'{text}' is not a boolean"));
        }
        Some("null") => return Ok(Node::Null),
        _ => {}
    }
    if style != TScalarStyle::Plain {
        return Ok(Node::Str(text.to_string()));
    }
    Ok(plain(text))
}

/// Types a plain (unquoted) scalar with YAML 1.1's implicit rules, in PyYAML's order.
pub fn plain(text: &str) -> Node {
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Node::Null;
    }
    if let Some(b) = plain_bool(text) {
        return Node::Bool(b);
    }
    if let Some(f) = plain_float(text) {
        return f;
    }
    if let Some(i) = plain_int(text) {
        return i;
    }
    Node::Str(text.to_string())
}

fn plain_bool(text: &str) -> Option<bool> {
    match text {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

fn sexagesimal(body: &str) -> f64 {
    body.split(':').fold(0.0, |acc, part| {
        acc * 60.0 + part.parse::<f64>().unwrap_or(0.0)
    })
}

fn plain_float(text: &str) -> Option<Node> {
    if !FLOAT.is_match(text) {
        return None;
    }
    let t = text.replace('_', "");
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(&t)),
    };
    let v = match body.to_ascii_lowercase().as_str() {
        ".inf" => f64::INFINITY,
        ".nan" => f64::NAN,
        b if b.contains(':') => sexagesimal(b),
        b => b.parse::<f64>().ok()?,
    };
    Some(Node::Float(if neg { -v } else { v }))
}

fn plain_int(text: &str) -> Option<Node> {
    if !INT.is_match(text) {
        return None;
    }
    let t = text.replace('_', "");
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(&t)),
    };
    let v: i64 = if let Some(b) = body.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if let Some(h) = body.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if body.contains(':') {
        body.split(':')
            .try_fold(0i64, |acc, p| p.parse::<i64>().ok().map(|d| acc * 60 + d))?
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse().ok()?
    };
    Some(Node::Int(if neg { -v } else { v }))
}

/// Hydra's `# @package X` header: leading comment lines of the file.
pub fn package_header(text: &str) -> Option<String> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(c) = line.strip_prefix('#') else {
            break;
        };
        if let Some(rest) = c.trim().strip_prefix("@package") {
            return Some(rest.trim().to_string());
        }
    }
    None
}

/// The tree as block YAML (what `rlprof config show` prints).
pub fn emit(node: &Node) -> String {
    let mut out = String::new();
    emit_into(&mut out, node, 0);
    out
}

fn emit_into(out: &mut String, node: &Node, indent: usize) {
    let pad = " ".repeat(indent);
    match node {
        Node::Map(m) if !m.is_empty() => {
            for (k, v) in m {
                out.push_str(&format!("{pad}{}:", scalar_text(&Node::Str(k.clone()))));
                block_child(out, v, indent);
            }
        }
        Node::List(l) if !l.is_empty() => {
            for v in l {
                out.push_str(&format!("{pad}-"));
                block_child(out, v, indent);
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&scalar_text(other));
            out.push('\n');
        }
    }
}

fn block_child(out: &mut String, v: &Node, indent: usize) {
    match v {
        Node::Map(m) if !m.is_empty() => {
            out.push('\n');
            emit_into(out, v, indent + 2);
        }
        Node::List(l) if !l.is_empty() => {
            out.push('\n');
            emit_into(out, v, indent + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar_text(other));
            out.push('\n');
        }
    }
}

/// One scalar as YAML text; strings that would read back as something else are quoted.
fn scalar_text(node: &Node) -> String {
    match node {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Int(i) => i.to_string(),
        Node::Float(f) if f.is_nan() => ".nan".into(),
        Node::Float(f) if f.is_infinite() => {
            if *f > 0.0 {
                ".inf".into()
            } else {
                "-.inf".into()
            }
        }
        Node::Float(f) => super::tree::python_float(*f),
        Node::Str(s) => {
            let plain_ok = !s.is_empty()
                && matches!(plain(s), Node::Str(_))
                && !s.starts_with(|c: char| " -?:,[]{}#&*!|>'\"%@`".contains(c))
                && !s.ends_with(' ')
                && !s.contains(": ")
                && !s.contains(" #")
                && !s.contains('\n');
            if plain_ok {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', "''"))
            }
        }
        Node::List(_) => "[]".into(),
        Node::Map(_) => "{}".into(),
    }
}
