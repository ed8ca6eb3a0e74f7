//! OmegaConf's interpolation, on the whole composed tree (what `to_container(resolve=True)`
//! does): `${a.b}`, relative `${.x}` / `${..x}`, string interpolation `"${a}/b"`, the resolvers
//! `oc.select`, `oc.env` and `oc.decode`, `\${` escapes. A value that refers to `???` or to a key
//! that does not exist, a cycle (shown as its chain of paths) and an unknown resolver are errors,
//! all reported together, each with the path of the value that holds the interpolation. `???`
//! itself stays in the tree: it is an error only where a reader needs the value.

use std::collections::HashMap;

use super::grammar;
use super::tree::{Map, Node};

/// Resolves every interpolation of `root`.
pub(super) fn resolve_all(root: &Node) -> Result<Node, Vec<String>> {
    let mut r = Resolver {
        root,
        memo: HashMap::new(),
        stack: Vec::new(),
        errors: Vec::new(),
    };
    let out = r.deep(root, &mut Vec::new());
    if r.errors.is_empty() {
        Ok(out)
    } else {
        r.errors.dedup();
        Err(r.errors)
    }
}

/// Dotted rendering of a path (`a.b[0].c`).
pub(super) fn show_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if seg.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    if out.is_empty() { "<root>".into() } else { out }
}

struct Resolver<'a> {
    root: &'a Node,
    memo: HashMap<Vec<String>, Result<Node, String>>,
    stack: Vec<Vec<String>>,
    errors: Vec<String>,
}

impl Resolver<'_> {
    /// The resolved copy of `node` (at `path`), recording errors and keeping going.
    fn deep(&mut self, node: &Node, path: &mut Vec<String>) -> Node {
        match node {
            Node::Str(s) if s.contains("${") || s.contains("\\${") => match self.leaf(path) {
                Ok(v) => v,
                Err(e) => {
                    self.errors.push(format!("{}: {e}", show_path(path)));
                    node.clone()
                }
            },
            Node::List(l) => {
                let mut out = Vec::with_capacity(l.len());
                for (i, item) in l.iter().enumerate() {
                    path.push(i.to_string());
                    out.push(self.deep(item, path));
                    path.pop();
                }
                Node::List(out)
            }
            Node::Map(m) => {
                let mut out = Map::with_capacity(m.len());
                for (k, v) in m {
                    path.push(k.clone());
                    out.insert(k.clone(), self.deep(v, path));
                    path.pop();
                }
                Node::Map(out)
            }
            other => other.clone(),
        }
    }

    /// The resolved value of the raw string at `path` (memoised, cycle-checked).
    fn leaf(&mut self, path: &[String]) -> Result<Node, String> {
        if let Some(r) = self.memo.get(path) {
            return r.clone();
        }
        if let Some(i) = self.stack.iter().position(|p| p == path) {
            let mut chain: Vec<String> = self.stack[i..].iter().map(|p| show_path(p)).collect();
            chain.push(show_path(path));
            return Err(format!("interpolation cycle: {}", chain.join(" -> ")));
        }
        let Some(Node::Str(s)) = self.root.get_path(path) else {
            return Err("not a string".into());
        };
        let s = s.clone();
        self.stack.push(path.to_vec());
        let r = self.string(&s, path);
        self.stack.pop();
        self.memo.insert(path.to_vec(), r.clone());
        r
    }

    /// The resolved value of the node at `path` of the raw tree, for a reference.
    fn reference(&mut self, target: &[String], shown: &str) -> Result<Node, String> {
        let Some(node) = self.root.get_path(target) else {
            return Err(format!("interpolation key '{shown}' not found"));
        };
        if node.is_missing() {
            return Err(format!(
                "refers to '{}', which is '???' (a mandatory value that is not set)",
                show_path(target)
            ));
        }
        match node {
            Node::Str(s) if s.contains("${") || s.contains("\\${") => self.leaf(target),
            Node::List(_) | Node::Map(_) => {
                let before = self.errors.len();
                let out = self.deep(&node.clone(), &mut target.to_vec());
                if self.errors.len() > before {
                    let first = self.errors.split_off(before).remove(0);
                    return Err(first);
                }
                Ok(out)
            }
            other => Ok(other.clone()),
        }
    }

    /// Evaluates a string with interpolations at `path` (the node holding it).
    fn string(&mut self, s: &str, path: &[String]) -> Result<Node, String> {
        let pieces = split(s)?;
        if let [Piece::Interp(e)] = pieces.as_slice() {
            return self.expr(e, path);
        }
        let mut out = String::new();
        for p in pieces {
            match p {
                Piece::Text(t) => out.push_str(&t),
                Piece::Interp(e) => out.push_str(&self.expr(&e, path)?.python_str()),
            }
        }
        Ok(Node::Str(out))
    }

    /// One `${...}` body.
    fn expr(&mut self, e: &str, path: &[String]) -> Result<Node, String> {
        let e = e.trim();
        if let Some((name, args)) = resolver_call(e) {
            let args = split_args(args)?
                .into_iter()
                .map(|a| self.arg(&a, path))
                .collect::<Result<Vec<_>, _>>()?;
            return self.call(name, args, path);
        }
        if e.contains("${") {
            // A key built from an interpolation: `${a.${b}}`.
            let key = self.string(e, path)?.python_str();
            return self.key(&key, path);
        }
        self.key(e, path)
    }

    fn key(&mut self, key: &str, path: &[String]) -> Result<Node, String> {
        let target = absolute(key, path)?;
        self.reference(&target, key)
    }

    /// A resolver argument: quoted string, interpolation, container or typed primitive.
    fn arg(&mut self, a: &str, path: &[String]) -> Result<Node, String> {
        let t = a.trim();
        if let Some(q) = t.chars().next().filter(|c| matches!(c, '\'' | '"'))
            && t.len() >= 2
            && t.ends_with(q)
        {
            let body = t[1..t.len() - 1].replace(&format!("\\{q}"), &q.to_string());
            return if body.contains("${") {
                Ok(Node::Str(self.string(&body, path)?.python_str()))
            } else {
                Ok(Node::Str(body))
            };
        }
        if t.contains("${") {
            return self.string(t, path);
        }
        grammar::parse_value(t)
    }

    fn call(&mut self, name: &str, args: Vec<Node>, path: &[String]) -> Result<Node, String> {
        match name {
            "oc.select" => {
                let (key, default) = match args.as_slice() {
                    [k] => (k, None),
                    [k, d] => (k, Some(d.clone())),
                    _ => return Err("oc.select takes a key and an optional default".into()),
                };
                let key = key.python_str();
                let target = absolute(&key, path)?;
                match self.root.get_path(&target) {
                    None => Ok(default.unwrap_or(Node::Null)),
                    Some(n) if n.is_missing() => Ok(default.unwrap_or(Node::Null)),
                    Some(_) => self.reference(&target, &key),
                }
            }
            "oc.env" => {
                let (var, default) = match args.as_slice() {
                    [v] => (v.python_str(), None),
                    [v, d] => (v.python_str(), Some(d.clone())),
                    _ => return Err("oc.env takes a variable and an optional default".into()),
                };
                match std::env::var(&var) {
                    Ok(v) => Ok(Node::Str(v)),
                    Err(_) => match default {
                        Some(Node::Null) => Ok(Node::Null),
                        Some(d) => Ok(Node::Str(d.python_str())),
                        None => Err(format!(
                            "environment variable '{var}' is not set (give a default: ${{oc.env:{var},default}})"
                        )),
                    },
                }
            }
            "oc.decode" => match args.as_slice() {
                [Node::Null] => Ok(Node::Null),
                [Node::Str(s)] => {
                    let v = grammar::parse_value(s)?;
                    match v {
                        Node::Str(inner) if inner.contains("${") => self.string(&inner, path),
                        other => Ok(other),
                    }
                }
                [other] => Err(format!("oc.decode takes a string, got {}", other.kind())),
                _ => Err("oc.decode takes one argument".into()),
            },
            other => Err(format!(
                "unsupported interpolation resolver '{other}' (supported: oc.select, oc.env, oc.decode)"
            )),
        }
    }
}

/// `name:args` when `e` calls a resolver.
fn resolver_call(e: &str) -> Option<(&str, &str)> {
    let (name, args) = e.split_once(':')?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && !name.starts_with('.');
    ok.then_some((name, args))
}

/// The absolute path of a key written at the node `path` (relative keys start with dots).
fn absolute(key: &str, path: &[String]) -> Result<Vec<String>, String> {
    let dots = key.chars().take_while(|c| *c == '.').count();
    let rest = &key[dots..];
    let mut base: Vec<String> = if dots == 0 {
        Vec::new()
    } else {
        // `.x` is a sibling: start from the container holding the node.
        let up = dots;
        if up > path.len() {
            return Err(format!("relative key '{key}' goes above the root"));
        }
        path[..path.len() - up].to_vec()
    };
    for seg in segments(rest) {
        base.push(seg);
    }
    Ok(base)
}

/// `a.b[0].c` -> `a`, `b`, `0`, `c`.
fn segments(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                out.push(rest[..i].to_string());
            }
            rest = &rest[i..];
            while let Some(body) = rest.strip_prefix('[') {
                let Some(j) = body.find(']') else { break };
                out.push(body[..j].to_string());
                rest = &body[j + 1..];
            }
        } else {
            out.push(rest.to_string());
        }
    }
    out
}

enum Piece {
    Text(String),
    Interp(String),
}

/// Splits a string into text and `${...}` bodies (nested braces balanced, `\${` escaped).
fn split(s: &str) -> Result<Vec<Piece>, String> {
    let b: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == '\\' && b.get(i + 1) == Some(&'$') && b.get(i + 2) == Some(&'{') {
            text.push_str("${");
            i += 3;
            continue;
        }
        if b[i] == '$' && b.get(i + 1) == Some(&'{') {
            let mut depth = 0;
            let mut j = i + 1;
            let mut quote: Option<char> = None;
            while j < b.len() {
                let c = b[j];
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None if c == '\'' || c == '"' => quote = Some(c),
                    None if c == '{' => depth += 1,
                    None if c == '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    None => {}
                }
                j += 1;
            }
            if j >= b.len() {
                return Err(format!("unclosed interpolation in '{s}'"));
            }
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            out.push(Piece::Interp(b[i + 2..j].iter().collect()));
            i = j + 1;
            continue;
        }
        text.push(b[i]);
        i += 1;
    }
    if !text.is_empty() || out.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// Splits resolver arguments at top-level commas.
fn split_args(args: &str) -> Result<Vec<String>, String> {
    if args.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for c in args.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            cur.push(c);
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                cur.push(c)
            }
            '{' | '[' => {
                depth += 1;
                cur.push(c)
            }
            '}' | ']' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if quote.is_some() || depth != 0 {
        return Err(format!("unbalanced resolver arguments '{args}'"));
    }
    out.push(cur);
    Ok(out)
}
